//===- QuantizeBlock.h - one block of every GGUF type, for host and device ---===//
//
// The one definition of the test quantiser (ir/Quantize.h): f32 values to
// one block of any block-quantised dtype, round to nearest per block. The
// host's quantizeRow calls it, and its text is embedded at build time into
// the NVRTC module that initialises weights on the device
// (codegen/cuda/WeightInitModule.cpp), so a quantised `{init = normal(...)}`
// weight is made where it lives instead of on the host (W-moe-12 q4_K's
// 7.2 G weights took minutes of host time; thirty-second session).
//
// Each type's block is filled in two steps: choose the scales (the block's or
// sub-block's extreme value mapped to the end of the integer range, as ggml's
// reference quantisers do), then the integer codes of every element with the
// scales as they will be decoded (f16-rounded), and pack them into the layout
// ir/Numeric.cpp decodes. The codes of element e are placed by the same index
// arithmetic the decoders use, written here once per layout (packK2, packK4,
// quantizeQ6_K).
//
// Host and device agree to the bit: every float operation is one IEEE
// operation rounded to nearest (FG_Q_MUL and friends: the device compiler may
// not contract a·b + c into an FMA the host does not do), and the f16
// conversions, |x| and "is finite" are integer code.
//
// This file must stay self-contained: NVRTC compiles it without our include
// paths or the C++ standard library.
//
//===----------------------------------------------------------------------===//
#pragma once

#if defined(__CUDACC__)
#define FG_Q_FN __device__ __forceinline__
#define FG_Q_MUL(x, y) __fmul_rn((x), (y))
#define FG_Q_ADD(x, y) __fadd_rn((x), (y))
#define FG_Q_SUB(x, y) __fsub_rn((x), (y))
#define FG_Q_DIV(x, y) __fdiv_rn((x), (y))
#define FG_Q_DMUL(x, y) __dmul_rn((x), (y))
#define FG_Q_DADD(x, y) __dadd_rn((x), (y))
#define FG_Q_DDIV(x, y) __ddiv_rn((x), (y))
#define FG_Q_RINT(x) rintf(x)
#define FG_Q_BITS(x) __float_as_uint(x)
#define FG_Q_FLOAT(u) __uint_as_float(u)
#else
#include <cmath>
#define FG_Q_FN inline
#define FG_Q_MUL(x, y) ((x) * (y))
#define FG_Q_ADD(x, y) ((x) + (y))
#define FG_Q_SUB(x, y) ((x) - (y))
#define FG_Q_DIV(x, y) ((x) / (y))
#define FG_Q_DMUL(x, y) ((x) * (y))
#define FG_Q_DADD(x, y) ((x) + (y))
#define FG_Q_DDIV(x, y) ((x) / (y))
#define FG_Q_RINT(x) std::nearbyint(x)
#define FG_Q_BITS(x) __builtin_bit_cast(unsigned, (x))
#define FG_Q_FLOAT(u) __builtin_bit_cast(float, (u))
#endif

namespace fg_quant {

typedef unsigned char u8;
typedef unsigned short u16;
typedef unsigned int u32;

/// The block types, as the device kernel's `type` argument (the host maps
/// DType to them: ir/Quantize.cpp).
enum Type : int {
  Q8_0 = 1, Q4_0, Q4_1, Q5_0, Q5_1, IQ4_NL, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, IQ4_XS
};

/// Elements and bytes of one block of `t` (0 for an unknown type).
FG_Q_FN int blockElems(int t) { return t >= Q2_K && t <= IQ4_XS ? 256 : t >= Q8_0 ? 32 : 0; }
FG_Q_FN int blockBytes(int t) {
  switch (t) {
  case Q8_0: return 34;
  case Q4_0: return 18;
  case Q4_1: return 20;
  case Q5_0: return 22;
  case Q5_1: return 24;
  case IQ4_NL: return 18;
  case Q2_K: return 84;
  case Q3_K: return 110;
  case Q4_K: return 144;
  case Q5_K: return 176;
  case Q6_K: return 210;
  case IQ4_XS: return 136;
  default: return 0;
  }
}

// --- scalar helpers (std::min / max / clamp's exact semantics) ---------------------

FG_Q_FN float fmin2(float a, float b) { return b < a ? b : a; }
FG_Q_FN float fmax2(float a, float b) { return a < b ? b : a; }
FG_Q_FN float fclamp(float v, float lo, float hi) { return v < lo ? lo : hi < v ? hi : v; }
FG_Q_FN int iclamp(int v, int lo, int hi) { return v < lo ? lo : hi < v ? hi : v; }
FG_Q_FN float fabs1(float x) { return FG_Q_FLOAT(FG_Q_BITS(x) & 0x7FFFFFFFu); }
FG_Q_FN float finite(float x) {
  return (FG_Q_BITS(x) & 0x7F800000u) == 0x7F800000u ? 0.0f : x;
}

FG_Q_FN float halfToFloat(u16 h) {
  u32 sign = static_cast<u32>(h & 0x8000) << 16;
  u32 exp = (h >> 10) & 0x1F, mant = h & 0x3FF;
  if (exp == 0x1F) // inf / nan (payload kept)
    return FG_Q_FLOAT(sign | 0x7F800000u | (mant << 13));
  if (exp == 0) { // zero / subnormal: mant · 2^-24, exact in f32
    float v = FG_Q_MUL(static_cast<float>(mant), 0x1p-24f);
    return sign ? -v : v;
  }
  return FG_Q_FLOAT(sign | ((exp + 112) << 23) | (mant << 13));
}

/// Round to nearest even; overflow to inf; nan stays a quiet nan.
FG_Q_FN u16 floatToHalf(float f) {
  u32 x = FG_Q_BITS(f);
  u16 sign = static_cast<u16>((x >> 16) & 0x8000);
  x &= 0x7FFFFFFFu;
  if (x > 0x7F800000u)
    return static_cast<u16>(sign | 0x7E00 | ((x >> 13) & 0x3FF));
  if (x >= 0x477FF000u) // >= 65520: rounds to inf
    return static_cast<u16>(sign | 0x7C00);
  if (x < 0x38800000u) { // subnormal half: |f|·2^24 rounded to an even integer
    float scaled = FG_Q_MUL(FG_Q_FLOAT(x), 0x1p24f); // exact
    return static_cast<u16>(sign | static_cast<u16>(FG_Q_RINT(scaled)));
  }
  u32 rounded = x + 0xFFF + ((x >> 13) & 1);
  return static_cast<u16>(sign | ((rounded - (112u << 23)) >> 13));
}

/// f16-rounds a scale: what the decoder will read back (clamped to f16's
/// finite range, so huge inputs saturate instead of decoding to inf · 0).
FG_Q_FN float asHalf(float x, u8 *dst) {
  u16 h = floatToHalf(fclamp(x, -65504.0f, 65504.0f));
  dst[0] = static_cast<u8>(h);
  dst[1] = static_cast<u8>(h >> 8);
  return halfToFloat(h);
}

FG_Q_FN int clampInt(float v, int lo, int hi) {
  if (!(v == v)) // nan
    return lo;
  return static_cast<int>(
      fclamp(FG_Q_RINT(v), static_cast<float>(lo), static_cast<float>(hi)));
}

/// The value of largest magnitude, sign kept (the first on ties).
FG_Q_FN float signedMax(const float *x, int n) {
  float m = 0;
  for (int i = 0; i < n; ++i)
    if (fabs1(finite(x[i])) > fabs1(m))
      m = finite(x[i]);
  return m;
}

/// Integer code of x at scale d in [lo, hi]; 0 when d is 0.
FG_Q_FN int code(float x, float d, int lo, int hi) {
  return d == 0 ? iclamp(0, lo, hi) : clampInt(FG_Q_DIV(finite(x), d), lo, hi);
}

FG_Q_FN void zero(u8 *p, int n) {
  for (int i = 0; i < n; ++i)
    p[i] = 0;
}

/// iq4_nl's 16 levels (ggml's kvalues_iq4nl).
FG_Q_FN int iq4Value(int i) {
  const signed char v[16] = {-127, -104, -83, -65, -49, -35, -22, -10,
                             1,    13,   25,  38,  53,  69,  89,  113};
  return v[i];
}

/// Nearest iq4 level to x / d (an index into the levels).
FG_Q_FN u8 iq4Index(float x, float d) {
  float v = d == 0 ? 0 : FG_Q_DIV(finite(x), d);
  int best = 0;
  for (int i = 1; i < 16; ++i)
    if (fabs1(FG_Q_SUB(v, static_cast<float>(iq4Value(i)))) <
        fabs1(FG_Q_SUB(v, static_cast<float>(iq4Value(best)))))
      best = i;
  return static_cast<u8>(best);
}

// --- 32-element blocks -------------------------------------------------------------

FG_Q_FN void quantizeQ8_0(const float *x, u8 *b) {
  float amax = fabs1(signedMax(x, 32));
  float d = asHalf(FG_Q_DIV(amax, 127.0f), b);
  for (int j = 0; j < 32; ++j)
    b[2 + j] = static_cast<u8>(static_cast<signed char>(code(x[j], d, -127, 127)));
}

/// q4_0 / q5_0: y = d·(q − half); the extreme value maps to q = 0.
template <int Bits> FG_Q_FN void quantizeSymmetric(const float *x, u8 *b) {
  constexpr int half = 1 << (Bits - 1);
  float d = asHalf(FG_Q_DIV(signedMax(x, 32), static_cast<float>(-half)), b);
  u8 *qs = b + (Bits == 5 ? 6 : 2);
  u32 qh = 0;
  for (int j = 0; j < 16; ++j) {
    int lo = code(x[j], d, -half, half - 1) + half;
    int hi = code(x[j + 16], d, -half, half - 1) + half;
    qs[j] = static_cast<u8>((lo & 0xF) | ((hi & 0xF) << 4));
    qh |= static_cast<u32>(lo >> 4) << j | static_cast<u32>(hi >> 4) << (j + 16);
  }
  if (Bits == 5)
    for (int i = 0; i < 4; ++i)
      b[2 + i] = static_cast<u8>(qh >> (8 * i));
}

/// q4_1 / q5_1: y = d·q + m over [min, max].
template <int Bits> FG_Q_FN void quantizeAffine(const float *x, u8 *b) {
  constexpr int top = (1 << Bits) - 1;
  float mn = finite(x[0]), mx = mn;
  for (int j = 1; j < 32; ++j) {
    mn = fmin2(mn, finite(x[j]));
    mx = fmax2(mx, finite(x[j]));
  }
  float d = asHalf(FG_Q_DIV(FG_Q_SUB(mx, mn), static_cast<float>(top)), b);
  float m = asHalf(mn, b + 2);
  u8 *qs = b + (Bits == 5 ? 8 : 4);
  u32 qh = 0;
  for (int j = 0; j < 16; ++j) {
    int lo = code(FG_Q_SUB(finite(x[j]), m), d, 0, top);
    int hi = code(FG_Q_SUB(finite(x[j + 16]), m), d, 0, top);
    qs[j] = static_cast<u8>((lo & 0xF) | ((hi & 0xF) << 4));
    qh |= static_cast<u32>(lo >> 4) << j | static_cast<u32>(hi >> 4) << (j + 16);
  }
  if (Bits == 5)
    for (int i = 0; i < 4; ++i)
      b[4 + i] = static_cast<u8>(qh >> (8 * i));
}

/// iq4_nl's scale for 32 values: the extreme maps to −127, then the least
/// squares fit of the chosen levels.
FG_Q_FN float iq4Scale(const float *x) {
  float d = FG_Q_DIV(signedMax(x, 32), static_cast<float>(iq4Value(0)));
  if (d == 0)
    return 0;
  double sxv = 0, svv = 0;
  for (int j = 0; j < 32; ++j) {
    int v = iq4Value(iq4Index(x[j], d));
    sxv = FG_Q_DADD(sxv, FG_Q_DMUL(static_cast<double>(finite(x[j])), static_cast<double>(v)));
    svv = FG_Q_DADD(svv, FG_Q_DMUL(static_cast<double>(v), static_cast<double>(v)));
  }
  return svv > 0 ? static_cast<float>(FG_Q_DDIV(sxv, svv)) : d;
}

FG_Q_FN void iq4Body(const float *x, float d, u8 *qs) {
  for (int j = 0; j < 16; ++j)
    qs[j] = static_cast<u8>(iq4Index(x[j], d) | (iq4Index(x[j + 16], d) << 4));
}

FG_Q_FN void quantizeIQ4_NL(const float *x, u8 *b) {
  float d = asHalf(iq4Scale(x), b);
  iq4Body(x, d, b + 2);
}

// --- 256-element blocks -------------------------------------------------------------

/// Sub-blocks of `N` elements with a non-negative scale and min:
/// y = d·sc·q − dmin·m, q in [0, qTop], sc and m in [0, sTop]. Writes d and
/// dmin (f16) to `dd` and `dd + 2`, the scales and mins and every code.
template <int N>
FG_Q_FN void affineK(const float *x, int qTop, int sTop, u8 *dd, u8 *sc, u8 *m, u8 *q) {
  constexpr int groups = 256 / N;
  float scale[groups], minv[groups], maxScale = 0, maxMin = 0;
  for (int g = 0; g < groups; ++g) {
    float lo = 0, hi = finite(x[g * N]);
    for (int l = 0; l < N; ++l) {
      lo = fmin2(lo, finite(x[g * N + l]));
      hi = fmax2(hi, finite(x[g * N + l]));
    }
    scale[g] = FG_Q_DIV(fmax2(FG_Q_SUB(hi, lo), 0.0f), static_cast<float>(qTop));
    minv[g] = -lo;
    maxScale = fmax2(maxScale, scale[g]);
    maxMin = fmax2(maxMin, minv[g]);
  }
  float d = asHalf(FG_Q_DIV(maxScale, static_cast<float>(sTop)), dd);
  float dmin = asHalf(FG_Q_DIV(maxMin, static_cast<float>(sTop)), dd + 2);
  for (int g = 0; g < groups; ++g) {
    sc[g] = static_cast<u8>(code(scale[g], d, 0, sTop));
    m[g] = static_cast<u8>(code(minv[g], dmin, 0, sTop));
    float dl = FG_Q_MUL(d, static_cast<float>(sc[g]));
    float ml = FG_Q_MUL(dmin, static_cast<float>(m[g]));
    for (int l = 0; l < N; ++l)
      q[g * N + l] = static_cast<u8>(code(FG_Q_ADD(finite(x[g * N + l]), ml), dl, 0, qTop));
  }
}

/// Sub-blocks of 16 with a signed scale: y = d·s·q, s in [−sHalf, sHalf − 1],
/// q in [−qHalf, qHalf − 1]. Returns d; writes s + sHalf and q + qHalf.
FG_Q_FN float symmetricK(const float *x, int qHalf, int sHalf, u8 *dd, u8 *s, u8 *q) {
  float scale[16], maxScale = 0;
  for (int g = 0; g < 16; ++g) {
    scale[g] = FG_Q_DIV(signedMax(x + 16 * g, 16), static_cast<float>(-qHalf));
    if (fabs1(scale[g]) > fabs1(maxScale))
      maxScale = scale[g];
  }
  float d = asHalf(FG_Q_DIV(maxScale, static_cast<float>(-sHalf)), dd);
  for (int g = 0; g < 16; ++g) {
    int sg = code(scale[g], d, -sHalf, sHalf - 1);
    s[g] = static_cast<u8>(sg + sHalf);
    float dl = FG_Q_MUL(d, static_cast<float>(sg));
    for (int l = 0; l < 16; ++l)
      q[16 * g + l] = static_cast<u8>(code(x[16 * g + l], dl, -qHalf, qHalf - 1) + qHalf);
  }
  return d;
}

/// q2_K / q3_K layout of the low two bits: element e = 128h + 32j + l sits in
/// bits 2j..2j+1 of qs[32h + l]; q3_K's third bit in hmask[l], bit 4h + j.
FG_Q_FN void packK2(const u8 *q, u8 *qs, u8 *hmask) {
  zero(qs, 64);
  if (hmask)
    zero(hmask, 32);
  for (int e = 0; e < 256; ++e) {
    int h = e / 128, j = (e % 128) / 32, l = e % 32;
    qs[32 * h + l] |= static_cast<u8>((q[e] & 3) << (2 * j));
    if (hmask)
      hmask[l] |= static_cast<u8>(((q[e] >> 2) & 1) << (4 * h + j));
  }
}

/// q4_K / q5_K layout: element e = 64c + 32hi + l is a nibble of qs[32c + l]
/// (high when hi) and, for q5_K, bit 2c + hi of qh[l].
FG_Q_FN void packK4(const u8 *q, u8 *qs, u8 *qh) {
  zero(qs, 128);
  if (qh)
    zero(qh, 32);
  for (int e = 0; e < 256; ++e) {
    int c = e / 64, hi = (e % 64) / 32, l = e % 32;
    qs[32 * c + l] |= static_cast<u8>((q[e] & 0xF) << (4 * hi));
    if (qh)
      qh[l] |= static_cast<u8>(((q[e] >> 4) & 1) << (2 * c + hi));
  }
}

/// q4_K's 12 scale bytes: six bits of 8 scales and 8 mins (ggml's
/// get_scale_min_k4, inverted).
FG_Q_FN void packScaleMinK4(const u8 *sc, const u8 *m, u8 *s) {
  for (int j = 0; j < 4; ++j) {
    s[j] = static_cast<u8>((sc[j] & 63) | ((sc[j + 4] >> 4) << 6));
    s[j + 4] = static_cast<u8>((m[j] & 63) | ((m[j + 4] >> 4) << 6));
    s[j + 8] = static_cast<u8>((sc[j + 4] & 0xF) | ((m[j + 4] & 0xF) << 4));
  }
}

FG_Q_FN void quantizeQ2_K(const float *x, u8 *b) {
  u8 sc[16], m[16], q[256];
  affineK<16>(x, 3, 15, b + 80, sc, m, q);
  for (int g = 0; g < 16; ++g)
    b[g] = static_cast<u8>(sc[g] | (m[g] << 4));
  packK2(q, b + 16, nullptr);
}

FG_Q_FN void quantizeQ3_K(const float *x, u8 *b) {
  u8 s[16], q[256];
  symmetricK(x, 4, 32, b + 108, s, q);
  packK2(q, b + 32, b);
  u8 *scales = b + 96;
  zero(scales, 12);
  for (int i = 0; i < 16; ++i) {
    scales[i % 8] |= static_cast<u8>((s[i] & 0xF) << (i < 8 ? 0 : 4));
    scales[8 + i % 4] |= static_cast<u8>((s[i] >> 4) << (2 * (i / 4)));
  }
}

FG_Q_FN void quantizeQ4_K(const float *x, u8 *b) {
  u8 sc[8], m[8], q[256];
  affineK<32>(x, 15, 63, b, sc, m, q);
  packScaleMinK4(sc, m, b + 4);
  packK4(q, b + 16, nullptr);
}

FG_Q_FN void quantizeQ5_K(const float *x, u8 *b) {
  u8 sc[8], m[8], q[256];
  affineK<32>(x, 31, 63, b, sc, m, q);
  packScaleMinK4(sc, m, b + 4);
  packK4(q, b + 48, b + 16);
}

/// q6_K: element e = 128h + 32k + l: the low nibble of ql[64h + 32(k & 1) + l]
/// (high nibble when k ≥ 2), bits 2k..2k+1 of qh[32h + l]; scale of 16 elements each.
FG_Q_FN void quantizeQ6_K(const float *x, u8 *b) {
  u8 s[16], q[256];
  symmetricK(x, 32, 128, b + 208, s, q);
  u8 *ql = b, *qh = b + 128;
  zero(b, 192);
  for (int e = 0; e < 256; ++e) {
    int h = e / 128, k = (e % 128) / 32, l = e % 32;
    ql[64 * h + 32 * (k & 1) + l] |= static_cast<u8>((q[e] & 0xF) << (k >= 2 ? 4 : 0));
    qh[32 * h + l] |= static_cast<u8>((q[e] >> 4) << (2 * k));
  }
  for (int g = 0; g < 16; ++g)
    b[192 + g] = static_cast<u8>(static_cast<signed char>(s[g] - 128));
}

/// iq4_xs: eight iq4_nl sub-blocks with 6-bit signed scales of one f16 d.
FG_Q_FN void quantizeIQ4_XS(const float *x, u8 *b) {
  float sub[8], maxScale = 0;
  for (int i = 0; i < 8; ++i) {
    sub[i] = iq4Scale(x + 32 * i);
    if (fabs1(sub[i]) > fabs1(maxScale))
      maxScale = sub[i];
  }
  float d = asHalf(FG_Q_DIV(maxScale, -32.0f), b);
  u16 sh = 0;
  zero(b + 4, 4);
  for (int i = 0; i < 8; ++i) {
    int l = code(sub[i], d, -32, 31);
    int ls = l + 32;
    b[4 + i / 2] |= static_cast<u8>((ls & 0xF) << (4 * (i % 2)));
    sh |= static_cast<u16>((ls >> 4) << (2 * i));
    iq4Body(x + 32 * i, FG_Q_MUL(d, static_cast<float>(l)), b + 8 + 16 * i);
  }
  b[2] = static_cast<u8>(sh);
  b[3] = static_cast<u8>(sh >> 8);
}

/// One block of type `t` from blockElems(t) values; false for an unknown type.
FG_Q_FN bool quantizeBlock(int t, const float *x, u8 *b) {
  switch (t) {
  case Q8_0: quantizeQ8_0(x, b); return true;
  case Q4_0: quantizeSymmetric<4>(x, b); return true;
  case Q4_1: quantizeAffine<4>(x, b); return true;
  case Q5_0: quantizeSymmetric<5>(x, b); return true;
  case Q5_1: quantizeAffine<5>(x, b); return true;
  case IQ4_NL: quantizeIQ4_NL(x, b); return true;
  case Q2_K: quantizeQ2_K(x, b); return true;
  case Q3_K: quantizeQ3_K(x, b); return true;
  case Q4_K: quantizeQ4_K(x, b); return true;
  case Q5_K: quantizeQ5_K(x, b); return true;
  case Q6_K: quantizeQ6_K(x, b); return true;
  case IQ4_XS: quantizeIQ4_XS(x, b); return true;
  default: return false;
  }
}

} // namespace fg_quant
