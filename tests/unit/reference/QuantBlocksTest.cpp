//===- QuantBlocksTest.cpp - hand-built blocks of the types added in 14.1 ---===//
//
// q5_0, q5_1, q2_k, q3_k, q5_k, iq4_nl, iq4_xs: one block each, with bytes
// chosen so the values can be worked out by hand (the comments do), plus a few
// literal values that pin single bit positions. NumericTest.cpp has the first
// five types; GgufFileTest.cpp compares all of them with the gguf package.
//
//===----------------------------------------------------------------------===//
#include "ir/Numeric.h"

#include <gtest/gtest.h>

#include <cstring>
#include <vector>

using namespace fg;

namespace {

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

TEST(Blocks, TableSizes) {
  struct Row {
    DType t;
    const char *name;
    int64_t elems, bytes;
  } rows[] = {{DType::Q5_0, "q5_0", 32, 22},    {DType::Q5_1, "q5_1", 32, 24},
              {DType::Q2_K, "q2_k", 256, 84},   {DType::Q3_K, "q3_k", 256, 110},
              {DType::Q5_K, "q5_k", 256, 176},  {DType::IQ4_NL, "iq4_nl", 32, 18},
              {DType::IQ4_XS, "iq4_xs", 256, 136}};
  for (const Row &r : rows) {
    EXPECT_EQ(dtypeName(r.t), r.name);
    EXPECT_EQ(parseDType(r.name), r.t) << r.name;
    EXPECT_EQ(dtypeInfo(r.t).blockElems, r.elems) << r.name;
    EXPECT_EQ(dtypeInfo(r.t).blockBytes, r.bytes) << r.name;
    EXPECT_TRUE(isQuantized(r.t)) << r.name;
  }
}

TEST(Blocks, Q5_0) {
  std::vector<uint8_t> b(22);
  put16(b, 0, 0x3800); // d = 0.5
  // qh = 0x80000001: the fifth bit of element 0 and of element 31.
  b[2] = 0x01;
  b[5] = 0x80;
  for (int j = 0; j < 16; ++j)
    b[6 + j] = static_cast<uint8_t>(j | ((15 - j) << 4));
  std::vector<float> y = decode(DType::Q5_0, b);
  for (int j = 1; j < 16; ++j) {
    EXPECT_EQ(y[j], 0.5f * (j - 16)) << j;
    if (j < 15) {
      EXPECT_EQ(y[j + 16], 0.5f * (15 - j - 16)) << j;
    }
  }
  EXPECT_EQ(y[0], 0.0f);   // 0 | 16 -> 0
  EXPECT_EQ(y[1], -7.5f);  // 1 -> -15
  EXPECT_EQ(y[16], -0.5f); // high nibble 15 -> -1
  EXPECT_EQ(y[30], -7.5f); // high nibble 1 -> -15
  EXPECT_EQ(y[31], 0.0f);  // 0 | 16 -> 0
}

TEST(Blocks, Q5_1) {
  std::vector<uint8_t> b(24);
  put16(b, 0, 0x3400); // d = 0.25
  put16(b, 2, 0x3C00); // m = 1
  b[6] = b[7] = 0xFF;  // qh = 0xFFFF0000: every high-nibble element gets bit 4
  for (int j = 0; j < 16; ++j)
    b[8 + j] = static_cast<uint8_t>(j | 0xF0);
  std::vector<float> y = decode(DType::Q5_1, b);
  for (int j = 0; j < 16; ++j) {
    EXPECT_EQ(y[j], 0.25f * j + 1) << j;
    EXPECT_EQ(y[j + 16], 8.75f) << j; // 0.25 · 31 + 1
  }
}

TEST(Blocks, Q2_K) {
  // Scales: low nibble sc = i + 1 (mod 16), high nibble m = i % 4.
  std::vector<uint8_t> b(84);
  for (int i = 0; i < 16; ++i)
    b[i] = static_cast<uint8_t>(((i + 1) & 0xF) | ((i % 4) << 4));
  for (int i = 0; i < 64; ++i)
    b[16 + i] = 0xE4; // bit pairs (from bit 0) 0, 1, 2, 3: group j of 32 gets q = j
  put16(b, 80, 0x3C00); // d = 1
  put16(b, 82, 0x3800); // dmin = 0.5
  b[16 + 32 + 7] = 0x1B; // second half, l = 7: q = 3, 2, 1, 0 in groups 0..3
  std::vector<float> y = decode(DType::Q2_K, b);
  for (int e = 0; e < 256; ++e) {
    int i = e / 16, j = (e % 128) / 32, q = j;
    if (e >= 128 && e % 32 == 7)
      q = 3 - j;
    EXPECT_EQ(y[e], static_cast<float>(((i + 1) & 0xF) * q) - 0.5f * (i % 4)) << e;
  }
  EXPECT_EQ(y[135], 9.0f * 3 - 0.0f);  // group 8: sc 9, m 0; q 3 (overridden)
  EXPECT_EQ(y[231], 15.0f * 0 - 1.0f); // group 14: sc 15, m 2; q 0 (overridden)
  EXPECT_EQ(y[255], 0.0f * 3 - 1.5f);  // group 15: sc 16 & 15 = 0, m 3
}

TEST(Blocks, Q3_K) {
  // 6-bit scales stored + 32: every group 33 (s = 1) but group 0: 30 (s = −2),
  // group 13: 63 (s = 31) and group 15: 0 (s = −32). Packed by hand:
  //   bytes 0..7 : low nibble = v[i] & 15, high nibble = v[i + 8] & 15
  //   bytes 8..11: bits 2k..2k+1 of byte 8 + i % 4 = v[i] >> 4, k = i / 4
  //   v = 33 (lo 1, hi 2), 30 (lo 14, hi 1), 63 (lo 15, hi 3), 0
  const uint8_t scales[12] = {0x1E, 0x11, 0x11, 0x11, 0x11, 0xF1, 0x11, 0x01,
                              0xA9, 0xEA, 0xAA, 0x2A};
  const int s[16] = {-2, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 31, 1, -32};
  std::vector<uint8_t> b(110);
  for (int i = 0; i < 32; ++i)
    b[i] = 0xFF; // hmask: every third bit set, no −4
  for (int i = 0; i < 64; ++i)
    b[32 + i] = 0xE4; // low bits: group j of 32 gets q = j
  std::memcpy(b.data() + 96, scales, 12);
  put16(b, 108, 0x3C00); // d = 1
  b[3] = 0xFE;  // hmask[3] bit 0 (half 0, j 0): element 3 gets q = 0 − 4
  b[20] = 0x7F; // hmask[20] bit 7 (half 1, j 3): element 244 gets q = 3 − 4
  std::vector<float> y = decode(DType::Q3_K, b);
  for (int e = 0; e < 256; ++e) {
    int q = (e % 128) / 32;
    if (e == 3 || e == 244)
      q -= 4;
    EXPECT_EQ(y[e], static_cast<float>(s[e / 16] * q)) << e;
  }
  EXPECT_EQ(y[3], 8.0f);    // −2 · −4
  EXPECT_EQ(y[220], 62.0f); // group 13, q 2
  EXPECT_EQ(y[244], 32.0f); // −32 · −1
  EXPECT_EQ(y[245], -96.0f);
}

TEST(Blocks, Q5_K) {
  // The scales of NumericTest's Q4_K block (same packing):
  const int sc[8] = {1, 2, 3, 4, 17, 33, 50, 63};
  const int mn[8] = {0, 1, 2, 3, 20, 40, 5, 63};
  const uint8_t scales[12] = {65, 130, 195, 196, 64, 129, 2, 195, 65, 129, 82, 255};
  std::vector<uint8_t> b(176);
  put16(b, 0, 0x3C00); // d = 1
  put16(b, 2, 0x3800); // dmin = 0.5
  std::memcpy(b.data() + 4, scales, 12);
  for (int l = 0; l < 32; ++l)
    b[16 + l] = 0x55; // qh: bits 0, 2, 4, 6: the low-nibble half of every chunk gets +16
  for (int i = 0; i < 128; ++i)
    b[48 + i] = 0x21; // low nibble 1, high nibble 2
  b[16 + 9] = 0xFF;   // qh[9]: element 64c + 32 + 9 gets +16 too
  std::vector<float> y = decode(DType::Q5_K, b);
  for (int c = 0; c < 4; ++c)
    for (int l = 0; l < 32; ++l) {
      int hi = l == 9 ? 18 : 2;
      EXPECT_EQ(y[64 * c + l], sc[2 * c] * 17.0f - 0.5f * mn[2 * c]) << c << "," << l;
      EXPECT_EQ(y[64 * c + 32 + l], sc[2 * c + 1] * static_cast<float>(hi) - 0.5f * mn[2 * c + 1])
          << c << "," << l;
    }
  EXPECT_EQ(y[0], 17.0f);               // sc 1, m 0, q 17
  EXPECT_EQ(y[233], 63.0f * 18 - 31.5f); // sub-block 7, q 2 + 16
}

TEST(Blocks, IQ4_NL) {
  std::vector<uint8_t> b(18);
  put16(b, 0, 0x3800); // d = 0.5
  for (int j = 0; j < 16; ++j)
    b[2 + j] = static_cast<uint8_t>(j | ((15 - j) << 4));
  std::vector<float> y = decode(DType::IQ4_NL, b);
  const int levels[16] = {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113};
  for (int j = 0; j < 16; ++j) {
    EXPECT_EQ(y[j], 0.5f * levels[j]) << j;
    EXPECT_EQ(y[j + 16], 0.5f * levels[15 - j]) << j;
  }
  EXPECT_EQ(y[0], -63.5f);
  EXPECT_EQ(y[8], 0.5f);
  EXPECT_EQ(y[16], 56.5f);
}

TEST(Blocks, IQ4_XS) {
  // Sub-block scales ls (stored + 32) = 33, 34, 31, 0, 63, 32, 40, 1, i.e.
  // l = 1, 2, −1, −32, 31, 0, 8, −31. Low nibbles 1, 2, 15, 0, 15, 0, 8, 1 in
  // scales_l = 0x21, 0x0F, 0x0F, 0x18; top bits 2, 2, 1, 0, 3, 2, 2, 0 in
  // scales_h = 2 | 2<<2 | 1<<4 | 3<<8 | 2<<10 | 2<<12 = 0x2B1A.
  const int l[8] = {1, 2, -1, -32, 31, 0, 8, -31};
  std::vector<uint8_t> b(136);
  put16(b, 0, 0x3400); // d = 0.25
  put16(b, 2, 0x2B1A);
  b[4] = 0x21;
  b[5] = 0x0F;
  b[6] = 0x0F;
  b[7] = 0x18;
  for (int i = 0; i < 128; ++i)
    b[8 + i] = 0x8F; // low nibble 15 (level 113), high nibble 8 (level 1)
  std::vector<float> y = decode(DType::IQ4_XS, b);
  for (int i = 0; i < 8; ++i)
    for (int j = 0; j < 16; ++j) {
      EXPECT_EQ(y[32 * i + j], 0.25f * l[i] * 113) << i << "," << j;
      EXPECT_EQ(y[32 * i + 16 + j], 0.25f * l[i]) << i << "," << j;
    }
  EXPECT_EQ(y[0], 28.25f);
  EXPECT_EQ(y[96], -904.0f);
  EXPECT_EQ(y[128], 875.75f);
  EXPECT_EQ(y[255], -7.75f);
}

} // namespace
