//===- Numeric.cpp - storage conversions: f16, bf16, GGUF blocks ----------===//
//
// f16/bf16 conversions are bit-exact IEEE round-to-nearest-even (subnormals,
// infinities and NaNs included), independent of the host's FPU flags except
// for the default rounding mode. The GGUF block decoders follow ggml's
// dequantize_row_* exactly (ggml-quants.c).
//
//===----------------------------------------------------------------------===//
#include "ir/Numeric.h"

#include <cassert>
#include <cmath>
#include <cstring>

namespace fg {
namespace {

uint32_t floatBits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return u;
}

float bitsFloat(uint32_t u) {
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

uint16_t load16(const uint8_t *p) { return static_cast<uint16_t>(p[0] | (p[1] << 8)); }

void store16(uint8_t *p, uint16_t v) {
  p[0] = static_cast<uint8_t>(v);
  p[1] = static_cast<uint8_t>(v >> 8);
}

template <typename T> T loadLE(const uint8_t *p) {
  T v;
  std::memcpy(&v, p, sizeof v); // the hosts we build for are little-endian, like GGUF
  return v;
}

template <typename T> void storeLE(uint8_t *p, T v) { std::memcpy(p, &v, sizeof v); }

// --- GGUF blocks (ggml-quants.c, dequantize_row_*) ------------------------------

} // namespace

/// ggml's kvalues_iq4nl: the 16 levels of iq4_nl and iq4_xs.
const int8_t kIQ4Values[16] = {-127, -104, -83, -65, -49, -35, -22, -10,
                               1,    13,   25,  38,  53,  69,  89,  113};

namespace {

/// q8_0: f16 d; i8 q[32]. y = d·q.
void decodeQ8_0(const uint8_t *b, float *y) {
  float d = halfToFloat(load16(b));
  for (int j = 0; j < 32; ++j)
    y[j] = d * static_cast<float>(static_cast<int8_t>(b[2 + j]));
}

/// q4_0: f16 d; u8 qs[16]. Low nibbles are elements 0..15, high nibbles 16..31; y = d·(q − 8).
void decodeQ4_0(const uint8_t *b, float *y) {
  float d = halfToFloat(load16(b));
  const uint8_t *qs = b + 2;
  for (int j = 0; j < 16; ++j) {
    y[j] = d * static_cast<float>((qs[j] & 0x0F) - 8);
    y[j + 16] = d * static_cast<float>((qs[j] >> 4) - 8);
  }
}

/// q4_1: f16 d, m; u8 qs[16]. Same nibble order as q4_0; y = d·q + m.
void decodeQ4_1(const uint8_t *b, float *y) {
  float d = halfToFloat(load16(b)), m = halfToFloat(load16(b + 2));
  const uint8_t *qs = b + 4;
  for (int j = 0; j < 16; ++j) {
    y[j] = d * static_cast<float>(qs[j] & 0x0F) + m;
    y[j + 16] = d * static_cast<float>(qs[j] >> 4) + m;
  }
}

/// ggml's get_scale_min_k4: sub-block j's 6-bit scale and min out of 12 bytes.
void scaleMinK4(int j, const uint8_t *q, uint8_t &sc, uint8_t &m) {
  if (j < 4) {
    sc = q[j] & 63;
    m = q[j + 4] & 63;
  } else {
    sc = static_cast<uint8_t>((q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4));
    m = static_cast<uint8_t>((q[j + 4] >> 4) | ((q[j] >> 6) << 4));
  }
}

/// q4_k: f16 d, dmin; u8 scales[12]; u8 qs[128]. Four 64-element chunks; in
/// each, the low nibbles of 32 bytes are sub-block 2c, the high nibbles 2c+1;
/// y = d·sc·q − dmin·m.
void decodeQ4_K(const uint8_t *b, float *y) {
  float d = halfToFloat(load16(b)), dmin = halfToFloat(load16(b + 2));
  const uint8_t *scales = b + 4, *q = b + 16;
  for (int c = 0; c < 4; ++c, q += 32, y += 64) {
    uint8_t sc, m;
    scaleMinK4(2 * c, scales, sc, m);
    float d1 = d * sc, m1 = dmin * m;
    scaleMinK4(2 * c + 1, scales, sc, m);
    float d2 = d * sc, m2 = dmin * m;
    for (int l = 0; l < 32; ++l) {
      y[l] = d1 * static_cast<float>(q[l] & 0xF) - m1;
      y[l + 32] = d2 * static_cast<float>(q[l] >> 4) - m2;
    }
  }
}

} // namespace

void decodeKQuantParts(DType t, const uint8_t *src, float *scaled, float *mins, int64_t n) {
  assert((t == DType::Q4_K || t == DType::Q5_K) && "q4_K or q5_K");
  const bool q5 = t == DType::Q5_K;
  const int64_t bytes = q5 ? 176 : 144;
  for (int64_t blk = 0; blk < n / 256; ++blk, src += bytes, scaled += 256, mins += 256) {
    const float d = halfToFloat(load16(src)), dmin = halfToFloat(load16(src + 2));
    const uint8_t *scales = src + 4, *qh = src + 16, *q = src + (q5 ? 48 : 16);
    for (int c = 0; c < 4; ++c, q += 32)
      for (int h = 0; h < 2; ++h) { // sub-block 2c + h: the low (h 0) or high nibbles
        uint8_t sc, m;
        scaleMinK4(2 * c + h, scales, sc, m);
        const float ds = d * sc, dm = dmin * m;
        for (int l = 0; l < 32; ++l) {
          int v = h ? q[l] >> 4 : q[l] & 0xF;
          if (q5)
            v |= ((qh[l] >> (2 * c + h)) & 1) << 4;
          scaled[64 * c + 32 * h + l] = ds * static_cast<float>(v);
          mins[64 * c + 32 * h + l] = dm;
        }
      }
  }
}

namespace {

/// q5_0: f16 d; u8 qh[4]; u8 qs[16]. Element j < 16 is the low nibble of qs[j],
/// element j + 16 the high nibble; bit j of the little-endian u32 qh is the
/// fifth bit of element j. y = d·(q − 16).
void decodeQ5_0(const uint8_t *b, float *y) {
  float d = halfToFloat(load16(b));
  uint32_t qh = loadLE<uint32_t>(b + 2);
  const uint8_t *qs = b + 6;
  for (int j = 0; j < 16; ++j) {
    int lo = (qs[j] & 0x0F) | (((qh >> j) & 1) << 4);
    int hi = (qs[j] >> 4) | (((qh >> (j + 16)) & 1) << 4);
    y[j] = d * static_cast<float>(lo - 16);
    y[j + 16] = d * static_cast<float>(hi - 16);
  }
}

/// q5_1: f16 d, m; u8 qh[4]; u8 qs[16]. Bits as q5_0; y = d·q + m.
void decodeQ5_1(const uint8_t *b, float *y) {
  float d = halfToFloat(load16(b)), m = halfToFloat(load16(b + 2));
  uint32_t qh = loadLE<uint32_t>(b + 4);
  const uint8_t *qs = b + 8;
  for (int j = 0; j < 16; ++j) {
    int lo = (qs[j] & 0x0F) | (((qh >> j) & 1) << 4);
    int hi = (qs[j] >> 4) | (((qh >> (j + 16)) & 1) << 4);
    y[j] = d * static_cast<float>(lo) + m;
    y[j + 16] = d * static_cast<float>(hi) + m;
  }
}

/// q2_k: u8 scales[16]; u8 qs[64]; f16 d, dmin. Two 128-element halves of four
/// 32-element groups; group g of half h reads bits 2g..2g+1 of qs[32h + l];
/// each 16 elements have a scale (low nibble) and a min (high nibble):
/// y = d·sc·q − dmin·m.
void decodeQ2_K(const uint8_t *b, float *y) {
  const uint8_t *scales = b, *q = b + 16;
  float d = halfToFloat(load16(b + 80)), dmin = halfToFloat(load16(b + 82));
  int is = 0;
  for (int h = 0; h < 2; ++h, q += 32) {
    for (int shift = 0; shift < 8; shift += 2) {
      for (int half = 0; half < 2; ++half, ++is) {
        float dl = d * static_cast<float>(scales[is] & 0xF);
        float ml = dmin * static_cast<float>(scales[is] >> 4);
        for (int l = 0; l < 16; ++l)
          *y++ = dl * static_cast<float>((q[16 * half + l] >> shift) & 3) - ml;
      }
    }
  }
}

/// The 6-bit scale of q3_k's sub-block i (0..63, stored + 32): low nibble from
/// byte i % 8 (its high nibble when i ≥ 8), top two bits from byte 8 + i % 4.
int scaleQ3K(const uint8_t *s, int i) {
  int lo = (i < 8 ? s[i] : s[i - 8] >> 4) & 0xF;
  int hi = (s[8 + i % 4] >> (2 * (i / 4))) & 3;
  return lo | (hi << 4);
}

/// q3_k: u8 hmask[32]; u8 qs[64]; u8 scales[12]; f16 d. The low two bits are
/// laid out as q2_k's; bit 4h + g of hmask[l] is the third bit, set meaning
/// "no −4": y = d·(sc − 32)·(q − (bit ? 0 : 4)).
void decodeQ3_K(const uint8_t *b, float *y) {
  const uint8_t *hm = b, *q = b + 32, *scales = b + 96;
  float d = halfToFloat(load16(b + 108));
  int is = 0, bit = 0;
  for (int h = 0; h < 2; ++h, q += 32) {
    for (int shift = 0; shift < 8; shift += 2, ++bit) {
      for (int half = 0; half < 2; ++half, ++is) {
        float dl = d * static_cast<float>(scaleQ3K(scales, is) - 32);
        for (int l = 16 * half; l < 16 * half + 16; ++l) {
          int v = ((q[l] >> shift) & 3) - ((hm[l] >> bit) & 1 ? 0 : 4);
          *y++ = dl * static_cast<float>(v);
        }
      }
    }
  }
}

/// q6_k: u8 ql[128], qh[64]; i8 scales[16]; f16 d. Two 128-element halves;
/// y = d·sc·(q − 32) with q = 4 low bits from ql and 2 high bits from qh.
void decodeQ6_K(const uint8_t *b, float *y) {
  const uint8_t *ql = b, *qh = b + 128;
  const int8_t *sc = reinterpret_cast<const int8_t *>(b + 192);
  float d = halfToFloat(load16(b + 208));
  for (int n = 0; n < 2; ++n, y += 128, ql += 64, qh += 32, sc += 8) {
    for (int l = 0; l < 32; ++l) {
      int is = l / 16;
      int q1 = ((ql[l] & 0xF) | (((qh[l] >> 0) & 3) << 4)) - 32;
      int q2 = ((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4)) - 32;
      int q3 = ((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
      int q4 = ((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
      y[l] = d * static_cast<float>(sc[is] * q1);
      y[l + 32] = d * static_cast<float>(sc[is + 2] * q2);
      y[l + 64] = d * static_cast<float>(sc[is + 4] * q3);
      y[l + 96] = d * static_cast<float>(sc[is + 6] * q4);
    }
  }
}

/// q5_k: f16 d, dmin; u8 scales[12]; u8 qh[32]; u8 qs[128]. q4_k's layout
/// plus a fifth bit: bit 2c (low nibbles) or 2c + 1 (high) of qh[l] in chunk c.
void decodeQ5_K(const uint8_t *b, float *y) {
  float d = halfToFloat(load16(b)), dmin = halfToFloat(load16(b + 2));
  const uint8_t *scales = b + 4, *qh = b + 16, *q = b + 48;
  for (int c = 0; c < 4; ++c, q += 32, y += 64) {
    uint8_t sc, m;
    scaleMinK4(2 * c, scales, sc, m);
    float d1 = d * sc, m1 = dmin * m;
    scaleMinK4(2 * c + 1, scales, sc, m);
    float d2 = d * sc, m2 = dmin * m;
    for (int l = 0; l < 32; ++l) {
      int lo = (q[l] & 0xF) | (((qh[l] >> (2 * c)) & 1) << 4);
      int hi = (q[l] >> 4) | (((qh[l] >> (2 * c + 1)) & 1) << 4);
      y[l] = d1 * static_cast<float>(lo) - m1;
      y[l + 32] = d2 * static_cast<float>(hi) - m2;
    }
  }
}

/// iq4_nl: f16 d; u8 qs[16]; nibbles as q4_0, each an index into kIQ4Values.
void decodeIQ4_NL(const uint8_t *b, float *y) {
  float d = halfToFloat(load16(b));
  const uint8_t *qs = b + 2;
  for (int j = 0; j < 16; ++j) {
    y[j] = d * static_cast<float>(kIQ4Values[qs[j] & 0xF]);
    y[j + 16] = d * static_cast<float>(kIQ4Values[qs[j] >> 4]);
  }
}

/// iq4_xs: f16 d; u16 scales_h; u8 scales_l[4]; u8 qs[128]. Eight 32-element
/// sub-blocks, each an iq4_nl body with a 6-bit scale (stored + 32): low nibble
/// from scales_l[i / 2], top two bits from bits 2i..2i+1 of scales_h.
void decodeIQ4_XS(const uint8_t *b, float *y) {
  float d = halfToFloat(load16(b));
  unsigned sh = load16(b + 2);
  const uint8_t *sl = b + 4, *qs = b + 8;
  for (int i = 0; i < 8; ++i, qs += 16, y += 32) {
    int ls = ((sl[i / 2] >> (4 * (i % 2))) & 0xF) | (((sh >> (2 * i)) & 3) << 4);
    float dl = d * static_cast<float>(ls - 32);
    for (int j = 0; j < 16; ++j) {
      y[j] = dl * static_cast<float>(kIQ4Values[qs[j] & 0xF]);
      y[j + 16] = dl * static_cast<float>(kIQ4Values[qs[j] >> 4]);
    }
  }
}

template <typename Fn>
void decodeBlocks(DType t, const uint8_t *src, float *dst, int64_t n, Fn fn) {
  const DTypeInfo &info = dtypeInfo(t);
  assert(n % info.blockElems == 0 && "block types decode whole blocks");
  for (int64_t b = 0, e = n / info.blockElems; b < e; ++b)
    fn(src + b * info.blockBytes, dst + b * info.blockElems);
}

} // namespace

float halfToFloat(uint16_t h) {
  uint32_t sign = static_cast<uint32_t>(h & 0x8000) << 16;
  uint32_t exp = (h >> 10) & 0x1F, mant = h & 0x3FF;
  if (exp == 0x1F) // inf / nan (payload kept)
    return bitsFloat(sign | 0x7F800000 | (mant << 13));
  if (exp == 0) { // zero / subnormal: mant · 2^-24, exact in f32
    float v = static_cast<float>(mant) * 0x1p-24f;
    return sign ? -v : v;
  }
  return bitsFloat(sign | ((exp + 112) << 23) | (mant << 13));
}

uint16_t floatToHalf(float f) {
  uint32_t x = floatBits(f);
  uint16_t sign = static_cast<uint16_t>((x >> 16) & 0x8000);
  x &= 0x7FFFFFFF;
  if (x > 0x7F800000) // nan: quiet, keep the top payload bits
    return static_cast<uint16_t>(sign | 0x7E00 | ((x >> 13) & 0x3FF));
  if (x >= 0x477FF000) // >= 65520 (halfway past 65504, odd mantissa): rounds to inf
    return static_cast<uint16_t>(sign | 0x7C00);
  if (x < 0x38800000) { // below 2^-14: subnormal half; |f|·2^24 rounded to an even integer
    float scaled = bitsFloat(x) * 0x1p24f; // exact: a power-of-two scale of a small normal
    return static_cast<uint16_t>(sign | static_cast<uint16_t>(std::nearbyint(scaled)));
  }
  // Normal: rebias the exponent (127 -> 15) and round the 13 dropped bits to
  // nearest even; a mantissa carry moves into the exponent as it should.
  uint32_t rounded = x + 0xFFF + ((x >> 13) & 1);
  return static_cast<uint16_t>(sign | ((rounded - (112u << 23)) >> 13));
}

float bf16ToFloat(uint16_t b) { return bitsFloat(static_cast<uint32_t>(b) << 16); }

uint16_t floatToBf16(float f) {
  uint32_t x = floatBits(f);
  if ((x & 0x7FFFFFFF) > 0x7F800000) // nan: keep it a (quiet) nan
    return static_cast<uint16_t>((x >> 16) | 0x40);
  return static_cast<uint16_t>((x + 0x7FFF + ((x >> 16) & 1)) >> 16);
}

void decodeRow(DType t, const uint8_t *src, float *dst, int64_t n) {
  switch (t) {
  case DType::F32:
    std::memcpy(dst, src, static_cast<size_t>(n) * sizeof(float));
    return;
  case DType::F16:
    for (int64_t i = 0; i < n; ++i)
      dst[i] = halfToFloat(load16(src + 2 * i));
    return;
  case DType::BF16:
    for (int64_t i = 0; i < n; ++i)
      dst[i] = bf16ToFloat(load16(src + 2 * i));
    return;
  case DType::I32:
    for (int64_t i = 0; i < n; ++i)
      dst[i] = static_cast<float>(loadLE<int32_t>(src + 4 * i));
    return;
  case DType::I64:
    for (int64_t i = 0; i < n; ++i)
      dst[i] = static_cast<float>(loadLE<int64_t>(src + 8 * i));
    return;
  case DType::Q8_0:
    return decodeBlocks(t, src, dst, n, decodeQ8_0);
  case DType::Q4_0:
    return decodeBlocks(t, src, dst, n, decodeQ4_0);
  case DType::Q4_1:
    return decodeBlocks(t, src, dst, n, decodeQ4_1);
  case DType::Q4_K:
    return decodeBlocks(t, src, dst, n, decodeQ4_K);
  case DType::Q6_K:
    return decodeBlocks(t, src, dst, n, decodeQ6_K);
  case DType::Q5_0:
    return decodeBlocks(t, src, dst, n, decodeQ5_0);
  case DType::Q5_1:
    return decodeBlocks(t, src, dst, n, decodeQ5_1);
  case DType::Q2_K:
    return decodeBlocks(t, src, dst, n, decodeQ2_K);
  case DType::Q3_K:
    return decodeBlocks(t, src, dst, n, decodeQ3_K);
  case DType::Q5_K:
    return decodeBlocks(t, src, dst, n, decodeQ5_K);
  case DType::IQ4_NL:
    return decodeBlocks(t, src, dst, n, decodeIQ4_NL);
  case DType::IQ4_XS:
    return decodeBlocks(t, src, dst, n, decodeIQ4_XS);
  }
  assert(false && "unhandled dtype in decodeRow");
}

bool encodeRow(DType t, const float *src, uint8_t *dst, int64_t n) {
  switch (t) {
  case DType::F32:
    std::memcpy(dst, src, static_cast<size_t>(n) * sizeof(float));
    return true;
  case DType::F16:
    for (int64_t i = 0; i < n; ++i)
      store16(dst + 2 * i, floatToHalf(src[i]));
    return true;
  case DType::BF16:
    for (int64_t i = 0; i < n; ++i)
      store16(dst + 2 * i, floatToBf16(src[i]));
    return true;
  case DType::I32:
    for (int64_t i = 0; i < n; ++i)
      storeLE<int32_t>(dst + 4 * i, static_cast<int32_t>(std::lround(src[i])));
    return true;
  case DType::I64:
    for (int64_t i = 0; i < n; ++i)
      storeLE<int64_t>(dst + 8 * i, static_cast<int64_t>(std::llround(src[i])));
    return true;
  case DType::Q8_0:
  case DType::Q4_0:
  case DType::Q4_1:
  case DType::Q4_K:
  case DType::Q6_K:
  case DType::Q5_0:
  case DType::Q5_1:
  case DType::Q2_K:
  case DType::Q3_K:
  case DType::Q5_K:
  case DType::IQ4_NL:
  case DType::IQ4_XS:
    return false; // ir/Quantize.h quantises them
  }
  return false;
}

} // namespace fg
