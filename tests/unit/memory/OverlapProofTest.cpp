// The overlap proof: in-place writes may not clobber what the same launch
// reads; planted aliasing is refused with a reason.
#include "MemoryTestUtil.h"

namespace fg {
namespace {

using testing::planOrDie;

TensorType f32(std::initializer_list<int64_t> s) { return {DType::F32, s}; }

/// The ordinary KV write: dest aliases the result by declaration — accepted.
TEST(OverlapProof, SetRowsIntoCacheIsAccepted) {
  Function fn("ok");
  Builder b(fn);
  ValueId pos = b.input("positions", {DType::I32, {2}});
  ValueId src = b.input("src", f32({2, 8}));
  ValueId kc = b.state("k_cache.0", f32({16, 8}));
  b.result(b.setRows(kc, src, pos, "k_cache.0.1"));
  ASSERT_FALSE(b.finish());
  auto [dag, plan] = planOrDie(fn);
  EXPECT_TRUE(proveNoOverlap(fn, plan).empty());
  EXPECT_FALSE(checkNoOverlap(fn, plan));
  EXPECT_TRUE(mayAliasResult(fn, fn.node(0), 0, 0));
  EXPECT_FALSE(mayAliasResult(fn, fn.node(0), 1, 0));
}

/// Planted: the source is a view of the cache being written — refused.
TEST(OverlapProof, SetRowsSourceViewingItsDestIsRefused) {
  Function fn("planted");
  Builder b(fn);
  ValueId pos = b.input("positions", {DType::I32, {2}});
  ValueId kc = b.state("k_cache.0", f32({16, 8}));
  ValueId src = b.view(kc, {2, 8}, {8, 1}, 8, "src"); // rows 1..2
  b.result(b.setRows(kc, src, pos, "k_cache.0.1"));
  ASSERT_FALSE(b.finish());
  auto [dag, plan] = planOrDie(fn);
  std::vector<OverlapViolation> v = proveNoOverlap(fn, plan);
  ASSERT_EQ(v.size(), 1u);
  EXPECT_EQ(v[0].node, 1u);
  EXPECT_EQ(v[0].operand, 1u);
  EXPECT_EQ(v[0].read, src);
  EXPECT_EQ(v[0].reason, "%src (state bytes [32, 96)) overlaps the write of %k_cache.0.1 "
                         "(state bytes [0, 512)) in %k_cache.0");
  // Still refused when only in-place and fused nodes are checked.
  OverlapOptions narrow;
  narrow.allLaunches = false;
  EXPECT_EQ(proveNoOverlap(fn, plan, narrow).size(), 1u);
  llvm::Error err = checkNoOverlap(fn, plan);
  ASSERT_TRUE(static_cast<bool>(err));
  EXPECT_NE(llvm::toString(std::move(err)).find("set_rows: %src"), std::string::npos);
}

/// A view of ANOTHER cache as the source is fine: different buffers.
TEST(OverlapProof, SourceFromAnotherStateIsAccepted) {
  Function fn("other");
  Builder b(fn);
  ValueId pos = b.input("positions", {DType::I32, {2}});
  ValueId kc = b.state("k_cache.0", f32({16, 8}));
  ValueId vc = b.state("v_cache.0", f32({16, 8}));
  ValueId src = b.view(vc, {2, 8}, {8, 1}, 8, "src");
  b.result(b.setRows(kc, src, pos, "k_cache.0.1"));
  ASSERT_FALSE(b.finish());
  auto [dag, plan] = planOrDie(fn);
  EXPECT_TRUE(proveNoOverlap(fn, plan).empty());
}

/// Planted: a value's slice forced onto its operand's — refused by the proof
/// and by verifyNoOverlap; with allLaunches off (only in-place and fused
/// nodes) the plain op is not the proof's business.
TEST(OverlapProof, ForcedOverlapIsRefused) {
  Function fn("forced");
  Builder b(fn);
  ValueId x = b.input("x", f32({1, 1024}));
  ValueId a = b.unary(OpKind::Silu, x, "a");
  ValueId c = b.unary(OpKind::Exp, a, "c");
  b.result(b.unary(OpKind::Tanh, c, "d"));
  ASSERT_FALSE(b.finish());
  auto [dag, plan] = planOrDie(fn);
  ASSERT_TRUE(proveNoOverlap(fn, plan).empty());
  plan.values[c].offset = plan.values[a].offset + 256;
  std::vector<OverlapViolation> v = proveNoOverlap(fn, plan);
  ASSERT_EQ(v.size(), 1u); // c's write against its operand a
  EXPECT_EQ(v[0].written, c);
  EXPECT_EQ(v[0].read, a);
  EXPECT_EQ(v[0].reason,
            "%a (bytes [" + std::to_string(plan.at(a).offset) + ", " +
                std::to_string(plan.at(a).end()) + ")) overlaps the write of %c (bytes [" +
                std::to_string(plan.at(c).offset) + ", " + std::to_string(plan.at(c).end()) + "))");
  OverlapOptions narrow;
  narrow.allLaunches = false;
  EXPECT_TRUE(proveNoOverlap(fn, plan, narrow).empty());
  llvm::Error err = verifyNoOverlap(fn, plan, dag);
  ASSERT_TRUE(static_cast<bool>(err));
  EXPECT_NE(llvm::toString(std::move(err)).find("may be live at once but overlap"),
            std::string::npos);
}

/// fused.matmul_multi writes one result per weight: none may overlap x (the
/// kernel's blocks read x while others write) nor another result. Planted:
/// q's slice forced onto x, then k's (%q.1) onto q — each refused, naming both.
TEST(OverlapProof, MatmulMultiPlantedAliasIsRefused) {
  Function fn("qkv");
  Builder b(fn);
  ValueId x = b.input("x", f32({1, 64}));
  ValueId q = b.create(op::FusedMatmulMultiArgs{.x = x,
                                                .w0 = b.weight("wq", {DType::F16, {48, 64}}),
                                                .w1 = b.weight("wk", {DType::F16, {16, 64}}),
                                                .w2 = b.weight("wv", {DType::F16, {16, 64}})},
                       "q");
  const Node &node = fn.node(fn.value(q).def);
  ASSERT_EQ(node.results.size(), 3u);
  ValueId k = node.results[1], v = node.results[2];
  b.result(q);
  b.result(k);
  b.result(v);
  ASSERT_FALSE(b.finish());
  OverlapOptions narrow; // fused nodes are checked even so
  narrow.allLaunches = false;
  auto [dag, plan] = planOrDie(fn);
  ASSERT_TRUE(proveNoOverlap(fn, plan, narrow).empty());
  EXPECT_FALSE(mayAliasResult(fn, node, 0, 0));

  BufferPlan onX = plan;
  onX.values[q].offset = onX.values[x].offset;
  std::vector<OverlapViolation> v1 = proveNoOverlap(fn, onX, narrow);
  ASSERT_FALSE(v1.empty());
  EXPECT_EQ(v1[0].written, q);
  EXPECT_EQ(v1[0].read, x);
  EXPECT_EQ(v1[0].operand, 0u);
  llvm::Error err = checkNoOverlap(fn, onX, narrow);
  ASSERT_TRUE(static_cast<bool>(err));
  EXPECT_NE(llvm::toString(std::move(err)).find("fused.matmul_multi: %x"), std::string::npos);

  BufferPlan kOnQ = plan;
  kOnQ.values[k].offset = kOnQ.values[q].offset + 16;
  std::vector<OverlapViolation> v2 = proveNoOverlap(fn, kOnQ, narrow);
  ASSERT_EQ(v2.size(), 1u);
  EXPECT_EQ(v2[0].written, q);
  EXPECT_EQ(v2[0].read, k);
  EXPECT_NE(v2[0].reason.find("%q.1 (bytes"), std::string::npos); // k, named after q
  EXPECT_NE(v2[0].reason.find("overlaps the write of %q"), std::string::npos);
}

/// fused.rms_norm_mul_matmul stores the normalised row (result 0) a slice a
/// block while other blocks still read x and write y: the row may overlap
/// neither. Planted: the row forced onto x, then onto y — each refused.
TEST(OverlapProof, StoredNormRowPlantedAliasIsRefused) {
  Function fn("router");
  Builder b(fn);
  ValueId x = b.input("h", f32({1, 64}));
  ValueId n = b.create(op::FusedRmsNormMulMatmulArgs{.x = x,
                                                     .normW = b.weight("g", f32({64})),
                                                     .w = b.weight("wr", {DType::F32, {16, 64}}),
                                                     .eps = 1e-6},
                       "n");
  const Node &node = fn.node(fn.value(n).def);
  ASSERT_EQ(node.results.size(), 2u);
  ValueId y = node.results[1];
  b.result(n);
  b.result(y);
  ASSERT_FALSE(b.finish());
  OverlapOptions narrow;
  narrow.allLaunches = false;
  auto [dag, plan] = planOrDie(fn);
  ASSERT_TRUE(proveNoOverlap(fn, plan, narrow).empty());
  EXPECT_FALSE(mayAliasResult(fn, node, 0, 0));

  BufferPlan onX = plan;
  onX.values[n].offset = onX.values[x].offset;
  std::vector<OverlapViolation> v1 = proveNoOverlap(fn, onX, narrow);
  ASSERT_FALSE(v1.empty());
  EXPECT_EQ(v1[0].written, n);
  EXPECT_EQ(v1[0].read, x);

  BufferPlan onY = plan;
  onY.values[n].offset = onY.values[y].offset;
  std::vector<OverlapViolation> v2 = proveNoOverlap(fn, onY, narrow);
  ASSERT_FALSE(v2.empty());
  llvm::Error err = checkNoOverlap(fn, onY, narrow);
  ASSERT_TRUE(static_cast<bool>(err));
  EXPECT_NE(llvm::toString(std::move(err)).find("fused.rms_norm_mul_matmul"), std::string::npos);
}

/// The rows set_rows writes are chosen at run time, so a source viewing any
/// row of its own destination is refused, even one the indices may not hit.
TEST(OverlapProof, DisjointRowsOfTheSameCacheStillRefused) {
  Function fn("rows");
  Builder b(fn);
  ValueId pos = b.input("positions", {DType::I32, {1}});
  ValueId kc = b.state("k_cache.0", f32({16, 8}));
  ValueId src = b.view(kc, {1, 8}, {8, 1}, 15 * 8, "last_row");
  b.result(b.setRows(kc, src, pos, "k_cache.0.1"));
  ASSERT_FALSE(b.finish());
  auto [dag, plan] = planOrDie(fn);
  std::vector<OverlapViolation> v = proveNoOverlap(fn, plan);
  ASSERT_EQ(v.size(), 1u);
  EXPECT_NE(v[0].reason.find("%last_row (state bytes [480, 512))"), std::string::npos);
}

} // namespace
} // namespace fg
