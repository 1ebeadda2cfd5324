//===- topk.cuh - MoE routing: gate, top-k experts, their weights ---------------===//
//
// fused.topk_moe(logits [T, E], bias [E]?) -> ids i32[T, K], weights f32[T, K].
// The block stages its rows' logits in shared memory, computes the gate
// probabilities (Cfg::Gate: GateSoftmax, GateSigmoid, GateSqrtSoftplus in f64
// like the reference, rounded to f32; GateDelayed keeps the raw logits and
// applies the softmax over the K winners afterwards), adds the selection
// bias, ranks every expert by counting (value, then lower index first: top_k's
// order; the keys read four at a time), and the K winners gather the unbiased
// probabilities; thread j then applies renormalisation to weight j (Σ over
// the K in order, the same in every thread → clamp(min) → div, Cfg::kRenorm)
// and the scale (Cfg::kScale). Each gate probability's exp is computed once. Cfg::RPB rows per block: when the results may alias the
// logits, one block takes every row and reads all logits before writing any
// result (what passes/memory/OverlapProof.cpp declares for this op).
//
//===----------------------------------------------------------------------===//

namespace fg {

/// The first of this thread's strided indices e, e + NT, ... of a routing
/// loop: its own index when it is one of the NT threads the routing is
/// written for, else past every loop's end (a block with more threads than NT,
/// an expert GEMV running the routing as its head: the extra threads take
/// part in the barriers only, so the sums run in the topk kernel's order).
template <int NT> static __device__ __forceinline__ int fgFirst() {
  return threadIdx.x < NT ? (int)threadIdx.x : (1 << 30);
}

/// Σ over the block (NT threads) in f64; every thread gets the total.
template <int NT> static __device__ __forceinline__ double fgBlockSumD(double v, double *sh) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1)
    v += __shfl_xor_sync(0xffffffffu, v, o);
  __syncthreads();
  if ((threadIdx.x & 31) == 0)
    sh[threadIdx.x >> 5] = v;
  __syncthreads();
  double s = 0.0;
  for (int w = 0; w < NT / 32; ++w)
    s += sh[w];
  return s;
}

/// Max over the block (NT threads); every thread gets it.
template <int NT> static __device__ __forceinline__ float fgBlockMaxOrdered(float v, float *sh) {
  v = fg_warp_max(v);
  __syncthreads();
  if ((threadIdx.x & 31) == 0)
    sh[threadIdx.x >> 5] = v;
  __syncthreads();
  v = -FG_INF;
  for (int w = 0; w < NT / 32; ++w)
    v = fmaxf(v, sh[w]);
  return v;
}

// --- gates: pr[e] from the staged logits x[e] -----------------------------------------
//
// kOrder: how the keys a gate gives order like the logits (topkRanksLogits):
// 0 not relied on; 1 a strictly increasing map computed in f64 and rounded to
// f32 (two keys can be equal only where their logits are within a rounding
// or the keys underflow); 2 the logits themselves.

struct GateSoftmax {
  static constexpr bool kDelayed = false;
  static constexpr int kOrder = 1; // topkRanksLogits
  template <int NT, int E>
  static __device__ __forceinline__ void probs(const float *x, float *pr, double *shd, float *shf) {
    constexpr int kPer = (E + NT - 1) / NT; // a thread's experts e0, e0 + NT, ...
    const int e0 = fgFirst<NT>();
    float mx = -FG_INF;
    for (int e = e0; e < E; e += NT)
      mx = fmaxf(mx, x[e]);
    mx = fgBlockMaxOrdered<NT>(mx, shf);
    // Each exp once: kept in registers from the sum to the division.
    double ex[kPer], se = 0.0;
#pragma unroll
    for (int i = 0; i < kPer; ++i) {
      const int e = e0 + i * NT;
      ex[i] = e < E && mx != -FG_INF ? exp((double)x[min(e, E - 1)] - (double)mx) : 0.0;
      if (e < E)
        se += ex[i];
    }
    se = fgBlockSumD<NT>(se, shd);
#pragma unroll
    for (int i = 0; i < kPer; ++i) {
      const int e = e0 + i * NT;
      if (e < E)
        pr[e] = se > 0.0 && mx != -FG_INF ? (float)(ex[i] / se) : 0.0f;
    }
  }
};

struct GateSigmoid {
  static constexpr bool kDelayed = false;
  static constexpr int kOrder = 0; // topkRanksLogits
  template <int NT, int E>
  static __device__ __forceinline__ void probs(const float *x, float *pr, double *, float *) {
    for (int e = fgFirst<NT>(); e < E; e += NT)
      pr[e] = (float)(1.0 / (1.0 + exp(-(double)x[e])));
  }
};

struct GateSqrtSoftplus {
  static constexpr bool kDelayed = false;
  static constexpr int kOrder = 0; // topkRanksLogits
  template <int NT, int E>
  static __device__ __forceinline__ void probs(const float *x, float *pr, double *, float *) {
    for (int e = fgFirst<NT>(); e < E; e += NT) {
      const double v = (double)x[e];
      const float sp = (float)(v > 20.0 ? v : log1p(exp(v)));
      pr[e] = (float)sqrt((double)sp);
    }
  }
};

/// Selection on the raw logits; the softmax runs over the K winners later.
struct GateDelayed {
  static constexpr bool kDelayed = true;
  static constexpr int kOrder = 2; // topkRanksLogits
  template <int NT, int E>
  static __device__ __forceinline__ void probs(const float *x, float *pr, double *, float *) {
    for (int e = fgFirst<NT>(); e < E; e += NT)
      pr[e] = x[e];
  }
};

// --- the kernel -------------------------------------------------------------------------

template <class C> struct TopkArgs {
  int *ids;
  float *wout;
  const typename C::Logit *logits;
  const typename C::Bias *bias;
};

/// Expert e's rank among the E keys in shared memory (those greater, then
/// the equal ones of lower index: top_k's order), the keys read four at a
/// time where the array allows (broadcast reads).
template <int E> static __device__ __forceinline__ int topkRank(const float *keys, int e) {
  const float v = keys[e];
  int rank = 0;
  if (E % 4 == 0 && (reinterpret_cast<unsigned long long>(keys) & 15u) == 0) {
    const float4 *s4 = reinterpret_cast<const float4 *>(keys);
#pragma unroll 8
    for (int j = 0; j < E / 4; ++j) {
      const float4 u = s4[j];
      rank += (u.x > v) || (u.x == v && 4 * j < e);
      rank += (u.y > v) || (u.y == v && 4 * j + 1 < e);
      rank += (u.z > v) || (u.z == v && 4 * j + 2 < e);
      rank += (u.w > v) || (u.w == v && 4 * j + 3 < e);
    }
  } else {
    for (int j = 0; j < E; ++j) {
      const float u = keys[j];
      rank += (u > v) || (u == v && j < e);
    }
  }
  return rank;
}

/// One row's routing from its staged logits `lg` (shared memory, every
/// thread of the block): the gate probabilities into `pr`, the selection
/// keys into `sel`, the K winners' ids and weights to ids[0 .. K) and
/// wout[0 .. K) (`wk`: K floats of shared memory). Starts and ends with
/// every thread past a barrier.
template <class C, int NT>
static __device__ __forceinline__ void topkRow(const float *lg, float *pr, float *sel, float *wk,
                                               int *ids, float *wout,
                                               const typename C::Bias *bias, double *shd,
                                               float *shf) {
  constexpr int E = C::E, K = C::K;
  // 1. gate probabilities.
  C::Gate::template probs<NT, E>(lg, pr, shd, shf);
  // 2. selection keys: the biased probabilities (the bias steers the choice only).
  for (int e = fgFirst<NT>(); e < E; e += NT) {
    float v = pr[e];
    if constexpr (C::kBias)
      v = v + fg_to_f(bias[C::kBiasOff + e * C::kBiasS]);
    sel[e] = isnan(v) ? -FG_INF : v;
  }
  __syncthreads();
  // 3. top-k by rank counting; the K winners gather the unbiased p.
  for (int e = fgFirst<NT>(); e < E; e += NT) {
    const int rank = topkRank<E>(sel, e);
    if (rank < K) {
      ids[rank] = e;
      wk[rank] = pr[e];
    }
  }
  __syncthreads();
  // 4. weight epilogue: thread j computes weight j. Every sum runs over
  // the K in order (as the reference's row loops), the same in each thread,
  // so the weights are those one thread computing all K would write.
  for (int j = threadIdx.x; j < K; j += blockDim.x) {
    float v = wk[j];
    if constexpr (C::Gate::kDelayed) {
      double m = -(double)FG_INF, s = 0.0;
      for (int i = 0; i < K; ++i)
        m = fmax(m, (double)wk[i]);
      for (int i = 0; i < K; ++i)
        s += m == -(double)FG_INF ? 0.0 : exp((double)wk[i] - m);
      auto soft = [&](float w) {
        return s > 0.0 && m != -(double)FG_INF ? (float)(exp((double)w - m) / s) : 0.0f;
      };
      if constexpr (C::kRenorm) {
        double r = 0.0;
        for (int i = 0; i < K; ++i)
          r += (double)soft(wk[i]);
        const float c = (float)fmax((double)(float)r, C::kClampMin);
        v = (float)((double)soft(v) / (double)c);
      } else {
        v = soft(v);
      }
    } else if constexpr (C::kRenorm) {
      double r = 0.0;
      for (int i = 0; i < K; ++i)
        r += (double)wk[i];
      const float c = (float)fmax((double)(float)r, C::kClampMin);
      v = (float)((double)v / (double)c);
    }
    if constexpr (C::kScale)
      v = (float)((double)v * C::kScaleBy + 0.0);
    wout[j] = v;
  }
  __syncthreads();
}

template <class C> static __device__ __forceinline__ void topkMoe(const TopkArgs<C> &a) {
  constexpr int NT = C::kThreads, E = C::E, K = C::K, RPB = C::RPB;
  extern __shared__ float smem[];
  float *lg = smem;         // [RPB][E] staged logits
  float *pr = lg + RPB * E; // [E] gate probabilities
  float *sel = pr + E;      // [E] selection keys
  float *wk = sel + E;      // [K] chosen weights
  __shared__ double shd[32];
  __shared__ float shf[32];
  for (long long r0 = (long long)blockIdx.x * RPB; r0 < C::T; r0 += (long long)gridDim.x * RPB) {
    const int nr = (int)min((long long)RPB, C::T - r0);
    __syncthreads();
    for (int q = 0; q < nr; ++q)
      for (int e = fgFirst<NT>(); e < E; e += NT)
        lg[q * E + e] = fg_to_f(a.logits[C::kLogitOff + (r0 + q) * C::kLogitS0 + e * C::kLogitS1]);
    __syncthreads();
    for (int q = 0; q < nr; ++q) {
      const long long row = r0 + q;
      topkRow<C, NT>(lg + q * E, pr, sel, wk, a.ids + row * K, a.wout + row * K, a.bias, shd, shf);
    }
  }
}

// --- the routing as the head of an expert GEMV (codegen/cuda/RoutingHeads.h) ----------
//
// fused.topk_moe of one token run by every block of the expert GEMV that
// reads its ids, after that kernel's programmatic-launch wait: the logits
// staged, then topkRow as the topk kernel runs it (C::kThreads of the
// block's threads, the same order of every sum), the ids and weights into
// this block's shared memory. The block with the fewest tiles of the GEMV,
// the last (gridDim.x - 1, gridDim.y - 1, gridDim.z - 1), also stores them to
// `gids` and `gw` for the launches after (the down projection reads both).
// Returns the block's ids, which the GEMV reads instead of the stored ones.
//
// The GEMV needs only the ids. With C::kRanksLogits (EmitOptions::
// routingHeadRanksLogits) every other block ranks the staged logits
// themselves where that gives topkRow's ids (topkRanksLogits): no gate, no
// weights, three barriers fewer and no f64 on the way to the first weight load.

/// The K winners of the staged logits `lg` by rank counting into cand[0 ..
/// K) and the runner-up into cand[K], where that is the order of the gate's
/// keys (C::Gate::kOrder, no bias): true, the same on every thread of the
/// block, when topkRow would pick the same ids in the same order. kOrder 2:
/// the keys are the logits (every logit finite: a NaN key is -inf there).
/// kOrder 1 (softmax: pr = (float)(exp(x - max) / Σ) in f64): every logit
/// finite, neighbours among the K + 1 apart by at least 2^-20 — their keys
/// then differ by a factor of exp(2^-20) ≈ 1 + 9.5e-7, far above two f32
/// roundings (2 · 6e-8), so they are strictly ordered too — and the runner-up
/// within 80 of the largest (its key ≥ e^-80 / E: a normal f32, so the
/// relative bound holds; below, keys may round to 0 and tie by index).
/// Experts past the runner-up have keys at most its key, below the K-th's.
template <class C, int NT>
static __device__ __forceinline__ bool topkRanksLogits(const float *lg, int *cand) {
  constexpr int E = C::E, K = C::K;
  static_assert(E > K && C::Gate::kOrder > 0 && !C::kBias, "a runner-up, keys ordered by logits");
  bool bad = false;
  for (int e = fgFirst<NT>(); e < E; e += NT) {
    bad |= !isfinite(lg[e]);
    const int rank = topkRank<E>(lg, e);
    if (rank <= K)
      cand[rank] = e;
  }
  if (__syncthreads_or(bad)) // also the barrier after cand's stores
    return false;
  if constexpr (C::Gate::kOrder == 2)
    return true;
  const float top = lg[cand[0]];
  float prev = top;
#pragma unroll
  for (int i = 1; i <= K; ++i) {
    const float v = lg[cand[i]];
    if (!(prev - v >= 0x1p-20f)) // a float difference: exact or larger than 2^-20 anyway
      return false;
    prev = v;
  }
  return prev - top > -80.0f;
}

template <class C, bool kEarly>
static __device__ __forceinline__ const int *topkHeadImpl(const typename C::Logit *logits,
                                                          const typename C::Bias *bias, int *gids,
                                                          float *gw, const float **wOut) {
  constexpr int NT = C::kThreads, E = C::E, K = C::K;
  static_assert(C::T == 1 && NT % 32 == 0, "one token's routing, whole warps");
  __shared__ __align__(16) float lg[E], pr[E], sel[E], wk[K], w[K];
  __shared__ int ids[K];
  __shared__ double shd[32];
  __shared__ float shf[32];
  for (int e = fgFirst<NT>(); e < E; e += NT)
    lg[e] = fg_to_f(kEarly ? fg_ldcg(logits + C::kLogitOff + e * C::kLogitS1)
                           : logits[C::kLogitOff + e * C::kLogitS1]);
  __syncthreads();
  const bool store = blockIdx.x == gridDim.x - 1 && blockIdx.y == gridDim.y - 1 &&
                     blockIdx.z == gridDim.z - 1;
  if constexpr (!kEarly) {
    if constexpr (C::kRanksLogits && C::Gate::kOrder > 0 && !C::kBias && E > K) {
      __shared__ int cand[K + 1];
      if (!store && topkRanksLogits<C, NT>(lg, cand)) // uniform over the block
        return cand;
    }
  }
  topkRow<C, NT>(lg, pr, sel, wk, ids, w, bias, shd, shf); // ends past a barrier
  if (!kEarly && store)
    for (int j = threadIdx.x; j < K; j += blockDim.x) {
      gids[j] = ids[j];
      gw[j] = w[j];
    }
  if (wOut)
    *wOut = w;
  return ids;
}

template <class C>
static __device__ __forceinline__ const int *topkHead(const typename C::Logit *logits,
                                                      const typename C::Bias *bias, int *gids,
                                                      float *gw) {
  return topkHeadImpl<C, false>(logits, bias, gids, gw, nullptr);
}

/// The same routing run again by the expert down projection before its
/// programmatic-launch wait (codegen/cuda/EarlyExperts.h: the logits'
/// writer proven finished when it starts): the logits read at L2
/// (ld.global.cg), nothing stored; the block's ids returned and its weights
/// in *wOut (shared memory), the same bits as the head's.
template <class C>
static __device__ __forceinline__ const int *topkHeadEarly(const typename C::Logit *logits,
                                                           const typename C::Bias *bias,
                                                           const float **wOut) {
  return topkHeadImpl<C, true>(logits, bias, nullptr, nullptr, wOut);
}

// --- the router of one token in one launch (fused.rms_norm_matmul_topk_moe) -----------
//
// One warp an expert over the whole GPU (C::kWarps a block, ceil(E / kWarps)
// blocks). A lane holds C::kHeld 16-byte units of its expert's router row
// (units lane, lane + 32, ...: C::V weights each), loaded by the entry's
// prologue before the programmatic-launch wait when the router is a weight
// (no kernel writes it: RouterRow, routerPrefetch), so the 1 MiB of a W-moe
// router streams while the previous kernel ends; units past kHeld load after
// the wait. After it, each lane reads its x and norm weight values (L2: the
// row was just written) and sums Σ w·(x·nw) and Σ x², one order in every
// warp, so every warp has the row's rstd to the bit; the logit is
// rstd · Σ w·(x·nw) (the norm deferred to the sum, as the DP4A GEMV's), and
// block b writes its slice of the normalised row ((x · rstd) · nw, f32, as
// fused.rms_norm_mul: the experts read it). Lane 0 stores the logit in the
// launch's scratch; after a fence the block's thread 0 counts the block
// done, and the last block to arrive reads the E logits back through L2, resets the counter to 0 for the next replay, and ranks
// the experts exactly as fused.topk_moe does (topkRow).

template <class C> struct RouterArgs {
  float *normed;
  int *ids;
  float *wout;
  float *scratch;     ///< [E] logits
  unsigned *counters; ///< [1], zero on entry; the last block resets it
  const float *x;
  const typename C::NW *nw;
  const typename C::W *w;
  const typename C::Bias *bias;
};

/// A lane's units of its expert's router row held in registers.
template <class C> struct RouterRow {
  uint4 u[C::kHeld];
};

/// The held units of this warp's expert row (none past E).
template <class C>
static __device__ __forceinline__ RouterRow<C> routerPrefetch(const typename C::W *w) {
  RouterRow<C> r;
  const int lane = threadIdx.x & 31;
  const long long e = (long long)blockIdx.x * C::kWarps + (threadIdx.x >> 5);
  const uint4 *row = reinterpret_cast<const uint4 *>(w + C::kWOff + e * C::kWLd);
#pragma unroll
  for (int i = 0; i < C::kHeld; ++i) {
    const int u = lane + 32 * i;
    r.u[i] = e < C::E && u < C::L / C::V ? __ldg(row + u) : make_uint4(0u, 0u, 0u, 0u);
  }
  return r;
}

/// Σ w·(x·nw) and Σ x² of one 16-byte unit of weights at column c.
template <class C>
static __device__ __forceinline__ void routerUnit(const RouterArgs<C> &a, const uint4 &u, int c,
                                                  float &dot, float &ss) {
  constexpr int V = C::V;
  float wv[V];
  const typename C::W *wp = reinterpret_cast<const typename C::W *>(&u);
#pragma unroll
  for (int i = 0; i < V; ++i)
    wv[i] = fg_to_f(wp[i]);
  float xv[V], nv[V];
  if constexpr (C::kXOff % 4 == 0 && C::kNwOff % 4 == 0) { // 16-byte loads (V is 4 or 8)
#pragma unroll
    for (int i = 0; i < V; i += 4) {
      const float4 x4 = *reinterpret_cast<const float4 *>(a.x + C::kXOff + c + i);
      const float4 n4 = *reinterpret_cast<const float4 *>(a.nw + C::kNwOff + c + i);
      xv[i] = x4.x, xv[i + 1] = x4.y, xv[i + 2] = x4.z, xv[i + 3] = x4.w;
      nv[i] = n4.x, nv[i + 1] = n4.y, nv[i + 2] = n4.z, nv[i + 3] = n4.w;
    }
  } else {
#pragma unroll
    for (int i = 0; i < V; ++i)
      xv[i] = a.x[C::kXOff + c + i], nv[i] = fg_to_f(a.nw[C::kNwOff + c + i]);
  }
#pragma unroll
  for (int i = 0; i < V; ++i) {
    ss = fmaf(xv[i], xv[i], ss);
    dot = fmaf(wv[i], xv[i] * nv[i], dot);
  }
}

template <class C>
static __device__ __forceinline__ void routerTopk(const RouterArgs<C> &a, const RouterRow<C> &held) {
  constexpr int NT = C::kWarps * 32, E = C::E, K = C::K, L = C::L, V = C::V;
  constexpr int kUnits = L / V, kPerLane = (kUnits + 31) / 32; // 16-byte units
  __shared__ __align__(16) float lg[E], pr[E], sel[E], wk[K];
  __shared__ double shd[32];
  __shared__ float shf[32];
  __shared__ bool last;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const long long e = (long long)blockIdx.x * C::kWarps + warp;
  // 1. This warp's expert: the held units, then the rest of the row.
  float dot = 0.0f, ss = 0.0f;
#pragma unroll
  for (int i = 0; i < C::kHeld; ++i)
    if (lane + 32 * i < kUnits)
      routerUnit<C>(a, held.u[i], (lane + 32 * i) * V, dot, ss);
  if constexpr (kPerLane > C::kHeld) {
    const uint4 *row = reinterpret_cast<const uint4 *>(a.w + C::kWOff + min(e, (long long)E - 1) * C::kWLd);
#pragma unroll 4
    for (int i = C::kHeld; i < kPerLane; ++i)
      if (lane + 32 * i < kUnits)
        routerUnit<C>(a, __ldg(row + lane + 32 * i), (lane + 32 * i) * V, dot, ss);
  }
  dot = fg_warp_sum(dot);
  ss = fg_warp_sum(ss);
  const float rstd = 1.0f / sqrtf(ss / (float)L + __int_as_float(C::kEpsBits));
  if (lane == 0 && e < E)
    a.scratch[e] = dot * rstd;
  // 2. This block's slice of the normalised row.
  constexpr int kSlice = (L + C::kBlocks - 1) / C::kBlocks;
  const int c0 = (int)blockIdx.x * kSlice, c1 = min(L, c0 + kSlice);
  for (int c = c0 + (int)threadIdx.x; c < c1; c += NT)
    a.normed[c] = (a.x[C::kXOff + c] * rstd) * fg_to_f(a.nw[C::kNwOff + c]);
  // 3. The last block to finish ranks the experts.
  __threadfence();
  __syncthreads();
  if (threadIdx.x == 0)
    last = atomicAdd(a.counters, 1u) == (unsigned)(C::kBlocks - 1);
  __syncthreads();
  if (!last)
    return;
  __threadfence();
  for (int i = threadIdx.x; i < E; i += NT)
    lg[i] = __ldcg(a.scratch + i);
  if (threadIdx.x == 0)
    *a.counters = 0u; // for the next replay
  __syncthreads();
  topkRow<C, NT>(lg, pr, sel, wk, a.ids, a.wout, a.bias, shd, shf);
}

} // namespace fg
