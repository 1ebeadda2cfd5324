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
// nothing loads before the programmatic-launch wait.
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

template <class C> static __device__ __forceinline__ void moeSumFloat(const MoeSumArgs<C> &a) {
  using D = typename C::Dec;
  constexpr int V = D::kPerLoad, U = C::Kc / V, KU = C::kk * U; // units a slot, a row
  constexpr int UL = (KU + 31) / 32, CH = C::kChunk;            // units a lane, in flight
  static_assert(C::Kc % V == 0 && V % 4 == 0, "whole 16-byte units of weights, float4 of x");
  __shared__ long long ex[C::kk];
  __shared__ float wt[C::kk];
  for (int j = threadIdx.x; j < C::kk; j += blockDim.x) {
    const long long e = (long long)a.ids[C::ids_off + j * C::ids_sj];
    const bool ok = e >= 0 && e < C::E;
    ex[j] = ok ? e : -1;
    wt[j] = ok ? fg_to_f(a.sw[C::sw_off + j * C::sw_sj]) : 0.0f;
  }
  __syncthreads();
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  for (long long n = (long long)blockIdx.x * C::kWarps + warp; n < C::N;
       n += (long long)gridDim.x * C::kWarps) {
    float s = 0.0f;
#pragma unroll
    for (int i0 = 0; i0 < UL; i0 += CH) {
      uint4 r[CH];
#pragma unroll
      for (int i = 0; i < CH; ++i) {
        const int u = lane + 32 * (i0 + i), j = u / U;
        r[i] = make_uint4(0u, 0u, 0u, 0u);
        if (i0 + i < UL && u < KU && ex[j] >= 0)
          r[i] = fg_load_stream(a.w + C::w_off + ex[j] * C::w_es + n * C::w_ld + (u - j * U) * V);
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
        s = fmaf(wt[j], d, s);
      }
    }
    s = fg_warp_sum(s);
    if (lane == 0)
      a.y[n] = s + fg_to_f(a.res[C::r_off + n * C::r_sn]);
  }
}

} // namespace fg
