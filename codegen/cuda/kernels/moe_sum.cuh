//===- moe_sum.cuh - one token's expert down projection with the MoE sum, float weights ===//
//
// fused.matmul_id_sum_add of one token with f16, bf16 or f32 weights (after
// gemv.cuh, whose decoders it reads with):
//   y[n] = Σ_j sw[j] · (W[ids[j]] · x[j])[n] + res[n]
// A warp a row n: the k slots' expert rows laid end to end as one row of
// k·Kc weights, lane l taking the 16-byte units l, l + 32, ... of it (C::kChunk
// units loaded before any arithmetic), each unit's dot with its slice of x
// (one contiguous f32 row of k·Kc, read through L1: every warp reads it)
// scaled by its slot's routing weight as it is added. A lane's sum and the
// warp's reduction run in one fixed order: the same bits at every replay, no
// atomics. An expert id out of [0, E) contributes nothing (as the DP4A form,
// gemv_dp4a.cuh Dp4aMoeSum). The experts come from the kernels before, so
// nothing loads before the programmatic-launch wait — unless the lowering
// proved that the launches writing the ids and routing weights have finished
// whenever this one starts (codegen/cuda/EarlyExperts.h, Cfg::kEarlyIds):
// then the entry's prologue reads them (at L2, ld.global.cg) and loads the
// first chunk of its warp's first row before the wait. Same loads, same
// order of sums: the same bits either way.
//
//===----------------------------------------------------------------------===//

namespace fg {

template <class C> struct MoeSumArgs {
  float *y;
  const float *x;
  const typename C::W *w;
  const typename C::Ids *ids;
  const typename C::SW *sw;
  const typename C::R *res;
};

/// The k slots' experts and routing weights (an id out of [0, E): -1 and
/// weight 0), one copy a block.
template <class C> struct MoeSumSlots {
  long long ex[C::kk];
  float wt[C::kk];
};
template <class C> static __device__ __forceinline__ MoeSumSlots<C> &moeSumSlots() {
  __shared__ MoeSumSlots<C> s;
  return s;
}

/// Reads the slots into shared memory (ld.global.cg: L2, the point of
/// coherence, as the prologue needs), then a barrier.
template <class C> static __device__ __forceinline__ void moeSumReadSlots(const MoeSumArgs<C> &a) {
  MoeSumSlots<C> &sl = moeSumSlots<C>();
  for (int j = threadIdx.x; j < C::kk; j += blockDim.x) {
    const long long e = (long long)fg_ldcg(a.ids + C::ids_off + j * C::ids_sj);
    const bool ok = e >= 0 && e < C::E;
    sl.ex[j] = ok ? e : -1;
    sl.wt[j] = ok ? fg_to_f(fg_ldcg(a.sw + C::sw_off + j * C::sw_sj)) : 0.0f;
  }
  __syncthreads();
}

template <class C> struct MoeSumUnits {
  using D = typename C::Dec;
  static constexpr int V = D::kPerLoad, U = C::Kc / V, KU = C::kk * U; // units a slot, a row
  static constexpr int UL = (KU + 31) / 32, CH = C::kChunk;            // units a lane, in flight
};

/// Chunk i0 of row n's units for this lane (zeros past the row and for an
/// invalid expert). Weights only: never written by a kernel.
template <class C>
static __device__ __forceinline__ void moeSumLoad(const MoeSumArgs<C> &a, long long n, int i0,
                                                  uint4 (&r)[C::kChunk]) {
  using M = MoeSumUnits<C>;
  const MoeSumSlots<C> &sl = moeSumSlots<C>();
  const int lane = threadIdx.x & 31;
#pragma unroll
  for (int i = 0; i < M::CH; ++i) {
    const int u = lane + 32 * (i0 + i), j = u / M::U;
    r[i] = make_uint4(0u, 0u, 0u, 0u);
    if (i0 + i < M::UL && u < M::KU && sl.ex[j] >= 0)
      r[i] = fg_load_stream(a.w + C::w_off + sl.ex[j] * C::w_es + n * C::w_ld + (u - j * M::U) * M::V);
  }
}

/// What the prologue loaded: the first chunk of this warp's first row.
template <class C> struct MoeSumPre {
  uint4 r[C::kChunk];
};

/// The entry's prologue: with Cfg::kEarlyIds the slots and the first chunk,
/// before the programmatic-launch wait; else nothing.
template <class C>
static __device__ __forceinline__ MoeSumPre<C> moeSumPrologue(const MoeSumArgs<C> &a) {
  MoeSumPre<C> p;
  if constexpr (C::kEarlyIds) {
    moeSumReadSlots<C>(a);
    const long long n = (long long)blockIdx.x * C::kWarps + (threadIdx.x >> 5);
    if (n < C::N)
      moeSumLoad<C>(a, n, 0, p.r);
  }
  return p;
}

template <class C>
static __device__ __forceinline__ void moeSumFloat(const MoeSumArgs<C> &a, const MoeSumPre<C> &pre) {
  using D = typename C::Dec;
  using M = MoeSumUnits<C>;
  constexpr int V = M::V, U = M::U, KU = M::KU, UL = M::UL, CH = M::CH;
  static_assert(C::Kc % V == 0 && V % 4 == 0, "whole 16-byte units of weights, float4 of x");
  if constexpr (!C::kEarlyIds)
    moeSumReadSlots<C>(a);
  const MoeSumSlots<C> &sl = moeSumSlots<C>();
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  bool first = true; // this warp's first row: its first chunk is in `pre` (kEarlyIds)
  for (long long n = (long long)blockIdx.x * C::kWarps + warp; n < C::N;
       n += (long long)gridDim.x * C::kWarps, first = false) {
    float s = 0.0f;
#pragma unroll
    for (int i0 = 0; i0 < UL; i0 += CH) {
      uint4 r[CH];
      if (C::kEarlyIds && first && i0 == 0) {
#pragma unroll
        for (int i = 0; i < CH; ++i)
          r[i] = pre.r[i];
      } else {
        moeSumLoad<C>(a, n, i0, r);
      }
#pragma unroll
      for (int i = 0; i < CH; ++i) {
        const int u = lane + 32 * (i0 + i), j = u / U;
        if (i0 + i >= UL || u >= KU)
          continue;
        float w[V];
        D::decode(r[i], w);
        const float4 *xp =
            reinterpret_cast<const float4 *>(a.x + C::x_off + (long long)j * C::Kc + (u - j * U) * V);
        float d = 0.0f;
#pragma unroll
        for (int v = 0; v < V; v += 4) {
          const float4 x4 = __ldg(xp + v / 4);
          d = fmaf(w[v], x4.x, d);
          d = fmaf(w[v + 1], x4.y, d);
          d = fmaf(w[v + 2], x4.z, d);
          d = fmaf(w[v + 3], x4.w, d);
        }
        s = fmaf(sl.wt[j], d, s);
      }
    }
    s = fg_warp_sum(s);
    if (lane == 0)
      a.y[n] = s + fg_to_f(a.res[C::r_off + n * C::r_sn]);
  }
}

} // namespace fg
