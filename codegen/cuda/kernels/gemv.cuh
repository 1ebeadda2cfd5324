//===- gemv.cuh - decode matmuls: y[m, n] = epi(Σ_k x[m, k] · W[n, k]) ------===//
//
// One template for every decode-sized matmul (at most 8 rows of x): dense
// (matmul), expert-indexed (matmul_id: the weight matrix of each (token,
// slot) pair is picked by ids[t, j] read from device memory), two weight
// streams at once (fused.gated_matmul(_id): gate and up share the x reads,
// the epilogue applies the GLU), and 2-3 segments in one launch
// (fused.matmul_multi, gemvMulti: each block computes one tile of one
// segment's plain GEMV; the q, k and v projections of a layer). The emitter (GemvEmitter.cpp) writes a
// parameter struct `Cfg` of constexpr shapes and layouts and names the
// policies; it never writes kernel code. The policy axes:
//
//   Cfg::Dec0/Dec1  weight decoder of each stream: DecF16, DecBF16 run on the
//                   tensor cores, DecF32 on the CUDA cores; the GGUF block
//                   types DecQ8_0, DecQ4_0, DecQ4_1, DecQ4_K, DecQ6_K hand 8
//                   weights as 4 packed half2 registers to the tensor-core
//                   main loop, DecQ4_KW whole q4_K super-blocks to its own
//                   loop (gemvWide) (below, "Quantised weights")
//   Cfg::M          tokens (rows of x); groups of 8 go to blockIdx.z
//   Cfg::kNorm      prologue (fused.rms_norm_matmul, an opt-in pattern: measured
//                   slower than the norm launch it saves, see below and
//                   passes/fusion/rms_norm_matmul.cpp): x is rms-normalised and multiplied by the norm
//                   weight nw as it is loaded (fused.rms_norm_matmul,
//                   fused.rms_norm_gated_matmul; dense only). Tensor cores:
//                   the block first sums the squares of its x rows (all
//                   threads over K, a fixed order: replays stay bit-exact),
//                   then every x value it loads is multiplied by rstd(row) ·
//                   nw[k] (scaling x, not the sums, keeps the mma's f16 split
//                   within range). Lanes over K (T <= 2): no pre-pass (the
//                   measured cost of the first form, which delayed every
//                   block's weight stream): Σx² accumulates from the x the
//                   lanes load anyway, x · nw enters the f32 FMAs, and the
//                   sums are scaled by rstd in the epilogue.
//   Cfg::kNormRow   with kNorm (fused.rms_norm_mul_matmul): the blocks also
//                   store the normalised rows, a slice of K each, for the
//                   norm's other readers (gemvStoreNormRow)
//   Cfg::Epi        epilogue: EpiStore, EpiGlu<kind> (two streams); bias
//                   (Cfg::kBias) is added before it, an addend (Cfg::kRes,
//                   dense: fused.matmul_add's residual or bias) after it
//   Cfg::kExpert    dense, or expert-indexed with one x row per pair
//
// Work split. A block owns one tile of 16 output rows (blockIdx.x) of one
// pair (blockIdx.y, expert-indexed only); its warps split K in chunks of
// kUnroll k-steps of 32 elements, so each thread has 2 rows x kUnroll x
// streams 16-byte loads in flight before the first use. Partial sums meet
// in shared memory and are added in warp order (deterministic: replays are
// bit-exact).
//
// Tensor-core path (mma.sync.m16n8k16, f32 accumulate). Within one k-step a
// thread (g = lane / 4, t = lane % 4) loads 8 consecutive weights of rows g
// and g + 8 at k = 8t .. 8t + 7. A dot product does not care in which order
// k is visited, so the k positions of the mma are permuted: for the two mmas
// j = 0, 1 of a step, the fragment slots {2t, 2t+1 | 2t+8, 2t+9} are the
// weights {8t + 4j + 0, 1 | 2, 3}; the x fragment (column g = token g) is
// loaded with the same permutation. Every load is a plain 16-byte load and no
// weight goes through shared memory. x is f32: it is split into hi + lo in
// the weight's 16-bit type and both halves are multiplied (two mmas), so the
// product keeps about 22 bits of x, like the CUDA-core path. Tokens beyond M
// are zero columns.
//
// CUDA-core path (f32 weights): the same mapping, 4 + 4 floats per row per
// step, FMAs into per-token sums, reduced over the 4 lanes of a row.
//
// Quantised weights (GGUF blocks read as stored: no repacking, no
// dequantised copy in memory; % of roofline counts the GGUF bytes). We chose
// scheme (a) of issue 14, dequantising in registers to f16 and feeding the
// same tensor-core loop, over (b), quantising x to int8 and using dp4a:
//  - the k-step of the mma path is 32 weights, exactly one block of the
//    32-element types and one sub-block of the K-quants, so a thread's 8
//    weights (k = 8t .. 8t + 7 of a row) always share one scale (and min);
//  - integer values become f16 without any I2F: a byte b placed under the
//    exponent byte 0x64 (one byte permute, two weights per register) is the
//    half 1024 + b, so one sub.f16x2 gives b - zero exactly and one
//    fma.rn.f16x2 / mul.f16x2 applies the scale (and min); per 8 weights of
//    a row (q4_0): 2 shift, 2 and, 4 prmt, 4 hsub2, 4 hmul2 and 5 narrow
//    loads, ~2.6 instructions per weight, plus x's hi/lo split (~20 per
//    k-step per thread, i.e. ~1.3 per weight at 16 weights per thread):
//    ~4 per weight at T = 1 against issue 14's budget of 5 (counted from
//    the source, not yet from SASS or a profile);
//  - measured, x as one f16 (Cfg::kXHalf, the default for block weights:
//    no split, half the mmas) beat hi + lo by 17 % on W-dense q4_K and moved
//    the workload tests' worst error by at most 2.4e-4; the hi + lo form
//    below stays for 16-bit weights and on request;
//  - every x is reused by the 16 rows of a tile (x is split hi + lo once per
//    k-step, amortised over 16 rows), T = 1..8 cost the same mma count, and
//    x keeps ~22 bits (no activation quantisation, so the exact CPU
//    reference is the only reference; the dequantised weight equals the
//    reference's f32 value rounded to f16: the retype-at-load numerics);
//  - dp4a would need x quantised per 32 values (a prologue kernel or a
//    second pass), a CPU mode reproducing it, and at T = 8 eight times the
//    dp4a count, while the mma count does not grow with T. At T = 1 it was
//    written after all (thirteenth session): gemv_dp4a.cuh, opt-in
//    (EmitOptions::gemvDp4a), each warp quantising its slice of x itself.
// Blocks are only 2-byte aligned (q4_0 18 bytes, q8_0 34, q6_K 210): those
// decoders use 2-byte loads, q4_1 (20 bytes) 4-byte loads and the narrow
// q4_K decoder (144) 8-byte loads; weights past K are zero blocks (d = 0, so
// w = 0). Measured, these narrow decoders reach 11-30 % of the bandwidth
// (bench/RESULTS.md): the load count and the per-k-step scale decoding bind.
// q4_0 and q8_0 rows of whole groups (16 blocks of 18 bytes, 8 of 34: 288
// and 272 bytes, 16-byte aligned when K is a multiple of 512 / 256) are read
// wide instead (DecQ4_0W, DecQ8_0W, below): 2.05x and 1.57x the narrow
// decoders' W-dense step (sixth session).
// q4_K blocks keep 16-byte alignment, so DecQ4_KW ("wide": a k-step is a
// whole super-block, gemvWide) reads every byte with 16-byte loads and
// decodes each scale once per 64 weights of a thread: 3.2x the narrow
// decoder's speed on the lm head, 43 % of the bandwidth, still issue- and
// latency-bound (ncu: 5.4 cycles between instructions of a warp). DecQ4_KS
// (opt-in) cuts the count per weight from ~4.2 to ~2.8: x as one f16, the
// weights as exact 1024 + q with no HSUB2 / HFMA2, and the scales applied per
// sub-block in f32 after the mma (gemvMathWideScaled); measured, it won on
// the lm head and lost on down and at T = 8, so it stays opt-in. With x as
// one f16 everywhere (kXHalf) the q4_K lm head reached 52 %. A repacked
// layout for q6_K and the other 2-byte aligned types (a load-time recipe) and
// more rows per warp are the next steps.
//
//===----------------------------------------------------------------------===//

namespace fg {

// --- weight decoders -----------------------------------------------------------

/// 16-bit weights: a 16-byte load is 4 packed pairs, each unpacked by D.
template <class D> struct DecPairs {
  static constexpr bool kMma = true, kQuant = false, kWide = false, kScaledAfter = false;
  static constexpr int kPerLoad = 8; ///< weights in one 16-byte load
  static __device__ __forceinline__ void decode(const uint4 &r, float (&w)[8]) {
    const unsigned u[4] = {r.x, r.y, r.z, r.w};
#pragma unroll
    for (int i = 0; i < 4; ++i)
      D::unpack(u[i], w[2 * i], w[2 * i + 1]);
  }
};

struct DecF16 : DecPairs<DecF16> {
  using T = fg_f16;
  /// float pair -> packed half2 (lo in the low 16 bits), and back.
  static __device__ __forceinline__ unsigned pack(float lo, float hi) {
    unsigned r;
    asm("cvt.rn.f16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
    return r;
  }
  static __device__ __forceinline__ void unpack(unsigned v, float &lo, float &hi) {
    asm("{ .reg .f16 a, b; mov.b32 {a, b}, %2; cvt.f32.f16 %0, a; cvt.f32.f16 %1, b; }"
        : "=f"(lo), "=f"(hi) : "r"(v));
  }
  static __device__ __forceinline__ void mma(float (&c)[4], const unsigned (&a)[4], unsigned b0,
                                             unsigned b1) {
    asm("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, "
                 "{%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};"
                 : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  }
};

struct DecBF16 : DecPairs<DecBF16> {
  using T = fg_bf16;
  static __device__ __forceinline__ unsigned pack(float lo, float hi) {
    unsigned r;
    asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
    return r;
  }
  static __device__ __forceinline__ void unpack(unsigned v, float &lo, float &hi) {
    lo = __uint_as_float(v << 16);
    hi = __uint_as_float(v & 0xffff0000u);
  }
  static __device__ __forceinline__ void mma(float (&c)[4], const unsigned (&a)[4], unsigned b0,
                                             unsigned b1) {
    asm("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, "
                 "{%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};"
                 : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  }
};

struct DecF32 {
  using T = float;
  static constexpr bool kMma = false, kQuant = false, kWide = false, kScaledAfter = false;
  static constexpr int kPerLoad = 4;
  static __device__ __forceinline__ void decode(const uint4 &r, float (&w)[4]) {
    w[0] = __uint_as_float(r.x), w[1] = __uint_as_float(r.y);
    w[2] = __uint_as_float(r.z), w[3] = __uint_as_float(r.w);
  }
};

// --- quantised decoders (GGUF blocks) ---------------------------------------------
//
// Each reads, for one row, k-step `step` (32 weights) and thread t, the bytes
// of weights k = 32·step + 8t .. + 7 into a Raw (loads only, so a chunk
// issues every load before any arithmetic), and turns a Raw into 8 f16
// weights in k order (4 half2 registers, like one 16-byte f16 load). The
// mma, pack and unpack are DecF16's: the weights are f16 once decoded.

static __device__ __forceinline__ unsigned fg_ld16(const unsigned char *p) {
  return __ldg(reinterpret_cast<const unsigned short *>(p));
}
static __device__ __forceinline__ unsigned fg_ld32(const unsigned char *p) {
  return __ldg(reinterpret_cast<const unsigned *>(p));
}
/// 4 bytes at a 2-byte aligned address.
static __device__ __forceinline__ unsigned fg_ld32a2(const unsigned char *p) {
  return fg_ld16(p) | (fg_ld16(p + 2) << 16);
}
static __device__ __forceinline__ unsigned fg_hsub2(unsigned a, unsigned b) {
  unsigned r;
  asm("sub.rn.f16x2 %0, %1, %2;" : "=r"(r) : "r"(a), "r"(b));
  return r;
}
static __device__ __forceinline__ unsigned fg_hfma2(unsigned a, unsigned b, unsigned c) {
  unsigned r;
  asm("fma.rn.f16x2 %0, %1, %2, %3;" : "=r"(r) : "r"(a), "r"(b), "r"(c));
  return r;
}
static __device__ __forceinline__ unsigned fg_hmul2(unsigned a, unsigned b) {
  unsigned r;
  asm("mul.rn.f16x2 %0, %1, %2;" : "=r"(r) : "r"(a), "r"(b));
  return r;
}
/// Both halves = f (rounded to f16).
static __device__ __forceinline__ unsigned fg_h2splat(float f) {
  unsigned r;
  asm("cvt.rn.f16x2.f32 %0, %1, %1;" : "=r"(r) : "f"(f));
  return r;
}
static __device__ __forceinline__ float fg_h2f(unsigned h) {
  float f;
  asm("{ .reg .f16 a, b; mov.b32 {a, b}, %1; cvt.f32.f16 %0, a; }" : "=f"(f) : "r"(h));
  return f;
}

/// 8 byte values (lo: weights 0..3, hi: 4..7, each 0..255) -> 8 f16 weights
/// (b - Z)·scale + bias, as 4 half2 registers. 0x64 above a byte is the half
/// 1024 + b; subtracting 1024 + Z is exact.
template <int Z>
static __device__ __forceinline__ uint4 fg_bytes_to_h8(unsigned lo, unsigned hi, unsigned scale2,
                                                       unsigned bias2, bool withBias) {
  constexpr unsigned kMagic = 0x64646464u, kZero = (0x6400u | Z) * 0x10001u;
  unsigned h[4] = {__byte_perm(lo, kMagic, 0x4140), __byte_perm(lo, kMagic, 0x4342),
                   __byte_perm(hi, kMagic, 0x4140), __byte_perm(hi, kMagic, 0x4342)};
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    h[i] = fg_hsub2(h[i], kZero);
    h[i] = withBias ? fg_hfma2(h[i], scale2, bias2) : fg_hmul2(h[i], scale2);
  }
  return make_uint4(h[0], h[1], h[2], h[3]);
}

/// Common part: a quantised decoder's weights are f16 once decoded.
struct DecQuant : DecF16 {
  using T = unsigned char; ///< the weight pointer is to bytes
  static constexpr bool kQuant = true;
};

/// q8_0 (34 bytes: f16 d; i8 q[32]); w = d·q. Thread t: q[8t .. 8t + 7].
struct DecQ8_0 : DecQuant {
  static constexpr int kBlockElems = 32, kBlockBytes = 34;
  struct Raw {
    unsigned q0, q1, d;
  };
  static __device__ __forceinline__ void load(const unsigned char *row, long long step, int t,
                                              Raw &r) {
    const unsigned char *b = row + step * kBlockBytes;
    r.d = fg_ld16(b);
    r.q0 = fg_ld32a2(b + 2 + 8 * t);
    r.q1 = fg_ld32a2(b + 6 + 8 * t);
  }
  static __device__ __forceinline__ uint4 half8(const Raw &r, long long, int) {
    // i8 -> u8 by flipping the sign bit: b + 128, so Z = 128.
    return fg_bytes_to_h8<128>(r.q0 ^ 0x80808080u, r.q1 ^ 0x80808080u, r.d * 0x10001u, 0, false);
  }
};

/// q4_0 (18 bytes: f16 d; u8 qs[16], low nibbles elements 0..15, high 16..31);
/// w = d·(q − 8). Thread t: bytes 8(t & 1) .., nibble t >> 1.
struct DecQ4_0 : DecQuant {
  static constexpr int kBlockElems = 32, kBlockBytes = 18;
  struct Raw {
    unsigned q0, q1, d;
  };
  static __device__ __forceinline__ void load(const unsigned char *row, long long step, int t,
                                              Raw &r) {
    const unsigned char *b = row + step * kBlockBytes;
    r.d = fg_ld16(b);
    r.q0 = fg_ld32a2(b + 2 + 8 * (t & 1));
    r.q1 = fg_ld32a2(b + 6 + 8 * (t & 1));
  }
  static __device__ __forceinline__ uint4 half8(const Raw &r, long long, int t) {
    const int sh = 4 * (t >> 1);
    return fg_bytes_to_h8<8>((r.q0 >> sh) & 0x0F0F0F0Fu, (r.q1 >> sh) & 0x0F0F0F0Fu,
                             r.d * 0x10001u, 0, false);
  }
};

/// q4_1 (20 bytes: f16 d, m; u8 qs[16], q4_0's nibble order); w = d·q + m.
struct DecQ4_1 : DecQuant {
  static constexpr int kBlockElems = 32, kBlockBytes = 20;
  struct Raw {
    unsigned q0, q1, dm;
  };
  static __device__ __forceinline__ void load(const unsigned char *row, long long step, int t,
                                              Raw &r) {
    const unsigned char *b = row + step * kBlockBytes;
    r.dm = fg_ld32(b);
    r.q0 = fg_ld32(b + 4 + 8 * (t & 1));
    r.q1 = fg_ld32(b + 8 + 8 * (t & 1));
  }
  static __device__ __forceinline__ uint4 half8(const Raw &r, long long, int t) {
    const int sh = 4 * (t >> 1);
    return fg_bytes_to_h8<0>((r.q0 >> sh) & 0x0F0F0F0Fu, (r.q1 >> sh) & 0x0F0F0F0Fu,
                             (r.dm & 0xffffu) * 0x10001u, (r.dm >> 16) * 0x10001u, true);
  }
};

/// The fifth bits of weights 8t .. 8t + 3 (`h4`: 4 bits, lowest first)
/// placed at bit 4 of each byte of a word.
static __device__ __forceinline__ unsigned fg_bit4_per_byte(unsigned h4) {
  return ((h4 & 1u) << 4) | ((h4 & 2u) << 11) | ((h4 & 4u) << 18) | ((h4 & 8u) << 25);
}

/// Thread t's 8 five-bit values of a q5_0 / q5_1 block, one per byte: q4_0's
/// nibbles of the words q0, q1 and the fifth bits 8t .. 8t + 7 of qh.
static __device__ __forceinline__ void fg_q5_values(unsigned q0, unsigned q1, unsigned qh, int t,
                                                    unsigned &v0, unsigned &v1) {
  const int sh = 4 * (t >> 1);
  const unsigned hb = qh >> (8 * t);
  v0 = ((q0 >> sh) & 0x0F0F0F0Fu) | fg_bit4_per_byte(hb & 0xFu);
  v1 = ((q1 >> sh) & 0x0F0F0F0Fu) | fg_bit4_per_byte((hb >> 4) & 0xFu);
}

/// q5_0 (22 bytes: f16 d; u32 qh; u8 qs[16], q4_0's nibble order; bit j of
/// qh is element j's fifth bit); w = d·(q − 16). Thread t: elements 8t ..
/// 8t + 7, bits 8t .. 8t + 7 of qh. Opt-in until run on a GPU
/// (gemvDecodesNatively, FG_DEBUG_GEMV_NEW_TYPES).
struct DecQ5_0 : DecQuant {
  static constexpr int kBlockElems = 32, kBlockBytes = 22;
  struct Raw {
    unsigned q0, q1, d, h;
  };
  static __device__ __forceinline__ void load(const unsigned char *row, long long step, int t,
                                              Raw &r) {
    const unsigned char *b = row + step * kBlockBytes;
    r.d = fg_ld16(b);
    r.h = fg_ld32a2(b + 2);
    r.q0 = fg_ld32a2(b + 6 + 8 * (t & 1));
    r.q1 = fg_ld32a2(b + 10 + 8 * (t & 1));
  }
  static __device__ __forceinline__ uint4 half8(const Raw &r, long long, int t) {
    unsigned v0, v1;
    fg_q5_values(r.q0, r.q1, r.h, t, v0, v1);
    return fg_bytes_to_h8<16>(v0, v1, r.d * 0x10001u, 0, false);
  }
};

/// q5_1 (24 bytes: f16 d, m; u32 qh; u8 qs[16]); w = d·q + m, q5_0's bits.
/// Opt-in like q5_0.
struct DecQ5_1 : DecQuant {
  static constexpr int kBlockElems = 32, kBlockBytes = 24;
  struct Raw {
    unsigned q0, q1, dm, h;
  };
  static __device__ __forceinline__ void load(const unsigned char *row, long long step, int t,
                                              Raw &r) {
    const unsigned char *b = row + step * kBlockBytes;
    r.dm = fg_ld32(b);
    r.h = fg_ld32(b + 4);
    r.q0 = fg_ld32(b + 8 + 8 * (t & 1));
    r.q1 = fg_ld32(b + 12 + 8 * (t & 1));
  }
  static __device__ __forceinline__ uint4 half8(const Raw &r, long long, int t) {
    unsigned v0, v1;
    fg_q5_values(r.q0, r.q1, r.h, t, v0, v1);
    return fg_bytes_to_h8<0>(v0, v1, (r.dm & 0xffffu) * 0x10001u, (r.dm >> 16) * 0x10001u, true);
  }
};

/// Scale d·sc and negated min −dmin·m (half2 splats) of sub-block s of a
/// q4_K / q5_K super-block: `dm` holds d and dmin, s0..s2 the 12 scale bytes
/// (ggml's get_scale_min_k4). In words: the 6-bit scales of sub-blocks
/// 0..3 are the low 6 bits of s0's bytes (mins: s1's); of 4..7, the low
/// nibbles of s2's bytes with s0's top two bits above them (mins: s2's high
/// nibbles, s1's top bits). One byte permute puts sc and m in the low bytes
/// of a half2 above 0x64 (1024 + v, exact), so that one f16x2 subtract and
/// one f16x2 multiply by {d, dmin} give {d·sc, dmin·m} — the same bits as
/// the f32 product rounded once (d has 11 significant bits and v 6, so the
/// f32 product is exact) — where the first form took a branch, five
/// dynamic byte extractions, two integer conversions and two f16 <-> f32
/// round trips per unit (the H200 measured the grouped expert GEMM's q4_K
/// gate|up 15 % faster with it, thirty-second session).
static __device__ __forceinline__ void fg_k4_scale_min(unsigned dm, unsigned s0, unsigned s1,
                                                       unsigned s2, int s, unsigned &sc2,
                                                       unsigned &mn2) {
  const bool lo = s < 4;
  const unsigned scw = lo ? s0 & 0x3F3F3F3Fu : (s2 & 0x0F0F0F0Fu) | ((s0 >> 2) & 0x30303030u);
  const unsigned mw =
      lo ? s1 & 0x3F3F3F3Fu : ((s2 >> 4) & 0x0F0F0F0Fu) | ((s1 >> 2) & 0x30303030u);
  const unsigned k = static_cast<unsigned>(s) & 3u;
  // byte 0: sc (byte k of scw), byte 2: m (byte k of mw, byte 4 + k of the pair)
  const unsigned v = (__byte_perm(scw, mw, k | ((4u + k) << 8)) & 0x00FF00FFu) | 0x64006400u;
  const unsigned p = fg_hmul2(dm, fg_hsub2(v, 0x64006400u)); // {d·sc, dmin·m}
  sc2 = __byte_perm(p, p, 0x1010);
  mn2 = __byte_perm(p, p, 0x3232) ^ 0x80008000u; // −dmin·m in both halves
}

/// d and dmin (`dm`) and the 12 scale bytes of the q4_K / q5_K super-block
/// at b: two 8-byte loads (rows are 8-byte aligned for both: quantRowAlignment).
static __device__ __forceinline__ void fg_k4_header(const unsigned char *b, unsigned &dm,
                                                    unsigned &s0, unsigned &s1, unsigned &s2) {
  const uint2 h0 = __ldg(reinterpret_cast<const uint2 *>(b)),
              h1 = __ldg(reinterpret_cast<const uint2 *>(b + 8));
  dm = h0.x, s0 = h0.y, s1 = h1.x, s2 = h1.y;
}

/// q4_K (144 bytes: f16 d, dmin; u8 scales[12]; u8 qs[128]). Sub-block
/// s = step % 8 (32 weights): the low (s even) or high nibbles of qs[32(s/2)
/// ..]; w = d·sc_s·q − dmin·m_s with ggml's 6-bit get_scale_min_k4.
struct DecQ4_K : DecQuant {
  static constexpr int kBlockElems = 256, kBlockBytes = 144;
  struct Raw {
    uint2 q;
    unsigned dm, s0, s1, s2;
  };
  static __device__ __forceinline__ void load(const unsigned char *row, long long step, int t,
                                              Raw &r) {
    const unsigned char *b = row + (step >> 3) * kBlockBytes;
    const int s = static_cast<int>(step & 7);
    fg_k4_header(b, r.dm, r.s0, r.s1, r.s2);
    r.q = __ldg(reinterpret_cast<const uint2 *>(b + 16 + 32 * (s >> 1) + 8 * t));
  }
  static __device__ __forceinline__ uint4 half8(const Raw &r, long long step, int) {
    const int s = static_cast<int>(step & 7), sh = 4 * (s & 1);
    unsigned sc2, mn2;
    fg_k4_scale_min(r.dm, r.s0, r.s1, r.s2, s, sc2, mn2);
    return fg_bytes_to_h8<0>((r.q.x >> sh) & 0x0F0F0F0Fu, (r.q.y >> sh) & 0x0F0F0F0Fu, sc2, mn2,
                             true);
  }
};

/// q5_K (176 bytes: f16 d, dmin; u8 scales[12] as q4_K's; u8 qh[32];
/// u8 qs[128] as q4_K's): q4_K's nibble plus a fifth bit, bit s of qh[l] for
/// sub-block s (weights 32s + l). Opt-in like q5_0.
struct DecQ5_K : DecQuant {
  static constexpr int kBlockElems = 256, kBlockBytes = 176;
  struct Raw {
    uint2 q, h;
    unsigned dm, s0, s1, s2;
  };
  static __device__ __forceinline__ void load(const unsigned char *row, long long step, int t,
                                              Raw &r) {
    const unsigned char *b = row + (step >> 3) * kBlockBytes;
    const int s = static_cast<int>(step & 7);
    fg_k4_header(b, r.dm, r.s0, r.s1, r.s2);
    r.h = __ldg(reinterpret_cast<const uint2 *>(b + 16 + 8 * t));
    r.q = __ldg(reinterpret_cast<const uint2 *>(b + 48 + 32 * (s >> 1) + 8 * t));
  }
  static __device__ __forceinline__ uint4 half8(const Raw &r, long long step, int) {
    const int s = static_cast<int>(step & 7), sh = 4 * (s & 1);
    unsigned sc2, mn2;
    fg_k4_scale_min(r.dm, r.s0, r.s1, r.s2, s, sc2, mn2);
    return fg_bytes_to_h8<0>(((r.q.x >> sh) & 0x0F0F0F0Fu) | (((r.h.x >> s) & 0x01010101u) << 4),
                             ((r.q.y >> sh) & 0x0F0F0F0Fu) | (((r.h.y >> s) & 0x01010101u) << 4),
                             sc2, mn2, true);
  }
};

/// The iq4 levels (ggml's kvalues_iq4nl) + 128 of 4 indexes (one per byte of
/// v, 0..15), as 4 bytes: two byte permutes over the 16-byte table and a
/// per-byte select on bit 3.
static __device__ __forceinline__ unsigned fg_iq4_levels(unsigned v) {
  // -127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113, each + 128.
  constexpr unsigned kT0 = 0x3F2D1801u, kT1 = 0x766A5D4Fu, kT2 = 0xA6998D81u, kT3 = 0xF1D9C5B5u;
  const unsigned sel = (v & 7u) | ((v >> 4) & 0x70u) | ((v >> 8) & 0x700u) | ((v >> 12) & 0x7000u);
  const unsigned lo = __byte_perm(kT0, kT1, sel), hi = __byte_perm(kT2, kT3, sel);
  const unsigned m = ((v >> 3) & 0x01010101u) * 0xFFu;
  return (hi & m) | (lo & ~m);
}

/// iq4_nl (18 bytes: f16 d; u8 qs[16], q4_0's nibble order); w = d·level[q].
struct DecIQ4_NL : DecQuant {
  static constexpr int kBlockElems = 32, kBlockBytes = 18;
  struct Raw {
    unsigned q0, q1, d;
  };
  static __device__ __forceinline__ void load(const unsigned char *row, long long step, int t,
                                              Raw &r) {
    const unsigned char *b = row + step * kBlockBytes;
    r.d = fg_ld16(b);
    r.q0 = fg_ld32a2(b + 2 + 8 * (t & 1));
    r.q1 = fg_ld32a2(b + 6 + 8 * (t & 1));
  }
  static __device__ __forceinline__ uint4 half8(const Raw &r, long long, int t) {
    const int sh = 4 * (t >> 1);
    return fg_bytes_to_h8<128>(fg_iq4_levels((r.q0 >> sh) & 0x0F0F0F0Fu),
                               fg_iq4_levels((r.q1 >> sh) & 0x0F0F0F0Fu), r.d * 0x10001u, 0,
                               false);
  }
};

/// iq4_xs (136 bytes: f16 d; u16 scales_h; u8 scales_l[4]; u8 qs[128]):
/// sub-block s = step % 8 is an iq4_nl body at qs[16s] with the scale
/// d·(ls − 32), ls = 4 bits of scales_l[s / 2] and 2 of scales_h.
struct DecIQ4_XS : DecQuant {
  static constexpr int kBlockElems = 256, kBlockBytes = 136;
  struct Raw {
    uint2 q;
    unsigned dh, sl;
  };
  static __device__ __forceinline__ void load(const unsigned char *row, long long step, int t,
                                              Raw &r) {
    const unsigned char *b = row + (step >> 3) * kBlockBytes;
    const int s = static_cast<int>(step & 7);
    r.dh = fg_ld32(b);
    r.sl = fg_ld32(b + 4);
    r.q = __ldg(reinterpret_cast<const uint2 *>(b + 8 + 16 * s + 8 * (t & 1)));
  }
  static __device__ __forceinline__ uint4 half8(const Raw &r, long long step, int t) {
    const int s = static_cast<int>(step & 7), sh = 4 * (t >> 1);
    const int ls = static_cast<int>(((r.sl >> (4 * s)) & 0xFu) | (((r.dh >> (16 + 2 * s)) & 3u) << 4));
    const float dl = fg_h2f(r.dh & 0xffffu) * static_cast<float>(ls - 32);
    return fg_bytes_to_h8<128>(fg_iq4_levels((r.q.x >> sh) & 0x0F0F0F0Fu),
                               fg_iq4_levels((r.q.y >> sh) & 0x0F0F0F0Fu), fg_h2splat(dl), 0,
                               false);
  }
};

/// q2_K (84 bytes: u8 scales[16]; u8 qs[64]; f16 d, dmin). Step s = step %
/// 8 (weights 32s + e): 2 bits at 2(s % 4) of qs[32(s / 4) + e]; scale byte
/// 2s + (e ≥ 16): low nibble × d, high nibble × dmin the min. Thread t's 8
/// weights share one scale byte. Opt-in like q5_0.
struct DecQ2_K : DecQuant {
  static constexpr int kBlockElems = 256, kBlockBytes = 84;
  struct Raw {
    unsigned q0, q1, dm, sc;
  };
  static __device__ __forceinline__ void load(const unsigned char *row, long long step, int t,
                                              Raw &r) {
    const unsigned char *b = row + (step >> 3) * kBlockBytes;
    const int s = static_cast<int>(step & 7);
    r.q0 = fg_ld32(b + 16 + 32 * (s >> 2) + 8 * t);
    r.q1 = fg_ld32(b + 20 + 32 * (s >> 2) + 8 * t);
    r.dm = fg_ld32(b + 80);
    r.sc = __ldg(b + 2 * s + (t >> 1));
  }
  static __device__ __forceinline__ uint4 half8(const Raw &r, long long step, int) {
    const int sh = 2 * static_cast<int>(step & 3);
    const float d = fg_h2f(r.dm & 0xffffu), dmin = fg_h2f(r.dm >> 16);
    return fg_bytes_to_h8<0>((r.q0 >> sh) & 0x03030303u, (r.q1 >> sh) & 0x03030303u,
                             fg_h2splat(d * static_cast<float>(r.sc & 0xFu)),
                             fg_h2splat(-(dmin * static_cast<float>(r.sc >> 4))), true);
  }
};

/// q3_K (110 bytes: u8 hmask[32]; u8 qs[64] as q2_K's; u8 scales[12]; f16 d;
/// 2-byte aligned). Weight 32s + e: q2_K's 2 bits, a third bit s of
/// hmask[e] (clear: − 4), scale 2s + (e ≥ 16) of 6 bits (stored + 32: a
/// nibble of byte i % 8, two bits of byte 8 + i % 4); w = d·(sc − 32)·
/// (q + 4·bit − 4). Opt-in like q5_0.
struct DecQ3_K : DecQuant {
  static constexpr int kBlockElems = 256, kBlockBytes = 110;
  struct Raw {
    unsigned q0, q1, h0, h1, lo, hi, d;
  };
  static __device__ __forceinline__ void load(const unsigned char *row, long long step, int t,
                                              Raw &r) {
    const unsigned char *b = row + (step >> 3) * kBlockBytes;
    const int s = static_cast<int>(step & 7), i = 2 * s + (t >> 1);
    r.q0 = fg_ld32a2(b + 32 + 32 * (s >> 2) + 8 * t);
    r.q1 = fg_ld32a2(b + 36 + 32 * (s >> 2) + 8 * t);
    r.h0 = fg_ld32a2(b + 8 * t);
    r.h1 = fg_ld32a2(b + 4 + 8 * t);
    r.lo = __ldg(b + 96 + (i & 7));
    r.hi = __ldg(b + 104 + (i & 3));
    r.d = fg_ld16(b + 108);
  }
  static __device__ __forceinline__ uint4 half8(const Raw &r, long long step, int t) {
    const int s = static_cast<int>(step & 7), sh = 2 * (s & 3), i = 2 * s + (t >> 1);
    const unsigned v0 = ((r.q0 >> sh) & 0x03030303u) | (((r.h0 >> s) & 0x01010101u) << 2);
    const unsigned v1 = ((r.q1 >> sh) & 0x03030303u) | (((r.h1 >> s) & 0x01010101u) << 2);
    const int sc = static_cast<int>(((r.lo >> (i < 8 ? 0 : 4)) & 0xFu) |
                                    (((r.hi >> (2 * (i >> 2))) & 3u) << 4));
    return fg_bytes_to_h8<4>(v0, v1, fg_h2splat(fg_h2f(r.d) * static_cast<float>(sc - 32)), 0,
                             false);
  }
};

/// q6_K (210 bytes: u8 ql[128], qh[64]; i8 scales[16]; f16 d). Step s = step
/// % 8: half n = s / 4, quarter q = s % 4 (weights 128n + 32q + l): 4 low bits
/// from ql[64n + 32(q & 1) + l] (nibble q >> 1), 2 high bits from qh[32n + l]
/// (bits 2q); w = d·sc[8n + 2q + l / 16]·(q6 − 32).
struct DecQ6_K : DecQuant {
  static constexpr int kBlockElems = 256, kBlockBytes = 210;
  struct Raw {
    unsigned l0, l1, h0, h1, sd;
  };
  static __device__ __forceinline__ void load(const unsigned char *row, long long step, int t,
                                              Raw &r) {
    const unsigned char *b = row + (step >> 3) * kBlockBytes;
    const int s = static_cast<int>(step & 7), n = s >> 2, q = s & 3;
    const unsigned char *ql = b + 64 * n + 32 * (q & 1) + 8 * t, *qh = b + 128 + 32 * n + 8 * t;
    r.l0 = fg_ld32a2(ql);
    r.l1 = fg_ld32a2(ql + 4);
    r.h0 = fg_ld32a2(qh);
    r.h1 = fg_ld32a2(qh + 4);
    // The scale byte (i8) in the low half, d in the high half.
    r.sd = __ldg(b + 192 + 8 * n + 2 * q + (t >> 1)) | (fg_ld16(b + 208) << 16);
  }
  static __device__ __forceinline__ uint4 half8(const Raw &r, long long step, int) {
    const int q = static_cast<int>(step & 3), sl = 4 * (q >> 1), sh = 2 * q;
    const unsigned v0 = ((r.l0 >> sl) & 0x0F0F0F0Fu) | (((r.h0 >> sh) & 0x03030303u) << 4);
    const unsigned v1 = ((r.l1 >> sl) & 0x0F0F0F0Fu) | (((r.h1 >> sh) & 0x03030303u) << 4);
    const float sc = static_cast<float>(static_cast<signed char>(r.sd & 0xffu));
    return fg_bytes_to_h8<32>(v0, v1, fg_h2splat(fg_h2f(r.sd >> 16) * sc), 0, false);
  }
};

/// (a & b) | c in one instruction (LOP3's lookup table 0xEA).
static __device__ __forceinline__ unsigned fg_lop3_or_and(unsigned a, unsigned b, unsigned c) {
  unsigned r;
  asm("lop3.b32 %0, %1, %2, %3, 0xEA;" : "=r"(r) : "r"(a), "r"(b), "r"(c));
  return r;
}

/// q4_K read whole: a k-step is one super-block (256 weights) and every load
/// is 16 bytes (144-byte blocks keep 16-byte alignment, the emitter checks the
/// row starts). Thread t of row r reads the header (d, dmin, the 12 scale
/// bytes: one load) and the quant pieces t and t + 4 (16 bytes each) of qs.
/// Piece p holds bytes 16(p & 1) .. + 15 of the 32-byte chunk c = p / 2: low
/// nibbles are sub-block 2c (weights 64c + l), high nibbles sub-block 2c + 1
/// (64c + 32 + l). So a thread's weights are 4 runs of 16 consecutive k, and
/// the mma's k-permutation (gemvChunkWide) pairs nibbles (l, l + 2) of one
/// 32-bit word: one LOP3 puts two of them under the exponent 0x64 (the half
/// 1024 + q), one HSUB2 removes the 1024 exactly, one HFMA2 applies d·sc and
/// −dmin·m: three instructions per 2 weights, no byte permutes, no I2F.
struct DecQ4_KW : DecQuant {
  static constexpr bool kWide = true;
  static constexpr int kBlockElems = 256, kBlockBytes = 144;
  /// The wide loop's interface (gemvMathWide): a k-step of kStepElems
  /// weights per row; per lane and row kRuns runs of 16 consecutive k, run r
  /// in the words of word set r >> 1 (nibble half r & 1), scaled by scale
  /// r (sc2, mn2: w = (q + 1024 − 1024)·sc2 + mn2 as half2).
  static constexpr int kStepElems = 256, kRuns = 4, kWordSets = 2, kScales = 4;
  struct Raw {
    uint4 h, p0, p1;
  };
  struct Prep {
    unsigned q[kWordSets][4], sc2[kScales], mn2[kScales];
  };
  static __device__ __forceinline__ int wordSetOf(int r) { return r >> 1; }
  static __device__ __forceinline__ int scaleOf(int r) { return r; }
  static __device__ __forceinline__ long long runK0(long long sb, int t, int r) {
    return 256 * sb + 64 * (t >> 1) + 16 * (t & 1) + 128 * (r >> 1) + 32 * (r & 1);
  }
  static __device__ __forceinline__ void load(const unsigned char *row, long long sb, int t,
                                              Raw &r) {
    const uint4 *b = reinterpret_cast<const uint4 *>(row + sb * kBlockBytes);
    r.h = fg_load_stream(b);
    r.p0 = fg_load_stream(b + 1 + t);
    r.p1 = fg_load_stream(b + 5 + t);
  }
  /// The same units from a super-block's 9 held elsewhere (a warp's stage,
  /// gemv_dp4a.cuh Dp4aWarpOf).
  static __device__ __forceinline__ void fromUnits(const uint4 *b, int t, Raw &r) {
    r.h = b[0];
    r.p0 = b[1 + t];
    r.p1 = b[5 + t];
  }
  /// The 6-bit scales and mins of this thread's sub-blocks: j = 2c, 2c + 1
  /// (piece t) and 2c + 4, 2c + 5 (piece t + 4), c = t / 2, with ggml's
  /// get_scale_min_k4 unrolled for them.
  static __device__ __forceinline__ void scaleMin(const Raw &r, int t, unsigned (&sc)[4],
                                                  unsigned (&m)[4]) {
    const int sh = 16 * (t >> 1);
    const unsigned a = r.h.y >> sh, b = r.h.z >> sh, c = r.h.w >> sh;
    sc[0] = a & 63u, sc[1] = (a >> 8) & 63u;
    sc[2] = (c & 0xFu) | (((a >> 6) & 3u) << 4), sc[3] = ((c >> 8) & 0xFu) | (((a >> 14) & 3u) << 4);
    m[0] = b & 63u, m[1] = (b >> 8) & 63u;
    m[2] = ((c >> 4) & 0xFu) | (((b >> 6) & 3u) << 4), m[3] = ((c >> 12) & 0xFu) | (((b >> 14) & 3u) << 4);
  }
  /// Scale and negated min (half2 splats) of this thread's sub-blocks.
  static __device__ __forceinline__ void scales(const Raw &r, int t, unsigned (&sc2)[4],
                                                unsigned (&mn2)[4]) {
    unsigned sc[4], m[4];
    scaleMin(r, t, sc, m);
    const float d = fg_h2f(r.h.x & 0xffffu), dmin = fg_h2f(r.h.x >> 16);
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      sc2[j] = fg_h2splat(d * static_cast<float>(sc[j]));
      mn2[j] = fg_h2splat(-(dmin * static_cast<float>(m[j])));
    }
  }
  /// Word q of a piece (bytes l .. l + 3), nibble half `hi`: the weights
  /// (l, l + 2) and (l + 1, l + 3) of that sub-block, as two half2.
  static __device__ __forceinline__ void pairs(unsigned q, bool hi, unsigned sc2, unsigned mn2,
                                               unsigned &w02, unsigned &w13) {
    constexpr unsigned kMagic = 0x64006400u; // 1024.0 in both halves
    const unsigned v = hi ? q >> 4 : q;
    w02 = fg_hfma2(fg_hsub2(fg_lop3_or_and(v, 0x000f000fu, kMagic), kMagic), sc2, mn2);
    w13 = fg_hfma2(fg_hsub2(fg_lop3_or_and(v >> 8, 0x000f000fu, kMagic), kMagic), sc2, mn2);
  }
  static __device__ __forceinline__ void prepare(const Raw &r, int t, Prep &p) {
    scales(r, t, p.sc2, p.mn2);
    const unsigned a[4] = {r.p0.x, r.p0.y, r.p0.z, r.p0.w}, b[4] = {r.p1.x, r.p1.y, r.p1.z, r.p1.w};
#pragma unroll
    for (int i = 0; i < 4; ++i)
      p.q[0][i] = a[i], p.q[1][i] = b[i];
  }
};

/// What the wide decoders of 32-weight blocks share: a k-step is a group of G
/// bytes (16-byte aligned), a lane loads 5 16-byte pieces of each row from
/// piece (Num·t) >> Shift on and reads them as 20 words; Prep holds its runs'
/// words and scales for gemvMathWide.
template <int G, int Num, int Shift, int WordSets, int Scales> struct DecWideGroup : DecQuant {
  static constexpr bool kWide = true;
  static constexpr int kWordSets = WordSets, kScales = Scales;
  struct Raw {
    uint4 v[5];
  };
  struct Prep {
    unsigned q[kWordSets][4], sc2[kScales], mn2[kScales];
  };
  static __device__ __forceinline__ void load(const unsigned char *row, long long sb, int t,
                                              Raw &r) {
    const uint4 *b = reinterpret_cast<const uint4 *>(row + sb * G) + ((Num * t) >> Shift);
#pragma unroll
    for (int i = 0; i < 5; ++i)
      r.v[i] = fg_load_stream(b + i);
  }
  /// The same units from a group's G / 16 held elsewhere (a warp's stage,
  /// gemv_dp4a.cuh Dp4aWarpOf).
  static __device__ __forceinline__ void fromUnits(const uint4 *g, int t, Raw &r) {
    const uint4 *b = g + ((Num * t) >> Shift);
#pragma unroll
    for (int i = 0; i < 5; ++i)
      r.v[i] = b[i];
  }
  static __device__ __forceinline__ void words(const Raw &r, unsigned (&w)[20]) {
#pragma unroll
    for (int i = 0; i < 5; ++i)
      w[4 * i] = r.v[i].x, w[4 * i + 1] = r.v[i].y, w[4 * i + 2] = r.v[i].z, w[4 * i + 3] = r.v[i].w;
  }
};

/// q4_0 read wide (rows of whole 512-weight groups starting 16-byte aligned:
/// K % 512 == 0, and 16 blocks of 18 bytes are 288 = 18 x 16). A k-step is
/// one group; the 4 lanes of a row take 4 blocks each (72 bytes from byte 72t,
/// which is 16-byte aligned for even t and 8 past it for odd t): 5 16-byte
/// loads, one SEL per word to drop the odd lanes' first 8 bytes, and PRMTs to
/// realign the quants of blocks 0 and 2 (their 16 bytes start 2 bytes into a
/// word). A block's low nibbles are its weights 0 .. 15 and its high nibbles
/// 16 .. 31, so each of the lane's blocks is two runs of 16 consecutive k and
/// the weights take q4_K's wide path: (q + 1024 − 1024)·d + (−8d), one LOP3,
/// HSUB2 and HFMA2 per two weights (−8d is exact in f16).
struct DecQ4_0W : DecWideGroup<288, 9, 1, 4, 4> {
  static constexpr int kBlockElems = 32, kBlockBytes = 18;
  static constexpr int kStepElems = 512, kRuns = 8;
  static __device__ __forceinline__ int wordSetOf(int r) { return r >> 1; }
  static __device__ __forceinline__ int scaleOf(int r) { return r >> 1; }
  static __device__ __forceinline__ long long runK0(long long sb, int t, int r) {
    return 512 * sb + 128 * t + 32 * (r >> 1) + 16 * (r & 1);
  }
  static __device__ __forceinline__ void prepare(const Raw &r, int t, Prep &p) {
    unsigned w[20];
    words(r, w);
    const bool odd = t & 1;
    unsigned L[18]; // the lane's 72 bytes
#pragma unroll
    for (int j = 0; j < 18; ++j)
      L[j] = odd ? w[j + 2] : w[j];
    // Block b starts at byte 18b: d in the low half of word 0 / high half of
    // word 4 / low of 9 / high of 13; quants at words 0.5 .. 4.5, 5 .. 8,
    // 9.5 .. 13.5, 14 .. 17.
    const unsigned d[4] = {L[0] & 0xffffu, L[4] >> 16, L[9] & 0xffffu, L[13] >> 16};
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      p.q[0][i] = __byte_perm(L[i], L[i + 1], 0x5432);
      p.q[1][i] = L[5 + i];
      p.q[2][i] = __byte_perm(L[9 + i], L[10 + i], 0x5432);
      p.q[3][i] = L[14 + i];
    }
#pragma unroll
    for (int b = 0; b < 4; ++b) {
      p.sc2[b] = d[b] * 0x10001u;
      p.mn2[b] = fg_h2splat(-8.0f * fg_h2f(d[b]));
    }
  }
  static __device__ __forceinline__ void pairs(unsigned q, bool hi, unsigned sc2, unsigned mn2,
                                               unsigned &w02, unsigned &w13) {
    DecQ4_KW::pairs(q, hi, sc2, mn2, w02, w13);
  }
};

/// 8 bytes, streamed (like fg_load_stream).
static __device__ __forceinline__ uint2 fg_load_stream2(const void *p) {
  uint2 r;
  asm volatile("ld.global.nc.L1::no_allocate.v2.u32 {%0, %1}, [%2];" : "=r"(r.x), "=r"(r.y) : "l"(p));
  return r;
}

/// q4_K read whole with the scales applied after the mma (an opt-in form,
/// EmitOptions::gemvWideScaled, being measured against DecQ4_KW). Thread t of
/// row r reads the header (16 bytes) and bytes 8t .. 8t + 7 of each 32-byte
/// chunk c of qs (8 bytes): low nibbles are 8 weights of sub-block 2c, high
/// nibbles of 2c + 1, so the 4 threads of a row cover one sub-block together
/// and each mma sums within one sub-block. The weights enter the mma as the
/// exact halves 1024 + q (one LOP3 per two, no HSUB2, no HFMA2); the sub-block
/// sum T = Σ (1024 + q)·x and X = Σ x (an mma with an A of ones) then give
/// d·sc·T − (dmin·m + 1024·d·sc)·X in f32: scale and min are never rounded to
/// f16, and x enters the mma as one f16 (no lo half).
struct DecQ4_KS : DecQuant {
  static constexpr bool kWide = true, kScaledAfter = true;
  static constexpr int kBlockElems = 256, kBlockBytes = 144, kStepElems = 256;
  struct Raw {
    uint4 h;
    uint2 q[4];
  };
  static __device__ __forceinline__ void load(const unsigned char *row, long long sb, int t,
                                              Raw &r) {
    const unsigned char *b = row + sb * kBlockBytes;
    r.h = fg_load_stream(b);
#pragma unroll
    for (int c = 0; c < 4; ++c)
      r.q[c] = fg_load_stream2(b + 16 + 32 * c + 8 * t);
  }
  /// Scale S = d·sc and offset min M' = dmin·m + 1024·S (f32) of sub-blocks
  /// 2t and 2t + 1 (ggml's get_scale_min_k4: j < 4 for t < 2, else the split
  /// 6-bit form); the other threads of the row get them by shuffle.
  static __device__ __forceinline__ void scalesF(const Raw &r, int t, float (&sc)[2],
                                                 float (&mp)[2]) {
    const int sh = 16 * (t & 1);
    const unsigned y = r.h.y >> sh, z = r.h.z >> sh, w = r.h.w >> sh;
    const bool split = t >= 2;
    const unsigned s0 = split ? (w & 0xFu) | (((y >> 6) & 3u) << 4) : y & 63u;
    const unsigned m0 = split ? ((w >> 4) & 0xFu) | (((z >> 6) & 3u) << 4) : z & 63u;
    const unsigned s1 = split ? ((w >> 8) & 0xFu) | (((y >> 14) & 3u) << 4) : (y >> 8) & 63u;
    const unsigned m1 = split ? ((w >> 12) & 0xFu) | (((z >> 14) & 3u) << 4) : (z >> 8) & 63u;
    const float d = fg_h2f(r.h.x & 0xffffu), dmin = fg_h2f(r.h.x >> 16);
    sc[0] = d * static_cast<float>(s0);
    sc[1] = d * static_cast<float>(s1);
    mp[0] = fmaf(1024.0f, sc[0], dmin * static_cast<float>(m0));
    mp[1] = fmaf(1024.0f, sc[1], dmin * static_cast<float>(m1));
  }
  /// Word q (bytes l .. l + 3), nibble half `hi`: 1024 + q of weights
  /// (l, l + 2) and (l + 1, l + 3), as two exact half2.
  static __device__ __forceinline__ void halves(unsigned q, bool hi, unsigned &w02,
                                                unsigned &w13) {
    constexpr unsigned kMagic = 0x64006400u;
    const unsigned v = hi ? q >> 4 : q;
    w02 = fg_lop3_or_and(v, 0x000f000fu, kMagic);
    w13 = fg_lop3_or_and(v >> 8, 0x000f000fu, kMagic);
  }
};

/// q8_0 read wide (rows of whole 256-weight groups starting 16-byte aligned:
/// K % 256 == 0, and 8 blocks of 34 bytes are 272 = 17 x 16). A k-step is one
/// group; lane t takes blocks 2t and 2t + 1 (68 bytes from byte 68t: 5
/// 16-byte loads, its data from word t of them, chosen by two SELs per word),
/// block 0's quants realigned by PRMTs (they start 2 bytes into a word).
/// Run r (16 consecutive k) is words 4(r & 1) .. + 3 of block r >> 1; the
/// signed bytes become halves without I2F: flip the sign bit (u = q + 128),
/// put u under the exponent 0x64 (one PRMT per two: 1024 + u), subtract
/// 1152 (q, exact) and multiply by d: two weights per PRMT, HSUB2, HFMA2.
struct DecQ8_0W : DecWideGroup<272, 17, 2, 4, 2> {
  static constexpr int kBlockElems = 32, kBlockBytes = 34;
  static constexpr int kStepElems = 256, kRuns = 4;
  static __device__ __forceinline__ int wordSetOf(int r) { return r; }
  static __device__ __forceinline__ int scaleOf(int r) { return r >> 1; }
  static __device__ __forceinline__ long long runK0(long long sb, int t, int r) {
    return 256 * sb + 64 * t + 32 * (r >> 1) + 16 * (r & 1);
  }
  static __device__ __forceinline__ void prepare(const Raw &r, int t, Prep &p) {
    unsigned w[20];
    words(r, w);
    const bool b0 = t & 1, b1 = t & 2;
    unsigned A[19], L[17]; // L: the lane's 68 bytes, words t .. t + 16 of w
#pragma unroll
    for (int j = 0; j < 19; ++j)
      A[j] = b0 ? w[j + 1] : w[j];
#pragma unroll
    for (int j = 0; j < 17; ++j)
      L[j] = b1 ? A[j + 2] : A[j];
    // Block 0: d in the low half of word 0, quants bytes 2 .. 33; block 1:
    // d in the high half of word 8, quants words 9 .. 16.
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      p.q[0][i] = __byte_perm(L[i], L[i + 1], 0x5432);
      p.q[1][i] = __byte_perm(L[4 + i], L[5 + i], 0x5432);
      p.q[2][i] = L[9 + i];
      p.q[3][i] = L[13 + i];
    }
    p.sc2[0] = (L[0] & 0xffffu) * 0x10001u;
    p.sc2[1] = (L[8] >> 16) * 0x10001u;
    p.mn2[0] = p.mn2[1] = 0u;
  }
  /// Word q (weights l .. l + 3 of the run): (l, l + 2) and (l + 1, l + 3) as
  /// two half2 d·q.
  static __device__ __forceinline__ void pairs(unsigned q, bool, unsigned sc2, unsigned,
                                               unsigned &w02, unsigned &w13) {
    constexpr unsigned kMagic = 0x64646464u, k1152 = 0x64806480u; // 1152.0 in both halves
    const unsigned u = q ^ 0x80808080u;
    w02 = fg_hmul2(fg_hsub2(__byte_perm(u, kMagic, 0x4240), k1152), sc2);
    w13 = fg_hmul2(fg_hsub2(__byte_perm(u, kMagic, 0x4341), k1152), sc2);
  }
};

/// iq4_nl read wide: q4_0's layout and loop (DecQ4_0W), each nibble a level
/// of the table (fg_iq4_levels, + 128) turned into a half as q8_0's wide
/// form does (PRMT under 0x64, HSUB2 1152, HMUL2 d). Default
/// (EmitOptions::gemvWideIq4nl); GpuQuantGemv.IQ4_NLWideEveryForm checks it.
struct DecIQ4_NLW : DecQ4_0W {
  static __device__ __forceinline__ void pairs(unsigned q, bool hi, unsigned sc2, unsigned,
                                               unsigned &w02, unsigned &w13) {
    constexpr unsigned kMagic = 0x64646464u, k1152 = 0x64806480u;
    const unsigned lv = fg_iq4_levels((hi ? q >> 4 : q) & 0x0F0F0F0Fu);
    w02 = fg_hmul2(fg_hsub2(__byte_perm(lv, kMagic, 0x4240), k1152), sc2);
    w13 = fg_hmul2(fg_hsub2(__byte_perm(lv, kMagic, 0x4341), k1152), sc2);
  }
};

/// 16 bytes at byte m (even, 0..14) of 32 held as 8 words: two SELs per
/// word on the bits of m >> 2 (warp-uniform), then a PRMT when m % 4 == 2.
static __device__ __forceinline__ void fg_realign16(const unsigned (&s)[8], int m,
                                                    unsigned (&out)[4]) {
  unsigned A[7], B[5];
#pragma unroll
  for (int j = 0; j < 7; ++j)
    A[j] = (m & 4) ? s[j + 1] : s[j];
#pragma unroll
  for (int j = 0; j < 5; ++j)
    B[j] = (m & 8) ? A[j + 2] : A[j];
#pragma unroll
  for (int j = 0; j < 4; ++j)
    out[j] = (m & 2) ? __byte_perm(B[j], B[j + 1], 0x5432) : B[j];
}

/// q6_K read wide (default, EmitOptions::gemvWideQ6k; checked by
/// GpuQuantGemv.Q6_KWideEveryForm): rows of whole 8-super-block groups (K % 2048 == 0: 1680 bytes,
/// 16-byte aligned). A k-step is one super-block; lane t takes half n = t / 2
/// and l = 16(t & 1) .. + 15, i.e. 4 runs of 16 weights 128n + 32r + l, each
/// under one scale sc[8n + 2r + (t & 1)]. Everything a lane reads sits at a
/// 16-byte multiple from the super-block's start (ql at 64n + 16(t & 1) and
/// + 32, qh at 128 + 32n + 16(t & 1), scales at 192, d at 208), and the
/// start's offset m within 16 bytes (210 per super-block: even, the same for
/// every lane of a step) is undone by fg_realign16 after two aligned 16-byte
/// loads per piece (8 in all; the pair never reaches past the row: its last
/// super-block ends on 16 bytes). Per word of a run: the 6-bit values as
/// bytes (LOP3s), then q8_0's half conversion with 1024 + 32 (w = d·sc·(q6 − 32)).
struct DecQ6_KW : DecQuant {
  static constexpr bool kWide = true;
  static constexpr int kBlockElems = 256, kBlockBytes = 210;
  static constexpr int kStepElems = 256, kRuns = 4, kWordSets = 4, kScales = 4;
  struct Raw {
    uint4 v[8]; ///< ql (2), ql + 32 (2), qh (2), scales and d (2)
    int m;      ///< the super-block's start modulo 16
  };
  struct Prep {
    unsigned q[kWordSets][4], sc2[kScales], mn2[kScales];
  };
  static __device__ __forceinline__ int wordSetOf(int r) { return r; }
  static __device__ __forceinline__ int scaleOf(int r) { return r; }
  static __device__ __forceinline__ long long runK0(long long sb, int t, int r) {
    return 256 * sb + 128 * (t >> 1) + 16 * (t & 1) + 32 * r;
  }
  static __device__ __forceinline__ void load(const unsigned char *row, long long sb, int t,
                                              Raw &r) {
    const unsigned char *b = row + sb * kBlockBytes;
    r.m = static_cast<int>(reinterpret_cast<unsigned long long>(b) & 15u);
    const int n = t >> 1, h = t & 1;
    const int off[4] = {64 * n + 16 * h, 64 * n + 32 + 16 * h, 128 + 32 * n + 16 * h, 192};
#pragma unroll
    for (int p = 0; p < 4; ++p) {
      const uint4 *a = reinterpret_cast<const uint4 *>(b + off[p] - r.m);
      r.v[2 * p] = fg_load_stream(a);
      r.v[2 * p + 1] = fg_load_stream(a + 1);
    }
  }
  /// This lane's 4 runs of 16 six-bit values (bytes 0..63, in k order), the
  /// super-block's d and the runs' signed 8-bit scales (also the DP4A row's,
  /// gemv_dp4a.cuh).
  static __device__ __forceinline__ void unpack(const Raw &r, int t, unsigned (&q)[4][4],
                                                float &d, float (&sc)[4]) {
    unsigned piece[4][4], dword;
#pragma unroll
    for (int k = 0; k < 4; ++k) {
      const unsigned s[8] = {r.v[2 * k].x,     r.v[2 * k].y,     r.v[2 * k].z,     r.v[2 * k].w,
                             r.v[2 * k + 1].x, r.v[2 * k + 1].y, r.v[2 * k + 1].z, r.v[2 * k + 1].w};
      fg_realign16(s, r.m, piece[k]);
      if (k == 3) { // d: bytes m + 16, m + 17 of the scales' pair
        const unsigned x = (r.m & 4) ? s[5] : s[4], y = (r.m & 4) ? s[7] : s[6];
        const unsigned z = (r.m & 8) ? y : x;
        dword = (r.m & 2) ? z >> 16 : z & 0xffffu;
      }
    }
    const int n = t >> 1;
    decode(piece[0], piece[1], piece[2], n ? piece[3][2] : piece[3][0], n ? piece[3][3] : piece[3][1],
           dword, t, q, d, sc);
  }
  /// The same from this lane's pieces, bytes in order: ql at 64n + 16h
  /// and + 32 (ql0, ql1), qh at 128 + 32n + 16h, scale words 2n and 2n + 1
  /// (bytes 192 + 8n ..; sc0, sc1) and d's bits (also DecQ6_KWarp's,
  /// gemv_dp4a.cuh).
  static __device__ __forceinline__ void decode(const unsigned (&ql0)[4], const unsigned (&ql1)[4],
                                                const unsigned (&qh)[4], unsigned sc0, unsigned sc1,
                                                unsigned dword, int t, unsigned (&q)[4][4],
                                                float &d, float (&sc)[4]) {
    d = fg_h2f(dword);
    const int h = t & 1;
#pragma unroll
    for (int run = 0; run < 4; ++run) {
      const int sh = 2 * run;
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        const unsigned ql = (run & 1) ? ql1[i] : ql0[i];
        const unsigned lo = (run >> 1) ? (ql >> 4) & 0x0F0F0F0Fu : ql & 0x0F0F0F0Fu;
        q[run][i] = lo | (((qh[i] >> sh) & 0x03030303u) << 4);
      }
      // Scale byte 8n + 2run + h of the 16: word 2n + (run >> 1), byte h + 2(run & 1).
      const unsigned w = (run >> 1) ? sc1 : sc0;
      sc[run] = static_cast<float>(static_cast<signed char>((w >> (8 * (h + 2 * (run & 1)))) & 0xffu));
    }
  }
  static __device__ __forceinline__ void prepare(const Raw &r, int t, Prep &p) {
    float d, sc[4];
    unpack(r, t, p.q, d, sc);
#pragma unroll
    for (int run = 0; run < 4; ++run) {
      p.sc2[run] = fg_h2splat(d * sc[run]);
      p.mn2[run] = 0u;
    }
  }
  static __device__ __forceinline__ void pairs(unsigned q, bool, unsigned sc2, unsigned,
                                               unsigned &w02, unsigned &w13) {
    constexpr unsigned kMagic = 0x64646464u, k1056 = 0x64206420u; // 1024 + 32 in both halves
    w02 = fg_hmul2(fg_hsub2(__byte_perm(q, kMagic, 0x4240), k1056), sc2);
    w13 = fg_hmul2(fg_hsub2(__byte_perm(q, kMagic, 0x4341), k1056), sc2);
  }
};

/// What a chunk holds for one row of one stream between its loads and its
/// arithmetic: 16-byte loads (two for f32), or a quantised decoder's Raw.
template <class D, bool Q = D::kQuant> struct GemvW {
  uint4 v[sizeof(typename D::T) == 4 ? 2 : 1];
};
template <class D> struct GemvW<D, true> {
  typename D::Raw v;
};

// --- prologues and epilogues ----------------------------------------------------

/// y = acc (+ bias).
struct EpiStore {
  static constexpr int kStreams = 1;
  static __device__ __forceinline__ float apply(const float (&v)[2]) { return v[0]; }
};

enum GluKindDev { kGluSwiGLU = 0, kGluGeGLU = 1, kGluSwiGLUOAI = 2, kGluSwiGLUClamp = 3 };

/// y = glu(gate, up) (the CPU reference's formulas, in float).
template <int Kind, int AlphaBits, int LimitBits> struct EpiGlu {
  static constexpr int kStreams = 2;
  static __device__ __forceinline__ float apply(const float (&v)[2]) {
    const float g = v[0], u = v[1];
    const float alpha = __int_as_float(AlphaBits), limit = __int_as_float(LimitBits);
    if (Kind == kGluSwiGLU)
      return g / (1.0f + expf(-g)) * u;
    if (Kind == kGluGeGLU)
      return 0.5f * g * (1.0f + tanhf(0.7978845608028654f * (g + 0.044715f * g * g * g))) * u;
    const float gc = fminf(g, limit), uc = fminf(fmaxf(u, -limit), limit);
    if (Kind == kGluSwiGLUOAI)
      return gc / (1.0f + expf(-alpha * gc)) * (uc + 1.0f);
    return gc / (1.0f + expf(-gc)) * uc;
  }
};

// --- loads ------------------------------------------------------------------------

/// 8 consecutive weights (k0 .. k0 + 7) of one row as 16 bytes (two rows'
/// worth of uint4 for f32: `half` selects the first or second four).
template <class Dec, long long K, long long KS, bool Vec, bool Guard>
static __device__ __forceinline__ void gemvLoadW(const typename Dec::T *row, long long k0,
                                                 uint4 (&out)[sizeof(typename Dec::T) == 4 ? 2 : 1]) {
  using T = typename Dec::T;
  constexpr int kParts = sizeof(T) == 4 ? 2 : 1;
  if (Vec) {
#pragma unroll
    for (int p = 0; p < kParts; ++p)
      out[p] = (!Guard || k0 < K) ? fg_load_stream(row + k0 + 4 * p) : make_uint4(0, 0, 0, 0);
    return;
  }
  union {
    T v[8];
    uint4 u[kParts];
  } r;
#pragma unroll
  for (int e = 0; e < 8; ++e)
    r.v[e] = (!Guard || k0 + e < K) ? row[(k0 + e) * KS] : T{};
#pragma unroll
  for (int p = 0; p < kParts; ++p)
    out[p] = r.u[p];
}

/// x[k0 .. k0 + 7] of one x row as floats (zeros past K).
template <class C, bool Guard>
static __device__ __forceinline__ void gemvLoadX(const typename C::X *xr, long long k0,
                                                 float (&v)[8]) {
  if (C::kXVec) {
#pragma unroll
    for (int q = 0; q < 2; ++q) {
      float4 t = (!Guard || k0 < C::K) ? __ldg(reinterpret_cast<const float4 *>(xr + k0) + q)
                                       : make_float4(0.f, 0.f, 0.f, 0.f);
      v[4 * q] = t.x, v[4 * q + 1] = t.y, v[4 * q + 2] = t.z, v[4 * q + 3] = t.w;
    }
    return;
  }
#pragma unroll
  for (int e = 0; e < 8; ++e)
    v[e] = (!Guard || k0 + e < C::K) ? fg_to_f(xr[(k0 + e) * C::x_ks]) : 0.0f;
}

// --- the kernel body ---------------------------------------------------------------

/// The pointers of one launch; unused ones are null.
template <class C> struct GemvArgs {
  float *y;
  const typename C::X *x;
  const typename C::Dec0::T *w0;
  const typename C::Dec1::T *w1;
  const typename C::Ids *ids;
  const typename C::B0 *b0;
  const typename C::B1 *b1;
  const typename C::R *res; ///< Cfg::kRes: added after the epilogue, (m, n) at res_off + m·res_sm + n·res_sn
  const typename C::NW *nw; ///< Cfg::kNorm: the norm weight, k at nw_off + k
  float *row = nullptr;     ///< Cfg::kNormRow: the normalised rows, packed [M, K]
};

/// What a row's store adds besides its sums: the biases of its streams
/// (before the epilogue) and the addend (after it), zero where the launch
/// has none. Cfg::kEarlyExtras (EmitOptions::gemvEarlyExtras): loaded when
/// the row's tile starts (the DP4A GEMV: its combine window's first tile),
/// so the stores after the warps' barrier wait on no load; else at the
/// store.
struct GemvExtras {
  float b0 = 0.0f, b1 = 0.0f, res = 0.0f;
};

/// Row n's extras for row m of x (expert e; the biases only of a valid pair).
template <class C>
static __device__ __forceinline__ GemvExtras gemvExtras(const GemvArgs<C> &a, long long e,
                                                        bool valid, long long m, long long n) {
  GemvExtras x;
  if constexpr (C::kBias) {
    if (valid) {
      x.b0 = fg_to_f(a.b0[C::b0_off + e * C::b0_se + n * C::b0_sn]);
      if (C::Epi::kStreams == 2)
        x.b1 = fg_to_f(a.b1[C::b1_off + e * C::b1_se + n * C::b1_sn]);
    }
  }
  if constexpr (C::kRes)
    x.res = fg_to_f(a.res[C::res_off + m * C::res_sm + n * C::res_sn]);
  return x;
}

/// 1 / sqrt(Σx² / K + eps): a row's rstd from its sum of squares (every
/// norm-prologue form; the same expression, so the same bits).
template <class C> static __device__ __forceinline__ float gemvRstd(float sumSquares) {
  return 1.0f / sqrtf(sumSquares / (float)C::K + __int_as_float(C::kNormEpsBits));
}

/// The rms_norm prologue: rs[m] = 1 / sqrt(mean_k x[m0 + m, k]² + eps) for the
/// block's rows of x (up to 8), summed by all threads in a fixed order.
template <class C>
static __device__ __forceinline__ void gemvNormScales(const GemvArgs<C> &a, int m0, float *rs) {
  constexpr int W = C::kWarps, kRowsX = C::M < 8 ? C::M : 8;
  __shared__ float red[8][W];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
#pragma unroll
  for (int m = 0; m < kRowsX; ++m) {
    if (m0 + m >= C::M)
      break;
    const typename C::X *xr = a.x + C::xRow(m0 + m);
    float s = 0.0f;
    if constexpr (C::kXVec) {
      for (long long k = 4 * (long long)threadIdx.x; k < C::K; k += 4 * 32 * W) {
        const float4 t = __ldg(reinterpret_cast<const float4 *>(xr + k));
        s += t.x * t.x + t.y * t.y + t.z * t.z + t.w * t.w;
      }
    } else {
      for (long long k = threadIdx.x; k < C::K; k += 32 * W) {
        const float v = fg_to_f(xr[k * C::x_ks]);
        s += v * v;
      }
    }
    s = fg_warp_sum(s);
    if (lane == 0)
      red[m][warp] = s;
  }
  __syncthreads();
  if (threadIdx.x < kRowsX) {
    float sum = 0.0f;
    for (int w = 0; w < W; ++w)
      sum += red[threadIdx.x][w];
    rs[threadIdx.x] = gemvRstd<C>(sum);
  }
  __syncthreads();
}

/// x values k0 .. k0 + P - 1 of one row, normalised: · scale · nw[k] (Cfg::kNorm).
template <class C, bool Guard, int P>
static __device__ __forceinline__ void gemvNormX(const GemvArgs<C> &a, long long k0, float scale,
                                                 float (&v)[P]) {
  if constexpr (C::kNorm) {
#pragma unroll
    for (int e = 0; e < P; ++e) {
      const long long k = k0 + e;
      const float w = (!Guard || k < C::K) ? fg_to_f(a.nw[C::nw_off + k]) : 0.0f;
      v[e] = v[e] * scale * w; // the reference's order: (x · rstd) · w
    }
  }
}

/// Cfg::kNormRow (fused.rms_norm_mul_matmul): block `bx` of the dense
/// GEMV's gridDim.x stores its slice of each normalised row of x it owns
/// (rows m0 .. m0 + 7), x · rstd · nw in the reference's order, for the
/// norm's other readers. rstd(m) is the block's own, the same in every block
/// (each sums the same squares in the same order).
template <class C, class Rstd>
static __device__ __forceinline__ void gemvStoreNormRow(const GemvArgs<C> &a, long long bx,
                                                        int m0, Rstd rstd) {
  if constexpr (C::kNormRow) {
    static_assert(C::kNorm && !C::kExpert, "the stored row is the dense norm prologue's");
    const long long chunk = ((C::K + gridDim.x - 1) / gridDim.x + 3) / 4 * 4;
    const long long k0 = bx * chunk, k1 = min(C::K, k0 + chunk);
#pragma unroll
    for (int m = 0; m < (C::M < 8 ? C::M : 8); ++m) {
      if (m0 + m >= C::M)
        break;
      const float r = rstd(m);
      const typename C::X *xr = a.x + C::xRow(m0 + m);
      for (long long k = k0 + threadIdx.x; k < k1; k += blockDim.x)
        a.row[(m0 + m) * C::K + k] =
            fg_to_f(xr[k * C::x_ks]) * r * fg_to_f(a.nw[C::nw_off + k]);
    }
  }
}

/// A GEMV's store tail (GemvTails.cpp, the register form): a one-token row
/// op that reads exactly this GEMV's result — q's rope, k's rope and cache
/// write, v's cache write — run by each thread on the value it stores, after
/// the store: Tail::put(f, v, vp) gets element f of the result (m · N + n),
/// its value and, where Tail::kPairs (a normal-mode rope), the value of its
/// pair partner f ^ 1 (row n ^ 1 of the same tile: the emitter checks the
/// tiles have even rows), added from the same partial sums in the same
/// order, so the same bits as its own store. No tail: nothing.
struct GemvNoTail {
  static constexpr bool kOn = false, kPairs = false;
  __device__ __forceinline__ void put(long long, float, float) const {}
};

/// A row's sums of its streams through the bias (before the epilogue), the
/// epilogue and the addend (after it): the value a GEMV stores.
template <class C>
static __device__ __forceinline__ float gemvOut(float (&v)[2], const GemvExtras &x, bool valid) {
  if constexpr (C::kBias) {
    if (valid) {
      v[0] = v[0] + x.b0;
      if (C::Epi::kStreams == 2)
        v[1] = v[1] + x.b1;
    }
  }
  float out = C::Epi::apply(v);
  if constexpr (C::kRes)
    out += x.res;
  return out;
}

/// The store tail of element (m, n), stored as `out`; `partner()` gives the
/// value of (m, n ^ 1) for a rope's pairs. Nothing without a tail.
template <class C, class Tail, class Partner>
static __device__ __forceinline__ void gemvTailPut(const Tail &tail, long long m, long long n,
                                                   float out, Partner partner) {
  if constexpr (Tail::kOn) {
    static_assert(!C::kExpert, "a store tail reads a dense result");
    float vp = 0.0f;
    if constexpr (Tail::kPairs)
      vp = partner();
    tail.put(m * C::N + n, out, vp);
  }
}

/// The store tail's work ahead of the GEMV, in the entry before its wait
/// (EmitOptions::gemvStoreTailEarly): Tail::early(f) for the one element
/// f this thread will store (its rope angle and cache row, from the
/// positions: GemvTails.cpp earlyOk says why they may be read there), where
/// each thread stores at most one.
template <class C, class Tail>
static __device__ __forceinline__ void gemvTailEarly(Tail &tail) {
  static_assert(!C::kExpert, "a store tail reads a dense result");
  constexpr int R = C::kTensorCores ? 16 : C::kRows, MG = C::M < 8 ? C::M : 8;
  constexpr int kOuts = C::kTensorCores ? 16 * 8 : R * MG;
  if (32 * C::kWarps < kOuts || threadIdx.x >= kOuts)
    return;
  const int o = threadIdx.x;
  const int r = C::kTensorCores ? o >> 3 : o / MG, m = C::kTensorCores ? o & 7 : o % MG;
  const long long n = (long long)blockIdx.x * R + r, mm = 8LL * blockIdx.z + m;
  if (mm < C::M && n < C::N)
    tail.early(mm * C::N + n);
}

template <class C> struct GemvShared {
  float part[C::kWarps][C::Epi::kStreams][16][8];
};

/// One row's weights of k-step `step` for this thread (k0 = 32·step + 8t):
/// a quantised decoder's Raw (zero blocks past K: scale 0), else the 16-byte
/// load(s) of gemvLoadW.
template <class D, long long K, long long KS, bool Vec, bool Guard>
static __device__ __forceinline__ void gemvLoadRow(const typename D::T *row, long long step, int t,
                                                   long long k0, GemvW<D> &out) {
  if constexpr (D::kQuant) {
    if (!Guard || step * 32 < K)
      D::load(row, step, t, out.v);
    else
      out.v = typename D::Raw{};
  } else {
    gemvLoadW<D, K, KS, Vec, Guard>(row, k0, out.v);
  }
}

/// The 8 weights of a GemvW as 4 packed pairs in the mma's 16-bit type.
template <class D>
static __device__ __forceinline__ uint4 gemvHalves(const GemvW<D> &w, long long step, int t) {
  if constexpr (D::kQuant)
    return D::half8(w.v, step, t);
  else
    return w.v[0];
}

/// One k-step on the tensor cores: x (8 values of this lane's token) split
/// into hi + lo in the weight's type, two mmas (j = 0, 1) for each half;
/// XHalf (Cfg::kXHalf, quantised weights only): x as one f16, no lo.
template <class Dec, bool XHalf = false>
static __device__ __forceinline__ void gemvMmaStep(const float (&xv)[8], const uint4 &wa,
                                                   const uint4 &wb, float (&cc)[4]) {
  unsigned hi[4], lo[4];
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    hi[i] = Dec::pack(xv[2 * i], xv[2 * i + 1]);
    if constexpr (!XHalf) {
      float h0, h1;
      Dec::unpack(hi[i], h0, h1);
      lo[i] = Dec::pack(xv[2 * i] - h0, xv[2 * i + 1] - h1);
    }
  }
  const unsigned ra[4] = {wa.x, wa.y, wa.z, wa.w}, rb[4] = {wb.x, wb.y, wb.z, wb.w};
#pragma unroll
  for (int j = 0; j < 2; ++j) {
    const unsigned frag[4] = {ra[2 * j], rb[2 * j], ra[2 * j + 1], rb[2 * j + 1]};
    Dec::mma(cc, frag, hi[2 * j], hi[2 * j + 1]);
    if constexpr (!XHalf)
      Dec::mma(cc, frag, lo[2 * j], lo[2 * j + 1]);
  }
}

/// Accumulates chunk c (k-steps c·U .. c·U + U - 1) of this warp: all of its
/// weight loads first, then the arithmetic. Guard: the chunk runs past K.
template <class C, bool Guard>
static __device__ __forceinline__ void gemvChunk(const GemvArgs<C> &a, long long c,
                                                 const typename C::Dec0::T *r0a,
                                                 const typename C::Dec0::T *r0b,
                                                 const typename C::Dec1::T *r1a,
                                                 const typename C::Dec1::T *r1b,
                                                 const typename C::X *xr, bool xLive, int t, int m0,
                                                 const float *rs, float (&acc)[2][4],
                                                 float (&fac)[2][2][8]) {
  constexpr int S = C::Epi::kStreams, U = C::kUnroll;
  using D0 = typename C::Dec0;
  using D1 = typename C::Dec1;
  GemvW<D0> wa0[U], wb0[U];
  GemvW<D1> wa1[U], wb1[U];
  // Every load of the chunk first, then the arithmetic.
#pragma unroll
  for (int u = 0; u < U; ++u) {
    const long long step = c * U + u, k0 = step * 32 + 8 * t;
    gemvLoadRow<D0, C::K, C::w0_ks, C::kWVec, Guard>(r0a, step, t, k0, wa0[u]);
    gemvLoadRow<D0, C::K, C::w0_ks, C::kWVec, Guard>(r0b, step, t, k0, wb0[u]);
    if (S == 2) {
      gemvLoadRow<D1, C::K, C::w1_ks, C::kWVec, Guard>(r1a, step, t, k0, wa1[u]);
      gemvLoadRow<D1, C::K, C::w1_ks, C::kWVec, Guard>(r1b, step, t, k0, wb1[u]);
    }
  }
#pragma unroll
  for (int u = 0; u < U; ++u) {
    const long long step = c * U + u, k0 = step * 32 + 8 * t;
    if constexpr (D0::kMma) {
      // This lane's x column is token g: 8 values, split into hi + lo.
      float xv[8];
      if (xLive) {
        gemvLoadX<C, Guard>(xr, k0, xv);
        gemvNormX<C, Guard, 8>(a, k0, C::kNorm ? rs[(threadIdx.x & 31) >> 2] : 1.0f, xv);
      } else {
#pragma unroll
        for (int e = 0; e < 8; ++e)
          xv[e] = 0.0f;
      }
      gemvMmaStep<D0, C::kXHalf>(xv, gemvHalves<D0>(wa0[u], step, t),
                                 gemvHalves<D0>(wb0[u], step, t), acc[0]);
      if constexpr (S == 2)
        gemvMmaStep<D1, C::kXHalf>(xv, gemvHalves<D1>(wa1[u], step, t),
                                   gemvHalves<D1>(wb1[u], step, t), acc[1]);
    } else {
      // CUDA cores: every token's x against this lane's 8 weights of rows g, g + 8.
      const float *fa0 = reinterpret_cast<const float *>(wa0[u].v);
      const float *fb0 = reinterpret_cast<const float *>(wb0[u].v);
      const float *fa1 = reinterpret_cast<const float *>(wa1[u].v);
      const float *fb1 = reinterpret_cast<const float *>(wb1[u].v);
#pragma unroll
      for (int m = 0; m < (C::M < 8 ? C::M : 8); ++m) {
        if (m0 + m >= C::M)
          break;
        float xv[8];
        gemvLoadX<C, Guard>(C::kExpert ? xr : a.x + C::xRow(m0 + m), k0, xv);
        gemvNormX<C, Guard, 8>(a, k0, C::kNorm ? rs[m] : 1.0f, xv);
#pragma unroll
        for (int e = 0; e < 8; ++e) {
          fac[0][0][m] += fa0[e] * xv[e];
          fac[0][1][m] += fb0[e] * xv[e];
          if (S == 2) {
            fac[1][0][m] += fa1[e] * xv[e];
            fac[1][1][m] += fb1[e] * xv[e];
          }
        }
      }
    }
  }
}

/// x hi + lo of one k pair (weights (k0, k1) of an mma slot pair), in f16.
static __device__ __forceinline__ void fg_split_pair(float x0, float x1, unsigned &hi,
                                                     unsigned &lo) {
  hi = DecF16::pack(x0, x1);
  float h0, h1;
  DecF16::unpack(hi, h0, h1);
  lo = DecF16::pack(x0 - h0, x1 - h1);
}

/// The raw bytes of one chunk of a wide decoder (U super-blocks, rows g and
/// g + 8 of each stream), between its loads and its arithmetic.
template <class C> struct WideRaw {
  typename C::Dec0::Raw a0[C::kUnroll], b0[C::kUnroll];
  typename C::Dec1::Raw a1[C::kUnroll], b1[C::kUnroll];
};

/// Every load of chunk c of a wide decoder.
template <class C>
static __device__ __forceinline__ void gemvLoadWide(long long c, const unsigned char *r0a,
                                                    const unsigned char *r0b,
                                                    const unsigned char *r1a,
                                                    const unsigned char *r1b, int t,
                                                    WideRaw<C> &w) {
#pragma unroll
  for (int u = 0; u < C::kUnroll; ++u) {
    const long long sb = c * C::kUnroll + u;
    C::Dec0::load(r0a, sb, t, w.a0[u]);
    C::Dec0::load(r0b, sb, t, w.b0[u]);
    if constexpr (C::Epi::kStreams == 2) {
      C::Dec1::load(r1a, sb, t, w.a1[u]);
      C::Dec1::load(r1b, sb, t, w.b1[u]);
    }
  }
}

/// The arithmetic of chunk c of a wide decoder (Dec::kWide: a k-step is
/// Dec::kStepElems weights, U steps per chunk; K is whole steps): per run of
/// 16 consecutive k (Dec::runK0) the 16 x values of that run (as f16, or
/// split hi + lo) and its 4 words x (1 or 2) mmas. Lane (g, t)'s k-slots
/// {2t, 2t+1 | 2t+8, 2t+9} of an mma hold the weights (l, l + 2 | l + 1,
/// l + 3) of one word, for rows g and g + 8, and x of token g at the same k:
/// the same sums, in another order of k.
template <class C>
static __device__ __forceinline__ void gemvMathWide(const GemvArgs<C> &a, long long c,
                                                    const WideRaw<C> &w,
                                                    const typename C::X *xr, bool xLive, int t,
                                                    const float *rs, float (&acc)[2][4]) {
  constexpr int S = C::Epi::kStreams, U = C::kUnroll;
  using D0 = typename C::Dec0;
  using D1 = typename C::Dec1;
  static_assert(D0::kRuns == D1::kRuns && D0::kStepElems == D1::kStepElems,
                "both streams walk K alike");
#pragma unroll
  for (int u = 0; u < U; ++u) {
    const long long sb = c * U + u;
    typename D0::Prep pa0, pb0;
    typename D1::Prep pa1, pb1;
    D0::prepare(w.a0[u], t, pa0);
    D0::prepare(w.b0[u], t, pb0);
    if constexpr (S == 2) {
      D1::prepare(w.a1[u], t, pa1);
      D1::prepare(w.b1[u], t, pb1);
    }
#pragma unroll
    for (int r = 0; r < D0::kRuns; ++r) {
      const int ws = D0::wordSetOf(r), j = D0::scaleOf(r);
      const bool hb = r & 1;
      const long long k0 = D0::runK0(sb, t, r);
      float xv[16], x8[2][8];
      if (xLive) {
        gemvLoadX<C, false>(xr, k0, x8[0]);
        gemvLoadX<C, false>(xr, k0 + 8, x8[1]);
      }
#pragma unroll
      for (int e = 0; e < 16; ++e)
        xv[e] = xLive ? x8[e >> 3][e & 7] : 0.0f;
      if (xLive)
        gemvNormX<C, false, 16>(a, k0, C::kNorm ? rs[(threadIdx.x & 31) >> 2] : 1.0f, xv);
#pragma unroll
      for (int q = 0; q < 4; ++q) {
        unsigned h0, l0 = 0, h1, l1 = 0;
        if constexpr (C::kXHalf) {
          h0 = DecF16::pack(xv[4 * q], xv[4 * q + 2]);
          h1 = DecF16::pack(xv[4 * q + 1], xv[4 * q + 3]);
        } else {
          fg_split_pair(xv[4 * q], xv[4 * q + 2], h0, l0);
          fg_split_pair(xv[4 * q + 1], xv[4 * q + 3], h1, l1);
        }
        unsigned a02, a13, b02, b13;
        D0::pairs(pa0.q[ws][q], hb, pa0.sc2[j], pa0.mn2[j], a02, a13);
        D0::pairs(pb0.q[ws][q], hb, pb0.sc2[j], pb0.mn2[j], b02, b13);
        const unsigned f0[4] = {a02, b02, a13, b13};
        D0::mma(acc[0], f0, h0, h1);
        if constexpr (!C::kXHalf)
          D0::mma(acc[0], f0, l0, l1);
        if constexpr (S == 2) {
          D1::pairs(pa1.q[ws][q], hb, pa1.sc2[j], pa1.mn2[j], a02, a13);
          D1::pairs(pb1.q[ws][q], hb, pb1.sc2[j], pb1.mn2[j], b02, b13);
          const unsigned f1[4] = {a02, b02, a13, b13};
          D1::mma(acc[1], f1, h0, h1);
          if constexpr (!C::kXHalf)
            D1::mma(acc[1], f1, l0, l1);
        }
      }
    }
  }
}

/// The arithmetic of chunk c of DecQ4_KS (scales after the mma): per
/// sub-block j = 2c + hb, this lane's 8 x values (k0 = 256·sb + 64c + 32hb +
/// 8t) as 4 f16 pairs, X = Σ x by an mma with an A of ones, T = Σ (1024 + q)
/// x by 2 mmas per stream into a fresh accumulator, then acc += S·T − M'·X
/// with S and M' of rows g and g + 8 from the lane (g, c) that decoded them.
template <class C>
static __device__ __forceinline__ void gemvMathWideScaled(const GemvArgs<C> &a, long long c0,
                                                          const WideRaw<C> &w,
                                                          const typename C::X *xr, bool xLive,
                                                          int t, const float *rs,
                                                          float (&acc)[2][4]) {
  constexpr int S = C::Epi::kStreams, U = C::kUnroll;
  using D0 = typename C::Dec0;
  using D1 = typename C::Dec1;
  static_assert(D1::kScaledAfter, "both streams scale after the mma");
  constexpr unsigned kOnes = 0x3C003C00u; // 1.0 in both halves
  const unsigned ones[4] = {kOnes, kOnes, kOnes, kOnes};
  const int lane = threadIdx.x & 31;
#pragma unroll
  for (int u = 0; u < U; ++u) {
    const long long sb = c0 * U + u;
    float sa[2][2], ma[2][2], sbb[2][2], mb[2][2]; // [stream][sub-block 2t + i]
    D0::scalesF(w.a0[u], t, sa[0], ma[0]);
    D0::scalesF(w.b0[u], t, sbb[0], mb[0]);
    if constexpr (S == 2) {
      D1::scalesF(w.a1[u], t, sa[1], ma[1]);
      D1::scalesF(w.b1[u], t, sbb[1], mb[1]);
    }
#pragma unroll
    for (int c = 0; c < 4; ++c) {
      const int src = (lane & ~3) | c; // lane (g, c) holds sub-blocks 2c, 2c + 1
#pragma unroll
      for (int hb = 0; hb < 2; ++hb) {
        const long long k0 = 256 * sb + 64 * c + 32 * hb + 8 * t;
        float xv[8];
        if (xLive) {
          gemvLoadX<C, false>(xr, k0, xv);
          gemvNormX<C, false, 8>(a, k0, C::kNorm ? rs[lane >> 2] : 1.0f, xv);
        } else {
#pragma unroll
          for (int e = 0; e < 8; ++e)
            xv[e] = 0.0f;
        }
        const unsigned x02 = DecF16::pack(xv[0], xv[2]), x13 = DecF16::pack(xv[1], xv[3]);
        const unsigned x46 = DecF16::pack(xv[4], xv[6]), x57 = DecF16::pack(xv[5], xv[7]);
        float xs[4] = {0.0f, 0.0f, 0.0f, 0.0f};
        DecF16::mma(xs, ones, x02, x13);
        DecF16::mma(xs, ones, x46, x57);
#pragma unroll
        for (int s = 0; s < S; ++s) {
          const uint2 qa = s ? w.a1[u].q[c] : w.a0[u].q[c], qb = s ? w.b1[u].q[c] : w.b0[u].q[c];
          float tt[4] = {0.0f, 0.0f, 0.0f, 0.0f};
          unsigned a02, a13, b02, b13;
          D0::halves(qa.x, hb, a02, a13);
          D0::halves(qb.x, hb, b02, b13);
          const unsigned f0[4] = {a02, b02, a13, b13};
          DecF16::mma(tt, f0, x02, x13);
          D0::halves(qa.y, hb, a02, a13);
          D0::halves(qb.y, hb, b02, b13);
          const unsigned f1[4] = {a02, b02, a13, b13};
          DecF16::mma(tt, f1, x46, x57);
          const float sA = __shfl_sync(0xffffffffu, sa[s][hb], src);
          const float mA = __shfl_sync(0xffffffffu, ma[s][hb], src);
          const float sB = __shfl_sync(0xffffffffu, sbb[s][hb], src);
          const float mB = __shfl_sync(0xffffffffu, mb[s][hb], src);
          acc[s][0] += fmaf(sA, tt[0], -mA * xs[0]);
          acc[s][1] += fmaf(sA, tt[1], -mA * xs[1]);
          acc[s][2] += fmaf(sB, tt[2], -mB * xs[2]);
          acc[s][3] += fmaf(sB, tt[3], -mB * xs[3]);
        }
      }
    }
  }
}

/// A warp's chunks c = warp, warp + W, ... of a wide decoder. Cfg::kPrefetch:
/// the next chunk's loads are issued before this chunk's arithmetic (its
/// registers twice), so the weight stream never waits on the math.
template <class C>
static __device__ __forceinline__ void gemvWide(const GemvArgs<C> &a, int warp,
                                                const unsigned char *r0a, const unsigned char *r0b,
                                                const unsigned char *r1a, const unsigned char *r1b,
                                                const typename C::X *xr, bool xLive, int t,
                                                const float *rs, float (&acc)[2][4]) {
  constexpr long long kChunks = C::K / C::Dec0::kStepElems / C::kUnroll;
  constexpr int W = C::kWarps;
  if constexpr (C::kPrefetch) {
    if (warp >= kChunks)
      return;
    WideRaw<C> cur, next;
    gemvLoadWide<C>(warp, r0a, r0b, r1a, r1b, t, cur);
    for (long long c = warp; c < kChunks; c += W) {
      if (c + W < kChunks)
        gemvLoadWide<C>(c + W, r0a, r0b, r1a, r1b, t, next);
      if constexpr (C::Dec0::kScaledAfter)
        gemvMathWideScaled<C>(a, c, cur, xr, xLive, t, rs, acc);
      else
        gemvMathWide<C>(a, c, cur, xr, xLive, t, rs, acc);
      cur = next;
    }
  } else {
    for (long long c = warp; c < kChunks; c += W) {
      WideRaw<C> cur;
      gemvLoadWide<C>(c, r0a, r0b, r1a, r1b, t, cur);
      if constexpr (C::Dec0::kScaledAfter)
        gemvMathWideScaled<C>(a, c, cur, xr, xLive, t, rs, acc);
      else
        gemvMathWide<C>(a, c, cur, xr, xLive, t, rs, acc);
    }
  }
}

/// Tensor cores: the block of output tile `bx` (16 rows; blockIdx.x for a
/// plain GEMV, the block's tile within its segment for gemvMulti).
template <class C, class Tail = GemvNoTail>
static __device__ __forceinline__ void gemvTensorCores(const GemvArgs<C> &a, long long bx,
                                                       const Tail &tail = {}) {
  static_assert(C::M >= 1, "at least one row of x");
  static_assert(C::Dec0::kMma == C::Dec1::kMma, "both streams on the same unit");
  constexpr int S = C::Epi::kStreams, W = C::kWarps, U = C::kUnroll;
  constexpr long long kSteps = (C::K + 31) / 32, kChunks = (kSteps + U - 1) / U;
  constexpr bool kExact = C::K % (32 * U) == 0; // no chunk needs a bounds check
  __shared__ GemvShared<C> sh;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, g = lane >> 2, t = lane & 3;
  const long long n0 = bx * 16;
  const int m0 = 8 * blockIdx.z; // this block's group of (up to) 8 rows of x
  const long long ra = min(n0 + g, C::N - 1), rb = min(n0 + g + 8, C::N - 1);
  static_assert(!C::kNorm || !C::kExpert, "the norm prologue is dense only");
  __shared__ float rs[8];
  if constexpr (C::kNorm)
    gemvNormScales<C>(a, m0, rs);

  for (long long pr = blockIdx.y; pr < C::kPairs; pr += gridDim.y) {
    // The weight matrix (expert) and x row of this pair.
    long long e = 0, xoff = 0;
    bool valid = true;
    if constexpr (C::kExpert) {
      const long long tok = pr / C::kk, j = pr % C::kk;
      e = (long long)a.ids[C::ids_off + tok * C::ids_st + j * C::ids_sj];
      valid = e >= 0 && e < C::E;
      if (!valid)
        e = 0;
      xoff = C::x_off + tok * C::x_st + j * C::x_sj;
    }
    // This thread's (row, m) of the store below, its extras loaded now
    // (Cfg::kEarlyExtras, where the block's threads cover the tile's 16 x 8
    // outputs once), before the arithmetic: the store after the barrier
    // then waits on no load.
    constexpr bool kEarly = C::kEarlyExtras && (C::kBias || C::kRes) && 32 * W >= 16 * 8;
    GemvExtras early;
    if constexpr (kEarly) {
      const int o = threadIdx.x, row = o >> 3, m = o & 7;
      const long long n = n0 + row;
      if (o < 16 * 8 && (C::kExpert ? m < 1 : m0 + m < C::M) && n < C::N)
        early = gemvExtras<C>(a, e, valid, m0 + m, n);
    }
    const typename C::Dec0::T *r0a = a.w0 + C::w0_off + e * C::w0_es + ra * C::w0_ld;
    const typename C::Dec0::T *r0b = a.w0 + C::w0_off + e * C::w0_es + rb * C::w0_ld;
    const typename C::Dec1::T *r1a = a.w1, *r1b = a.w1;
    if constexpr (S == 2) {
      r1a = a.w1 + C::w1_off + e * C::w1_es + ra * C::w1_ld;
      r1b = a.w1 + C::w1_off + e * C::w1_es + rb * C::w1_ld;
    }
    // The tensor-core path gives lane (g, t) the x row of token g (the CUDA-core
    // path reads every token's row; expert-indexed: the pair's row).
    const bool xLive = C::kExpert ? g == 0 : m0 + g < C::M;
    const typename C::X *xr = a.x + (C::kExpert ? xoff : C::xRow(xLive ? m0 + g : 0));

    float acc[2][4] = {};
    float fac[2][2][8] = {};
    if (valid) {
      if constexpr (C::Dec0::kWide) {
        static_assert(C::Dec1::kWide && C::K % C::Dec0::kStepElems == 0 &&
                          (C::K / C::Dec0::kStepElems) % U == 0,
                      "wide decoders: both streams, whole steps, whole chunks");
        gemvWide<C>(a, warp, r0a, r0b, r1a, r1b, xr, xLive, t, rs, acc);
      } else {
        constexpr long long kFull = kExact ? kChunks : kChunks - 1;
        for (long long c = warp; c < kFull; c += W)
          gemvChunk<C, false>(a, c, r0a, r0b, r1a, r1b, xr, xLive, t, m0, rs, acc, fac);
        if (!kExact && (kChunks - 1) % W == warp)
          gemvChunk<C, true>(a, kChunks - 1, r0a, r0b, r1a, r1b, xr, xLive, t, m0, rs, acc, fac);
      }
    }

    // This warp's partial sums of the 16 x 8 tile into shared memory.
    if constexpr (C::Dec0::kMma) {
#pragma unroll
      for (int s = 0; s < S; ++s) {
        sh.part[warp][s][g][2 * t] = acc[s][0];
        sh.part[warp][s][g][2 * t + 1] = acc[s][1];
        sh.part[warp][s][g + 8][2 * t] = acc[s][2];
        sh.part[warp][s][g + 8][2 * t + 1] = acc[s][3];
      }
    } else {
#pragma unroll
      for (int s = 0; s < S; ++s)
#pragma unroll
        for (int h = 0; h < 2; ++h)
#pragma unroll
          for (int m = 0; m < (C::M < 8 ? C::M : 8); ++m) {
            float v = fac[s][h][m];
            v += __shfl_xor_sync(0xffffffffu, v, 1);
            v += __shfl_xor_sync(0xffffffffu, v, 2);
            if (t == 0)
              sh.part[warp][s][g + 8 * h][m] = v;
          }
    }
    __syncthreads();

    // Sum over warps in order, bias, epilogue, store.
    auto outAt = [&](int row, int m, const GemvExtras &x) {
      float v[2] = {0.0f, 0.0f};
#pragma unroll
      for (int s = 0; s < S; ++s)
        for (int w = 0; w < W; ++w)
          v[s] += sh.part[w][s][row][m];
      return gemvOut<C>(v, x, valid);
    };
    for (int o = threadIdx.x; o < 16 * 8; o += 32 * W) {
      const int row = o >> 3, m = o & 7;
      const long long n = n0 + row;
      if ((C::kExpert ? m < 1 : m0 + m < C::M) && n < C::N) {
        const GemvExtras x = kEarly ? early : gemvExtras<C>(a, e, valid, m0 + m, n);
        const float out = outAt(row, m, x);
        a.y[(C::kExpert ? pr : m0 + m) * C::N + n] = out;
        gemvTailPut<C>(tail, m0 + m, n, out, [&] {
          return outAt(row ^ 1, m, gemvExtras<C>(a, e, valid, m0 + m, n ^ 1));
        });
      }
    }
    __syncthreads();
  }
  gemvStoreNormRow<C>(a, bx, m0, [&](int m) { return rs[m]; });
}

// --- lanes over K (CUDA cores) ----------------------------------------------------

/// kPerLoad consecutive weights of one row: vectorised, `row` already points
/// at this lane's first weight and `k` is the step's first k (the weights are
/// k + lane·P ..); the strided fallback reads element (kk + e) · KS of the
/// row start. Zeros past K.
template <class Dec, long long K, long long KS, bool Vec, bool Guard>
static __device__ __forceinline__ uint4 gemvLoadLane(const typename Dec::T *row, long long k,
                                                     long long kk) {
  using T = typename Dec::T;
  constexpr int P = Dec::kPerLoad;
  if (Vec)
    return (!Guard || kk < K) ? fg_load_stream(row + k) : make_uint4(0, 0, 0, 0);
  union {
    T v[P];
    uint4 u;
  } r;
#pragma unroll
  for (int e = 0; e < P; ++e)
    r.v[e] = (!Guard || kk + e < K) ? row[(kk + e) * KS] : T{};
  return r.u;
}

/// x[kk .. kk + P - 1] of one x row as floats (zeros past K); vectorised,
/// `xr` already points at this lane's first value and `k` is the step's k.
template <class C, int P, bool Guard>
static __device__ __forceinline__ void gemvLoadXLane(const typename C::X *xr, long long k,
                                                     long long kk, float (&v)[P]) {
  if (C::kXVec) {
#pragma unroll
    for (int q = 0; q < P / 4; ++q) {
      float4 t = (!Guard || kk < C::K) ? __ldg(reinterpret_cast<const float4 *>(xr + k) + q)
                                       : make_float4(0.f, 0.f, 0.f, 0.f);
      v[4 * q] = t.x, v[4 * q + 1] = t.y, v[4 * q + 2] = t.z, v[4 * q + 3] = t.w;
    }
    return;
  }
#pragma unroll
  for (int e = 0; e < P; ++e)
    v[e] = (!Guard || kk + e < C::K) ? fg_to_f(xr[(kk + e) * C::x_ks]) : 0.0f;
}

/// One chunk (kUnroll steps) of a warp: every weight load first (rows x
/// steps x streams, 16 bytes each, 512 contiguous bytes of one row per warp
/// instruction), then the FMAs against x. Pointers already include this
/// lane's offset; `kc` is the chunk's first k, `kl` this lane's k in a step.
template <class C, bool Guard, int MG>
static __device__ __forceinline__ void gemvLanesChunk(
    long long kc, int kl, const typename C::Dec0::T *const (&p0)[C::kRows],
    const typename C::Dec1::T *const (&p1)[C::kRows], const typename C::X *const (&px)[MG],
    const GemvArgs<C> &a, float (&ss)[MG], float (&acc)[C::Epi::kStreams][C::kRows][MG]) {
  using D0 = typename C::Dec0;
  using D1 = typename C::Dec1;
  constexpr int S = C::Epi::kStreams, U = C::kUnroll, R = C::kRows, P = D0::kPerLoad;
  constexpr int kStep = 32 * P; // weights of one row per warp instruction
  static_assert(D0::kPerLoad == D1::kPerLoad, "streams of one width");
  uint4 w0[U][R], w1[U][S == 2 ? R : 1];
#pragma unroll
  for (int u = 0; u < U; ++u) {
    const long long k = kc + u * kStep; // this lane reads k + kl .. k + kl + P - 1
#pragma unroll
    for (int r = 0; r < R; ++r) {
      w0[u][r] = gemvLoadLane<D0, C::K, C::w0_ks, C::kWVec, Guard>(p0[r], k, k + kl);
      if constexpr (S == 2)
        w1[u][r] = gemvLoadLane<D1, C::K, C::w1_ks, C::kWVec, Guard>(p1[r], k, k + kl);
    }
  }
#pragma unroll
  for (int u = 0; u < U; ++u) {
    const long long k = kc + u * kStep;
    float xv[MG][P];
#pragma unroll
    for (int m = 0; m < MG; ++m) {
      gemvLoadXLane<C, P, Guard>(px[m], k, k + kl, xv[m]);
      if constexpr (C::kNorm) {
        // The norm on the fly: Σx² from the x this lane loads anyway (the
        // block's warps load every k of a row exactly once), x · nw here,
        // rstd in the epilogue (f32 FMAs: no range limit on x · nw).
#pragma unroll
        for (int e = 0; e < P; ++e)
          ss[m] = fmaf(xv[m][e], xv[m][e], ss[m]);
        gemvNormX<C, Guard, P>(a, k + kl, 1.0f, xv[m]);
      }
    }
#pragma unroll
    for (int r = 0; r < R; ++r) {
      float wf[P];
      D0::decode(w0[u][r], wf);
#pragma unroll
      for (int m = 0; m < MG; ++m)
#pragma unroll
        for (int e = 0; e < P; ++e)
          acc[0][r][m] = fmaf(wf[e], xv[m][e], acc[0][r][m]);
      if constexpr (S == 2) {
        D1::decode(w1[u][r], wf);
#pragma unroll
        for (int m = 0; m < MG; ++m)
#pragma unroll
          for (int e = 0; e < P; ++e)
            acc[S - 1][r][m] = fmaf(wf[e], xv[m][e], acc[S - 1][r][m]);
      }
    }
  }
}

/// Lanes over K: a block owns kRows output rows (blockIdx.x) of one pair
/// (blockIdx.y) and one group of 8 x rows (blockIdx.z); its warps split K in
/// chunks of kUnroll steps of 32 x kPerLoad weights. Sums: warp shuffles,
/// then shared memory in warp order (deterministic).
template <class C, class Tail = GemvNoTail>
static __device__ __forceinline__ void gemvLanes(const GemvArgs<C> &a, long long bx,
                                                 const Tail &tail = {}) {
  constexpr int S = C::Epi::kStreams, W = C::kWarps, U = C::kUnroll, R = C::kRows;
  constexpr int P = C::Dec0::kPerLoad;
  constexpr int MG = C::kExpert ? 1 : (C::M < 8 ? C::M : 8);
  constexpr long long kSteps = (C::K + 32 * P - 1) / (32 * P);
  constexpr long long kChunks = (kSteps + U - 1) / U;
  constexpr bool kExact = C::K % (32 * P * U) == 0;
  __shared__ float part[W][S][R][MG];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, kl = lane * P;
  const long long n0 = bx * R;
  const int m0 = 8 * blockIdx.z;
  static_assert(!C::kNorm || !C::kExpert, "the norm prologue is dense only");
  __shared__ float ssPart[W][MG]; // Cfg::kNorm: each warp's Σx² per row of x

  for (long long pr = blockIdx.y; pr < C::kPairs; pr += gridDim.y) {
    long long e = 0, xoff = 0;
    bool valid = true;
    if constexpr (C::kExpert) {
      const long long tok = pr / C::kk, j = pr % C::kk;
      e = (long long)a.ids[C::ids_off + tok * C::ids_st + j * C::ids_sj];
      valid = e >= 0 && e < C::E;
      if (!valid)
        e = 0;
      xoff = C::x_off + tok * C::x_st + j * C::x_sj;
    }
    // This thread's (row, m) of the store below, its extras loaded now
    // (Cfg::kEarlyExtras, where the block's threads cover the R x MG
    // outputs once), before the arithmetic.
    constexpr bool kEarly = C::kEarlyExtras && (C::kBias || C::kRes) && 32 * W >= R * MG;
    GemvExtras early;
    if constexpr (kEarly) {
      const int o = threadIdx.x, r = o / MG, m = o % MG;
      if (o < R * MG && (C::kExpert || m0 + m < C::M) && n0 + r < C::N)
        early = gemvExtras<C>(a, e, valid, m0 + m, n0 + r);
    }
    // Row and x pointers with this lane's offset folded in (vectorised rows
    // are unit-stride; the strided fallback offsets by k · stride itself).
    constexpr long long kLaneW0 = C::kWVec ? 1 : 0, kLaneX = C::kXVec ? 1 : 0;
    const typename C::Dec0::T *p0[R];
    const typename C::Dec1::T *p1[R];
#pragma unroll
    for (int r = 0; r < R; ++r) {
      const long long n = min(n0 + r, C::N - 1);
      p0[r] = a.w0 + C::w0_off + e * C::w0_es + n * C::w0_ld + kLaneW0 * kl;
      p1[r] = S == 2 ? a.w1 + C::w1_off + e * C::w1_es + n * C::w1_ld + kLaneW0 * kl : a.w1;
    }
    const typename C::X *px[MG];
#pragma unroll
    for (int m = 0; m < MG; ++m)
      px[m] = a.x + (C::kExpert ? xoff : C::xRow(m0 + m < C::M ? m0 + m : 0)) + kLaneX * kl;

    float acc[S][R][MG];
#pragma unroll
    for (int s = 0; s < S; ++s)
#pragma unroll
      for (int r = 0; r < R; ++r)
#pragma unroll
        for (int m = 0; m < MG; ++m)
          acc[s][r][m] = 0.0f;
    float ss[MG];
#pragma unroll
    for (int m = 0; m < MG; ++m)
      ss[m] = 0.0f;
    if (valid) {
      constexpr long long kFull = kExact ? kChunks : kChunks - 1;
      for (long long c = warp; c < kFull; c += W)
        gemvLanesChunk<C, false, MG>(c * U * 32 * P, kl, p0, p1, px, a, ss, acc);
      if (!kExact && (kChunks - 1) % W == warp)
        gemvLanesChunk<C, true, MG>((kChunks - 1) * U * 32 * P, kl, p0, p1, px, a, ss, acc);
    }
    if constexpr (C::kNorm) {
#pragma unroll
      for (int m = 0; m < MG; ++m) {
        const float v = fg_warp_sum(ss[m]);
        if (lane == 0)
          ssPart[warp][m] = v;
      }
    }
#pragma unroll
    for (int s = 0; s < S; ++s)
#pragma unroll
      for (int r = 0; r < R; ++r)
#pragma unroll
        for (int m = 0; m < MG; ++m) {
          const float v = fg_warp_sum(acc[s][r][m]);
          if (lane == 0)
            part[warp][s][r][m] = v;
        }
    __syncthreads();
    auto outAt = [&](int r, int m, const GemvExtras &x) {
      float v[2] = {0.0f, 0.0f};
#pragma unroll
      for (int s = 0; s < S; ++s)
        for (int w = 0; w < W; ++w)
          v[s] += part[w][s][r][m];
      if constexpr (C::kNorm) {
        float sum = 0.0f;
        for (int w = 0; w < W; ++w)
          sum += ssPart[w][m];
        const float rstd = gemvRstd<C>(sum);
#pragma unroll
        for (int s = 0; s < S; ++s)
          v[s] *= rstd;
      }
      return gemvOut<C>(v, x, valid);
    };
    for (int o = threadIdx.x; o < R * MG; o += 32 * W) {
      const int r = o / MG, m = o % MG;
      const long long n = n0 + r;
      if ((C::kExpert || m0 + m < C::M) && n < C::N) {
        const GemvExtras x = kEarly ? early : gemvExtras<C>(a, e, valid, m0 + m, n);
        const float out = outAt(r, m, x);
        a.y[(C::kExpert ? pr : m0 + m) * C::N + n] = out;
        static_assert(!Tail::kOn || R % 2 == 0, "a store tail's rope pairs within a tile");
        gemvTailPut<C>(tail, m0 + m, n, out, [&] {
          return outAt(r ^ 1, m, gemvExtras<C>(a, e, valid, m0 + m, n ^ 1));
        });
      }
    }
    __syncthreads();
  }
  // ssPart holds the last pair's sums (dense: the only one).
  gemvStoreNormRow<C>(a, bx, m0, [&](int m) {
    float sum = 0.0f;
    for (int w = 0; w < W; ++w)
      sum += ssPart[w][m];
    return gemvRstd<C>(sum);
  });
}

// --- the programmatic-launch prologue ----------------------------------------------

/// Runs before fg_pdl_begin (the entry's prologue), possibly while the kernel
/// before this one still streams its own bytes: the first C::kPfBytes of each
/// weight row of output tile `bx` (both streams) are prefetched into L2, so
/// the weight stream of this launch starts before its predecessor's tail has
/// drained and its first loads hit L2 (programmatic dependent launch
/// schedules this kernel once every block of the previous one has passed its
/// own wait). Only the first C::kPfBlocks tiles (the blocks that can be
/// resident while the predecessor runs) and the first group of x rows do it,
/// and the per-row prefix is sized by the emitter so that one launch
/// prefetches at most EmitOptions::pdlPrefetchBytes. Dense weights only: an
/// expert-indexed launch learns its experts from the previous kernels.
template <class C>
static __device__ __forceinline__ void gemvPrefetch(const GemvArgs<C> &a, long long bx) {
  if constexpr (C::kPfBytes > 0 && !C::kExpert) {
    if (bx >= C::kPfBlocks || blockIdx.z != 0)
      return;
    constexpr int R = C::kTensorCores ? 16 : C::kRows, S = C::Epi::kStreams;
    constexpr int kLines = (int)((C::kPfBytes + 127) / 128);
    for (int i = threadIdx.x; i < S * R * kLines; i += blockDim.x) {
      const int line = i % kLines, r = (i / kLines) % R, st = i / (kLines * R);
      const long long n = bx * R + r;
      if (n >= C::N)
        continue;
      const char *row =
          st == 0 ? reinterpret_cast<const char *>(a.w0 + C::w0_off + n * C::w0_ld)
                  : reinterpret_cast<const char *>(a.w1 + C::w1_off + n * C::w1_ld);
      fg_prefetch_l2(row + 128LL * line); // line < ⌈kPfBytes / 128⌉: inside the row
    }
  }
}

/// Output tile `bx` of the GEMV: the work split the emitter chose (Cfg::kTensorCores).
template <class C, class Tail = GemvNoTail>
static __device__ __forceinline__ void gemvTile(const GemvArgs<C> &a, long long bx,
                                                const Tail &tail = {}) {
  if constexpr (C::kTensorCores)
    gemvTensorCores<C>(a, bx, tail);
  else
    gemvLanes<C>(a, bx, tail);
}

/// The GEMV: one output tile per blockIdx.x (and its store tail, if any).
template <class C, class Tail = GemvNoTail>
static __device__ __forceinline__ void gemv(const GemvArgs<C> &a, const Tail &tail = {}) {
  gemvTile<C>(a, blockIdx.x, tail);
}

// --- several weights over one x (fused.matmul_multi) ------------------------------

/// gemvPrefetch for the segment of this block's tile (every segment's Cfg
/// carries the launch's kPfBlocks and its own row prefix).
template <class C>
static __device__ __forceinline__ void gemvMultiPrefetch(const GemvArgs<typename C::S0> &a0,
                                                         const GemvArgs<typename C::S1> &a1,
                                                         const GemvArgs<typename C::S2> &a2) {
  const long long bx = blockIdx.x;
  if (bx >= C::S0::kPfBlocks) // the launch's first tiles, whatever their segment
    return;
  if (bx < C::kTiles0)
    gemvPrefetch<typename C::S0>(a0, bx);
  else if (C::kSegs == 2 || bx < C::kTiles0 + C::kTiles1)
    gemvPrefetch<typename C::S1>(a1, bx - C::kTiles0);
  else if constexpr (C::kSegs == 3)
    gemvPrefetch<typename C::S2>(a2, bx - C::kTiles0 - C::kTiles1);
}

/// Segments 0 .. C::kSegs - 1 (2 or 3: the q, k and v projections) in one
/// launch. Each is a complete one-stream Cfg (C::S0, C::S1, C::S2: its N,
/// its weight's layout and decoder; all share x, M, K and the work split,
/// so one block size serves them) and owns consecutive output tiles of
/// blockIdx.x: segment 0 the first C::kTiles0, segment 1 the next
/// C::kTiles1, segment 2 the rest. A block runs the plain GEMV of its
/// segment's tile over that segment's weight, read where it lives, into that
/// segment's result: per block, exactly what a matmul's launch does (bx is
/// uniform over the block, so its barriers are too). Each segment's shared
/// memory is its own (static, at most 3 x 8 KiB on the tensor cores).
/// T0 .. T2: each segment's store tail (GemvTails.cpp; GemvNoTail where it
/// has none), called with the elements of that segment's result.
template <class C, class T0 = GemvNoTail, class T1 = GemvNoTail, class T2 = GemvNoTail>
static __device__ __forceinline__ void gemvMulti(const GemvArgs<typename C::S0> &a0,
                                                 const GemvArgs<typename C::S1> &a1,
                                                 const GemvArgs<typename C::S2> &a2,
                                                 const T0 &t0 = {}, const T1 &t1 = {},
                                                 const T2 &t2 = {}) {
  static_assert(C::kSegs == 2 || C::kSegs == 3, "2 or 3 segments");
  static_assert(C::S0::kWarps == C::S1::kWarps && C::S0::kWarps == C::S2::kWarps,
                "one block size for every segment");
  static_assert(C::kSegs == 3 || !T2::kOn, "a two-segment launch has no third tail");
  const long long bx = blockIdx.x;
  if (bx < C::kTiles0) {
    gemvTile<typename C::S0>(a0, bx, t0);
    return;
  }
  if (C::kSegs == 2 || bx < C::kTiles0 + C::kTiles1) {
    gemvTile<typename C::S1>(a1, bx - C::kTiles0, t1);
    return;
  }
  if constexpr (C::kSegs == 3)
    gemvTile<typename C::S2>(a2, bx - C::kTiles0 - C::kTiles1, t2);
}

} // namespace fg
