//===- dequant.cuh - rows of GGUF blocks decoded on the device ---------------===//
//
// out[r, k] = W[row(r), k] for r < Cfg::R and every k < Cfg::K, where W is a
// block-quantised matrix read as stored and decoded by the GEMV's block
// decoders (gemv.cuh: Cfg::Dec is fg::DecQ8_0, DecQ4_0, ...; every weight
// is the f16 the GEMV multiplies). Two uses, chosen by the emitter:
//   - get_rows of a quantised table (embeddings, a tied lm head's rows):
//     row(r) = ids[r] (Cfg::kGather); an id outside [0, Cfg::V) gives a
//     zero row, like the dense gather;
//   - the prefill matmul's fallback: the whole matrix decoded to f16 in
//     scratch (row(r) = r) for cuBLAS, so the weight stays quantised in
//     device memory and decode steps read it natively;
//   - fused.gated_gemm's two weights at once (Cfg::kPair): rows r < R from
//     w, rows R <= r < 2R from w2 (row r - R, its own offset and stride),
//     written one after the other: the stacked matrix its GEMM reads.
// One thread decodes one (row, 32-weight step, quarter t) unit: 8 weights,
// stored as one 16-byte store (f16 output, 16-byte aligned rows) or as
// 8 scalars. Needs gemv.cuh in front (the emitter puts it there).
//
//===----------------------------------------------------------------------===//

namespace fg {

template <class C>
static __device__ __forceinline__ void dequantRows(typename C::Out *out,
                                                   const unsigned char *w,
                                                   const typename C::Ids *ids,
                                                   const unsigned char *w2 = nullptr) {
  using D = typename C::Dec;
  constexpr long long kSteps = C::K / 32, kUnits = (C::kPair ? 2 : 1) * C::R * kSteps * 4;
  for (long long u = blockIdx.x * (long long)blockDim.x + threadIdx.x; u < kUnits;
       u += (long long)gridDim.x * blockDim.x) {
    const int t = static_cast<int>(u & 3);
    const long long step = (u >> 2) % kSteps, r = (u >> 2) / kSteps;
    long long row = r;
    bool live = true;
    if constexpr (C::kGather) {
      row = static_cast<long long>(ids[C::ids_off + r * C::ids_s]);
      live = row >= 0 && row < C::V;
    }
    const unsigned char *src = w + C::w_off + row * C::w_ld;
    if constexpr (C::kPair)
      if (r >= C::R)
        src = w2 + C::w2_off + (r - C::R) * C::w2_ld;
    uint4 h = make_uint4(0, 0, 0, 0);
    if (live) {
      typename D::Raw raw;
      D::load(src, step, t, raw);
      h = D::half8(raw, step, t);
    }
    typename C::Out *o = out + C::o_off + r * C::o_ld + step * 32 + 8 * t;
    if constexpr (C::kVecStore) {
      *reinterpret_cast<uint4 *>(o) = h;
    } else {
      const unsigned hw[4] = {h.x, h.y, h.z, h.w};
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        float lo, hi;
        DecF16::unpack(hw[i], lo, hi);
        o[2 * i] = fg_from_f<typename C::Out>(lo);
        o[2 * i + 1] = fg_from_f<typename C::Out>(hi);
      }
    }
  }
}

} // namespace fg
