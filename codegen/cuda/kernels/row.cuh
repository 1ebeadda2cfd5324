//===- row.cuh - row-wise kernels: norms and their epilogues, softmax, sums, ranks ===//
//
// Every kernel here treats its operand as rows (all dims but the last; at most
// three outer dims, right-aligned: a [T, H, D] operand has rows (1, T, H)) of
// Cfg::L elements. The emitters (RowEmitter.cpp, FusedRowEmitter.cpp) write a
// parameter struct `Cfg` of constexpr shapes, layouts and policies and a
// one-line `extern "C"` entry; they never write kernel code.
//
// Work split. A row is taken by a group of Cfg::kGroup threads: a whole block
// (block reduction), or one warp when rows are short (kGroup = 32: the block
// holds several rows, warp reductions only). When rows are few and long
// (decode: 1-37 rows of 4096), Cfg::kSplit > 1 blocks share a row: each one
// reads the WHOLE row (tens of KB at most, and the blocks' reads of one row
// meet in L2) to compute the statistics, then normalises and writes only its
// own slice of the row. No block talks to another (no atomics, no flags), so
// the result is deterministic and bit-identical to kSplit = 1. A grid-stride
// loop over (row, slice) items makes any row count work.
//
// Loads. The statistics pass reads Cfg::kVX elements per 16-byte (or smaller)
// load and keeps up to 8 loads per thread in flight before it adds them; the
// write pass moves Cfg::kV elements of every operand per step; the thread's
// first units of w and the residual are prefetched into L1 before the
// statistics, so their latency hides behind them. A width above 1 needs unit
// column stride and aligned rows (the emitter checks).
//
// normRows<Cfg> (rms_norm, layer_norm, rope and the fused row anchors) is
// assembled from policies:
//
//   Cfg::Stat   the anchor's statistics: StatNone (rope), StatRms, StatLayerNorm
//   Cfg::kMul   epilogue · w[c];  Cfg::kAdd  epilogue + residual[c]
//   Cfg::Map    MapPlain (every column on its own, kV at a time) or
//               MapRope<R> (pairs (i0, i1) rotated in registers, angles in
//               f64 like the CPU reference; channels past n_dims pass through)
//   Cfg::Store  StoreDense (result row-major) or StoreSetRows<rows, layout, Round>
//               (cache row dest[idx[t], h, :], in place; the value rounds
//               through Round, the rope's own dtype, before the cache's)
//
// Each value is computed in the order and precision of the op's
// decomposition: y = ((x - shift) · scale) · w + residual in f32 (rms: shift 0).
//
//===----------------------------------------------------------------------===//

namespace fg {

// --- rows and operands ------------------------------------------------------------

/// A row index unravelled over the outer dims (D0, D1, D2).
struct RowPos {
  long long r0, r1, r2;
};

template <long long D0, long long D1, long long D2>
static __device__ __forceinline__ RowPos rowPos(long long row) {
  RowPos p;
  p.r2 = D2 == 1 ? 0 : row % D2;
  const long long t = D2 == 1 ? row : row / D2;
  p.r1 = D1 == 1 ? 0 : t % D1;
  p.r0 = D1 == 1 ? t : t / D1;
  return p;
}

/// An operand read in the row space: element (r0, r1, r2, c) at
/// Off + r0·S0 + r1·S1 + r2·S2 + c·SC (broadcast dims have stride 0).
template <class T_, long long Off, long long S0, long long S1, long long S2, long long SC>
struct RowOp {
  using T = T_;
  static constexpr long long kSc = SC;
  static __device__ __forceinline__ long long base(const RowPos &p) {
    return Off + p.r0 * S0 + p.r1 * S1 + p.r2 * S2;
  }
};
/// An operand the kernel does not have.
using NoRowOp = RowOp<float, 0, 0, 0, 0, 0>;

/// A vector operand: element i at Off + i·St (positions, row indices, freq factors).
template <class T_, long long Off, long long St> struct VecOp {
  using T = T_;
  static __device__ __forceinline__ long long at(long long i) { return Off + i * St; }
};
using NoVecOp = VecOp<float, 0, 0>;

// --- vector loads and stores ------------------------------------------------------

template <int Bytes> struct FgWord;
template <> struct FgWord<16> { using T = uint4; };
template <> struct FgWord<8> { using T = uint2; };
template <> struct FgWord<4> { using T = unsigned; };
template <> struct FgWord<2> { using T = unsigned short; };

/// V consecutive elements at p as floats (V > 1: one aligned load of
/// V·sizeof(T) <= 16 bytes through the read-only path).
template <int V, class T> static __device__ __forceinline__ void fgLoad(const T *p, float (&v)[V]) {
  if constexpr (V == 1) {
#if defined(FG_TAIL_COHERENT)
    v[0] = fg_to_f(fg_ldcg(p));
#elif defined(FG_TAIL_LOCAL)
    v[0] = fg_to_f(fg_ldcg<T, false>(p));
#else
    v[0] = fg_to_f(p[0]);
#endif
  } else {
    constexpr int B = V * (int)sizeof(T);
    static_assert(B <= 16, "at most 16 bytes per load");
    union {
      typename FgWord<B>::T w;
      T e[V];
    } u;
#if defined(FG_TAIL_COHERENT)
    // A GEMV tail: other blocks of this launch wrote the row (common.cuh).
    u.w = fg_ldcg(reinterpret_cast<const typename FgWord<B>::T *>(p));
#elif defined(FG_TAIL_LOCAL)
    // A GEMV's local tail: this block wrote the row before a barrier.
    u.w = fg_ldcg<typename FgWord<B>::T, false>(reinterpret_cast<const typename FgWord<B>::T *>(p));
#else
    u.w = __ldg(reinterpret_cast<const typename FgWord<B>::T *>(p));
#endif
#pragma unroll
    for (int e = 0; e < V; ++e)
      v[e] = fg_to_f(u.e[e]);
  }
}

/// V floats converted to T and stored at p (V > 1: one aligned store).
template <int V, class T>
static __device__ __forceinline__ void fgStore(T *p, const float (&v)[V]) {
  if constexpr (V == 1) {
    p[0] = fg_from_f<T>(v[0]);
  } else {
    constexpr int B = V * (int)sizeof(T);
    static_assert(B <= 16, "at most 16 bytes per store");
    union {
      typename FgWord<B>::T w;
      T e[V];
    } u;
#pragma unroll
    for (int e = 0; e < V; ++e)
      u.e[e] = fg_from_f<T>(v[e]);
    *reinterpret_cast<typename FgWord<B>::T *>(p) = u.w;
  }
}

// --- group reductions ---------------------------------------------------------------

/// Every thread of the group (a warp, or the whole block of G threads) gets the total.
template <int G> static __device__ __forceinline__ float fgGroupSum(float v) {
  if constexpr (G == 32)
    return fg_warp_sum(v);
  else
    return fg_block_sum<G>(v);
}
template <int G> static __device__ __forceinline__ float fgGroupMax(float v) {
  if constexpr (G == 32)
    return fg_warp_max(v);
  else
    return fg_block_max<G>(v);
}

/// Folds f over this thread's share of a row (lane g of G threads): vectors
/// of V elements g, g + G, ..., up to 8 loads in flight before they are used.
/// `row` points at element 0 of the row; V > 1 needs unit column stride.
template <class Op, long long L, int V, int G, class F>
static __device__ __forceinline__ float fgRowFold(const typename Op::T *row, int g, float acc,
                                                  F f) {
  constexpr long long N = L / V, kIters = (N + G - 1) / G;
  constexpr int U = kIters < 8 ? (int)kIters : 8;
  for (long long i0 = 0; i0 < kIters; i0 += U) {
    float v[U][V];
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const long long j = g + (i0 + u) * G;
      if (j < N)
        fgLoad<V>(row + j * V * Op::kSc, v[u]);
    }
#pragma unroll
    for (int u = 0; u < U; ++u)
      if (g + (i0 + u) * G < N) {
#pragma unroll
        for (int e = 0; e < V; ++e)
          acc = f(acc, v[u][e]);
      }
  }
  return acc;
}

/// The (row, slice) items of a launch: item = row · kSplit + slice, a group
/// per item, kThreads / kGroup groups per block, grid-stride over items.
/// Rows: the rows (or groups of rows) the items are made of.
template <class C, long long Rows = C::D0 * C::D1 * C::D2, class F>
static __device__ __forceinline__ void fgForItems(F f) {
  constexpr int G = C::kGroup, RPB = C::kThreads / C::kGroup;
  static_assert(RPB == 1 || G == 32, "several rows per block only with one warp per row");
  constexpr long long kItems = Rows * C::kSplit;
  const int g = RPB == 1 ? (int)threadIdx.x : (int)(threadIdx.x & 31);
  const long long sub = RPB == 1 ? 0 : (long long)(threadIdx.x >> 5);
  for (long long item = FgGrid<C>::block() * RPB + sub; item < kItems;
       item += FgGrid<C>::blocks() * RPB)
    f(item / C::kSplit, item % C::kSplit, g);
}

/// [begin, end) of slice `part` of n work units split kSplit ways.
template <long long N, long long S> struct FgSlice {
  static constexpr long long kChunk = (N + S - 1) / S;
  static __device__ __forceinline__ long long begin(long long part) { return part * kChunk; }
  static __device__ __forceinline__ long long end(long long part) {
    return min(N, (part + 1) * kChunk);
  }
};

// --- normRows: statistics policies --------------------------------------------------

/// y = (x - shift) · scale.
struct RowStats {
  float shift, scale;
};

/// No statistics: y = x (rope, rope_set_rows).
struct StatNone {
  template <class C> static __device__ __forceinline__ RowStats run(const typename C::X::T *, int) {
    return {0.0f, 1.0f};
  }
  static __device__ __forceinline__ float apply(float x, const RowStats &) { return x; }
};

/// rms_norm: scale = 1 / sqrt(Σx² / L + eps).
template <int EpsBits> struct StatRms {
  template <class C>
  static __device__ __forceinline__ RowStats run(const typename C::X::T *row, int g) {
    float s = fgRowFold<typename C::X, C::L, C::kVX, C::kGroup>(
        row, g, 0.0f, [](float a, float v) { return a + v * v; });
    s = fgGroupSum<C::kGroup>(s);
    return {0.0f, 1.0f / sqrtf(s / (float)C::L + __int_as_float(EpsBits))};
  }
  static __device__ __forceinline__ float apply(float x, const RowStats &s) { return x * s.scale; }
};

/// layer_norm: mean, then the variance about it; scale = 1 / sqrt(var + eps).
template <int EpsBits> struct StatLayerNorm {
  template <class C>
  static __device__ __forceinline__ RowStats run(const typename C::X::T *row, int g) {
    using X = typename C::X;
    float s =
        fgRowFold<X, C::L, C::kVX, C::kGroup>(row, g, 0.0f, [](float a, float v) { return a + v; });
    const float mean = fgGroupSum<C::kGroup>(s) / (float)C::L;
    float q = fgRowFold<X, C::L, C::kVX, C::kGroup>(row, g, 0.0f, [mean](float a, float v) {
      const float d = v - mean;
      return a + d * d;
    });
    const float var = fgGroupSum<C::kGroup>(q) / (float)C::L;
    return {mean, 1.0f / sqrtf(var + __int_as_float(EpsBits))};
  }
  static __device__ __forceinline__ float apply(float x, const RowStats &s) {
    return (x - s.shift) * s.scale;
  }
};

// --- normRows: stores -----------------------------------------------------------------

/// The result, dense row-major: out[row · L + c].
struct StoreDense {
  static constexpr bool kSetRows = false;
  static constexpr long long kRows = 0;
  template <class C, int V, class T>
  static __device__ __forceinline__ void put(T *out, long long row, const RowPos &, long long,
                                             long long c, const float (&v)[V]) {
    fgStore<V>(out + row * C::L + c, v);
  }
};

/// set_rows into a cache [Rows, H, D]: dest[drow, h, c] at Off + drow·S0 +
/// h·S1 + c·S2, the value rounded through Round (float: unchanged) first.
template <long long Rows, long long Off, long long S0, long long S1, long long S2, class Round>
struct StoreSetRows {
  static constexpr bool kSetRows = true;
  static constexpr long long kRows = Rows;
  template <class C, int V, class T>
  static __device__ __forceinline__ void put(T *out, long long, const RowPos &p, long long drow,
                                             long long c, const float (&v)[V]) {
#pragma unroll
    for (int e = 0; e < V; ++e)
      out[Off + drow * S0 + p.r2 * S1 + (c + e) * S2] =
          fg_from_f<T>(fg_to_f(fg_from_f<Round>(v[e])));
  }
};

// --- normRows: maps -------------------------------------------------------------------

/// The value of column c (V of them from c on) after the anchor and the
/// elementwise epilogue.
template <class C, int V> struct RowValues {
  const typename C::X::T *x;
  const typename C::W::T *w;
  const typename C::Res::T *res;
  RowStats st;
  __device__ __forceinline__ void at(long long c, float (&y)[V]) const {
    float xv[V], wv[V], rv[V];
    fgLoad<V>(x + c * C::X::kSc, xv);
    if constexpr (C::kMul)
      fgLoad<V>(w + c * C::W::kSc, wv);
    if constexpr (C::kAdd)
      fgLoad<V>(res + c * C::Res::kSc, rv);
#pragma unroll
    for (int e = 0; e < V; ++e) {
      float v = C::Stat::apply(xv[e], st);
      if constexpr (C::kMul)
        v = v * wv[e];
      if constexpr (C::kAdd)
        v = v + rv[e];
      y[e] = v;
    }
  }
};

/// Every column on its own, kV at a time; this slice's share of the L / kV vectors.
struct MapPlain {
  /// Prefetches this thread's first slice units of w and the residual into L1
  /// while the statistics run: the write pass needs them right after.
  template <class C>
  static __device__ __forceinline__ void prefetch(const RowValues<C, C::kV> &val, long long part,
                                                  int g) {
    constexpr int V = C::kV;
    using Sl = FgSlice<C::L / V, C::kSplit>;
    const long long end = Sl::end(part);
#pragma unroll
    for (int u = 0; u < 4; ++u) {
      const long long j = Sl::begin(part) + g + (long long)u * C::kGroup;
      if (j < end) {
        if constexpr (C::kMul)
          fg_prefetch_l1(val.w + j * V * C::W::kSc);
        if constexpr (C::kAdd)
          fg_prefetch_l1(val.res + j * V * C::Res::kSc);
      }
    }
  }
  /// Column c alone (normRowsRange; kV = 1).
  template <class C, class A>
  static __device__ __forceinline__ void runChannel(const A &a, const RowValues<C, 1> &val,
                                                    long long row, const RowPos &p,
                                                    long long drow, long long c) {
    float y[1];
    val.at(c, y);
    C::Store::template put<C, 1>(a.out, row, p, drow, c, y);
  }
  /// Column c given its value v (normRowsElement: a GEMV's store tail).
  template <class C, class A>
  static __device__ __forceinline__ void putChannel(const A &a, long long row, const RowPos &p,
                                                    long long drow, long long c, float v, float,
                                                    const float *) {
    const float y[1] = {v};
    C::Store::template put<C, 1>(a.out, row, p, drow, c, y);
  }
  /// No angle.
  template <class C, class A>
  static __device__ __forceinline__ void channelAngle(const A &, const RowPos &, long long,
                                                      float &, float &) {}
  template <class C, class A>
  static __device__ __forceinline__ void run(const A &a, const RowValues<C, C::kV> &val,
                                             long long row, const RowPos &p, long long drow,
                                             long long part, int g) {
    constexpr int V = C::kV;
    using Sl = FgSlice<C::L / V, C::kSplit>;
    const long long end = Sl::end(part);
#pragma unroll 4
    for (long long j = Sl::begin(part) + g; j < end; j += C::kGroup) {
      float y[V];
      val.at(j * V, y);
      C::Store::template put<C, V>(a.out, row, p, drow, j * V, y);
    }
  }
};

/// Rotary embedding of the first R::kNDims channels: pair i rotates channels
/// (i0, i1) = (2i, 2i + 1) (normal) or (i, i + n/2) (neox) by the angle
/// pos · theta^(-2i/n) [/ ff[i]] with YaRN's ramp, all in f64; channels past
/// kNDims pass through. Work units: the pairs, then the pass-through channels.
template <class R> struct MapRope {
  /// Nothing: rope rows are short (a head), w is read with x.
  template <class C>
  static __device__ __forceinline__ void prefetch(const RowValues<C, C::kV> &, long long, int) {}

  /// cos and sin (times the magnitude) of pair i at position pos.
  template <class C, class A>
  static __device__ __forceinline__ void angle(const A &a, long long i, double pos, float &cs,
                                               float &sn) {
    double theta = pos * pow(R::kTheta, -2.0 * (double)i / (double)R::kNDims);
    if constexpr (R::kFF)
      theta = theta / (double)fg_to_f(a.ff[C::FF::at(i)]);
    double th = R::kFreqScale * theta;
    if constexpr (R::kYarn) {
      const double y = ((double)i - R::kLow) / fmax(0.001, R::kHigh - R::kLow);
      const double ramp = (1.0 - fmin(1.0, fmax(0.0, y))) * R::kExt;
      th = th * (1.0f - ramp) + theta * ramp;
    }
    cs = (float)(cos(th) * R::kMScale);
    sn = (float)(sin(th) * R::kMScale);
  }

  /// Work unit u of a row: pair u < n_dims / 2 rotated by (cs, sn), or a
  /// pass-through channel.
  template <class C, class A>
  static __device__ __forceinline__ void unit(const A &a, const RowValues<C, C::kV> &val,
                                              long long row, const RowPos &p, long long drow,
                                              long long u, float cs, float sn) {
    constexpr long long kHalf = R::kNDims / 2;
    if (u >= kHalf) {
      const long long c = R::kNDims + (u - kHalf);
      float y[1];
      val.at(c, y);
      C::Store::template put<C, 1>(a.out, row, p, drow, c, y);
      return;
    }
    const long long i0 = R::kNeox ? u : 2 * u, i1 = R::kNeox ? u + kHalf : 2 * u + 1;
    float va[1], vb[1];
    val.at(i0, va);
    val.at(i1, vb);
    const float ya[1] = {fg_rope_first(va[0], vb[0], cs, sn)},
                yb[1] = {fg_rope_second(va[0], vb[0], cs, sn)};
    C::Store::template put<C, 1>(a.out, row, p, drow, i0, ya);
    C::Store::template put<C, 1>(a.out, row, p, drow, i1, yb);
  }

  /// The unit channel c leads (normRowsRange): the pair (c, c + 1) for an
  /// even c below n_dims (normal mode: a pair is two neighbouring channels),
  /// nothing for an odd one, the channel itself past n_dims.
  template <class C, class A>
  static __device__ __forceinline__ void runChannel(const A &a, const RowValues<C, 1> &val,
                                                    long long row, const RowPos &p,
                                                    long long drow, long long c) {
    static_assert(!R::kNeox, "a neox pair (i, i + n/2) is not two neighbouring channels");
    constexpr long long kHalf = R::kNDims / 2;
    if (c >= R::kNDims) {
      unit<C>(a, val, row, p, drow, kHalf + (c - R::kNDims), 1.0f, 0.0f);
      return;
    }
    if (c & 1)
      return;
    float cs, sn;
    angle<C>(a, c / 2, (double)a.pos[C::Pos::at(p.r1)], cs, sn);
    unit<C>(a, val, row, p, drow, c / 2, cs, sn);
  }

  /// Channel c given its value v and its pair partner's vp (normRowsElement:
  /// a GEMV's store tail; normal mode, the partner is channel c ^ 1): the
  /// expressions of unit(), channel c's half of them, so the same bits.
  /// `early`: (cs, sn) of channel c computed before (channelAngle), or null.
  template <class C, class A>
  static __device__ __forceinline__ void putChannel(const A &a, long long row, const RowPos &p,
                                                    long long drow, long long c, float v,
                                                    float vp, const float *early) {
    static_assert(!R::kNeox, "a neox pair (i, i + n/2) is not two neighbouring channels");
    float y[1] = {v};
    if (c < R::kNDims) {
      float cs = 1.0f, sn = 0.0f;
      if (early)
        cs = early[0], sn = early[1];
      else
        channelAngle<C>(a, p, c, cs, sn);
      // Even c: the pair's first channel (a = v, b = vp); odd: its second.
      y[0] = (c & 1) ? fg_rope_second(vp, v, cs, sn) : fg_rope_first(v, vp, cs, sn);
    }
    C::Store::template put<C, 1>(a.out, row, p, drow, c, y);
  }
  /// (cs, sn) of channel c of the row at p (c < n_dims).
  template <class C, class A>
  static __device__ __forceinline__ void channelAngle(const A &a, const RowPos &p, long long c,
                                                      float &cs, float &sn) {
    if (c >= R::kNDims)
      return;
#if !defined(FG_DEBUG_TAIL_NO_ANGLE) // timing only (EmitOptions::debugStoreTailNoAngle)
    angle<C>(a, c / 2, (double)a.pos[C::Pos::at(p.r1)], cs, sn);
#endif
  }

  template <class C, class A>
  static __device__ __forceinline__ void run(const A &a, const RowValues<C, C::kV> &val,
                                             long long row, const RowPos &p, long long drow,
                                             long long part, int g) {
    static_assert(C::kV == 1, "rope pairs are read one channel at a time");
    constexpr long long kHalf = R::kNDims / 2, kUnits = kHalf + (C::L - R::kNDims);
    using Sl = FgSlice<kUnits, C::kSplit>;
    const double pos = (double)a.pos[C::Pos::at(p.r1)];
    const long long end = Sl::end(part);
    for (long long u = Sl::begin(part) + g; u < end; u += C::kGroup) {
      float cs = 1.0f, sn = 0.0f;
      if (u < kHalf)
        angle<C>(a, u, pos, cs, sn);
      unit<C>(a, val, row, p, drow, u, cs, sn);
    }
  }

  /// H consecutive rows of one position (heads r2 .. r2 + H − 1 of token
  /// r1): each lane computes the angles of its units once and rotates them
  /// in every head — the f64 pow / cos / sin are most of a rope's work, and
  /// a prefill row is one head of 32 sharing the position. Same values as
  /// run() on each row.
  template <class C, int H, class A>
  static __device__ __forceinline__ void runHeads(const A &a, long long row0, const RowPos &p0,
                                                  long long drow, long long part, int g) {
    static_assert(C::kV == 1, "rope pairs are read one channel at a time");
    constexpr long long kHalf = R::kNDims / 2, kUnits = kHalf + (C::L - R::kNDims);
    using Sl = FgSlice<kUnits, C::kSplit>;
    constexpr int kPer = (int)((Sl::kChunk + C::kGroup - 1) / C::kGroup);
    const double pos = (double)a.pos[C::Pos::at(p0.r1)];
    const long long b = Sl::begin(part) + g, end = Sl::end(part);
    float cs[kPer], sn[kPer];
#pragma unroll
    for (int k = 0; k < kPer; ++k) {
      const long long u = b + (long long)k * C::kGroup;
      cs[k] = 1.0f, sn[k] = 0.0f;
      if (u < end && u < kHalf)
        angle<C>(a, u, pos, cs[k], sn[k]);
    }
#pragma unroll
    for (int hh = 0; hh < H; ++hh) {
      RowPos p = p0;
      p.r2 += hh;
      const typename C::X::T *xr = a.x + C::X::base(p);
      RowValues<C, C::kV> val{xr, a.w + C::W::base(p), a.res + C::Res::base(p), {}};
      val.st = C::Stat::template run<C>(xr, g);
#pragma unroll
      for (int k = 0; k < kPer; ++k) {
        const long long u = b + (long long)k * C::kGroup;
        if (u < end)
          unit<C>(a, val, row0 + hh, p, drow, u, cs[k], sn[k]);
      }
    }
  }
};

// --- normRows -----------------------------------------------------------------------

/// The pointers of one launch; absent operands are null.
template <class C> struct NormArgs {
  typename C::Out *out;
  const typename C::X::T *__restrict__ x;
  const typename C::W::T *__restrict__ w;
  const typename C::Res::T *__restrict__ res;
  const typename C::Pos::T *__restrict__ pos;
  const typename C::Idx::T *__restrict__ idx;
  const typename C::FF::T *__restrict__ ff;
};

/// C::kHeads (rope only; 1 when absent): rows taken H at a time, the
/// heads of one token (MapRope::runHeads).
template <class C, class = void> struct RowHeads {
  static constexpr int value = 1;
};
template <class C> struct RowHeads<C, decltype(void(C::kHeads))> {
  static constexpr int value = C::kHeads;
};

template <class C> static __device__ __forceinline__ void normRows(const NormArgs<C> &a) {
  if constexpr (RowHeads<C>::value > 1) {
    constexpr int H = RowHeads<C>::value;
    static_assert(C::D2 % H == 0, "head groups within a token");
    fgForItems<C, C::D0 * C::D1 * C::D2 / H>([&](long long grp, long long part, int g) {
      const long long row = grp * H;
      const RowPos p = rowPos<C::D0, C::D1, C::D2>(row);
      long long drow = 0;
      if constexpr (C::Store::kSetRows) {
        drow = (long long)a.idx[C::Idx::at(p.r1)];
        if (drow < 0 || drow >= C::Store::kRows)
          return;
      }
      C::Map::template runHeads<C, H>(a, row, p, drow, part, g);
    });
    return;
  }
  fgForItems<C>([&](long long row, long long part, int g) {
    const RowPos p = rowPos<C::D0, C::D1, C::D2>(row);
    long long drow = 0;
    if constexpr (C::Store::kSetRows) {
      // The cache row of token t = r1; rows out of range are skipped (uniform
      // over the group, before any reduction).
      drow = (long long)a.idx[C::Idx::at(p.r1)];
      if (drow < 0 || drow >= C::Store::kRows)
        return;
    }
    const typename C::X::T *xr = a.x + C::X::base(p);
    RowValues<C, C::kV> val{xr, a.w + C::W::base(p), a.res + C::Res::base(p), {}};
    C::Map::template prefetch<C>(val, part, g);
    val.st = C::Stat::template run<C>(xr, g);
    C::Map::template run<C>(a, val, row, p, drow, part, g);
  });
}

/// The elements [begin, end) of the flattened row space (row · L + column) of
/// a row op without statistics (rope in normal mode, set_rows, rope_set_rows),
/// the block's threads over them: a GEMV's local tail (GemvTails.cpp), run by
/// the block that just stored those elements of x, on pairs that never
/// straddle its range (begin and end even). Same values as normRows.
template <class C>
static __device__ __forceinline__ void normRowsRange(const NormArgs<C> &a, long long begin,
                                                     long long end) {
  static_assert(C::kV == 1, "one column at a time");
  for (long long f = begin + threadIdx.x; f < end; f += blockDim.x) {
    const long long row = f / C::L, c = f % C::L;
    const RowPos p = rowPos<C::D0, C::D1, C::D2>(row);
    long long drow = 0;
    if constexpr (C::Store::kSetRows) {
      drow = (long long)a.idx[C::Idx::at(p.r1)];
      if (drow < 0 || drow >= C::Store::kRows)
        continue;
    }
    RowValues<C, 1> val{a.x + C::X::base(p), a.w + C::W::base(p), a.res + C::Res::base(p),
                        {0.0f, 1.0f}};
    C::Map::template runChannel<C>(a, val, row, p, drow, c);
  }
}

/// Element f of the flattened row space (row · L + column) of a row op
/// without statistics or epilogue operands (rope in normal mode, set_rows,
/// rope_set_rows), given its value v and, for a rope, the value vp of its
/// pair partner f ^ 1: a GEMV's store tail (GemvTails.cpp, the register
/// form), run by the thread that stores element f of the GEMV's result, on
/// the value it stores. Same values as normRows.
/// What normRowsElement reads besides the value, read ahead: the rope angle
/// of the element and its cache row.
struct FgElementEarly {
  float angle[2] = {1.0f, 0.0f};
  long long drow = 0;
};

/// `early`: element f's angle and cache row from normRowsElementEarly, or null.
template <class C>
static __device__ __forceinline__ void normRowsElement(const NormArgs<C> &a, long long f,
                                                       float v, float vp,
                                                       const FgElementEarly *early = nullptr) {
  static_assert(!C::kMul && !C::kAdd, "no epilogue operands: the value is the row's own");
  const long long row = f / C::L, c = f % C::L;
  const RowPos p = rowPos<C::D0, C::D1, C::D2>(row);
  long long drow = 0;
  if constexpr (C::Store::kSetRows) {
    drow = early ? early->drow : (long long)a.idx[C::Idx::at(p.r1)];
    if (drow < 0 || drow >= C::Store::kRows)
      return;
  }
  C::Map::template putChannel<C>(a, row, p, drow, c, v, vp, early ? early->angle : nullptr);
}

/// Element f's angle and cache row for normRowsElement, read ahead (a store
/// tail's GEMV, before its wait: EmitOptions::gemvStoreTailEarly).
template <class C>
static __device__ __forceinline__ void normRowsElementEarly(const NormArgs<C> &a, long long f,
                                                            FgElementEarly &e) {
  const long long row = f / C::L, c = f % C::L;
  const RowPos p = rowPos<C::D0, C::D1, C::D2>(row);
  if constexpr (C::Store::kSetRows)
    e.drow = (long long)a.idx[C::Idx::at(p.r1)];
  C::Map::template channelAngle<C>(a, p, c, e.angle[0], e.angle[1]);
}

// --- softmax ------------------------------------------------------------------------

/// softmax over each row of x·scale + slope·mask (mask broadcast into the
/// row space; ALiBi slope of head h = r1 when Cfg::kAlibi).
template <class C> struct SoftmaxArgs {
  typename C::Out *out;
  const typename C::X::T *__restrict__ x;
  const typename C::Mask::T *__restrict__ mask;
};

template <class C> static __device__ __forceinline__ void softmaxRows(const SoftmaxArgs<C> &a) {
  constexpr int G = C::kGroup, V = C::kV;
  fgForItems<C>([&](long long row, long long part, int g) {
    const RowPos p = rowPos<C::D0, C::D1, C::D2>(row);
    float slope = 1.0f;
    if constexpr (C::kAlibi) {
      const long long h = p.r1;
      slope = h < C::kAlibiN2
                  ? powf(__int_as_float(C::kM0Bits), (float)(h + 1))
                  : powf(__int_as_float(C::kM1Bits), (float)(2 * (h - C::kAlibiN2) + 1));
    }
    const typename C::X::T *xr = a.x + C::X::base(p);
    const typename C::Mask::T *mr = a.mask + C::Mask::base(p);
    const float scale = __int_as_float(C::kScaleBits);
    // v(c) for V columns from c.
    auto vals = [&](long long c, float(&v)[V]) {
      fgLoad<V>(xr + c * C::X::kSc, v);
      if constexpr (C::kMask) {
        float m[V];
        fgLoad<V>(mr + c * C::Mask::kSc, m);
#pragma unroll
        for (int e = 0; e < V; ++e)
          v[e] = v[e] * scale + slope * m[e];
      } else {
#pragma unroll
        for (int e = 0; e < V; ++e)
          v[e] = v[e] * scale;
      }
    };
    constexpr long long N = C::L / V, kIters = (N + G - 1) / G;
    constexpr int U = kIters < 4 ? (int)kIters : 4;
    float m = -FG_INF;
    for (long long i0 = 0; i0 < kIters; i0 += U) {
      float v[U][V];
#pragma unroll
      for (int u = 0; u < U; ++u)
        if (g + (i0 + u) * G < N)
          vals((g + (i0 + u) * G) * V, v[u]);
#pragma unroll
      for (int u = 0; u < U; ++u)
        if (g + (i0 + u) * G < N) {
#pragma unroll
          for (int e = 0; e < V; ++e)
            m = fmaxf(m, v[u][e]);
        }
    }
    m = fgGroupMax<G>(m);
    float s = 0.0f;
    for (long long i0 = 0; i0 < kIters; i0 += U) {
      float v[U][V];
#pragma unroll
      for (int u = 0; u < U; ++u)
        if (g + (i0 + u) * G < N)
          vals((g + (i0 + u) * G) * V, v[u]);
#pragma unroll
      for (int u = 0; u < U; ++u)
        if (g + (i0 + u) * G < N) {
#pragma unroll
          for (int e = 0; e < V; ++e)
            s += expf(v[u][e] - m);
        }
    }
    const float inv = 1.0f / fgGroupSum<G>(s);
    using Sl = FgSlice<N, C::kSplit>;
    const long long end = Sl::end(part);
    for (long long j = Sl::begin(part) + g; j < end; j += G) {
      float v[V];
      vals(j * V, v);
#pragma unroll
      for (int e = 0; e < V; ++e)
        v[e] = expf(v[e] - m) * inv;
      fgStore<V>(a.out + row * C::L + j * V, v);
    }
  });
}

// --- sum_rows, mean -------------------------------------------------------------------

template <class C> struct SumArgs {
  typename C::Out *out;
  const typename C::X::T *__restrict__ x;
};

/// out[row] = Σ x (/ L when Cfg::kMean).
template <class C> static __device__ __forceinline__ void sumRows(const SumArgs<C> &a) {
  static_assert(C::kSplit == 1, "a sum has one result per row");
  fgForItems<C>([&](long long row, long long, int g) {
    const RowPos p = rowPos<C::D0, C::D1, C::D2>(row);
    float s = fgRowFold<typename C::X, C::L, C::kVX, C::kGroup>(
        a.x + C::X::base(p), g, 0.0f, [](float acc, float v) { return acc + v; });
    s = fgGroupSum<C::kGroup>(s);
    if constexpr (C::kMean)
      s = s / (float)C::L;
    if (g == 0)
      a.out[row] = fg_from_f<typename C::Out>(s);
  });
}

// --- argsort, top_k -------------------------------------------------------------------

/// NaN sorts as -inf.
static __device__ __forceinline__ float fgSortKey(float v) { return isnan(v) ? -FG_INF : v; }

template <class C> struct RankArgs {
  int *out;
  const typename C::X::T *__restrict__ x;
};

/// argsort / top_k by rank counting: element i's rank is the number of
/// elements ordered before it (value, then index, so the sort is stable and
/// ties go to the lower index); ranks below Cfg::K are written. O(L²) per
/// row; the row's keys are staged in shared memory when Cfg::kShared.
template <class C> static __device__ __forceinline__ void rankRows(const RankArgs<C> &a) {
  static_assert(C::kSplit == 1 && C::kGroup == C::kThreads, "one block per row");
  extern __shared__ float vals[];
  fgForItems<C>([&](long long row, long long, int g) {
    const RowPos p = rowPos<C::D0, C::D1, C::D2>(row);
    const typename C::X::T *xr = a.x + C::X::base(p);
    auto key = [&](long long j) {
      if constexpr (C::kShared)
        return vals[j];
      else
        return fgSortKey(fg_to_f(xr[j * C::X::kSc]));
    };
    if constexpr (C::kShared) {
      __syncthreads();
      for (long long j = g; j < C::L; j += C::kGroup)
        vals[j] = fgSortKey(fg_to_f(xr[j * C::X::kSc]));
      __syncthreads();
    }
    for (long long i = g; i < C::L; i += C::kGroup) {
      const float vi = key(i);
      long long rank = 0;
      for (long long j = 0; j < C::L; ++j) {
        const float vj = key(j);
        rank += (C::kDesc ? vj > vi : vj < vi) || (vj == vi && j < i);
      }
      if (rank < C::K)
        a.out[row * C::K + rank] = (int)i;
    }
  });
}

} // namespace fg
