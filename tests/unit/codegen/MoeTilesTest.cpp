//===- MoeTilesTest.cpp - the grouped expert GEMM's tile table on the CPU ---===//
//
// kernels/moe_tiles.cuh is plain index arithmetic that the routing kernel runs
// on the device; here it runs on the host: experts with zero, one and many
// rows, the out-of-range group last, and the grid bound moeMaxTiles.
//
//===----------------------------------------------------------------------===//
#define FG_MOE_FN inline
#include "codegen/cuda/kernels/moe_tiles.cuh"

#include <gtest/gtest.h>

#include <random>
#include <vector>

namespace {

using fg::MoeTile;

std::vector<MoeTile> table(const std::vector<int> &counts, int bm, std::vector<int> &offsets) {
  long long pairs = 0;
  for (int c : counts)
    pairs += c;
  std::vector<MoeTile> tiles(static_cast<size_t>(
      fg::moeMaxTiles(pairs, static_cast<long long>(counts.size()), bm)));
  offsets.assign(counts.size(), -1);
  int n = fg::moeTileTable(counts.data(), static_cast<int>(counts.size()), bm, offsets.data(),
                           tiles.data());
  EXPECT_LE(n, static_cast<int>(tiles.size())) << "the grid bound holds";
  tiles.resize(static_cast<size_t>(n));
  return tiles;
}

/// Zero rows: no tile; one row: one tile of 1; 70 rows at 32: 32, 32, 6; the
/// offsets are the exclusive prefix sum; tiles go in group order.
TEST(MoeTiles, ZeroOneAndManyRows) {
  std::vector<int> offsets;
  std::vector<MoeTile> t = table({0, 1, 70, 0, 32, 3}, 32, offsets);
  EXPECT_EQ(offsets, (std::vector<int>{0, 0, 1, 71, 71, 103}));
  ASSERT_EQ(t.size(), 6u);
  auto is = [](const MoeTile &x, int g, int row0, int rows) {
    return x.group == g && x.row0 == row0 && x.rows == rows;
  };
  EXPECT_TRUE(is(t[0], 1, 0, 1));
  EXPECT_TRUE(is(t[1], 2, 1, 32));
  EXPECT_TRUE(is(t[2], 2, 33, 32));
  EXPECT_TRUE(is(t[3], 2, 65, 6));
  EXPECT_TRUE(is(t[4], 4, 71, 32));
  EXPECT_TRUE(is(t[5], 5, 103, 3)); // the last group: out-of-range ids
}

TEST(MoeTiles, EmptyAndAllInOneGroup) {
  std::vector<int> offsets;
  EXPECT_TRUE(table({0, 0, 0}, 32, offsets).empty());
  EXPECT_EQ(offsets, (std::vector<int>{0, 0, 0}));
  std::vector<MoeTile> t = table({0, 64, 0}, 32, offsets);
  ASSERT_EQ(t.size(), 2u);
  EXPECT_EQ(t[1].row0, 32);
  EXPECT_EQ(t[1].rows, 32);
}

/// Random counts: every row of [0, pairs) is in exactly one tile of its own
/// group, tiles hold 1..bm rows, and the count stays within moeMaxTiles
/// (including the worst case: every group one row over a multiple of bm).
TEST(MoeTiles, CoversEveryRowOnceWithinTheBound) {
  std::mt19937 rng(7);
  for (int trial = 0; trial < 200; ++trial) {
    int groups = 1 + static_cast<int>(rng() % 130), bm = trial % 2 ? 32 : 16;
    std::vector<int> counts(static_cast<size_t>(groups));
    for (int &c : counts)
      c = trial % 5 == 0 ? bm + 1 : static_cast<int>(rng() % 80);
    std::vector<int> offsets;
    std::vector<MoeTile> t = table(counts, bm, offsets);
    int pairs = 0;
    for (int c : counts)
      pairs += c;
    std::vector<int> seen(static_cast<size_t>(pairs), 0);
    for (const MoeTile &x : t) {
      ASSERT_GE(x.rows, 1);
      ASSERT_LE(x.rows, bm);
      ASSERT_GE(x.row0, offsets[static_cast<size_t>(x.group)]);
      ASSERT_LE(x.row0 + x.rows,
                offsets[static_cast<size_t>(x.group)] + counts[static_cast<size_t>(x.group)]);
      for (int r = x.row0; r < x.row0 + x.rows; ++r)
        ++seen[static_cast<size_t>(r)];
    }
    for (int s : seen)
      ASSERT_EQ(s, 1);
  }
}

} // namespace
