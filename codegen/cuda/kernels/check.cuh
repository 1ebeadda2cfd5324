//===- check.cuh - the input check every entry starts with ------------------===//
//
// checkInputs<Cfg>(status, mirror, in, src): one block copies every checked
// input (token ids, positions: what the graph's input bindings give a range)
// from the runner's pinned host staging (src: what setInput wrote, read over
// the bus) into its arena slot (in), checks it there and writes the status
// words (runtime/Program.h, kStatusBytes; host memory the device writes):
//   status[0]  0 when every value is in [Lo, Hi), else 1 + the index of the
//              first bad input (Cfg's order = the entry's input order)
//   status[1]  the element index of its first bad value
//   status[2]  the bad value's low 32 bits, status[3] its high 32 bits
// "First" is the smallest (input, element) pair, so the report does not depend
// on thread timing. The words are written at every step (zeros when good), so
// the runner never clears them, and with the copy in here a replayed CUDA
// graph needs no host work but its launch: no copy before it, none after.
//
// The device mirror (`mirror`: the program's counters, SlotTables::
// statusMirror, zero at load and at resetState, as the host words are): the
// step count and the greedy ring, which only kernels write, are kept in
// device memory too and read from there. Reads of host memory cross the bus
// one at a time (~1 µs each on the H200 machine: 32 blocks each reading one
// word took 34 µs), so the check reads over the bus only the staged inputs,
// and the greedy token (greedy.cuh) nothing.
//
// A bad step must not touch state: after the check, every value of a
// positions input (Cfg: kPositions) is set to -1, which set_rows (and the
// fused KV-cache writes) skip and attention reads no rows for. Token ids out
// of range need nothing: get_rows gathers zeros for them. No other kernel
// reads or writes out of bounds on a bad step, and the step's outputs are
// garbage the runner never hands out (the step returns the error).
//
// Policies (the emitter, Lower's input check, writes Cfg):
//   CheckIn<T, N, Lo, Hi, kPositions>  one input: N values of T (int or long long)
//   Cfg::Ins                           CheckList<CheckIn<..>, ...>
//
//===----------------------------------------------------------------------===//

namespace fg {

template <class T_, long long N_, long long Lo_, long long Hi_, bool Positions_,
          bool Tokens_ = false>
struct CheckIn {
  using T = T_;
  static constexpr long long N = N_, Lo = Lo_, Hi = Hi_;
  static constexpr bool kPositions = Positions_, kTokens = Tokens_;
};

/// A token id staged as this value is fed by the device: the greedy token of
/// the previous step (status ring slot seq & 1, written by that step's
/// greedy launch; kernels/greedy.cuh), or, when that step declined (a NaN or
/// only -inf), the value itself, which the range check then refuses.
constexpr long long kFedToken = -2147483647ll - 1;

template <class... In> struct CheckList {};

constexpr unsigned long long kCheckNone = ~0ull;

/// The smallest (input << 40 | element) key of a bad value, over `List` from
/// input I on.
/// Input I's values start at thread Off (mod the block): the inputs before
/// it, each rounded up to whole warps, so that different inputs' reads of
/// the host staging are issued by different warps at once — a read over
/// the bus is a round trip of ~1 µs, and a warp that reads two inputs one
/// after the other waits for both (a decode step's token and position).
template <int I, class List, long long Off = 0> struct CheckWalk;
template <int I, long long Off> struct CheckWalk<I, CheckList<>, Off> {
  static __device__ __forceinline__ void find(void *const *, const void *const *,
                                              const unsigned *, unsigned long long *) {}
  static __device__ __forceinline__ void report(void *const *, unsigned long long, unsigned *) {}
  static __device__ __forceinline__ void poison(void *const *) {}
};
template <int I, long long Off, class In, class... Rest>
struct CheckWalk<I, CheckList<In, Rest...>, Off> {
  using Next = CheckWalk<I + 1, CheckList<Rest...>, Off + (In::N + 31) / 32 * 32>;
  using T = typename In::T;

  static __device__ __forceinline__ void find(void *const *in, const void *const *src,
                                              const unsigned *mirror, unsigned long long *first) {
    T *v = static_cast<T *>(in[I]);
    const T *s = static_cast<const T *>(src[I]);
    const long long b = blockDim.x, from = ((long long)threadIdx.x + b - Off % b) % b;
    for (long long e = from; e < In::N; e += b) {
      T raw = s[e];
      if constexpr (In::kTokens)
        if ((long long)raw == kFedToken) { // the ring from the device mirror
          const unsigned r = mirror[kStatusSeq] & 1u;
          if (mirror[kStatusRing + 2 * r + 1] == 1u)
            raw = (T)mirror[kStatusRing + 2 * r];
        }
      v[e] = raw;
      const long long x = (long long)raw;
      if (x < In::Lo || x >= In::Hi)
        atomicMin(first, ((unsigned long long)I << 40) | (unsigned long long)e);
    }
    Next::find(in, src, mirror, first);
  }

  /// Thread 0 writes the status of the bad value `key` names.
  static __device__ __forceinline__ void report(void *const *in, unsigned long long key,
                                                unsigned *status) {
    if ((int)(key >> 40) == I) {
      const long long e = (long long)(key & ((1ull << 40) - 1));
      const long long x = (long long)static_cast<const T *>(in[I])[e];
      status[0] = (unsigned)I + 1u;
      status[1] = (unsigned)e;
      status[2] = (unsigned)((unsigned long long)x & 0xffffffffull);
      status[3] = (unsigned)((unsigned long long)x >> 32);
      return;
    }
    Next::report(in, key, status);
  }

  static __device__ __forceinline__ void poison(void *const *in) {
    if constexpr (In::kPositions) {
      T *v = static_cast<T *>(in[I]);
      for (long long e = threadIdx.x; e < In::N; e += blockDim.x)
        v[e] = (T)-1;
    }
    Next::poison(in);
  }
};

template <class C>
static __device__ __forceinline__ void checkInputs(unsigned *status, unsigned *mirror,
                                                   void *const *in, const void *const *src) {
  __shared__ unsigned long long first;
  if (threadIdx.x == 0)
    first = kCheckNone;
  __syncthreads();
  CheckWalk<0, typename C::Ins>::find(in, src, mirror, &first); // copies, then checks
  __syncthreads(); // every copy is in its slot: report and poison read and write those
  // The step's sequence number: this step has read the staging (and the
  // ring slot of the step before), so the host may stage the next one.
  if (threadIdx.x == 0) {
    const unsigned seq = mirror[kStatusSeq] + 1u;
    mirror[kStatusSeq] = seq;
    status[kStatusSeq] = seq;
#ifndef FG_NO_STATUS_FENCE
    // (Every staged value was read before the barrier above: its value was
    // used. So the count cannot pass the reads without it; the debug build
    // FG_DEBUG_STATUS_FENCE=0 drops it, to time what it costs the step.)
    __threadfence_system();
#endif
  }
  const unsigned long long key = first;
  if (key == kCheckNone) {
    if (threadIdx.x < 4)
      status[threadIdx.x] = 0u;
    return;
  }
  if (threadIdx.x == 0)
    CheckWalk<0, typename C::Ins>::report(in, key, status);
  __syncthreads(); // the bad value is read before any position is overwritten
  CheckWalk<0, typename C::Ins>::poison(in);
}

} // namespace fg
