//===- attention.cuh - decode attention: flash-decoding with GQA --------------===//
//
// attention(q [T, Hq, D], k [ctx, Hkv, D], v [ctx, Hkv, Dv], pos [T], sinks [Hq]?)
// (fused.rope_attention: q rotated by its rope as it is loaded, attnQ)
//   y[t, h, :] = softmax_j(cap(scale · q[t, h] · k[j, h / G])) · v[j, h / G]
// over the visible rows j ∈ [lo(t), pos[t]] (lo = pos − window + 1 with a
// sliding window, else 0; causal by position, so prefill chunks work too);
// a sink logit only adds to the denominator. The emitter
// (AttentionEmitter.cpp) writes a parameter struct `Cfg` of constexpr shapes,
// layouts and policies and a one-line entry; it writes no kernel code.
//
// Work split. Grid (kSmax, Hkv · kHC, T): one block per (split, kv head
// [× head chunk], token). The block computes ALL the query heads of its kv
// head's group (up to 8; larger groups are cut into kHC chunks of kGB) from
// the same K/V rows, so every KV byte is read once per kv head. The number
// of live splits is decided at run time from pos[t] read from device memory
// (one graph serves every step): nsplit = min(kSmax, ⌈live / kMinChunk⌉),
// chunk = ⌈live / nsplit⌉ rounded up to 8 keys; blocks with s ≥ nsplit exit
// at once. Inside a block, warp w takes tiles w, w + kW, ... of kU·8 keys.
//
// Tensor cores (mma.sync, f32 accumulate); K and V reach registers straight
// from global memory or (the staged form, below) through a per-lane ring:
//   S = Q·Kᵀ  m16n8k16, M = 16 rows = 8 heads' q rounded to the mma type
//             (rows 0-7, "hi") and the rounding remainders (rows 8-15, "lo"),
//             so S = C[g] + C[g + 8] keeps ~22 bits of q (16 for bf16); N =
//             8 keys (lane g = lane / 4 owns key g of the step), K = 16 of D.
//             Lane (g, t = lane % 4) loads 16 bytes of its key's row at d =
//             32c + 8t: the mma does not care in which order d is visited, so
//             fragment slots {2t, 2t+1 | 2t+8, 2t+9} of mma j = 0, 1 are d =
//             8t + 4j + {0, 1 | 2, 3}; the q fragments (in shared memory, one
//             uint4 per lane and mma) use the same permutation. q is
//             multiplied by `scale` before rounding.
//   O += P·V  m16n8k8, M = P rounded (rows 0-7) and its remainder (rows
//             8-15), K = the 8 keys of the step; the S accumulator layout
//             (head g, keys 2t, 2t+1) is already P's A-fragment layout. V's
//             B fragment wants (keys 2t, 2t+1; dv = n) per lane, but lane
//             (g, t) loaded 16 bytes of key g at dv = 32c + 8t; word b of
//             those is element (row g, cols 2t, 2t+1) of the 8×8 matrix
//             M_b[key][c] = V[key][32c + 8(c/2) + 2b + c%2], so one
//             `movmatrix.trans` per word yields exactly the B fragment of
//             n-tile (c, b), whose output column n is dv = 32c + 8(n/2) + 2b
//             + n%2. Lane (g, t) thus ends with O[head g][32c + 8t + 0..7].
// f32 caches are split into f16 hi + lo words (two mmas per fragment). With
// f16 and f32 caches, q · scale and the cache values must lie within the f16
// range (|x| < 65504); bf16 caches have the f32 range.
// Masked keys (outside the block's range) load zeros and score −inf; padding
// beyond D / Dv loads zeros, so nothing undefined enters an mma.
//
// Bytes in flight: two forms.
//  Staged (C::kStages ≥ 2: caches of more than 4096 rows whose rows take
//   16-byte copies, by default):
//   each warp owns a ring of kStages tiles in dynamic shared memory; every
//   lane copies, by cp.async, exactly the 16-byte units it will read into
//   its own slots ([stage][unit][lane]: conflict-free reads, no barrier),
//   kStages − 1 tiles ahead of the one it computes, so loads stay in flight
//   through the math instead of one burst and one round trip per tile. The
//   emitter takes tiles of two 8-key steps (kU = 2) where two stages of
//   them fit beside two resident blocks per SM, else of one, and as many
//   stages (≤ 4) as fit (D = 128, f16: 2 stages of 8 KB a warp, 64 KB a
//   block), and sizes kSmax for 2 blocks per SM: one wave (W-dense, T = 1:
//   33 splits × 8 kv heads = 264 blocks) — or for 1 where 2 would give the
//   merge more than 2 · SMs (split, head) partials (W-moe, T = 1: 33 splits
//   × 4 kv heads of 8 q heads, 4 stages of 8 KB a warp).
//  Register loads (C::kStages = 0: rows not 16-byte aligned, a ring that
//   does not fit, or FG_DEBUG_ATTN_STAGES=0; and, in a staged kernel, every
//   token with at most kRegMaxLive live rows — see `attention` at the end —
//   through AttnRegisters<C>, the same configuration with kURegs steps a tile
//   and kMinChunkRegs keys a split): each lane issues kU · (⌈D/32⌉
//   + DVS/32) 16-byte loads before it touches any of them (kU = 2 at
//   D = 128: 8 KB per warp), the first tile before q is staged; 202
//   registers at D = 128, kSmax sized for 4 blocks per SM (66 splits × 8 =
//   528 blocks, two waves at KV 8192).
// A split is at least one round of the block's warps (kMinChunk = kW · kU
// · 8 keys: 64 staged with 2-step tiles, 64 with register loads).
//
// The early loads (C::kEarly; one token, register loads; attentionEarly
// below): the entry's prologue, before griddepcontrol.wait, loads the
// warps' first tile into registers, aimed by the position read past L1.
// After the wait the body reads the position again: the same, it keeps
// the registers and loads only the token's own row again (C::kFreshK /
// kFreshV: this step's set_rows wrote it); else it loads the tile anew.
//
// The K and V rows of the step (C::kWriteKv, fused.rope_kv_attention: one
// token, one head chunk a kv head): after the wait, the block whose split
// holds the token's position rotates its kv head's k row by the rope (q's,
// attnRopeAt), stores it and the v row into the caches there, and passes a
// barrier before any warp loads a key (attnWriteKv). No other block reads
// that row. The register loads of this form go to L2 (ld.global.cg: the
// non-coherent path may not see a row written in the same kernel); the
// ring's cp.async.cg already does; the early loads reload the row after the
// wait (kFreshK / kFreshV).
//
// The merge, in the same launch. A block merges its warps (in warp order;
// each warp's weight exp(m_w − M) per head computed once, not per column)
// and writes (m, l, o[Dv]) per head to its split's slot in scratch; then
// __threadfence() and one atomicAdd on the (token, head block) counter. The
// block that sees nsplit − 1 is the last: it merges the nsplit partials in
// a fixed order (max and denominator: lanes over splits, then a fixed warp
// butterfly; o: a sequential sum in split order), so the result depends only
// on the inputs — replays are bit-identical, no float atomics — adds the
// sink to the denominator, writes y, and resets the counter to 0
// (attnMergeSplits). Opt-in (C::kGroup > 0), a tree: the last block of each
// group of kGroup splits merges the group into a group partial first, and
// the last of those merges the groups — measured slower (a level's fence,
// counter and round trips cost more than one block reading every partial).
// So did one pass (each partial's m and l loaded beside its o, a running
// maximum: the m / l round trip saved, a longer dependent chain paid:
// W-dense KV 8192 17.8 -> 18.2 us, thirty-eighth session) — not kept.
//
// The cluster form (C::kCluster > 0; register loads, caches of up to 4096
// rows, the default there): grid x is one thread-block cluster of kCluster
// blocks (__cluster_dims__ in the entry) of kW = 8 warps, the splits of one
// (kv head chunk, token). Block s merges its warps as above and stores head
// h's (m, l, o) straight into block h's shared memory (AttnShared::in[s],
// mapa + st.shared::cluster); one cluster barrier (release / acquire) later
// block h merges head h from its own memory in split order and writes y.
// No scratch, fence, counter or L2 round trip; blocks past the live rows
// still join the barriers (and merge their head). A first barrier,
// arrived at on entry and waited on before the first remote store, makes
// sure every block of the cluster is running.
//
// Counters. The partials live in scratch (arena memory, undefined at every
// step), but the counters are the launch's own program memory (the plan's
// BufferSpace::Counters: no other launch touches them), zeroed when the plan
// is loaded; the merging block resets its counter to 0, so every replay
// starts from zero without a clearing launch.
//
// Head dims: any D, Dv ≤ 512. Dv is processed in slices of DVS columns
// (DVS = Dv rounded to 32 up to 256 for 16-bit caches with D ≤ 256, else up
// to 128, so the accumulators never spill): each slice recomputes S
// (K re-read, from L2) — the slower path for Dv > 256. 16-byte loads when
// rows are unit-stride and 16-byte aligned, else element loads.
//
//===----------------------------------------------------------------------===//

namespace fg {

// Phase stamps (a debug build: FG_DEBUG_ATTN_STAMPS=1 in the compiler's
// environment defines FG_ATTN_STAMPS): thread 0 of each block notes clock64
// at the prologue's start and end, after the wait, after the position,
// after q is staged, after the tile loop, after the block's merge and after
// the cluster barrier; the blocks of kv head 0, token 0 print them (cycles)
// with %globaltimer (ns) at the start and at the barrier. For timing only.
#ifdef FG_ATTN_STAMPS
__shared__ long long fg_attn_clk[8];
__shared__ unsigned long long fg_attn_gt0;
static __device__ __forceinline__ unsigned long long fg_attn_gtimer() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %globaltimer;" : "=l"(t));
  return t;
}
#define FG_ATTN_STAMP(i)                                                                       \
  do {                                                                                         \
    if (threadIdx.x == 0)                                                                      \
      fg_attn_clk[i] = clock64();                                                              \
  } while (0)
#define FG_ATTN_STAMPS_PRINT()                                                                 \
  do {                                                                                         \
    if (threadIdx.x == 0 && blockIdx.y == 0 && blockIdx.z == 0) {                              \
      const long long c7 = clock64();                                                          \
      const long long *c = fg_attn_clk;                                                        \
      printf("attn-stamps block %u gt %llu +%llu ns | prologue %lld wait %lld pos %lld q %lld " \
             "loop %lld merge %lld cluster %lld cycles\n",                                     \
             blockIdx.x, fg_attn_gt0, fg_attn_gtimer() - fg_attn_gt0, c[1] - c[0], c[2] - c[1], \
             c[3] - c[2], c[4] - c[3], c[5] - c[4], c[6] - c[5], c7 - c[6]);                     \
    }                                                                                          \
  } while (0)
#else
#define FG_ATTN_STAMP(i)                                                                       \
  do {                                                                                         \
  } while (0)
#define FG_ATTN_STAMPS_PRINT()                                                                 \
  do {                                                                                         \
  } while (0)
#endif

// --- KV element decoders --------------------------------------------------------

/// 16-bit caches: 8 elements = one uint4, used as they are.
struct AttnF16 {
  using T = fg_f16;
  static constexpr int kParts = 1, kTerms = 1;
  static constexpr bool kBf16 = false;
};
struct AttnBF16 {
  using T = fg_bf16;
  static constexpr int kParts = 1, kTerms = 1;
  static constexpr bool kBf16 = true;
};
/// f32 caches: 8 elements = two uint4, split into f16 hi + lo words.
struct AttnF32 {
  using T = float;
  static constexpr int kParts = 2, kTerms = 2;
  static constexpr bool kBf16 = false;
};

/// mma.sync in f16 or bf16, f32 accumulate.
template <bool Bf16> struct AttnMma;
template <> struct AttnMma<false> {
  static __device__ __forceinline__ unsigned pack(float lo, float hi) {
    unsigned r;
    asm("cvt.rn.f16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
    return r;
  }
  static __device__ __forceinline__ void unpack(unsigned v, float &lo, float &hi) {
    asm("{ .reg .f16 a, b; mov.b32 {a, b}, %2; cvt.f32.f16 %0, a; cvt.f32.f16 %1, b; }"
        : "=f"(lo), "=f"(hi) : "r"(v));
  }
  static __device__ __forceinline__ void mmaK16(float (&c)[4], const uint4 &a, unsigned b0,
                                                unsigned b1) {
    asm("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, "
        "{%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a.x), "r"(a.y), "r"(a.z), "r"(a.w), "r"(b0), "r"(b1));
  }
  static __device__ __forceinline__ void mmaK8(float (&c)[4], unsigned a0, unsigned a1,
                                               unsigned b) {
    asm("mma.sync.aligned.m16n8k8.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, "
        "{%4, %5}, {%6}, {%0, %1, %2, %3};"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a0), "r"(a1), "r"(b));
  }
};
template <> struct AttnMma<true> {
  static __device__ __forceinline__ unsigned pack(float lo, float hi) {
    unsigned r;
    asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
    return r;
  }
  static __device__ __forceinline__ void unpack(unsigned v, float &lo, float &hi) {
    lo = __uint_as_float(v << 16);
    hi = __uint_as_float(v & 0xffff0000u);
  }
  static __device__ __forceinline__ void mmaK16(float (&c)[4], const uint4 &a, unsigned b0,
                                                unsigned b1) {
    asm("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, "
        "{%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a.x), "r"(a.y), "r"(a.z), "r"(a.w), "r"(b0), "r"(b1));
  }
  static __device__ __forceinline__ void mmaK8(float (&c)[4], unsigned a0, unsigned a1,
                                               unsigned b) {
    asm("mma.sync.aligned.m16n8k8.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, "
        "{%4, %5}, {%6}, {%0, %1, %2, %3};"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a0), "r"(a1), "r"(b));
  }
};

/// (x0, x1) rounded to the mma type (hi) and the remainders (lo).
template <bool Bf16>
static __device__ __forceinline__ void attnSplit(float x0, float x1, unsigned &hi, unsigned &lo) {
  hi = AttnMma<Bf16>::pack(x0, x1);
  float h0, h1;
  AttnMma<Bf16>::unpack(hi, h0, h1);
  lo = AttnMma<Bf16>::pack(x0 - h0, x1 - h1);
}

/// Transposes an 8×8 matrix of 16-bit values held one row per 4 lanes.
static __device__ __forceinline__ unsigned attnTranspose(unsigned a) {
  unsigned d;
  asm("movmatrix.sync.aligned.m8n8.trans.b16 %0, %1;" : "=r"(d) : "r"(a));
  return d;
}

/// Elements d0 .. d0 + 7 of one row (element d at row[d · SD]); zeros for a
/// masked key or past N.
/// Cg: read at L2, the point of coherence (ld.global.cg), for rows this
/// block may have read before the wait (the early loads) and another kernel
/// wrote since: a non-coherent load could meet the stale line again.
static __device__ __forceinline__ uint4 attnLoadCg(const void *p) {
  uint4 r;
  asm volatile("ld.global.cg.v4.u32 {%0, %1, %2, %3}, [%4];"
               : "=r"(r.x), "=r"(r.y), "=r"(r.z), "=r"(r.w) : "l"(p));
  return r;
}
template <class Dec, long long N, long long SD, bool Vec, bool Cg = false>
static __device__ __forceinline__ void attnLoad8(const typename Dec::T *row, long long d0,
                                                 bool live, uint4 (&out)[Dec::kParts]) {
  using T = typename Dec::T;
  static_assert(!Cg || Vec, "coherent loads of 16-byte units only (the early loads' rows)");
  if constexpr (Vec) {
#pragma unroll
    for (int p = 0; p < Dec::kParts; ++p)
      out[p] = !(live && d0 < N) ? make_uint4(0, 0, 0, 0)
               : Cg              ? attnLoadCg(row + d0 + 4 * p)
                                 : fg_load_stream(row + d0 + 4 * p);
  } else {
    union {
      T v[8];
      uint4 u[Dec::kParts];
    } r;
#pragma unroll
    for (int e = 0; e < 8; ++e)
      r.v[e] = live && d0 + e < N ? row[(d0 + e) * SD] : T{};
#pragma unroll
    for (int p = 0; p < Dec::kParts; ++p)
      out[p] = r.u[p];
  }
}

/// The 4 mma words (elements 2i, 2i + 1) of 8 loaded elements: hi, and for
/// two-term decoders lo.
template <class Dec>
static __device__ __forceinline__ void attnWords(const uint4 (&raw)[Dec::kParts], unsigned (&hi)[4],
                                                 unsigned (&lo)[4]) {
  if constexpr (Dec::kTerms == 1) {
    hi[0] = raw[0].x, hi[1] = raw[0].y, hi[2] = raw[0].z, hi[3] = raw[0].w;
    lo[0] = lo[1] = lo[2] = lo[3] = 0u;
  } else {
    const float *f = reinterpret_cast<const float *>(raw);
#pragma unroll
    for (int i = 0; i < 4; ++i)
      attnSplit<Dec::kBf16>(f[2 * i], f[2 * i + 1], hi[i], lo[i]);
  }
}

/// One 16-byte cp.async into shared memory (L2 only: KV is read once);
/// zeros without reading when `on` is false.
static __device__ __forceinline__ void attnCopy16(uint4 *dst, const void *src, bool on) {
  const unsigned to = (unsigned)__cvta_generic_to_shared(dst);
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(to), "l"(src),
               "r"(on ? 16 : 0)
               : "memory");
}

// --- the kernel ------------------------------------------------------------------

template <class C> struct AttnArgs {
  float *y;
  float *scratch;
  unsigned *counters; ///< [T · kHB · (1 + kGroupSlots)], zero on entry; each merging block resets its own
  const typename C::Q *q;
  const typename C::DecK::T *k;
  const typename C::DecV::T *v;
  const typename C::Pos *pos;
  const typename C::Sink *sinks;
  const typename C::FF *ff = nullptr; ///< q's rope frequency factors (C::kRope && Rope::kFF)
  /// fused.rope_kv_attention (C::kWriteKv): the caches to write (k and v
  /// above, writable) and the step's k and v rows (f32, before k's rope).
  typename C::DecK::T *kw = nullptr;
  typename C::DecV::T *vw = nullptr;
  const float *kn = nullptr, *vn = nullptr;
};

/// The rope's pair partner of element d: (2i, 2i + 1) or, neox, (i, i + n/2);
/// d itself past n_dims (those channels pass through).
template <class C> static __device__ __forceinline__ long long attnRopePartner(long long d) {
  using R = typename C::Rope;
  constexpr long long kHalf = R::kNDims / 2;
  if (d >= R::kNDims)
    return d;
  return R::kNeox ? (d < kHalf ? d + kHalf : d - kHalf) : (d ^ 1);
}

/// Element d (value v, its pair partner's o) rotated by the rope of C::Rope
/// at position pos.
template <class C>
static __device__ __forceinline__ float attnRopeRotate(float v, float o, long long d, long long pos,
                                                       const typename C::FF *ff) {
  using R = typename C::Rope;
  constexpr long long kHalf = R::kNDims / 2;
  if (d >= R::kNDims)
    return v;
  const bool first = R::kNeox ? d < kHalf : (d & 1) == 0;
  const long long i = R::kNeox ? (first ? d : d - kHalf) : d >> 1;
  // The angle pos · freq_i [/ ff_i] in f64 (the emitter's table,
  // C::ropeFreq: no f64 pow), reduced to [-pi, pi] in f64 and then taken
  // in f32 (the f64 cos and sin per element cost the kernel 2.5 us a
  // launch on W-tiny, eleventh session): within 1e-6 of the rope rows'.
  double th = (double)pos * C::ropeFreq(i);
  if constexpr (R::kFF)
    th = th / (double)fg_to_f(ff[C::ff_off + i * C::ff_s]);
  th -= 6.283185307179586 * rint(th * 0.15915494309189535);
  float sn, cs;
  sincosf((float)th, &sn, &cs);
  cs *= (float)R::kMScale;
  sn *= (float)R::kMScale;
  return first ? fg_rope_first(v, o, cs, sn) : fg_rope_second(o, v, cs, sn);
}

/// Element d of a row (element e at row[e · sd]) at position pos, rotated
/// by the rope of C::Rope (the partner read from the row as well).
template <class C, class T>
static __device__ __forceinline__ float attnRopeAt(const T *row, long long sd, long long d,
                                                   long long pos, const typename C::FF *ff) {
  return attnRopeRotate<C>(fg_to_f(row[d * sd]), fg_to_f(row[attnRopePartner<C>(d) * sd]), d, pos,
                           ff);
}

/// Element d of q row (tok, h) at position pos, rotated by q's rope when
/// C::kRope (fused.rope_attention, fused.rope_kv_attention).
template <class C>
static __device__ __forceinline__ float attnQ(const AttnArgs<C> &a, long long tok, long long h,
                                              long long d, long long pos) {
  const typename C::Q *row = a.q + C::q_off + tok * C::q_st + h * C::q_sh;
  if constexpr (C::kRope)
    return attnRopeAt<C>(row, C::q_sd, d, pos, a.ff);
  return fg_to_f(row[d * C::q_sd]);
}

template <class C> struct AttnShared {
  uint4 qf[C::NCK][2][32]; ///< q fragments: [32-chunk of D][mma j][lane]
  union {
    struct {
      float o[C::kW][8][C::DVS];
      float m[C::kW][8], l[C::kW][8];
      float f[C::kW][8], M[8]; ///< warp w's weight exp(m_w − M) of head h; M of head h
    } w; ///< per-warp partials of one dv slice
    struct {
      float e[C::kSmax][8]; ///< merge weight of each split (exp(m_s − M) / L)
    } c;
  } u;
  /// The cluster form: split s's (m, l, o[Dv]) of the head this block
  /// merges, written by block s (into this block's memory, through the cluster).
  float in[C::kCluster > 0 ? C::kCluster : 1][C::kCluster > 0 ? 2 + C::DvP : 1];
  /// The cluster form with C::kClusterAsync: the mbarrier the partials'
  /// st.async stores complete (their bytes counted), waited on instead of
  /// the second cluster barrier.
  unsigned long long bar;
  int last;
};

// The cluster form's barriers and remote stores: common.cuh (fg_cluster_*).

// The cluster form's partials by st.async (C::kClusterAsync; opt-in,
// EmitOptions::attentionClusterAsync). A cluster barrier's release half is
// a MEMBAR.ALL.GPU on sm_90 (SASS of `barrier.cluster.arrive.release`, and
// of a fence.acq_rel.cluster before a relaxed arrive, alike), after every
// remote store of the block. Instead, block h arms an mbarrier of its own
// with the bytes it will receive (nsplit partials of 2 + Dv floats) before
// the first cluster barrier; block s sends head h's partial with
// `st.async ... mbarrier::complete_tx::bytes` (no fence: the mbarrier
// counts the bytes as they land), and block h waits for the mbarrier's
// phase, not for a second cluster barrier. No block writes into a block
// that does not merge a head, and a merging block waits for all its bytes
// before it exits.
static __device__ __forceinline__ void attnBarArm(unsigned long long *bar, unsigned bytes) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  const unsigned b = (unsigned)__cvta_generic_to_shared(bar);
  asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" ::"r"(b) : "memory");
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(b), "r"(bytes)
               : "memory");
  asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
#endif
}
/// *p = v in block `rank`'s copy of p, counted on block `rank`'s copy of bar.
static __device__ __forceinline__ void attnSendAsync(float *p, unsigned long long *bar,
                                                     unsigned rank, float v) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  unsigned rp, rb;
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;"
               : "=r"(rp) : "r"((unsigned)__cvta_generic_to_shared(p)), "r"(rank));
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;"
               : "=r"(rb) : "r"((unsigned)__cvta_generic_to_shared(bar)), "r"(rank));
  asm volatile("st.async.shared::cluster.mbarrier::complete_tx::bytes.b32 [%0], %1, [%2];" ::"r"(rp),
               "r"(__float_as_uint(v)), "r"(rb)
               : "memory");
#endif
}
static __device__ __forceinline__ void attnBarWait(unsigned long long *bar) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  const unsigned b = (unsigned)__cvta_generic_to_shared(bar);
  unsigned done = 0;
  while (!done)
    asm volatile("{ .reg .pred p; mbarrier.try_wait.parity.shared::cta.b64 p, [%1], 0; "
                 "selp.u32 %0, 1, 0, p; }"
                 : "=r"(done) : "r"(b) : "memory");
#endif
}
/// Whether block hh of head block hb merges a head (and so receives partials).
template <class C> static __device__ __forceinline__ bool attnMerges(int hh, long long hb) {
  return hh < C::kGB && (hb % C::kHC) * C::kGB + hh < C::G;
}

/// The cluster form's end: after the barrier that publishes every block's
/// partials, block h merges head h of its (kv head, token) from the
/// partials of splits 0 .. nsplit − 1 (in split order: the result depends
/// only on the inputs) in its own shared memory, adds the sink to the
/// denominator and writes y. Blocks past the group's heads only join the barrier.
template <class C, class Sh>
static __device__ __forceinline__ void attnClusterMerge(const AttnArgs<C> &a, Sh &sh, int nsplit,
                                                        long long hb, long long tok, long long h0) {
  const int hh = blockIdx.x;
  if constexpr (C::kClusterAsync) {
    if (!attnMerges<C>(hh, hb))
      return;
    attnBarWait(&sh.bar);
    FG_ATTN_STAMPS_PRINT();
  } else {
    fg_cluster_arrive(false);
    fg_cluster_wait();
    FG_ATTN_STAMPS_PRINT();
    if (!attnMerges<C>(hh, hb))
      return;
  }
  float M = -FG_INF;
  for (int q = 0; q < nsplit; ++q)
    M = fmaxf(M, sh.in[q][0]);
  float sink = -FG_INF;
  if constexpr (C::kSinks) {
    sink = fg_to_f(a.sinks[C::sink_off + (h0 + hh) * C::sink_sh]);
    M = fmaxf(M, sink);
  }
  // Split q's weight exp(m_q − M) / L, once for every column.
  float e[C::kCluster], L = 0.0f;
#pragma unroll
  for (int q = 0; q < C::kCluster; ++q) {
    e[q] = q < nsplit && sh.in[q][0] != -FG_INF ? expf(sh.in[q][0] - M) : 0.0f;
    if (q < nsplit)
      L += sh.in[q][1] * e[q];
  }
  if (sink != -FG_INF)
    L += expf(sink - M);
  const float inv = L > 0.0f ? 1.0f / L : 0.0f;
#pragma unroll
  for (int q = 0; q < C::kCluster; ++q)
    e[q] *= inv;
  float *yr = a.y + (tok * C::Hq + h0 + hh) * C::Dv;
  for (int dv = threadIdx.x; dv < C::Dv; dv += C::kW * 32) {
    float o = 0.0f;
#pragma unroll
    for (int q = 0; q < C::kCluster; ++q)
      if (q < nsplit)
        o += sh.in[q][2 + dv] * e[q];
    yr[dv] = o;
  }
}

/// The visible keys of query t and how they are split.
struct AttnRange {
  long long lo, live, chunk;
  int nsplit;
};
template <class C> static __device__ __forceinline__ AttnRange attnRange(long long p) {
  AttnRange r;
  const long long hi = p < C::ctx - 1 ? p : C::ctx - 1;
  r.lo = C::window > 0 ? (p - C::window + 1 > 0 ? p - C::window + 1 : 0) : 0;
  r.live = hi - r.lo + 1 > 0 ? hi - r.lo + 1 : 0;
  long long ns = (r.live + C::kMinChunk - 1) / C::kMinChunk;
  ns = ns < 1 ? 1 : (ns > C::kSmax ? C::kSmax : ns);
  r.chunk = ((r.live + ns - 1) / ns + 7) / 8 * 8;
  if (r.chunk < 8)
    r.chunk = 8;
  r.nsplit = r.live > 0 ? (int)((r.live + r.chunk - 1) / r.chunk) : 1;
  return r;
}

/// Split s's keys [kb, ke) and the warp tiles of C::kU steps they make (the
/// body and the early loads take the same ones).
struct AttnKeys {
  long long kb, ke;
  int ntiles;
};
template <class C> static __device__ __forceinline__ AttnKeys attnKeys(const AttnRange &r, int s) {
  AttnKeys k;
  k.kb = r.lo + s * r.chunk;
  k.ke = k.kb + r.chunk < r.lo + r.live ? k.kb + r.chunk : r.lo + r.live;
  k.ntiles = (int)(((k.ke - k.kb + 7) / 8 + C::kU - 1) / C::kU);
  return k;
}

/// The register-load form of a staged configuration (the hybrid's short-KV
/// path): tiles of kURegs steps, splits of kMinChunkRegs keys, no ring.
template <class C> struct AttnRegisters : C {
  static constexpr int kStages = 0, kU = C::kURegs;
  static constexpr long long kMinChunk = C::kMinChunkRegs;
};

/// One warp tile of K and V rows into registers: lane (g, t4) takes key
/// kb + (tile · kU + u) · 8 + g of each step u, 16 bytes at d = 32c + 8t4
/// (zeros past ke).
template <class C, bool Cg = false>
static __device__ __forceinline__ void
attnLoadTile(const typename C::DecK::T *kbase, const typename C::DecV::T *vbase, long long kb,
             long long ke, int tile, long long dvs,
             uint4 (&rk)[C::kU][C::NCK][C::DecK::kParts],
             uint4 (&rv)[C::kU][C::DVS / 32][C::DecV::kParts]) {
  const int lane = threadIdx.x & 31, g = lane >> 2, t4 = lane & 3;
#pragma unroll
  for (int u = 0; u < C::kU; ++u) {
    const long long j = kb + (long long)(tile * C::kU + u) * 8 + g;
    const bool live = j < ke;
    const typename C::DecK::T *krow = kbase + j * C::k_sj;
    const typename C::DecV::T *vrow = vbase + j * C::v_sj;
#pragma unroll
    for (int c = 0; c < C::NCK; ++c)
      attnLoad8<typename C::DecK, C::D, C::k_sd, C::kVecK, (Cg || C::kWriteKv) && C::kVecK>(
          krow, 32 * c + 8 * t4, live, rk[u][c]);
#pragma unroll
    for (int c = 0; c < C::DVS / 32; ++c)
      attnLoad8<typename C::DecV, C::Dv, C::v_sd, C::kVecV, (Cg || C::kWriteKv) && C::kVecV>(
          vrow, dvs + 32 * c + 8 * t4, live, rv[u][c]);
  }
}

/// The early loads (C::kEarly: one token, register loads, and caches that
/// no kernel of the step writes except at the token's own row, decided by
/// the emitter): before fg_pdl_begin, while the kernels this one depends on
/// may still run, the block reads the position past L1 and loads its warps'
/// first tile of K and V rows into registers — rows written by earlier
/// steps, whose graphs have completed. After the wait the body reads the
/// position again: if it is the same, it keeps the registers and loads again
/// only the token's own row (C::kFreshK / kFreshV: the cache this step's
/// set_rows writes); else it loads the tile as without this form. Reading
/// registers before the wait is the one thing the other prologues do not
/// do (common.cuh, fg_pdl_begin); it is safe here because no value so read
/// is used unless the rows it came from cannot have changed: the memory
/// plan never places arena values in state (the caches), and a step's
/// writes to a cache are its set_rows at the step's positions.
template <class C> struct AttnEarly {
  uint4 rk[C::kU][C::NCK][C::DecK::kParts], rv[C::kU][C::DVS / 32][C::DecV::kParts];
  long long p = -1; ///< the position the loads were aimed by (-1: none)
};
template <class C>
static __device__ __forceinline__ AttnEarly<C> attentionEarly(const AttnArgs<C> &a) {
  AttnEarly<C> e;
  if constexpr (C::kEarly && C::kStages == 0 && C::T == 1) {
    const long long p = (long long)__ldcg(a.pos + C::pos_off);
    const AttnRange r = attnRange<C>(p);
    const int warp = threadIdx.x >> 5, s = blockIdx.x;
    if (s < r.nsplit) {
      const AttnKeys k = attnKeys<C>(r, s);
      const long long hk = blockIdx.y / C::kHC;
      if (warp < k.ntiles)
        attnLoadTile<C>(a.k + C::k_off + hk * C::k_sh, a.v + C::v_off + hk * C::v_sh, k.kb, k.ke,
                        warp, 0, e.rk, e.rv);
    }
    e.p = p;
  }
  return e;
}

/// fused.rope_kv_attention (C::kWriteKv; one token, one head chunk a kv
/// head): the block whose keys [kb, ke) hold the token's position p stores
/// its kv head's rows there — k rotated by the rope, v as it is, each
/// rounded once to the cache's type — before any of its warps loads a key;
/// the barrier orders the stores before the loads (the register loads of
/// this form read at L2, attnLoadTile, and the ring's cp.async does). Every
/// other block's keys end before p, so no block reads a row another block
/// writes. Called by the body once the position and the keys are known —
/// q's loads (q first) are in flight meanwhile. A position past the cache
/// writes nothing (set_rows' input check reports it).
template <class C>
static __device__ __forceinline__ void attnWriteKv(const AttnArgs<C> &a, long long p, long long kb,
                                                   long long ke, long long hk) {
  static_assert(C::T == 1 && C::kHC == 1, "one token, one head chunk a kv head");
  if (p >= 0 && p < C::ctx && kb <= p && p < ke) {
    const float *kn = a.kn + C::kn_off + hk * C::kn_sh;
    const float *vn = a.vn + C::vn_off + hk * C::vn_sh;
    typename C::DecK::T *kr = a.kw + C::k_off + hk * C::k_sh + p * C::k_sj;
    typename C::DecV::T *vr = a.vw + C::v_off + hk * C::v_sh + p * C::v_sj;
    for (long long d = threadIdx.x; d < C::D; d += blockDim.x)
      kr[d * C::k_sd] = fg_from_f<typename C::DecK::T>(attnRopeAt<C>(kn, C::kn_sd, d, p, a.ff));
    for (long long d = threadIdx.x; d < C::Dv; d += blockDim.x)
      vr[d * C::v_sd] = fg_from_f<typename C::DecV::T>(vn[d * C::vn_sd]);
  }
  __syncthreads();
}

/// Merges `count` partials (m[8], l[8], o[kGB][DvP] each, C::kPart floats
/// apart from ps) of head block (tok, hb) in index order. Final: adds the
/// sink, normalises and writes y; else writes the unnormalised (M, L, o)
/// into the partial slot `out` (the tree's group level: a partial of the
/// same form). Every thread of the block calls it.
template <class C, bool Final, class Sh>
static __device__ __forceinline__ void attnMergeSplits(const AttnArgs<C> &a, Sh &sh,
                                                       const float *ps, int count, float *out,
                                                       long long tok, long long hb, long long h0) {
  constexpr int W = C::kW;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  // Per head (one warp each): M, L and each partial's weight e_s (/ L when
  // final). The lanes take partials lane, lane + 32, ...; the warp
  // reductions have a fixed order, so the result depends only on count.
  constexpr int kPerLane = (C::kSmax + 31) / 32;
  for (int hh = warp; hh < C::kGB; hh += W) {
    // Every m and l of this head in one round trip (at most 8 a lane).
    float mq[kPerLane], lq[kPerLane];
#pragma unroll
    for (int k = 0; k < kPerLane; ++k) {
      const int q = lane + 32 * k;
      mq[k] = q < count ? __ldcg(ps + (long long)q * C::kPart + hh) : -FG_INF;
      lq[k] = q < count ? __ldcg(ps + (long long)q * C::kPart + 8 + hh) : 0.0f;
    }
    float M = -FG_INF;
#pragma unroll
    for (int k = 0; k < kPerLane; ++k)
      M = fmaxf(M, mq[k]);
    M = fg_warp_max(M);
    float sink = -FG_INF;
    if constexpr (Final && C::kSinks) {
      if ((hb % C::kHC) * C::kGB + hh < C::G) {
        sink = fg_to_f(a.sinks[C::sink_off + (h0 + hh) * C::sink_sh]);
        M = fmaxf(M, sink);
      }
    }
    float L = 0.0f, e[kPerLane];
#pragma unroll
    for (int k = 0; k < kPerLane; ++k) {
      e[k] = mq[k] == -FG_INF ? 0.0f : expf(mq[k] - M);
      L += lq[k] * e[k];
    }
    L = fg_warp_sum(L);
    if (sink != -FG_INF)
      L += expf(sink - M);
    const float inv = !Final ? 1.0f : L > 0.0f ? 1.0f / L : 0.0f;
#pragma unroll
    for (int k = 0; k < kPerLane; ++k)
      if (lane + 32 * k < count)
        sh.u.c.e[lane + 32 * k][hh] = e[k] * inv;
    if (!Final && lane == 0) {
      out[hh] = M;
      out[8 + hh] = L;
    }
  }
  __syncthreads();
  // o = Σ_s o_s · e_s, in index order; 4 columns per thread, 16 partials'
  // loads in flight — or, with C::kMergeUnroll > 16, batches of that many
  // while that many are left, then the 16-wide loop. A plain 32-wide unroll
  // (thirty-eighth session, H100, µs): W-dense KV 8192 17.72 -> 17.58 and
  // W-moe 13.25 -> 12.84 at T = 1, but W-dense at T = 2 (17 splits: all in
  // the loop's remainder) 27.76 -> 30.42; the batched form is written after
  // that call and not yet timed. (Both of a thread's columns at once, 32
  // loads in flight through predicated batches: W-moe 15.3 -> 21.8.)
  constexpr int kV4 = (C::Dv + 3) / 4;
  for (int i = threadIdx.x; i < C::kGB * kV4; i += W * 32) {
    const int hh = i / kV4, dv = 4 * (i % kV4);
    if ((hb % C::kHC) * C::kGB + hh >= C::G)
      continue;
    float o[4] = {0.0f, 0.0f, 0.0f, 0.0f};
    const float *src = ps + 16 + hh * C::DvP + dv;
    int q = 0;
    if constexpr (C::kMergeUnroll > 16) {
      // Batches of kMergeUnroll while that many are left, the rest below.
      for (; q + C::kMergeUnroll <= count; q += C::kMergeUnroll) {
        float4 x[C::kMergeUnroll];
#pragma unroll
        for (int b = 0; b < C::kMergeUnroll; ++b)
          x[b] = __ldcg(reinterpret_cast<const float4 *>(src + (long long)(q + b) * C::kPart));
#pragma unroll
        for (int b = 0; b < C::kMergeUnroll; ++b) {
          const float e = sh.u.c.e[q + b][hh];
          o[0] += x[b].x * e, o[1] += x[b].y * e, o[2] += x[b].z * e, o[3] += x[b].w * e;
        }
      }
    }
#pragma unroll(C::kMergeUnroll < 16 ? C::kMergeUnroll : 16)
    for (; q < count; ++q) {
      const float4 x = __ldcg(reinterpret_cast<const float4 *>(src + (long long)q * C::kPart));
      const float e = sh.u.c.e[q][hh];
      o[0] += x.x * e, o[1] += x.y * e, o[2] += x.z * e, o[3] += x.w * e;
    }
    if constexpr (Final) {
      float *yr = a.y + (tok * C::Hq + h0 + hh) * C::Dv + dv;
#pragma unroll
      for (int e = 0; e < 4; ++e)
        if (dv + e < C::Dv)
          yr[e] = o[e];
    } else { // (DvP = Dv rounded up to 4: the whole float4 is the slot's)
      *reinterpret_cast<float4 *>(out + 16 + hh * C::DvP + dv) = make_float4(o[0], o[1], o[2], o[3]);
    }
  }
}

template <class C, class Sh>
static __device__ __forceinline__ void attentionBody(const AttnArgs<C> &a, Sh &sh,
                                                     const AttnEarly<C> *early) {
  using DK = typename C::DecK;
  using DV = typename C::DecV;
  using MK = AttnMma<DK::kBf16>;
  using MV = AttnMma<DV::kBf16>;
  constexpr int W = C::kW, U = C::kU, NCK = C::NCK, NCV = C::DVS / 32;
  static_assert(C::kGB >= 1 && C::kGB <= 8, "at most 8 heads per block (rows 8-15 hold lo)");
  static_assert(C::DVS % 32 == 0, "dv slices are whole 32-column chunks");
  static_assert(C::kStages == 0 || (C::kStages >= 2 && C::kVecK && C::kVecV),
                "the staged form takes 16-byte copies and at least two stages");

  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, g = lane >> 2, t4 = lane & 3;
  const int s = blockIdx.x;
  const long long hb = blockIdx.y, tok = blockIdx.z;
  const long long hk = hb / C::kHC, h0 = hk * C::G + (hb % C::kHC) * C::kGB; // first q head
  // q first (C::kQFirst): q's loads need no position, so they go out
  // before the position's and the two round trips overlap (else q is loaded
  // after the position, the range and the first tile). With a rope
  // (C::kRope) the rows and their pair partners are loaded first and
  // rotated once the position is known (below, where q is staged).
  constexpr int kQI = (NCK * 64 + W * 32 - 1) / (W * 32);
  constexpr bool kQF = C::kQFirst && kQI <= 2;
  float qx[kQF ? kQI : 1][4], qo[kQF && C::kRope ? kQI : 1][4];
  if constexpr (kQF) {
#pragma unroll
    for (int k = 0; k < kQI; ++k) {
      const int i = threadIdx.x + k * W * 32;
      const int j = (i >> 5) & 1, gg = (i & 31) >> 2, tt = i & 3;
      const long long d0 = 32 * (i >> 6) + 8 * tt + 4 * j;
      const bool hv = i < NCK * 64 && gg < C::kGB && (hb % C::kHC) * C::kGB + gg < C::G;
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const bool in = hv && d0 + e < C::D;
        if constexpr (C::kRope) { // rotated and scaled where q is staged
          const typename C::Q *row = a.q + C::q_off + tok * C::q_st + (h0 + gg) * C::q_sh;
          qx[k][e] = in ? fg_to_f(row[(d0 + e) * C::q_sd]) : 0.0f;
          qo[k][e] = in ? fg_to_f(row[attnRopePartner<C>(d0 + e) * C::q_sd]) : 0.0f;
        } else {
          qx[k][e] = in ? attnQ<C>(a, tok, h0 + gg, d0 + e, 0) * C::scale() : 0.0f;
        }
      }
    }
  }
  const long long p = (long long)a.pos[C::pos_off + tok * C::pos_st];
  const AttnRange r = attnRange<C>(p);
  if constexpr (C::kCluster > 0) {
    // The first barrier's arrival: its wait, before the first store into
    // another block's memory, makes sure every block of the cluster runs.
    // (The grid's x is one cluster, so blockIdx.x is the rank and the
    // split: the emitter's grid[0] = kSmax = kCluster. The .aligned
    // barrier wants each warp converged: the prologue's loops may leave it not.)
    if constexpr (C::kClusterAsync)
      if (threadIdx.x == 0 && attnMerges<C>(s, hb))
        attnBarArm(&sh.bar, (unsigned)(r.nsplit * (2 + C::Dv) * 4));
    __syncwarp();
    fg_cluster_arrive(true);
    if (s >= r.nsplit) {
      // Past the live rows: no partial, but this block may merge a head.
      fg_cluster_wait();
      attnClusterMerge<C>(a, sh, r.nsplit, hb, tok, h0);
      return;
    }
  } else if (s >= r.nsplit) {
    return; // past the live rows (the whole block leaves before any barrier)
  }
  FG_ATTN_STAMP(3);
  const AttnKeys keys = attnKeys<C>(r, s);
  if constexpr (C::kWriteKv)
    attnWriteKv<C>(a, p, keys.kb, keys.ke, hk); // before any key is loaded
  const long long kb = keys.kb, ke = keys.ke;
  const int ntiles = keys.ntiles;
  const typename DK::T *kbase = a.k + C::k_off + hk * C::k_sh;
  const typename DV::T *vbase = a.v + C::v_off + hk * C::v_sh;
  float *part = a.scratch + ((tok * C::kHB + hb) * (C::kSmax + C::kGroupSlots)) * C::kPart;

  // The first tile's loads go out before q is staged (short KV: the two
  // latencies overlap), or went out before the wait (C::kEarly, below).
  uint4 rk[U][NCK][DK::kParts], rv[U][NCV][DV::kParts];
  auto loadTile = [&](int tile, long long dvs) {
    attnLoadTile<C>(kbase, vbase, kb, ke, tile, dvs, rk, rv);
  };
  // The staged form (kStages > 0): each lane copies, by cp.async, exactly
  // the 16-byte units it will read into its own slots of the warp's ring in
  // shared memory — slot [stage][unit][lane], so the reads back are
  // conflict-free and need no barrier — kStages − 1 tiles ahead of the one
  // it computes. One commit group per tile (empty past the last tile), so
  // `wait_group kStages − 2` always means "this tile has landed".
  constexpr int S = C::kStages > 0 ? C::kStages : 1;
  constexpr int UK = NCK * DK::kParts, UV = NCV * DV::kParts, UNITS = U * (UK + UV);
  uint4 *ring = nullptr;
  if constexpr (C::kStages > 0) {
    extern __shared__ uint4 fg_attn_ring[];
    ring = fg_attn_ring + (long long)warp * S * UNITS * 32 + lane;
  }
  auto issueTile = [&](int tile, long long dvs, int slot) {
    if (tile < ntiles) {
      uint4 *dst = ring + slot * UNITS * 32;
#pragma unroll
      for (int u = 0; u < U; ++u) {
        const long long j = kb + (long long)(tile * U + u) * 8 + g;
        const bool live = j < ke;
        const typename DK::T *krow = kbase + (live ? j : 0) * C::k_sj;
        const typename DV::T *vrow = vbase + (live ? j : 0) * C::v_sj;
#pragma unroll
        for (int c = 0; c < NCK; ++c)
#pragma unroll
          for (int pp = 0; pp < DK::kParts; ++pp) {
            const long long d0 = 32 * c + 8 * t4;
            const bool on = live && d0 < C::D;
            attnCopy16(dst + (u * (UK + UV) + c * DK::kParts + pp) * 32,
                       on ? krow + d0 + 4 * pp : krow, on);
          }
#pragma unroll
        for (int c = 0; c < NCV; ++c)
#pragma unroll
          for (int pp = 0; pp < DV::kParts; ++pp) {
            const long long d0 = dvs + 32 * c + 8 * t4;
            const bool on = live && d0 < C::Dv;
            attnCopy16(dst + (u * (UK + UV) + UK + c * DV::kParts + pp) * 32,
                       on ? vrow + d0 + 4 * pp : vrow, on);
          }
      }
    }
    asm volatile("cp.async.commit_group;\n" ::: "memory");
  };
  auto readTile = [&](int slot) {
    const uint4 *src = ring + slot * UNITS * 32;
#pragma unroll
    for (int u = 0; u < U; ++u) {
#pragma unroll
      for (int c = 0; c < NCK; ++c)
#pragma unroll
        for (int pp = 0; pp < DK::kParts; ++pp)
          rk[u][c][pp] = src[(u * (UK + UV) + c * DK::kParts + pp) * 32];
#pragma unroll
      for (int c = 0; c < NCV; ++c)
#pragma unroll
        for (int pp = 0; pp < DV::kParts; ++pp)
          rv[u][c][pp] = src[(u * (UK + UV) + UK + c * DV::kParts + pp) * 32];
    }
  };
  if constexpr (C::kStages > 0) {
#pragma unroll
    for (int k = 0; k < S - 1; ++k)
      issueTile(warp + k * W, 0, k);
  } else if (warp < ntiles && !C::kEarly) {
    loadTile(warp, 0);
  } else if (warp < ntiles) {
    if (early != nullptr && early->p == p) {
      // Loaded before the wait, aimed by this position: every row but the
      // step's own (written by the kernels this one waited for) is as it was.
#pragma unroll
      for (int u = 0; u < U; ++u) {
#pragma unroll
        for (int c = 0; c < NCK; ++c)
#pragma unroll
          for (int pp = 0; pp < DK::kParts; ++pp)
            rk[u][c][pp] = early->rk[u][c][pp];
#pragma unroll
        for (int c = 0; c < NCV; ++c)
#pragma unroll
          for (int pp = 0; pp < DV::kParts; ++pp)
            rv[u][c][pp] = early->rv[u][c][pp];
        const long long j = kb + (long long)(warp * U + u) * 8 + g;
        if (j == p && j < ke) {
          if constexpr (C::kEarly && C::kFreshK)
#pragma unroll
            for (int c = 0; c < NCK; ++c)
              attnLoad8<DK, C::D, C::k_sd, true, true>(kbase + j * C::k_sj, 32 * c + 8 * t4, true,
                                                       rk[u][c]);
          if constexpr (C::kEarly && C::kFreshV)
#pragma unroll
            for (int c = 0; c < NCV; ++c)
              attnLoad8<DV, C::Dv, C::v_sd, true, true>(vbase + j * C::v_sj, 32 * c + 8 * t4,
                                                        true, rv[u][c]);
        }
      }
    } else if (early != nullptr) {
      // The position moved: the tile anew, at L2 (this block read other
      // rows, perhaps on the same lines, before the wait).
      if constexpr (C::kEarly)
        attnLoadTile<C, true>(kbase, vbase, kb, ke, warp, 0, rk, rv);
    } else {
      loadTile(warp, 0);
    }
  }

  // q · scale, split hi/lo in K's mma type, as A fragments.
  if constexpr (kQF) {
#pragma unroll
    for (int k = 0; k < kQI; ++k) {
      const int i = threadIdx.x + k * W * 32;
      if (i < NCK * 64) {
        if constexpr (C::kRope) {
          const long long d0 = 32 * (i >> 6) + 8 * (i & 3) + 4 * ((i >> 5) & 1);
#pragma unroll
          for (int e = 0; e < 4; ++e)
            qx[k][e] = attnRopeRotate<C>(qx[k][e], qo[k][e], d0 + e, p, a.ff) * C::scale();
        }
        uint4 f;
        attnSplit<DK::kBf16>(qx[k][0], qx[k][1], f.x, f.y);
        attnSplit<DK::kBf16>(qx[k][2], qx[k][3], f.z, f.w);
        sh.qf[i >> 6][(i >> 5) & 1][i & 31] = f;
      }
    }
  }
  for (int i = threadIdx.x; !kQF && i < NCK * 64; i += W * 32) {
    const int c = i >> 6, j = (i >> 5) & 1, ln = i & 31, gg = ln >> 2, tt = ln & 3;
    const long long h = h0 + gg, d0 = 32 * c + 8 * tt + 4 * j;
    const bool hv = gg < C::kGB && (hb % C::kHC) * C::kGB + gg < C::G;
    float x[4];
#pragma unroll
    for (int e = 0; e < 4; ++e)
      x[e] = hv && d0 + e < C::D ? attnQ<C>(a, tok, h, d0 + e, p) * C::scale() : 0.0f;
    uint4 f;
    attnSplit<DK::kBf16>(x[0], x[1], f.x, f.y);
    attnSplit<DK::kBf16>(x[2], x[3], f.z, f.w);
    sh.qf[c][j][ln] = f;
  }
  __syncthreads();
  FG_ATTN_STAMP(4);

  for (int sl = 0; sl < C::NSL; ++sl) {
    const long long dvs = (long long)sl * C::DVS;
    float m = -FG_INF, l = 0.0f;
    float acc[NCV][4][4];
#pragma unroll
    for (int c = 0; c < NCV; ++c)
#pragma unroll
      for (int b = 0; b < 4; ++b)
#pragma unroll
        for (int e = 0; e < 4; ++e)
          acc[c][b][e] = 0.0f;

    if constexpr (C::kStages > 0) {
      if (sl != 0)
#pragma unroll
        for (int k = 0; k < S - 1; ++k)
          issueTile(warp + k * W, dvs, k);
    }
    for (int tile = warp, it = 0; tile < ntiles; tile += W, ++it) {
      if constexpr (C::kStages > 0) {
        // This tile has landed; the one kStages − 1 ahead goes out into the
        // slot the previous tile was read from (its reads are complete:
        // their values were consumed before this point).
        asm volatile("cp.async.wait_group %0;\n" ::"n"(S - 2) : "memory");
        issueTile(tile + (S - 1) * W, dvs, (it + S - 1) % S);
        readTile(it % S);
      } else if (sl != 0 || tile != warp) {
        // Every load of the tile first (the first one is already on its way).
        loadTile(tile, dvs);
      }
      // Scores of head g, keys 2t4, 2t4 + 1 of each step.
      float sc[U][2];
#pragma unroll
      for (int u = 0; u < U; ++u) {
        float c4[4] = {0.0f, 0.0f, 0.0f, 0.0f};
#pragma unroll
        for (int c = 0; c < NCK; ++c) {
          unsigned kh[4], kl[4];
          attnWords<DK>(rk[u][c], kh, kl);
#pragma unroll
          for (int j = 0; j < 2; ++j) {
            const uint4 qa = sh.qf[c][j][lane];
            MK::mmaK16(c4, qa, kh[2 * j], kh[2 * j + 1]);
            if constexpr (DK::kTerms == 2)
              MK::mmaK16(c4, qa, kl[2 * j], kl[2 * j + 1]);
          }
        }
        const long long j0 = kb + (long long)(tile * U + u) * 8 + 2 * t4;
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          float x = c4[e] + c4[2 + e];
          if constexpr (C::kSoftcap)
            x = C::softcap() * tanhf(x / C::softcap());
          sc[u][e] = j0 + e < ke ? x : -FG_INF;
        }
      }
      // Online softmax over the tile (per head g: the 4 lanes t4 share it).
      float mx = -FG_INF;
#pragma unroll
      for (int u = 0; u < U; ++u)
        mx = fmaxf(mx, fmaxf(sc[u][0], sc[u][1]));
      mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
      mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
      const float mn = fmaxf(m, mx);
      const float corr = mn == -FG_INF ? 1.0f : expf(m - mn);
      float pr[U][2];
      l *= corr;
#pragma unroll
      for (int u = 0; u < U; ++u)
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          pr[u][e] = sc[u][e] == -FG_INF ? 0.0f : expf(sc[u][e] - mn);
          l += pr[u][e];
        }
      m = mn;
#pragma unroll
      for (int c = 0; c < NCV; ++c)
#pragma unroll
        for (int b = 0; b < 4; ++b)
#pragma unroll
          for (int e = 0; e < 4; ++e)
            acc[c][b][e] *= corr;
      // O += P · V, one m16n8k8 per (step, 8 dv columns, V term).
#pragma unroll
      for (int u = 0; u < U; ++u) {
        unsigned pa, pb;
        attnSplit<DV::kBf16>(pr[u][0], pr[u][1], pa, pb);
#pragma unroll
        for (int c = 0; c < NCV; ++c) {
          unsigned vh[4], vl[4];
          attnWords<DV>(rv[u][c], vh, vl);
#pragma unroll
          for (int b = 0; b < 4; ++b) {
            MV::mmaK8(acc[c][b], pa, pb, attnTranspose(vh[b]));
            if constexpr (DV::kTerms == 2)
              MV::mmaK8(acc[c][b], pa, pb, attnTranspose(vl[b]));
          }
        }
      }
    }

    FG_ATTN_STAMP(5);
    // This warp's (m, l, o) of heads 0..7 into shared memory.
    l += __shfl_xor_sync(0xffffffffu, l, 1);
    l += __shfl_xor_sync(0xffffffffu, l, 2);
    if (t4 == 0) {
      sh.u.w.m[warp][g] = m;
      sh.u.w.l[warp][g] = l;
    }
#pragma unroll
    for (int c = 0; c < NCV; ++c)
#pragma unroll
      for (int b = 0; b < 4; ++b)
#pragma unroll
        for (int e = 0; e < 2; ++e)
          sh.u.w.o[warp][g][32 * c + 8 * t4 + 2 * b + e] = acc[c][b][e] + acc[c][b][2 + e];
    __syncthreads();

    // Each warp's weight exp(m_w − M) of each head, once for all columns.
    if (threadIdx.x < W * 8) {
      const int w = threadIdx.x >> 3, hh = threadIdx.x & 7;
      float M = -FG_INF;
#pragma unroll
      for (int x = 0; x < W; ++x)
        M = fmaxf(M, sh.u.w.m[x][hh]);
      sh.u.w.f[w][hh] = sh.u.w.m[w][hh] == -FG_INF ? 0.0f : expf(sh.u.w.m[w][hh] - M);
      if (w == 0)
        sh.u.w.M[hh] = M;
    }
    __syncthreads();
    // Merge the warps (in warp order) and write this split's partial (the
    // cluster form: head hh's into block hh's memory).
    if constexpr (C::kCluster > 0)
      if (sl == 0)
        fg_cluster_wait();
    for (int i = threadIdx.x; i < C::kGB * C::DVS; i += W * 32) {
      const int hh = i / C::DVS, dv = i % C::DVS;
      const float M = sh.u.w.M[hh];
      float L = 0.0f, o = 0.0f;
#pragma unroll
      for (int w = 0; w < W; ++w) {
        const float f = sh.u.w.f[w][hh];
        L += sh.u.w.l[w][hh] * f;
        o += sh.u.w.o[w][hh][dv] * f;
      }
      if constexpr (C::kCluster > 0) {
        if constexpr (C::kClusterAsync) {
          if (!attnMerges<C>(hh, hb))
            continue; // (its block arms no mbarrier: nothing may land there)
          if (sl == 0 && dv == 0) {
            attnSendAsync(&sh.in[s][0], &sh.bar, (unsigned)hh, M);
            attnSendAsync(&sh.in[s][1], &sh.bar, (unsigned)hh, L);
          }
          if (dvs + dv < C::Dv)
            attnSendAsync(&sh.in[s][2 + dvs + dv], &sh.bar, (unsigned)hh, o);
        } else {
          if (sl == 0 && dv == 0) {
            fg_store_remote(&sh.in[s][0], (unsigned)hh, M);
            fg_store_remote(&sh.in[s][1], (unsigned)hh, L);
          }
          if (dvs + dv < C::Dv)
            fg_store_remote(&sh.in[s][2 + dvs + dv], (unsigned)hh, o);
        }
      } else {
        float *ps = part + (long long)s * C::kPart;
        if (sl == 0 && dv == 0) {
          ps[hh] = M;
          ps[8 + hh] = L;
        }
        if (dvs + dv < C::Dv)
          ps[16 + hh * C::DvP + dvs + dv] = o;
      }
    }
    __syncthreads();
  }
  FG_ATTN_STAMP(6);
  if constexpr (C::kCluster > 0) {
    attnClusterMerge<C>(a, sh, r.nsplit, hb, tok, h0);
    return;
  }

  // Publish the partial; the last split block of (token, head block) merges
  // the partials (attnMergeSplits). With C::kGroup > 0 (opt-in, measured
  // slower: see the banner) and more splits than a group, a tree instead:
  // the last block of each group of kGroup consecutive splits merges its
  // group into the group's slot (after the kSmax split slots; its counter
  // after the T · kHB final ones), and the last group's merger merges the
  // groups. Groups and orders are fixed by nsplit, so replays are still
  // bit-identical.
  __threadfence();
  __syncthreads();
  unsigned *cnt = a.counters + tok * C::kHB + hb;
  const float *src = part;
  int count = r.nsplit;
  if constexpr (C::kGroup > 0) {
    if (r.nsplit > C::kGroup) {
      const int gi = s / C::kGroup;
      const int n = r.nsplit - gi * C::kGroup < C::kGroup ? r.nsplit - gi * C::kGroup : C::kGroup;
      unsigned *gc = a.counters + C::T * C::kHB + (tok * C::kHB + hb) * C::kGroupSlots + gi;
      if (threadIdx.x == 0)
        sh.last = atomicAdd(gc, 1u) == (unsigned)(n - 1);
      __syncthreads();
      if (!sh.last)
        return;
      __threadfence();
      float *slot = part + (long long)(C::kSmax + gi) * C::kPart;
      attnMergeSplits<C, false>(a, sh, part + (long long)gi * C::kGroup * C::kPart, n, slot, tok,
                                hb, h0);
      if (threadIdx.x == 0)
        *gc = 0u; // ready for the next replay
      __threadfence();
      __syncthreads();
      src = part + (long long)C::kSmax * C::kPart;
      count = (r.nsplit + C::kGroup - 1) / C::kGroup;
    }
  }
  if (threadIdx.x == 0)
    sh.last = atomicAdd(cnt, 1u) == (unsigned)(count - 1);
  __syncthreads();
  if (!sh.last)
    return;
  __threadfence();
  attnMergeSplits<C, true>(a, sh, src, count, nullptr, tok, hb, h0);
  if (threadIdx.x == 0)
    *cnt = 0u; // ready for the next replay
  FG_ATTN_STAMPS_PRINT(); // (the merging block: "cluster" is the publish and the merge)
}

/// The range of keys a block of the token at position p computes, in the form
/// `attention` (below) chooses for it.
template <class C> static __device__ __forceinline__ AttnRange attnRangeOfForm(long long p) {
  if constexpr (C::kStages > 0) {
    const AttnRange r = attnRange<C>(p);
    if (r.live <= C::kRegMaxLive)
      return attnRange<AttnRegisters<C>>(p);
    return r;
  } else {
    return attnRange<C>(p);
  }
}

/// The programmatic-launch prologue (before fg_pdl_begin, possibly while the
/// previous kernel still runs): the block prefetches into L2 the K and V rows
/// of the first C::kPfKeys keys of its split. Those rows were written by
/// earlier steps, except the token's own, which this step writes: a prefetch
/// cannot make L2 stale (the write updates the line), it only starts the
/// DRAM traffic early. The position is read past L1 (ld.global.cg) and only
/// aims the prefetch; the body reads it again after the wait. One block per
/// kv head prefetches (head chunks of one kv head share their rows).
template <class C> static __device__ __forceinline__ void attentionPrefetchL2(const AttnArgs<C> &a) {
  if constexpr (C::kPfKeys > 0) {
    if (blockIdx.y % C::kHC != 0)
      return;
    const long long p = (long long)__ldcg(a.pos + C::pos_off + (long long)blockIdx.z * C::pos_st);
    const AttnRange r = attnRangeOfForm<C>(p);
    if ((int)blockIdx.x >= r.nsplit)
      return;
    // (The early loads' first tile of every warp is in registers already.)
    constexpr long long kSkip = C::kEarly && C::kStages == 0 && C::T == 1 ? C::kW * C::kU * 8 : 0;
    const long long kb = r.lo + blockIdx.x * r.chunk + kSkip, end = r.lo + r.live;
    if (kSkip >= r.chunk)
      return;
    const long long n = r.chunk - kSkip < C::kPfKeys ? r.chunk - kSkip : C::kPfKeys;
    const long long ke = kb + n < end ? kb + n : end;
    const long long hk = blockIdx.y / C::kHC;
    constexpr int LK = (int)((C::D * sizeof(typename C::DecK::T) + 127) / 128);
    constexpr int LV = (int)((C::Dv * sizeof(typename C::DecV::T) + 127) / 128);
    for (long long i = threadIdx.x; i < (ke - kb) * (LK + LV); i += blockDim.x) {
      const long long j = kb + i / (LK + LV);
      const int l = (int)(i % (LK + LV));
      const char *row =
          l < LK ? reinterpret_cast<const char *>(a.k + C::k_off + hk * C::k_sh + j * C::k_sj) +
                       128 * l
                 : reinterpret_cast<const char *>(a.v + C::v_off + hk * C::v_sh + j * C::v_sj) +
                       128 * (l - LK);
      fg_prefetch_l2(row);
    }
  }
}

/// The whole programmatic-launch prologue: the early loads into registers
/// (attentionEarly), then the L2 prefetch of the keys after them.
template <class C>
static __device__ __forceinline__ AttnEarly<C> attentionPrefetch(const AttnArgs<C> &a) {
#ifdef FG_ATTN_STAMPS
  if (threadIdx.x == 0) {
    for (int i = 0; i < 8; ++i)
      fg_attn_clk[i] = clock64();
    fg_attn_gt0 = fg_attn_gtimer();
  }
#endif
  AttnEarly<C> e = attentionEarly<C>(a);
  attentionPrefetchL2<C>(a);
  FG_ATTN_STAMP(1);
  return e;
}

/// The entry: a staged configuration runs a token whose live rows are at
/// most kRegMaxLive in the register-load form (short KV: one round trip per
/// warp, where the ring only adds its shared-memory hop; measured on the
/// H200, eighth session) and longer ones staged. Every block of a token takes
/// the same form (live is per token), so the split protocol holds.
template <class C>
static __device__ __forceinline__ void attention(const AttnArgs<C> &a, const AttnEarly<C> &early) {
  __shared__ AttnShared<C> sh;
  FG_ATTN_STAMP(2);
  if constexpr (C::kStages > 0) {
    const long long p = (long long)a.pos[C::pos_off + (long long)blockIdx.z * C::pos_st];
    if (attnRange<C>(p).live <= C::kRegMaxLive) {
      using R = AttnRegisters<C>;
      const AttnArgs<R> ar{a.y,  a.scratch, a.counters, a.q,  a.k,  a.v, a.pos,
                           a.sinks, a.ff,   a.kw,       a.vw, a.kn, a.vn};
      attentionBody<R>(ar, sh, nullptr);
      return;
    }
  }
  attentionBody<C>(a, sh, C::kEarly ? &early : nullptr);
}

} // namespace fg
