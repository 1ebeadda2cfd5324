//===- GgufFileTest.cpp - GGUF files written by the gguf Python package ---===//
//
// quants.gguf (gen_models.py) holds metadata of every value type, random
// blocks of every block type and values the gguf package quantised (q4_0,
// q4_1, q5_0, q5_1, q8_0: the types it has a quantiser for), each beside the
// gguf package's own dequantisation (`<name>.ref`, f32): our decoder must
// agree with it bit for bit.
//
//===----------------------------------------------------------------------===//
#include "ModelFiles.h"

#include "frontends/gguf/GgufFile.h"
#include "ir/Numeric.h"

#include <gtest/gtest.h>

#include <cstring>

namespace fg {
namespace {

std::unique_ptr<GgufFile> openQuants() {
  std::string why, dir = test::generatedModels(why);
  if (dir.empty())
    return nullptr;
  auto f = GgufFile::open(dir + "/quants.gguf");
  if (!f) {
    ADD_FAILURE() << llvm::toString(f.takeError());
    return nullptr;
  }
  return std::move(*f);
}

#define SKIP_WITHOUT_FILES(f)                                                                      \
  if (!f) {                                                                                        \
    std::string why;                                                                               \
    test::generatedModels(why);                                                                    \
    if (!why.empty())                                                                              \
      GTEST_SKIP() << "model files not generated: " << why;                                        \
    return;                                                                                        \
  }

TEST(GgufFile, MetadataOfEveryType) {
  auto f = openQuants();
  SKIP_WITHOUT_FILES(f);
  EXPECT_EQ(f->version(), 3u);
  EXPECT_EQ(f->alignment(), 64u);
  auto i = [&](const char *k) { return f->meta(k)->asInt().value_or(-1); };
  EXPECT_EQ(i("test.u8"), 200);
  EXPECT_EQ(i("test.i8"), -100);
  EXPECT_EQ(i("test.u16"), 60000);
  EXPECT_EQ(i("test.i16"), -30000);
  EXPECT_EQ(i("test.u32"), 4000000000);
  EXPECT_EQ(i("test.i32"), -2000000000);
  EXPECT_EQ(i("test.i64"), -(int64_t(1) << 40));
  EXPECT_EQ(f->meta("test.u64")->u, (uint64_t(1) << 63) + 5);
  EXPECT_FALSE(f->meta("test.u64")->asInt()) << "does not fit an i64";
  EXPECT_EQ(f->meta("test.f32")->f, 0.25);
  EXPECT_EQ(f->meta("test.f64")->f, -1.5e-300);
  EXPECT_EQ(f->meta("test.bool")->type, GgufType::Bool);
  EXPECT_EQ(i("test.bool"), 1);
  EXPECT_EQ(f->meta("test.string")->s, "h\xc3\xa9llo");
  const GgufValue *ints = f->meta("test.ints");
  ASSERT_EQ(ints->elems.size(), 3u);
  EXPECT_EQ(ints->elems[1].asInt(), -2);
  const GgufValue *strs = f->meta("test.strings");
  ASSERT_EQ(strs->elemType, GgufType::String);
  ASSERT_EQ(strs->elems.size(), 3u);
  EXPECT_EQ(strs->elems[0].s, "a");
  EXPECT_EQ(strs->elems[1].s, "");
  EXPECT_EQ(strs->elems[2].s, "ccc");
  EXPECT_EQ(f->meta("test.floats")->elems[1].asFloat(), -2.0);
  auto missing = f->getInt("test.nope");
  ASSERT_FALSE(bool(missing));
  EXPECT_NE(llvm::toString(missing.takeError()).find("missing metadata key 'test.nope'"),
            std::string::npos);
  auto wrong = f->getInt("test.string");
  ASSERT_FALSE(bool(wrong));
  EXPECT_NE(llvm::toString(wrong.takeError()).find("is a string, expected an integer"),
            std::string::npos);
}

/// Each block type decodes exactly as the gguf package's reference does.
TEST(GgufFile, BlockTypesMatchTheGgufPackage) {
  auto f = openQuants();
  SKIP_WITHOUT_FILES(f);
  struct Case {
    const char *name;
    DType dtype;
  } cases[] = {{"q8_0", DType::Q8_0},     {"q4_0", DType::Q4_0},
               {"q4_1", DType::Q4_1},     {"q5_0", DType::Q5_0},
               {"q5_1", DType::Q5_1},     {"q2_k", DType::Q2_K},
               {"q3_k", DType::Q3_K},     {"q4_k", DType::Q4_K},
               {"q5_k", DType::Q5_K},     {"q6_k", DType::Q6_K},
               {"iq4_nl", DType::IQ4_NL}, {"iq4_xs", DType::IQ4_XS},
               {"f16", DType::F16},
               // values the gguf package quantised itself
               {"q4_0.quantised", DType::Q4_0}, {"q4_1.quantised", DType::Q4_1},
               {"q5_0.quantised", DType::Q5_0}, {"q5_1.quantised", DType::Q5_1},
               {"q8_0.quantised", DType::Q8_0}};
  for (unsigned i = 0; i < kNumDTypes; ++i) {
    bool covered = false;
    for (const Case &c : cases)
      covered |= c.dtype == static_cast<DType>(i);
    EXPECT_TRUE(covered || !isQuantized(static_cast<DType>(i)))
        << dtypeName(static_cast<DType>(i)) << " is not compared with the gguf package";
  }
  for (const Case &c : cases) {
    const GgufTensorInfo *q = f->tensor(c.name);
    const GgufTensorInfo *ref = f->tensor(std::string(c.name) + ".ref");
    ASSERT_NE(q, nullptr) << c.name;
    ASSERT_NE(ref, nullptr) << c.name;
    EXPECT_EQ(q->dtype, c.dtype) << c.name;
    EXPECT_EQ(q->shape, ref->shape) << c.name;
    EXPECT_EQ(q->offset % 64, 0u) << c.name << " respects general.alignment";
    int64_t n = ref->shape[0] * ref->shape[1];
    std::vector<float> got(static_cast<size_t>(n)), want(static_cast<size_t>(n));
    decodeRow(q->dtype, f->data(*q).data(), got.data(), n);
    std::memcpy(want.data(), f->data(*ref).data(), static_cast<size_t>(n) * 4);
    int bad = 0;
    for (int64_t i = 0; i < n; ++i)
      if (got[i] != want[i] && ++bad <= 3)
        ADD_FAILURE() << c.name << "[" << i << "] = " << got[i] << ", gguf says " << want[i];
    EXPECT_EQ(bad, 0) << c.name;
  }
}

} // namespace
} // namespace fg
