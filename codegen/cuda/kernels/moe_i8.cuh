//===- moe_i8.cuh - prefill expert matmuls on integer tensor cores ---------===//
//
// The grouped expert GEMM of moe.cuh (same routing, tile table and
// un-permuting store) for q4_K, q5_K, q6_K, q8_0 and q4_0 experts (C::I8:
// the block-type policies below), with x quantised to int8 once and the
// weights fed to `mma.m16n8k32` (s8 x; u8 or s8 weights; s32 sums) as they
// lie in the file: the f16 form decodes every weight to f16, stores it to a
// shared tile and reads it back by ldmatrix, ~22 instructions a weight (the
// thirty-first session's Nsight Compute: bound by issue, at 10-13 % of the
// read bandwidth), where here 4 weights cost an AND (or a shift and an AND;
// q5_K's fifth bit an OR more, q4_0's and q6_K's offsets a byte subtraction).
//
// Numerics: those of the DP4A GEMV (gemv_dp4a.cuh) and of the reference's
// ActQuant::Int8 (runtime/reference/Ops.cpp matmulRows). x is quantised per
// 32 (dx = max|x| / 127, xq = rint(x · 127 / max|x|)), and over sub-block j
// of a 256-weight step (32 weights, one mma's k), for q4_K / q5_K
//     Σ w·x = d·sc_j · dx_j · Σ q·xq  −  dmin·m_j · Σ x,
// the integer sum exact, the min term against the exact Σ x; d·sc_j and
// dmin·m_j are exact f32 products (11 and 6 significant bits). q8_0 and q4_0:
// d · dx · Σ q·xq (q4_0's q − 8); q6_K per 16 weights d·sc · dx · Σ (q − 32)·xq.
//
// Launches:
//   moeRouteI8  block 0 routes (moeRoute); blocks 1.. quantise x's rows
//               (T · X of them: a token's row once for gate|up, a pair's for
//               down), 8 lanes a 32-block: xq (int8, K a row) and {dx, Σ x}
//               (float2, K / 32 a row) into the scratch after the
//               permutation (Cfg::kXqOff, kXsOff, bytes).
//   moeGemmI8   grid (⌈N / BN⌉, max tiles), NT threads: warp w takes
//               columns nw = 8·NJ·w .. + 8·NJ − 1 of the block's BN, every
//               stream, and every live m tile of the tile (16 rows each;
//               m tiles past the tile's rows are skipped). A 256-weight step
//               of the tile's quantised x and of the block's weight rows
//               goes through dynamic shared memory by cp.async, two stages
//               (MoeI8Smem), the next step's copies in flight during this
//               one's mmas.
//
// Fragments (PTX ISA, mma.m16n8k32 with 8-bit types): A row-major 16 × 32,
// register i of lane (g, t) = 4 bytes at row g (+8 for i = 1, 3), k 4t
// (+16 for i = 2, 3); B column-major 32 × 8, register i = column g, k 4t
// (+16 for i = 1); D: rows g, g + 8, columns 2t, 2t + 1. The k order inside
// one mma is free as long as A and B agree, so k = 4t + i (i < 4) is weight
// 8t + i of the sub-block and k = 16 + 4t + i is weight 8t + 4 + i: lane t's
// B registers are then its 8 consecutive weights of the sub-block (q4_K:
// bytes 8t .. 8t + 7 of the 32-byte qs group, low nibbles for sub-block 2c,
// high for 2c + 1) and its A registers bytes 8t .. 8t + 7 of x's 32-block
// (one 8-byte shared load a row). Each lane (g, t) decodes the scale (and
// min) of sub-block g for its two output columns 2t, 2t + 1 once a step; the
// lanes that need sub-block j take them by shuffle from lane 4j + t.
// scripts/moe-i8-lanes*.py model every lane against the dequantised formula.
//
// Needs moe.cuh (MoeArgs, MoeTile, moeRoute) and gemv.cuh (fg_k4_header)
// in front.
//
//===----------------------------------------------------------------------===//

namespace fg {

/// An n-byte cp.async into shared memory (zeros, reading nothing, when `on`
/// is false; `src` must still be an address).
template <int Bytes>
static __device__ __forceinline__ void moeCopy(void *dst, const void *src, bool on) {
  const unsigned to = (unsigned)__cvta_generic_to_shared(dst);
  if constexpr (Bytes == 16)
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(to), "l"(src),
                 "r"(on ? 16 : 0)
                 : "memory");
  else
    asm volatile("cp.async.ca.shared.global [%0], [%1], 8, %2;\n" ::"r"(to), "l"(src),
                 "r"(on ? 8 : 0)
                 : "memory");
}

/// A 4-byte cp.async of the first `n` (0 .. 4) bytes at src (the rest zeros).
static __device__ __forceinline__ void moeCopyWord(void *dst, const void *src, int n) {
  const unsigned to = (unsigned)__cvta_generic_to_shared(dst);
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(to), "l"(src), "r"(n)
               : "memory");
}

template <class C> static __device__ __forceinline__ signed char *moeXq(int *scratch) {
  return reinterpret_cast<signed char *>(scratch) + C::kXqOff;
}
template <class C> static __device__ __forceinline__ float2 *moeXs(int *scratch) {
  return reinterpret_cast<float2 *>(reinterpret_cast<char *>(scratch) + C::kXsOff);
}

/// x's rows quantised per 32 by blocks 1 .. gridDim.x - 1 (`qb` of `nqb`):
/// 8 lanes a 32-block, 4 values a lane; the reference's formula
/// (ir/Quantize.cpp quantizeActivationsInt8) and the DP4A GEMV's order of
/// operations (one f32 division for the inverse, one product a value).
template <class C>
static __device__ __forceinline__ void moeQuantX(const MoeArgs<C> &a, int qb, int nqb) {
  constexpr long long KB = C::K / 32, chunks = C::kXRows * KB;
  signed char *xq = moeXq<C>(a.scratch);
  float2 *xs = moeXs<C>(a.scratch);
  const int sub = threadIdx.x & 7;
  const long long per = (long long)nqb * (blockDim.x / 8);
  // c0 is the same for the whole block, so every lane of a warp reaches the
  // shuffles; lanes past the end compute on zeros and store nothing.
  for (long long c0 = (long long)qb * (blockDim.x / 8); c0 < chunks; c0 += per) {
    const long long c = c0 + threadIdx.x / 8;
    const bool live = c < chunks;
    const long long row = live ? c / KB : 0, b = live ? c % KB : 0;
    const long long tok = row / C::kXRowsPerToken, j = row % C::kXRowsPerToken;
    const typename C::X *xr = a.x + C::x_off + tok * C::x_st + j * C::x_sj;
    float v[4] = {0.0f, 0.0f, 0.0f, 0.0f};
    if constexpr (C::kXVec) { // f32 rows, 16-byte aligned: one load a lane
      if (live) {
        const float4 q = *reinterpret_cast<const float4 *>(xr + 32 * b + 4 * sub);
        v[0] = q.x, v[1] = q.y, v[2] = q.z, v[3] = q.w;
      }
    } else {
#pragma unroll
      for (int i = 0; i < 4; ++i)
        v[i] = live ? fg_to_f(xr[(32 * b + 4 * sub + i) * C::x_ks]) : 0.0f;
    }
    float amax = fmaxf(fmaxf(fabsf(v[0]), fabsf(v[1])), fmaxf(fabsf(v[2]), fabsf(v[3])));
    float s = (v[0] + v[1]) + (v[2] + v[3]);
#pragma unroll
    for (int o = 1; o < 8; o <<= 1) {
      amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, o));
      s += __shfl_xor_sync(0xffffffffu, s, o);
    }
    const float inv = amax > 1e-30f ? 127.0f / amax : 0.0f;
    unsigned word = 0;
#pragma unroll
    for (int i = 0; i < 4; ++i)
      word |= (static_cast<unsigned>(__float2int_rn(v[i] * inv)) & 0xffu) << (8 * i);
    if (live) {
      reinterpret_cast<unsigned *>(xq + row * C::K + 32 * b)[sub] = word;
      if (sub == 0)
        xs[row * KB + b] = make_float2(amax / 127.0f, s);
    }
  }
}

/// The routing launch of the int8 form: block 0 routes, the others quantise x.
template <class C> static __device__ __forceinline__ void moeRouteI8(const MoeArgs<C> &a) {
  if (blockIdx.x == 0)
    moeRoute<C>(a);
  else
    moeQuantX<C>(a, (int)blockIdx.x - 1, (int)gridDim.x - 1);
}

/// f[0..3] = A (s8, 16 × 32) · B (u8, 32 × 8) as f32. The integer sums
/// start from 0x4B400000, so each result read as f32 is 1.5 · 2^23 + the
/// sum, exactly (|sum| ≤ 32 · 15 · 127 < 2^22): one subtraction converts
/// it, where I2F runs at a quarter of the FP32 rate.
/// B signed (s8) or unsigned (u8).
template <bool Signed>
static __device__ __forceinline__ void moeMmaI8(float (&f)[4], const unsigned (&a)[4],
                                                unsigned b0, unsigned b1) {
  int d[4];
  if constexpr (Signed)
    asm("mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32 {%0, %1, %2, %3}, "
        "{%4, %5, %6, %7}, {%8, %9}, {%10, %10, %10, %10};\n"
        : "=r"(d[0]), "=r"(d[1]), "=r"(d[2]), "=r"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1), "r"(0x4B400000));
  else
    asm("mma.sync.aligned.m16n8k32.row.col.s32.s8.u8.s32 {%0, %1, %2, %3}, "
        "{%4, %5, %6, %7}, {%8, %9}, {%10, %10, %10, %10};\n"
        : "=r"(d[0]), "=r"(d[1]), "=r"(d[2]), "=r"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1), "r"(0x4B400000));
#pragma unroll
  for (int i = 0; i < 4; ++i)
    f[i] = __int_as_float(d[i]) - 12582912.0f;
}

/// Sub-block s's scale d·sc and min dmin·m (exact f32 products) of a q4_K
/// super-block from its header h = {d | dmin << 16, scale words 0..2}
/// (fg_k4_header; ggml's get_scale_min_k4, by bytes as fg_k4_scale_min).
/// Zeros from a header of zeros.
static __device__ __forceinline__ void moeK4ScaleMin(const uint4 &h, int s, float &dsc,
                                                     float &dmn) {
  const unsigned dm = h.x, s0 = h.y, s1 = h.z, s2 = h.w;
  const bool lo = s < 4;
  const unsigned scw = lo ? s0 & 0x3F3F3F3Fu : (s2 & 0x0F0F0F0Fu) | ((s0 >> 2) & 0x30303030u);
  const unsigned mw =
      lo ? s1 & 0x3F3F3F3Fu : ((s2 >> 4) & 0x0F0F0F0Fu) | ((s1 >> 2) & 0x30303030u);
  const unsigned sh = 8u * (static_cast<unsigned>(s) & 3u);
  // 0..63 as f32 by the magic exponent (exact): no quarter-rate I2F.
  const float sc = __uint_as_float(0x4B400000u + ((scw >> sh) & 0xFFu)) - 12582912.0f;
  const float mn = __uint_as_float(0x4B400000u + ((mw >> sh) & 0xFFu)) - 12582912.0f;
  dsc = fg_to_f(fg_f16{(unsigned short)(dm & 0xFFFFu)}) * sc;
  dmn = fg_to_f(fg_f16{(unsigned short)(dm >> 16)}) * mn;
}

/// Bytes o .. o + 7 after p (8-byte aligned) in shared memory as two words,
/// o even: one 8-byte load, two 4-byte loads, or (o ≡ 2 mod 4) three and two
/// funnel shifts. `o` is a constant wherever the callers unroll.
static __device__ __forceinline__ uint2 moeLds8(const unsigned char *p, int o) {
  if ((o & 7) == 0)
    return *reinterpret_cast<const uint2 *>(p + o);
  const unsigned *w = reinterpret_cast<const unsigned *>(p + (o & ~3));
  if ((o & 3) == 0)
    return make_uint2(w[0], w[1]);
  return make_uint2(__funnelshift_r(w[0], w[1], 16), __funnelshift_r(w[1], w[2], 16));
}

/// 4 bytes of unsigned v (each < 128) minus `off` each, as signed bytes: no
/// borrow crosses a byte (v + 128 − off stays in 0..255).
static __device__ __forceinline__ unsigned moeBytesMinus(unsigned v, unsigned off) {
  return ((v | 0x80808080u) - off * 0x01010101u) ^ 0x80808080u;
}

/// The block types of the int8 form (C::I8). Each gives, for a 256-weight
/// k-step of a weight row staged in shared memory (kBytes, padded to kRow ≡
/// 32 or 96 mod 128 bytes so that the 8-byte reads of a half warp, rows
/// g .. g + 3 at bytes 8t .., fall on 32 distinct banks):
///   Regs, load(row, t, r)   a lane's bytes of the step (once a step);
///   bits(r, j, t, b0, b1)   its B registers of 32-weight sub-block j: the
///                           values of weights 8t .. 8t + 3 and 8t + 4 ..
///                           8t + 7 of the sub-block, one a byte (the
///                           kernel's k order; kSigned: s8, else u8);
///   scale(row, j, dsc, dmn) sub-block j's scale, and its min (kMin) whose
///                           term dmn·Σ x is subtracted against the exact x.
/// |Σ q·xq| < 2^22 for all of them (the mma's 0x4B400000 bias).
///
/// q4_K: 144 bytes, d, dmin, scales[12], qs[128]; sub-block j is the low
/// (j even) or high nibbles of qs[32(j / 2) ..], w = d·sc·q − dmin·m.
/// q5_K: 176 bytes, q4_K's header, qh[32], qs[128] as q4_K's; bit j of qh[l]
/// is the fifth bit of weight l of sub-block j (q up to 31).
template <bool Q5> struct MoeI8K {
  static constexpr int kBytes = Q5 ? 176 : 144, kRow = Q5 ? 224 : 160, kQs = Q5 ? 48 : 16;
  static constexpr int kParts = 1;
  static constexpr bool kSigned = false, kMin = true, kWords = false;
  struct Regs {
    uint2 q[4], h;
  };
  static __device__ __forceinline__ void load(const unsigned char *row, int, int t, Regs &r) {
#pragma unroll
    for (int c = 0; c < 4; ++c)
      r.q[c] = *reinterpret_cast<const uint2 *>(row + kQs + 32 * c + 8 * t);
    r.h = Q5 ? *reinterpret_cast<const uint2 *>(row + 16 + 8 * t) : make_uint2(0, 0);
  }
  static __device__ __forceinline__ void bits(const Regs &r, int j, int, unsigned &b0,
                                              unsigned &b1) {
    const uint2 w = r.q[j >> 1];
    const int shift = 4 * (j & 1);
    b0 = (w.x >> shift) & 0x0F0F0F0Fu;
    b1 = (w.y >> shift) & 0x0F0F0F0Fu;
    if constexpr (Q5) {
      b0 |= ((r.h.x >> j) & 0x01010101u) << 4;
      b1 |= ((r.h.y >> j) & 0x01010101u) << 4;
    }
  }
  static __device__ __forceinline__ void scale(const unsigned char *row, int, int j, int,
                                               float &dsc, float &dmn) {
    moeK4ScaleMin(*reinterpret_cast<const uint4 *>(row), j, dsc, dmn);
  }
};
using MoeI8Q4K = MoeI8K<false>;
using MoeI8Q5K = MoeI8K<true>;

/// q8_0: 8 blocks of 34 bytes (f16 d, int8 qs[32]) a step, w = d·q.
struct MoeI8Q8_0 {
  static constexpr int kBytes = 272, kRow = 288, kParts = 1;
  static constexpr bool kSigned = true, kMin = false, kWords = false;
  struct Regs {
    uint2 q[8];
  };
  static __device__ __forceinline__ void load(const unsigned char *row, int, int t, Regs &r) {
#pragma unroll
    for (int j = 0; j < 8; ++j)
      r.q[j] = moeLds8(row + 8 * t, 34 * j + 2);
  }
  static __device__ __forceinline__ void bits(const Regs &r, int j, int, unsigned &b0,
                                              unsigned &b1) {
    b0 = r.q[j].x;
    b1 = r.q[j].y;
  }
  static __device__ __forceinline__ void scale(const unsigned char *row, int, int j, int,
                                               float &dsc, float &dmn) {
    dsc = fg_to_f(*reinterpret_cast<const fg_f16 *>(row + 34 * j));
    dmn = 0.0f;
  }
};

/// q4_0: 8 blocks of 18 bytes (f16 d, qs[16]: weight l < 16 the low nibble
/// of qs[l], l + 16 the high one) a step, w = d·(q − 8): lane t's weights 8t
/// .. 8t + 7 are the low (t < 2) or high nibbles of qs[8(t % 2) ..].
struct MoeI8Q4_0 {
  static constexpr int kBytes = 144, kRow = 160, kParts = 1;
  static constexpr bool kSigned = true, kMin = false, kWords = false;
  struct Regs {
    uint2 q[8];
  };
  static __device__ __forceinline__ void load(const unsigned char *row, int, int t, Regs &r) {
#pragma unroll
    for (int j = 0; j < 8; ++j)
      r.q[j] = moeLds8(row + 8 * (t & 1), 18 * j + 2);
  }
  static __device__ __forceinline__ void bits(const Regs &r, int j, int t, unsigned &b0,
                                              unsigned &b1) {
    const int shift = 4 * (t >> 1);
    b0 = moeBytesMinus((r.q[j].x >> shift) & 0x0F0F0F0Fu, 8);
    b1 = moeBytesMinus((r.q[j].y >> shift) & 0x0F0F0F0Fu, 8);
  }
  static __device__ __forceinline__ void scale(const unsigned char *row, int, int j, int,
                                               float &dsc, float &dmn) {
    dsc = fg_to_f(*reinterpret_cast<const fg_f16 *>(row + 18 * j));
    dmn = 0.0f;
  }
};

/// Bytes o .. o + 7 of a staged row whose block starts `mis` (0 or 2) bytes
/// into it (o even): three words and two funnel shifts by 8·((mis + o) & 3).
static __device__ __forceinline__ uint2 moeLdsAt(const unsigned char *row, int mis, int o) {
  const int at = mis + o;
  const unsigned *w = reinterpret_cast<const unsigned *>(row + (at & ~3));
  const unsigned sh = 8u * (unsigned)(at & 3);
  return make_uint2(__funnelshift_r(w[0], w[1], sh), __funnelshift_r(w[1], w[2], sh));
}

/// q6_K: 210 bytes, ql[128] (low 4 bits), qh[64] (high 2 bits), int8
/// scales[16] (one a 16 weights), f16 d; w = d·sc·(q − 32). Weight l of
/// 32-block s (half h = s / 4, group c = s % 4) takes the low (c < 2) or
/// high nibble of ql[64h + 32(c % 2) + l] and bits 2c, 2c + 1 of
/// qh[32h + l]. Two parts a sub-block (kParts): lanes t < 2 hold weights
/// 0 .. 15 (scale 2s), t ≥ 2 weights 16 .. 31 (scale 2s + 1), so each part's
/// mma masks the other lanes' B. Rows of 210 bytes start 2-byte aligned
/// wherever a row or super-block index is odd: staged by 4-byte words
/// (kWords) from the word holding the block's first byte, `mis` bytes in.
/// |Σ (q − 32)·xq| ≤ 16 · 32 · 127 a part.
struct MoeI8Q6K {
  static constexpr int kBytes = 210, kRow = 224, kParts = 2;
  static constexpr bool kSigned = true, kMin = false, kWords = true;
  struct Regs {
    uint2 ql[4], qh[2];
  };
  static __device__ __forceinline__ void load(const unsigned char *row, int mis, int t, Regs &r) {
#pragma unroll
    for (int i = 0; i < 4; ++i) // (half, c % 2)
      r.ql[i] = moeLdsAt(row, mis, 64 * (i >> 1) + 32 * (i & 1) + 8 * t);
#pragma unroll
    for (int h = 0; h < 2; ++h)
      r.qh[h] = moeLdsAt(row, mis, 128 + 32 * h + 8 * t);
  }
  static __device__ __forceinline__ void bits(const Regs &r, int j, int, unsigned &b0,
                                              unsigned &b1) {
    const int h = j >> 2, c = j & 3;
    const uint2 l = r.ql[2 * h + (c & 1)], q = r.qh[h];
    const int ls = 4 * (c >> 1), hs = 2 * c;
    b0 = moeBytesMinus(((l.x >> ls) & 0x0F0F0F0Fu) | (((q.x >> hs) & 0x03030303u) << 4), 32);
    b1 = moeBytesMinus(((l.y >> ls) & 0x0F0F0F0Fu) | (((q.y >> hs) & 0x03030303u) << 4), 32);
  }
  static __device__ __forceinline__ void scale(const unsigned char *row, int mis, int j, int p,
                                               float &dsc, float &dmn) {
    const float d = fg_to_f(*reinterpret_cast<const fg_f16 *>(row + mis + 208));
    dsc = d * (float)(int)reinterpret_cast<const signed char *>(row + mis + 192)[2 * j + p];
    dmn = 0.0f;
  }
};

/// The GEMM's dynamic shared memory, two stages of a super-block each
/// (Cfg::kI8Shared bytes; the emitter's size is checked here):
///   xq [2][BM][288]     the tile's quantised x rows (256 bytes + 32: the
///                       8-byte reads of a half warp, rows g .. g + 3 at
///                       bytes 8t .., fall on 32 distinct banks);
///   xs [2][BM][9]       their {dx, Σ x} per 32-block (rows of 9: rows
///                       g .. g + 3 differ in bank);
///   w  [2][S][BN][R]    the block's weight rows' super-blocks (C::I8's
///                       bytes, padded to kRow: conflict-free as xq's).
template <class C> struct MoeI8Smem {
  static constexpr int S = C::Epi::kStreams, kXqRow = 288, kXsRow = 9, kWRow = C::I8::kRow;
  static constexpr long long kXq = 0, kXs = kXq + 2LL * C::BM * kXqRow,
                             kW = kXs + 2LL * C::BM * kXsRow * 8,
                             kBytes = kW + 2LL * S * C::BN * kWRow;
  static_assert(kBytes == C::kI8Shared, "the emitter's dynamic shared memory size");
  unsigned char *base;
  __device__ __forceinline__ unsigned char *xq(int buf, int r) const {
    return base + kXq + ((long long)buf * C::BM + r) * kXqRow;
  }
  __device__ __forceinline__ float2 *xs(int buf, int r) const {
    return reinterpret_cast<float2 *>(base + kXs + ((long long)buf * C::BM + r) * kXsRow * 8);
  }
  __device__ __forceinline__ unsigned char *w(int buf, int s, int n) const {
    return base + kW + (((long long)buf * S + s) * C::BN + n) * kWRow;
  }
};

template <class C> static __device__ __forceinline__ void moeGemmI8(const MoeArgs<C> &a) {
  constexpr int S = C::Epi::kStreams, BM = C::BM, BN = C::BN, NT = C::NT, NJ = C::kI8NJ;
  constexpr int NW = NT / 32, MT = BM / 16;
  static_assert(NW * NJ * 8 == BN, "the warps' n8 tiles cover the block's columns");
  static_assert(C::K % 256 == 0, "whole q4_K super-blocks");
  constexpr long long NSB = C::K / 256, KB = C::K / 32;
  using Q = typename C::I8;
  constexpr int kBlockBytes = Q::kBytes, kChunks = kBlockBytes / 16, P = Q::kParts;
  // Staged by words (Q::kWords): the words from the one holding the block's
  // first byte through its last byte.
  constexpr int kWordsARow = (kBlockBytes + 2 + 3) / 4;
  static_assert(Q::kWords || kBlockBytes % 16 == 0, "16-byte units, or words");
  static_assert(4 * kWordsARow <= Q::kRow, "a staged row holds its words");
  extern __shared__ __align__(16) unsigned char fg_moe_i8_smem[];
  const MoeI8Smem<C> sm{fg_moe_i8_smem};
  __shared__ int xrow[BM], pair[BM]; // x row and pair of each tile row (-1 past its rows)
  if ((int)blockIdx.y >= a.scratch[0])
    return; // past the tile table (the whole block leaves before any barrier)
  const MoeTile tile = reinterpret_cast<const MoeTile *>(a.scratch + C::kTilesOff)[blockIdx.y];
  const int *perm = a.scratch + C::kPermOff;
  if (threadIdx.x < BM) {
    const int p = (int)threadIdx.x < tile.rows ? perm[tile.row0 + threadIdx.x] : -1;
    pair[threadIdx.x] = p;
    xrow[threadIdx.x] = p < 0 ? -1 : C::kXRowsPerToken == 1 ? p / (int)C::kk : p;
  }
  __syncthreads();
  const bool valid = tile.group < C::E;
  // Out-of-range experts: no mma; their rows store the epilogue of zeros.
  const int mtLive = valid ? (tile.rows + 15) / 16 : 0;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, g = lane >> 2, t = lane & 3;
  const long long n0 = (long long)blockIdx.x * BN, e = valid ? tile.group : 0;
  const int nw = 8 * NJ * warp;
  // The expert's rows of each stream (scalars, not an array: the stage's
  // stream index is not a constant).
  const unsigned char *wrow0 = reinterpret_cast<const unsigned char *>(a.w0) + C::w0_off +
                               e * C::w0_es,
                      *wrow1 = S == 2 ? reinterpret_cast<const unsigned char *>(a.w1) +
                                            C::w1_off + e * C::w1_es
                                      : wrow0;

  float acc[S][NJ][MT][4];
#pragma unroll
  for (int s = 0; s < S; ++s)
#pragma unroll
    for (int j = 0; j < NJ; ++j)
#pragma unroll
      for (int m = 0; m < MT; ++m)
#pragma unroll
        for (int i = 0; i < 4; ++i)
          acc[s][j][m][i] = 0.0f;

  const signed char *xq = moeXq<C>(a.scratch);
  const float2 *xs = moeXs<C>(a.scratch);
  // Super-block sb of the live m tiles' x rows and of the block's weight
  // rows into stage `buf` (zeros for rows past the tile or past N).
  auto stage = [&](long long sb, int buf) {
    const int rows = 16 * mtLive;
    for (int u = threadIdx.x; u < rows * 16; u += NT) {
      const int r = u >> 4, c = u & 15, xr = xrow[r];
      moeCopy<16>(sm.xq(buf, r) + 16 * c, xq + (xr < 0 ? 0 : xr * C::K + 256 * sb + 16 * c),
                  xr >= 0);
    }
    for (int u = threadIdx.x; u < rows * 8; u += NT) {
      const int r = u >> 3, c = u & 7, xr = xrow[r];
      moeCopy<8>(sm.xs(buf, r) + c, xs + (xr < 0 ? 0 : xr * KB + 8 * sb + c), xr >= 0);
    }
    if constexpr (Q::kWords) {
      for (int u = threadIdx.x; u < S * BN * kWordsARow; u += NT) {
        const int s = u / (BN * kWordsARow), n = (u / kWordsARow) % BN, c = u % kWordsARow;
        const bool live = n0 + n < C::N;
        const long long ld = s == 0 ? C::w0_ld : C::w1_ld;
        const unsigned char *blk =
            (s == 0 ? wrow0 : wrow1) + (live ? (n0 + n) * ld + sb * kBlockBytes : 0);
        const unsigned char *w0 = blk - (reinterpret_cast<unsigned long long>(blk) & 3);
        // Bytes of this word inside the block (none past its end: the last
        // block of a weight may end at its allocation's end).
        const long long in = blk + kBlockBytes - (w0 + 4 * c);
        // (A copy of nothing still needs an aligned source: w0, not blk.)
        moeCopyWord(sm.w(buf, s, n) + 4 * c, live && in > 0 ? w0 + 4 * c : w0,
                    live ? (int)(in >= 4 ? 4 : in > 0 ? in : 0) : 0);
      }
    } else {
      for (int u = threadIdx.x; u < S * BN * kChunks; u += NT) {
        const int s = u / (BN * kChunks), n = (u / kChunks) % BN, c = u % kChunks;
        const bool live = n0 + n < C::N;
        const long long ld = s == 0 ? C::w0_ld : C::w1_ld;
        moeCopy<16>(sm.w(buf, s, n) + 16 * c,
                    (s == 0 ? wrow0 : wrow1) +
                        (live ? (n0 + n) * ld + sb * kBlockBytes + 16 * c : 0),
                    live);
      }
    }
    asm volatile("cp.async.commit_group;\n" ::: "memory");
  };

  if (mtLive > 0)
    stage(0, 0);
  for (long long sb = 0; sb < NSB && mtLive > 0; ++sb) {
    const int buf = (int)(sb & 1);
    asm volatile("cp.async.wait_group 0;\n" ::: "memory");
    __syncthreads(); // stage sb is in; every warp is done with stage sb - 1
    if (sb + 1 < NSB)
      stage(sb + 1, buf ^ 1); // in flight during this super-block's mmas
    // This lane's weights of the super-block: qs bytes 8t .. 8t + 7 of each
    // of the 4 groups of row g, and the scale and min of sub-block g of its
    // columns 2t, 2t + 1 (from their 16-byte headers: d, dmin, scales).
    // (Q::kWords: each staged row starts `mis` bytes before its block.)
    auto mis = [&](int s, int n) -> int {
      if constexpr (!Q::kWords) {
        return 0;
      } else {
        const long long ld = s == 0 ? C::w0_ld : C::w1_ld;
        const unsigned char *blk = (s == 0 ? wrow0 : wrow1) +
                                   (n0 + n < C::N ? (n0 + n) * ld + sb * kBlockBytes : 0);
        return (int)(reinterpret_cast<unsigned long long>(blk) & 3);
      }
    };
    typename Q::Regs q[S][NJ];
    float dsc[S][NJ][2][P], dmn[S][NJ][2][P];
#pragma unroll
    for (int s = 0; s < S; ++s)
#pragma unroll
      for (int j = 0; j < NJ; ++j) {
        const int nb = nw + 8 * j + g;
        Q::load(sm.w(buf, s, nb), mis(s, nb), t, q[s][j]);
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          const int nc = nw + 8 * j + 2 * t + h;
#pragma unroll
          for (int p = 0; p < P; ++p)
            Q::scale(sm.w(buf, s, nc), mis(s, nc), g, p, dsc[s][j][h][p], dmn[s][j][h][p]);
        }
      }
#pragma unroll
    for (int sub = 0; sub < 8; ++sub) {
      // Sub-block `sub`'s scales and mins of this lane's columns, from the
      // lane (sub, t) that decoded them.
      float sc[S][NJ][2][P], mn[S][NJ][2];
      unsigned b0[S][NJ], b1[S][NJ];
#pragma unroll
      for (int s = 0; s < S; ++s)
#pragma unroll
        for (int j = 0; j < NJ; ++j) {
#pragma unroll
          for (int h = 0; h < 2; ++h) {
#pragma unroll
            for (int p = 0; p < P; ++p)
              sc[s][j][h][p] = __shfl_sync(0xffffffffu, dsc[s][j][h][p], 4 * sub + t);
            mn[s][j][h] =
                Q::kMin ? __shfl_sync(0xffffffffu, dmn[s][j][h][0], 4 * sub + t) : 0.0f;
          }
          Q::bits(q[s][j], sub, t, b0[s][j], b1[s][j]);
        }
#pragma unroll
      for (int m = 0; m < MT; ++m) {
        if (m >= mtLive)
          break;
        const int r0 = 16 * m + g;
        const uint2 x0 = *reinterpret_cast<const uint2 *>(sm.xq(buf, r0) + 32 * sub + 8 * t);
        const uint2 x1 = *reinterpret_cast<const uint2 *>(sm.xq(buf, r0 + 8) + 32 * sub + 8 * t);
        const float2 s0 = sm.xs(buf, r0)[sub], s1 = sm.xs(buf, r0 + 8)[sub];
        const unsigned af[4] = {x0.x, x1.x, x0.y, x1.y};
#pragma unroll
        for (int s = 0; s < S; ++s)
#pragma unroll
          for (int j = 0; j < NJ; ++j)
#pragma unroll
            for (int p = 0; p < P; ++p) {
              // Part p of the sub-block (P = 2: lanes t / 2 == p keep their B).
              const unsigned keep = P == 1 || (t >> 1) == p ? 0xFFFFFFFFu : 0u;
              float f[4];
              moeMmaI8<Q::kSigned>(f, af, b0[s][j] & keep, b1[s][j] & keep);
              float *o = acc[s][j][m];
#pragma unroll
              for (int i = 0; i < 4; ++i) {
                const float2 xsi = i < 2 ? s0 : s1;
                const int h = i & 1;
                o[i] = fmaf(f[i], sc[s][j][h][p] * xsi.x, o[i]);
                if constexpr (Q::kMin)
                  o[i] = fmaf(-mn[s][j][h], xsi.y, o[i]);
              }
            }
      }
    }
  }

  // Epilogue: (+ bias), Epi, store to the pair's row.
#pragma unroll
  for (int j = 0; j < NJ; ++j)
#pragma unroll
    for (int m = 0; m < MT; ++m)
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        const int r = 16 * m + g + (i >= 2 ? 8 : 0);
        const long long n = n0 + nw + 8 * j + 2 * t + (i & 1);
        const int p = pair[r];
        if (p < 0 || n >= C::N)
          continue;
        moeStore<C>(a, p, n, e, valid, acc[0][j][m][i], acc[S - 1][j][m][i]);
      }
}

} // namespace fg
