//===- QuantizeTest.cpp - the test quantiser of every block type ----------===//
//
// quantizeRow (ir/Quantize.h) must give valid blocks that decode close to
// the input: each type's normalised error on normal values is bounded by what
// round-to-nearest achieves at its bits per weight (measured, with headroom),
// values a block can represent exactly come back exactly, and a weight
// initialised quantised in the reference is the quantisation of the f32 one.
//
//===----------------------------------------------------------------------===//
#include "RefTestUtil.h"

#include "ir/Numeric.h"
#include "ir/Quantize.h"
#include "runtime/reference/Interpreter.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <limits>
#include <random>
#include <vector>

using namespace fg;
using fg::test::normals;

namespace {

std::vector<float> roundTrip(DType t, const std::vector<float> &x) {
  int64_t n = static_cast<int64_t>(x.size());
  std::vector<uint8_t> q(static_cast<size_t>(storageBytes(t, n)), 0xCD);
  EXPECT_TRUE(quantizeRow(t, x.data(), q.data(), n)) << dtypeName(t);
  std::vector<float> y(x.size());
  decodeRow(t, q.data(), y.data(), n);
  return y;
}

double normalisedError(const std::vector<float> &x, const std::vector<float> &y) {
  double num = 0, den = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    num += (double(y[i]) - x[i]) * (double(y[i]) - x[i]);
    den += double(x[i]) * x[i];
  }
  return std::sqrt(num / den);
}

struct Bound {
  DType t;
  double maxError; ///< ‖y − x‖ / ‖x‖ on normal values
  double minError; ///< a lower bound too, so a lossless "quantiser" cannot pass
};

// Measured on 64 Ki normal values (seed 1; the test prints them): q8_0 0.0054,
// q6_k 0.0188, q5_0 0.0427, q5_1 0.0378, q5_k 0.0381, q4_0 0.0859, q4_1 0.0780,
// q4_k 0.0782, iq4_nl 0.0774, iq4_xs 0.0777, q3_k 0.1548, q2_k 0.3296. The
// upper bounds are about 1.25 times that, the lower ones half.
const Bound kBounds[] = {
    {DType::Q8_0, 0.007, 0.0027}, {DType::Q6_K, 0.024, 0.009},  {DType::Q5_0, 0.054, 0.021},
    {DType::Q5_1, 0.048, 0.019},  {DType::Q5_K, 0.048, 0.019},  {DType::Q4_0, 0.108, 0.043},
    {DType::Q4_1, 0.098, 0.039},  {DType::Q4_K, 0.098, 0.039},  {DType::IQ4_NL, 0.097, 0.039},
    {DType::IQ4_XS, 0.097, 0.039}, {DType::Q3_K, 0.194, 0.077}, {DType::Q2_K, 0.41, 0.165},
};

TEST(Quantize, EveryBlockTypeDecodesCloseToItsInput) {
  std::vector<float> x = normals(65536, 1, 0.02f);
  for (const Bound &b : kBounds) {
    double err = normalisedError(x, roundTrip(b.t, x));
    std::printf("[ quant error ] %-6s %.4f\n", std::string(dtypeName(b.t)).c_str(), err);
    EXPECT_LT(err, b.maxError) << dtypeName(b.t);
    EXPECT_GT(err, b.minError) << dtypeName(b.t);
  }
}

TEST(Quantize, CoversEveryBlockTypeOfTheTable) {
  int blockTypes = 0;
  for (unsigned i = 0; i < kNumDTypes; ++i) {
    DType t = static_cast<DType>(i);
    if (!isQuantized(t))
      continue;
    ++blockTypes;
    bool bounded = false;
    for (const Bound &b : kBounds)
      bounded |= b.t == t;
    EXPECT_TRUE(bounded) << dtypeName(t) << " has no error bound in this test";
  }
  EXPECT_EQ(blockTypes, 12);
}

TEST(Quantize, RefusesScalarTypesAndPartialBlocks) {
  std::vector<float> x(256, 1.0f);
  std::vector<uint8_t> q(1024);
  EXPECT_FALSE(quantizeRow(DType::F16, x.data(), q.data(), 256));
  EXPECT_FALSE(quantizeRow(DType::Q8_0, x.data(), q.data(), 48));
  EXPECT_FALSE(quantizeRow(DType::Q4_K, x.data(), q.data(), 128));
  EXPECT_TRUE(quantizeRow(DType::Q4_K, x.data(), q.data(), 256));
}

TEST(Quantize, ZerosAndNonFiniteInputsGiveZeros) {
  std::vector<float> x(256, 0.0f);
  x[3] = std::numeric_limits<float>::quiet_NaN();
  x[100] = std::numeric_limits<float>::infinity();
  for (const Bound &b : kBounds) {
    std::vector<float> y = roundTrip(b.t, x);
    for (size_t i = 0; i < y.size(); ++i)
      ASSERT_EQ(y[i], 0.0f) << dtypeName(b.t) << "[" << i << "]";
  }
}

/// Values past f16's range saturate the scales instead of decoding to inf or
/// nan (inf · 0): every decoded value is finite.
TEST(Quantize, HugeValuesSaturate) {
  std::vector<float> x = normals(256, 9, 1e6f);
  for (const Bound &b : kBounds) {
    std::vector<float> y = roundTrip(b.t, x);
    for (size_t i = 0; i < y.size(); ++i)
      ASSERT_TRUE(std::isfinite(y[i])) << dtypeName(b.t) << "[" << i << "] = " << y[i];
  }
}

/// Values on a block's own grid come back exactly: integers −8..7 for q4_0
/// (d = 1 from the extreme −8), 0..31 plus an offset for q5_1, −127..127 for q8_0.
TEST(Quantize, RepresentableValuesComeBackExactly) {
  std::vector<float> x4(32), x5(32), x8(32);
  for (int j = 0; j < 32; ++j) {
    x4[j] = static_cast<float>(j % 16 - 8);
    x5[j] = static_cast<float>(j) * 0.5f - 3.0f;
    x8[j] = static_cast<float>(j * 8 - 127);
  }
  EXPECT_EQ(roundTrip(DType::Q4_0, x4), x4);
  EXPECT_EQ(roundTrip(DType::Q5_1, x5), x5);
  EXPECT_EQ(roundTrip(DType::Q8_0, x8), x8);
  std::vector<float> nl(32);
  for (int j = 0; j < 32; ++j)
    nl[j] = 0.5f * kIQ4Values[j % 16];
  EXPECT_EQ(roundTrip(DType::IQ4_NL, nl), nl);
}

/// The extreme of each block survives with the block's own sign (a scale of
/// the wrong sign would flip it).
TEST(Quantize, KeepsTheSignOfTheExtreme) {
  for (const Bound &b : kBounds) {
    std::vector<float> x = normals(256, 5, 0.02f);
    x[17] = -0.2f;
    x[200] = 0.15f;
    std::vector<float> y = roundTrip(b.t, x);
    EXPECT_LT(y[17], -0.1f) << dtypeName(b.t);
    EXPECT_GT(y[200], 0.07f) << dtypeName(b.t);
  }
}

/// A quantised weight with an initialiser is the quantisation of the f32
/// values of the same formula: what the reference and the GPU (which
/// quantises on the host at load) both bind.
TEST(Quantize, InitialisedWeightIsTheQuantisedFormula) {
  WeightInit init = WeightInit::normal(7, 0.02);
  HostTensor f, q;
  ASSERT_FALSE(bool(materializeInit(init, TensorType{DType::F32, {4, 256}}, f)));
  for (DType t : {DType::Q4_K, DType::Q8_0, DType::IQ4_XS, DType::Q5_0}) {
    ASSERT_FALSE(bool(materializeInit(init, TensorType{t, {4, 256}}, q))) << dtypeName(t);
    ASSERT_EQ(static_cast<int64_t>(q.data.size()), storageBytes(t, 1024)) << dtypeName(t);
    std::vector<uint8_t> want(q.data.size());
    ASSERT_TRUE(quantizeRow(t, f.toFloats().data(), want.data(), 1024));
    EXPECT_EQ(q.data, want) << dtypeName(t);
  }
  llvm::Error e = materializeInit(init, TensorType{DType::Q4_K, {2, 32}}, q);
  ASSERT_TRUE(bool(e));
  std::string msg = llvm::toString(std::move(e));
  EXPECT_NE(msg.find("rows must be whole blocks of 256"), std::string::npos) << msg;
}

} // namespace
