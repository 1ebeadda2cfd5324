//===- topk.cuh - MoE routing: gate, top-k experts, their weights ---------------===//
//
// fused.topk_moe(logits [T, E], bias [E]?) -> ids i32[T, K], weights f32[T, K].
// The block stages its rows' logits in shared memory, computes the gate
// probabilities (Cfg::Gate: GateSoftmax, GateSigmoid, GateSqrtSoftplus in f64
// like the reference, rounded to f32; GateDelayed keeps the raw logits and
// applies the softmax over the K winners afterwards), adds the selection
// bias, ranks every expert by counting (value, then lower index first: top_k's
// order), and the K winners gather the unbiased probabilities; one thread then
// applies renormalisation (Σ → clamp(min) → div, Cfg::kRenorm) and the scale
// (Cfg::kScale). Cfg::RPB rows per block: when the results may alias the
// logits, one block takes every row and reads all logits before writing any
// result (what passes/memory/OverlapProof.cpp declares for this op).
//
//===----------------------------------------------------------------------===//

namespace fg {

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

struct GateSoftmax {
  static constexpr bool kDelayed = false;
  template <int NT, int E>
  static __device__ __forceinline__ void probs(const float *x, float *pr, double *shd, float *shf) {
    float mx = -FG_INF;
    for (int e = threadIdx.x; e < E; e += NT)
      mx = fmaxf(mx, x[e]);
    mx = fgBlockMaxOrdered<NT>(mx, shf);
    double se = 0.0;
    for (int e = threadIdx.x; e < E; e += NT)
      se += mx == -FG_INF ? 0.0 : exp((double)x[e] - (double)mx);
    se = fgBlockSumD<NT>(se, shd);
    for (int e = threadIdx.x; e < E; e += NT)
      pr[e] = se > 0.0 && mx != -FG_INF ? (float)(exp((double)x[e] - (double)mx) / se) : 0.0f;
  }
};

struct GateSigmoid {
  static constexpr bool kDelayed = false;
  template <int NT, int E>
  static __device__ __forceinline__ void probs(const float *x, float *pr, double *, float *) {
    for (int e = threadIdx.x; e < E; e += NT)
      pr[e] = (float)(1.0 / (1.0 + exp(-(double)x[e])));
  }
};

struct GateSqrtSoftplus {
  static constexpr bool kDelayed = false;
  template <int NT, int E>
  static __device__ __forceinline__ void probs(const float *x, float *pr, double *, float *) {
    for (int e = threadIdx.x; e < E; e += NT) {
      const double v = (double)x[e];
      const float sp = (float)(v > 20.0 ? v : log1p(exp(v)));
      pr[e] = (float)sqrt((double)sp);
    }
  }
};

/// Selection on the raw logits; the softmax runs over the K winners later.
struct GateDelayed {
  static constexpr bool kDelayed = true;
  template <int NT, int E>
  static __device__ __forceinline__ void probs(const float *x, float *pr, double *, float *) {
    for (int e = threadIdx.x; e < E; e += NT)
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
  for (int e = threadIdx.x; e < E; e += NT) {
    float v = pr[e];
    if constexpr (C::kBias)
      v = v + fg_to_f(bias[C::kBiasOff + e * C::kBiasS]);
    sel[e] = isnan(v) ? -FG_INF : v;
  }
  __syncthreads();
  // 3. top-k by rank counting; the K winners gather the unbiased p.
  for (int e = threadIdx.x; e < E; e += NT) {
    const float v = sel[e];
    int rank = 0;
    for (int j = 0; j < E; ++j) {
      const float u = sel[j];
      rank += (u > v) || (u == v && j < e);
    }
    if (rank < K) {
      ids[rank] = e;
      wk[rank] = pr[e];
    }
  }
  __syncthreads();
  // 4. weight epilogue, serial over the K (as the reference's row loops).
  if (threadIdx.x == 0) {
    if constexpr (C::Gate::kDelayed) {
      double m = -(double)FG_INF, s = 0.0;
      for (int j = 0; j < K; ++j)
        m = fmax(m, (double)wk[j]);
      for (int j = 0; j < K; ++j)
        s += m == -(double)FG_INF ? 0.0 : exp((double)wk[j] - m);
      for (int j = 0; j < K; ++j)
        wk[j] = s > 0.0 && m != -(double)FG_INF ? (float)(exp((double)wk[j] - m) / s) : 0.0f;
    }
    if constexpr (C::kRenorm) {
      double s = 0.0;
      for (int j = 0; j < K; ++j)
        s += (double)wk[j];
      const float c = (float)fmax((double)(float)s, C::kClampMin);
      for (int j = 0; j < K; ++j)
        wk[j] = (float)((double)wk[j] / (double)c);
    }
    if constexpr (C::kScale)
      for (int j = 0; j < K; ++j)
        wk[j] = (float)((double)wk[j] * C::kScaleBy + 0.0);
    for (int j = 0; j < K; ++j)
      wout[j] = wk[j];
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
      for (int e = threadIdx.x; e < E; e += NT)
        lg[q * E + e] = fg_to_f(a.logits[C::kLogitOff + (r0 + q) * C::kLogitS0 + e * C::kLogitS1]);
    __syncthreads();
    for (int q = 0; q < nr; ++q) {
      const long long row = r0 + q;
      topkRow<C, NT>(lg + q * E, pr, sel, wk, a.ids + row * K, a.wout + row * K, a.bias, shd, shf);
    }
  }
}

// --- the router of one token in one launch (fused.rms_norm_matmul_topk_moe) -----------
//
// One thread-block cluster of C::kBlocks blocks (sm_90: the emitter refuses
// older GPUs). Every block reads the token's row x (C::L values), sums its
// squares in one fixed order (so every block has the same rstd bits) and
// normalises it into shared memory as fused.rms_norm_mul does,
// ((x · rstd) · nw[c]) in f32; block b writes its slice of that row (the
// experts read it). Then the router: warp w of block b takes experts
// b·W + w, + kBlocks·W, ... (W warps a block), its lanes 16 bytes of the
// router row at a time against the normalised x, a warp sum, and lane 0
// stores the logit into block 0's shared memory through the cluster
// (mapa + st.shared::cluster); one cluster barrier (release / acquire),
// then block 0 ranks the experts exactly as fused.topk_moe does (topkRow).
// No atomics, no global round trip between the GEMV and the ranking.

template <class C> struct RouterArgs {
  float *normed;
  int *ids;
  float *wout;
  const float *x;
  const typename C::NW *nw;
  const typename C::W *w;
  const typename C::Bias *bias;
};

template <class C> static __device__ __forceinline__ void routerTopk(const RouterArgs<C> &a) {
  constexpr int NT = C::kThreads, E = C::E, K = C::K, L = C::L, CB = C::kBlocks;
  constexpr int NW = NT / 32, V = 16 / (int)sizeof(typename C::W);
  static_assert(L % V == 0 && NT % 32 == 0, "whole 16-byte units of a router row");
  __shared__ float xs[L];  // the normalised row
  __shared__ float lg[E];  // block 0: every expert's logit (stored by the cluster's blocks)
  __shared__ float pr[E], sel[E], wk[K];
  __shared__ double shd[32];
  __shared__ float shf[32];
  const int rank = (int)blockIdx.x; // the grid is one cluster
  // 1. The norm, every block the whole row in one order.
  float ss = 0.0f;
  for (int c = threadIdx.x; c < L; c += NT) {
    const float v = a.x[C::kXOff + c];
    xs[c] = v;
    ss += v * v;
  }
  ss = fg_block_sum<NT>(ss);
  const float rstd = 1.0f / sqrtf(ss / (float)L + __int_as_float(C::kEpsBits));
  constexpr int kSlice = (L + CB - 1) / CB;
  for (int c = threadIdx.x; c < L; c += NT) {
    const float n = (xs[c] * rstd) * fg_to_f(a.nw[C::kNwOff + c]);
    xs[c] = n;
    if (c / kSlice == rank)
      a.normed[c] = n;
  }
  __syncthreads();
  // 2. The router GEMV: a warp a row, lanes over K.
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  for (int e = rank * NW + warp; e < E; e += CB * NW) {
    const typename C::W *row = a.w + C::kWOff + (long long)e * C::kWLd;
    float acc = 0.0f;
#pragma unroll 4
    for (int c = lane * V; c < L; c += 32 * V) {
      float wv[V];
      fgLoad<V>(row + c, wv);
#pragma unroll
      for (int i = 0; i < V; ++i)
        acc = fmaf(wv[i], xs[c + i], acc);
    }
    acc = fg_warp_sum(acc);
    if (lane == 0)
      fg_store_remote(&lg[e], 0u, acc);
  }
  // 3. Every logit in block 0, then its ranking (.aligned barriers: the
  // warp reconverged after lane 0's store first).
  __syncwarp();
  fg_cluster_arrive(false);
  fg_cluster_wait();
  if (rank != 0)
    return;
  topkRow<C, NT>(lg, pr, sel, wk, a.ids, a.wout, a.bias, shd, shf);
}

} // namespace fg
