//===- moe.cuh - prefill expert matmuls: route, then one grouped GEMM ---------===//
//
// matmul_id(x [T, X, K], w [E, N, K], ids [T, kk]) -> y [T, kk, N] (and the
// two-stream fused.gated_matmul_id with its GLU epilogue) for a prefill chunk,
// where one GEMV per (token, slot) pair would read every used expert's
// weights once per pair. Two launches, everything on the device (the counts
// never reach the host, so a CUDA graph captures it):
//
//   moeRoute  (one block): counts per expert (shared-memory atomics), the
//             tile table (moe_tiles.cuh: exclusive prefix sum + ⌈count / BM⌉
//             tiles per expert, by one thread in expert order), then the
//             permutation: each pair takes the next row of its expert's
//             range. The order inside an expert's range depends on the
//             atomics' timing, but nothing else does: every output row is
//             computed from its own x row with the same k-order, so results
//             are bit-identical from run to run.
//   moeGemm   grid (⌈N / BN⌉, max tiles): block (n tile, tile i) computes the
//             rows of tile i (pairs of one expert) × BN columns on the tensor
//             cores and writes each row straight to its pair's row of y (the
//             un-permute is the store). Blocks past the table's length exit.
//
// Fragments (mma.m16n8k16, see attention_prefill.cuh for the layouts): BM =
// 64 rows (four m16 tiles) or 32 (two) × BN = 64 columns over NT = 128 or 256
// threads; with MT = BM / 16 m tiles and CG = NT / 32 / MT column groups,
// warp w takes m tile w % MT and the BN / CG / 8 n8 tiles of group w / MT
// (128 threads: BM = 64, all 64 columns; BM = 32, 32 of them). The
// emitter's rule: 64 rows for one weight stream — a whole expert at W-moe's
// 512-token prefill (~32 pairs an expert, rarely over 64), so its weights are
// read once where 32-row tiles read about half of them twice (down 3.99 ->
// 3.73 ms on the H200) — and 32 for 16-bit gate|up's two streams, where 64
// rows doubled each block's mmas and lost (5.33 -> 6.06 ms); quantised
// gate|up takes 64 (decoding, once a tile, is its cost). K advances KT at a time
// through shared memory: A = x rows gathered by the permutation, split into
// hi + lo halves in the weight's mma type (~22 bits of x survive, as in the
// GEMV); B = weight rows n (row-major [N, K] is B's column-major layout, so
// b0 / b1 are 32-bit words of one row). Rows past the tile and columns past
// N load zeros. Pairs whose expert id is out of range form the last group:
// their tiles skip the loop and store the epilogue of zeros (the GEMV's rule).
//
// Block-quantised experts (C::kQuant, EmitOptions::groupedExpertQuant): the
// B units come from moeLoadQ, the GEMV's block decoder writing 8 f16 weights,
// and the mmas run in f16; x is one f16 (C::kXHalf, the quantised GEMV's rule,
// EmitOptions::gemvQuantXHalf), so one mma per fragment instead of hi + lo.
//
// K advances C::KT (32 or 64) a step: the emitter's rule and its measurement
// are in MoeEmitter.cpp.
//
// Scratch: [0] the tile count, tiles (int4) from int 4, the permutation after
// them (Cfg::kTilesOff, kPermOff).
//
//===----------------------------------------------------------------------===//

namespace fg {

template <class C> struct MoeArgs {
  float *y;
  int *scratch;
  const typename C::X *x;
  const typename C::W *w0; ///< 16-bit rows, or block-quantised bytes (C::kQuant)
  const typename C::W *w1;
  const typename C::Ids *ids;
  const typename C::B0 *b0;
  const typename C::B1 *b1;
};

/// The expert of pair p, or E when its id is out of range.
template <class C> static __device__ __forceinline__ int moeGroup(const typename C::Ids *ids,
                                                                  long long p) {
  const long long tok = p / C::kk, j = p % C::kk;
  const long long e = (long long)ids[C::ids_off + tok * C::ids_st + j * C::ids_sj];
  return e >= 0 && e < C::E ? (int)e : (int)C::E;
}

template <class C> static __device__ __forceinline__ void moeRoute(const MoeArgs<C> &a) {
  constexpr int G = (int)C::E + 1;
  __shared__ int cnt[G], cursor[G];
  for (int g = threadIdx.x; g < G; g += blockDim.x)
    cnt[g] = 0;
  __syncthreads();
  for (long long p = threadIdx.x; p < C::kPairs; p += blockDim.x)
    atomicAdd(&cnt[moeGroup<C>(a.ids, p)], 1);
  __syncthreads();
  MoeTile *tiles = reinterpret_cast<MoeTile *>(a.scratch + C::kTilesOff);
  if (threadIdx.x == 0)
    a.scratch[0] = moeTileTable(cnt, G, C::BM, cursor, tiles);
  __syncthreads();
  int *perm = a.scratch + C::kPermOff;
  for (long long p = threadIdx.x; p < C::kPairs; p += blockDim.x)
    perm[atomicAdd(&cursor[moeGroup<C>(a.ids, p)], 1)] = (int)p;
}

template <class C> struct __align__(16) MoeShared {
  unsigned short ah[C::BM][C::KT + 8];                         ///< x hi
  unsigned short al[C::kXHalf ? 1 : C::BM][C::KT + 8];        ///< x lo
  unsigned short b[C::Epi::kStreams][C::BN][C::KT + 8];     ///< weight rows
  int pair[C::BM];
};

/// The epilogue of both grouped GEMMs: output n of pair p from the streams'
/// sums g, u (+ expert e's biases where valid), through Epi, to y's row p.
template <class C>
static __device__ __forceinline__ void moeStore(const MoeArgs<C> &a, int p, long long n,
                                                long long e, bool valid, float g, float u) {
  float v[2] = {g, u};
  if constexpr (C::kBias) {
    if (valid) {
      v[0] += fg_to_f(a.b0[C::b0_off + e * C::b0_se + n * C::b0_sn]);
      if (C::Epi::kStreams == 2)
        v[1] += fg_to_f(a.b1[C::b1_off + e * C::b1_se + n * C::b1_sn]);
    }
  }
  a.y[(long long)p * C::N + n] = C::Epi::apply(v);
}

/// Element k of weight row n of expert e, stream s (zeros past N or K).
template <class C, class Dec, int S>
static __device__ __forceinline__ uint4 moeLoadW(const typename Dec::T *w, long long e, long long n,
                                                 long long k0) {
  constexpr long long off = S == 0 ? C::w0_off : C::w1_off, ld = S == 0 ? C::w0_ld : C::w1_ld,
                      ks = S == 0 ? C::w0_ks : C::w1_ks, es = S == 0 ? C::w0_es : C::w1_es;
  if (n >= C::N)
    return make_uint4(0, 0, 0, 0);
  const typename Dec::T *row = w + off + e * es + n * ld;
  if constexpr (C::kWVec) {
    if (k0 + 8 <= C::K)
      return fg_load_stream(row + k0);
  }
  union {
    typename Dec::T v[8];
    uint4 u;
  } r;
#pragma unroll
  for (int i = 0; i < 8; ++i)
    r.v[i] = k0 + i < C::K ? row[(k0 + i) * ks] : typename Dec::T{};
  return r.u;
}

/// A quantised unit's raw bytes (C::Q::Raw); nothing for 16-bit weights.
template <class C, bool Q = C::kQuant> struct MoeRaw {
  struct type {};
};
template <class C> struct MoeRaw<C, true> {
  using type = typename C::Q::Raw;
};

/// A unit of a block-quantised expert (C::kQuant): weights 32 · step + 8t ..
/// + 7 of row n (K a multiple of 32), decoded to f16 by the GEMV's block
/// decoder C::Q (the unit (32-weight step, quarter) that dequant.cuh decodes).
/// Offsets and strides are in bytes. Live: inside N and K.
template <class C, int S>
static __device__ __forceinline__ bool moeQLive(long long n, long long step) {
  return n < C::N && 32 * step < C::K;
}

/// The loads of that unit into raw (none past N or K).
template <class C, int S>
static __device__ __forceinline__ void moeLoadQRaw(const unsigned char *w, long long e,
                                                   long long n, long long step, int t,
                                                   typename C::Q::Raw &raw) {
  constexpr long long off = S == 0 ? C::w0_off : C::w1_off, ld = S == 0 ? C::w0_ld : C::w1_ld,
                      es = S == 0 ? C::w0_es : C::w1_es;
  if (moeQLive<C, S>(n, step))
    C::Q::load(w + off + e * es + n * ld, step, t, raw);
}

/// Its 8 f16 weights from raw (zeros past N or K).
template <class C, int S>
static __device__ __forceinline__ uint4 moeDecodeQ(const typename C::Q::Raw &raw, long long n,
                                                   long long step, int t) {
  return moeQLive<C, S>(n, step) ? C::Q::half8(raw, step, t) : make_uint4(0, 0, 0, 0);
}

template <class C, int S>
static __device__ __forceinline__ uint4 moeLoadQ(const unsigned char *w, long long e, long long n,
                                                 long long step, int t) {
  typename C::Q::Raw raw;
  moeLoadQRaw<C, S>(w, e, n, step, t, raw);
  return moeDecodeQ<C, S>(raw, n, step, t);
}

/// Where quantised unit u of a thread lies in a k-step at k0: its tile row r,
/// column c (of the step), 32-weight step and quarter t. C::kQRowUnits: units
/// BU · x .. + BU - 1, quarters of one row's step; else x, x + NT, ...
template <class C, int BU, int UR> struct MoeQUnit {
  int r, c, t;
  long long step;
  __device__ __forceinline__ MoeQUnit(long long k0, int u) {
    const int i = C::kQRowUnits ? BU * (int)threadIdx.x + u : (int)threadIdx.x + C::NT * u;
    r = i / UR;
    c = 8 * (i % UR);
    if constexpr (C::kQRowUnits) {
      // The step from the first unit's column, so the compiler sees one step
      // (and merges the scale loads and arithmetic) for all BU <= 4 units.
      const int c0 = 8 * ((BU * (int)threadIdx.x) % UR);
      step = (k0 + c0) >> 5;
      t = ((c0 >> 3) & 3) + u;
    } else {
      step = (k0 + c) >> 5;
      t = (int)((k0 + c) >> 3) & 3;
    }
  }
};

template <class C> static __device__ __forceinline__ void moeGemm(const MoeArgs<C> &a) {
  using Dec = typename C::Dec0;
  constexpr int S = C::Epi::kStreams, BM = C::BM, BN = C::BN, KT = C::KT, NT = C::NT;
  static_assert((BM == 32 || BM == 64) && BN == 64 && (KT == 32 || KT == 64) &&
                    (NT == 128 || NT == 256),
                "the warp layout below");
  // Warp w takes m tile w % MT and, of the CG column groups of BN / CG
  // columns, group w / MT: NJ n8 tiles.
  constexpr int MT = BM / 16, CG = NT / 32 / MT, NJ = BN / CG / 8;
  static_assert(CG >= 1 && CG * MT * 32 == NT && NJ >= 1, "whole warps over the tile");
  constexpr int UR = KT / 8; // 8-element units in a row of a k-step
  constexpr int AU = BM * UR / NT, BU = BN * UR / NT; // A / B units a thread
  static_assert(AU >= 1 && BU >= 1 && AU * NT == BM * UR && BU * NT == BN * UR,
                "whole units a thread");
  __shared__ MoeShared<C> sh;
  if ((int)blockIdx.y >= a.scratch[0])
    return; // past the tile table (the whole block leaves before any barrier)
  const MoeTile tile = reinterpret_cast<const MoeTile *>(a.scratch + C::kTilesOff)[blockIdx.y];
  const int *perm = a.scratch + C::kPermOff;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, g = lane >> 2, t = lane & 3;
  const int mt = warp % MT, nw = (BN / CG) * (warp / MT);
  const long long n0 = (long long)blockIdx.x * BN, e = tile.group;
  const bool valid = tile.group < C::E;
  if (threadIdx.x < BM)
    sh.pair[threadIdx.x] = threadIdx.x < tile.rows ? perm[tile.row0 + threadIdx.x] : -1;
  __syncthreads();

  float acc[S][NJ][4];
#pragma unroll
  for (int s = 0; s < S; ++s)
#pragma unroll
    for (int j = 0; j < NJ; ++j)
#pragma unroll
      for (int i = 0; i < 4; ++i)
        acc[s][j][i] = 0.0f;

  // Software-pipelined over k: the global loads of step k0 + KT go out
  // before step k0's mmas, so each block keeps one step's bytes in flight
  // while it computes (the first form waited a full round trip per 32-wide
  // step: W-moe-12's 512-token prefill spent 12.2 ms, 78 %, here). A k-step
  // of 64 (C::KT) halves the steps, and so the round trips, of a block.
  // Unit i of a step (A: i < BM · UR, B: i < BN · UR) is 8 k of row i / UR
  // from column 8 · (i % UR); thread x takes units x, x + NT, ... (whole
  // 128-byte rows of a warp's load), or, for quantised B with
  // C::kQRowUnits, units BU · x .. + BU - 1: quarters of one row's 32-weight
  // step, so the decoder's scale loads and scale arithmetic are the same for
  // all of them (one per step, not one per unit, once the compiler merges
  // them).
  auto bUnit = [](int u) {
    return C::kQRowUnits ? BU * (int)threadIdx.x + u : (int)threadIdx.x + NT * u;
  };
  int ap[AU];
  const typename C::X *xr[AU];
#pragma unroll
  for (int v = 0; v < AU; ++v) {
    ap[v] = sh.pair[(threadIdx.x + NT * v) / UR];
    const long long atok = ap[v] >= 0 ? ap[v] / C::kk : 0, aj = ap[v] >= 0 ? ap[v] % C::kk : 0;
    xr[v] = a.x + C::x_off + atok * C::x_st + aj * C::x_sj;
  }
  float xv[AU][8];
  // C::kXVec16: x arrives in f16 (the gemm-inputs pass converted it once,
  // FG_DEBUG_MOE_HALF_X=1) and a unit's 8 halves go to the tile as loaded.
  uint4 xh[C::kXVec16 ? AU : 1];
  uint4 wv[C::kQDeferred ? 1 : BU][S];
  // Deferred decode (C::kQDeferred): a step's raw block bytes wait in
  // registers during the mmas of the step before, and are decoded only when
  // stored to the tile; otherwise loadStep decodes them as soon as they
  // arrive, before the mmas it is meant to overlap.
  typename MoeRaw<C>::type wq[C::kQDeferred ? BU : 1][S];
  auto loadStep = [&](long long k0) {
#pragma unroll
    for (int v = 0; v < AU; ++v) {
      const long long k = k0 + 8 * ((threadIdx.x + NT * v) % UR);
      if constexpr (C::kXVec16) { // f16 rows, 16-byte aligned units
        if (ap[v] >= 0 && k + 8 <= C::K) {
          xh[v] = *reinterpret_cast<const uint4 *>(xr[v] + k);
        } else {
          unsigned h[8];
#pragma unroll
          for (int i = 0; i < 8; ++i)
            h[i] = ap[v] >= 0 && k + i < C::K ? xr[v][(k + i) * C::x_ks].b : 0u;
          xh[v] = make_uint4(h[0] | h[1] << 16, h[2] | h[3] << 16, h[4] | h[5] << 16,
                             h[6] | h[7] << 16);
        }
        continue;
      }
      if constexpr (C::kXVec) { // f32 rows, 16-byte aligned units
        if (ap[v] >= 0 && k + 8 <= C::K) {
          const float4 lo = *reinterpret_cast<const float4 *>(xr[v] + k);
          const float4 hi = *reinterpret_cast<const float4 *>(xr[v] + k + 4);
          xv[v][0] = lo.x, xv[v][1] = lo.y, xv[v][2] = lo.z, xv[v][3] = lo.w;
          xv[v][4] = hi.x, xv[v][5] = hi.y, xv[v][6] = hi.z, xv[v][7] = hi.w;
          continue;
        }
      }
#pragma unroll
      for (int i = 0; i < 8; ++i)
        xv[v][i] = ap[v] >= 0 && k + i < C::K ? fg_to_f(xr[v][(k + i) * C::x_ks]) : 0.0f;
    }
    if constexpr (C::kQDeferred) {
      static_assert(!C::kQRowUnits || BU <= 4, "a thread's units lie in one 32-weight step");
#pragma unroll
      for (int u = 0; u < BU; ++u) {
        const MoeQUnit<C, BU, UR> q(k0, u);
        moeLoadQRaw<C, 0>(a.w0, e, n0 + q.r, q.step, q.t, wq[u][0]);
        if constexpr (S == 2)
          moeLoadQRaw<C, 1>(a.w1, e, n0 + q.r, q.step, q.t, wq[u][S - 1]);
      }
    } else if constexpr (C::kQRowUnits) {
      // One row, one 32-weight step, quarters t0 .. t0 + BU - 1.
      static_assert(BU <= 4, "a thread's quantised units lie in one 32-weight step");
      const int i0 = BU * (int)threadIdx.x, r = i0 / UR, c0 = 8 * (i0 % UR);
      const long long step = (k0 + c0) >> 5;
      const int t0 = (c0 >> 3) & 3;
#pragma unroll
      for (int u = 0; u < BU; ++u) {
        wv[u][0] = moeLoadQ<C, 0>(a.w0, e, n0 + r, step, t0 + u);
        if constexpr (S == 2)
          wv[u][S - 1] = moeLoadQ<C, 1>(a.w1, e, n0 + r, step, t0 + u);
      }
    } else if constexpr (C::kQuant) {
#pragma unroll
      for (int u = 0; u < BU; ++u) {
        const int i = bUnit(u), r = i / UR, c = 8 * (i % UR);
        const long long k = k0 + c;
        wv[u][0] = moeLoadQ<C, 0>(a.w0, e, n0 + r, k >> 5, (int)(k >> 3) & 3);
        if constexpr (S == 2)
          wv[u][S - 1] = moeLoadQ<C, 1>(a.w1, e, n0 + r, k >> 5, (int)(k >> 3) & 3);
      }
    } else {
#pragma unroll
      for (int u = 0; u < BU; ++u) {
        const int i = bUnit(u), r = i / UR, c = 8 * (i % UR);
        wv[u][0] = moeLoadW<C, typename C::Dec0, 0>(a.w0, e, n0 + r, k0 + c);
        if constexpr (S == 2)
          wv[u][S - 1] = moeLoadW<C, typename C::Dec1, 1>(a.w1, e, n0 + r, k0 + c);
      }
    }
  };
  // This lane's ldmatrix row addresses (shared space) at k-step column 0 of
  // the tile — A rows 16mt + (lane & 15) at column 8(lane / 16); B rows
  // nw + 8(lane / 16) + (lane & 7) of stream 0 at column 8((lane / 8) & 1) —
  // stepped by constants in the loop.
  const unsigned lda =
      (unsigned)__cvta_generic_to_shared(&sh.ah[16 * mt + (lane & 15)][8 * (lane >> 4)]);
  unsigned ldaLo = 0;
  if constexpr (!C::kXHalf)
    ldaLo = (unsigned)__cvta_generic_to_shared(&sh.al[16 * mt + (lane & 15)][8 * (lane >> 4)]);
  const unsigned ldb = (unsigned)__cvta_generic_to_shared(
      &sh.b[0][nw + 8 * (lane >> 4) + (lane & 7)][8 * ((lane >> 3) & 1)]);
  if (valid)
    loadStep(0);
  for (long long k0 = 0; valid && k0 < C::K; k0 += KT) {
    // A: BM rows × KT k, AU 8-element units per thread, split hi + lo (or
    // one half, C::kXHalf). A unit's 8 halves are one 16-byte store (a
    // quarter warp writes one row's 128 contiguous bytes: no bank conflict,
    // where four 32-bit stores to rows 144 bytes apart collide).
#pragma unroll
    for (int v = 0; v < AU; ++v) {
      const int i = threadIdx.x + NT * v, ar = i / UR, ac = 8 * (i % UR);
      if constexpr (C::kXVec16) {
        *reinterpret_cast<uint4 *>(&sh.ah[ar][ac]) = xh[v];
        continue;
      }
      // x pair q of the unit: hi (and lo) in the mma type.
      auto split = [&](int q, unsigned &hi, unsigned &lo) {
        hi = Dec::pack(xv[v][2 * q], xv[v][2 * q + 1]);
        if constexpr (!C::kXHalf) {
          float h0, h1;
          Dec::unpack(hi, h0, h1);
          lo = Dec::pack(xv[v][2 * q] - h0, xv[v][2 * q + 1] - h1);
        }
      };
      unsigned hi[4], lo[4];
#pragma unroll
      for (int q = 0; q < 4; ++q)
        split(q, hi[q], lo[q]);
      *reinterpret_cast<uint4 *>(&sh.ah[ar][ac]) = make_uint4(hi[0], hi[1], hi[2], hi[3]);
      if constexpr (!C::kXHalf)
        *reinterpret_cast<uint4 *>(&sh.al[ar][ac]) = make_uint4(lo[0], lo[1], lo[2], lo[3]);
    }
    // B: per stream 64 rows × KT k, BU 16-byte units per thread.
#pragma unroll
    for (int u = 0; u < BU; ++u) {
      if constexpr (C::kQDeferred) {
        const MoeQUnit<C, BU, UR> q(k0, u);
        *reinterpret_cast<uint4 *>(&sh.b[0][q.r][q.c]) =
            moeDecodeQ<C, 0>(wq[u][0], n0 + q.r, q.step, q.t);
        if constexpr (S == 2)
          *reinterpret_cast<uint4 *>(&sh.b[S - 1][q.r][q.c]) =
              moeDecodeQ<C, 1>(wq[u][S - 1], n0 + q.r, q.step, q.t);
      } else {
        const int i = bUnit(u), r = i / UR, c = 8 * (i % UR);
#pragma unroll
        for (int s = 0; s < S; ++s)
          *reinterpret_cast<uint4 *>(&sh.b[s][r][c]) = wv[u][s];
      }
    }
    __syncthreads();
    if (k0 + KT < C::K)
      loadStep(k0 + KT); // in flight during this step's mmas
    // A warp whose m tile lies past the tile's rows (C::kSkipRows) has no
    // mma to do: its rows are zeros and no epilogue stores them. Experts
    // hold ~32 pairs at W-moe's 512-token prefill, so half the m tiles of a
    // 64-row tile are empty; the warp still loads and decodes its share of
    // the weights.
#pragma unroll
    for (int ks = 0; ks < KT / 16; ++ks) {
      if (C::kSkipRows && 16 * mt >= tile.rows)
        break;
      unsigned ah[4], al[4] = {0, 0, 0, 0};
      // A by ldmatrix: lanes 0-15 address rows 16mt .. + 15 at column 16ks,
      // lanes 16-31 the same rows at 16ks + 8 (a0 .. a3).
      fg_ldsm4_at(ah, lda + 32 * ks);
      if constexpr (!C::kXHalf)
        fg_ldsm4_at(al, ldaLo + 32 * ks);
#pragma unroll
      for (int s = 0; s < S; ++s) {
        // B of n tiles j and j + 1 by one ldmatrix: matrix i is weight rows
        // nw + 8(j + i / 2) .. + 7 at columns 16ks + 8(i % 2) .. + 7, the
        // registers b0, b1 of tile j, then of tile j + 1.
        static_assert(NJ % 2 == 0, "pairs of n tiles");
#pragma unroll
        for (int j = 0; j < NJ; j += 2) {
          unsigned b[4];
          fg_ldsm4_at(b, ldb + (s * BN + 8 * j) * (KT + 8) * 2 + 32 * ks);
          Dec::mma(acc[s][j], ah, b[0], b[1]);
          Dec::mma(acc[s][j + 1], ah, b[2], b[3]);
          if constexpr (!C::kXHalf) {
            Dec::mma(acc[s][j], al, b[0], b[1]);
            Dec::mma(acc[s][j + 1], al, b[2], b[3]);
          }
        }
      }
    }
    __syncthreads();
  }

  // Epilogue: (+ bias), Epi, store to the pair's row.
#pragma unroll
  for (int j = 0; j < NJ; ++j)
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const int r = 16 * mt + g + (i >= 2 ? 8 : 0);
      const long long n = n0 + nw + 8 * j + 2 * t + (i & 1);
      const int p = sh.pair[r];
      if (p < 0 || n >= C::N)
        continue;
      moeStore<C>(a, p, n, e, valid, acc[0][j][i], acc[S - 1][j][i]);
    }
}

} // namespace fg
