//===- InitFormulaTest.cpp - the one weight-initialiser definition --------===//
//
// ir/InitFormula.h is what the CPU reference materialises and what the
// device's init module runs (its text is embedded there). These tests pin
// its values for integer weights (the issue-9 repro: a uniform i32 weight
// of positions) against an independent implementation, and its rounding
// rule (f64 -> f32 -> round half away from zero).
//
//===----------------------------------------------------------------------===//
#include "RefTestUtil.h"

#include "ir/InitFormula.h"

using namespace fg;

namespace {

/// The repro's %pos: uniform(seed = 862905314, min = 0, max = 511) as i32.
/// Literals from an independent (Python) splitmix64; the f64 values are
/// 166.648, 447.091, 384.347, 91.198.
TEST(InitFormula, UniformI32WeightOfTheRepro) {
  WeightInit pos = WeightInit::uniform(862905314, 0.0, 511.0);
  HostTensor t;
  ASSERT_FALSE(static_cast<bool>(materializeInit(pos, {DType::I32, {4}}, t)));
  EXPECT_EQ(t.type.dtype, DType::I32);
  EXPECT_EQ(t.toInts(), (std::vector<int64_t>{167, 447, 384, 91}));
  EXPECT_DOUBLE_EQ(initValue(pos, 0), 166.6479684041915);
  // The shared definition itself, as the device module calls it.
  InitFormulaArgs f = initFormulaArgs(pos);
  EXPECT_EQ(f.kind, fg_init::Uniform);
  EXPECT_EQ(fg_init::toInteger(fg_init::toF32(fg_init::value(f.kind, f.seed, f.a, f.b, 1))), 447);
}

/// Negative values and i64 weights follow the same rule.
TEST(InitFormula, SignedAndWideIntegerWeights) {
  HostTensor t;
  WeightInit u = WeightInit::uniform(5, -100.0, 100.0);
  ASSERT_FALSE(static_cast<bool>(materializeInit(u, {DType::I32, {8}}, t)));
  EXPECT_EQ(t.toInts(), (std::vector<int64_t>{-23, 12, -53, 69, -70, 27, -4, 78}));
  ASSERT_FALSE(static_cast<bool>(materializeInit(u, {DType::I64, {8}}, t)));
  EXPECT_EQ(t.type.dtype, DType::I64);
  EXPECT_EQ(t.toInts(), (std::vector<int64_t>{-23, 12, -53, 69, -70, 27, -4, 78}));
}

/// Halves round away from zero (llroundf), not to even.
TEST(InitFormula, IntegerRoundingIsHalfAwayFromZero) {
  HostTensor t;
  ASSERT_FALSE(static_cast<bool>(materializeInit(WeightInit::constant(2.5), {DType::I32, {2}}, t)));
  EXPECT_EQ(t.toInts(), (std::vector<int64_t>{3, 3}));
  ASSERT_FALSE(
      static_cast<bool>(materializeInit(WeightInit::constant(-2.5), {DType::I32, {1}}, t)));
  EXPECT_EQ(t.toInts(), (std::vector<int64_t>{-3}));
  EXPECT_EQ(fg_init::toInteger(0.49999997f), 0);
  EXPECT_EQ(fg_init::toInteger(-0.5f), -1);
}

/// Every kind maps to the formula's arguments; tensor and none do not.
TEST(InitFormula, ArgumentsOfEachKind) {
  InitFormulaArgs n = initFormulaArgs(WeightInit::normal(7, 0.5, 2.0));
  EXPECT_EQ(n.kind, fg_init::Normal);
  EXPECT_EQ(n.seed, 7u);
  EXPECT_EQ(n.a, 2.0);
  EXPECT_EQ(n.b, 0.5);
  InitFormulaArgs c = initFormulaArgs(WeightInit::constant(0.25));
  EXPECT_EQ(c.kind, fg_init::Constant);
  EXPECT_EQ(fg_init::value(c.kind, c.seed, c.a, c.b, 12345), 0.25);
  EXPECT_EQ(initFormulaArgs(WeightInit::tensor("m.gguf", "t")).kind, fg_init::None);
  EXPECT_EQ(initFormulaArgs(WeightInit{}).kind, fg_init::None);
}

} // namespace
