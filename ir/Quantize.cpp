//===- Quantize.cpp - round-to-nearest quantiser for every block type -----===//
//
// Each type's block is filled in two steps: choose the scales (round to
// nearest, the block's or sub-block's extreme value mapped to the end of the
// integer range, as ggml's reference quantisers do), then the integer codes
// of every element with the scales as they will be decoded (f16-rounded), and
// pack them into the layout ir/Numeric.cpp decodes. The codes of element e
// are placed by the same index arithmetic the decoders use, written here once
// per layout (`packK2`, `packK4`, `packQ6K`).
//
//===----------------------------------------------------------------------===//
#include "ir/Quantize.h"

#include "ir/Numeric.h"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <cstring>

namespace fg {
namespace {

float finite(float x) { return std::isfinite(x) ? x : 0.0f; }

/// f16-rounds a scale: what the decoder will read back (clamped to f16's
/// finite range, so huge inputs saturate instead of decoding to inf · 0).
float asHalf(float x, uint8_t *dst) {
  uint16_t h = floatToHalf(std::clamp(x, -65504.0f, 65504.0f));
  dst[0] = static_cast<uint8_t>(h);
  dst[1] = static_cast<uint8_t>(h >> 8);
  return halfToFloat(h);
}

int clampInt(float v, int lo, int hi) {
  if (!(v == v)) // nan
    return lo;
  return static_cast<int>(std::clamp(std::nearbyint(v), static_cast<float>(lo),
                                     static_cast<float>(hi)));
}

/// The value of largest magnitude, sign kept (the first on ties).
float signedMax(const float *x, int n) {
  float m = 0;
  for (int i = 0; i < n; ++i)
    if (std::fabs(finite(x[i])) > std::fabs(m))
      m = finite(x[i]);
  return m;
}

/// Integer code of x at scale d in [lo, hi]; 0 when d is 0.
int code(float x, float d, int lo, int hi) {
  return d == 0 ? std::clamp(0, lo, hi) : clampInt(finite(x) / d, lo, hi);
}

/// Nearest iq4 level to x / d (an index into kIQ4Values).
uint8_t iq4Index(float x, float d) {
  float v = d == 0 ? 0 : finite(x) / d;
  int best = 0;
  for (int i = 1; i < 16; ++i)
    if (std::fabs(v - kIQ4Values[i]) < std::fabs(v - kIQ4Values[best]))
      best = i;
  return static_cast<uint8_t>(best);
}

// --- 32-element blocks ------------------------------------------------------------

void quantizeQ8_0(const float *x, uint8_t *b) {
  float amax = std::fabs(signedMax(x, 32));
  float d = asHalf(amax / 127, b);
  for (int j = 0; j < 32; ++j)
    b[2 + j] = static_cast<uint8_t>(static_cast<int8_t>(code(x[j], d, -127, 127)));
}

/// q4_0 / q5_0: y = d·(q − half); the extreme value maps to q = 0.
template <int Bits> void quantizeSymmetric(const float *x, uint8_t *b) {
  constexpr int half = 1 << (Bits - 1);
  float d = asHalf(signedMax(x, 32) / -half, b);
  uint8_t *qs = b + (Bits == 5 ? 6 : 2);
  uint32_t qh = 0;
  for (int j = 0; j < 16; ++j) {
    int lo = code(x[j], d, -half, half - 1) + half;
    int hi = code(x[j + 16], d, -half, half - 1) + half;
    qs[j] = static_cast<uint8_t>((lo & 0xF) | ((hi & 0xF) << 4));
    qh |= static_cast<uint32_t>(lo >> 4) << j | static_cast<uint32_t>(hi >> 4) << (j + 16);
  }
  if (Bits == 5)
    std::memcpy(b + 2, &qh, 4);
}

/// q4_1 / q5_1: y = d·q + m over [min, max].
template <int Bits> void quantizeAffine(const float *x, uint8_t *b) {
  constexpr int top = (1 << Bits) - 1;
  float mn = finite(x[0]), mx = mn;
  for (int j = 1; j < 32; ++j) {
    mn = std::min(mn, finite(x[j]));
    mx = std::max(mx, finite(x[j]));
  }
  float d = asHalf((mx - mn) / top, b);
  float m = asHalf(mn, b + 2);
  uint8_t *qs = b + (Bits == 5 ? 8 : 4);
  uint32_t qh = 0;
  for (int j = 0; j < 16; ++j) {
    int lo = code(finite(x[j]) - m, d, 0, top);
    int hi = code(finite(x[j + 16]) - m, d, 0, top);
    qs[j] = static_cast<uint8_t>((lo & 0xF) | ((hi & 0xF) << 4));
    qh |= static_cast<uint32_t>(lo >> 4) << j | static_cast<uint32_t>(hi >> 4) << (j + 16);
  }
  if (Bits == 5)
    std::memcpy(b + 4, &qh, 4);
}

/// iq4_nl's scale for 32 values: the extreme maps to −127, then the least
/// squares fit of the chosen levels.
float iq4Scale(const float *x) {
  float d = signedMax(x, 32) / kIQ4Values[0];
  if (d == 0)
    return 0;
  double sxv = 0, svv = 0;
  for (int j = 0; j < 32; ++j) {
    int v = kIQ4Values[iq4Index(x[j], d)];
    sxv += static_cast<double>(finite(x[j])) * v;
    svv += static_cast<double>(v) * v;
  }
  return svv > 0 ? static_cast<float>(sxv / svv) : d;
}

void iq4Body(const float *x, float d, uint8_t *qs) {
  for (int j = 0; j < 16; ++j)
    qs[j] = static_cast<uint8_t>(iq4Index(x[j], d) | (iq4Index(x[j + 16], d) << 4));
}

void quantizeIQ4_NL(const float *x, uint8_t *b) {
  float d = asHalf(iq4Scale(x), b);
  iq4Body(x, d, b + 2);
}

// --- 256-element blocks -------------------------------------------------------------

/// Sub-blocks of `n` elements with a non-negative scale and min:
/// y = d·sc·q − dmin·m, q in [0, qTop], sc and m in [0, sTop]. Writes d and
/// dmin (f16) to `dd` and `dd + 2`, the scales and mins and every code.
template <int N>
void affineK(const float *x, int qTop, int sTop, uint8_t *dd, uint8_t *sc, uint8_t *m,
             uint8_t *q) {
  constexpr int groups = 256 / N;
  float scale[groups], minv[groups], maxScale = 0, maxMin = 0;
  for (int g = 0; g < groups; ++g) {
    float lo = 0, hi = finite(x[g * N]);
    for (int l = 0; l < N; ++l) {
      lo = std::min(lo, finite(x[g * N + l]));
      hi = std::max(hi, finite(x[g * N + l]));
    }
    scale[g] = std::max(hi - lo, 0.0f) / qTop;
    minv[g] = -lo;
    maxScale = std::max(maxScale, scale[g]);
    maxMin = std::max(maxMin, minv[g]);
  }
  float d = asHalf(maxScale / sTop, dd), dmin = asHalf(maxMin / sTop, dd + 2);
  for (int g = 0; g < groups; ++g) {
    sc[g] = static_cast<uint8_t>(code(scale[g], d, 0, sTop));
    m[g] = static_cast<uint8_t>(code(minv[g], dmin, 0, sTop));
    float dl = d * sc[g], ml = dmin * m[g];
    for (int l = 0; l < N; ++l)
      q[g * N + l] = static_cast<uint8_t>(code(finite(x[g * N + l]) + ml, dl, 0, qTop));
  }
}

/// Sub-blocks of 16 with a signed scale: y = d·s·q, s in [−sHalf, sHalf − 1],
/// q in [−qHalf, qHalf − 1]. Returns d; writes s + sHalf and q + qHalf.
float symmetricK(const float *x, int qHalf, int sHalf, uint8_t *dd, uint8_t *s, uint8_t *q) {
  float scale[16], maxScale = 0;
  for (int g = 0; g < 16; ++g) {
    scale[g] = signedMax(x + 16 * g, 16) / -qHalf;
    if (std::fabs(scale[g]) > std::fabs(maxScale))
      maxScale = scale[g];
  }
  float d = asHalf(maxScale / -sHalf, dd);
  for (int g = 0; g < 16; ++g) {
    int sg = code(scale[g], d, -sHalf, sHalf - 1);
    s[g] = static_cast<uint8_t>(sg + sHalf);
    float dl = d * static_cast<float>(sg);
    for (int l = 0; l < 16; ++l)
      q[16 * g + l] = static_cast<uint8_t>(code(x[16 * g + l], dl, -qHalf, qHalf - 1) + qHalf);
  }
  return d;
}

/// q2_k / q3_k layout of the low two bits: element e = 128h + 32j + l sits in
/// bits 2j..2j+1 of qs[32h + l]. Returns hmask bits for q3_k's third bit.
void packK2(const uint8_t *q, uint8_t *qs, uint8_t *hmask) {
  std::memset(qs, 0, 64);
  if (hmask)
    std::memset(hmask, 0, 32);
  for (int e = 0; e < 256; ++e) {
    int h = e / 128, j = (e % 128) / 32, l = e % 32;
    qs[32 * h + l] |= static_cast<uint8_t>((q[e] & 3) << (2 * j));
    if (hmask)
      hmask[l] |= static_cast<uint8_t>(((q[e] >> 2) & 1) << (4 * h + j));
  }
}

/// q4_k / q5_k layout: element e = 64c + 32hi + l is a nibble of qs[32c + l]
/// (high when hi) and, for q5_k, bit 2c + hi of qh[l].
void packK4(const uint8_t *q, uint8_t *qs, uint8_t *qh) {
  std::memset(qs, 0, 128);
  if (qh)
    std::memset(qh, 0, 32);
  for (int e = 0; e < 256; ++e) {
    int c = e / 64, hi = (e % 64) / 32, l = e % 32;
    qs[32 * c + l] |= static_cast<uint8_t>((q[e] & 0xF) << (4 * hi));
    if (qh)
      qh[l] |= static_cast<uint8_t>(((q[e] >> 4) & 1) << (2 * c + hi));
  }
}

/// q4_k's 12 scale bytes: six bits of 8 scales and 8 mins (ggml's get_scale_min_k4, inverted).
void packScaleMinK4(const uint8_t *sc, const uint8_t *m, uint8_t *s) {
  for (int j = 0; j < 4; ++j) {
    s[j] = static_cast<uint8_t>((sc[j] & 63) | ((sc[j + 4] >> 4) << 6));
    s[j + 4] = static_cast<uint8_t>((m[j] & 63) | ((m[j + 4] >> 4) << 6));
    s[j + 8] = static_cast<uint8_t>((sc[j + 4] & 0xF) | ((m[j + 4] & 0xF) << 4));
  }
}

void quantizeQ2_K(const float *x, uint8_t *b) {
  uint8_t sc[16], m[16], q[256];
  affineK<16>(x, 3, 15, b + 80, sc, m, q);
  for (int g = 0; g < 16; ++g)
    b[g] = static_cast<uint8_t>(sc[g] | (m[g] << 4));
  packK2(q, b + 16, nullptr);
}

void quantizeQ3_K(const float *x, uint8_t *b) {
  uint8_t s[16], q[256];
  symmetricK(x, 4, 32, b + 108, s, q);
  packK2(q, b + 32, b);
  uint8_t *scales = b + 96;
  std::memset(scales, 0, 12);
  for (int i = 0; i < 16; ++i) {
    scales[i % 8] |= static_cast<uint8_t>((s[i] & 0xF) << (i < 8 ? 0 : 4));
    scales[8 + i % 4] |= static_cast<uint8_t>((s[i] >> 4) << (2 * (i / 4)));
  }
}

void quantizeQ4_K(const float *x, uint8_t *b) {
  uint8_t sc[8], m[8], q[256];
  affineK<32>(x, 15, 63, b, sc, m, q);
  packScaleMinK4(sc, m, b + 4);
  packK4(q, b + 16, nullptr);
}

void quantizeQ5_K(const float *x, uint8_t *b) {
  uint8_t sc[8], m[8], q[256];
  affineK<32>(x, 31, 63, b, sc, m, q);
  packScaleMinK4(sc, m, b + 4);
  packK4(q, b + 48, b + 16);
}

/// q6_k: element e = 128h + 32k + l: the low nibble of ql[64h + 32(k & 1) + l]
/// (high nibble when k ≥ 2), bits 2k..2k+1 of qh[32h + l]; scale of 16 elements each.
void quantizeQ6_K(const float *x, uint8_t *b) {
  uint8_t s[16], q[256];
  symmetricK(x, 32, 128, b + 208, s, q);
  uint8_t *ql = b, *qh = b + 128;
  std::memset(b, 0, 192);
  for (int e = 0; e < 256; ++e) {
    int h = e / 128, k = (e % 128) / 32, l = e % 32;
    ql[64 * h + 32 * (k & 1) + l] |= static_cast<uint8_t>((q[e] & 0xF) << (k >= 2 ? 4 : 0));
    qh[32 * h + l] |= static_cast<uint8_t>((q[e] >> 4) << (2 * k));
  }
  for (int g = 0; g < 16; ++g)
    b[192 + g] = static_cast<uint8_t>(static_cast<int8_t>(s[g] - 128));
}

/// iq4_xs: eight iq4_nl sub-blocks with 6-bit signed scales of one f16 d.
void quantizeIQ4_XS(const float *x, uint8_t *b) {
  float sub[8], maxScale = 0;
  for (int i = 0; i < 8; ++i) {
    sub[i] = iq4Scale(x + 32 * i);
    if (std::fabs(sub[i]) > std::fabs(maxScale))
      maxScale = sub[i];
  }
  float d = asHalf(maxScale / -32, b);
  uint16_t sh = 0;
  std::memset(b + 4, 0, 4);
  for (int i = 0; i < 8; ++i) {
    int l = code(sub[i], d, -32, 31);
    int ls = l + 32;
    b[4 + i / 2] |= static_cast<uint8_t>((ls & 0xF) << (4 * (i % 2)));
    sh |= static_cast<uint16_t>((ls >> 4) << (2 * i));
    iq4Body(x + 32 * i, d * static_cast<float>(l), b + 8 + 16 * i);
  }
  b[2] = static_cast<uint8_t>(sh);
  b[3] = static_cast<uint8_t>(sh >> 8);
}

using BlockFn = void (*)(const float *, uint8_t *);

BlockFn blockQuantizer(DType t) {
  switch (t) {
  case DType::Q8_0:
    return quantizeQ8_0;
  case DType::Q4_0:
    return quantizeSymmetric<4>;
  case DType::Q4_1:
    return quantizeAffine<4>;
  case DType::Q5_0:
    return quantizeSymmetric<5>;
  case DType::Q5_1:
    return quantizeAffine<5>;
  case DType::IQ4_NL:
    return quantizeIQ4_NL;
  case DType::Q2_K:
    return quantizeQ2_K;
  case DType::Q3_K:
    return quantizeQ3_K;
  case DType::Q4_K:
    return quantizeQ4_K;
  case DType::Q5_K:
    return quantizeQ5_K;
  case DType::Q6_K:
    return quantizeQ6_K;
  case DType::IQ4_XS:
    return quantizeIQ4_XS;
  case DType::F32:
  case DType::F16:
  case DType::BF16:
  case DType::I32:
  case DType::I64:
    break;
  }
  return nullptr;
}

} // namespace

bool quantizeRow(DType t, const float *src, uint8_t *dst, int64_t n) {
  BlockFn fn = blockQuantizer(t);
  const DTypeInfo &info = dtypeInfo(t);
  if (!fn || n < 0 || n % info.blockElems)
    return false;
  for (int64_t b = 0, e = n / info.blockElems; b < e; ++b)
    fn(src + b * info.blockElems, dst + b * info.blockBytes);
  return true;
}

bool quantizesActivations(DType t) {
  return t == DType::Q4_K || t == DType::Q8_0 || t == DType::Q4_0 || t == DType::Q6_K;
}

void quantizeActivationsInt8(const float *x, int64_t k, int8_t *xq, float *dx) {
  assert(k % 32 == 0 && "whole blocks of 32");
  for (int64_t b = 0; b < k / 32; ++b) {
    const float *v = x + 32 * b;
    float amax = 0.0f;
    for (int i = 0; i < 32; ++i)
      amax = std::fmax(amax, std::fabs(v[i]));
    // The kernel's order: one f32 division for the inverse, one product a value.
    const float inv = amax > 1e-30f ? 127.0f / amax : 0.0f;
    dx[b] = amax / 127.0f;
    for (int i = 0; i < 32; ++i) { // a NaN (x NaN, or inf · 0) is 0, as __float2int_rn's
      const float q = v[i] * inv;
      xq[32 * b + i] = std::isnan(q) ? int8_t(0) : static_cast<int8_t>(std::nearbyint(q));
    }
  }
}

} // namespace fg
