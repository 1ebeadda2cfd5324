//===- ActQuantTest.cpp - the reference's int8 activations (ActQuant) -----===//
//
// The DP4A GEMVs quantise x to int8 per block of 32 (ir/Quantize.h
// quantizeActivationsInt8); the reference reproduces that where the plan
// says a launch does (ActQuant). Checked here against hand-computed blocks
// and against dp4aFormula below: Σ w·x written from ggml's block layouts as
// kernels/gemv_dp4a.cuh's header states it (integer dots, q4_K's mins on the
// exact x), independently of the reference's decoders.
//
//===----------------------------------------------------------------------===//
#include "RefTestUtil.h"

#include "ir/Numeric.h"
#include "ir/Quantize.h"
#include "runtime/Compare.h"

#include <cstring>
#include <limits>
#include <random>

using namespace fg;
using namespace fg::test;

namespace {

/// y[n] = Σ_k W[n, k]·x[k] as the DP4A kernels define it: x quantised per 32
/// (dx = max|x| / 127, xq = rint(x · 127 / max|x|)), and per block, in
/// double: q4_K d·sc·dx·Σ q·xq − dmin·m·Σ x; q8_0 d·dx·Σ q·xq; q4_0
/// d·dx·(Σ q·xq − 8·Σ xq) (q the unsigned nibble); q5_K as q4_K with the
/// 5-bit q; q6_K per 16 weights
/// d·sc·dx·(Σ q·xq − 32·Σ xq) (q the unsigned 6-bit value).
std::vector<double> dp4aFormula(DType t, const std::vector<uint8_t> &w, const std::vector<float> &x,
                                int64_t N) {
  const int64_t K = static_cast<int64_t>(x.size());
  std::vector<float> dx(K / 32);
  std::vector<int> xq(K);
  for (int64_t j = 0; j < K / 32; ++j) {
    float amax = 0.0f;
    for (int64_t i = 0; i < 32; ++i)
      amax = std::max(amax, std::fabs(x[32 * j + i]));
    const float inv = amax > 1e-30f ? 127.0f / amax : 0.0f;
    dx[j] = amax / 127.0f;
    for (int64_t i = 0; i < 32; ++i)
      xq[32 * j + i] = static_cast<int>(std::nearbyint(x[32 * j + i] * inv));
  }
  auto half = [](const uint8_t *p) {
    uint16_t h;
    std::memcpy(&h, p, 2);
    return static_cast<double>(halfToFloat(h));
  };
  const DTypeInfo &qi = dtypeInfo(t);
  const int64_t rowBytes = K / qi.blockElems * qi.blockBytes;
  std::vector<double> y(N, 0.0);
  for (int64_t n = 0; n < N; ++n) {
    const uint8_t *row = w.data() + n * rowBytes;
    if (t == DType::Q4_K || t == DType::Q5_K) {
      // q5_K (176 bytes): q4_K's layout with qh[32] before qs, bit j of
      // qh[l] the fifth bit of weight l of sub-block j.
      const bool q5 = t == DType::Q5_K;
      for (int64_t sb = 0; sb < K / 256; ++sb) {
        const uint8_t *blk = row + sb * (q5 ? 176 : 144);
        const double d = half(blk), dmin = half(blk + 2);
        const uint8_t *sc = blk + 4, *qh = blk + 16, *qs = blk + (q5 ? 48 : 16);
        for (int j = 0; j < 8; ++j) {
          int s, m; // ggml's get_scale_min_k4
          if (j < 4) {
            s = sc[j] & 63, m = sc[j + 4] & 63;
          } else {
            s = (sc[j + 4] & 0xF) | ((sc[j - 4] >> 6) << 4);
            m = (sc[j + 4] >> 4) | ((sc[j] >> 6) << 4);
          }
          const int64_t k0 = 256 * sb + 32 * j;
          long long dot = 0;
          double sx = 0;
          for (int l = 0; l < 32; ++l) {
            const uint8_t byte = qs[32 * (j / 2) + l];
            const int q = ((j & 1) ? byte >> 4 : byte & 0xF) | (q5 ? ((qh[l] >> j) & 1) << 4 : 0);
            dot += static_cast<long long>(q) * xq[k0 + l];
            sx += x[k0 + l];
          }
          y[n] += d * s * dx[k0 / 32] * static_cast<double>(dot) - dmin * m * sx;
        }
      }
      continue;
    }
    if (t == DType::Q6_K) { // ggml's block_q6_K: ql[128], qh[64], scales[16], d
      for (int64_t sb = 0; sb < K / 256; ++sb) {
        const uint8_t *blk = row + sb * 210, *ql = blk, *qh = blk + 128;
        const int8_t *sc = reinterpret_cast<const int8_t *>(blk + 192);
        const double d = half(blk + 208);
        for (int h = 0; h < 2; ++h)       // halves of 128
          for (int g = 0; g < 4; ++g)     // groups of 32: ql low / high nibbles, qh bits 2g
            for (int l0 = 0; l0 < 32; l0 += 16) { // runs of 16, one scale each
              const int64_t k0 = 256 * sb + 128 * h + 32 * g + l0;
              long long dot = 0, sq = 0;
              for (int l = l0; l < l0 + 16; ++l) {
                const uint8_t lb = ql[64 * h + l + 32 * (g & 1)];
                const int q =
                    ((g >> 1) ? lb >> 4 : lb & 0xF) | (((qh[32 * h + l] >> (2 * g)) & 3) << 4);
                dot += static_cast<long long>(q) * xq[k0 + l - l0];
                sq += xq[k0 + l - l0];
              }
              y[n] += d * sc[8 * h + l0 / 16 + 2 * g] * dx[k0 / 32] *
                      static_cast<double>(dot - 32 * sq);
            }
      }
      continue;
    }
    for (int64_t bk = 0; bk < K / 32; ++bk) {
      const uint8_t *blk = row + bk * qi.blockBytes;
      const double d = half(blk);
      long long dot = 0, sq = 0;
      for (int l = 0; l < 32; ++l) {
        int q;
        if (t == DType::Q8_0)
          q = static_cast<int8_t>(blk[2 + l]);
        else // q4_0
          q = l < 16 ? blk[2 + l] & 0xF : blk[2 + l - 16] >> 4;
        dot += static_cast<long long>(q) * xq[32 * bk + l];
        sq += xq[32 * bk + l];
      }
      if (t == DType::Q4_0)
        dot -= 8 * sq;
      y[n] += d * dx[bk] * static_cast<double>(dot);
    }
  }
  return y;
}

HostTensor quantised(DType t, int64_t n, int64_t k, uint64_t seed) {
  HostTensor w = HostTensor::zeros({t, {n, k}});
  std::vector<float> v = normals(static_cast<size_t>(n * k), seed, 0.05f);
  EXPECT_TRUE(quantizeRow(t, v.data(), w.data.data(), n * k));
  return w;
}

/// evalNode of `n` on `ops` with x read as `act`.
std::vector<float> evalWith(const Node &n, std::vector<const HostTensor *> ops, ActQuant act) {
  llvm::SmallVector<HostTensor, 1> r;
  if (llvm::Error e = evalNode(n, ops, r, act)) {
    ADD_FAILURE() << llvm::toString(std::move(e));
    return {};
  }
  return r[0].toFloats();
}

std::vector<float> toF(const std::vector<double> &v) { return {v.begin(), v.end()}; }

} // namespace

/// Blocks worked by hand: max|x| 127 (the inverse exactly 1: halves round to
/// even), 0.5 (the inverse 254), all zeros, a block at or below 1e-30
/// (zeros, no overflow) and one with a NaN (0, as the kernel's
/// __float2int_rn; the max ignores it).
TEST(ActQuant, Int8BlocksByHand) {
  std::vector<float> x(160, 0.0f);
  const float b0[] = {127.0f, -127.0f, 2.5f, 3.5f, -2.5f, 0.49f, 63.5f, -0.5f};
  std::copy(std::begin(b0), std::end(b0), x.begin());
  x[32] = 0.5f, x[33] = 0.25f, x[34] = -0.5f, x[35] = 0.125f, x[36] = -0.0625f;
  x[96] = 1e-30f, x[97] = -1e-31f;
  x[128] = std::numeric_limits<float>::quiet_NaN(), x[129] = 2.0f, x[130] = -1.0f;
  std::vector<int8_t> xq(160, 99);
  std::vector<float> dx(5, -1.0f);
  quantizeActivationsInt8(x.data(), 160, xq.data(), dx.data());
  const int8_t want0[] = {127, -127, 2, 4, -2, 0, 64, 0};
  for (int i = 0; i < 8; ++i)
    EXPECT_EQ(xq[i], want0[i]) << "element " << i;
  EXPECT_EQ(dx[0], 1.0f);
  const int8_t want1[] = {127, 64, -127, 32, -16}; // 0.25·254 = 63.5 -> 64 (even)
  for (int i = 0; i < 5; ++i)
    EXPECT_EQ(xq[32 + i], want1[i]) << "element " << 32 + i;
  EXPECT_EQ(dx[1], 0.5f / 127.0f);
  for (int i = 64; i < 128; ++i)
    EXPECT_EQ(xq[i], 0) << "element " << i;
  EXPECT_EQ(dx[2], 0.0f);
  EXPECT_EQ(dx[3], 1e-30f / 127.0f);
  EXPECT_EQ(xq[128], 0);
  EXPECT_EQ(xq[129], 127);
  EXPECT_EQ(xq[130], -64); // -63.5 -> -64 (even)
  EXPECT_EQ(dx[4], 2.0f / 127.0f);
}

/// matmul over the four DP4A types with x as Int8: the formula to f32
/// rounding; exactly (ActQuant::Exact) a different result, within the x
/// quantisation's error; over a type no int8 kernel reads (q5_0, f16) Int8
/// changes nothing. (q5_K: the grouped expert GEMM on integer tensor cores.)
TEST(ActQuant, MatmulIsTheDp4aFormula) {
  // 61 rows: the exact result's distance is a mean over rows (q4_K's scale
  // parts, which see the int8 x, are larger than its weights).
  const int64_t N = 61, K = 2048;
  uint64_t seed = 11;
  for (DType t : {DType::Q4_K, DType::Q5_K, DType::Q8_0, DType::Q4_0, DType::Q6_K}) {
    SCOPED_TRACE(dtypeName(t));
    OneOp o;
    HostTensor x = f32({1, K}, normals(K, seed++));
    for (int i = 64; i < 96; ++i) // one block of zeros
      reinterpret_cast<float *>(x.data.data())[i] = 0.0f;
    HostTensor w = quantised(t, N, K, seed++);
    o.b.result(o.b.matmul(o.in(x), o.in(w)));
    ASSERT_FALSE(bool(o.b.finish()));
    const Node &n = o.fn.nodes().back();
    std::vector<float> int8 = evalWith(n, {&x, &w}, ActQuant::Int8);
    std::vector<float> exact = evalWith(n, {&x, &w}, ActQuant::Exact);
    std::vector<float> want = toF(dp4aFormula(t, w.data, x.toFloats(), N));
    EXPECT_LE(normalizedError(int8, want), 1e-6);
    EXPECT_GT(normalizedError(exact, want), 1e-4) << "int8 x made no difference";
    // q4_K / q5_K: ~1.9e-2 (their scale parts see the int8 x); the others
    // ~0.5-0.8e-2.
    EXPECT_LE(normalizedError(exact, want),
              t == DType::Q4_K || t == DType::Q5_K ? 3e-2 : 1e-2);
  }
  for (DType t : {DType::Q5_0, DType::F16}) {
    SCOPED_TRACE(dtypeName(t));
    OneOp o;
    HostTensor x = f32({1, 256}, normals(256, seed++));
    HostTensor w = t == DType::F16 ? f16({3, 256}, normals(768, seed++, 0.05f))
                                   : quantised(t, 3, 256, seed++);
    o.b.result(o.b.matmul(o.in(x), o.in(w)));
    ASSERT_FALSE(bool(o.b.finish()));
    const Node &n = o.fn.nodes().back();
    EXPECT_EQ(evalWith(n, {&x, &w}, ActQuant::Int8), evalWith(n, {&x, &w}, ActQuant::Exact));
  }
}

/// matmul_id: each (token, slot)'s x row quantised on its own, and one x
/// row shared by every slot.
TEST(ActQuant, MatmulIdQuantisesEachRow) {
  const int64_t E = 4, N = 5, K = 512;
  for (int64_t xRows : {int64_t(1), int64_t(3)}) {
    SCOPED_TRACE("x rows " + std::to_string(xRows));
    OneOp o;
    std::vector<float> xs = normals(static_cast<size_t>(xRows * K), 40 + xRows);
    for (int64_t i = 0; i < K; ++i) // rows of different magnitudes
      xs[(xRows - 1) * K + i] *= 8.0f;
    HostTensor x = f32({1, xRows, K}, xs);
    HostTensor w = HostTensor::zeros({DType::Q4_K, {E, N, K}});
    std::vector<float> wv = normals(static_cast<size_t>(E * N * K), 41, 0.05f);
    ASSERT_TRUE(quantizeRow(DType::Q4_K, wv.data(), w.data.data(), E * N * K));
    HostTensor ids = i32({1, 3}, {2, 0, 2});
    o.b.result(o.b.matmulId(o.in(x), o.in(w), o.in(ids)));
    ASSERT_FALSE(bool(o.b.finish()));
    std::vector<float> got = evalWith(o.fn.nodes().back(), {&x, &w, &ids}, ActQuant::Int8);
    ASSERT_EQ(got.size(), static_cast<size_t>(3 * N));
    const int64_t expertBytes = N * K / 256 * 144;
    for (int j = 0; j < 3; ++j) {
      const int64_t e = j == 1 ? 0 : 2, r = xRows == 1 ? 0 : j;
      std::vector<uint8_t> we(w.data.begin() + e * expertBytes,
                              w.data.begin() + (e + 1) * expertBytes);
      std::vector<float> xr(xs.begin() + r * K, xs.begin() + (r + 1) * K);
      std::vector<float> want = toF(dp4aFormula(DType::Q4_K, we, xr, N));
      EXPECT_LE(normalizedError(std::vector<float>(got.begin() + j * N, got.begin() + (j + 1) * N),
                                want),
                1e-6)
          << "slot " << j;
    }
  }
}

/// fused.rms_norm_matmul: with the deferred prologue the GEMV quantises
/// x·norm_w and multiplies each sum by the row's rstd; with Int8 it
/// quantises the normalised row (the reference's rms_norm, then · norm_w).
/// x·norm_w is built of ties: each block's max|x·w| is 127·w and the rest
/// (k + 1/2)·w, with w a power of two a block, so x·w·inv is k + 1/2 exactly
/// (rounded to even) and the normalised row's is not: the two forms then
/// quantise differently, and each is reproduced.
TEST(ActQuant, NormPrologueDeferredQuantisesXTimesNormWeight) {
  const int64_t N = 9, K = 1024;
  const double eps = 1e-6;
  OneOp o;
  std::vector<float> xs(K), nws(K);
  for (int64_t i = 0; i < K; ++i) {
    const int64_t b = i / 32;
    xs[i] = i % 32 == 0 ? (b % 2 ? -127.0f : 127.0f) : static_cast<float>((i * 7 + b) % 100) - 49.5f;
    nws[i] = b % 3 == 0 ? 0.5f : b % 3 == 1 ? 0.25f : 2.0f;
  }
  HostTensor x = f32({1, K}, xs), nw = f32({K}, nws);
  HostTensor w = quantised(DType::Q8_0, N, K, 73);
  ValueId y = o.b.create(OpKind::FusedRmsNormMatmul, {o.in(x), o.in(nw), o.in(w)},
                         {{"eps", Attribute::ofFloat(eps)}});
  o.b.result(y);
  ASSERT_FALSE(bool(o.b.finish()));
  const Node &n = o.fn.nodes().back();

  double ss = 0;
  for (float v : xs)
    ss += double(v) * v;
  const double rstd = 1.0 / std::sqrt(ss / K + eps);
  std::vector<float> xw(K), normed(K);
  for (int64_t i = 0; i < K; ++i) {
    xw[i] = xs[i] * nws[i];
    normed[i] = static_cast<float>(xs[i] * rstd) * nws[i];
  }
  std::vector<double> deferred = dp4aFormula(DType::Q8_0, w.data, xw, N);
  for (double &v : deferred)
    v *= rstd;
  const std::vector<float> notDeferred = toF(dp4aFormula(DType::Q8_0, w.data, normed, N));
  EXPECT_GT(normalizedError(toF(deferred), notDeferred), 1e-4) << "the two forms quantise alike";
  EXPECT_LE(normalizedError(evalWith(n, {&x, &nw, &w}, ActQuant::Int8NormDeferred), toF(deferred)),
            1e-6);
  EXPECT_LE(normalizedError(evalWith(n, {&x, &nw, &w}, ActQuant::Int8), notDeferred), 1e-6);
}
