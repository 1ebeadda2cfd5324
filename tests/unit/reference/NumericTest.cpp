//===- NumericTest.cpp - f16/bf16 conversions and GGUF block decoding -----===//
#include "ir/Numeric.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

using namespace fg;

namespace {

const float kInf = std::numeric_limits<float>::infinity();

TEST(Half, DecodesNormalsSubnormalsAndSpecials) {
  EXPECT_EQ(halfToFloat(0x3C00), 1.0f);
  EXPECT_EQ(halfToFloat(0xC000), -2.0f);
  EXPECT_EQ(halfToFloat(0x7BFF), 65504.0f);
  EXPECT_EQ(halfToFloat(0x3555), 0.333251953125f);
  EXPECT_EQ(halfToFloat(0x0400), std::ldexp(1.0f, -14)); // smallest normal
  EXPECT_EQ(halfToFloat(0x0001), std::ldexp(1.0f, -24)); // smallest subnormal
  EXPECT_EQ(halfToFloat(0x03FF), 1023 * std::ldexp(1.0f, -24));
  EXPECT_EQ(halfToFloat(0x7C00), kInf);
  EXPECT_EQ(halfToFloat(0xFC00), -kInf);
  EXPECT_TRUE(std::isnan(halfToFloat(0x7E00)));
  EXPECT_TRUE(std::isnan(halfToFloat(0x7C01)));
  float negZero = halfToFloat(0x8000);
  EXPECT_EQ(negZero, 0.0f);
  EXPECT_TRUE(std::signbit(negZero));
}

TEST(Half, EncodesWithRoundToNearestEven) {
  EXPECT_EQ(floatToHalf(1.0f), 0x3C00);
  EXPECT_EQ(floatToHalf(-1.5f), 0xBE00);
  EXPECT_EQ(floatToHalf(0.1f), 0x2E66); // 0.0999755859375
  EXPECT_EQ(floatToHalf(-0.0f), 0x8000);
  // 1 + 2^-11 is halfway between 1 (even) and 1 + 2^-10: stays at 1.
  EXPECT_EQ(floatToHalf(1.0f + std::ldexp(1.0f, -11)), 0x3C00);
  // 1 + 3·2^-11 is halfway between mantissas 1 (odd) and 2 (even): goes up.
  EXPECT_EQ(floatToHalf(1.0f + 3 * std::ldexp(1.0f, -11)), 0x3C02);
  // Just above the halfway point rounds up.
  EXPECT_EQ(floatToHalf(1.0f + std::ldexp(1.0f, -11) + std::ldexp(1.0f, -20)), 0x3C01);
  // Mantissa carry into the exponent: 2 - 2^-12 rounds to 2.
  EXPECT_EQ(floatToHalf(2.0f - std::ldexp(1.0f, -12)), 0x4000);
}

TEST(Half, EncodesOverflowAndSpecials) {
  EXPECT_EQ(floatToHalf(65504.0f), 0x7BFF);
  EXPECT_EQ(floatToHalf(65519.0f), 0x7BFF); // below the halfway point
  EXPECT_EQ(floatToHalf(65520.0f), 0x7C00); // halfway, 65504 has an odd mantissa: inf
  EXPECT_EQ(floatToHalf(1e6f), 0x7C00);
  EXPECT_EQ(floatToHalf(-1e6f), 0xFC00);
  EXPECT_EQ(floatToHalf(kInf), 0x7C00);
  EXPECT_EQ(floatToHalf(-kInf), 0xFC00);
  uint16_t nan = floatToHalf(std::numeric_limits<float>::quiet_NaN());
  EXPECT_EQ(nan & 0x7C00, 0x7C00);
  EXPECT_NE(nan & 0x03FF, 0);
}

TEST(Half, EncodesSubnormals) {
  const float ulp = std::ldexp(1.0f, -24); // one half subnormal step
  EXPECT_EQ(floatToHalf(ulp), 0x0001);
  EXPECT_EQ(floatToHalf(-ulp), 0x8001);
  EXPECT_EQ(floatToHalf(ulp / 2), 0x0000);           // tie -> 0 (even)
  EXPECT_EQ(floatToHalf(ulp / 2 * 1.0001f), 0x0001); // just above the tie
  EXPECT_EQ(floatToHalf(1.5f * ulp), 0x0002);        // tie -> 2 (even)
  EXPECT_EQ(floatToHalf(2.5f * ulp), 0x0002);        // tie -> 2 (even)
  EXPECT_EQ(floatToHalf(ulp / 4), 0x0000);
  EXPECT_EQ(floatToHalf(1e-30f), 0x0000);
  EXPECT_EQ(floatToHalf(std::ldexp(1.0f, -14)), 0x0400);
  // 1023.5 ulp: halfway between the largest subnormal (odd) and the smallest normal.
  EXPECT_EQ(floatToHalf(1023.5f * ulp), 0x0400);
  EXPECT_EQ(floatToHalf(1022.5f * ulp), 0x03FE);
}

TEST(Half, RoundTripsEveryFiniteHalf) {
  for (uint32_t h = 0; h < 0x10000; ++h) {
    if ((h & 0x7C00) == 0x7C00)
      continue;
    ASSERT_EQ(floatToHalf(halfToFloat(static_cast<uint16_t>(h))), h) << "h = " << h;
  }
}

TEST(BFloat16, ConvertsAndRoundsToNearestEven) {
  EXPECT_EQ(floatToBf16(1.0f), 0x3F80);
  EXPECT_EQ(bf16ToFloat(0x3F80), 1.0f);
  EXPECT_EQ(bf16ToFloat(0x4049), 3.140625f);
  EXPECT_EQ(bf16ToFloat(0xC000), -2.0f);
  EXPECT_EQ(floatToBf16(1.0f + std::ldexp(1.0f, -8)), 0x3F80);     // tie, even stays
  EXPECT_EQ(floatToBf16(1.0f + 3 * std::ldexp(1.0f, -8)), 0x3F82); // tie, odd goes up
  EXPECT_EQ(floatToBf16(1.0f + std::ldexp(1.0f, -8) + std::ldexp(1.0f, -20)), 0x3F81);
  EXPECT_EQ(floatToBf16(std::numeric_limits<float>::max()), 0x7F80); // rounds to inf
  EXPECT_EQ(floatToBf16(kInf), 0x7F80);
  EXPECT_EQ(floatToBf16(-kInf), 0xFF80);
  EXPECT_EQ(floatToBf16(std::ldexp(1.0f, -130)), 0x0008); // f32 subnormal 2^-126·2^-4, exact
  EXPECT_EQ(bf16ToFloat(0x0008), std::ldexp(1.0f, -130));
  uint16_t nan = floatToBf16(std::numeric_limits<float>::quiet_NaN());
  EXPECT_TRUE(std::isnan(bf16ToFloat(nan)));
  // A NaN whose payload sits only in the low bits must stay a NaN.
  uint32_t lowNanBits = 0x7F800001;
  float lowNan;
  std::memcpy(&lowNan, &lowNanBits, 4);
  EXPECT_TRUE(std::isnan(bf16ToFloat(floatToBf16(lowNan))));
}

TEST(Rows, EncodeAndDecodeScalarTypes) {
  float in[3] = {1.5f, -2.25f, 0.1f};
  uint8_t buf[12];
  float out[3];
  ASSERT_TRUE(encodeRow(DType::F16, in, buf, 3));
  EXPECT_EQ(buf[0] | (buf[1] << 8), 0x3E00);
  decodeRow(DType::F16, buf, out, 3);
  EXPECT_EQ(out[0], 1.5f);
  EXPECT_EQ(out[1], -2.25f);
  EXPECT_EQ(out[2], 0.0999755859375f);
  ASSERT_TRUE(encodeRow(DType::BF16, in, buf, 3));
  decodeRow(DType::BF16, buf, out, 3);
  EXPECT_EQ(out[1], -2.25f);
  EXPECT_EQ(out[2], 0.10009765625f);
  float ints[3] = {2.5f, -1.4f, 7.0f};
  ASSERT_TRUE(encodeRow(DType::I32, ints, buf, 3));
  int32_t i32[3];
  std::memcpy(i32, buf, 12);
  EXPECT_EQ(i32[0], 3); // nearest, halves away from zero
  EXPECT_EQ(i32[1], -1);
  EXPECT_EQ(i32[2], 7);
  decodeRow(DType::I32, buf, out, 3);
  EXPECT_EQ(out[0], 3.0f);
  EXPECT_FALSE(encodeRow(DType::Q8_0, in, buf, 3));
}

// --- GGUF blocks, one hand-built block each -------------------------------------

void put16(std::vector<uint8_t> &b, size_t at, uint16_t v) {
  b[at] = static_cast<uint8_t>(v);
  b[at + 1] = static_cast<uint8_t>(v >> 8);
}

std::vector<float> decode(DType t, const std::vector<uint8_t> &block) {
  EXPECT_EQ(static_cast<int64_t>(block.size()), dtypeInfo(t).blockBytes);
  std::vector<float> out(static_cast<size_t>(dtypeInfo(t).blockElems));
  decodeRow(t, block.data(), out.data(), static_cast<int64_t>(out.size()));
  return out;
}

TEST(Blocks, Q8_0) {
  std::vector<uint8_t> b(34);
  put16(b, 0, 0x3800); // d = 0.5
  for (int j = 0; j < 32; ++j)
    b[2 + j] = static_cast<uint8_t>(static_cast<int8_t>(j - 16));
  std::vector<float> y = decode(DType::Q8_0, b);
  for (int j = 0; j < 32; ++j)
    EXPECT_EQ(y[j], 0.5f * (j - 16)) << j;
  EXPECT_EQ(y[0], -8.0f);
  EXPECT_EQ(y[31], 7.5f);
}

TEST(Blocks, Q4_0) {
  std::vector<uint8_t> b(18);
  put16(b, 0, 0x4000); // d = 2
  for (int j = 0; j < 16; ++j)
    b[2 + j] = static_cast<uint8_t>(j | ((15 - j) << 4));
  std::vector<float> y = decode(DType::Q4_0, b);
  for (int j = 0; j < 16; ++j) {
    EXPECT_EQ(y[j], 2.0f * (j - 8)) << j;           // low nibbles: first 16
    EXPECT_EQ(y[j + 16], 2.0f * (15 - j - 8)) << j; // high nibbles: last 16
  }
  EXPECT_EQ(y[0], -16.0f);
  EXPECT_EQ(y[16], 14.0f);
}

TEST(Blocks, Q4_1) {
  std::vector<uint8_t> b(20);
  put16(b, 0, 0x3800); // d = 0.5
  put16(b, 2, 0xBC00); // m = -1
  for (int j = 0; j < 16; ++j)
    b[4 + j] = static_cast<uint8_t>(j | ((15 - j) << 4));
  std::vector<float> y = decode(DType::Q4_1, b);
  for (int j = 0; j < 16; ++j) {
    EXPECT_EQ(y[j], 0.5f * j - 1.0f) << j;
    EXPECT_EQ(y[j + 16], 0.5f * (15 - j) - 1.0f) << j;
  }
  EXPECT_EQ(y[31], -1.0f);
}

TEST(Blocks, Q4_K) {
  // Sub-block scales and mins (6 bits each) and their packing, by hand:
  //   sc = {1, 2, 3, 4, 17, 33, 50, 63}, m = {0, 1, 2, 3, 20, 40, 5, 63}
  //   bytes 0..3  = sc[j] | (sc[j+4] >> 4) << 6  = 65, 130, 195, 196
  //   bytes 4..7  = m[j]  | (m[j+4]  >> 4) << 6  = 64, 129, 2, 195
  //   bytes 8..11 = (sc[j+4] & 15) | (m[j+4] & 15) << 4 = 65, 129, 82, 255
  const int sc[8] = {1, 2, 3, 4, 17, 33, 50, 63};
  const int mn[8] = {0, 1, 2, 3, 20, 40, 5, 63};
  const uint8_t scales[12] = {65, 130, 195, 196, 64, 129, 2, 195, 65, 129, 82, 255};
  std::vector<uint8_t> b(144);
  put16(b, 0, 0x3C00); // d = 1
  put16(b, 2, 0x3800); // dmin = 0.5
  std::memcpy(b.data() + 4, scales, 12);
  for (int c = 0; c < 4; ++c)
    for (int l = 0; l < 32; ++l)
      b[16 + c * 32 + l] = static_cast<uint8_t>((l % 16) | (((l + c) % 16) << 4));
  std::vector<float> y = decode(DType::Q4_K, b);
  for (int c = 0; c < 4; ++c)
    for (int l = 0; l < 32; ++l) {
      EXPECT_EQ(y[c * 64 + l], 1.0f * sc[2 * c] * (l % 16) - 0.5f * mn[2 * c]) << c << "," << l;
      EXPECT_EQ(y[c * 64 + 32 + l], 1.0f * sc[2 * c + 1] * ((l + c) % 16) - 0.5f * mn[2 * c + 1])
          << c << "," << l;
    }
  // A few literal values: sub-block 7 (sc 63, m 63), element 255: q = (31 + 3) % 16 = 2.
  EXPECT_EQ(y[255], 63.0f * 2 - 31.5f);
  // Sub-block 4 (sc 17, m 20), element 128 + 5: q = 5.
  EXPECT_EQ(y[133], 17.0f * 5 - 10.0f);
}

TEST(Blocks, Q6_K) {
  const int8_t sc[16] = {1, -2, 3, -4, 5, 6, -7, 8, 9, 10, -11, 12, 13, -14, 15, -16};
  std::vector<uint8_t> b(210);
  for (int i = 0; i < 128; ++i)
    b[i] = 0x21; // ql: low nibble 1, high nibble 2
  for (int i = 0; i < 64; ++i)
    b[128 + i] = 0xE4; // qh: bit pairs (from bit 0) 0, 1, 2, 3
  std::memcpy(b.data() + 192, sc, 16);
  put16(b, 208, 0x3400); // d = 0.25
  // With these bytes, in each 128-half and for l < 32:
  //   y[l]      = q 1  | 0 << 4 = 1  -> −31,   y[l + 32] = 1 | 1 << 4 = 17 -> −15,
  //   y[l + 64] = q 2  | 2 << 4 = 34 ->   2,   y[l + 96] = 2 | 3 << 4 = 50 ->  18,
  // with scale sc[8·half + l/16 + {0, 2, 4, 6}].
  std::vector<float> expected(256);
  const int qv[4] = {-31, -15, 2, 18};
  for (int half = 0; half < 2; ++half)
    for (int l = 0; l < 32; ++l)
      for (int part = 0; part < 4; ++part)
        expected[half * 128 + part * 32 + l] = 0.25f * sc[8 * half + l / 16 + 2 * part] * qv[part];
  // Individual overrides that pin the ql/qh positions:
  b[0] = 0x0F;       // ql[0]: element 0 low = 15, element 64 high = 0
  b[128 + 5] = 0x1B; // qh[5]: elements 5, 37, 69, 101 get high bits 3, 2, 1, 0
  b[64 + 10] = 0x5A; // second half ql[10]: element 138 low = 10, element 202 high = 5
  expected[0] = 0.25f * 1 * (15 - 32);        // q = 15 | 0 << 4
  expected[64] = 0.25f * 5 * (0 + 32 - 32);   // q = 0 | 2 << 4 = 32
  expected[5] = 0.25f * 1 * (1 + 48 - 32);    // q = 1 | 3 << 4
  expected[37] = 0.25f * 3 * (1 + 32 - 32);   // q = 1 | 2 << 4
  expected[69] = 0.25f * 5 * (2 + 16 - 32);   // q = 2 | 1 << 4
  expected[101] = 0.25f * -7 * (2 + 0 - 32);  // q = 2 | 0 << 4
  expected[138] = 0.25f * 9 * (10 - 32);      // = -49.5
  expected[202] = 0.25f * 13 * (5 + 32 - 32); // = 16.25
  EXPECT_EQ(expected[138], -49.5f);
  EXPECT_EQ(expected[202], 16.25f);
  std::vector<float> y = decode(DType::Q6_K, b);
  for (int i = 0; i < 256; ++i)
    EXPECT_EQ(y[i], expected[i]) << i;
}

TEST(Blocks, DecodesConsecutiveBlocks) {
  std::vector<uint8_t> two(68);
  put16(two, 0, 0x3C00);  // d = 1
  put16(two, 34, 0x4000); // d = 2
  for (int j = 0; j < 32; ++j) {
    two[2 + j] = static_cast<uint8_t>(j);
    two[36 + j] = static_cast<uint8_t>(-j);
  }
  std::vector<float> y(64);
  decodeRow(DType::Q8_0, two.data(), y.data(), 64);
  EXPECT_EQ(y[31], 31.0f);
  EXPECT_EQ(y[32 + 3], -6.0f);
}

/// decodeKQuantParts splits q4_K and q5_K rows into d·sc·q and dmin·m whose
/// difference is decodeRow's value, bit for bit (both f32 products and one
/// f32 subtraction), over two super-blocks of random bytes with finite d and
/// dmin (q5_K's fifth bits included: decodeRow reads them).
TEST(Blocks, KQuantPartsGiveTheDecodedValues) {
  for (DType t : {DType::Q4_K, DType::Q5_K}) {
    SCOPED_TRACE(dtypeName(t));
    const int64_t bytes = t == DType::Q5_K ? 176 : 144;
    std::vector<uint8_t> b(2 * bytes);
    uint32_t s = 12345;
    for (uint8_t &v : b) {
      s = s * 1664525u + 1013904223u;
      v = static_cast<uint8_t>(s >> 24);
    }
    for (int64_t blk = 0; blk < 2; ++blk) {
      put16(b, blk * bytes, 0x2E66);     // d ≈ 0.1
      put16(b, blk * bytes + 2, 0x2A66); // dmin ≈ 0.05
    }
    std::vector<float> row(512), scaled(512), mins(512);
    decodeRow(t, b.data(), row.data(), 512);
    decodeKQuantParts(t, b.data(), scaled.data(), mins.data(), 512);
    for (int i = 0; i < 512; ++i)
      EXPECT_EQ(scaled[i] - mins[i], row[i]) << i;
  }
}

} // namespace
