//===- greedy.cuh - the token of a step, on the device ---------------------===//
//
// greedyToken<Cfg>(row, acc, status, mirror, pos, params, drawShared): the first argmax
// of one f32 logits row of Cfg::V values (the last row of the entry's
// `logits`: `row` points at it) — or, when the host set params->mode to 1
// (Executor::setTokenPick), a seeded draw from it (sample.cuh) — written to
// status word 4 (runtime/Program.h, kStatusWordGreedy: host memory the device
// writes), with word 5 = 1 when it is the step's token, 0 when the row holds a
// NaN or only -inf (or, for a draw, +inf), 2 when a draw's candidates did not
// fit (the host sampler then reads the row, and says why or draws itself). A
// Session reads these two words instead of copying the row to the host
// (issue 13: the host reads back only the token id). It also writes them to
// the ring slot of the step's number (common.cuh, kStatusRing), from which
// the next step's input check takes its token when the host staged kFedToken
// (check.cuh): a pipelined Session enqueues step k + 1 before it has read
// step k's token. The step's number and the ring are also the device
// mirror's (`mirror`, check.cuh): the number is read there, not over the bus,
// and the ring written to both.
//
// Every block scans a grid-stride share of the row and folds it into one
// 64-bit key per value (sample.cuh, logitKey: the larger key is the larger
// value, then the smaller index). A warp, then the block, takes the largest
// key; a grid of one block has the winner then (no atomics, no ticket: the
// counters stay zero). Otherwise thread 0 folds it into acc[0] with an
// integer atomicMax: the maximum of a set does not depend on the order it is
// taken in, so the result is the same at every replay (no float atomics). A NaN sets acc[1].
// The block that takes the last ticket (acc[2], after a fence) reads the
// winner, resets acc[0..2] to 0 (the counters are the launch's own,
// BufferSpace::Counters, zero at load, so every replay starts from zero
// without a clearing launch), draws if asked (the whole block: the row is in
// L2; in `drawShared`, the launch's dynamic shared memory, C::kDrawShared
// bytes while the runner's settings draw and none otherwise) and writes the
// words.
//
//===----------------------------------------------------------------------===//

namespace fg {

template <class C>
static __device__ __forceinline__ void greedyToken(const float *row, unsigned long long *acc,
                                                   unsigned *status, unsigned *mirror,
                                                   const int *pos, const SampleParams *params,
                                                   unsigned char *drawShared) {
  unsigned long long best = 0; // below every key
  bool nan = false;
#pragma unroll 8
  for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < C::V;
       i += (long long)gridDim.x * blockDim.x) {
    const float v = row[i];
    if (v != v)
      nan = true;
    else {
      const unsigned long long k = logitKey(v, (unsigned)i);
      best = k > best ? k : best;
    }
  }
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) {
    const unsigned long long other = __shfl_xor_sync(0xffffffffu, best, o);
    best = other > best ? other : best;
  }
  nan = __any_sync(0xffffffffu, nan);
  __shared__ unsigned long long warpBest[32];
  __shared__ int warpNan[32];
  __shared__ bool last;
  __shared__ unsigned long long winner;
  __shared__ bool winnerNan;
  const int w = (int)(threadIdx.x / 32), nw = (int)((blockDim.x + 31) / 32);
  if (threadIdx.x % 32 == 0) {
    warpBest[w] = best;
    warpNan[w] = nan;
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    for (int j = 1; j < nw; ++j) {
      best = warpBest[j] > best ? warpBest[j] : best;
      nan = nan || warpNan[j];
    }
    if (gridDim.x == 1) { // one block: its key is the winner, no atomics
      winner = best;
      winnerNan = nan;
      last = true;
    } else {
      atomicMax(&acc[0], best);
      if (nan)
        atomicOr(&acc[1], 1ull);
      __threadfence();
      last = atomicAdd(&acc[2], 1ull) == (unsigned long long)gridDim.x - 1;
    }
  }
  __syncthreads();
  if (!last)
    return;
  if (threadIdx.x == 0 && gridDim.x > 1) {
    __threadfence();
    winner = atomicExch(&acc[0], 0ull);
    winnerNan = atomicExch(&acc[1], 0ull) != 0;
    acc[2] = 0;
  }
  __syncthreads();
  const unsigned long long key = winner;
  // Every value -inf: the key of index 0's -inf is the smallest real key.
  const bool allNegInf = (unsigned)(key >> 32) <= ~0xff800000u;
  unsigned token = 0xffffffffu - (unsigned)(key & 0xffffffffull);
  // A +inf logit (the largest key's value bits 0x7f800000, ordered) is the
  // host's error to report, greedy or drawn, as its sampler does (ok 0: it
  // reads the row and says which logit).
  const bool plusInf = (unsigned)(key >> 32) == 0xff800000u;
  unsigned ok = (winnerNan || allNegInf || plusInf) ? 0u : 1u;
  // A draw instead of the argmax (sample.cuh) when the host asked for one.
  if (ok && params->mode == 1u) {
    const float lmax = row[token];
    // The draw's counter: the position the drawn token will take (the
    // last row's + 1) in the host's epoch (runtime/Sampler.h).
    const unsigned long long at = C::kHasPositions ? (unsigned)(pos[0] + 1) : 0u;
    static_assert(sizeof(SampleShared<C>) <= C::kDrawShared, "GreedyToken.cpp kDrawShared");
    ok = sampleRow<C>(row, lmax, *params, (params->epoch << 32) | at, &token,
                      *reinterpret_cast<SampleShared<C> *>(drawShared));
  }
  if (threadIdx.x != 0)
    return;
  status[4] = token;
  status[5] = ok;
  // The ring slot of this step (its number, set by its input check), which
  // the next step's input check reads when the host staged kFedToken, and
  // the host reads for a step it did not wait on alone (a pipelined Session).
  const unsigned r = mirror[kStatusSeq] & 1u;
  mirror[kStatusRing + 2 * r] = token;
  mirror[kStatusRing + 2 * r + 1] = ok;
  status[kStatusRing + 2 * r] = token;
  status[kStatusRing + 2 * r + 1] = ok;
#ifndef FG_NO_STATUS_FENCE
  __threadfence_system(); // (the host reads the words after the step's event)
#endif
}

} // namespace fg
