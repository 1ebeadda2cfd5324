#include "ir/Builder.h"
#include "ir/OpTable.h"

#include <gtest/gtest.h>

using namespace fg;

/// Every op row carries the mnemonic of ir/Ops.def and can be looked up by it.
TEST(OpTable, MnemonicsRoundTrip) {
  for (const OpInfo &row : allOps()) {
    auto k = lookupOp(row.mnemonic);
    ASSERT_TRUE(k.has_value()) << row.mnemonic;
    EXPECT_EQ(*k, row.kind);
  }
  EXPECT_FALSE(lookupOp("no_such_op").has_value());
}

/// matmul infers [.., N] from x [.., K] and w [N, K] and rejects a K mismatch.
TEST(OpTable, MatmulShapes) {
  Function fn;
  Builder b(fn);
  auto x = b.input("x", {DType::F32, {3, 8}});
  auto w = b.weight("w", {DType::F16, {5, 8}});
  auto y = b.matmul(x, w);
  ASSERT_FALSE(b.failed());
  EXPECT_EQ(b.type(y), TensorType(DType::F32, {3, 5}));
  auto w2 = b.weight("w2", {DType::F16, {5, 7}});
  b.matmul(x, w2, "bad");
  llvm::Error e = b.finish();
  ASSERT_TRUE(bool(e));
  EXPECT_EQ(llvm::toString(std::move(e)),
            "builder: matmul '%bad': 'matmul': input f32[3, 8] has 8 columns but weight "
            "f16[5, 7] expects 7");
}

/// Broadcasting follows numpy: trailing dims align, 1 stretches.
TEST(OpTable, Broadcast) {
  EXPECT_EQ(*broadcastShapes({2, 1, 4}, {3, 1}), Shape({2, 3, 4}));
  EXPECT_FALSE(broadcastShapes({2, 4}, {3}).has_value());
}
