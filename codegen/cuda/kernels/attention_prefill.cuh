//===- attention_prefill.cuh - prefill attention: causal flash attention -------===//
//
// attention(q [T, Hq, D], k [ctx, Hkv, D], v [ctx, Hkv, Dv], pos [T], sinks [Hq]?)
//   y[t, h, :] = softmax_j(cap(scale · q[t, h] · k[j, h / G])) · v[j, h / G]
// over the visible rows j ∈ [lo(t), min(pos[t], ctx − 1)] (lo = pos − window + 1
// with a sliding window, else 0) — the same op as attention.cuh, for a chunk of
// many queries (T > 8: prefill). FlashAttention-2 structure; this file is put
// after attention.cuh (it uses its mma wrappers AttnMma, attnSplit, the KV
// decoders AttnF16 / AttnBF16 and attnLoad8). 16-bit caches only (f32 caches
// keep the decode kernel).
//
// Work split. Grid (⌈T / BM⌉, Hq): one block per (tile of BM = 16·kW queries,
// query head), the last query tile of a head first (blockIdx.x reversed: the
// most keys under a causal mask, so long blocks start before short ones when
// the grid is more than one wave); warp w owns queries 16w .. 16w + 15 of the
// tile. The block's key range is [min lo, max hi] over its queries (positions
// read from device memory, so one graph serves every chunk; positions need
// not increase inside a chunk). Keys go through dynamic shared memory in
// tiles of BN rows of K and V (rows outside the range load zeros, so nothing
// undefined enters an mma), C::S = 2 stages when rows take cp.async (the next
// tile's copies in flight while this one is computed), else 1; a warp skips
// the tiles its own queries do not see, and masks only the tiles that cross
// the range of one of its rows.
//
// Fragments (PTX ISA, "Matrix Fragments for mma.m16n8k16", f16/bf16 A and B,
// f32 C): lane = 4·g + t (g = lane / 4 "groupID", t = lane % 4).
//   A (16×16, row-major) a0: (row g, cols 2t, 2t+1)   a1: (row g+8, cols 2t, 2t+1)
//                        a2: (row g, cols 2t+8, 2t+9) a3: (row g+8, cols 2t+8, 2t+9)
//   B (16×8, "col")      b0: (rows 2t, 2t+1, col g)   b1: (rows 2t+8, 2t+9, col g)
//   C (16×8)             c0, c1: (row g, cols 2t, 2t+1)  c2, c3: (row g+8, same cols)
// The lower 16 bits of a register hold the element of the smaller index.
//   S = Q·Kᵀ: A = q rows (queries × head dims 16ks..16ks+15) · scale · log2 e,
//             held in registers for the whole block, rounded to K's mma type
//             (C::kHalf) or as hi + lo halves (~22 bits); B = K tile rows by
//             ldmatrix: matrix i of rows 8n .. 8n + 7 and dims 16ks + 8i ..
//             gives b0 / b1 of k-steps ks, ks + 1 (row-major K in shared memory
//             is B's column-major layout).
//   O += P·V: A = P from the S accumulators of n-tiles 2kk, 2kk + 1 (c0,c1 →
//             a0 / a2 and c2,c3 → a1 / a3: the C layout of two adjacent n-tiles
//             is the A layout of one k16 step), rounded (or split) in V's mma
//             type; B = V[keys 16kk .., dv 8c ..] by ldmatrix.trans, b0 / b1
//             of two column tiles per instruction.
// Online softmax per query row in log2 units (one ex2 per exponential; a
// softcapped score is capped first, then scaled by log2 e): lanes t = 0..3
// of a group share a row (a quad), so row maxima are two xor-shuffles; the
// running sum stays a per-lane partial until the end. A sink starts the row
// at m = sink, l = 1 (the reference's denominator term). A row with no
// visible key writes zeros.
//
// History (W-dense's 512-token prefill on the H200): one unit loaded and
// stored at a time, 4.24 ms of 23.9 (fourth session); every unit of a tile in
// flight by cp.async, 3.55 (seventh); q and P as one rounded half each
// (C::kHalf, EmitOptions::attentionPrefillHalf; FG_DEBUG_FLASH_HALF=0 for hi
// + lo), 3.07 (eighth); ldmatrix fragments (V had been read one 16-bit shared
// load per element), exp2, two stages, 1.64 (ninth: 23.8 µs a launch, 250
// registers, 2 blocks of 4 warps per SM, still latency-bound). 32-key tiles
// (EmitOptions::attentionPrefillKeys) measured slower (2.12 ms). The
// thirtieth session found that the bench had timed three of four steps at
// later positions (1-2 K keys): at positions 0..511 the launch takes 24-26
// µs in the replay too, 0.81 ms of a 12.8 ms prefill. S's mmas head-dim
// steps outer (C::kKsOuter, 230 registers) and one MUFU per exponential
// (flashExp2): 0.79.
//
//===----------------------------------------------------------------------===//

namespace fg {

template <class C> struct FlashArgs {
  typename C::Y *y; ///< f32, or f16 / bf16 (fused.attention_convert: C::kY 1 / 2)
  const typename C::Q *q;
  const typename C::DecK::T *k;
  const typename C::DecV::T *v;
  const typename C::Pos *pos;
  const typename C::Sink *sinks;
};

/// The block's query ranges (static shared memory). The key and value tiles
/// live in dynamic shared memory (the emitter's sharedBytes): C::S stages of
/// BN rows each, rows padded by 8 elements (16 bytes: rows stay aligned for
/// cp.async and ldmatrix, and the 8 row addresses of one ldmatrix phase, 272
/// bytes apart at D = 128, fall in 32 different banks).
struct FlashRanges {
  int lo[128], hi[128]; ///< visible keys per query row (lo > hi: none)
  int klo, khi;         ///< the block's key range
};

/// ldmatrix (common.cuh's fg_ldsm4, and .x2 / .trans forms here): lane l
/// supplies the row address of row l % 8 of matrix l / 8 and receives, from
/// each matrix i, register i: row l / 4, columns 2(l % 4), 2(l % 4) + 1
/// (.trans: column l / 4, rows 2(l % 4), 2(l % 4) + 1).
static __device__ __forceinline__ void flashLdsm2(unsigned (&r)[2], const unsigned short *p) {
  const unsigned a = (unsigned)__cvta_generic_to_shared(p);
  asm volatile("ldmatrix.sync.aligned.m8n8.x2.shared.b16 {%0, %1}, [%2];\n"
               : "=r"(r[0]), "=r"(r[1])
               : "r"(a));
}
static __device__ __forceinline__ void flashLdsm4T(unsigned (&r)[4], const unsigned short *p) {
  const unsigned a = (unsigned)__cvta_generic_to_shared(p);
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(a));
}

/// 2^x by one MUFU.EX2: the .ftz form (results below 2^-126, weights no
/// row can tell from 0, flush to zero) where exp2f's non-ftz form adds a
/// range check and two scalings around it (this file's only exponentials,
/// 32 a lane per 64-key tile).
static __device__ __forceinline__ float flashExp2(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}

/// The visible keys [lo, hi] of a query at position p (lo > hi when none).
template <class C> static __device__ __forceinline__ void flashRange(long long p, int &lo, int &hi) {
  const long long h = p < C::ctx - 1 ? p : C::ctx - 1;
  const long long l = C::window > 0 ? (p - C::window + 1 > 0 ? p - C::window + 1 : 0) : 0;
  if (h < 0 || h < l) {
    lo = 0x7fffffff, hi = -1;
    return;
  }
  lo = (int)l, hi = (int)h;
}

/// cp.async.wait_group N: all but this thread's N most recent groups landed.
template <int N> static __device__ __forceinline__ void flashCpWait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
}

// ---- Warpgroup MMA (C::kWgmma; sm_90a: the emitter marks the source) ----
//
// The block is one warpgroup (4 warps, 64 query rows): S = q·Kᵀ and
// O += P·V run as wgmma.mma_async m64n64k16 with A (q, P) from registers —
// the same per-warp fragments as mma.sync m16n8k16's A, warp w rows 16w ..
// 16w + 15 — and B (the K or V tile) read by the tensor cores straight from
// shared memory through a matrix descriptor, once per warpgroup, where
// ldmatrix brought every K and V fragment through each warp's registers
// (four times the shared-memory reads of the same tile). The accumulators
// have mma.sync's C layout per n8 tile: d[4j + e] = s[j][e].
//
// Shared layout (PTX ISA, "Shared Memory Matrix Layout", no swizzle): a tile
// of R rows × E elements is stored as core matrices of 8 rows × 16 bytes,
// 128 contiguous bytes each; row r, 16-byte unit c of the row at byte
//   ((r / 8) · (E / 8) + c) · 128 + (r % 8) · 16.
// K as B of S (K-major: the reduction dim d contiguous): core matrices
// adjacent in d are 128 bytes apart (LBO), in keys E/8 · 128 (SBO). V as B
// of O (MN-major: dv contiguous, trans-b): adjacent in keys (the reduction)
// E/8 · 128 apart (LBO), in dv 128 (SBO). So K and V tiles take one layout.
#ifdef __CUDA_ARCH_FEAT_SM90_ALL
#define FG_FLASH_WGMMA 1
#endif

/// The matrix descriptor of a no-swizzle operand at `p` (shared memory).
static __device__ __forceinline__ unsigned long long flashDesc(const void *p, unsigned lbo,
                                                               unsigned sbo) {
  const unsigned a = (unsigned)__cvta_generic_to_shared(p);
  return (unsigned long long)((a & 0x3ffffu) >> 4) |
         ((unsigned long long)((lbo >> 4) & 0x3fffu) << 16) |
         ((unsigned long long)((sbo >> 4) & 0x3fffu) << 32);
}

static __device__ __forceinline__ void flashWgFence() {
#ifdef FG_FLASH_WGMMA
  asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
#endif
}
static __device__ __forceinline__ void flashWgCommit() {
#ifdef FG_FLASH_WGMMA
  asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
#endif
}
static __device__ __forceinline__ void flashWgWait() {
#ifdef FG_FLASH_WGMMA
  asm volatile("wgmma.wait_group.sync.aligned 0;\n" ::: "memory");
#endif
}
/// After a wait: the compiler may not move reads of the accumulators above
/// it (it does not know the asm that issued the wgmma wrote them later).
template <int N> static __device__ __forceinline__ void flashWgPin(float (&d)[N][4]) {
#pragma unroll
  for (int j = 0; j < N; ++j)
#pragma unroll
    for (int e = 0; e < 4; ++e)
      asm volatile("" : "+f"(d[j][e])::"memory");
}
/// The A fragments too: the tensor cores read them until the wait, so their
/// registers must stay live (not reused) until it.
template <int N> static __device__ __forceinline__ void flashWgPin(uint4 (&a)[N]) {
#pragma unroll
  for (int j = 0; j < N; ++j)
    asm volatile("" : "+r"(a[j].x), "+r"(a[j].y), "+r"(a[j].z), "+r"(a[j].w)::"memory");
}

/// d[8][4] (a 64 × 64 f32 tile: this warp's 16 rows) += A · B, A this
/// warp's 16 × 16 fragment in registers, B 16 × 64 by descriptor; TB = 1:
/// B is MN-major (trans-b).
template <bool Bf16, int TB>
static __device__ __forceinline__ void flashWg64(float (&d)[8][4], const uint4 &a,
                                                 unsigned long long b) {
#ifdef FG_FLASH_WGMMA
  // The one instruction, in the mma type T (f16 or bf16).
#define FG_WG_D(j) "+f"(d[j][0]), "+f"(d[j][1]), "+f"(d[j][2]), "+f"(d[j][3])
#define FG_WG64(T)                                                                               \
  asm volatile("wgmma.mma_async.sync.aligned.m64n64k16.f32." T "." T " "                         \
               "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "         \
               "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, " \
               "{%32, %33, %34, %35}, %36, 1, 1, 1, %37;\n"                                      \
               : FG_WG_D(0), FG_WG_D(1), FG_WG_D(2), FG_WG_D(3), FG_WG_D(4), FG_WG_D(5),         \
                 FG_WG_D(6), FG_WG_D(7)                                                          \
               : "r"(a.x), "r"(a.y), "r"(a.z), "r"(a.w), "l"(b), "n"(TB)                         \
               : "memory")
  if constexpr (Bf16)
    FG_WG64("bf16");
  else
    FG_WG64("f16");
#undef FG_WG64
#undef FG_WG_D
#else
  // Only the arch-specific target (sm_90a) has wgmma; the emitter asks for
  // it whenever it writes a kWgmma kernel.
  asm volatile("trap;");
#endif
}

/// A tile of BN rows of U 16-byte units each (row j at src + j · sj, unit-
/// stride and 16-byte aligned: kVecK / kVecV) into shared memory rows of
/// `pitch` elements, by cp.async: every load of the tile is in flight at
/// once, instead of one load-then-store round trip per unit (the first form:
/// 16 dependent round trips a tile at D = 128). Rows past `khi` are filled
/// with zeros (src-size 0 reads nothing). The caller commits the group, waits
/// for it (cp.async.wait_group) and synchronises.
template <int U, int NT, int BN, bool Core, class T>
static __device__ __forceinline__ void flashStageAsync(unsigned short *dst, int pitch, const T *src,
                                                       long long sj, int j0, int khi) {
#pragma unroll
  for (int i0 = 0; i0 < BN * U; i0 += NT) {
    const int i = i0 + (int)threadIdx.x;
    if (BN * U % NT != 0 && i >= BN * U)
      break;
    // Core (the wgmma layout): 8 consecutive threads take rows 8a .. 8a + 7
    // of one unit, so a warp's 32 copies fill 512 contiguous bytes
    // (conflict-free) and read 64 contiguous bytes of each of 8 rows.
    const int r = Core ? (i & 7) + 8 * (i / (8 * U)) : i / U;
    const int c = Core ? (i >> 3) % U : i % U;
    const long long j = (long long)j0 + r;
    const bool live = j <= khi;
    const T *from = live ? src + j * sj + 8 * c : src;
    const unsigned to = (unsigned)__cvta_generic_to_shared(
        Core ? dst + ((r >> 3) * U + c) * 64 + (r & 7) * 8 : dst + r * pitch + 8 * c);
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(to), "l"(from),
                 "r"(live ? 16 : 0)
                 : "memory");
  }
}

/// A tile of BN rows of N elements (row j at src + j · sj, element d at
/// d · SD) into shared memory rows of `pitch` elements, zeros past `khi`:
/// by cp.async (flashStageAsync) when rows take 16-byte copies (Vec), else
/// one 8-element unit at a time through registers.
template <class Dec, long long N, long long SD, bool Vec, int NT, int BN, bool Core = false,
          class T>
static __device__ __forceinline__ void flashStage(unsigned short *dst, int pitch, const T *src,
                                                  long long sj, int j0, int khi) {
  constexpr int U = N / 8;
  static_assert(!Core || Vec, "the wgmma layout is staged by cp.async");
  if constexpr (Vec) {
    flashStageAsync<U, NT, BN, Core>(dst, pitch, src, sj, j0, khi);
  } else {
    for (int i = threadIdx.x; i < BN * U; i += NT) {
      const int r = i / U, c = i % U;
      const long long j = (long long)j0 + r;
      uint4 x[1];
      attnLoad8<Dec, N, SD, Vec>(src + j * sj, 8 * c, j <= khi, x);
      *reinterpret_cast<uint4 *>(dst + r * pitch + 8 * c) = x[0];
    }
  }
}

template <class C> static __device__ __forceinline__ void flashAttention(const FlashArgs<C> &a) {
  using DK = typename C::DecK;
  using DV = typename C::DecV;
  using MK = AttnMma<DK::kBf16>;
  using MV = AttnMma<DV::kBf16>;
  constexpr int W = C::kW, NT = 32 * W, BM = 16 * W, BN = C::BN, S = C::S;
  constexpr int KS = C::D / 16, NS = BN / 8, NO = C::Dv / 8;
  // Shared row pitches (elements); the wgmma layout has no padding.
  constexpr bool WG = C::kWgmma;
  constexpr int PK = WG ? C::D : C::D + 8, PV = WG ? C::Dv : C::Dv + 8;
  static_assert(!WG || (C::kW == 4 && BN == 64 && C::kHalf && S >= 2 && C::Dv % 64 == 0),
                "wgmma: one warpgroup, 64-key tiles, q and P in one half, cp.async stages, "
                "dv in 64-column blocks");
  static_assert(DK::kParts == 1 && DV::kParts == 1, "16-bit caches only");
  static_assert(C::D % 16 == 0 && C::Dv % 16 == 0 && BN % 16 == 0, "whole mma tiles");
  static_assert(BM <= 128, "FlashRanges holds 128 query rows");
  static_assert(S == 1 || (S <= 3 && C::kVecK && C::kVecV), "stages need cp.async rows");
  static_assert(!C::kSplitWait || S >= 2, "K and V waited for apart need cp.async stages");
  // Scores are kept in log2 units (q · scale · log2 e, or the softcapped
  // score times log2 e), so each exponential is one ex2.
  constexpr float kLog2e = 1.4426950408889634f;
  __shared__ FlashRanges sh;
  extern __shared__ __align__(16) unsigned char fg_flash_tiles[];
  unsigned short *const ktiles = reinterpret_cast<unsigned short *>(fg_flash_tiles);
  unsigned short *const vtiles = ktiles + S * BN * PK;

  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, g = lane >> 2, t = lane & 3;
  // The last query tile (the most keys under a causal mask) first: blocks are
  // dispatched in index order, so the long ones start before the short ones.
  const long long q0 = (long long)(gridDim.x - 1 - blockIdx.x) * BM, h = blockIdx.y,
                  hk = h / C::G;

  // Visible ranges of the block's queries, and the block's key range.
  if (threadIdx.x == 0) {
    sh.klo = 0x7fffffff;
    sh.khi = -1;
  }
  __syncthreads();
  if (threadIdx.x < BM) {
    const long long qi = q0 + threadIdx.x;
    int lo = 0x7fffffff, hi = -1;
    if (qi < C::T)
      flashRange<C>((long long)a.pos[C::pos_off + qi * C::pos_st], lo, hi);
    sh.lo[threadIdx.x] = lo;
    sh.hi[threadIdx.x] = hi;
    if (hi >= 0) {
      atomicMin(&sh.klo, lo);
      atomicMax(&sh.khi, hi);
    }
  }
  __syncthreads();
  const int klo = sh.klo, khi = sh.khi;
  const int rA = 16 * warp + g, rB = rA + 8; // this lane's two query rows in the tile
  const int loA = sh.lo[rA], hiA = sh.hi[rA], loB = sh.lo[rB], hiB = sh.hi[rB];
  // The warp's own key range (its 16 rows), to skip tiles it does not see,
  // and the range every one of its rows sees, where no mask is needed.
  int wlo = loA < loB ? loA : loB, whi = hiA > hiB ? hiA : hiB;
  int alo = loA > loB ? loA : loB, ahi = hiA < hiB ? hiA : hiB;
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) {
    wlo = min(wlo, __shfl_xor_sync(0xffffffffu, wlo, o));
    whi = max(whi, __shfl_xor_sync(0xffffffffu, whi, o));
    alo = max(alo, __shfl_xor_sync(0xffffffffu, alo, o));
    ahi = min(ahi, __shfl_xor_sync(0xffffffffu, ahi, o));
  }

  // q · scale (· log2 e) as A fragments, hi + lo halves in K's mma type
  // (C::kHalf: hi only; the unused lo registers are dead code the compiler
  // drops).
  uint4 qh[KS], ql[KS];
  {
    constexpr float kQ = C::kSoftcap ? 1.0f : kLog2e;
    const long long qa = q0 + rA, qb = q0 + rB;
    auto qv = [&](long long qi, int d) {
      return qi < C::T ? fg_to_f(a.q[C::q_off + qi * C::q_st + h * C::q_sh + d * C::q_sd]) *
                             (C::scale() * kQ)
                       : 0.0f;
    };
#pragma unroll
    for (int ks = 0; ks < KS; ++ks) {
      const int d = 16 * ks + 2 * t;
      attnSplit<DK::kBf16>(qv(qa, d), qv(qa, d + 1), qh[ks].x, ql[ks].x);
      attnSplit<DK::kBf16>(qv(qb, d), qv(qb, d + 1), qh[ks].y, ql[ks].y);
      attnSplit<DK::kBf16>(qv(qa, d + 8), qv(qa, d + 9), qh[ks].z, ql[ks].z);
      attnSplit<DK::kBf16>(qv(qb, d + 8), qv(qb, d + 9), qh[ks].w, ql[ks].w);
    }
  }

  // Running max (log2 units) and per-lane partial sum of rows A (r = 0) and
  // B (r = 1).
  float m[2] = {-FG_INF, -FG_INF}, l[2] = {0.0f, 0.0f};
  if constexpr (C::kSinks) {
    const float s = fg_to_f(a.sinks[C::sink_off + h * C::sink_sh]) * kLog2e;
    m[0] = m[1] = s;
    l[0] = l[1] = t == 0 ? 1.0f : 0.0f; // exp(sink − m), counted once per quad
  }
  float o[NO][4];
#pragma unroll
  for (int c = 0; c < NO; ++c)
#pragma unroll
    for (int e = 0; e < 4; ++e)
      o[c][e] = 0.0f;

  const typename DK::T *kbase = a.k + C::k_off + hk * C::k_sh;
  const typename DV::T *vbase = a.v + C::v_off + hk * C::v_sh;
  // A tile's K and V copies are one cp.async group, or two (C::kSplitWait:
  // K first, so S = q·Kᵀ starts while V is still in flight). Every stage
  // commits its groups even when it copies nothing (an empty group), so the
  // counts of wait_group are the same on every iteration.
  constexpr int GT = C::kSplitWait ? 2 : 1; // groups a tile
  auto stage = [&](int j0, int slot) {
    if (j0 <= khi)
      flashStage<DK, C::D, C::k_sd, C::kVecK, NT, BN, WG>(ktiles + slot * BN * PK, PK, kbase,
                                                           C::k_sj, j0, khi);
    if constexpr (C::kSplitWait)
      asm volatile("cp.async.commit_group;\n" ::: "memory");
    if (j0 <= khi)
      flashStage<DV, C::Dv, C::v_sd, C::kVecV, NT, BN, WG>(vtiles + slot * BN * PV, PV, vbase,
                                                            C::v_sj, j0, khi);
    if constexpr (C::kVecK || C::kVecV)
      asm volatile("cp.async.commit_group;\n" ::: "memory");
  };
  // S ≥ 2: AH = S − 1 tiles ahead (S − 2 with C::kWgDefer, whose O += P·V
  // of the previous tile may still read its slot while the next tile is
  // staged): tiles 0 .. AH − 1 in flight before the loop; at each iteration
  // tile it + AH goes into slot (it + AH) % S, which tile it + AH − S used.
  constexpr int AH = S - 1 - (C::kWgDefer ? 1 : 0);
  static_assert(!C::kWgDefer || (WG && S == 3), "deferred O waits: wgmma, three stages");
  if constexpr (S >= 2)
#pragma unroll
    for (int p = 0; p < AH; ++p)
      stage(klo + p * BN, p);
  int slot = 0;
  uint4 phPrev[BN / 16]; // C::kWgDefer: the P fragments the last O += P·V reads
  for (int j0 = klo; j0 <= khi; j0 += BN, slot = slot + 1 == S ? 0 : slot + 1) {
    __syncthreads(); // the tile that last used the slot being filled is no longer read
    if constexpr (S >= 2) {
      stage(j0 + AH * BN, slot + AH >= S ? slot + AH - S : slot + AH);
      // This tile's K (and V, unless they are waited for apart) has landed;
      // the groups of the AH tiles after it may be in flight.
      if constexpr (C::kSplitWait)
        flashCpWait<GT * AH + 1>();
      else
        flashCpWait<GT * AH>();
      // The copies are writes of the generic proxy; wgmma reads through the
      // async proxy.
      if constexpr (WG)
        asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
    } else {
      stage(j0, 0);
      if constexpr (C::kVecK || C::kVecV)
        asm volatile("cp.async.wait_all;\n" ::: "memory");
    }
    __syncthreads();
    // C::kSplitWait: this tile's V has landed too (every thread's copies,
    // so a block barrier: taken once a tile by every warp, also by one that
    // skips the tile).
    auto waitV = [&] {
      if constexpr (C::kSplitWait) {
        flashCpWait<GT * AH>();
        if constexpr (WG)
          asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
        __syncthreads();
      }
    };
    // (wgmma: every warp of the warpgroup takes part in every tile.)
    if (!WG && (j0 > whi || j0 + BN - 1 < wlo)) {
      waitV();
      continue; // no query of this warp sees these keys
    }
    const unsigned short *kt = ktiles + slot * BN * PK;
    const unsigned short *vt = vtiles + slot * BN * PV;

    // S = q · Kᵀ for the warp's 16 rows × BN keys. B fragments by ldmatrix:
    // matrix i of key rows 8n .. 8n + 7 and head dims 16ks + 8i .. + 7 gives
    // b0 (i even) and b1 (i odd) of k-steps ks, ks + 1.
    float s[NS][4];
    if constexpr (WG) {
      // One m64n64k16 per 16 head dims: B = K rows [key][d], K-major.
#pragma unroll
      for (int n = 0; n < NS; ++n)
#pragma unroll
        for (int e = 0; e < 4; ++e)
          s[n][e] = 0.0f;
      flashWgFence();
#pragma unroll
      for (int ks = 0; ks < KS; ++ks)
        flashWg64<DK::kBf16, 0>(s, qh[ks], flashDesc(kt + 128 * ks, 128, C::D / 8 * 128));
      flashWgCommit();
      flashWgWait(); // (C::kWgDefer: the previous tile's O += P·V too)
      flashWgPin(s);
      flashWgPin(qh);
      if constexpr (C::kWgDefer) {
        flashWgPin(o);
        flashWgPin(phPrev);
      }
    } else if constexpr (C::kKsOuter) {
      // Head-dim steps outer, key columns inner: consecutive mmas write
      // different accumulators (eight independent chains), where the
      // n-outer order below chains KS mmas on one s[n] back to back.
      // Matrix i of the ldmatrix: key rows 8(n + i / 2) .., head dims
      // 16ks + 8(i % 2) .. — b0 / b1 of columns n and n + 1.
#pragma unroll
      for (int n = 0; n < NS; ++n)
#pragma unroll
        for (int e = 0; e < 4; ++e)
          s[n][e] = 0.0f;
#pragma unroll
      for (int ks = 0; ks < KS; ++ks)
#pragma unroll
        for (int n = 0; n < NS; n += 2) {
          unsigned b[4];
          fg_ldsm4(b, kt + (8 * (n + (lane >> 4)) + (lane & 7)) * PK + 16 * ks +
                            8 * ((lane >> 3) & 1));
          MK::mmaK16(s[n], qh[ks], b[0], b[1]);
          MK::mmaK16(s[n + 1], qh[ks], b[2], b[3]);
          if constexpr (!C::kHalf) {
            MK::mmaK16(s[n], ql[ks], b[0], b[1]);
            MK::mmaK16(s[n + 1], ql[ks], b[2], b[3]);
          }
        }
    } else
#pragma unroll
    for (int n = 0; n < NS; ++n) {
#pragma unroll
      for (int e = 0; e < 4; ++e)
        s[n][e] = 0.0f;
      const unsigned short *krow = kt + (8 * n + (lane & 7)) * PK;
#pragma unroll
      for (int ks = 0; ks + 1 < KS; ks += 2) {
        unsigned b[4];
        fg_ldsm4(b, krow + 16 * ks + 8 * (lane >> 3));
        MK::mmaK16(s[n], qh[ks], b[0], b[1]);
        MK::mmaK16(s[n], qh[ks + 1], b[2], b[3]);
        if constexpr (!C::kHalf) {
          MK::mmaK16(s[n], ql[ks], b[0], b[1]);
          MK::mmaK16(s[n], ql[ks + 1], b[2], b[3]);
        }
      }
      if constexpr (KS % 2 == 1) {
        unsigned b[2];
        flashLdsm2(b, krow + 16 * (KS - 1) + 8 * ((lane >> 3) & 1));
        MK::mmaK16(s[n], qh[KS - 1], b[0], b[1]);
        if constexpr (!C::kHalf)
          MK::mmaK16(s[n], ql[KS - 1], b[0], b[1]);
      }
    }
    // Softcap (then log2 units), and the causal / window mask where some row
    // of the warp does not see every key of the tile.
    if constexpr (C::kSoftcap) {
#pragma unroll
      for (int n = 0; n < NS; ++n)
#pragma unroll
        for (int e = 0; e < 4; ++e)
          s[n][e] = C::softcap() * tanhf(s[n][e] / C::softcap()) * kLog2e;
    }
    if (j0 < alo || j0 + BN - 1 > ahi) {
#pragma unroll
      for (int n = 0; n < NS; ++n)
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const int j = j0 + 8 * n + 2 * t + (e & 1);
          const bool vis = e < 2 ? (j >= loA && j <= hiA) : (j >= loB && j <= hiB);
          s[n][e] = vis ? s[n][e] : -FG_INF;
        }
    }
    // Online softmax, per row. A row that has seen no key keeps m = −inf;
    // its exponentials are taken against 0 (exp2(−inf) = 0, no NaN).
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      float mx = -FG_INF;
#pragma unroll
      for (int n = 0; n < NS; ++n)
        mx = fmaxf(mx, fmaxf(s[n][2 * r], s[n][2 * r + 1]));
      mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
      mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
      const float mn = fmaxf(m[r], mx);
      const float base = mn == -FG_INF ? 0.0f : mn;
      const float corr = flashExp2(m[r] - base);
      float sum = 0.0f;
#pragma unroll
      for (int n = 0; n < NS; ++n)
#pragma unroll
        for (int e = 2 * r; e < 2 * r + 2; ++e) {
          s[n][e] = flashExp2(s[n][e] - base);
          sum += s[n][e];
        }
      l[r] = l[r] * corr + sum;
      m[r] = mn;
#pragma unroll
      for (int c = 0; c < NO; ++c) {
        o[c][2 * r] *= corr;
        o[c][2 * r + 1] *= corr;
      }
    }
    waitV();
    if constexpr (WG) {
      // O += P · V: per 16 keys, one m64n64k16 per 64 value columns; B = V
      // rows [key][dv], MN-major (trans-b).
      // (phPrev, declared outside the loop: with C::kWgDefer these very
      // registers stay live until the wait in the next tile.)
      uint4(&ph)[BN / 16] = phPrev;
#pragma unroll
      for (int kk = 0; kk < BN / 16; ++kk) {
        ph[kk].x = MV::pack(s[2 * kk][0], s[2 * kk][1]);
        ph[kk].y = MV::pack(s[2 * kk][2], s[2 * kk][3]);
        ph[kk].z = MV::pack(s[2 * kk + 1][0], s[2 * kk + 1][1]);
        ph[kk].w = MV::pack(s[2 * kk + 1][2], s[2 * kk + 1][3]);
      }
      flashWgFence();
#pragma unroll
      for (int kk = 0; kk < BN / 16; ++kk)
#pragma unroll
        for (int hb = 0; hb < NO / 8; ++hb)
          flashWg64<DV::kBf16, 1>(*reinterpret_cast<float(*)[8][4]>(&o[8 * hb]), ph[kk],
                                  flashDesc(vt + (2 * kk * (C::Dv / 8) + 8 * hb) * 64,
                                            C::Dv / 8 * 128, 128));
      flashWgCommit();
      // C::kWgDefer: waited for with the next tile's S (or after the loop):
      // the tensor cores run it while the next tile's barrier and copies go by.
      if constexpr (!C::kWgDefer) {
        flashWgWait();
        flashWgPin(o);
        flashWgPin(ph);
      }
      continue;
    }
    // O += P · V, one k16 step per 16 keys. B fragments by ldmatrix.trans:
    // matrices 0 / 1 are keys 16kk .. + 7 / + 8 .. + 15 of value columns
    // 8c .. 8c + 7 (b0, b1 of column tile c), 2 / 3 the same of c + 1.
#pragma unroll
    for (int kk = 0; kk < BN / 16; ++kk) {
      uint4 ph, pl;
      attnSplit<DV::kBf16>(s[2 * kk][0], s[2 * kk][1], ph.x, pl.x);
      attnSplit<DV::kBf16>(s[2 * kk][2], s[2 * kk][3], ph.y, pl.y);
      attnSplit<DV::kBf16>(s[2 * kk + 1][0], s[2 * kk + 1][1], ph.z, pl.z);
      attnSplit<DV::kBf16>(s[2 * kk + 1][2], s[2 * kk + 1][3], ph.w, pl.w);
      const unsigned short *vrow = vt + (16 * kk + (lane & 7) + 8 * ((lane >> 3) & 1)) * PV;
#pragma unroll
      for (int c = 0; c < NO; c += 2) {
        unsigned b[4];
        flashLdsm4T(b, vrow + 8 * c + 8 * (lane >> 4));
        MV::mmaK16(o[c], ph, b[0], b[1]);
        MV::mmaK16(o[c + 1], ph, b[2], b[3]);
        if constexpr (!C::kHalf) {
          MV::mmaK16(o[c], pl, b[0], b[1]);
          MV::mmaK16(o[c + 1], pl, b[2], b[3]);
        }
      }
    }
  }

  if constexpr (C::kWgDefer) {
    flashWgWait();
    flashWgPin(o);
    flashWgPin(phPrev);
  }
  // y = O / l (zeros for a row that saw no key and has no sink), in C::Y.
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    float lr = l[r];
    lr += __shfl_xor_sync(0xffffffffu, lr, 1);
    lr += __shfl_xor_sync(0xffffffffu, lr, 2);
    const float inv = lr > 0.0f ? 1.0f / lr : 0.0f;
    const long long qi = q0 + (r == 0 ? rA : rB);
    if (qi >= C::T)
      continue;
    typename C::Y *yr = a.y + (qi * C::Hq + h) * C::Dv;
#pragma unroll
    for (int c = 0; c < NO; ++c) {
      const int col = 8 * c + 2 * t;
      const float y0 = o[c][2 * r] * inv, y1 = o[c][2 * r + 1] * inv;
      if constexpr (C::kY == 0)
        *reinterpret_cast<float2 *>(yr + col) = make_float2(y0, y1);
      else // rounded once, two 16-bit values a 32-bit store
        *reinterpret_cast<unsigned *>(yr + col) = AttnMma<C::kY == 2>::pack(y0, y1);
    }
  }
}

} // namespace fg
