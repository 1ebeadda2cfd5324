//===- gemv_dp4a.cuh - quantised GEMVs at T = 1 on integer dot products ------===//
//
// y[n] = epi(Σ_k W[n, k] · x[k]) for one row of x and q4_K, q8_0, q4_0 or
// q6_K weights (one stream, or gate and up with the GLU epilogue; dense, or
// expert-indexed with one (token, slot) pair per blockIdx.y), without
// tensor cores: x is quantised once per warp (or once per block, its row
// groups sharing it: Cfg::kShareX) to int8 in blocks of 32
// (ggml's q8_1 idea: x ≈ dx · xq, |xq| ≤ 127, dx = max|x| / 127), and each
// 4 weights cost one DP4A against 4 bytes of xq. A q4_K weight is
// d·sc·q − dmin·m with q a nibble, so over one 32-weight sub-block j
//   Σ w·x = d·sc_j · dx_j · Σ q·xq − dmin·m_j · Σ x,
// with Σ q·xq exact in integers and Σ x exact in f32 (the min term does not
// see the quantisation of x); q8_0 is d·dx·Σ q·xq, q4_0 d·dx·(Σ q·xq − 8 Σ xq),
// q6_K per 16 d·sc·dx·(Σ q·xq − 32 Σ xq).
//
// Work split: lane slot s = 32·wk + lane of the K-warps (wk < Cfg::kKWarps)
// owns quarter t = s & 3 of k-step s >> 2 (a q4_K or q6_K super-block, a
// group of 8 q8_0 or 16 q4_0 blocks), as thread t of the wide decoder
// (Cfg::D::Wide) does, and holds the int8 x of its runs (16 consecutive k
// each: q4_K, q6_K and q8_0 four, q4_0 eight) in registers for the whole
// launch. fused.matmul_multi (and its norm form) walks its segments' tiles in
// turn (gemvDp4aMulti, Dp4aMulti), x quantised once for all. For q4_K:
// DecQ4_KW's pieces t and t + 4, 16 k of each of the sub-blocks 2c, 2c + 1,
// 2c + 4, 2c + 5 (c = t / 2); per row and lane 3 loads, 8 LOP3 + 16 DP4A for
// 64 weights. q8_0 and q4_0 take their wide decoders' 5 loads and word
// picking (prepare), q6_K DecQ6_KW's 8 loads and unpacking (unpack). The
// lanes' sums meet by shuffles, and the K-warps' sums in shared memory,
// every tile (two buffers, one barrier a tile) or every Cfg::kCombine tiles
// (a buffer a tile, two barriers a combine).
//
// Rows: the block's Cfg::kRowWarps row groups each take Cfg::kRowUnroll
// consecutive rows a tile; tiles are blockIdx.x, + gridDim.x, ... (the grid
// is sized to the resident blocks, so the x quantisation, once per warp or block,
// is spread over many rows). The first tile's weights are loaded by the
// entry's prologue, before the programmatic-launch wait (weights only: no
// kernel writes them; dense launches only, an expert-indexed one loads them
// after the wait, once it has read its expert), and each further tile's
// before the arithmetic of the one before. With Cfg::kAhead = A > 1 a lane
// holds A tiles in registers ahead of its arithmetic (Dp4aPipe: the
// prologue loads the first A, and tile i + A is loaded before tile i's
// arithmetic), so A tiles of bytes are in flight, not one, and the first A
// tile latencies overlap the wait and x's quantisation; with Cfg::kL2Ahead = L > 0 the
// L tiles after those are asked of L2 (prefetch.global.L2) as well. The
// staged form (Cfg::kStages = S ≥ 2, q4_K) copies the S − 1 tiles after the
// one in registers into a ring in dynamic shared memory by cp.async
// instead (the prologue the first S − 1).
//
// Stores: the norm prologue's rstd either scales x before its quantisation
// (gemvNormScales) or, with Cfg::kNormDeferred, each row's sums at its
// store (Dp4aNormScale); a row's bias and addend load at its store or, with
// Cfg::kEarlyExtras, when its tile (combine window) starts (GemvExtras).
// Needs gemv.cuh in front.
//
//===----------------------------------------------------------------------===//

namespace fg {

/// d = a · b + c over 4 unsigned bytes of a and 4 signed bytes of b.
static __device__ __forceinline__ int fg_dp4a_us(unsigned a, unsigned b, int c) {
  int d;
  asm("dp4a.u32.s32 %0, %1, %2, %3;" : "=r"(d) : "r"(a), "r"(b), "r"(c));
  return d;
}

/// An int of magnitude below 2^22 as float, by the magic-exponent trick (an
/// IADD and an FADD instead of a quarter-rate I2F).
static __device__ __forceinline__ float fg_small_int_to_f(int v) {
  return __int_as_float(0x4B400000 + v) - 12582912.0f;
}

/// This lane's x, quantised: run r is xq[r][0..3] (16 int8 at D::Wide::runK0(r)
/// + 0 .. 15) with the dx of its 32-weight block, and sx[r]: the exact sum of
/// its 16 x (q4_K's min term), or for a block of runs r, r + 1 held by this
/// lane, sx[r] = Σ xq of the block (q4_0's zero point). With the rms_norm
/// prologue (Cfg::kNorm), ss[r]: the sum of squares of the run's 16 x as
/// read (before the norm weight), for the row's rstd.
template <int R> struct Dp4aX {
  unsigned xq[R][4];
  float dx[R], sx[R], ss[R];
};

/// Quantises 16 values of x (run r) with inv = 127 / max|x| of its block;
/// `sumQ`: sx[r] = Σ xq.
template <int R>
static __device__ __forceinline__ void fg_dp4a_pack(const float (&v)[16], float inv,
                                                    Dp4aX<R> &q, int r, bool sumQ) {
  int sq = 0;
#pragma unroll
  for (int w = 0; w < 4; ++w) {
    unsigned word = 0;
#pragma unroll
    for (int b = 0; b < 4; ++b) {
      const int iv = __float2int_rn(v[4 * w + b] * inv);
      sq += iv;
      word |= (static_cast<unsigned>(iv) & 0xffu) << (8 * b);
    }
    q.xq[r][w] = word;
  }
  if (sumQ)
    q.sx[r] = static_cast<float>(sq);
}

/// The 16 values of x of run r; with the rms_norm prologue (Cfg::kNorm)
/// normalised: · rs · nw[k], the row's rstd `rs` computed before
/// (gemvNormScales); or, deferred (Cfg::kNormDeferred), only · nw[k], with
/// `ss` their sum of squares as read. The rstd is one factor of the whole
/// row, so it cancels in the int8 quantisation (xq of x·w and of x·rstd·w
/// are the same up to rounding) and multiplies each sum at its store
/// instead (gemvDp4aRows): no pass over x and no barrier before the
/// quantisation, which is the path from the wait to the first arithmetic.
template <class C, class D>
static __device__ __forceinline__ void fg_dp4a_run(const GemvArgs<C> &a, const typename C::X *xr,
                                                   long long sb, int t, int r, bool live,
                                                   float rs, float (&v)[16], float &ss) {
  float lo[8] = {}, hi[8] = {};
  const long long k0 = D::Wide::runK0(sb, t, r);
  if (live) {
    gemvLoadX<C, false>(xr, k0, lo);
    gemvLoadX<C, false>(xr, k0 + 8, hi);
  }
#pragma unroll
  for (int e = 0; e < 8; ++e)
    v[e] = lo[e], v[e + 8] = hi[e];
  ss = 0.0f;
  if constexpr (C::kNorm && C::kNormDeferred) {
#pragma unroll
    for (int e = 0; e < 16; ++e) // one order, fused multiply-adds pinned: the same bits in every form
      ss = __fmaf_rn(v[e], v[e], ss);
    if (live)
      gemvNormX<C, false, 16>(a, k0, 1.0f, v);
  } else if (live) {
    gemvNormX<C, false, 16>(a, k0, rs, v);
  }
}

/// Runs r .. r + P - 1 of this lane's x quantised per 32-weight block (dx =
/// max|x| / 127, xq = rint(x · 127 / max|x|); a block whose max|x| is at
/// most 1e-30 quantises to zeros, so 127 / max|x| never overflows) into runs
/// 0 .. P - 1 of `q`: a block is (D::kPartner, q4_K and q6_K, P = 1) run r
/// here and the same run of lane t ^ 1, with sx the run's Σ x (q4_K) or Σ xq
/// (D::kSumQ, q6_K), or (P = 2) runs r and r + 1 of this lane.
template <class C, class D, int P>
static __device__ __forceinline__ void gemvDp4aQuantRuns(const GemvArgs<C> &a,
                                                         const typename C::X *xr, long long sb,
                                                         int t, bool live, float rs, int r,
                                                         Dp4aX<P> &q) {
  static_assert(P == (D::kPartner ? 1 : 2), "a partner's run, or a lane's pair of runs");
  if constexpr (D::kPartner) {
    float v[16];
    fg_dp4a_run<C, D>(a, xr, sb, t, r, live, rs, v, q.ss[0]);
    float amax = 0.0f, s = 0.0f;
#pragma unroll
    for (int e = 0; e < 16; ++e) {
      amax = fmaxf(amax, fabsf(v[e]));
      s += v[e];
    }
    amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, 1)); // the partner's 16
    q.dx[0] = amax / 127.0f;
    q.sx[0] = s; // Σ x, or (D::kSumQ) replaced by Σ xq in the pack
    fg_dp4a_pack(v, amax > 1e-30f ? 127.0f / amax : 0.0f, q, 0, D::kSumQ);
  } else {
    float v0[16], v1[16];
    fg_dp4a_run<C, D>(a, xr, sb, t, r, live, rs, v0, q.ss[0]);
    fg_dp4a_run<C, D>(a, xr, sb, t, r + 1, live, rs, v1, q.ss[1]);
    float amax = 0.0f;
#pragma unroll
    for (int e = 0; e < 16; ++e)
      amax = fmaxf(amax, fmaxf(fabsf(v0[e]), fabsf(v1[e])));
    const float inv = amax > 1e-30f ? 127.0f / amax : 0.0f;
    q.dx[0] = q.dx[1] = amax / 127.0f;
    fg_dp4a_pack(v0, inv, q, 0, true);
    fg_dp4a_pack(v1, inv, q, 1, true);
    q.sx[0] += q.sx[1]; // the block's Σ xq (sx[1] is then unused)
  }
}

/// Shared memory of the quantised x of a block's K-warps, [k-warp][run][..]
/// [lane] (a warp's 32 lanes on 32 banks).
/// The deferred norm's sums of squares, [k-warp][run][lane] (none without).
template <class C, bool Ss> struct Dp4aSsShared {
  float ss[C::kKWarps][C::D::kRuns][32];
};
template <class C> struct Dp4aSsShared<C, false> {};

template <class C> struct Dp4aXShared : Dp4aSsShared<C, C::kNorm && C::kNormDeferred> {
  static constexpr bool kSs = C::kNorm && C::kNormDeferred;
  unsigned xq[C::kKWarps][C::D::kRuns][4][32];
  float dx[C::kKWarps][C::D::kRuns][32], sx[C::kKWarps][C::D::kRuns][32];
};

/// This lane's x, quantised (gemvDp4aQuantRuns over every run). The
/// Cfg::kRowWarps row groups of a block hold the same K-slices: with more
/// than one and Cfg::kShareX (EmitOptions::gemvDp4aShareX), each quantises
/// every kRowWarps-th group of runs into shared memory and all read the
/// whole slice back, so the block quantises its x once, not once per row
/// group (the same values and bits).
template <class C, class D>
static __device__ __forceinline__ void gemvDp4aQuantX(const GemvArgs<C> &a,
                                                      const typename C::X *xr, long long sb,
                                                      int t, bool live, float rs, int wk,
                                                      int wr, Dp4aX<D::kRuns> &q) {
  constexpr int R = D::kRuns, P = D::kPartner ? 1 : 2, WR = C::kRowWarps;
  if constexpr (WR == 1 || !C::kShareX) {
#pragma unroll
    for (int r = 0; r < R; r += P) {
      Dp4aX<P> g;
      gemvDp4aQuantRuns<C, D, P>(a, xr, sb, t, live, rs, r, g);
#pragma unroll
      for (int j = 0; j < P; ++j) {
#pragma unroll
        for (int i = 0; i < 4; ++i)
          q.xq[r + j][i] = g.xq[j][i];
        q.dx[r + j] = g.dx[j], q.sx[r + j] = g.sx[j], q.ss[r + j] = g.ss[j];
      }
    }
  } else {
    __shared__ Dp4aXShared<C> sh;
    const int lane = threadIdx.x & 31;
    for (int r = P * wr; r < R; r += P * WR) {
      Dp4aX<P> g;
      gemvDp4aQuantRuns<C, D, P>(a, xr, sb, t, live, rs, r, g);
#pragma unroll
      for (int j = 0; j < P; ++j) {
#pragma unroll
        for (int i = 0; i < 4; ++i)
          sh.xq[wk][r + j][i][lane] = g.xq[j][i];
        sh.dx[wk][r + j][lane] = g.dx[j], sh.sx[wk][r + j][lane] = g.sx[j];
        if constexpr (Dp4aXShared<C>::kSs)
          sh.ss[wk][r + j][lane] = g.ss[j];
      }
    }
    __syncthreads();
#pragma unroll
    for (int r = 0; r < R; ++r) {
#pragma unroll
      for (int i = 0; i < 4; ++i)
        q.xq[r][i] = sh.xq[wk][r][i][lane];
      q.dx[r] = sh.dx[wk][r][lane], q.sx[r] = sh.sx[wk][r][lane];
      if constexpr (Dp4aXShared<C>::kSs)
        q.ss[r] = sh.ss[wk][r][lane];
      else
        q.ss[r] = 0.0f;
    }
  }
}


// The weight types. Each reads a row as its wide decoder of gemv.cuh does
// (Wide::load: a lane takes quarter t of a k-step of kStep weights, kRuns
// runs of 16 consecutive k at runK0) and gives this lane's share of
// Σ_k W[row, k]·x[k] from its raw bytes and x quantised (row).

/// q4_K (DecQ4_KW's pieces t and t + 4): per 32-weight sub-block j,
/// d·sc_j·dx·Σ q·xq − dmin·m_j·Σ x. High nibbles stay in place (16·q): the
/// 1/16 is folded into the scale.
struct Dp4aQ4K {
  using Wide = DecQ4_KW;
  static constexpr int kStep = 256, kRuns = 4, kStepBytes = 144;
  static constexpr bool kPartner = true, kSumQ = false; // the min term takes the exact Σ x
  static constexpr bool kWarpLoad = false; // each lane loads its own bytes
  /// The staged form (Cfg::kStages): a lane's bytes of a row are kUnits
  /// 16-byte units in Raw's order (h, p0, p1), unit i at byte unitAt(sb, t, i)
  /// of the row.
  static constexpr int kUnits = 3;
  static __device__ __forceinline__ long long unitAt(long long sb, int t, int i) {
    return sb * 144 + 16 * (i == 0 ? 0 : i == 1 ? 1 + t : 5 + t);
  }
  static __device__ __forceinline__ float row(const Wide::Raw &w, int t, const Dp4aX<kRuns> &q) {
    unsigned sc[4], m[4];
    Wide::scaleMin(w, t, sc, m);
    const unsigned p[2][4] = {{w.p0.x, w.p0.y, w.p0.z, w.p0.w}, {w.p1.x, w.p1.y, w.p1.z, w.p1.w}};
    float sA = 0.0f, sM = 0.0f;
#pragma unroll
    for (int r = 0; r < 4; ++r) {
      int dot = 0;
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        const unsigned v = (r & 1) ? p[r >> 1][i] & 0xF0F0F0F0u : p[r >> 1][i] & 0x0F0F0F0Fu;
        dot = fg_dp4a_us(v, q.xq[r][i], dot);
      }
      const float scale = (r & 1) ? q.dx[r] * 0.0625f : q.dx[r];
      sA = fmaf(fg_small_int_to_f(static_cast<int>(sc[r])) * scale, fg_small_int_to_f(dot), sA);
      sM = fmaf(fg_small_int_to_f(static_cast<int>(m[r])), q.sx[r], sM);
    }
    const float d = fg_h2f(w.h.x & 0xffffu), dmin = fg_h2f(w.h.x >> 16);
    return d * sA - dmin * sM;
  }
};

/// q8_0 (DecQ8_0W: blocks 2t and 2t + 1 of a 256-weight group, the words
/// picked by its prepare): per block d·dx·Σ q·xq, signed bytes both.
struct Dp4aQ8_0 {
  using Wide = DecQ8_0W;
  static constexpr int kStep = 256, kRuns = 4, kStepBytes = 272;
  static constexpr int kUnits = 0; // register loads only
  static constexpr bool kPartner = false, kSumQ = true;
  static constexpr bool kWarpLoad = false; // each lane loads its own bytes
  static __device__ __forceinline__ float row(const Wide::Raw &w, int t, const Dp4aX<kRuns> &q) {
    Wide::Prep p;
    Wide::prepare(w, t, p);
    float acc = 0.0f;
#pragma unroll
    for (int b = 0; b < 2; ++b) {
      int dot = 0;
#pragma unroll
      for (int r = 2 * b; r < 2 * b + 2; ++r)
#pragma unroll
        for (int i = 0; i < 4; ++i)
          dot = __dp4a(static_cast<int>(p.q[r][i]), static_cast<int>(q.xq[r][i]), dot);
      acc = fmaf(fg_h2f(p.sc2[b] & 0xffffu) * q.dx[2 * b], fg_small_int_to_f(dot), acc);
    }
    return acc;
  }
};

/// q4_0 (DecQ4_0W: blocks 4t .. 4t + 3 of a 512-weight group): per block
/// d·dx·(Σ q·xq − 8·Σ xq), low nibbles weights 0 .. 15, high 16 .. 31 (in
/// place: 16·q, so that sum is shifted down, exactly).
struct Dp4aQ4_0 {
  using Wide = DecQ4_0W;
  static constexpr int kStep = 512, kRuns = 8, kStepBytes = 288;
  static constexpr int kUnits = 0; // register loads only
  static constexpr bool kPartner = false, kSumQ = true;
  static constexpr bool kWarpLoad = false; // each lane loads its own bytes
  static __device__ __forceinline__ float row(const Wide::Raw &w, int t, const Dp4aX<kRuns> &q) {
    Wide::Prep p;
    Wide::prepare(w, t, p);
    float acc = 0.0f;
#pragma unroll
    for (int b = 0; b < 4; ++b) {
      int lo = 0, hi = 0;
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        lo = fg_dp4a_us(p.q[b][i] & 0x0F0F0F0Fu, q.xq[2 * b][i], lo);
        hi = fg_dp4a_us(p.q[b][i] & 0xF0F0F0F0u, q.xq[2 * b + 1][i], hi);
      }
      const float dot = fg_small_int_to_f(lo + (hi >> 4)) - 8.0f * q.sx[2 * b];
      acc = fmaf(fg_h2f(p.sc2[b] & 0xffffu) * q.dx[2 * b], dot, acc);
    }
    return acc;
  }
};

/// q6_K (DecQ6_KW: runs of 16 weights, one 8-bit scale each): per run
/// d·sc·dx·(Σ q·xq − 32·Σ xq), q the unsigned 6-bit value. The −32 zero
/// point goes on Σ xq, exactly in integers, so each x's quantisation error
/// is weighted by q − 32, as in the weights' own value, not by q (against
/// the exact Σ x, the error of x's quantisation does not cancel: about 3x
/// the normalised error on weights with positive scales, a review's
/// simulation).
struct Dp4aQ6K {
  using Wide = DecQ6_KW;
  static constexpr int kStep = 256, kRuns = 4, kStepBytes = 210;
  static constexpr int kUnits = 0; // register loads only
  static constexpr bool kPartner = true, kSumQ = true;
  static constexpr bool kWarpLoad = false; // each lane loads its own bytes
  static __device__ __forceinline__ float row(const Wide::Raw &w, int t, const Dp4aX<kRuns> &q) {
    unsigned v[4][4];
    float d, sc[4];
    Wide::unpack(w, t, v, d, sc);
    return sum(v, d, sc, q);
  }
  /// This lane's share from its runs' 6-bit values, d and scales.
  static __device__ __forceinline__ float sum(const unsigned (&v)[4][4], float d,
                                              const float (&sc)[4], const Dp4aX<kRuns> &q) {
    float acc = 0.0f;
#pragma unroll
    for (int r = 0; r < 4; ++r) {
      int dot = 0;
#pragma unroll
      for (int i = 0; i < 4; ++i)
        dot = fg_dp4a_us(v[r][i], q.xq[r][i], dot);
      acc = fmaf(sc[r] * q.dx[r], fg_small_int_to_f(dot) - 32.0f * q.sx[r], acc); // exact ints
    }
    return d * acc;
  }
};

/// q6_K's rows read by whole warps (EmitOptions::gemvDp4aQ6kWarp): a K-warp's
/// 8 super-blocks of a row are one span of 1680 bytes, which its 32 lanes
/// load as the 105 aligned 16-byte units covering it (106 where the span
/// starts off 16 bytes), unit lane + 32i in register i: every byte once,
/// each load one contiguous 512 bytes. DecQ6_KW's lanes load two aligned
/// units around each of their four 16-byte pieces and realign them in
/// registers, so the four lanes of a super-block ask L2 for ~500 bytes of
/// its 210, each instruction's sectors apart from the next's (the lm head at
/// 51 % of the bandwidth with L2 82 % busy, DRAM 47 %: Nsight Compute,
/// nineteenth session), and 33 registers of a row ahead, not 17. The price:
/// at its arithmetic the warp stores its span to shared memory (its own
/// stage) and each lane reads its pieces back from super-block lane / 4 at
/// byte m + 210 (lane / 4), 2-byte aligned: 5 words and 4 byte-permutes a
/// piece; then DecQ6_KW::decode and Dp4aQ6K::sum, the same bits.
struct DecQ6_KWarp {
  static constexpr int kSpan = 1680, kStageUnits = 106;
  struct Raw {
    uint4 v[4]; ///< units lane, lane + 32, lane + 64 and (where it exists) lane + 96
    int m;      ///< the span's start modulo 16
  };
  static __device__ __forceinline__ long long runK0(long long sb, int t, int r) {
    return DecQ6_KW::runK0(sb, t, r);
  }
  /// Units covering a span that starts m bytes into one.
  static __device__ __forceinline__ int units(int m) { return (m + kSpan + 15) >> 4; }
  /// Lane 4 (sb % 8) + t's units of its K-warp's span of `row`.
  static __device__ __forceinline__ void load(const unsigned char *row, long long sb, int t,
                                              long long, Raw &r) { // whole spans (K % 2048 == 0)
    const unsigned char *p = row + (sb >> 3) * kSpan;
    r.m = static_cast<int>(reinterpret_cast<unsigned long long>(p) & 15u);
    const uint4 *a = reinterpret_cast<const uint4 *>(p - r.m);
    const int lane = 4 * static_cast<int>(sb & 7) + t;
#pragma unroll
    for (int i = 0; i < 3; ++i)
      r.v[i] = fg_load_stream(a + lane + 32 * i);
    if (lane + 96 < units(r.m)) // only bytes of the span: never past the row
      r.v[3] = fg_load_stream(a + lane + 96);
  }
};

/// 16 bytes of the stage from byte `at` (even): 5 words and 4 byte-permutes
/// (`sel`: 0x5432 where `at` is 2 past a word, else 0x3210).
static __device__ __forceinline__ void fg_q6_piece(const unsigned *sw, int at, unsigned sel,
                                                   unsigned (&out)[4]) {
  const unsigned *p = sw + (at >> 2);
  unsigned x[5];
#pragma unroll
  for (int e = 0; e < 5; ++e)
    x[e] = p[e];
#pragma unroll
  for (int e = 0; e < 4; ++e)
    out[e] = __byte_perm(x[e], x[e + 1], sel);
}

/// This warp's stage in shared memory (kUnits 16-byte units for each of the
/// block's kWarps warps), once it holds the warp's units lane + 32i (those
/// below n) from `v`: the forms whose lanes load a K-warp's span together
/// (Dp4aQ6KWarp, Dp4aWarpOf) read their pieces back from it. The first
/// __syncwarp orders the warp's reads of the row before.
template <int kWarps, int kUnits, int L>
static __device__ __forceinline__ const uint4 *fg_dp4a_stage(const uint4 (&v)[L], int n) {
  __shared__ uint4 stage[kWarps][kUnits];
  const int lane = threadIdx.x & 31;
  uint4 *s = stage[threadIdx.x >> 5];
  __syncwarp();
#pragma unroll
  for (int i = 0; i < L; ++i)
    if (lane + 32 * i < n)
      s[lane + 32 * i] = v[i];
  __syncwarp();
  return s;
}

struct Dp4aQ6KWarp {
  using Wide = DecQ6_KWarp;
  static constexpr int kStep = 256, kRuns = 4, kStepBytes = 210;
  static constexpr int kUnits = 0; // register loads only
  static constexpr bool kPartner = true, kSumQ = true;
  static constexpr bool kWarpLoad = true; // a warp's lanes load its span together
  static constexpr bool kWholeSpans = true; // every K-warp's 8 super-blocks exist (K % 2048 == 0)
  /// `kWarps`: the block's warps (one stage each); every lane is live
  /// (whole spans).
  template <int kWarps>
  static __device__ __forceinline__ float row(const Wide::Raw &w, int t, const Dp4aX<kRuns> &q,
                                              bool) {
    const uint4 *s = fg_dp4a_stage<kWarps, Wide::kStageUnits>(w.v, Wide::units(w.m));
    const int lane = threadIdx.x & 31;
    const unsigned *sw = reinterpret_cast<const unsigned *>(s);
    const int at = w.m + 210 * (lane >> 2), n = t >> 1, h = t & 1;
    const unsigned sel = (at & 2) ? 0x5432u : 0x3210u;
    unsigned ql0[4], ql1[4], qh[4];
    fg_q6_piece(sw, at + 64 * n + 16 * h, sel, ql0);
    fg_q6_piece(sw, at + 64 * n + 32 + 16 * h, sel, ql1);
    fg_q6_piece(sw, at + 128 + 32 * n + 16 * h, sel, qh);
    const unsigned *ps = sw + ((at + 192 + 8 * n) >> 2); // scale words 2n, 2n + 1
    const unsigned s0 = ps[0], s1 = ps[1], s2 = ps[2];
    const unsigned dword = reinterpret_cast<const unsigned short *>(sw)[(at + 208) >> 1];
    unsigned v[4][4];
    float d, sc[4];
    DecQ6_KW::decode(ql0, ql1, qh, __byte_perm(s0, s1, sel), __byte_perm(s1, s2, sel), dword, t,
                     v, d, sc);
    return Dp4aQ6K::sum(v, d, sc, q);
  }
};

/// The rows of an aligned wide type (P: Dp4aQ4K, Dp4aQ8_0 or Dp4aQ4_0) read
/// by whole warps (EmitOptions::gemvDp4aWarpLoad): a K-warp's 8 k-steps of a
/// row are kSpanUnits aligned 16-byte units (q4_K 72, q8_0 136, q4_0 144),
/// which its 32 lanes load as unit lane + 32i in register i (where K ends
/// inside the warp, only the live steps' units): every unit once and each
/// load contiguous, where P's own lanes each load their pieces, so one
/// instruction's 16-byte units sit apart and L2 sends each sector twice. At
/// the arithmetic the warp stores its span to its own stage in shared memory
/// and each live lane takes P's Raw back from it (P::Wide::fromUnits: the
/// units it would have loaded), then P::row: the same bits.
template <class P> struct Dp4aWarpOf {
  static constexpr int kStep = P::kStep, kRuns = P::kRuns, kStepBytes = P::kStepBytes;
  static constexpr int kUnits = 0; // register loads only
  static constexpr bool kPartner = P::kPartner, kSumQ = P::kSumQ;
  static constexpr bool kWarpLoad = true;
  static constexpr bool kWholeSpans = false; // K may end inside a K-warp's span
  static_assert(kStepBytes % 16 == 0, "k-steps of whole 16-byte units");
  static constexpr int kStepUnits = kStepBytes / 16, kSpanUnits = 8 * kStepUnits;
  static constexpr int kLoads = (kSpanUnits + 31) / 32;
  struct Wide {
    struct Raw {
      uint4 v[kLoads]; ///< units lane + 32i of the span (those that exist)
    };
    static __device__ __forceinline__ long long runK0(long long sb, int t, int r) {
      return P::Wide::runK0(sb, t, r);
    }
    /// Lane 4 (sb % 8) + t's units of its K-warp's span of `row`, of a row
    /// of `steps` k-steps.
    static __device__ __forceinline__ void load(const unsigned char *row, long long sb, int t,
                                                long long steps, Raw &r) {
      const long long first = sb & ~7LL; // the span's first k-step
      const int live = static_cast<int>(min(8LL, steps - first)) * kStepUnits;
      const uint4 *a = reinterpret_cast<const uint4 *>(row) + first * kStepUnits;
      const int lane = 4 * static_cast<int>(sb & 7) + t;
#pragma unroll
      for (int i = 0; i < kLoads; ++i) // past the live units zeros (stored, never read back)
        r.v[i] = lane + 32 * i < live ? fg_load_stream(a + lane + 32 * i) : make_uint4(0, 0, 0, 0);
    }
  };
  template <int kWarps>
  static __device__ __forceinline__ float row(const typename Wide::Raw &w, int t,
                                              const Dp4aX<kRuns> &q, bool live) {
    // Past the live units zeros, never read back.
    const uint4 *s = fg_dp4a_stage<kWarps, kSpanUnits>(w.v, kSpanUnits);
    const int lane = threadIdx.x & 31;
    if (!live)
      return 0.0f;
    typename P::Wide::Raw r;
    P::Wide::fromUnits(s + (lane >> 2) * kStepUnits, t, r);
    return P::row(r, t, q);
  }
};


/// Shared memory of the K-warps' partial sums: [buffer][k-warp][stream][row].
/// With Cfg::kCombine > 1 one buffer a tile of a combine.
template <class C> struct Dp4aShared {
  float part[C::kCombine > 1 ? C::kCombine : 2][C::kKWarps][C::Epi::kStreams]
            [C::kRowWarps * C::kRowUnroll];
};

/// One tile's raw weight bytes of this lane: rows n0 + u, both streams.
template <class C> struct Dp4aTile {
  typename C::D::Wide::Raw raw[C::Epi::kStreams][C::kRowUnroll];
};

/// The tiles a lane holds in registers ahead of its arithmetic: t[0] the
/// one it computes next, t[j] the j-th after (Cfg::kAhead of them; 1 with
/// the staged ring, where t[0] is filled from the ring).
template <class C> struct Dp4aPipe {
  Dp4aTile<C> t[C::kAhead];
};

/// This lane's place: its K-warp's slot (quarter t of super-block sb) and
/// its row group.
struct Dp4aLane {
  int lane, wk, wr, t;
  long long sb;
  bool live, warpLive; ///< this lane's k-step exists; its K-warp's first does
};

template <class C> static __device__ __forceinline__ Dp4aLane gemvDp4aLane() {
  Dp4aLane l;
  l.lane = threadIdx.x & 31;
  const int warp = threadIdx.x >> 5;
  l.wk = warp % C::kKWarps, l.wr = warp / C::kKWarps;
  const int slot = 32 * l.wk + l.lane;
  l.t = slot & 3;
  l.sb = slot >> 2;
  l.live = l.sb < C::K / C::D::kStep;
  l.warpLive = 8 * l.wk < C::K / C::D::kStep;
  return l;
}

/// Lane t's share of a row, or 0 (a dead lane, an invalid expert): its
/// policy's row; with D::kWarpLoad the warp's lanes together, every lane of
/// a warp with a live k-step.
template <class C>
static __device__ __forceinline__ float gemvDp4aLaneSum(const typename C::D::Wide::Raw &w,
                                                        const Dp4aLane &l, bool valid,
                                                        const Dp4aX<C::D::kRuns> &q) {
  if constexpr (C::D::kWarpLoad) {
    static_assert(!C::D::kWholeSpans || C::K % (8 * C::D::kStep) == 0,
                  "a policy that ignores dead lanes needs whole K-warp spans");
    if (!valid || !l.warpLive) // uniform over the warp
      return 0.0f;
    return C::D::template row<C::kKWarps * C::kRowWarps>(w, l.t, q, l.live);
  } else {
    return l.live && valid ? C::D::row(w, l.t, q) : 0.0f;
  }
}

/// The rms_norm prologue's row scale, deferred (Cfg::kNormDeferred,
/// fg_dp4a_run): this warp's
/// sum of squares of x over its K-slice (every run of its lanes, in run
/// order, then across the lanes: the same bits whether x was quantised by
/// every row group or shared) and, with several K-warps, row group 0's in
/// shared memory, read back after a barrier of the loop.
template <class C> struct Dp4aNormScale {
  float warpSs = 0.0f;
  template <int R>
  __device__ __forceinline__ void init(const Dp4aX<R> &q, const Dp4aLane &l, float *kSs) {
    float s = 0.0f;
#pragma unroll
    for (int r = 0; r < R; ++r)
      s += q.ss[r];
    warpSs = fg_warp_sum(s);
    if (C::kKWarps > 1 && l.wr == 0 && l.lane == 0)
      kSs[l.wk] = warpSs;
  }
  /// 1 / sqrt(mean(x²) + eps) of the row, after a barrier since init (with
  /// one K-warp, its own sum is the row's).
  __device__ __forceinline__ float rstd(const float *kSs) const {
    float sum = warpSs;
    if constexpr (C::kKWarps > 1) {
      sum = 0.0f;
#pragma unroll
      for (int k = 0; k < C::kKWarps; ++k)
        sum += kSs[k];
    }
    return gemvRstd<C>(sum);
  }
};

/// The loads of this lane's share of tile `tile` of expert e's matrices (0:
/// dense; rows past N repeat the last).
template <class C, class Tile>
static __device__ __forceinline__ void gemvDp4aLoad(const GemvArgs<C> &a, const Dp4aLane &l,
                                                    long long e, long long tile, Tile &d) {
  constexpr int U = C::kRowUnroll;
  if (!(C::D::kWarpLoad ? l.warpLive : l.live)) // a lane past K forms no address
    return;
  using W = typename C::D::Wide;
  const long long n0 = tile * C::kRowWarps * U + l.wr * U;
  const unsigned char *w0 = reinterpret_cast<const unsigned char *>(a.w0) + C::w0_off + e * C::w0_es;
  auto one = [&](const unsigned char *row, typename W::Raw &r) {
    if constexpr (C::D::kWarpLoad)
      W::load(row, l.sb, l.t, C::K / C::D::kStep, r); // the K-warp's span, lanes together
    else
      W::load(row, l.sb, l.t, r);
  };
#pragma unroll
  for (int u = 0; u < U; ++u) {
    const long long n = min(n0 + u, C::N - 1);
    one(w0 + n * C::w0_ld, d.raw[0][u]);
    if constexpr (C::Epi::kStreams == 2) {
      const unsigned char *w1 =
          reinterpret_cast<const unsigned char *>(a.w1) + C::w1_off + e * C::w1_es;
      one(w1 + n * C::w1_ld, d.raw[C::Epi::kStreams - 1][u]);
    }
  }
}

/// Asks L2 for tile `tile`'s weight rows, both streams, of expert e (0:
/// dense), if the tile exists: the block's threads split the rows into
/// 128-byte lines (every address inside a row; a row's last partial line is
/// the next row's first). Cfg::kL2Ahead > 0 (EmitOptions::gemvDp4aL2Ahead):
/// the tiles after the one in registers are on their way to L2, so more
/// bytes are in flight an SM than the registers of one tile hold. A hint: no
/// result, no fault, the same bits.
template <class C>
static __device__ __forceinline__ void gemvDp4aPrefetchL2(const GemvArgs<C> &a, long long e,
                                                          long long tile) {
  using D = typename C::D;
  constexpr unsigned S = C::Epi::kStreams, R = C::kRowWarps * C::kRowUnroll;
  constexpr unsigned kThreads = 32u * C::kKWarps * C::kRowWarps; // the block (the launch bounds)
  constexpr long long kTiles = (C::N + R - 1) / R;
  constexpr unsigned kLines = (unsigned)((C::K / D::kStep * D::kStepBytes + 127) / 128);
  if (tile >= kTiles)
    return;
  auto one = [&](unsigned i) {
    const unsigned line = i % kLines, r = (i / kLines) % R, st = i / (kLines * R);
    const long long n = tile * R + r;
    if (n >= C::N)
      return;
    const unsigned char *row =
        st == 0 ? reinterpret_cast<const unsigned char *>(a.w0) + C::w0_off + e * C::w0_es +
                      n * C::w0_ld
                : reinterpret_cast<const unsigned char *>(a.w1) + C::w1_off + e * C::w1_es +
                      n * C::w1_ld;
    fg_prefetch_l2(row + 128LL * line);
  };
  // Unsigned and a compile-time block: one `if` where the lines fit the
  // block, as at every W-dense / W-moe shape.
  constexpr unsigned kAll = S * R * kLines;
  if constexpr (kAll <= kThreads) {
    if (threadIdx.x < kAll)
      one(threadIdx.x);
  } else {
    for (unsigned i = threadIdx.x; i < kAll; i += kThreads)
      one(i);
  }
}

// --- the staged form (Cfg::kStages >= 2) -----------------------------------------
// Dynamic shared memory holds kStages tiles: [stage][slot][thread] of uint4,
// slot (s · kRowUnroll + u) · kUnits + i for stream s, row u, unit i. Each
// lane copies exactly the units it will read into its own slots (32 lanes
// on 512 contiguous bytes: no bank conflict, no barrier), kStages − 1 tiles
// ahead of the one it computes; one cp.async group a tile, committed by
// every lane for every tile slot (empty past the last tile or on dead
// lanes), so wait_group(kStages − 1) before tile i means tile i has landed.

template <class C> struct Dp4aRing {
  static constexpr int kSlots = C::Epi::kStreams * C::kRowUnroll * C::D::kUnits;
  static constexpr unsigned kThreads = 32u * C::kKWarps * C::kRowWarps;
  /// This lane's slot 0 of stage `st`.
  static __device__ __forceinline__ uint4 *at(int st) {
    extern __shared__ uint4 fg_dp4a_ring[];
    return fg_dp4a_ring + (size_t)st * kSlots * kThreads + threadIdx.x;
  }
};

static __device__ __forceinline__ void fg_dp4a_copy16(uint4 *dst, const void *src) {
  const unsigned to = (unsigned)__cvta_generic_to_shared(dst);
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(to), "l"(src) : "memory");
}
static __device__ __forceinline__ void fg_dp4a_commit() {
  asm volatile("cp.async.commit_group;\n" ::: "memory");
}
template <int N> static __device__ __forceinline__ void fg_dp4a_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
}

/// gemvDp4aLoad's bytes, copied into this lane's slots from `slot0` (stage
/// slot 0) on.
template <class C>
static __device__ __forceinline__ void gemvDp4aCopy(const GemvArgs<C> &a, const Dp4aLane &l,
                                                    long long e, long long tile, uint4 *slot0) {
  using D = typename C::D;
  constexpr int U = C::kRowUnroll, NU = D::kUnits;
  constexpr unsigned kT = Dp4aRing<C>::kThreads;
  if (!l.live)
    return;
  const long long n0 = tile * C::kRowWarps * U + l.wr * U;
  const unsigned char *w0 = reinterpret_cast<const unsigned char *>(a.w0) + C::w0_off + e * C::w0_es;
#pragma unroll
  for (int u = 0; u < U; ++u) {
    const long long n = min(n0 + u, C::N - 1);
#pragma unroll
    for (int i = 0; i < NU; ++i)
      fg_dp4a_copy16(slot0 + (u * NU + i) * kT, w0 + n * C::w0_ld + D::unitAt(l.sb, l.t, i));
    if constexpr (C::Epi::kStreams == 2) {
      const unsigned char *w1 =
          reinterpret_cast<const unsigned char *>(a.w1) + C::w1_off + e * C::w1_es;
#pragma unroll
      for (int i = 0; i < NU; ++i)
        fg_dp4a_copy16(slot0 + ((U + u) * NU + i) * kT, w1 + n * C::w1_ld + D::unitAt(l.sb, l.t, i));
    }
  }
}

/// A landed stage's units into the tile's registers.
template <class C>
static __device__ __forceinline__ void gemvDp4aFromRing(const uint4 *slot0, Dp4aTile<C> &d) {
  using Raw = typename C::D::Wide::Raw;
  constexpr int U = C::kRowUnroll, NU = C::D::kUnits;
  constexpr unsigned kT = Dp4aRing<C>::kThreads;
  static_assert(sizeof(Raw) == 16 * NU, "a row's bytes are its units");
#pragma unroll
  for (int s = 0; s < C::Epi::kStreams; ++s)
#pragma unroll
    for (int u = 0; u < U; ++u)
#pragma unroll
      for (int i = 0; i < NU; ++i)
        reinterpret_cast<uint4 *>(&d.raw[s][u])[i] = slot0[((s * U + u) * NU + i) * kT];
}

/// The first tiles of this block: with kStages, the copies of the first
/// kStages − 1 into their stages (a group each, committed always); else the
/// first kAhead tiles' registers.
template <class C, class Rows>
static __device__ __forceinline__ void gemvDp4aStart(const Rows &rows, const Dp4aLane &l,
                                                     long long e, bool valid, Dp4aPipe<C> &cur) {
  static_assert(C::kAhead >= 1 && (C::kStages < 2 || C::kAhead == 1), "registers or the ring");
  if constexpr (C::kStages >= 2) {
#pragma unroll
    for (int j = 0; j < C::kStages - 1; ++j) {
      const long long t = blockIdx.x + (long long)j * gridDim.x;
      if (valid && t < Rows::kTiles)
        rows.copy(l, e, t, Dp4aRing<C>::at(j));
      fg_dp4a_commit();
    }
  } else if (valid) {
#pragma unroll
    for (int j = 0; j < C::kAhead; ++j) {
      const long long t = blockIdx.x + (long long)j * gridDim.x;
      if (j == 0 || t < Rows::kTiles)
        rows.load(l, e, t, cur.t[j]);
    }
  }
}


/// The rows of one weight (or gate and up): tiles of kRowWarps x kRowUnroll
/// rows from row 0, expert e's matrices (0: dense), into y row pr.
template <class C> struct Dp4aOne {
  GemvArgs<C> a;
  static constexpr int R = C::kRowWarps * C::kRowUnroll;
  static constexpr long long kTiles = (C::N + R - 1) / R;
  __device__ __forceinline__ void load(const Dp4aLane &l, long long e, long long tile,
                                       Dp4aTile<C> &d) const {
    gemvDp4aLoad<C>(a, l, e, tile, d);
  }
  __device__ __forceinline__ void copy(const Dp4aLane &l, long long e, long long tile,
                                       uint4 *slot0) const {
    gemvDp4aCopy<C>(a, l, e, tile, slot0);
  }
  __device__ __forceinline__ void prefetchL2(long long e, long long tile) const {
    gemvDp4aPrefetchL2<C>(a, e, tile);
  }
  __device__ __forceinline__ bool has(long long tile, int row) const {
    return tile * R + row < C::N;
  }
  /// Row `row` of tile `tile`'s extras (the row exists).
  __device__ __forceinline__ GemvExtras extras(long long e, bool valid, long long tile,
                                               int row) const {
    return gemvExtras<C>(a, e, valid, 0, tile * R + row); // one row of x
  }
  /// Row `row` of tile `tile`: the sums (one a stream) through the bias,
  /// the epilogue and the residual (`x`, its extras) to y.
  __device__ __forceinline__ void store(long long pr, long long e, bool valid, long long tile,
                                        int row, float (&acc)[2], const GemvExtras &x) const {
    const long long n = tile * R + row;
    if constexpr (C::kBias) {
      if (valid) {
        acc[0] += x.b0;
        if (C::Epi::kStreams == 2)
          acc[1] += x.b1;
      }
    }
    float out = C::Epi::apply(acc);
    if constexpr (C::kRes)
      out += x.res;
    a.y[pr * C::N + n] = out;
  }
};

/// The entry's prologue, before the programmatic-launch wait: the registers
/// of this block's first tile. Block-quantised weights are never written by a
/// kernel (no op has a block-quantised result), so reading them while the
/// kernels before this one still run is safe (common.cuh, fg_pdl_begin).
/// Expert-indexed launches learn their expert from the kernels before, so
/// they load nothing here (C::kPrologueLoad is false: the body loads the
/// first tile after the wait; so for a dense one with
/// EmitOptions::gemvDp4aPrologueLoad off).
template <class C>
static __device__ __forceinline__ Dp4aPipe<C> gemvDp4aPrefetch(const GemvArgs<C> &a) {
  Dp4aPipe<C> d;
  if constexpr (C::kPrologueLoad) {
    gemvDp4aStart<C>(Dp4aOne<C>{a}, gemvDp4aLane<C>(), 0, true, d);
    // The kL2Ahead tiles after those in registers towards L2 (weights only:
    // before the wait too).
    for (int j = C::kAhead; j < C::kAhead + C::kL2Ahead; ++j)
      gemvDp4aPrefetchL2<C>(a, 0, blockIdx.x + (long long)j * gridDim.x);
  }
  return d;
}

/// Whether a Rows policy gives each lane its own expert (Rows::kPerLane:
/// Dp4aMoeSum): then its `valid` and `wt` are the lane's, each lane's share
/// is scaled by `wt` before the warp's sum, and the `e` passed to its
/// methods is unused.
template <class Rows, class = void> struct Dp4aPerLane {
  static constexpr bool value = false;
};
template <class Rows> struct Dp4aPerLane<Rows, decltype(void(Rows::kPerLane))> {
  static constexpr bool value = Rows::kPerLane;
};
template <class Rows>
static __device__ __forceinline__ float dp4aLaneScaled(const Rows &rows, float share) {
  if constexpr (Dp4aPerLane<Rows>::value)
    return rows.scale(share);
  else
    return share;
}

/// The body, after the wait: x quantised once per warp, then every
/// gridDim.x-th tile from blockIdx.x, each tile's loads issued before the
/// previous tile's arithmetic.
template <class C, class Rows>
static __device__ __forceinline__ void gemvDp4aRows(const GemvArgs<C> &a, const Rows &rows,
                                                    Dp4aPipe<C> cur) {
  using D = typename C::D;
  static_assert(C::M == 1 && C::K % D::kStep == 0, "one row of x (a pair), whole k-steps");
  constexpr int S = C::Epi::kStreams, WK = C::kKWarps, WR = C::kRowWarps, U = C::kRowUnroll;
  constexpr int R = WR * U; // rows a tile
  constexpr long long kTiles = Rows::kTiles;
  static_assert(C::K / D::kStep * 4 <= 32 * WK, "the K-warps cover every quarter k-step");
  __shared__ Dp4aShared<C> sh;
  const Dp4aLane l = gemvDp4aLane<C>();
  // Expert-indexed: blockIdx.y is the (token, slot) pair, its expert read
  // from ids (one out of [0, E) gives zeros, the bias skipped, as the
  // tensor-core GEMV does) and its row of x.
  long long e = 0, pr = 0;
  bool valid = true;
  const typename C::X *xr = a.x + C::xRow(0);
  if constexpr (C::kExpert) {
    pr = blockIdx.y;
    const long long tok = pr / C::kk, j = pr % C::kk;
    e = (long long)a.ids[C::ids_off + tok * C::ids_st + j * C::ids_sj];
    valid = e >= 0 && e < C::E;
    if (!valid)
      e = 0;
    xr = a.x + C::x_off + tok * C::x_st + j * C::x_sj;
  }
  if constexpr (Dp4aPerLane<Rows>::value)
    valid = rows.valid; // this lane's expert (its loads and share; x is one row)
  if constexpr (!C::kPrologueLoad) { // the first tile(s), after the wait
    gemvDp4aStart<C>(rows, l, e, valid, cur); // an invalid pair streams nothing
    if (valid)
      for (int j = C::kAhead; j < C::kAhead + C::kL2Ahead; ++j)
        rows.prefetchL2(e, blockIdx.x + (long long)j * gridDim.x);
  }
  // The rms_norm prologue: the row's rstd first, applied to x as it is
  // quantised; or, deferred, multiplying each row's sums at its store.
  constexpr bool kDeferred = C::kNorm && C::kNormDeferred;
  __shared__ float rs[8];
  if constexpr (C::kNorm && !C::kNormDeferred)
    gemvNormScales<C>(a, 0, rs);
  Dp4aX<D::kRuns> q;
  gemvDp4aQuantX<C, D>(a, xr, l.live ? l.sb : 0, l.t, l.live,
                       C::kNorm && !C::kNormDeferred ? rs[0] : 1.0f, l.wk, l.wr, q);
  __shared__ float kSs[kDeferred ? WK : 1];
  Dp4aNormScale<C> ns;
  if constexpr (kDeferred)
    ns.init(q, l, kSs);
  float rstd = 0.0f; // kDeferred: computed at this thread's first store (after a barrier)
  auto normed = [&](float (&acc)[2]) {
    if constexpr (kDeferred) {
      if (rstd == 0.0f) // an rstd is never 0
        rstd = ns.rstd(kSs);
      acc[0] *= rstd, acc[1] *= rstd;
    }
  };
  constexpr int F = C::kCombine;
  int buf = 0, slot = 0;        // F == 1: the buffer of this tile; else its slot in the combine
  long long first = blockIdx.x; // F > 1: the tile of slot 0
  int stage = 0; // kStages: the stage of this tile
  // The extras of the row this thread stores next (Cfg::kEarlyExtras):
  // loaded when its tile (F > 1: its combine window) starts. Each storing
  // thread stores at most one row a window (a window's F·R rows fit the
  // block), or the extras load at the store.
  constexpr int kStoreThreads = 32 * WK * WR;
  constexpr bool kEarly = C::kEarlyExtras && (C::kBias || C::kRes) &&
                          (WK == 1 || F == 1 || F * R <= kStoreThreads);
  GemvExtras early;
  auto extrasAt = [&](long long tl, int row) {
    return kEarly ? early : rows.extras(e, valid, tl, row);
  };
  for (long long tile = blockIdx.x; tile < kTiles; tile += gridDim.x, buf ^= 1) {
    if constexpr (kEarly) {
      // This thread's row of the window (F > 1, slot 0) or of the tile.
      if constexpr (WK > 1 && F > 1) {
        const int i = threadIdx.x;
        const long long tl = tile + (long long)(i / R) * gridDim.x;
        if (slot == 0 && i < F * R && tl < kTiles && rows.has(tl, i % R))
          early = rows.extras(e, valid, tl, i % R);
      } else if constexpr (WK > 1) {
        if ((int)threadIdx.x < R && rows.has(tile, threadIdx.x))
          early = rows.extras(e, valid, tile, threadIdx.x);
      } else {
        if (l.lane < U && rows.has(tile, l.wr * U + l.lane))
          early = rows.extras(e, valid, tile, l.wr * U + l.lane);
      }
    }
    Dp4aTile<C> next; // left unloaded after the last tile (and on dead lanes): never read then
    constexpr int A = C::kAhead;
    if constexpr (C::kStages >= 2) {
      // The tile kStages − 1 ahead into the stage this lane read last (its
      // registers are used up), then this tile's stage into registers.
      const long long ahead = tile + (long long)(C::kStages - 1) * gridDim.x;
      if (valid && ahead < kTiles)
        rows.copy(l, e, ahead, Dp4aRing<C>::at(stage == 0 ? C::kStages - 1 : stage - 1));
      fg_dp4a_commit();
      fg_dp4a_wait<C::kStages - 1>();
      gemvDp4aFromRing<C>(Dp4aRing<C>::at(stage), cur.t[0]);
      stage = stage + 1 == C::kStages ? 0 : stage + 1;
    } else if (tile + (long long)A * gridDim.x < kTiles && valid) {
      rows.load(l, e, tile + (long long)A * gridDim.x, next);
    }
    if constexpr (C::kL2Ahead > 0)
      if (valid) // the tile kL2Ahead after `next` (tile + A) towards L2
        rows.prefetchL2(e, tile + (long long)(A + C::kL2Ahead) * gridDim.x);
    float v[S][U];
#pragma unroll
    for (int s = 0; s < S; ++s)
#pragma unroll
      for (int u = 0; u < U; ++u)
        v[s][u] = fg_warp_sum(dp4aLaneScaled(rows, gemvDp4aLaneSum<C>(cur.t[0].raw[s][u], l, valid, q)));
    if constexpr (C::kStages < 2) {
#pragma unroll
      for (int j = 0; j + 1 < A; ++j)
        cur.t[j] = cur.t[j + 1];
      cur.t[A - 1] = next;
    }
    if constexpr (WK > 1 && F > 1) {
      // The K-warps' sums of F tiles meet at once: two barriers a combine,
      // not one a tile (the warps drift apart by up to F tiles).
      if (l.lane == 0)
#pragma unroll
        for (int s = 0; s < S; ++s)
#pragma unroll
          for (int u = 0; u < U; ++u)
            sh.part[slot][l.wk][s][l.wr * U + u] = v[s][u];
      if (slot == F - 1 || tile + gridDim.x >= kTiles) { // the same for the whole block
        __syncthreads();
        for (int i = threadIdx.x; i < (slot + 1) * R; i += blockDim.x) {
          const int sl = i / R, row = i % R;
          const long long tl = first + (long long)sl * gridDim.x;
          if (rows.has(tl, row)) {
            float acc[2] = {0.0f, 0.0f};
#pragma unroll
            for (int s = 0; s < S; ++s)
              for (int k = 0; k < WK; ++k)
                acc[s] += sh.part[sl][k][s][row];
            normed(acc);
            rows.store(pr, e, valid, tl, row, acc, extrasAt(tl, row));
          }
        }
        __syncthreads(); // the slots are written again
        slot = 0;
        first = tile + gridDim.x;
      } else {
        ++slot;
      }
      continue;
    }
    if constexpr (WK > 1) {
      if (l.lane == 0)
#pragma unroll
        for (int s = 0; s < S; ++s)
#pragma unroll
          for (int u = 0; u < U; ++u)
            sh.part[buf][l.wk][s][l.wr * U + u] = v[s][u];
      __syncthreads(); // two buffers: the next tile's writes need no second barrier
    }
    // Rows of this tile: one thread each sums the K-warps in order and stores.
    const int r = WK > 1 ? static_cast<int>(threadIdx.x) : l.lane;
    if ((WK > 1 || l.wk == 0) && r < (WK > 1 ? R : U)) {
      const int row = WK > 1 ? r : l.wr * U + r;
      if (rows.has(tile, row)) {
        float acc[2] = {0.0f, 0.0f};
#pragma unroll
        for (int s = 0; s < S; ++s) {
          if constexpr (WK > 1) {
            for (int k = 0; k < WK; ++k)
              acc[s] += sh.part[buf][k][s][row];
          } else {
#pragma unroll
            for (int u = 0; u < U; ++u)
              if (u == r)
                acc[s] = v[s][u];
          }
        }
        normed(acc);
        rows.store(pr, e, valid, tile, row, acc, extrasAt(tile, row));
      }
    }
  }
}

/// The GEMV of one weight (or gate and up; dense or expert-indexed).
template <class C>
static __device__ __forceinline__ void gemvDp4a(const GemvArgs<C> &a, Dp4aPipe<C> cur) {
  gemvDp4aRows<C>(a, Dp4aOne<C>{a}, cur);
}


// --- the expert down projection with the MoE sum and the residual (fused.matmul_id_sum_add)

/// y[n] = Σ_j sw[j] · (W[ids[j]] · x[j])[n] + res[n] for one token: the k
/// slots' K-slices of x ([k, Kc], contiguous: one row of C::K = k·Kc) laid
/// end to end, so lane slot s's k-step sb is k-step sb mod C::kSlotSteps of
/// slot sb / C::kSlotSteps's expert row, every lane's share scaled by its
/// slot's routing weight before the warp's sum, and the K-warps' sums meet
/// in shared memory in a fixed order as a dense launch's do: no atomics, the
/// same bits every replay. An expert id out of [0, E) contributes nothing.
/// Lanes load their own bytes (a K-warp's span crosses experts).
template <class C> struct Dp4aMoeSum {
  static constexpr bool kPerLane = true;
  static_assert(C::K == C::kk * C::kSlotSteps * C::D::kStep && !C::D::kWarpLoad &&
                    C::kStages < 2 && C::kL2Ahead == 0 && C::kPrologueLoad == C::kEarlyIds && !C::kExpert &&
                    C::Epi::kStreams == 1 && !C::kNorm && C::M == 1,
                "one token, whole k-steps a slot, lane loads, one stream, prologue loads only early");
  GemvArgs<C> a;
  long long e = 0, sbl = 0; ///< this lane's expert and k-step within its row
  float wt = 0.0f;          ///< its slot's routing weight (0: a dead lane or an invalid id)
  bool valid = false;
  static constexpr int R = C::kRowWarps * C::kRowUnroll;
  static constexpr long long kTiles = (C::N + R - 1) / R;
  /// After the programmatic-launch wait, or with C::kEarlyIds before it (the
  /// writers of ids and sw proven finished: codegen/cuda/EarlyExperts.h); read
  /// at L2 (ld.global.cg), the point of coherence, either way.
  static __device__ __forceinline__ Dp4aMoeSum make(const GemvArgs<C> &a,
                                                     const typename C::SW *sw,
                                                     const Dp4aLane &l) {
    Dp4aMoeSum m{a};
    if (!l.live)
      return m;
    const long long j = l.sb / C::kSlotSteps;
    // C::kSlotsShared: ids and sw point into this block's shared memory
    // (the routing run again by the prologue, EarlyExperts.h).
    const long long ex = (long long)(C::kSlotsShared ? a.ids[C::ids_off + j * C::ids_sj]
                                                     : fg_ldcg(a.ids + C::ids_off + j * C::ids_sj));
    m.valid = ex >= 0 && ex < C::E;
    m.e = m.valid ? ex : 0;
    m.sbl = l.sb % C::kSlotSteps;
    m.wt = m.valid ? fg_to_f(C::kSlotsShared ? sw[C::sw_off + j * C::sw_sj]
                                             : fg_ldcg(sw + C::sw_off + j * C::sw_sj))
                   : 0.0f;
    return m;
  }
  __device__ __forceinline__ float scale(float share) const { return share * wt; }
  __device__ __forceinline__ void load(const Dp4aLane &l, long long, long long tile,
                                       Dp4aTile<C> &d) const {
    Dp4aLane ll = l;
    ll.sb = sbl;
    gemvDp4aLoad<C>(a, ll, e, tile, d);
  }
  __device__ __forceinline__ void prefetchL2(long long, long long) const {}
  __device__ __forceinline__ bool has(long long tile, int row) const {
    return tile * R + row < C::N;
  }
  __device__ __forceinline__ GemvExtras extras(long long, bool, long long tile, int row) const {
    return gemvExtras<C>(a, 0, true, 0, tile * R + row);
  }
  __device__ __forceinline__ void store(long long, long long, bool, long long tile, int row,
                                        float (&acc)[2], const GemvExtras &x) const {
    Dp4aOne<C>{a}.store(0, 0, true, tile, row, acc, x);
  }
};

/// What fused.matmul_id_sum_add's prologue read with C::kEarlyIds
/// (EarlyExperts.h): each lane's slot expert and the first tile, before the
/// wait; nothing without.
template <class C> struct Dp4aMoeSumPre {
  Dp4aMoeSum<C> m;
  Dp4aPipe<C> d;
};
template <class C>
static __device__ __forceinline__ Dp4aMoeSumPre<C> gemvDp4aMoeSumPrologue(const GemvArgs<C> &a,
                                                                          const typename C::SW *sw) {
  Dp4aMoeSumPre<C> p;
  if constexpr (C::kEarlyIds) {
    const Dp4aLane l = gemvDp4aLane<C>();
    p.m = Dp4aMoeSum<C>::make(a, sw, l);
    gemvDp4aStart<C>(p.m, l, 0, p.m.valid, p.d);
  }
  return p;
}

/// fused.matmul_id_sum_add's body, after the wait (the slots read here
/// unless the prologue read them).
template <class C>
static __device__ __forceinline__ void gemvDp4aMoeSum(const GemvArgs<C> &a,
                                                      const typename C::SW *sw,
                                                      const Dp4aMoeSumPre<C> &pre) {
  if constexpr (C::kEarlyIds)
    gemvDp4aRows<C>(a, pre.m, pre.d);
  else
    gemvDp4aRows<C>(a, Dp4aMoeSum<C>::make(a, sw, gemvDp4aLane<C>()), pre.d);
}


// --- several weights over one x (fused.matmul_multi, fused.rms_norm_matmul_multi)

/// The rows of C::kSegs segments (2 or 3: q, k and v), each a one-stream
/// dense Cfg over its own weight and result (C::S0, C::S1, C::S2; one K,
/// one weight type and one work split, so one tile of registers serves
/// them): segment 0 owns the first ⌈N0 / R⌉ tiles, segment 1 the next, and
/// so on. A tile is uniform over the block, so every branch here is.
template <class C> struct Dp4aMulti {
  using S0 = typename C::S0;
  using S1 = typename C::S1;
  using S2 = typename C::S2;
  GemvArgs<S0> a0;
  GemvArgs<S1> a1;
  GemvArgs<S2> a2;
  static constexpr int R = S0::kRowWarps * S0::kRowUnroll;
  static_assert(R == S1::kRowWarps * S1::kRowUnroll && R == S2::kRowWarps * S2::kRowUnroll &&
                    S0::kL2Ahead == 0 && S0::Epi::kStreams == 1,
                "one tile shape, no L2 tiles ahead, one stream");
  static constexpr long long kT0 = (S0::N + R - 1) / R, kT1 = (S1::N + R - 1) / R;
  static constexpr long long kTiles = kT0 + kT1 + (C::kSegs == 3 ? (S2::N + R - 1) / R : 0);
  __device__ __forceinline__ void load(const Dp4aLane &l, long long, long long tile,
                                       Dp4aTile<S0> &d) const {
    if (tile < kT0)
      gemvDp4aLoad<S0>(a0, l, 0, tile, d);
    else if (C::kSegs == 2 || tile < kT0 + kT1)
      gemvDp4aLoad<S1>(a1, l, 0, tile - kT0, d);
    else
      gemvDp4aLoad<S2>(a2, l, 0, tile - kT0 - kT1, d);
  }
  __device__ __forceinline__ void copy(const Dp4aLane &l, long long, long long tile,
                                       uint4 *slot0) const {
    if (tile < kT0)
      gemvDp4aCopy<S0>(a0, l, 0, tile, slot0);
    else if (C::kSegs == 2 || tile < kT0 + kT1)
      gemvDp4aCopy<S1>(a1, l, 0, tile - kT0, slot0);
    else
      gemvDp4aCopy<S2>(a2, l, 0, tile - kT0 - kT1, slot0);
  }
  __device__ __forceinline__ void prefetchL2(long long, long long) const {}
  __device__ __forceinline__ bool has(long long tile, int row) const {
    if (tile < kT0)
      return tile * R + row < S0::N;
    if (C::kSegs == 2 || tile < kT0 + kT1)
      return (tile - kT0) * R + row < S1::N;
    return (tile - kT0 - kT1) * R + row < S2::N;
  }
  __device__ __forceinline__ GemvExtras extras(long long, bool, long long, int) const {
    return {}; // no bias, no addend
  }
  __device__ __forceinline__ void store(long long, long long, bool, long long tile, int row,
                                        float (&acc)[2], const GemvExtras &) const {
    if (tile < kT0)
      a0.y[tile * R + row] = S0::Epi::apply(acc);
    else if (C::kSegs == 2 || tile < kT0 + kT1)
      a1.y[(tile - kT0) * R + row] = S1::Epi::apply(acc);
    else
      a2.y[(tile - kT0 - kT1) * R + row] = S2::Epi::apply(acc);
  }
};

/// The merged launch's prologue: its first tiles' registers (gemvDp4aPrefetch).
template <class C>
static __device__ __forceinline__ Dp4aPipe<typename C::S0>
gemvDp4aMultiPrefetch(const GemvArgs<typename C::S0> &a0, const GemvArgs<typename C::S1> &a1,
                      const GemvArgs<typename C::S2> &a2) {
  Dp4aPipe<typename C::S0> d;
  if constexpr (C::S0::kPrologueLoad)
    gemvDp4aStart<typename C::S0>(Dp4aMulti<C>{a0, a1, a2}, gemvDp4aLane<typename C::S0>(), 0,
                                  true, d);
  return d;
}

/// Segments 0 .. C::kSegs - 1 in one launch: x (normalised by the rms_norm
/// prologue with S0::kNorm) quantised once a block, then every gridDim.x-th
/// tile of all the segments' tiles in turn (gemvDp4aRows).
template <class C>
static __device__ __forceinline__ void gemvDp4aMulti(const GemvArgs<typename C::S0> &a0,
                                                     const GemvArgs<typename C::S1> &a1,
                                                     const GemvArgs<typename C::S2> &a2,
                                                     Dp4aPipe<typename C::S0> cur) {
  static_assert(C::kSegs == 2 || C::kSegs == 3, "2 or 3 segments");
  static_assert(!C::S0::kExpert, "dense segments");
  gemvDp4aRows<typename C::S0>(a0, Dp4aMulti<C>{a0, a1, a2}, cur);
}

} // namespace fg
