//===- common.cuh - what every fusegraph kernel starts with -----------------===//
//
// Storage types for 16-bit floats (fg_f16, fg_bf16: raw bits, so no CUDA
// header is needed under NVRTC), conversions to and from float (round to
// nearest even; float -> integer rounds half away from zero like the CPU
// reference), warp / block reductions and an L1 prefetch. Embedded into the
// compiler at build time (codegen/cuda/KernelSources.h) and put in front of
// every kernel.
//
//===----------------------------------------------------------------------===//
#define FG_INF __int_as_float(0x7f800000)
#define FG_NAN __int_as_float(0x7fffffff)
struct fg_f16 { unsigned short b; };
struct fg_bf16 { unsigned short b; };
static __device__ __forceinline__ float fg_to_f(float x) { return x; }
static __device__ __forceinline__ float fg_to_f(fg_f16 x) {
  float f; asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(x.b)); return f;
}
static __device__ __forceinline__ float fg_to_f(fg_bf16 x) {
  return __uint_as_float(((unsigned)x.b) << 16);
}
static __device__ __forceinline__ float fg_to_f(int x) { return (float)x; }
static __device__ __forceinline__ float fg_to_f(long long x) { return (float)x; }
template <class T> struct fg_conv;
template <> struct fg_conv<float> { static __device__ __forceinline__ float from(float f) { return f; } };
template <> struct fg_conv<fg_f16> {
  static __device__ __forceinline__ fg_f16 from(float f) {
    fg_f16 r; asm("cvt.rn.f16.f32 %0, %1;" : "=h"(r.b) : "f"(f)); return r;
  }
};
template <> struct fg_conv<fg_bf16> {
  static __device__ __forceinline__ fg_bf16 from(float f) {
    fg_bf16 r; asm("cvt.rn.bf16.f32 %0, %1;" : "=h"(r.b) : "f"(f)); return r;
  }
};
// float -> integer rounds half away from zero (std::lround, as the CPU reference).
template <> struct fg_conv<int> { static __device__ __forceinline__ int from(float f) { return (int)llroundf(f); } };
template <> struct fg_conv<long long> {
  static __device__ __forceinline__ long long from(float f) { return llroundf(f); }
};
template <class T> static __device__ __forceinline__ T fg_from_f(float f) { return fg_conv<T>::from(f); }
static __device__ __forceinline__ float fg_warp_sum(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}
// One rope pair's rotation (a, b) -> (a·cs - b·sn, a·sn + b·cs): each product
// rounded, then the sum, never contracted into an FMA — so every form that
// rotates a pair (the row launch, a GEMV's store tail that holds one channel
// and its partner's value, attention's rope prologue) gives the same bits, in
// whichever order it meets the two channels (the CPU reference rotates in
// f64).
static __device__ __forceinline__ float fg_rope_first(float a, float b, float cs, float sn) {
  return __fsub_rn(__fmul_rn(a, cs), __fmul_rn(b, sn));
}
static __device__ __forceinline__ float fg_rope_second(float a, float b, float cs, float sn) {
  return __fadd_rn(__fmul_rn(a, sn), __fmul_rn(b, cs));
}
static __device__ __forceinline__ float fg_warp_max(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}
// Every thread of the block gets the total. NT: threads per block (multiple of 32).
template <int NT> static __device__ __forceinline__ float fg_block_sum(float v) {
  v = fg_warp_sum(v);
  if (NT == 32) return v;
  __shared__ float sh[32];
  __syncthreads();
  if ((threadIdx.x & 31) == 0) sh[threadIdx.x >> 5] = v;
  __syncthreads();
  v = (threadIdx.x & 31) < (NT / 32) ? sh[threadIdx.x & 31] : 0.0f;
  return fg_warp_sum(v);
}
template <int NT> static __device__ __forceinline__ float fg_block_max(float v) {
  v = fg_warp_max(v);
  if (NT == 32) return v;
  __shared__ float sh[32];
  __syncthreads();
  if ((threadIdx.x & 31) == 0) sh[threadIdx.x >> 5] = v;
  __syncthreads();
  v = (threadIdx.x & 31) < (NT / 32) ? sh[threadIdx.x & 31] : -FG_INF;
  return fg_warp_max(v);
}
// The runner's status words (runtime/Program.h, kStatusBytes; mapped host
// memory): [0..3] the input check's verdict, [4] [5] the greedy launch's
// latest (token, ok), [6] the number of checked steps (the input check adds
// one after it read the staging), [8 + 2 r] [9 + 2 r] the greedy launch's
// (token, ok) of the step whose number has parity r.
constexpr unsigned kStatusSeq = 6, kStatusRing = 8;

// Programmatic dependent launch. Every kernel entry begins with fg_pdl_begin()
// (kernelEntry in codegen/cuda/Kernel.cpp writes it): griddepcontrol.wait
// blocks until every kernel this one depends on has finished and its writes
// are visible; then griddepcontrol.launch_dependents lets the kernels that
// depend on this one be scheduled now, so their launch overlaps this kernel's
// body (they wait in turn, so "C waited for B" still implies "A is done").
// Before the wait a kernel may run only its entry's prologue, which issues
// L2 prefetch hints (fg_prefetch_l2: weights, and KV rows of earlier steps)
// and nothing else, with two exceptions that read into registers: the DP4A
// GEMV's prologue loads its first rows of a block-quantised weight
// (gemv_dp4a.cuh; no kernel writes such a weight, as no op has a
// block-quantised result), and a one-token decode attention loads its first
// tile of K/V cache rows (attention.cuh, attentionEarly: only caches no
// kernel of the step writes except at the token's row; after the wait it
// re-reads the position, keeps the registers only if it is the same, and
// loads the token's row, or the whole tile, again at L2 with ld.global.cg).
// A prefetch neither reads a value into a register nor writes, and L2 is the
// point of coherence for every SM, so a line fetched before its producer's
// write is updated by that write; no value a predecessor writes is used
// from a read made before the wait, and the memory plan and the overlap
// proof need no change. The kernels a decode attention reads may trigger
// before their own wait (fg_pdl_begin_trigger_first, below), so the
// attention's prologue can overlap the kernels before them too. Without programmatic edges in the
// graph (eager runs, other GPUs) the prologue simply runs first and both
// instructions are no-ops.
// FG_PDL_DELAY_NS (a debug build: FG_DEBUG_PDL_DELAY_NS in the compiler's
// environment) sleeps after the trigger, so a kernel that read its inputs
// without waiting would read them before they are written.
// FG_PDL_EARLY_TRIGGER (FG_DEBUG_PDL_EARLY_TRIGGER=1, for timing) lets the
// dependents launch before this kernel's own wait, so their prologues can
// overlap one more kernel; "C waited for B" still implies "A is done" (B
// completes only after its wait returned).
static __device__ __forceinline__ void fg_pdl_begin() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
#if defined(FG_PDL_EARLY_TRIGGER) && !defined(FG_PDL_NO_TRIGGER)
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
  asm volatile("griddepcontrol.wait;" ::: "memory");
#if !defined(FG_PDL_NO_TRIGGER) && !defined(FG_PDL_EARLY_TRIGGER)
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
#endif
#ifdef FG_PDL_DELAY_NS
  for (unsigned t = 0; t < FG_PDL_DELAY_NS; t += 1000) __nanosleep(1000);
#endif
}
// The kernels whose results decode attention reads (EmitOptions::
// pdlTriggerBeforeAttention): the trigger before the wait, so the attention
// is scheduled as soon as every block of them runs, and its prologue (the
// early loads of K/V rows of earlier steps, attention.cuh) overlaps the
// kernels before them, not only their own short bodies. "C waited for B"
// still implies "A is done": B finishes only after its own wait returned.
static __device__ __forceinline__ void fg_pdl_begin_trigger_first() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
#if !defined(FG_PDL_NO_TRIGGER)
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
#ifdef FG_PDL_DELAY_NS
  for (unsigned t = 0; t < FG_PDL_DELAY_NS; t += 1000) __nanosleep(1000);
#endif
}
// Thread-block clusters (sm_90): decode attention's cluster form and the
// MoE router (topk.cuh) publish partials into one block's shared memory.

/// barrier.cluster in two halves: arrive (release, or relaxed: orders
/// nothing) and wait (acquire). Every thread of every block of the cluster
/// takes part; .aligned: a warp's threads all execute the same one.
/// (Emitters ask for cluster kernels on sm_90 and later only; the guards
/// keep these out of older architectures' PTX.)
static __device__ __forceinline__ void fg_cluster_arrive(bool relaxed) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  if (relaxed)
    asm volatile("barrier.cluster.arrive.relaxed.aligned;\n" ::: "memory");
  else
    asm volatile("barrier.cluster.arrive.release.aligned;\n" ::: "memory");
#elif defined(__CUDA_ARCH__)
  __trap(); // a cluster-form kernel built for an older GPU: stop, never a wrong result
#endif
}
static __device__ __forceinline__ void fg_cluster_wait() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("barrier.cluster.wait.acquire.aligned;\n" ::: "memory");
#elif defined(__CUDA_ARCH__)
  __trap();
#endif
}
/// *p = v in the shared memory of the cluster's block `rank` (p: this
/// block's copy of the same variable).
static __device__ __forceinline__ void fg_store_remote(float *p, unsigned rank, float v) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  const unsigned local = (unsigned)__cvta_generic_to_shared(p);
  unsigned remote;
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;\n" : "=r"(remote) : "r"(local), "r"(rank));
  asm volatile("st.shared::cluster.f32 [%0], %1;\n" ::"r"(remote), "f"(v) : "memory");
#endif
}

// --- GEMV tails (codegen/cuda/GemvTails.cpp) -------------------------------------
//
// A one-token GEMV launch may end with the short row work that reads only its
// results (q's rope, k's rope and cache write, v's cache write, the q/k norms:
// launches that would each have waited on the GEMV alone). Every block takes a
// ticket after its stores; the last kTailBlocks to arrive wait until every
// block has arrived, then run the tails, each tail on its own range of them
// as a grid of its own (FgGrid, below: block fg_tail_block() of
// fg_tail_blocks()), and the last of them to finish
// resets the two counters, so every replay starts from zero. The blocks that
// wait are the last to arrive, so the blocks they wait for are already
// running or done: no co-residency is assumed. The tails read the GEMV's
// results at L2 (FG_TAIL_COHERENT: ld.global.cg in row.cuh's loads), since
// other blocks of this launch wrote them.

static __device__ __forceinline__ int &fg_tail_block() {
  __shared__ int b;
  return b;
}
static __device__ __forceinline__ int &fg_tail_blocks() {
  __shared__ int n;
  return n;
}
static __device__ __forceinline__ unsigned fg_ld_acquire(const unsigned *p) {
  unsigned v;
  asm volatile("ld.acquire.gpu.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
  return v;
}

/// *p read at L2 (ld.global.cg, Cg) or through L1 (ld.global.ca: what this
/// block stored before a barrier) for any 2, 4, 8 or 16-byte type (fg_f16
/// too). volatile with a memory clobber: never moved above the barrier or
/// the acquire that makes the value visible.
template <class T, bool Cg = true> static __device__ __forceinline__ T fg_ldcg(const T *p) {
  static_assert(sizeof(T) == 2 || sizeof(T) == 4 || sizeof(T) == 8 || sizeof(T) == 16,
                "a 2, 4, 8 or 16-byte element");
  union {
    T t;
    unsigned short h;
    unsigned u;
    unsigned long long l;
    uint4 q;
  } v;
  if constexpr (sizeof(T) == 2) {
    if (Cg)
      asm volatile("ld.global.cg.u16 %0, [%1];" : "=h"(v.h) : "l"(p) : "memory");
    else
      asm volatile("ld.global.ca.u16 %0, [%1];" : "=h"(v.h) : "l"(p) : "memory");
  } else if constexpr (sizeof(T) == 4) {
    if (Cg)
      asm volatile("ld.global.cg.u32 %0, [%1];" : "=r"(v.u) : "l"(p) : "memory");
    else
      asm volatile("ld.global.ca.u32 %0, [%1];" : "=r"(v.u) : "l"(p) : "memory");
  } else if constexpr (sizeof(T) == 8) {
    if (Cg)
      asm volatile("ld.global.cg.u64 %0, [%1];" : "=l"(v.l) : "l"(p) : "memory");
    else
      asm volatile("ld.global.ca.u64 %0, [%1];" : "=l"(v.l) : "l"(p) : "memory");
  } else {
    if (Cg)
      asm volatile("ld.global.cg.v4.u32 {%0, %1, %2, %3}, [%4];"
                   : "=r"(v.q.x), "=r"(v.q.y), "=r"(v.q.z), "=r"(v.q.w)
                   : "l"(p)
                   : "memory");
    else
      asm volatile("ld.global.ca.v4.u32 {%0, %1, %2, %3}, [%4];"
                   : "=r"(v.q.x), "=r"(v.q.y), "=r"(v.q.z), "=r"(v.q.w)
                   : "l"(p)
                   : "memory");
  }
  return v.t;
}

/// After the GEMV's body; `run(b)` runs the tails of tail block b (each tail
/// has its own range of the K tail blocks, so the tails run side by side).
/// ctr: two words of this launch's counters. K: at most the grid (the
/// emitter's rule).
template <int K, class F> static __device__ __forceinline__ void fg_tails(unsigned *ctr, F run) {
  const unsigned total = gridDim.x * gridDim.y * gridDim.z;
  const unsigned k = total < (unsigned)K ? total : (unsigned)K;
  const unsigned flat = threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z);
  __shared__ int tailBlock;
  __syncthreads(); // every thread's stores issued
  if (flat == 0) {
    // Release: this block's stores (ordered before it by the barrier) are
    // visible to whoever acquires the count that includes this ticket.
    unsigned t;
    asm volatile("atom.add.release.gpu.global.u32 %0, [%1], 1;" : "=r"(t) : "l"(ctr) : "memory");
    const int b = (int)t - (int)(total - k);
    if (b >= 0)
      while (fg_ld_acquire(&ctr[0]) < total) {
      }
    tailBlock = b;
  }
  __syncthreads();
  const int b = tailBlock;
  if (b < 0)
    return;
  run(b);
  __syncthreads();
  if (flat == 0 && atomicAdd(&ctr[1], 1u) == k - 1) {
    // Every tail block has seen ctr[0] complete: nothing reads it again.
    ctr[0] = 0;
    ctr[1] = 0;
  }
}

/// Tail block b's share: blocks [from, from + n) of the tail blocks run one tail.
static __device__ __forceinline__ bool fg_tail_share(int b, int from, int n) {
  if (b < from || b >= from + n)
    return false;
  if (threadIdx.x == 0) {
    fg_tail_block() = b - from;
    fg_tail_blocks() = n;
  }
  __syncthreads();
  return true;
}

/// The grid a row or map body walks: the launch's, or, in a GEMV tail (a Cfg
/// with kTailBody), the tail blocks'.
template <class C, class = void> struct FgGrid {
  static __device__ __forceinline__ long long block() { return (long long)blockIdx.x; }
  static __device__ __forceinline__ long long blocks() { return (long long)gridDim.x; }
};
template <class C> struct FgGrid<C, decltype(void(C::kTailBody))> {
  static __device__ __forceinline__ long long block() { return (long long)fg_tail_block(); }
  static __device__ __forceinline__ long long blocks() { return (long long)fg_tail_blocks(); }
};

// Starts moving the 128-byte line of p into L2 (no register, no wait): a
// hint with no effect on any value read or written. The programmatic-launch
// prologues (before fg_pdl_begin) issue only these.
static __device__ __forceinline__ void fg_prefetch_l2(const void *p) {
  asm volatile("prefetch.global.L2 [%0];" ::"l"(p));
}
// Starts moving the line of p toward L1 (no register, no wait); for data needed soon.
static __device__ __forceinline__ void fg_prefetch_l1(const void *p) {
  asm volatile("prefetch.global.L1 [%0];" ::"l"(p));
}
// 16 bytes streamed from global memory (read once: not kept in L1). volatile:
// callers put it behind a bounds check (`k < K ? load : 0`), and an asm without
// side effects may be hoisted out of it (compute-sanitizer caught a
// speculative read past the end of a weight).
static __device__ __forceinline__ uint4 fg_load_stream(const void *p) {
  uint4 r;
  asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0, %1, %2, %3}, [%4];"
               : "=r"(r.x), "=r"(r.y), "=r"(r.z), "=r"(r.w) : "l"(p));
  return r;
}

/// ldmatrix: four 8×8 matrices of 16-bit elements from shared memory; lane l
/// supplies the (16-byte aligned) address of row l % 8 of matrix l / 8 and
/// receives, from each matrix i, register i: row l / 4, columns 2(l % 4),
/// 2(l % 4) + 1 — an mma.m16n8k16 A fragment (rows 0-15 × columns 0-7 and
/// 8-15) or two B fragments, in one instruction instead of four 32-bit
/// loads.
/// The same at a shared-space address (`a`: __cvta_generic_to_shared of the
/// row; a loop can step it by constants instead of converting each time).
static __device__ __forceinline__ void fg_ldsm4_at(unsigned (&r)[4], unsigned a) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(a));
}
static __device__ __forceinline__ void fg_ldsm4(unsigned (&r)[4], const unsigned short *p) {
  fg_ldsm4_at(r, (unsigned)__cvta_generic_to_shared(p));
}
