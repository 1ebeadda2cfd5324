//===- elementwise.cuh - one thread per output element -----------------------------===//
//
// ewMap<Cfg>: a grid-stride loop over an index space of up to four dims
// (Cfg::D0..D3, right-aligned, padded with 1), one element a thread (opt-in:
// Cfg::kIlp elements prefetched first, or Cfg::kVec, 4 consecutive elements
// by vector loads; see ewMap); each index is unravelled with
// constant divisors into a position (c0, c1, c2, c3) and Cfg::Fn computes
// that element. Operands are read through their own strides as
// EwOp<T, off, s0, s1, s2, s3> (broadcast dims have stride 0), so views are
// never materialised. The emitter (ElementwiseEmitter.cpp) writes the Cfg and
// a one-line entry; it never writes kernel code. The policy axes:
//
//   Cfg::Fn    what one element is: EwUnary<U>, EwBinary<Op>, EwBinaryInt<Op>,
//              EwGlu<kind, alpha, limit>, EwChain<Op, Round...>, EwUnaryMul<U,
//              Round>, EwReluSqr, EwSoftcap<in, out, Round>, EwConvert,
//              EwRepeat<shape>, EwConcat<axis, split>, EwGetRows<rows, stride>,
//              EwAddId<rows, stride>, EwSetRows<Dest, rows, stride>,
//              EwMoeWeightedSum<k, strides..., residual>
//   U          the unary math: UnSqrt, UnSqr, UnExp, UnTanh, UnSigmoid, UnSilu,
//              UnGelu, UnRelu, UnSoftplus, UnNeg (fg::Un<Kind> of each FG_UNARY row
//              of ir/Ops.def), UnScale<s, b>, UnClamp<lo, hi>
//   Round      the dtype a step of a fused chain stores (float: none), so the
//              fused kernel equals the unfused chain
//
// Floats that come from attributes travel as their bits (__int_as_float),
// which keeps every value, infinities included, exact.
//
//===----------------------------------------------------------------------===//

namespace fg {

// --- index space and operands -------------------------------------------------------

struct EwPos {
  long long c0, c1, c2, c3;
};

template <long long D0, long long D1, long long D2, long long D3>
static __device__ __forceinline__ EwPos ewPos(long long i) {
  EwPos p;
  p.c3 = D3 == 1 ? 0 : i % D3;
  i = D3 == 1 ? i : i / D3;
  p.c2 = D2 == 1 ? 0 : i % D2;
  i = D2 == 1 ? i : i / D2;
  p.c1 = D1 == 1 ? 0 : i % D1;
  p.c0 = D1 == 1 ? i : i / D1;
  return p;
}

/// Element (c0, c1, c2, c3) at Off + Σ c·s.
template <class T_, long long Off, long long S0, long long S1, long long S2, long long S3>
struct EwOp {
  using T = T_;
  static __device__ __forceinline__ long long at(const EwPos &p) {
    return Off + p.c0 * S0 + p.c1 * S1 + p.c2 * S2 + p.c3 * S3;
  }
};

template <class... Ops> struct EwList {};
template <int K, class L> struct EwAt;
template <class H, class... R> struct EwAt<0, EwList<H, R...>> { using type = H; };
template <int K, class H, class... R> struct EwAt<K, EwList<H, R...>> {
  using type = typename EwAt<K - 1, EwList<R...>>::type;
};

/// The pointers of one launch: the result, then the operands in Cfg::Ins order.
template <class C> struct EwArgs {
  typename C::Out *out;
  const void *in[C::kIns];
};

/// Operand K's element at p, raw (its storage type) or as a float.
template <int K, class C>
static __device__ __forceinline__ typename EwAt<K, typename C::Ins>::type::T
ewRaw(const EwArgs<C> &a, const EwPos &p) {
  using Op = typename EwAt<K, typename C::Ins>::type;
  return static_cast<const typename Op::T *>(a.in[K])[Op::at(p)];
}
template <int K, class C>
static __device__ __forceinline__ float ewF(const EwArgs<C> &a, const EwPos &p) {
  return fg_to_f(ewRaw<K, C>(a, p));
}

/// v rounded through the storage type R and read back (float: unchanged).
template <class R> static __device__ __forceinline__ float ewRound(float v) {
  return fg_to_f(fg_from_f<R>(v));
}

template <class T> struct EwIsInt { static constexpr bool value = false; };
template <> struct EwIsInt<int> { static constexpr bool value = true; };
template <> struct EwIsInt<long long> { static constexpr bool value = true; };
template <class A, class B> struct EwSame { static constexpr bool value = false; };
template <class A> struct EwSame<A, A> { static constexpr bool value = true; };

/// A stored value of `From` converted to `To` (integers through float, like the reference).
template <class To, class From> static __device__ __forceinline__ To ewConvert(From v) {
  if constexpr (EwSame<To, From>::value)
    return v;
  else if constexpr (EwIsInt<To>::value && EwIsInt<From>::value)
    return (To)v;
  else if constexpr (EwIsInt<From>::value)
    return fg_from_f<To>((float)v);
  else
    return fg_from_f<To>(fg_to_f(v));
}

// --- unary math ---------------------------------------------------------------------

struct UnSqrt {
  static __device__ __forceinline__ float apply(float x) { return sqrtf(x); }
};
struct UnSqr {
  static __device__ __forceinline__ float apply(float x) { return x * x; }
};
struct UnExp {
  static __device__ __forceinline__ float apply(float x) { return expf(x); }
};
struct UnTanh {
  static __device__ __forceinline__ float apply(float x) { return tanhf(x); }
};
struct UnSigmoid {
  static __device__ __forceinline__ float apply(float x) { return 1.0f / (1.0f + expf(-x)); }
};
struct UnSilu {
  static __device__ __forceinline__ float apply(float x) { return x / (1.0f + expf(-x)); }
};
struct UnGelu {
  static __device__ __forceinline__ float apply(float x) {
    return 0.5f * x * (1.0f + tanhf(0.7978845608028654f * (x + 0.044715f * x * x * x)));
  }
};
struct UnRelu {
  static __device__ __forceinline__ float apply(float x) { return fmaxf(x, 0.0f); }
};
struct UnSoftplus {
  static __device__ __forceinline__ float apply(float x) { return x > 20.0f ? x : log1pf(expf(x)); }
};
struct UnNeg {
  static __device__ __forceinline__ float apply(float x) { return -x; }
};
template <int ScaleBits, int BiasBits> struct UnScale {
  static __device__ __forceinline__ float apply(float x) {
    return x * __int_as_float(ScaleBits) + __int_as_float(BiasBits);
  }
};
template <int MinBits, int MaxBits> struct UnClamp {
  static __device__ __forceinline__ float apply(float x) {
    return fminf(fmaxf(x, __int_as_float(MinBits)), __int_as_float(MaxBits));
  }
};

// --- binary operators ----------------------------------------------------------------

struct BinAdd {
  template <class V> static __device__ __forceinline__ V apply(V a, V b) { return a + b; }
};
struct BinSub {
  template <class V> static __device__ __forceinline__ V apply(V a, V b) { return a - b; }
};
struct BinMul {
  template <class V> static __device__ __forceinline__ V apply(V a, V b) { return a * b; }
};
struct BinDiv {
  template <class V> static __device__ __forceinline__ V apply(V a, V b) { return a / b; }
};

// --- element functions (Cfg::Fn) -----------------------------------------------------

template <class U> struct EwUnary {
  template <class C>
  static __device__ __forceinline__ void run(const EwArgs<C> &a, long long i, const EwPos &p) {
    a.out[i] = fg_from_f<typename C::Out>(U::apply(ewF<0>(a, p)));
  }
};

template <class Op> struct EwBinary {
  template <class C>
  static __device__ __forceinline__ void run(const EwArgs<C> &a, long long i, const EwPos &p) {
    a.out[i] = fg_from_f<typename C::Out>(Op::apply(ewF<0>(a, p), ewF<1>(a, p)));
  }
};

/// Integers: in long long; x / 0 is 0.
template <class Op> struct EwBinaryInt {
  template <class C>
  static __device__ __forceinline__ void run(const EwArgs<C> &a, long long i, const EwPos &p) {
    const long long x = (long long)ewRaw<0>(a, p), y = (long long)ewRaw<1>(a, p);
    if constexpr (EwSame<Op, BinDiv>::value)
      a.out[i] = (typename C::Out)(y == 0 ? 0LL : x / y);
    else
      a.out[i] = (typename C::Out)Op::apply(x, y);
  }
};

enum EwGluKind { kEwSwiGLU = 0, kEwGeGLU = 1, kEwSwiGLUOAI = 2, kEwSwiGLUClamp = 3 };

/// glu(g, u) (the CPU reference's formulas, in float).
template <int Kind, int AlphaBits, int LimitBits> struct EwGlu {
  template <class C>
  static __device__ __forceinline__ void run(const EwArgs<C> &a, long long i, const EwPos &p) {
    const float g = ewF<0>(a, p), u = ewF<1>(a, p);
    const float alpha = __int_as_float(AlphaBits), limit = __int_as_float(LimitBits);
    float y;
    if constexpr (Kind == kEwSwiGLU) {
      y = g / (1.0f + expf(-g)) * u;
    } else if constexpr (Kind == kEwGeGLU) {
      y = UnGelu::apply(g);
      y *= u;
    } else {
      const float gc = fminf(g, limit);
      const float uc = fminf(fmaxf(u, -limit), limit);
      if constexpr (Kind == kEwSwiGLUOAI)
        y = gc / (1.0f + expf(-alpha * gc)) * (uc + 1.0f);
      else
        y = gc / (1.0f + expf(-gc)) * uc;
    }
    a.out[i] = fg_from_f<typename C::Out>(y);
  }
};

/// a = in0; a = round_k(a op in_k) for each link k = 1.. (Round... one per link).
template <class Op, class... Round> struct EwChain {
  template <class C, int K, class R, class... Rest>
  static __device__ __forceinline__ float link(const EwArgs<C> &a, const EwPos &p, float acc) {
    acc = ewRound<R>(Op::apply(acc, ewF<K>(a, p)));
    if constexpr (sizeof...(Rest) > 0)
      return link<C, K + 1, Rest...>(a, p, acc);
    else
      return acc;
  }
  template <class C>
  static __device__ __forceinline__ void run(const EwArgs<C> &a, long long i, const EwPos &p) {
    a.out[i] = fg_from_f<typename C::Out>(link<C, 1, Round...>(a, p, ewF<0>(a, p)));
  }
};

/// act(x) rounded to x's dtype, times g.
template <class U, class Round> struct EwUnaryMul {
  template <class C>
  static __device__ __forceinline__ void run(const EwArgs<C> &a, long long i, const EwPos &p) {
    const float x = ewF<0>(a, p);
    const float act = ewRound<Round>(U::apply(x));
    a.out[i] = fg_from_f<typename C::Out>(act * ewF<1>(a, p));
  }
};

/// relu is exact in every float type; sqr rounds once.
struct EwReluSqr {
  template <class C>
  static __device__ __forceinline__ void run(const EwArgs<C> &a, long long i, const EwPos &p) {
    const float r = fmaxf(ewF<0>(a, p), 0.0f);
    a.out[i] = fg_from_f<typename C::Out>(r * r);
  }
};

/// tanh(x · in) · out, each step rounded to x's dtype.
template <int InBits, int OutBits, class Round> struct EwSoftcap {
  template <class C>
  static __device__ __forceinline__ void run(const EwArgs<C> &a, long long i, const EwPos &p) {
    const float s = ewRound<Round>(ewF<0>(a, p) * __int_as_float(InBits) + 0.0f);
    const float t = ewRound<Round>(tanhf(s));
    a.out[i] = fg_from_f<typename C::Out>(t * __int_as_float(OutBits) + 0.0f);
  }
};

/// convert, cont: the stored value in the result's dtype.
struct EwConvert {
  template <class C>
  static __device__ __forceinline__ void run(const EwArgs<C> &a, long long i, const EwPos &p) {
    a.out[i] = ewConvert<typename C::Out>(ewRaw<0>(a, p));
  }
};

/// repeat: the operand (shape R0..R3, right-aligned) read at c mod R.
template <long long R0, long long R1, long long R2, long long R3> struct EwRepeat {
  template <class C>
  static __device__ __forceinline__ void run(const EwArgs<C> &a, long long i, const EwPos &p) {
    const EwPos q{R0 == 1 ? 0 : p.c0 % R0, R1 == 1 ? 0 : p.c1 % R1, R2 == 1 ? 0 : p.c2 % R2,
                  R3 == 1 ? 0 : p.c3 % R3};
    a.out[i] = ewRaw<0>(a, q);
  }
};

/// concat along position dim Axis: in0 below Split, in1 (shifted) from it.
template <int Axis, long long Split> struct EwConcat {
  template <class C>
  static __device__ __forceinline__ void run(const EwArgs<C> &a, long long i, const EwPos &p) {
    EwPos q = p;
    long long &c = Axis == 0 ? q.c0 : Axis == 1 ? q.c1 : Axis == 2 ? q.c2 : q.c3;
    if (c < Split) {
      a.out[i] = ewRaw<0>(a, p);
    } else {
      c -= Split;
      a.out[i] = ewRaw<1>(a, q);
    }
  }
};

/// get_rows(table, idx): row = idx[..]; the table read at its row stride
/// (Ins: table with stride 0 at the row's dim, idx); rows out of range read 0.
template <long long Rows, long long RowStride> struct EwGetRows {
  template <class C>
  static __device__ __forceinline__ void run(const EwArgs<C> &a, long long i, const EwPos &p) {
    using Table = typename EwAt<0, typename C::Ins>::type;
    const long long row = (long long)ewRaw<1>(a, p);
    const auto *t = static_cast<const typename Table::T *>(a.in[0]);
    const bool ok = row >= 0 && row < Rows;
    if constexpr (EwIsInt<typename C::Out>::value)
      a.out[i] = ok ? (typename C::Out)t[Table::at(p) + row * RowStride] : (typename C::Out)0;
    else
      a.out[i] = fg_from_f<typename C::Out>(ok ? fg_to_f(t[Table::at(p) + row * RowStride]) : 0.0f);
  }
};

/// add_id(a, b, ids): a + b[ids[t, j], n] (Ins: a, b with stride 0 for the
/// expert, ids); an id out of range adds 0.
template <long long Rows, long long RowStride> struct EwAddId {
  template <class C>
  static __device__ __forceinline__ void run(const EwArgs<C> &a, long long i, const EwPos &p) {
    using B = typename EwAt<1, typename C::Ins>::type;
    const long long e = (long long)ewRaw<2>(a, p);
    const float bv =
        (e >= 0 && e < Rows)
            ? fg_to_f(static_cast<const typename B::T *>(a.in[1])[B::at(p) + e * RowStride])
            : 0.0f;
    a.out[i] = fg_from_f<typename C::Out>(ewF<0>(a, p) + bv);
  }
};

/// set_rows(dest, src, idx) over src's index space: dest[idx[n], c..] =
/// src[n, c..] in dest's dtype (out: dest, laid out as Dest with stride 0 for
/// the row; Ins: src, idx); rows out of range are skipped.
template <class Dest, long long Rows, long long RowStride> struct EwSetRows {
  template <class C>
  static __device__ __forceinline__ void run(const EwArgs<C> &a, long long, const EwPos &p) {
    const long long row = (long long)ewRaw<1>(a, p);
    if (row < 0 || row >= Rows)
      return;
    a.out[Dest::at(p) + row * RowStride] = ewConvert<typename C::Out>(ewRaw<0>(a, p));
  }
};

/// out[t, n] = Σ_j (experts[t, j, n] (· scale[t, j])) · weights[t, j] in slot
/// order (Ins: experts, weights, scale? — each with stride 0 for j; Sj: their
/// strides along j). With Res (fused.moe_weighted_sum_add) the sum is then
/// added to residual[t, n], read at the element written (Ins: experts,
/// weights, residual, scale?: the op's operand order).
template <long long K, bool Scale, long long ESj, long long WSj, long long SSj, bool Res = false>
struct EwMoeWeightedSum {
  static constexpr int kScaleAt = Res ? 3 : 2;
  template <class C>
  static __device__ __forceinline__ void run(const EwArgs<C> &a, long long i, const EwPos &p) {
    using Ex = typename EwAt<0, typename C::Ins>::type;
    using Wt = typename EwAt<1, typename C::Ins>::type;
    const auto *ex = static_cast<const typename Ex::T *>(a.in[0]) + Ex::at(p);
    const auto *wt = static_cast<const typename Wt::T *>(a.in[1]) + Wt::at(p);
    float s = 0.0f;
    for (long long j = 0; j < K; ++j) {
      float e = fg_to_f(ex[j * ESj]);
      if constexpr (Scale) {
        using Sc = typename EwAt<kScaleAt, typename C::Ins>::type;
        const auto *sc = static_cast<const typename Sc::T *>(a.in[kScaleAt]) + Sc::at(p);
        e = e * fg_to_f(sc[j * SSj]);
      }
      const float y = e * fg_to_f(wt[j * WSj]);
      s = j == 0 ? y : y + s;
    }
    if constexpr (Res) {
      using Rs = typename EwAt<2, typename C::Ins>::type;
      s = s + fg_to_f(static_cast<const typename Rs::T *>(a.in[2])[Rs::at(p)]);
    }
    a.out[i] = fg_from_f<typename C::Out>(s);
  }
};

// --- the kernel -------------------------------------------------------------------------

/// Asks for operand K.. of element p into L1 (prefetch.global.L1: no
/// register, no wait), so several elements' loads are in flight at once.
template <int K, class C> struct EwPrefetch {
  static __device__ __forceinline__ void run(const EwArgs<C> &a, const EwPos &p) {
    if constexpr (K < C::kIns) {
      using Op = typename EwAt<K, typename C::Ins>::type;
      const typename Op::T *addr = static_cast<const typename Op::T *>(a.in[K]) + Op::at(p);
      asm volatile("prefetch.global.L1 [%0];" ::"l"(addr));
      EwPrefetch<K + 1, C>::run(a, p);
    }
  }
};

// --- the vector form (C::kVec) ----------------------------------------------------------
//
// Every operand is read at the output's own flat index (the emitter checked
// the strides), so a thread takes 4 consecutive elements: one 8- or 16-byte
// load per operand into registers, Cfg::Fn run on them through EwVecCfg (the
// same Fn and Out, operands re-pointed at the registers: EwOp<T, 0, 0, 0, 0,
// 1> over a space of 4), one vector store. Any Fn that reads its operands at
// the output's position works unchanged.

template <class L> struct EwRegList;
template <class... Ops> struct EwRegList<EwList<Ops...>> {
  using type = EwList<EwOp<typename Ops::T, 0, 0, 0, 0, 1>...>;
};
template <class C> struct EwVecCfg {
  using Out = typename C::Out;
  using Ins = typename EwRegList<typename C::Ins>::type;
  using Fn = typename C::Fn;
  static constexpr int kIns = C::kIns, kIlp = 1;
  static constexpr bool kVec = false;
  static constexpr long long D0 = 1, D1 = 1, D2 = 1, D3 = 4;
};

/// 4 elements of T between global memory and a register buffer, as 8, 16 or
/// 2 × 16 bytes.
template <class T> static __device__ __forceinline__ void ewCopy4(void *dst, const void *src) {
  if constexpr (sizeof(T) == 2) {
    *static_cast<uint2 *>(dst) = *static_cast<const uint2 *>(src);
  } else if constexpr (sizeof(T) == 4) {
    *static_cast<uint4 *>(dst) = *static_cast<const uint4 *>(src);
  } else {
    static_cast<uint4 *>(dst)[0] = static_cast<const uint4 *>(src)[0];
    static_cast<uint4 *>(dst)[1] = static_cast<const uint4 *>(src)[1];
  }
}

/// Operand K.. of flat element i: 4 elements into buf[K], and whether every
/// address is aligned for the vector loads.
template <int K, class C> struct EwVecOps {
  static __device__ __forceinline__ bool aligned(const EwArgs<C> &a) {
    if constexpr (K < C::kIns) {
      using Op = typename EwAt<K, typename C::Ins>::type;
      const typename Op::T *p = static_cast<const typename Op::T *>(a.in[K]) + Op::at(EwPos{0, 0, 0, 0});
      return reinterpret_cast<unsigned long long>(p) % (4 * sizeof(typename Op::T)) == 0 &&
             EwVecOps<K + 1, C>::aligned(a);
    } else {
      return true;
    }
  }
  static __device__ __forceinline__ void load(const EwArgs<C> &a, const EwPos &p,
                                              uint4 (&buf)[C::kIns][2]) {
    if constexpr (K < C::kIns) {
      using Op = typename EwAt<K, typename C::Ins>::type;
      ewCopy4<typename Op::T>(buf[K], static_cast<const typename Op::T *>(a.in[K]) + Op::at(p));
      EwVecOps<K + 1, C>::load(a, p, buf);
    }
  }
};

template <class C> static __device__ __forceinline__ void ewMap(const EwArgs<C> &a) {
  constexpr long long N = C::D0 * C::D1 * C::D2 * C::D3;
  if constexpr (C::kVec) {
    using V = EwVecCfg<C>;
    constexpr long long NV = N / 4;
    // C::kGroups groups of 4 a thread, blockDim apart (coalesced), every
    // group's operands loaded before the first is computed: more bytes in
    // flight a thread where the operands are 16-bit (8-byte loads).
    constexpr int U = C::kGroups;
    const long long stride = (long long)gridDim.x * blockDim.x;
    long long tail = 0; // flat elements the vector loop covers
    if (EwVecOps<0, C>::aligned(a) &&
        reinterpret_cast<unsigned long long>(a.out) % (4 * sizeof(typename C::Out)) == 0) {
      for (long long q0 = (long long)blockIdx.x * blockDim.x * U + threadIdx.x; q0 < NV;
           q0 += stride * U) {
        uint4 buf[U][C::kIns][2];
#pragma unroll
        for (int u = 0; u < U; ++u) {
          const long long q = q0 + (long long)u * blockDim.x;
          if (U == 1 || q < NV)
            EwVecOps<0, C>::load(a, ewPos<C::D0, C::D1, C::D2, C::D3>(4 * q), buf[u]);
        }
#pragma unroll
        for (int u = 0; u < U; ++u) {
          const long long q = q0 + (long long)u * blockDim.x;
          if (U > 1 && q >= NV)
            break;
          uint4 ob[2];
          EwArgs<V> r;
          r.out = reinterpret_cast<typename C::Out *>(ob);
#pragma unroll
          for (int k = 0; k < C::kIns; ++k)
            r.in[k] = buf[u][k];
#pragma unroll
          for (int j = 0; j < 4; ++j)
            C::Fn::template run<V>(r, j, EwPos{0, 0, 0, j});
          ewCopy4<typename C::Out>(a.out + 4 * q, ob);
        }
      }
      tail = 4 * NV;
    }
    for (long long i = tail + (long long)blockIdx.x * blockDim.x + threadIdx.x; i < N; i += stride)
      C::Fn::template run<C>(a, i, ewPos<C::D0, C::D1, C::D2, C::D3>(i));
    return;
  }
  if constexpr (C::kIlp > 1) {
    // C::kIlp elements a thread, blockDim apart (coalesced): every operand
    // of all of them is prefetched before the first is computed. One 4-byte
    // load in flight per thread (the plain loop) caps an SM at ~8 KB in
    // flight, ~1.4 TB/s over the GPU (W-dense prefill's converts, H200).
    constexpr int U = C::kIlp;
    const long long step = (long long)gridDim.x * blockDim.x * U;
    for (long long base = (long long)blockIdx.x * blockDim.x * U + threadIdx.x; base < N;
         base += step) {
#pragma unroll
      for (int u = 0; u < U; ++u) {
        const long long i = base + (long long)u * blockDim.x;
        if (i < N)
          EwPrefetch<0, C>::run(a, ewPos<C::D0, C::D1, C::D2, C::D3>(i));
      }
#pragma unroll
      for (int u = 0; u < U; ++u) {
        const long long i = base + (long long)u * blockDim.x;
        if (i < N)
          C::Fn::template run<C>(a, i, ewPos<C::D0, C::D1, C::D2, C::D3>(i));
      }
    }
    return;
  }
  for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < N;
       i += (long long)gridDim.x * blockDim.x)
    C::Fn::template run<C>(a, i, ewPos<C::D0, C::D1, C::D2, C::D3>(i));
}

} // namespace fg
