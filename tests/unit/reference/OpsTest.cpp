//===- OpsTest.cpp - every op of the reference against hand-computed values ===//
//
// Expected values are literals worked out by hand or with an independent
// straightforward formula (the rope and attention literals come from a
// separate scalar implementation of the brief's formulas, in Python).
//
//===----------------------------------------------------------------------===//
#include "RefTestUtil.h"

#include <cmath>
#include <limits>

using namespace fg;
using namespace fg::test;

namespace {

const float kInf = std::numeric_limits<float>::infinity();

// --- elementwise ----------------------------------------------------------------

TEST(RefOps, BinaryBroadcasting) {
  std::vector<float> a = {1, 2, 3, 4, 5, 6};
  {
    OneOp t;
    t.b.add(t.in(f32({2, 3}, a)), t.in(f32({3}, {10, 20, 30})));
    expectNear(t.eval(), {11, 22, 33, 14, 25, 36});
  }
  {
    OneOp t;
    t.b.sub(t.in(f32({2, 3}, a)), t.in(f32({2, 1}, {1, 2})));
    expectNear(t.eval(), {0, 1, 2, 2, 3, 4});
  }
  {
    OneOp t;
    t.b.mul(t.in(f32({2, 3}, a)), t.in(f32({3}, {10, 20, 30})));
    expectNear(t.eval(), {10, 40, 90, 40, 100, 180});
  }
  {
    OneOp t;
    t.b.div(t.in(f32({2, 3}, a)), t.in(f32({2, 1}, {2, 4})));
    expectNear(t.eval(), {0.5, 1, 1.5, 1, 1.25, 1.5});
  }
  {
    OneOp t; // both operands stretch
    t.b.add(t.in(f32({2, 1}, {1, 2})), t.in(f32({1, 3}, {10, 20, 30})));
    HostTensor r = t.eval();
    EXPECT_EQ(r.type, TensorType(DType::F32, {2, 3}));
    expectNear(r, {11, 21, 31, 12, 22, 32});
  }
}

TEST(RefOps, BinaryKeepsF16AndRoundsItsResult) {
  OneOp t;
  t.b.add(t.in(f16({2}, {1, 2})), t.in(f16({2}, {std::ldexp(1.0f, -11), 0.5f})));
  HostTensor r = t.eval();
  EXPECT_EQ(r.type.dtype, DType::F16);
  // 1 + 2^-11 is a tie in f16 and rounds to even (1.0).
  EXPECT_EQ(r.toFloats(), (std::vector<float>{1.0f, 2.5f}));
}

TEST(RefOps, IntegerArithmetic) {
  OneOp t;
  t.b.div(t.in(i32({2}, {7, -7})), t.in(i32({2}, {2, 2})));
  HostTensor r = t.eval();
  EXPECT_EQ(r.toInts(), (std::vector<int64_t>{3, -3}));
  OneOp z;
  z.b.div(z.in(i32({1}, {1})), z.in(i32({1}, {0})));
  EXPECT_NE(z.error().find("division by zero"), std::string::npos);
}

TEST(RefOps, AddId) {
  OneOp t;
  t.b.addId(t.in(f32({2, 2, 2}, {1, 2, 3, 4, 5, 6, 7, 8})),
            t.in(f32({3, 2}, {10, 20, 30, 40, 50, 60})), t.in(i32({2, 2}, {2, 0, 1, 1})));
  expectNear(t.eval(), {51, 62, 13, 24, 35, 46, 37, 48});
}

TEST(RefOps, ScaleAndClamp) {
  OneOp s;
  s.b.scale(s.in(f32({2}, {1, -2})), 3.0, 0.5);
  expectNear(s.eval(), {3.5, -5.5});
  OneOp c;
  c.b.clamp(c.in(f32({3}, {-3, 0.5, 9})), -1, 2);
  expectNear(c.eval(), {-1, 0.5, 2});
}

std::vector<float> unaryOf(OpKind k, std::vector<float> x) {
  OneOp t;
  t.b.unary(k, t.in(f32({static_cast<int64_t>(x.size())}, x)));
  return t.eval().toFloats();
}

TEST(RefOps, Unary) {
  std::vector<float> xs = {-1, 0, 0.5, 2, 25};
  expectNear(unaryOf(OpKind::Sqrt, {0.25, 4, 2}), {0.5, 2, 1.41421356f});
  expectNear(unaryOf(OpKind::Sqr, {-3, 0.5}), {9, 0.25});
  expectNear(unaryOf(OpKind::Relu, {-1, 0, 2}), {0, 0, 2});
  expectNear(unaryOf(OpKind::Exp, xs), {0.367879441f, 1, 1.64872127f, 7.3890561f, 7.20048993e+10f});
  expectNear(unaryOf(OpKind::Tanh, xs), {-0.761594156f, 0, 0.462117157f, 0.96402758f, 1});
  expectNear(unaryOf(OpKind::Sigmoid, xs), {0.268941421f, 0.5f, 0.622459331f, 0.880797078f, 1});
  expectNear(unaryOf(OpKind::Silu, xs), {-0.268941421f, 0, 0.311229666f, 1.76159416f, 25});
  // gelu is the tanh approximation
  expectNear(unaryOf(OpKind::Gelu, xs), {-0.158808009f, 0, 0.34571401f, 1.95459769f, 25});
  // softplus = x above 20, like ggml
  expectNear(unaryOf(OpKind::Softplus, xs),
             {0.313261688f, 0.693147181f, 0.974076984f, 2.12692801f, 25});
}

std::vector<float> gluOf(GluKind k) {
  OneOp t;
  t.b.glu(t.in(f32({4}, {-2, 0.5, 3, 10})), t.in(f32({4}, {1, -2, 8, -9})), k, 1.702, 7.0);
  return t.eval().toFloats();
}

TEST(RefOps, GluVariants) {
  expectNear(gluOf(GluKind::SwiGLU), {-0.238405844f, -0.622459331f, 22.861779f, -89.9959142f});
  expectNear(gluOf(GluKind::GeGLU), {-0.0454023059f, -0.69142802f, 23.9709009f, -90});
  // g' = min(g, 7), u' = clamp(u, -7, 7), y = g'·σ(1.702 g')·(u' + 1)
  expectNear(gluOf(GluKind::SwiGLUOAI), {-0.128682754f, -0.350388437f, 23.8554295f, -41.9997188f});
  // y = silu(g')·u'
  expectNear(gluOf(GluKind::SwiGLUClamp),
             {-0.238405844f, -0.622459331f, 20.0040567f, -48.9553585f});
}

// --- norms ------------------------------------------------------------------------

TEST(RefOps, RmsNorm) {
  OneOp t;
  t.b.rmsNorm(t.in(f32({2, 4}, {1, 2, 3, 4, -2, 0, 0, 2})), 0.0);
  // row 0: mean square 7.5; row 1: mean square 2
  expectNear(t.eval(), {0.365148372f, 0.730296743f, 1.09544512f, 1.46059349f, -1.41421356f, 0, 0,
                        1.41421356f});
  OneOp e;
  e.b.rmsNorm(e.in(f32({1, 4}, {-2, 0, 0, 2})), 1.0); // 1/sqrt(2 + 1)
  expectNear(e.eval(), {-1.15470054f, 0, 0, 1.15470054f});
}

TEST(RefOps, LayerNorm) {
  OneOp t;
  t.b.layerNorm(t.in(f32({1, 4}, {1, 2, 3, 4})), 0.0); // mean 2.5, variance 1.25
  expectNear(t.eval(), {-1.34164079f, -0.447213595f, 0.447213595f, 1.34164079f});
  OneOp e;
  e.b.layerNorm(e.in(f32({1, 2}, {0, 2})), 3.0); // (x - 1)/sqrt(1 + 3)
  expectNear(e.eval(), {-0.5, 0.5});
}

// --- rope -------------------------------------------------------------------------

/// x[t, h, c] = 0.1·(i+1)·(−1)^i over the flat index i; T = 2, H = 2, D = 6; positions {3, 7}.
std::vector<float> ropeInput() {
  std::vector<float> x(24);
  for (int i = 0; i < 24; ++i)
    x[i] = static_cast<float>(0.1 * (i + 1) * (i % 2 ? -1 : 1));
  return x;
}

std::vector<float> ropeOf(const Builder::RopeParams &p, std::vector<float> ff = {}) {
  OneOp t;
  ValueId x = t.in(f32({2, 2, 6}, ropeInput()));
  ValueId pos = t.in(i32({2}, {3, 7}));
  std::optional<ValueId> f;
  if (!ff.empty())
    f = t.in(f32({static_cast<int64_t>(ff.size())}, ff));
  t.b.rope(x, pos, p, f);
  return t.eval().toFloats();
}

TEST(RefOps, RopeNormal) {
  Builder::RopeParams p;
  p.nDims = 6;
  expectNear(ropeOf(p),
             {-0.070775248f, 0.2121105f,    0.35261545f, -0.354488849f, 0.503867512f, -0.596755838f,
              -0.580098741f, 0.890778003f,  1.03008673f, -0.865402408f, 1.10773294f,  -1.19286535f,
              1.89985417f,   -0.201380578f, 1.93227805f, -1.03744954f,  1.72695153f,  -1.77415851f,
              2.74638748f,   -0.259529971f, 2.69242028f, -1.41452219f,  2.33593158f,  -2.365042f});
}

TEST(RefOps, RopeNeoxPartialRotary) {
  Builder::RopeParams p;
  p.mode = RopeMode::Neox;
  p.nDims = 4; // channels 4 and 5 pass through
  p.theta = 100;
  expectNear(ropeOf(p),
             {-0.141335252f,   -0.0728592152f, -0.282885748f, -0.441238637f, 0.5f, -0.6f,
              -0.820002755f,   -0.468748985f,  -0.792209241f, -1.19175265f,  1.1f, -1.2f,
              -0.00540696743f, -0.0400307626f, 1.98493596f,   -2.12565226f,  1.7f, -1.8f,
              0.0527424259f,   -0.112405463f,  2.83146927f,   -2.97108819f,  2.3f, -2.4f});
}

TEST(RefOps, RopeFreqFactors) {
  Builder::RopeParams p;
  p.nDims = 4;
  // pair 0 divides by 1 (unchanged from plain rope), pair 1 by 2.5
  expectNear(ropeOf(p, {1.0f, 2.5f}),
             {-0.070775248f, 0.2121105f,    0.304778285f, -0.396371287f, 0.5f, -0.6f,
              -0.580098741f, 0.890778003f,  0.911934913f, -0.98912826f,  1.1f, -1.2f,
              1.89985417f,   -0.201380578f, 1.54420618f,  -1.55737833f,  1.7f, -1.8f,
              2.74638748f,   -0.259529971f, 2.16076881f,  -2.14034534f,  2.3f, -2.4f});
}

TEST(RefOps, RopeYarnNeox) {
  // corr dims for n_dims 6, n_ctx_orig 4096, theta 1e4, beta 32/1: low 0, high 3
  // (ramps 1, 2/3, 1/3); ext 0.5; mscale = 0.9·(1 + 0.1·ln 4).
  Builder::RopeParams p;
  p.mode = RopeMode::Neox;
  p.nDims = 6;
  p.freqScale = 0.25;
  p.extFactor = 0.5;
  p.attnFactor = 0.9;
  p.nCtxOrig = 4096;
  expectNear(ropeOf(p), {0.360390866f,  -0.240102017f, 0.308919303f,  0.220552274f, 0.496883756f,
                         -0.61411296f,  0.76284881f,   -0.896246579f, 0.925267651f, 0.991352498f,
                         1.06747967f,   -1.22748079f,  -1.98817738f,  -1.69755404f, 1.54755692f,
                         -0.714333772f, 1.48711806f,   -1.83585705f,  -2.77190646f, -2.40376678f,
                         2.16588424f,   -1.09099558f,  1.9944335f,    -2.44722986f});
}

TEST(RefOps, RopeYarnNormal) {
  Builder::RopeParams p;
  p.nDims = 6;
  p.theta = 500000;
  p.freqScale = 0.25;
  p.extFactor = 1.0;
  p.nCtxOrig = 4096;
  expectNear(ropeOf(p), {-0.0805867808f, 0.241515259f,  0.352251893f, -0.447255913f, 0.56939605f,
                         -0.683109877f,  -0.660517503f, 1.01426606f,  1.05137649f,   -1.11410539f,
                         1.25265504f,    -1.3662062f,   2.16322988f,  -0.229297854f, 1.80572009f,
                         -1.72494327f,   1.93623932f,   -2.04899519f, 3.12711763f,   -0.295508465f,
                         2.52549888f,    -2.36944457f,  2.61960674f,  -2.73198304f});
}

// --- softmax ----------------------------------------------------------------------

TEST(RefOps, Softmax) {
  OneOp t;
  t.b.softmax(t.in(f32({1, 3}, {1, 2, 3})));
  expectNear(t.eval(), {0.0900305732f, 0.244728471f, 0.665240956f});
  OneOp s;
  s.b.softmax(s.in(f32({1, 3}, {1, 2, 3})), std::nullopt, 0.5);
  expectNear(s.eval(), {0.186323720f, 0.307195890f, 0.506480390f});
}

TEST(RefOps, SoftmaxMaskBroadcastsOverRows) {
  OneOp t;
  t.b.softmax(t.in(f32({2, 3}, {1, 2, 3, 3, 2, 1})), t.in(f32({3}, {0, -kInf, 0})));
  expectNear(t.eval(), {0.119202922f, 0, 0.880797078f, 0.880797078f, 0, 0.119202922f});
  OneOp all; // every logit masked: zeros, not NaN
  all.b.softmax(all.in(f32({1, 2}, {1, 2})), all.in(f32({1, 2}, {-kInf, -kInf})));
  expectNear(all.eval(), {0, 0});
}

TEST(RefOps, SoftmaxAlibi) {
  // 3 heads, max_bias 8: n2 = 2, m0 = 2^-4, m1 = 2^-2; slopes 1/16, 1/256, 1/4.
  OneOp t;
  t.b.softmax(t.in(f32({3, 1, 2}, {0, 0, 0, 0, 0, 0})), t.in(f32({1, 2}, {0, 4})), 1.0, 8.0);
  double s[3] = {4.0 / 16, 4.0 / 256, 4.0 / 4};
  std::vector<float> want;
  for (double v : s) {
    double p = 1 / (1 + std::exp(-v));
    want.push_back(static_cast<float>(1 - p));
    want.push_back(static_cast<float>(p));
  }
  expectNear(t.eval(), want);
  EXPECT_NEAR(want[5], 0.731058579, 1e-7);
}

// --- sorting and reductions -------------------------------------------------------

TEST(RefOps, ArgsortStableBothWays) {
  OneOp a;
  a.b.argsort(a.in(f32({1, 5}, {3, 1, 3, 2, 1})), SortOrder::Asc);
  EXPECT_EQ(a.eval().toInts(), (std::vector<int64_t>{1, 4, 3, 0, 2}));
  OneOp d;
  d.b.argsort(d.in(f32({1, 5}, {3, 1, 3, 2, 1})), SortOrder::Desc);
  EXPECT_EQ(d.eval().toInts(), (std::vector<int64_t>{0, 2, 3, 1, 4}));
}

TEST(RefOps, TopKTiesLowerIndexFirst) {
  OneOp t;
  t.b.topK(t.in(f32({2, 5}, {1, 5, 5, 2, 5, 0, -1, 7, 7, 3})), 3);
  HostTensor r = t.eval();
  EXPECT_EQ(r.type, TensorType(DType::I32, {2, 3}));
  EXPECT_EQ(r.toInts(), (std::vector<int64_t>{1, 2, 4, 2, 3, 4}));
}

TEST(RefOps, SumRowsAndMean) {
  OneOp s;
  s.b.sumRows(s.in(f32({2, 3}, {1, 2, 3, 4, 5, 6})));
  HostTensor r = s.eval();
  EXPECT_EQ(r.type, TensorType(DType::F32, {2, 1}));
  expectNear(r, {6, 15});
  OneOp m;
  m.b.mean(m.in(f32({2, 3}, {1, 2, 3, 4, 5, 6})));
  expectNear(m.eval(), {2, 5});
}

// --- gathers ------------------------------------------------------------------------

TEST(RefOps, GetRows) {
  OneOp t;
  t.b.getRows(t.in(f32({4, 2}, {0, 1, 10, 11, 20, 21, 30, 31})), t.in(i32({3}, {3, 0, 3})));
  expectNear(t.eval(), {30, 31, 0, 1, 30, 31});
}

TEST(RefOps, GetRowsBatchedProbabilities) {
  // probs [T, E] by ids [T, k] -> [T, k]
  OneOp t;
  t.b.getRows(t.in(f32({2, 4}, {0.1f, 0.2f, 0.3f, 0.4f, 0.5f, 0.6f, 0.7f, 0.8f})),
              t.in(i32({2, 2}, {3, 1, 0, 2})));
  HostTensor r = t.eval();
  EXPECT_EQ(r.type, TensorType(DType::F32, {2, 2}));
  expectNear(r, {0.4f, 0.2f, 0.5f, 0.7f});
}

TEST(RefOps, GetRowsOfF16IntAndQuantisedTables) {
  OneOp h;
  h.b.getRows(h.in(f16({2, 2}, {0.1f, 1, 2, 3})), h.in(i32({1}, {0})));
  HostTensor hr = h.eval();
  EXPECT_EQ(hr.type.dtype, DType::F32);
  EXPECT_EQ(hr.toFloats(), (std::vector<float>{0.0999755859375f, 1}));

  OneOp i;
  i.b.getRows(i.in(i32({3, 1}, {5, 1073741825, 7})), i.in(i32({2}, {1, 0})));
  HostTensor ir = i.eval();
  EXPECT_EQ(ir.type.dtype, DType::I32);
  EXPECT_EQ(ir.toInts(), (std::vector<int64_t>{1073741825, 5}));

  // q8_0 [2, 32]: row 1 has d = 2 and q = j.
  HostTensor q = HostTensor::zeros({DType::Q8_0, {2, 32}});
  q.data[34] = 0x00;
  q.data[35] = 0x40; // f16 2.0
  for (int j = 0; j < 32; ++j)
    q.data[36 + j] = static_cast<uint8_t>(j);
  OneOp qt;
  qt.b.getRows(qt.in(q), qt.in(i32({1}, {1})));
  std::vector<float> want(32);
  for (int j = 0; j < 32; ++j)
    want[j] = 2.0f * j;
  expectNear(qt.eval(), want);
}

TEST(RefOps, GetRowsOutOfRangeIsAnError) {
  OneOp t;
  t.b.getRows(t.in(f32({2, 1}, {1, 2})), t.in(i32({2}, {0, 2})));
  std::string err = t.error();
  EXPECT_NE(err.find("get_rows"), std::string::npos) << err;
  EXPECT_NE(err.find("indices[1] = 2 is out of range"), std::string::npos) << err;
}

// --- matmuls ------------------------------------------------------------------------

TEST(RefOps, MatMul) {
  OneOp t;
  t.b.matmul(t.in(f32({2, 3}, {1, 2, 3, 4, 5, 6})), t.in(f32({2, 3}, {1, 0, -1, 0.5, 0.5, 0.5})));
  expectNear(t.eval(), {-2, 3, -2, 7.5});
  OneOp h; // f16 weights, rank-3 input
  h.b.matmul(h.in(f32({1, 2, 3}, {1, 2, 3, 4, 5, 6})),
             h.in(f16({2, 3}, {1, 0, -1, 0.5, 0.5, 0.5})));
  HostTensor r = h.eval();
  EXPECT_EQ(r.type, TensorType(DType::F32, {1, 2, 2}));
  expectNear(r, {-2, 3, -2, 7.5});
}

TEST(RefOps, MatMulQuantisedWeights) {
  // q4_0 weight [2, 32]: row 0 d = 1, all nibbles 9 (q - 8 = 1); row 1 d = 0.5, all nibbles 0 (-8).
  HostTensor w = HostTensor::zeros({DType::Q4_0, {2, 32}});
  w.data[1] = 0x3C; // d = 1
  for (int j = 0; j < 16; ++j)
    w.data[2 + j] = 0x99;
  w.data[19] = 0x38; // d = 0.5; nibbles stay 0
  std::vector<float> x(32);
  for (int j = 0; j < 32; ++j)
    x[j] = static_cast<float>(j); // Σ j = 496
  OneOp t;
  t.b.matmul(t.in(f32({1, 32}, x)), t.in(w));
  expectNear(t.eval(), {496, -4 * 496});
}

TEST(RefOps, MatMul512x256) {
  std::vector<float> w(512 * 256), x(4 * 256);
  for (int n = 0; n < 512; ++n)
    for (int k = 0; k < 256; ++k)
      w[n * 256 + k] = 0.25f * (n % 7 - 3);
  for (int m = 0; m < 4; ++m)
    for (int k = 0; k < 256; ++k)
      x[m * 256 + k] = static_cast<float>(m + 1);
  OneOp t;
  t.b.matmul(t.in(f32({4, 256}, x)), t.in(f32({512, 256}, w)));
  std::vector<float> y = t.eval().toFloats();
  ASSERT_EQ(y.size(), 4u * 512);
  for (int m = 0; m < 4; ++m)
    for (int n = 0; n < 512; ++n)
      ASSERT_EQ(y[m * 512 + n], 64.0f * (m + 1) * (n % 7 - 3)) << m << "," << n;
}

/// w[e] = [[e+1, 0], [0, -(e+1)]]
HostTensor experts() { return f32({3, 2, 2}, {1, 0, 0, -1, 2, 0, 0, -2, 3, 0, 0, -3}); }

TEST(RefOps, MatMulIdSharedInput) {
  OneOp t; // X = 1: every selected expert reads x[t, 0]
  t.b.matmulId(t.in(f32({2, 1, 2}, {1, 2, 3, 4})), t.in(experts()),
               t.in(i32({2, 2}, {2, 0, 1, 1})));
  HostTensor r = t.eval();
  EXPECT_EQ(r.type, TensorType(DType::F32, {2, 2, 2}));
  expectNear(r, {3, -6, 1, -2, 6, -8, 6, -8});
}

TEST(RefOps, MatMulIdPerSlotInput) {
  OneOp t; // X = k: slot j reads x[t, j]
  t.b.matmulId(t.in(f32({2, 2, 2}, {1, 2, 3, 4, 5, 6, 7, 8})), t.in(experts()),
               t.in(i32({2, 2}, {2, 0, 1, 1})));
  expectNear(t.eval(), {3, -6, 3, -4, 10, -12, 14, -16});
  OneOp bad;
  bad.b.matmulId(bad.in(f32({1, 1, 2}, {1, 2})), bad.in(experts()), bad.in(i32({1, 1}, {3})));
  EXPECT_NE(bad.error().find("ids[0] = 3 is out of range"), std::string::npos);
}

// --- layout -------------------------------------------------------------------------

std::vector<float> iota(int n) {
  std::vector<float> v(n);
  for (int i = 0; i < n; ++i)
    v[i] = static_cast<float>(i);
  return v;
}

TEST(RefOps, ViewWithStridesAndOffset) {
  OneOp t;
  t.b.view(t.in(f32({3, 4}, iota(12))), {2, 2}, {4, 2}, 1);
  expectNear(t.eval(), {1, 3, 5, 7});
  OneOp n; // negative stride walks backwards
  n.b.view(n.in(f32({3, 4}, iota(12))), {3}, {-4}, 8);
  expectNear(n.eval(), {8, 4, 0});
  OneOp h; // keeps the dtype
  h.b.view(h.in(f16({4}, {0.1f, 0.2f, 0.3f, 0.4f})), {2}, {1}, 2);
  HostTensor r = h.eval();
  EXPECT_EQ(r.type, TensorType(DType::F16, {2}));
  EXPECT_EQ(r.data, f16({2}, {0.3f, 0.4f}).data);
}

TEST(RefOps, PermuteAndTranspose) {
  OneOp t;
  t.b.permute(t.in(f32({2, 3, 4}, iota(24))), {2, 0, 1});
  HostTensor r = t.eval();
  EXPECT_EQ(r.type.shape, (Shape{4, 2, 3}));
  // out[a, b, c] = x[b, c, a] = 12b + 4c + a
  std::vector<float> want;
  for (int a = 0; a < 4; ++a)
    for (int b = 0; b < 2; ++b)
      for (int c = 0; c < 3; ++c)
        want.push_back(static_cast<float>(12 * b + 4 * c + a));
  expectNear(r, want);
  EXPECT_EQ(r.toFloats()[11], 21.0f); // out[1, 1, 2]

  OneOp tr;
  tr.b.transpose(tr.in(f32({2, 3}, iota(6))));
  expectNear(tr.eval(), {0, 3, 1, 4, 2, 5});
}

TEST(RefOps, Concat) {
  OneOp a;
  a.b.concat(a.in(f32({1, 2}, {1, 2})), a.in(f32({2, 2}, {3, 4, 5, 6})), 0);
  expectNear(a.eval(), {1, 2, 3, 4, 5, 6});
  OneOp b;
  b.b.concat(b.in(f32({2, 1}, {1, 2})), b.in(f32({2, 2}, {3, 4, 5, 6})), 1);
  HostTensor r = b.eval();
  EXPECT_EQ(r.type.shape, (Shape{2, 3}));
  expectNear(r, {1, 3, 4, 2, 5, 6});
}

TEST(RefOps, Repeat) {
  OneOp a;
  a.b.repeat(a.in(f32({1, 2}, {1, 2})), {2, 4});
  expectNear(a.eval(), {1, 2, 1, 2, 1, 2, 1, 2});
  OneOp b;
  b.b.repeat(b.in(f32({2, 1}, {1, 2})), {2, 3});
  expectNear(b.eval(), {1, 1, 1, 2, 2, 2});
}

TEST(RefOps, ReshapeAndContMoveBytes) {
  OneOp r;
  r.b.reshape(r.in(f32({2, 3}, iota(6))), {3, 2});
  HostTensor out = r.eval();
  EXPECT_EQ(out.type.shape, (Shape{3, 2}));
  expectNear(out, iota(6));
  OneOp i; // integers above 2^24 survive (no trip through f32)
  i.b.cont(i.in(i32({2}, {16777217, -3})));
  EXPECT_EQ(i.eval().toInts(), (std::vector<int64_t>{16777217, -3}));
}

TEST(RefOps, Convert) {
  OneOp h;
  h.b.convert(h.in(f32({3}, {1.0f + std::ldexp(1.0f, -11), 65520.0f, 0.1f})), DType::F16);
  HostTensor r = h.eval();
  EXPECT_EQ(r.type.dtype, DType::F16);
  EXPECT_EQ(r.toFloats(), (std::vector<float>{1.0f, kInf, 0.0999755859375f}));
  OneOp i;
  i.b.convert(i.in(f32({2}, {2.5f, -1.4f})), DType::I32);
  EXPECT_EQ(i.eval().toInts(), (std::vector<int64_t>{3, -1}));
  OneOp b;
  b.b.convert(b.in(f32({1}, {1.0f + 3 * std::ldexp(1.0f, -8)})), DType::BF16);
  EXPECT_EQ(b.eval().toFloats(), (std::vector<float>{1.0f + std::ldexp(1.0f, -6)}));
}

// --- set_rows and attention -------------------------------------------------------

TEST(RefOps, SetRowsRoundsIntoF16) {
  OneOp t;
  t.b.setRows(t.in(HostTensor::zeros({DType::F16, {3, 2}})),
              t.in(f32({1, 2}, {1.0f + std::ldexp(1.0f, -11), 0.1f})), t.in(i32({1}, {2})));
  HostTensor r = t.eval();
  EXPECT_EQ(r.type.dtype, DType::F16);
  EXPECT_EQ(r.toFloats(), (std::vector<float>{0, 0, 0, 0, 1.0f, 0.0999755859375f}));
  OneOp bad;
  bad.b.setRows(bad.in(HostTensor::zeros({DType::F16, {3, 2}})), bad.in(f32({1, 2}, {1, 2})),
                bad.in(i32({1}, {3})));
  std::string err = bad.error();
  EXPECT_NE(err.find("set_rows"), std::string::npos) << err;
  EXPECT_NE(err.find("indices[0] = 3 is out of range [0, 3)"), std::string::npos) << err;
}

// q [T=2, Hq=4, D=2], k/v [ctx=4, Hkv=2, 2]; literals from a scalar implementation.
const std::vector<float> kQ = {-0.1f, 0.2f, 0.3f, -0.4f, 0.5f,  0.6f, -0.7f, 0.8f,
                               0.9f,  -1,   1.1f, 1.2f,  -1.3f, 1.4f, 1.5f,  -1.6f};
const std::vector<float> kK = {0.252441295f,  0.272789228f,   0.0423360024f, -0.227040749f,
                               -0.287677282f, -0.0838246495f, 0.19709598f,   0.296807474f,
                               0.123635546f,  -0.163206333f,  -0.299997062f, -0.160971875f,
                               0.126050111f,  0.297182207f,   0.195086352f,  -0.086370995f};
const std::vector<float> kV = {0.5f,         -0.108073418f, -0.12682181f, 0.780085143f,
                               0.327249983f, 0.0804642355f, 1.02192698f,  0.768368609f,
                               0.32117026f,  1.23015835f,   1.20404103f,  0.600019587f,
                               1.4120895f,   1.62345966f,   0.918697067f, 1.57712572f};

HostTensor attentionOf(std::vector<int64_t> pos, const Builder::AttentionParams &p,
                       std::vector<float> sinks = {}) {
  OneOp t;
  ValueId q = t.in(f32({2, 4, 2}, kQ)), k = t.in(f32({4, 2, 2}, kK)), v = t.in(f32({4, 2, 2}, kV));
  ValueId ps = t.in(i32({2}, pos));
  std::optional<ValueId> s;
  if (!sinks.empty())
    s = t.in(f32({4}, sinks));
  t.b.attention(q, k, v, ps, p, s);
  return t.eval();
}

TEST(RefOps, AttentionCausalByPositionWithGqa) {
  // Query heads 0, 1 read kv head 0; heads 2, 3 read kv head 1. Token 0 at position 1
  // sees rows 0..1, token 1 at position 3 sees rows 0..3.
  Builder::AttentionParams p;
  p.scale = 0.5;
  HostTensor r = attentionOf({1, 3}, p);
  EXPECT_EQ(r.type, TensorType(DType::F32, {2, 4, 2}));
  expectNear(r, {0.413998797f, -0.0142125588f, 0.414043692f, -0.0142615565f, 0.503617523f,
                 0.773655048f, 0.492084256f, 0.77377268f, 0.618550061f, 0.723547311f, 0.693496263f,
                 0.722871072f, 0.802165658f, 0.898355912f, 0.699978523f, 0.969439035f});
}

TEST(RefOps, AttentionWindowSoftcapSinks) {
  // window 2: position 2 sees rows 1..2, position 3 rows 2..3; scores softcapped at 1.5;
  // sinks add exp(sink) to the denominator only.
  Builder::AttentionParams p;
  p.scale = 0.7;
  p.window = 2;
  p.softcap = 1.5;
  expectNear(attentionOf({2, 3}, p, {0.5f, -1, 2, 0}),
             {0.176832845f, 0.351104257f, 0.274495462f, 0.58150834f, 0.238563387f, 0.152149103f,
              0.757063655f, 0.466004598f, 0.436188486f, 0.780225292f, 0.839161702f, 1.26688938f,
              0.221872364f, 0.203587196f, 0.710920004f, 0.82223979f});
}

TEST(RefOps, AttentionSinglePositionIsThatValue) {
  // At position 0 with no sink the only visible row gets all the weight.
  Builder::AttentionParams p;
  p.scale = 3;
  std::vector<float> r = attentionOf({0, 0}, p).toFloats();
  for (int t = 0; t < 2; ++t)
    for (int h = 0; h < 4; ++h) {
      EXPECT_FLOAT_EQ(r[(t * 4 + h) * 2], kV[(h / 2) * 2]);
      EXPECT_FLOAT_EQ(r[(t * 4 + h) * 2 + 1], kV[(h / 2) * 2 + 1]);
    }
}

TEST(RefOps, AttentionWindowOfOneSeesOnlyItsOwnRow) {
  // window 1: j <= 3 and j > 3 - 1, so only row 3 is visible.
  Builder::AttentionParams p;
  p.scale = 2;
  p.window = 1;
  std::vector<float> r = attentionOf({3, 3}, p).toFloats();
  for (int t = 0; t < 2; ++t)
    for (int h = 0; h < 4; ++h) {
      EXPECT_FLOAT_EQ(r[(t * 4 + h) * 2], kV[(3 * 2 + h / 2) * 2]);
      EXPECT_FLOAT_EQ(r[(t * 4 + h) * 2 + 1], kV[(3 * 2 + h / 2) * 2 + 1]);
    }
}

TEST(RefOps, AttentionPositionPastTheCacheIsAnError) {
  OneOp t;
  ValueId q = t.in(f32({2, 4, 2}, kQ)), k = t.in(f32({4, 2, 2}, kK)), v = t.in(f32({4, 2, 2}, kV));
  t.b.attention(q, k, v, t.in(i32({2}, {1, 4})), {});
  std::string err = t.error();
  EXPECT_NE(err.find("attention"), std::string::npos) << err;
  EXPECT_NE(err.find("positions[1] = 4 is outside the cache of 4 rows"), std::string::npos) << err;
}

TEST(RefOps, EvalNodeChecksOperandTypes) {
  OneOp t;
  t.b.matmul(t.in(f32({1, 3}, {1, 2, 3})), t.in(f32({2, 3}, {1, 2, 3, 4, 5, 6})));
  t.args.begin()->second = f32({1, 2}, {1, 2}); // no longer matches w
  std::string err = t.error();
  EXPECT_NE(err.find("matmul"), std::string::npos) << err;
}

} // namespace
