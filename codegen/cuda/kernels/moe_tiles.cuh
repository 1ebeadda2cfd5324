//===- moe_tiles.cuh - the tile table of the grouped expert GEMM -------------===//
//
// Pure index arithmetic, shared by the routing kernel (moe.cuh, under NVRTC)
// and the host (the emitter sizes the grid with moeMaxTiles; a CPU unit test
// checks moeTileTable on experts with zero, one and many rows). Nothing here
// touches memory other than its arguments, so it compiles as host C++ too
// (FG_MOE_FN: `static __device__ __forceinline__` under NVRTC, `inline` on
// the host).
//
// The (token, slot) pairs of a prefill chunk are sorted by expert: group g
// (expert g, and group E for pairs whose expert id is out of range) owns rows
// [offset_g, offset_g + count_g) of the permutation. A tile is up to BM rows
// of one group: group g has ⌈count_g / BM⌉ tiles, in order, so the table is
//   tile i = (group, first row in the permutation, rows)
// and every grid row of the GEMM takes one tile (blocks past the table's
// length exit). Σ_g ⌈c_g / BM⌉ ≤ ⌊P / BM⌋ + groups, the grid's bound.
//
//===----------------------------------------------------------------------===//
#ifndef FG_MOE_FN
#define FG_MOE_FN static __device__ __forceinline__
#endif

namespace fg {

/// One tile of the grouped GEMM.
struct MoeTile {
  int group; ///< expert index; == the number of experts: the out-of-range group
  int row0;  ///< first row in the permutation
  int rows;  ///< 1 .. BM
  int pad;
};

/// The most tiles `pairs` rows over `groups` groups can need with `bm` rows a tile.
FG_MOE_FN long long moeMaxTiles(long long pairs, long long groups, long long bm) {
  return pairs / bm + (groups < pairs ? groups : pairs);
}

/// Writes the tile table for `counts[0 .. groups)` (rows per group) and each
/// group's first row into `offsets` (an exclusive prefix sum); returns the
/// number of tiles.
FG_MOE_FN int moeTileTable(const int *counts, int groups, int bm, int *offsets, MoeTile *tiles) {
  int off = 0, n = 0;
  for (int g = 0; g < groups; ++g) {
    offsets[g] = off;
    for (int r = 0; r < counts[g]; r += bm) {
      MoeTile t;
      t.group = g;
      t.row0 = off + r;
      t.rows = counts[g] - r < bm ? counts[g] - r : bm;
      t.pad = 0;
      tiles[n++] = t;
    }
    off += counts[g];
  }
  return n;
}

} // namespace fg
