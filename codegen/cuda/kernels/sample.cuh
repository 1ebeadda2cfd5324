//===- sample.cuh - a seeded draw from the last logits row, on the device --===//
//
// sampleRow<C>(row, lmax, params, draw, token): what runtime/Sampler.cpp's
// TokenSampler::sample(logits, draw) picks, computed by one block (the greedy
// launch's last block, greedy.cuh, once the row's argmax is known). The steps
// and their order are the host's: top-k, top-p, min-p over the model's own
// distribution, then the temperature over what is kept, then one uniform u
// from the draw's counter (fgSampleUniform, the host's samplerUniform bit for
// bit). The host walks its candidates in index order when no filter sorted
// them (no top-k cut, top-p off) and most likely first otherwise; so does
// this kernel:
//
//   index order  every thread sums the weights of a contiguous chunk of the
//                row, a block scan places the chunks, and the thread whose
//                chunk holds u x W walks it again. No cap.
//   sorted       the candidates go to shared memory as 64-bit keys
//                (logitKey: the host's order, more likely first, ties to
//                the smaller id) —
//                with a top-k cut, a set holding the k largest: the nearest
//                of 22 distances from the largest logit whose set holds k
//                values and fits the cap (counted in the pass that counts
//                the finite values; the sort's first k keys are then the
//                top k), else the k largest keys exactly (a radix select
//                over the row, 8 bits a pass, stopping once the bin holds
//                exactly what is left to take); without one (top-p alone), every
//                token within 40 of the largest logit (the rest add at most
//                vocab x e^-40 of the mass, ~6e-13 at 131k: top-p's prefix
//                moves only for a p that close to a boundary) — then
//                a bitonic sort, a scan for top-p, a prefix for min-p, a scan
//                of the tempered weights for the draw.
//
// Returns 1 with the token in `token`, or 2 when the sorted candidates do not
// fit (more than C::kCap): the host then samples the copied row with the same
// draw (runtime/Session.cpp). A Session pipelines only settings that always
// fit (top-k from 1 to kCap, or neither top-k nor top-p).
//
// Same tokens as the host for the same row, up to rounding: the index-order
// weights are f32 exponentials summed in f64 (the host: f64 throughout; the
// min-p decision is f64 near its threshold), the sums are block trees (the
// host: in order). A different token needs u within ~1e-6 of a boundary of
// the host's cumulative distribution. Every sum has a
// fixed order (per-thread loops, fixed shuffle trees): a replay gives the same
// bits. No float atomics.
//
//===----------------------------------------------------------------------===//

namespace fg {

/// runtime/Program.h DeviceSampleParams, the same layout: set by the host
/// (Executor::setTokenPick) in the program's counters, zero (greedy) at load.
struct SampleParams {
  unsigned mode; ///< 0: greedy, 1: draw
  unsigned topK; ///< 0: off
  double temperature, topP, minP;
  unsigned long long seed, epoch;
};

/// The order-preserving key of logit `v` at index `i` (v not NaN): the
/// value's bits (-0 taken as +0), then the complement of the index, so the
/// larger key is the larger value, then the smaller index. greedy.cuh takes
/// the largest; the sorted draw below sorts by it.
static __device__ __forceinline__ unsigned long long logitKey(float v, unsigned i) {
  const unsigned b = __float_as_uint(v == 0.0f ? 0.0f : v);
  const unsigned ordered = (b & 0x80000000u) ? ~b : (b | 0x80000000u);
  return ((unsigned long long)ordered << 32) | (unsigned long long)(0xffffffffu - i);
}

static __device__ __forceinline__ unsigned long long fgMix64(unsigned long long z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

/// runtime/Sampler.cpp samplerUniform: u in [0, 1) from 53 bits of a hash of
/// (seed, draw).
static __device__ __forceinline__ double fgSampleUniform(unsigned long long seed,
                                                         unsigned long long draw) {
  const unsigned long long h = fgMix64(seed + 0x9e3779b97f4a7c15ull);
  return (double)(fgMix64(h ^ (draw * 0xd1b54a32d192ed03ull + 0x632be59bd9b4e019ull)) >> 11) *
         0x1.0p-53;
}

/// A draw's shared memory: C::kDrawShared bytes (GreedyToken.cpp) hold it.
template <class C> struct SampleShared {
  unsigned long long keys[C::kCap];
  double vals[C::kCap];
  unsigned hist[256];
  double red[32];
  unsigned long long prefix;
  unsigned n, need, tok;
  int done;
};

/// Sum over the block (all C::NT threads call it), the same on every thread.
template <class C, class T> static __device__ T sampleBlockSum(T v, T *red) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1)
    v += __shfl_xor_sync(0xffffffffu, v, o);
  __syncthreads(); // red free
  if (threadIdx.x % 32 == 0)
    red[threadIdx.x / 32] = v;
  __syncthreads();
  T s = 0;
  for (int w = 0; w < C::NT / 32; ++w)
    s += red[w];
  return s;
}

/// Maximum over the block, the same on every thread.
template <class C> static __device__ unsigned sampleBlockMax(unsigned v, unsigned *red) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1)
    v = max(v, __shfl_xor_sync(0xffffffffu, v, o));
  __syncthreads();
  if (threadIdx.x % 32 == 0)
    red[threadIdx.x / 32] = v;
  __syncthreads();
  unsigned m = 0;
  for (int w = 0; w < C::NT / 32; ++w)
    m = max(m, red[w]);
  return m;
}

/// Inclusive scan of one value a thread in thread order; `total` the block's,
/// `excl` the previous thread's inclusive sum bit for bit (the same additions
/// in the same order), so the threads' intervals [excl, incl) tile the total.
static __device__ __forceinline__ double sampleBlockScan(double v, double *red, int nt,
                                                         double &total, double &excl) {
  const int lane = (int)(threadIdx.x % 32), w = (int)(threadIdx.x / 32);
#pragma unroll
  for (int o = 1; o < 32; o <<= 1) {
    const double x = __shfl_up_sync(0xffffffffu, v, o);
    if (lane >= o)
      v += x;
  }
  __syncthreads();
  if (lane == 31)
    red[w] = v;
  __syncthreads();
  double before = 0;
  total = 0;
  for (int j = 0; j < nt / 32; ++j) {
    if (j < w)
      before += red[j];
    total += red[j];
  }
  const double prev = __shfl_up_sync(0xffffffffu, v, 1);
  excl = lane == 0 ? before : before + prev;
  return before + v;
}

/// In vals[0, n) (shared memory), the first j whose inclusive sum passes
/// target = fraction x the total (target < sum, or target <= sum when
/// `orEqual`); n - 1 if none.
template <class C>
static __device__ unsigned sampleLocate(SampleShared<C> &sh, unsigned n, double fraction,
                                        bool orEqual) {
  const unsigned per = (n + C::NT - 1) / C::NT;
  const unsigned lo = min(n, threadIdx.x * per), hi = min(n, lo + per);
  double mine = 0;
  for (unsigned j = lo; j < hi; ++j)
    mine += sh.vals[j];
  double total, excl;
  const double incl = sampleBlockScan(mine, sh.red, C::NT, total, excl);
  const double target = fraction * total;
  if (threadIdx.x == 0)
    sh.tok = n - 1;
  __syncthreads();
  // The owner: the first thread whose chunk passes the target (a chunk that
  // passes it has every earlier one not passing, as its sums only grow).
  const bool passes = orEqual ? target <= incl : target < incl;
  const bool before = orEqual ? target <= excl : target < excl;
  if (passes && !before && hi > lo) {
    double c = excl;
    for (unsigned j = lo; j < hi; ++j) {
      c += sh.vals[j];
      if (orEqual ? target <= c : target < c) {
        sh.tok = j;
        break;
      }
    }
  }
  __syncthreads();
  return sh.tok;
}

/// The K-th largest logitKey of the finite values of the row (K >= 1, at
/// most the finite count): the keys at or above it are exactly K.
template <class C>
static __device__ unsigned long long sampleSelectKth(const float *row, unsigned K,
                                                     SampleShared<C> &sh) {
  unsigned long long prefix = 0;
  unsigned need = K;
  for (int shift = 56; shift >= 0; shift -= 8) {
    for (int j = threadIdx.x; j < 256; j += C::NT)
      sh.hist[j] = 0;
    __syncthreads();
    // The same trip count on every lane (the warp's match below).
    for (long long base = 0; base < C::V; base += C::NT) {
      const long long i = base + threadIdx.x;
      unsigned bin = 0xffffffffu; // none
      if (i < C::V) {
        const float v = row[i];
        const unsigned long long k = logitKey(v, (unsigned)i);
        if (v != -FG_INF && (shift == 56 || ((k ^ prefix) >> (shift + 8)) == 0))
          bin = (unsigned)(k >> shift) & 255u;
      }
      // One shared-memory atomic a bin a warp: the first pass puts most of a
      // row in the few bins of its exponents, and lanes adding one by one
      // would serialise there.
      const unsigned peers = __match_any_sync(0xffffffffu, bin);
      if (bin != 0xffffffffu && threadIdx.x % 32 == (unsigned)(__ffs((int)peers) - 1))
        atomicAdd(&sh.hist[bin], (unsigned)__popc(peers));
    }
    __syncthreads();
    if (threadIdx.x == 0) {
      unsigned above = 0;
      int d = 255;
      for (; d > 0; --d) {
        if (above + sh.hist[d] >= need)
          break;
        above += sh.hist[d];
      }
      need -= above;
      prefix |= (unsigned long long)d << shift;
      sh.done = sh.hist[d] == need; // the bin is taken whole
      sh.prefix = prefix;
      sh.need = need;
    }
    __syncthreads();
    prefix = sh.prefix;
    need = sh.need;
    if (sh.done)
      break;
  }
  return prefix;
}

/// Bitonic sort of keys[0, n) (n <= C::kCap), largest first.
template <class C> static __device__ void sampleSortKeys(SampleShared<C> &sh, unsigned n) {
  unsigned n2 = 1;
  while (n2 < n)
    n2 <<= 1;
  for (unsigned i = n + threadIdx.x; i < n2; i += C::NT)
    sh.keys[i] = 0; // below every key
  __syncthreads();
  for (unsigned k = 2; k <= n2; k <<= 1)
    for (unsigned j = k >> 1; j > 0; j >>= 1) {
      for (unsigned i = threadIdx.x; i < n2; i += C::NT) {
        const unsigned x = i ^ j;
        if (x > i) {
          const unsigned long long a = sh.keys[i], b = sh.keys[x];
          if ((i & k) == 0 ? a < b : a > b) {
            sh.keys[i] = b;
            sh.keys[x] = a;
          }
        }
      }
      __syncthreads();
    }
}

/// `sh`: the block's shared memory for the draw (greedy.cuh: the token
/// launch's dynamic shared memory, which the runner gives it only while it
/// draws, so a greedy step's blocks hold none).
template <class C>
static __device__ unsigned sampleRow(const float *row, float lmax, const SampleParams &p,
                                     unsigned long long draw, unsigned *token,
                                     SampleShared<C> &sh) {
  const double u = fgSampleUniform(p.seed, draw);
  const double T = p.temperature;
  const bool minP = p.minP > 0;
  // With top-k: the finite count (does top-k cut?) and, in the same pass, how
  // many values lie within each of 22 distances of the largest. The nearest
  // set that holds k values and fits the cap is the sort's candidates (its
  // first k keys are the top k): one pass instead of the radix select's four
  // or more (sampleSelectKth stays for the rest). The distances start at
  // 2^-10: a flat row (W-tiny's random weights: thousands of logits within
  // 0.25 of the largest) found no set that fit at 0.25 and took the radix
  // select, 0.077 ms of one block on the H100 (thirty-sixth session).
  constexpr int kNear = 22;
  constexpr float kDelta[kNear] = {0x1p-10f, 0x1p-8f, 0x1p-6f, 0x1p-5f, 0x1p-4f, 0x1p-3f,
                                   0.25f,    0.5f,    1.0f,    1.5f,    2.0f,    3.0f,
                                   4.0f,     6.0f,    8.0f,    11.f,    16.f,    22.f,
                                   32.f,     45.f,    64.f,    90.f};
  unsigned fin = (unsigned)C::V;
  int near = -1; // the kDelta whose set is the candidates
  if (p.topK > 0 && (long long)p.topK < C::V) {
    for (int j = threadIdx.x; j <= kNear; j += C::NT)
      sh.hist[j] = 0;
    __syncthreads();
    for (long long base = 0; base < C::V; base += C::NT) { // (the warp's match below)
      const long long i = base + threadIdx.x;
      unsigned bin = 0xffffffffu;
      if (i < C::V && row[i] != -FG_INF) {
        const float d = lmax - row[i];
        bin = 0;
#pragma unroll
        for (int j = 0; j < kNear; ++j)
          bin += d > kDelta[j];
      }
      const unsigned peers = __match_any_sync(0xffffffffu, bin);
      if (bin != 0xffffffffu && threadIdx.x % 32 == (unsigned)(__ffs((int)peers) - 1))
        atomicAdd(&sh.hist[bin], (unsigned)__popc(peers));
    }
    __syncthreads();
    if (threadIdx.x == 0) {
      unsigned all = 0, cum = 0;
      int pick = -1;
      for (int j = 0; j <= kNear; ++j) {
        all += sh.hist[j];
        if (j < kNear && pick < 0 && cum + sh.hist[j] >= p.topK) {
          pick = cum + sh.hist[j] <= (unsigned)C::kCap ? j : kNear; // kNear: none fits
        }
        cum += sh.hist[j];
      }
      sh.need = all;
      sh.done = pick < kNear ? pick : -1;
    }
    __syncthreads();
    fin = sh.need;
    near = sh.done;
  }
  const bool topKCuts = p.topK > 0 && p.topK < fin;
  if (!topKCuts && !(p.topP < 1)) {
    // Index order: the tempered weights of the kept tokens (min-p: e >= p).
    const unsigned long long per = (C::V + C::NT - 1) / C::NT;
    const long long lo = min((long long)C::V, (long long)(threadIdx.x * per)),
                    hi = min((long long)C::V, lo + (long long)per);
    // f32 exponentials; the min-p decision in f64 (the host's) where the
    // f32 one is within its rounding of the threshold.
    const double invT = 1.0 / T;
    auto weight = [&](float v) -> float {
      if (v == -FG_INF)
        return -1.0f;
      const float d = v - lmax;
      if (minP) {
        const double e = (double)expf(d);
        if (fabs(e - p.minP) <= 1e-4 * p.minP ? exp((double)v - (double)lmax) < p.minP
                                              : e < p.minP)
          return -1.0f;
      }
      // d = 0 (the largest) weighs 1 at any temperature (d / T is 0 / 0 as
      // T underflows); the rest at e^(d / T), 0 below e^-200 (clamped in f64
      // first: past f32's range the conversion is undefined in C++).
      const double x = (double)d * invT;
      return d == 0.0f ? 1.0f : expf(x < -200.0 ? -200.0f : (float)x);
    };
    double mine = 0;
    long long lastKept = -1;
    for (long long i = lo; i < hi; ++i) {
      const float w = weight(row[i]);
      if (w >= 0) {
        mine += (double)w;
        lastKept = i;
      }
    }
    double W, excl;
    const double incl = sampleBlockScan(mine, sh.red, C::NT, W, excl);
    const double target = u * W;
    if (threadIdx.x == 0)
      sh.tok = 0xffffffffu;
    __syncthreads();
    if (excl <= target && target < incl) {
      double c = excl;
      long long pick = lastKept;
      for (long long i = lo; i < hi; ++i) {
        const float w = weight(row[i]);
        if (w >= 0) {
          c += (double)w;
          if (target < c) {
            pick = i;
            break;
          }
        }
      }
      sh.tok = (unsigned)pick;
    }
    __syncthreads();
    // u x W at or past the total (rounding): the last kept token, as the host.
    *token = sh.tok != 0xffffffffu
                 ? sh.tok
                 : sampleBlockMax<C>((unsigned)(lastKept + 1), (unsigned *)sh.red) - 1u;
    return 1;
  }
  // Sorted: the candidates' keys into shared memory.
  unsigned long long threshold = 0;
  if (topKCuts && near < 0) {
    if (p.topK > (unsigned)C::kCap)
      return 2;
    threshold = sampleSelectKth<C>(row, p.topK, sh);
  }
  const float nearDelta = near >= 0 ? kDelta[near] : 0.0f;
  if (threadIdx.x == 0)
    sh.n = 0;
  __syncthreads();
  for (long long i = threadIdx.x; i < C::V; i += C::NT) {
    const float v = row[i];
    if (v == -FG_INF)
      continue;
    const unsigned long long k = logitKey(v, (unsigned)i);
    if (topKCuts ? (near >= 0 ? lmax - v <= nearDelta : k >= threshold)
                 : (double)v - (double)lmax >= -40.0) {
      const unsigned slot = atomicAdd(&sh.n, 1u);
      if (slot < (unsigned)C::kCap)
        sh.keys[slot] = k;
    }
  }
  __syncthreads();
  unsigned n = sh.n;
  if (n > (unsigned)C::kCap)
    return 2;
  sampleSortKeys<C>(sh, n);
  if (topKCuts)
    n = p.topK; // the nearest set's first k (the radix select's k exactly)
  auto logitOf = [&](unsigned j) {
    return row[0xffffffffu - (unsigned)(sh.keys[j] & 0xffffffffull)];
  };
  // 1, 2. The model's probabilities (unnormalised: e = exp(l - max)); top-p
  // takes the shortest prefix whose mass reaches p of what top-k kept (of
  // everything without a cut: tokens outside the candidates add < e^-40).
  for (unsigned j = threadIdx.x; j < n; j += C::NT)
    sh.vals[j] = exp((double)logitOf(j) - (double)lmax);
  __syncthreads();
  unsigned keep = n;
  if (p.topP < 1)
    keep = sampleLocate<C>(sh, n, p.topP, true) + 1;
  // 3. min-p: e >= p (the probabilities fall along the sorted keys, so what
  // stays is a prefix; the first, e = 1, always stays).
  if (minP) {
    unsigned mine = 0;
    for (unsigned j = threadIdx.x; j < keep; j += C::NT)
      mine += !(sh.vals[j] < p.minP);
    keep = sampleBlockSum<C>(mine, (unsigned *)sh.red);
  }
  // 4. The temperature over what is kept; the draw in this order.
  __syncthreads();
  for (unsigned j = threadIdx.x; j < keep; j += C::NT)
    sh.vals[j] = exp(((double)logitOf(j) - (double)lmax) / T);
  __syncthreads();
  const unsigned j = sampleLocate<C>(sh, keep, u, false);
  *token = 0xffffffffu - (unsigned)(sh.keys[j] & 0xffffffffull);
  return 1;
}

} // namespace fg
