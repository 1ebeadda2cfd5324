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
//     device memory and decode steps read it natively.
// One thread decodes one (row, 32-weight step, quarter t) unit: 8 weights,
// stored as one 16-byte store (f16 output, 16-byte aligned rows) or as
// 8 scalars; or C::kUnits such units, a block's width apart. Needs gemv.cuh in front (the emitter puts it there).
//
//===----------------------------------------------------------------------===//

namespace fg {

/// Unit u (8 weights): its row and decoded weights (zeros for a gathered id
/// out of range).
template <class C> struct DequantUnit {
  long long r, step;
  int t;
  bool live;
  typename C::Dec::Raw raw;
};

template <class C>
static __device__ __forceinline__ void dequantLoad(DequantUnit<C> &d, long long u,
                                                   const unsigned char *w,
                                                   const typename C::Ids *ids) {
  constexpr long long kSteps = C::K / 32;
  d.t = static_cast<int>(u & 3);
  d.step = (u >> 2) % kSteps;
  d.r = (u >> 2) / kSteps;
  long long row = d.r;
  d.live = true;
  if constexpr (C::kGather) {
    row = static_cast<long long>(ids[C::ids_off + d.r * C::ids_s]);
    d.live = row >= 0 && row < C::V;
  }
  if (d.live)
    C::Dec::load(w + C::w_off + row * C::w_ld, d.step, d.t, d.raw);
}

template <class C>
static __device__ __forceinline__ void dequantStore(typename C::Out *out, const DequantUnit<C> &d) {
  const uint4 h = d.live ? C::Dec::half8(d.raw, d.step, d.t) : make_uint4(0, 0, 0, 0);
  typename C::Out *o = out + C::o_off + d.r * C::o_ld + d.step * 32 + 8 * d.t;
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

/// C::kUnits units a thread: u, u + blockDim, ... of its block's span, every
/// load issued before the first decode (more bytes in flight per thread), and
/// each of a warp's loads and stores as coalesced as with one unit.
template <class C>
static __device__ __forceinline__ void dequantRows(typename C::Out *out,
                                                   const unsigned char *w,
                                                   const typename C::Ids *ids) {
  constexpr long long kUnits = C::R * (C::K / 32) * 4;
  constexpr int U = C::kUnits;
  const long long span = (long long)blockDim.x * U;
  for (long long base = blockIdx.x * span + threadIdx.x; base < kUnits;
       base += (long long)gridDim.x * span) {
    DequantUnit<C> d[U];
#pragma unroll
    for (int i = 0; i < U; ++i)
      if (base + i * (long long)blockDim.x < kUnits)
        dequantLoad<C>(d[i], base + i * (long long)blockDim.x, w, ids);
#pragma unroll
    for (int i = 0; i < U; ++i)
      if (base + i * (long long)blockDim.x < kUnits)
        dequantStore<C>(out, d[i]);
  }
}

} // namespace fg
