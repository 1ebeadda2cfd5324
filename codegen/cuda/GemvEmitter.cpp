//===- GemvEmitter.cpp - matmul(_id), fused gated / multi / add GEMVs -------===//
//
// Decode-sized matmuls (at most EmitOptions::maxGemvTokens rows of x) run the
// GEMV template of kernels/gemv.cuh. This file only chooses: it describes
// the shapes and layouts as a constexpr parameter struct, picks the policies
// (weight decoder per stream, epilogue, dense or expert-indexed) and the
// work split (warps per block, k-steps per chunk), and writes an `extern "C"`
// entry that calls the template. Larger matmuls go to cuBLAS through a
// CublasGemmSpec; so does fused.matmul_add there, as one cuBLASLt GEMM with
// the residual as its C and the result as its D (Cublas.h).
//
//===----------------------------------------------------------------------===//
#include "codegen/cuda/EmitterCommon.h"
#include "ir/OpViews.h"
#include "codegen/cuda/KernelSources.h"
#include "codegen/cuda/QuantWeights.h"

#include "llvm/Support/FormatVariadic.h"

#include <algorithm>
#include <bit>
#include <cstring>

namespace fg::cuda::detail {
namespace {

/// Element offsets of each row of x (all dims but the last), row-major.
std::vector<int64_t> rowOffsets(const Layout &l) {
  size_t r = l.shape.size();
  Shape outer(l.shape.begin(), l.shape.end() - 1);
  int64_t rows = product(outer);
  std::vector<int64_t> out;
  for (int64_t i = 0; i < rows; ++i) {
    int64_t rem = i, off = l.offset;
    for (size_t d = r - 1; d-- > 0;) {
      off += (rem % l.shape[d]) * l.strides[d];
      rem /= l.shape[d];
    }
    out.push_back(off);
  }
  return out;
}

bool isGemmType(DType t) { return t == DType::F32 || t == DType::F16 || t == DType::BF16; }

/// True when the rows of `l` (all dims but the last) are evenly spaced by
/// `rowStride` and the last dim is unit-stride.
bool uniformRows(const Layout &l, int64_t &rowStride) {
  size_t r = l.shape.size();
  if (r == 0 || (l.shape[r - 1] != 1 && l.strides[r - 1] != 1))
    return false;
  rowStride = l.shape[r - 1];
  bool first = true;
  int64_t expect = 0;
  for (size_t d = r - 1; d-- > 0;) {
    if (l.shape[d] == 1)
      continue;
    if (first) {
      rowStride = l.strides[d];
      expect = rowStride * l.shape[d];
      first = false;
    } else {
      if (l.strides[d] != expect)
        return false;
      expect *= l.shape[d];
    }
  }
  return rowStride >= l.shape[r - 1];
}

/// fused.matmul_add over more rows than the GEMV takes: the plain matmul's
/// GEMM `g` becomes the Lt form D = x·Wᵀ + r, C = r (operand 2, read), D = the
/// result (written; r and y never share bytes, the overlap proof's rule for
/// fused nodes), alpha = beta = 1, C and D f32. r must hold one row per row
/// of y: a bias shared by all rows (r [N]) is refused here (cuBLASLt's bias
/// epilogue would take it; not done yet, so the plain add stays).
llvm::Error makeLtAddend(const Function &fn, const Node &node, llvm::ArrayRef<Layout> ls,
                         CublasGemmSpec &g) {
  const TensorType &rt = fn.type(node.operands[2]), &yt = fn.type(node.results[0]);
  if (rt.dtype != DType::F32)
    return unsupported(node, "an addend of dtype " + std::string(dtypeName(rt.dtype)) +
                                 " for cuBLASLt (f32 only)");
  if (rt.numElements() != yt.numElements() || rt.numRows() != yt.numRows())
    return unsupported(node, llvm::formatv("a bias {0} shared by the {1} rows of x (cuBLASLt "
                                           "takes a per-row residual only)",
                                           rt.str(), yt.numRows())
                                 .str());
  int64_t rowStride = 0;
  if (!uniformRows(ls[2], rowStride))
    return unsupported(node, "an addend whose rows are not evenly spaced and unit-stride");
  g.name = "matmul_add_cublaslt";
  g.lt = true;
  g.beta = 1;
  g.c = {Param::operand(2), static_cast<uint64_t>(ls[2].offset * 4)};
  g.ldc = rowStride;
  g.d = {Param::result(0), 0};
  g.ldd = g.m;
  return llvm::Error::success();
}

/// A matmul over more rows than the GEMV takes, with a block-quantised
/// weight: the weight decoded to f16 in scratch (kernels/dequant.cuh), x
/// converted to f16 in scratch unless it already is f16 with evenly spaced
/// rows, then cuBLAS. Scratch: [x f16 | W f16], each 256-byte aligned; the
/// weight stays quantised in device memory.
llvm::Expected<std::vector<Launch>> emitCublasQuant(const Function &fn, const Node &node,
                                                    llvm::ArrayRef<Layout> ls) {
  const TensorType &xt = fn.type(node.operands[0]), &wt = fn.type(node.operands[1]);
  const Layout &xl = ls[0], &wl = ls[1];
  int64_t N = wt.shape[0], K = wt.shape[1], M = xt.numRows();
  int64_t be = dtypeInfo(wt.dtype).blockElems;
  if (!gemvDecodesNatively(wt.dtype))
    return unsupported(node, "weight dtype " + std::string(dtypeName(wt.dtype)) + " for cuBLAS");
  if (wl.strides[1] != 1 || wl.offset % be != 0 || wl.strides[0] % be != 0 || K % be != 0)
    return unsupported(node, "a quantised weight whose rows are not whole contiguous blocks");
  auto align = [](uint64_t b) { return (b + 255) / 256 * 256; };
  uint64_t xBytes = align(static_cast<uint64_t>(M * K * 2));
  uint64_t total = xBytes + static_cast<uint64_t>(N * K * 2);
  std::vector<Launch> out;
  DequantDesc dq;
  dq.mnemonic = node.info().mnemonic;
  dq.q = wt.dtype;
  dq.out = DType::F16;
  dq.K = K;
  dq.R = N;
  dq.V = N;
  dq.wOff = wl.offset;
  dq.wLd = wl.strides[0];
  dq.oOff = static_cast<int64_t>(xBytes / 2);
  dq.oLd = K;
  dq.outParam = Param::scratch();
  dq.wParam = Param::operand(1);
  KernelSpec deq = dequantKernel(dq);
  deq.scratchBytes = total;
  out.push_back(std::move(deq));
  CublasGemmSpec g;
  g.name = "matmul_cublas";
  g.transA = true;
  g.transB = false;
  g.m = N;
  g.n = M;
  g.k = K;
  g.aType = g.bType = DType::F16;
  g.cType = DType::F32;
  g.lda = K;
  g.a = {Param::scratch(), xBytes};
  g.c = {Param::result(0), 0};
  g.ldc = N;
  int64_t rowStride = 0;
  if (xt.dtype == DType::F16 && uniformRows(xl, rowStride)) {
    g.b = {Param::operand(0), static_cast<uint64_t>(xl.offset * 2)};
    g.ldb = rowStride;
  } else {
    KernelSpec cvt = emitCopyKernel(xt.dtype, xl, DType::F16, Param::scratch(), Param::operand(0));
    cvt.scratchBytes = total;
    g.b = {Param::scratch(), 0};
    g.ldb = K;
    out.push_back(std::move(cvt));
  }
  g.scratchBytes = total;
  if (node.kind == OpKind::FusedMatmulAdd)
    if (llvm::Error e = makeLtAddend(fn, node, ls, g))
      return e;
  out.push_back(std::move(g));
  return out;
}

llvm::Expected<std::vector<Launch>> emitCublas(const Function &fn, const Node &node,
                                               llvm::ArrayRef<Layout> ls) {
  const TensorType &xt = fn.type(node.operands[0]), &wt = fn.type(node.operands[1]);
  const Layout &xl = ls[0], &wl = ls[1];
  if (isQuantized(wt.dtype))
    return emitCublasQuant(fn, node, ls);
  if (!isGemmType(wt.dtype))
    return unsupported(node, "weight dtype " + std::string(dtypeName(wt.dtype)) + " for cuBLAS");
  if (wl.strides[1] != 1 || wl.strides[0] < wt.shape[1])
    return unsupported(node, "a weight whose rows are not unit-stride (insert a cont)");
  int64_t N = wt.shape[0], K = wt.shape[1], M = xt.numRows();
  CublasGemmSpec g;
  g.name = "matmul_cublas";
  g.transA = true;
  g.transB = false;
  g.m = N;
  g.n = M;
  g.k = K;
  g.aType = g.bType = wt.dtype;
  g.cType = DType::F32;
  g.lda = wl.strides[0];
  g.a = {Param::operand(1), static_cast<uint64_t>(wl.offset * elemBytes(wt.dtype))};
  g.c = {Param::result(0), 0};
  g.ldc = N;
  std::vector<Launch> out;
  int64_t rowStride = 0;
  if (xt.dtype == wt.dtype && uniformRows(xl, rowStride)) {
    g.b = {Param::operand(0), static_cast<uint64_t>(xl.offset * elemBytes(xt.dtype))};
    g.ldb = rowStride;
  } else {
    uint64_t bytes = static_cast<uint64_t>(M * K * elemBytes(wt.dtype));
    KernelSpec cvt = emitCopyKernel(xt.dtype, xl, wt.dtype, Param::scratch(), Param::operand(0));
    cvt.scratchBytes = bytes;
    g.scratchBytes = bytes;
    g.b = {Param::scratch(), 0};
    g.ldb = K;
    out.push_back(std::move(cvt));
  }
  if (node.kind == OpKind::FusedMatmulAdd)
    if (llvm::Error e = makeLtAddend(fn, node, ls, g))
      return e;
  out.push_back(std::move(g));
  return out;
}


/// One weight stream: element (e, n, k) at w[off + e·es + n·ld + k·ks].
struct WeightStream {
  DType dtype;
  int64_t off = 0, ld = 0, ks = 1, es = 0;
};

/// Everything the emitter decides for one GEMV launch.
struct GemvDesc {
  std::string mnemonic;
  DType x = DType::F32;
  int64_t N = 0, K = 0, M = 1;
  std::vector<int64_t> xRows;  ///< dense: element offset of each x row
  int64_t xKs = 1;             ///< stride of x along K
  std::vector<WeightStream> w; ///< 1 or 2 streams
  /// fused.matmul_multi: (N, weight) of each segment (2 or 3; then w holds
  /// segment 0's weight and N is the sum, for the work split).
  std::vector<std::pair<int64_t, WeightStream>> segs;
  // expert-indexed
  bool expert = false;
  DType ids = DType::I32;
  int64_t E = 0, pairs = 1, kk = 1, idsOff = 0, idsSt = 0, idsSj = 0, xOff = 0, xSt = 0, xSj = 0;
  // fused.matmul_id_sum_add (with expert, ids and the addend above): the kk
  // slots' K-slices as one row of K = kk · slotSteps k-steps, each lane's
  // share scaled by its slot's routing weight, element j at sw[swOff + j·swSj]
  bool moeSum = false;
  int64_t slotSteps = 0, swOff = 0, swSj = 0;
  DType sw = DType::F32;
  // bias (two-stream only), element (e, n) at b[off + e·se + n·sn]
  bool bias = false;
  DType b0 = DType::F32, b1 = DType::F32;
  int64_t b0Off = 0, b0Sn = 0, b0Se = 0, b1Off = 0, b1Sn = 0, b1Se = 0;
  std::string epilogue = "fg::EpiStore";
  // addend after the epilogue (dense), element (m, n) at r[off + m·sm + n·sn]
  bool res = false;
  DType r = DType::F32;
  int64_t rOff = 0, rSm = 0, rSn = 1;
  // rms_norm prologue (dense): x · rstd(row) · nw[nwOff + k]
  bool norm = false;
  // fused.rms_norm_mul_matmul: the blocks also store the normalised rows
  // (result 0, packed [M, K]; y is result 1)
  bool normRow = false;
  DType nw = DType::F32;
  int64_t nwOff = 0;
  double eps = 0;
};

/// `wide`: a whole-super-block decoder (gemvKernel says when): DecQ4_KW, or
/// DecQ4_KS with `scaled` (EmitOptions::gemvWideScaled).
const char *decoderName(DType t, bool wide, bool scaled) {
  if (t == DType::Q4_K && wide)
    return scaled ? "fg::DecQ4_KS" : "fg::DecQ4_KW";
  if (t == DType::Q4_0 && wide)
    return "fg::DecQ4_0W";
  if (t == DType::Q8_0 && wide)
    return "fg::DecQ8_0W";
  if (t == DType::IQ4_NL && wide)
    return "fg::DecIQ4_NLW";
  if (t == DType::Q6_K && wide)
    return "fg::DecQ6_KW";
  if (const char *q = blockDecoder(t))
    return q;
  switch (t) {
  case DType::F16:
    return "fg::DecF16";
  case DType::BF16:
    return "fg::DecBF16";
  default:
    return "fg::DecF32";
  }
}

} // namespace

GemvOperands gemvOperands(OpKind kind) {
  GemvOperands g;
  switch (kind) {
  case OpKind::MatMul:
  case OpKind::MatMulId:
  case OpKind::FusedMatmulAdd:
  case OpKind::FusedMatmulIdSumAdd: // x, w, ids, routing weights, residual
    g.family = true;
    break;
  case OpKind::FusedGatedMatmul:
  case OpKind::FusedGatedMatmulId:
    g.family = true, g.streams = 2;
    break;
  case OpKind::FusedRmsNormMatmul:
  case OpKind::FusedRmsNormMulMatmul: // x, norm weight, w; results: the row, y
    g.family = true, g.first = 2;
    break;
  case OpKind::FusedMatmulMulti: // x, w0, w1, [w2]
    g.family = true, g.streams = 3;
    break;
  case OpKind::FusedRmsNormMatmulMulti: // x, norm weight, w0, w1, [w2]
    g.family = true, g.first = 2, g.streams = 3;
    break;
  case OpKind::FusedRmsNormGatedMatmul:
    g.family = true, g.first = 2, g.streams = 2;
    break;
  default:
    break;
  }
  return g;
}

bool gemvDecodesNatively(DType t) {
  switch (t) {
  case DType::F32:
  case DType::F16:
  case DType::BF16:
  case DType::Q8_0:
  case DType::Q4_0:
  case DType::Q4_1:
  case DType::Q4_K:
  case DType::Q6_K:
  case DType::Q5_0:
  case DType::Q5_1:
  case DType::Q5_K:
  case DType::Q2_K:
  case DType::Q3_K:
  case DType::IQ4_NL:
  case DType::IQ4_XS:
    return true;
  default:
    return false;
  }
}

namespace {

bool isGemvWeightType(DType t) { return gemvDecodesNatively(t); }

int32_t floatBits(double v) {
  float f = static_cast<float>(v);
  int32_t b;
  std::memcpy(&b, &f, sizeof b);
  return b;
}

/// `fg::EpiGlu<kind, alpha bits, limit bits>` for a gated matmul (dense or expert-indexed).
template <typename View> std::string gluEpilogue(View v) {
  return llvm::formatv("fg::EpiGlu<{0}, {1}, {2}>", static_cast<int>(v.kind()),
                       floatBits(v.alpha()), floatBits(v.limit()))
      .str();
}

/// Rows of x from which the 16-bit weights go to the tensor cores (below, the
/// lanes-over-K path streams them with fully coalesced loads on the CUDA cores).
constexpr int64_t kTensorCoreMinRows = 3;
/// The whole-super-block q4_K GEMV (DecQ4_KW): resident warps per SM asked
/// for through launch bounds (0: none), and the one-chunk-ahead prefetch.
constexpr int64_t kWideWarpsPerSm = 0;
constexpr bool kWidePrefetch = false;
/// Weights from which a matmul of 3+ rows of x goes to cuBLAS instead.
constexpr uint64_t kCublasFromBytes = 64ull << 20;

/// Whether cuBLAS beats the tensor-core GEMV for `rows` rows of x over these
/// weights (W-dense gate/up at T = 4: the GEMV took 1.5x cuBLAS's time; q/o:
/// 0.9x; bench/RESULTS.md), unless a tuning override forces the GEMV.
bool cublasIsFaster(int64_t rows, const TensorType &wt, const EmitOptions &o) {
  return rows >= kTensorCoreMinRows && static_cast<uint64_t>(wt.bytes()) >= kCublasFromBytes &&
         isGemmType(wt.dtype) && o.gemvTensorCoreMinRows == 0;
}

/// Why a GEMV-only fused launch (merged, gated or with a norm prologue: ops
/// the plain matmul's cuBLAS path does not take) has no kernel for `rows`
/// rows of x over weights `wt`: cuBLAS is faster there, so the fusion is
/// refused and the pieces keep their launches. Empty where the GEMV takes it.
std::string cublasRowsRefusal(int64_t rows, const TensorType &wt, const EmitOptions &o) {
  if (!cublasIsFaster(rows, wt, o))
    return {};
  return llvm::formatv("{0} rows of x over {1} MiB of weights (cuBLAS is faster there)", rows,
                       wt.bytes() >> 20)
      .str();
}

/// How a GEMV launch splits its work (see kernels/gemv.cuh).
struct GemvSplit {
  bool tensorCores = false;
  int warps = 4, unroll = 4, rows = 16;
  unsigned minBlocks = 0; ///< launch bounds: resident blocks per SM asked for (0: none)
};

/// Lanes over K: 4 output rows per block (2 with two streams), 2 steps of 512
/// bytes per row and chunk. Warps per block (K split over them), from the
/// variant sweep on the H200 (bench/variant-sweep.sh; bench/RESULTS.md):
/// one row of x (dense) streams best with 4 warps, split unevenly if need be;
/// more rows of x, and expert-indexed launches, with the most warps (≤ 8) that
/// split K evenly (two dense rows also choose the chunk depth by K, below). Either way the grid holds at least 16 warps per SM, else
/// it takes min(8, chunks): a long K over few rows (18944 → 3584) left the
/// SMs a quarter full with 1 warp per block (46.9 µs against 33.8 with 4).
/// Tensor cores: 16 rows per block, enough warps (K split) for ~24 warps per SM.
GemvSplit chooseSplit(bool tensorCores, int64_t N, int64_t K, int64_t M, bool expert,
                      int64_t pairs, int streams, int64_t perLoad, const EmitOptions &o) {
  GemvSplit s;
  s.tensorCores = tensorCores;
  if (!tensorCores) {
    // x is shared by a warp's rows, so rows cost fewer registers than steps:
    // 4 rows (2 with two streams) x 2 steps = 8 loads of 16 bytes in flight.
    s.rows = streams == 2 ? 2 : 4;
    if (o.gemvRows > 0)
      s.rows = o.gemvRows;
    int64_t steps = (K + 32 * perLoad - 1) / (32 * perLoad);
    s.unroll = static_cast<int>(std::clamp<int64_t>(8 / (s.rows * streams), 1, steps));
    // Two rows of x, one weight stream: deeper chunks on a long K (4 steps
    // from 20: 18944 -> 3584 took 41.9 µs against 48.9 with 2), single steps
    // below 16 when the grid is small (N <= 8192; W-moe q, K = 2048: 6.4 µs
    // against 7.8), but not on a large one (3584 -> 18944: 45.5 against 37.8).
    if (M == 2 && !expert && streams == 1 && o.gemvRows == 0)
      s.unroll = static_cast<int>(std::min<int64_t>(
          steps >= 20 ? 4 : steps >= 16 ? 2 : (N <= 8192 ? 1 : 2), steps));
    int64_t chunks = (steps + s.unroll - 1) / s.unroll;
    int64_t maxWarps = std::min<int64_t>(8, chunks);
    s.warps = 1;
    if (M == 1 && !expert) {
      s.warps = static_cast<int>(std::min<int64_t>(4, chunks));
    } else {
      for (int64_t w = maxWarps; w >= 1; --w)
        if (chunks % w == 0) {
          s.warps = static_cast<int>(w);
          break;
        }
    }
    int64_t blocks = (N + s.rows - 1) / s.rows * std::max<int64_t>(pairs, 1);
    if (blocks * s.warps < static_cast<int64_t>(o.smCount) * 16)
      s.warps = static_cast<int>(maxWarps);
  } else {
    int64_t steps = (K + 31) / 32;
    s.unroll = steps >= 64 ? 4 : (steps >= 8 ? 2 : 1);
    int64_t chunks = (steps + s.unroll - 1) / s.unroll;
    int64_t blocks = (N + 15) / 16 * pairs;
    int64_t want = static_cast<int64_t>(o.smCount) * 24;
    int64_t w = 1;
    while (w < 16 && blocks * w < want)
      w *= 2;
    while (w > 1 && w > chunks)
      w /= 2;
    s.warps = static_cast<int>(std::max<int64_t>(w, 1));
  }
  if (o.gemvWarps > 0)
    s.warps = o.gemvWarps;
  if (o.gemvUnroll > 0)
    s.unroll = o.gemvUnroll;
  return s;
}

std::string lit(int64_t v) { return ilit(v); }

/// The programmatic-launch prologue of one launch (gemvPrefetch,
/// kernels/gemv.cuh): how many of its first tiles prefetch, and how many
/// bytes of each of their weight rows (0: none). The blocks that can be
/// resident beside the previous kernel are estimated as 32 warps per SM; the
/// prefix of a row is what spreads EmitOptions::pdlPrefetchBytes evenly over
/// their rows, in whole 128-byte lines, at most the row. Expert-indexed
/// launches (their experts come from the previous kernels) and strided rows
/// take none.
struct GemvPrefetch {
  int64_t blocks = 0, rowBytes = 0;
};
/// The bytes of one matrix (expert) of each of the launch's `streams` weights.
int64_t gemvWeightBytes(const GemvDesc &d, const WeightStream &w0, const WeightStream &w1,
                        int streams) {
  return d.N * (storageBytes(w0.dtype, d.K) + (streams == 2 ? storageBytes(w1.dtype, d.K) : 0));
}
/// Whether a dense launch of these weight bytes is within the prologues'
/// budget and size limit (EmitOptions::pdlPrefetchBytes, pdlPrefetchMaxWeightBytes).
bool prefetchLimitsAllow(int64_t weightBytes, const EmitOptions &o) {
  return o.pdlPrefetchBytes > 0 &&
         (o.pdlPrefetchMaxWeightBytes < 0 || weightBytes <= o.pdlPrefetchMaxWeightBytes);
}
GemvPrefetch choosePrefetch(const GemvDesc &d, const GemvSplit &sp, const WeightStream &w0,
                            const WeightStream &w1, int streams, const EmitOptions &o) {
  GemvPrefetch p;
  if (d.expert || d.moeSum || w0.ks != 1 || (streams == 2 && w1.ks != 1) ||
      !prefetchLimitsAllow(gemvWeightBytes(d, w0, w1, streams), o))
    return p;
  const int64_t tileRows = sp.tensorCores ? 16 : sp.rows;
  const int64_t tiles = (d.N + tileRows - 1) / tileRows;
  const int64_t blocks =
      std::min<int64_t>(tiles, static_cast<int64_t>(o.smCount) * std::max(1, 32 / sp.warps));
  const int64_t per = o.pdlPrefetchBytes / (blocks * tileRows * streams) / 128 * 128;
  if (per < 128)
    return p;
  // One prefix for both streams: at most the shorter row (gate and up may
  // differ in dtype in hand-written IR).
  int64_t row = storageBytes(w0.dtype, d.K);
  if (streams == 2)
    row = std::min(row, storageBytes(w1.dtype, d.K));
  p.blocks = blocks;
  p.rowBytes = std::min(row, per);
  return p;
}

/// The entry of a merged launch (fused.matmul_multi, fused.rms_norm_matmul_multi)
/// over the parameter structs Multi::S0 .. S2: its parameters (y0, y1, [y2],
/// x, w0, w1, [w2], [nw]), the call's three GemvArgs (a two-segment launch
/// passes segment 1's twice: Multi::S2 is S1 then) and the bindings to the
/// node's results and operands (x, [norm weight], w0, w1, [w2]).
struct MultiEntry {
  std::string params, args;
  std::vector<Param> bind;
};

MultiEntry multiEntry(const GemvDesc &d) {
  const size_t n = d.segs.size();
  MultiEntry e;
  for (size_t i = 0; i < n; ++i)
    e.params += "float* y" + std::to_string(i) + ", ";
  e.params += "const Multi::S0::X* x";
  for (size_t i = 0; i < n; ++i)
    e.params += ", const Multi::S" + std::to_string(i) + "::Dec0::T* w" + std::to_string(i);
  if (d.norm)
    e.params += ", const Multi::S0::NW* nw";
  auto args = [&](size_t i) {
    const std::string si = std::to_string(i);
    return "fg::GemvArgs<Multi::S" + si + ">{y" + si + ", x, w" + si +
           ", nullptr, nullptr, nullptr, nullptr, nullptr, " + (d.norm ? "nw" : "nullptr") + "}";
  };
  e.args = args(0) + ", " + args(1) + ", " + args(n == 3 ? 2 : 1);
  const unsigned w0At = d.norm ? 2 : 1;
  for (size_t i = 0; i < n; ++i)
    e.bind.push_back(Param::result(static_cast<unsigned>(i)));
  e.bind.push_back(Param::operand(0));
  for (size_t i = 0; i < n; ++i)
    e.bind.push_back(Param::operand(static_cast<unsigned>(w0At + i)));
  if (d.norm)
    e.bind.push_back(Param::operand(1));
  if (d.normRow)
    e.bind.push_back(Param::result(0));
  return e;
}

/// fused.matmul_multi: one parameter struct per segment (S0, S1, S2), the
/// segments' tile ranges (struct Multi) and an entry taking one result and
/// one weight pointer per segment (kernels/gemv.cuh, gemvMulti).
template <typename CfgStruct>
KernelSpec multiKernel(const GemvDesc &d, const GemvSplit &sp, CfgStruct &&cfgStruct) {
  const size_t n = d.segs.size();
  assert((n == 2 || n == 3) && "fused.matmul_multi has 2 or 3 segments");
  std::string c;
  int64_t tiles[3] = {0, 0, 0}, total = 0;
  for (size_t s = 0; s < n; ++s) {
    c += cfgStruct("Seg" + std::to_string(s), d.segs[s].first, d.segs[s].second);
    tiles[s] = (d.segs[s].first + sp.rows - 1) / sp.rows;
    total += tiles[s];
  }
  c += llvm::formatv("struct Multi {{\n  using S0 = Seg0;\n  using S1 = Seg1;\n  using S2 = {0};\n"
                     "  static constexpr int kSegs = {1};\n"
                     "  static constexpr long long kTiles0 = {2}, kTiles1 = {3};\n};\n",
                     n == 3 ? "Seg2" : "Seg1", n, lit(tiles[0]), lit(tiles[1]))
           .str();
  MultiEntry e = multiEntry(d);
  c += kernelEntry(32 * sp.warps, e.params, "fg::gemvMulti<Multi>(" + e.args + ");", sp.minBlocks,
                   "fg::gemvMultiPrefetch<Multi>(" + e.args + ");");
  KernelSpec k = finishSpec(d.mnemonic, kernelSource("gemv.cuh").str() + c);
  k.grid[0] = static_cast<unsigned>(total);
  k.grid[1] = 1;
  k.grid[2] = static_cast<unsigned>((d.M + 7) / 8); // groups of 8 rows of x
  k.block[0] = 32 * sp.warps;
  k.params = std::move(e.bind);
  k.form = KernelForm::MergedTensorCoreGemv;
  if (d.M == 1)
    k.tileRows = sp.tensorCores ? 16 : sp.rows; // each segment's tiles (GemvTails.cpp)
  return k;
}

/// The pointers of a dense GEMV launch: the entry's parameters and the call's
/// arguments (GemvArgs order), and the kernel's operand bindings.
struct GemvEntry {
  std::string params, args;
  std::vector<Param> bind;
};

GemvEntry gemvEntry(const GemvDesc &d) {
  GemvEntry e;
  bool two = d.w.size() > 1;
  e.params = "float* y, const Cfg::X* x, const Cfg::Dec0::T* w0";
  e.args = "y, x, w0, ";
  e.args += two ? "w1" : "nullptr";
  if (two)
    e.params += ", const Cfg::Dec1::T* w1";
  if (d.expert) {
    e.params += ", const Cfg::Ids* ids";
    e.args += ", ids";
  } else {
    e.args += ", nullptr";
  }
  if (d.bias) {
    e.params += ", const Cfg::B0* b0, const Cfg::B1* b1";
    e.args += ", b0, b1";
  } else {
    e.args += ", nullptr, nullptr";
  }
  if (d.res) {
    e.params += ", const Cfg::R* res";
    e.args += ", res";
  } else {
    e.args += ", nullptr";
  }
  if (d.norm) {
    e.params += ", const Cfg::NW* nw";
    e.args += ", nw";
  } else {
    e.args += ", nullptr";
  }
  if (d.normRow) {
    e.params += ", float* row";
    e.args += ", row";
  }
  // Operands: x, [nw], weights, [ids], [biases], [addend]; parameters: y,
  // x, weights, [ids], [biases], [addend], [nw], [the normalised row:
  // result 0, y then result 1].
  unsigned next = d.norm ? 2 : 1;
  e.bind = {Param::result(d.normRow ? 1 : 0), Param::operand(0), Param::operand(next++)};
  if (two)
    e.bind.push_back(Param::operand(next++));
  if (d.expert)
    e.bind.push_back(Param::operand(next++));
  if (d.bias) {
    e.bind.push_back(Param::operand(next++));
    e.bind.push_back(Param::operand(next++));
  }
  if (d.res)
    e.bind.push_back(Param::operand(next++));
  if (d.norm)
    e.bind.push_back(Param::operand(1));
  if (d.normRow)
    e.bind.push_back(Param::result(0));
  return e;
}

/// The GEMV at T = 1 on DP4A (kernels/gemv_dp4a.cuh; q4_K, q8_0, q4_0, q6_K); the
/// prologue of a dense launch loads the first tile's weights before the
/// programmatic-launch wait (an expert-indexed one after it, once it has its
/// expert). K-warps: enough lanes for every quarter k-step (K / 2048, rounded
/// up; q4_0's k-step is 512 weights: K / 4096); row groups: up to 8 warps a
/// block; a grid of the blocks that fit EmitOptions::gemvDp4aWarpTarget warps
/// per SM, each taking every gridDim.x-th tile of kRowWarps x kRowUnroll
/// rows (the x quantisation, once per warp or block, spread over many rows).
/// The DP4A row policy of a weight type (gemv_dp4a.cuh), or null, and its
/// k-step (the weights of its wide decoder's four lanes).
/// q6_K's rows read by whole warps (EmitOptions::gemvDp4aQ6kWarp).
/// q4_K, q8_0 and q4_0 read by whole warps (EmitOptions::gemvDp4aWarpLoad
/// for dense launches, gemvDp4aWarpLoadExperts for expert-indexed ones: by
/// its rule q8_0 only).
/// How a DP4A launch finds its rows: dense, expert-indexed (one expert a
/// block row), or per lane (fused.matmul_id_sum_add: each lane's k-steps
/// from its slot's expert, so every type is read lane by lane).
enum class Dp4aUse { Dense, Expert, Lanes };
Dp4aUse dp4aUse(const GemvDesc &d) {
  return d.moeSum ? Dp4aUse::Lanes : d.expert ? Dp4aUse::Expert : Dp4aUse::Dense;
}
bool dp4aWarpLoad(DType t, Dp4aUse u, const EmitOptions &o) {
  if (u == Dp4aUse::Dense)
    return o.gemvDp4aWarpLoad;
  const int experts = o.gemvDp4aWarpLoadExperts;
  return u == Dp4aUse::Expert && (experts > 0 || (experts < 0 && t == DType::Q8_0));
}
const char *dp4aPolicy(DType t, Dp4aUse u, const EmitOptions &o) {
  const bool w = dp4aWarpLoad(t, u, o);
  switch (t) {
  case DType::Q4_K: return w ? "fg::Dp4aWarpOf<fg::Dp4aQ4K>" : "fg::Dp4aQ4K";
  case DType::Q8_0: return w ? "fg::Dp4aWarpOf<fg::Dp4aQ8_0>" : "fg::Dp4aQ8_0";
  case DType::Q4_0: return w ? "fg::Dp4aWarpOf<fg::Dp4aQ4_0>" : "fg::Dp4aQ4_0";
  case DType::Q6_K:
    return o.gemvDp4aQ6kWarp && u != Dp4aUse::Lanes ? "fg::Dp4aQ6KWarp" : "fg::Dp4aQ6K";
  default: return nullptr;
  }
}
/// Whether a row's loads are few registers (q4_K's 12, q6_K read by whole
/// warps 17), against q8_0's and q4_0's 20 and q6_K's own 33: the work
/// split's rules give these all the warps and two tiles ahead.
bool dp4aLightLoads(DType t, Dp4aUse u, const EmitOptions &o) {
  return t == DType::Q4_K || (t == DType::Q6_K && o.gemvDp4aQ6kWarp && u != Dp4aUse::Lanes);
}
int64_t dp4aStep(DType t) { return t == DType::Q4_0 ? 512 : 256; }

/// The DP4A work split of a launch (dp4aKernel's comment).
struct Dp4aSplit {
  int64_t wk, wr, u, perSm;
  int stages = 0;         ///< Cfg::kStages (0: the register form)
  unsigned ringBytes = 0; ///< its dynamic shared memory a block
};

/// 16-byte units of a lane's bytes of a row in the staged form (0: the
/// type has none; gemv_dp4a.cuh, Dp4aQ4K::kUnits; read by whole warps, none).
int dp4aUnits(DType t, Dp4aUse u, const EmitOptions &o) {
  return t == DType::Q4_K && !dp4aWarpLoad(t, u, o) ? 3 : 0;
}

Dp4aSplit dp4aSplit(const GemvDesc &d, const EmitOptions &o) {
  const DType t = d.w[0].dtype;
  Dp4aSplit s;
  s.wk = (d.K / dp4aStep(t) * 4 + 31) / 32;
  s.wr = std::max<int64_t>(1, 8 / s.wk);
  // Rows a warp at once: the option for one q4_K stream, half of it for two
  // or for q8_0 / q4_0 / q6_K (20 or 33 registers of loads a row, not 12;
  // each tile's loads are held twice: the next tile's are issued before
  // this tile's arithmetic). q6_K read by whole warps (17 a row) takes two
  // tiles ahead instead (dp4aAhead): 2 rows a warp 2 ahead spilled 48-80
  // bytes at 128 registers (NVRTC, W-dense shapes), 1 row 2 ahead 96 registers.
  const int64_t halve = (d.w.size() > 1 ? 2 : 1) * (t == DType::Q4_K ? 1 : 2);
  s.u = std::max<int64_t>(1, std::clamp(o.gemvDp4aUnroll, 1, 4) / halve);
  // Gated q4_0 holds 2 streams x 2 tiles x 20 registers of loads beside 48
  // of x: at 128 registers (two 256-thread blocks an SM) ptxas spilled 80
  // bytes, so it asks for half the warps (the bytes in flight stay: 80 KB an
  // SM at one block).
  // Gated q6_K holds 2 x 2 x 33 registers of loads: half the warps too
  // (read by whole warps, 17 a row: not).
  const int64_t base =
      t == DType::Q6_K && o.gemvDp4aQ6kWarpTarget > 0 ? o.gemvDp4aQ6kWarpTarget : o.gemvDp4aWarpTarget;
  const int64_t warpTarget =
      base / (d.w.size() > 1 && !dp4aLightLoads(t, dp4aUse(d), o) && t != DType::Q8_0 ? 2 : 1);
  s.perSm = std::max<int64_t>(1, warpTarget / (s.wk * s.wr));
  // The staged form (EmitOptions::gemvDp4aStages): as many of the asked
  // stages as fit the resident blocks in 200 KiB an SM (of the H100/H200's
  // 228, beside the static shared memory).
  if (o.gemvDp4aStages >= 2 && !d.moeSum && dp4aUnits(t, dp4aUse(d), o) > 0) {
    const int64_t stage =
        static_cast<int64_t>(d.w.size()) * s.u * dp4aUnits(t, dp4aUse(d), o) * 16 * 32 * s.wk * s.wr;
    int64_t st = std::min(o.gemvDp4aStages, 8);
    while (st >= 2 && st * stage * s.perSm > (200 << 10))
      --st;
    if (st >= 2) {
      s.stages = static_cast<int>(st);
      s.ringBytes = static_cast<unsigned>(st * stage);
    }
  }
  return s;
}

/// Tiles a lane holds in registers ahead (EmitOptions::gemvDp4aAhead; its
/// rule, 0: two for a dense q4_K launch (or q6_K read by whole warps,
/// EmitOptions::gemvDp4aQ6kWarp), whose prologue loads both before
/// the programmatic-launch wait; one for the other types, whose 20 or 33
/// registers of loads a row spill at two, and for expert-indexed launches,
/// which load nothing before the wait: W-moe-12 q4_K, experts included,
/// 0.5867 ms at one, 0.5942 at two).
int dp4aAhead(const GemvDesc &d, const EmitOptions &o) {
  if (d.w[0].dtype == DType::Q6_K && o.gemvDp4aQ6kAhead > 0)
    return std::clamp(o.gemvDp4aQ6kAhead, 1, 3);
  if (o.gemvDp4aAhead > 0)
    return std::clamp(o.gemvDp4aAhead, 1, 3);
  return dp4aLightLoads(d.w[0].dtype, dp4aUse(d), o) && dp4aUse(d) == Dp4aUse::Dense ? 2 : 1;
}

/// `name`: the DP4A parameter struct over the plain one `base`. The shared x
/// needs row groups to share it, the combine K-warps to combine: without,
/// it says so (the kernel would ignore them). `l2Ahead`: 0 where the launch
/// takes none (the merged segments).
std::string dp4aCfg(llvm::StringRef name, llvm::StringRef base, const GemvDesc &d,
                    const EmitOptions &o, const Dp4aSplit &s, int l2Ahead) {
  return llvm::formatv("struct {8} : {9} {{\n  using D = {3};\n  static constexpr int kKWarps = {0}, "
                       "kRowWarps = {1}, kRowUnroll = {2}, kCombine = {6}, kL2Ahead = {7}, "
                       "kStages = {10};\n  static constexpr int kAhead = {11};\n  "
                       "static constexpr bool kPrologueLoad = {4}, kShareX = {5};\n  "
                       "static constexpr bool kNormDeferred = {12};\n};\n",
                       s.wk, s.wr, s.u, dp4aPolicy(d.w[0].dtype, dp4aUse(d), o),
                       o.gemvDp4aPrologueLoad && dp4aUse(d) == Dp4aUse::Dense ? "true" : "false",
                       o.gemvDp4aShareX && s.wr > 1 ? "true" : "false",
                       s.wk > 1 ? std::clamp(o.gemvDp4aCombine, 1, 16) : 1,
                       s.stages || d.moeSum ? 0 : std::clamp(l2Ahead, 0, 8), name, base, s.stages,
                       s.stages ? 1 : dp4aAhead(d, o), o.gemvDp4aNormDeferred ? "true" : "false")
      .str();
}

/// What a DP4A launch does to x (LaunchRecord::actQuant): quantises it, or
/// with the norm prologue's rstd deferred, x·norm_w (Cfg::kNormDeferred).
ActQuant dp4aActQuant(const GemvDesc &d, const EmitOptions &o) {
  return d.norm && o.gemvDp4aNormDeferred ? ActQuant::Int8NormDeferred : ActQuant::Int8;
}

template <class CfgFn>
KernelSpec dp4aKernel(const GemvDesc &d, const EmitOptions &o, GemvSplit &sp, CfgFn &&cfgStruct) {
  const Dp4aSplit s = dp4aSplit(d, o);
  const int64_t tiles = (d.N + s.wr * s.u - 1) / (s.wr * s.u);
  sp.warps = static_cast<int>(s.wk * s.wr); // Cfg::kWarps (the norm prologue's split)
  std::string c = cfgStruct("Cfg", d.N, d.w[0]);
  c += dp4aCfg("CfgD", "Cfg", d, o, s, o.gemvDp4aL2Ahead);
  GemvEntry e;
  if (d.moeSum) {
    // fused.matmul_id_sum_add: x, w, ids, routing weights, residual; the
    // body reads ids and weights after the wait, so the prologue loads
    // nothing — unless EarlyExperts.h turns kEarlyIds on: then the prologue
    // reads them and loads the first tile before the wait.
    c += llvm::formatv("struct CfgM : CfgD {{\n  using SW = {0};\n  static constexpr long long "
                       "kSlotSteps = {1}, sw_off = {2}, sw_sj = {3};\n  static constexpr bool "
                       "kEarlyIds = false, kPrologueLoad = kEarlyIds, kSlotsShared = false;\n};\n",
                       ctype(d.sw), d.slotSteps, lit(d.swOff), lit(d.swSj))
             .str();
    c += kernelEntry(static_cast<unsigned>(32 * s.wk * s.wr),
                     "float* y, const CfgM::X* x, const CfgM::Dec0::T* w0, const CfgM::Ids* ids, "
                     "const CfgM::SW* sw, const CfgM::R* res",
                     "fg::gemvDp4aMoeSum<CfgM>(ga, sw, pre);", static_cast<unsigned>(s.perSm),
                     "const fg::GemvArgs<CfgM> ga{y, x, w0, nullptr, ids, nullptr, nullptr, res, "
                     "nullptr};\n  const fg::Dp4aMoeSumPre<CfgM> pre = fg::gemvDp4aMoeSumPrologue<CfgM>(ga, "
                     "sw);");
    e.bind = {Param::result(0),  Param::operand(0), Param::operand(1),
              Param::operand(2), Param::operand(3), Param::operand(4)};
  } else {
    e = gemvEntry(d);
    c += kernelEntry(static_cast<unsigned>(32 * s.wk * s.wr), e.params,
                     "fg::gemvDp4a<CfgD>(fg::GemvArgs<CfgD>{" + e.args + "}, first);",
                     static_cast<unsigned>(s.perSm),
                     "fg::Dp4aPipe<CfgD> first = fg::gemvDp4aPrefetch<CfgD>(fg::GemvArgs<CfgD>{" +
                         e.args + "});");
  }
  KernelSpec k = finishSpec(d.mnemonic, kernelSource("gemv.cuh").str() +
                                            kernelSource("gemv_dp4a.cuh").str() + c);
  // Expert-indexed: one grid row (blockIdx.y) per pair, the resident blocks
  // shared among them.
  const int64_t rows = std::clamp<int64_t>(d.pairs, 1, 65535);
  k.grid[0] = static_cast<unsigned>(
      std::min<int64_t>(tiles, std::max<int64_t>(1, int64_t(o.smCount) * s.perSm / rows)));
  k.grid[1] = static_cast<unsigned>(rows);
  k.block[0] = static_cast<unsigned>(32 * s.wk * s.wr);
  k.sharedBytes = s.ringBytes;
  k.params = std::move(e.bind);
  k.form = KernelForm::Dp4aGemv;
  k.actQuant = dp4aActQuant(d, o);
  return k;
}

/// fused.matmul_multi / fused.rms_norm_matmul_multi on DP4A
/// (gemv_dp4a.cuh, gemvDp4aMulti): one grid of resident blocks walking the
/// segments' tiles in turn, x quantised once a block for all of them. Every
/// segment takes the split of the whole launch (one K, one dtype), no L2
/// tiles ahead.
template <class CfgFn>
KernelSpec dp4aMultiKernel(const GemvDesc &d, const EmitOptions &o, GemvSplit &sp,
                           CfgFn &&cfgStruct) {
  const size_t n = d.segs.size();
  assert((n == 2 || n == 3) && "fused.matmul_multi has 2 or 3 segments");
  const Dp4aSplit s = dp4aSplit(d, o);
  const int64_t R = s.wr * s.u;
  sp.warps = static_cast<int>(s.wk * s.wr);
  std::string c;
  int64_t tiles = 0;
  for (size_t i = 0; i < n; ++i) {
    const std::string si = std::to_string(i);
    c += cfgStruct("Seg" + si, d.segs[i].first, d.segs[i].second);
    c += dp4aCfg("Seg" + si + "D", "Seg" + si, d, o, s, 0);
    tiles += (d.segs[i].first + R - 1) / R;
  }
  c += llvm::formatv("struct Multi {{\n  using S0 = Seg0D;\n  using S1 = Seg1D;\n  using S2 = {0};\n"
                     "  static constexpr int kSegs = {1};\n};\n",
                     n == 3 ? "Seg2D" : "Seg1D", n)
           .str();
  MultiEntry e = multiEntry(d);
  c += kernelEntry(static_cast<unsigned>(32 * s.wk * s.wr), e.params,
                   "fg::gemvDp4aMulti<Multi>(" + e.args + ", first);",
                   static_cast<unsigned>(s.perSm),
                   "fg::Dp4aPipe<Multi::S0> first = fg::gemvDp4aMultiPrefetch<Multi>(" + e.args +
                       ");");
  KernelSpec k = finishSpec(d.mnemonic, kernelSource("gemv.cuh").str() +
                                            kernelSource("gemv_dp4a.cuh").str() + c);
  k.grid[0] = static_cast<unsigned>(
      std::min<int64_t>(tiles, std::max<int64_t>(1, int64_t(o.smCount) * s.perSm)));
  k.block[0] = static_cast<unsigned>(32 * s.wk * s.wr);
  k.sharedBytes = s.ringBytes;
  k.params = std::move(e.bind);
  k.form = KernelForm::Dp4aGemv;
  k.actQuant = dp4aActQuant(d, o);
  return k;
}

/// The parameter struct, the entry and the launch for `d`.
KernelSpec gemvKernel(const GemvDesc &d, const EmitOptions &o) {
  const WeightStream &w0 = d.w[0];
  const WeightStream &w1 = d.w.size() > 1 ? d.w[1] : d.w[0];
  bool two = d.w.size() > 1;
  // Quantised weights always run on the tensor cores (dequantised to f16 in
  // registers, kernels/gemv.cuh "Quantised weights"), for every T.
  bool quant = isQuantized(w0.dtype) || isQuantized(w1.dtype);
  int64_t perLoad = quant ? 8 : 16 / elemBytes(w0.dtype); // weights in one 16-byte load
  bool tensorCores = w0.dtype != DType::F32 && w1.dtype != DType::F32 &&
                     (quant || (d.expert ? false
                                         : d.M >= (o.gemvTensorCoreMinRows > 0
                                                       ? o.gemvTensorCoreMinRows
                                                       : kTensorCoreMinRows)));
  GemvSplit sp = chooseSplit(tensorCores, d.N, d.K, d.M, d.expert, d.pairs, two ? 2 : 1, perLoad, o);
  // Two quantised streams hold 2 rows x 2 streams x up to 6 registers of
  // block bytes per k-step: at most 2 steps per chunk, so 512-thread blocks
  // keep them in registers (not measured yet: a first rule for the tuning).
  if (quant && two && o.gemvUnroll == 0)
    sp.unroll = std::min(sp.unroll, 2);
  // q4_K rows whose blocks start 16-byte aligned (in bytes here: checkWeights)
  // are read whole (DecQ4_KW): a k-step is a super-block, a chunk one
  // super-block, at least 4 warps per block where K allows. Measured on the
  // H200 (bench/RESULTS.md, fifth session): the first form (2 super-blocks
  // per chunk, 1 warp per block on the lm head, 136 registers) ran 12 warps
  // per SM, latency-bound at 35 % of the bandwidth; one per chunk with 4+
  // warps: 43 %. Prefetching the next chunk (kPrefetch) was no faster on one
  // stream and 11 % slower on two (174 registers); launch bounds for 24 warps
  // per SM spilled and were slower, for 16 the same: neither is the default.
  // q4_0 rows of whole 512-weight groups (288 bytes) and q8_0 rows of whole
  // 256-weight groups (272 bytes) starting 16-byte aligned take the same loop
  // (DecQ4_0W, DecQ8_0W: a k-step is a group).
  auto wideOk = [&](const WeightStream &w) {
    bool type = w.dtype == DType::Q4_K || (w.dtype == DType::Q4_0 && d.K % 512 == 0) ||
                (w.dtype == DType::IQ4_NL && o.gemvWideIq4nl && d.K % 512 == 0) ||
                (w.dtype == DType::Q6_K && o.gemvWideQ6k && d.K % 2048 == 0) ||
                (w.dtype == DType::Q8_0 && d.K % 256 == 0);
    return type && w.dtype == w0.dtype && w.off % 16 == 0 && w.ld % 16 == 0 && w.es % 16 == 0;
  };
  bool wide = tensorCores && wideOk(w0) && (!two || wideOk(w1)) && !o.gemvNarrowQuant;
  for (const auto &seg : d.segs)
    wide &= wideOk(seg.second);
  bool prefetch = false;
  // x as one f16 (EmitOptions::gemvQuantXHalf): quantised weights on the
  // tensor cores only; 16-bit weights keep hi + lo (cuBLAS-level accuracy).
  bool xHalf = o.gemvQuantXHalf && tensorCores && quant;
  if (wide) {
    int64_t sbs = d.K / (w0.dtype == DType::Q4_0 || w0.dtype == DType::IQ4_NL ? 512 : 256);
    sp.unroll = o.gemvUnroll > 0 && sbs % o.gemvUnroll == 0 ? o.gemvUnroll : 1;
    int64_t chunks = sbs / sp.unroll, blocks = (d.N + 15) / 16 * d.pairs;
    // Warps per block: from 4, doubled while the grid stays within
    // gemvWideWarpTarget warps per SM. Measured (H200, sixth session, T = 1):
    // 16 beat the first rule's 32 (gate_up 14336 x 4096 at 4 warps instead
    // of 8: q4_K 24.3 -> 18.6 us, gate|up fused 30.8 -> 28.6; down at 8
    // instead of 16: q4_0 20.3 -> 19.1, q8_0 30.5 -> 28.3).
    int64_t w = std::min<int64_t>(4, chunks);
    while (w < 16 && w * 2 <= chunks &&
           blocks * w * 2 <= static_cast<int64_t>(o.smCount) * o.gemvWideWarpTarget)
      w *= 2;
    sp.warps = o.gemvWarps > 0 ? o.gemvWarps : static_cast<int>(w);
    prefetch = o.gemvWidePrefetch < 0 ? kWidePrefetch : o.gemvWidePrefetch == 1;
    int64_t perSm = o.gemvWideWarpsPerSm == 0 ? kWideWarpsPerSm : o.gemvWideWarpsPerSm;
    if (perSm > 0)
      sp.minBlocks = static_cast<unsigned>(std::max<int64_t>(1, perSm / sp.warps));
  }
  // 16-byte weight loads: unit stride along K and every row start aligned.
  auto vecOk = [&](const WeightStream &w) {
    if (isQuantized(w.dtype)) // block decoders do their own loads
      return true;
    int64_t v = 16 / elemBytes(w.dtype);
    return w.ks == 1 && d.K % v == 0 && w.off % v == 0 && w.ld % v == 0 && w.es % v == 0;
  };
  bool wVec = vecOk(w0) && (!two || vecOk(w1));
  for (const auto &seg : d.segs)
    wVec &= vecOk(seg.second);
  bool xVec = d.x == DType::F32 && d.xKs == 1 && d.K % 8 == 0;
  for (int64_t r : d.xRows)
    xVec &= r % 4 == 0;
  if (d.expert)
    xVec &= d.xOff % 4 == 0 && d.xSt % 4 == 0 && d.xSj % 4 == 0;

  std::string xr = "0LL";
  for (size_t m = d.xRows.size(); m-- > 0;)
    xr = m + 1 == d.xRows.size() ? lit(d.xRows[m])
                                  : "m == " + std::to_string(m) + " ? " + lit(d.xRows[m]) + " : " + xr;
  // One parameter struct (per segment of fused.matmul_multi: its N and weight).
  auto cfgStruct = [&](llvm::StringRef name, int64_t N, const WeightStream &sw0) {
  const WeightStream &sw1 = two ? w1 : sw0; // one stream: Dec1 is unused
  std::string c;
  c += "struct " + name.str() + " {\n";
  c += "  using X = " + ctype(d.x) + ";\n";
  c += std::string("  using Dec0 = ") + decoderName(sw0.dtype, wide, o.gemvWideScaled) + ";\n";
  c += std::string("  using Dec1 = ") + decoderName(sw1.dtype, wide, o.gemvWideScaled) + ";\n";
  c += "  using Ids = " + ctype(d.expert || d.moeSum ? d.ids : DType::I32) + ";\n";
  c += "  using B0 = " + ctype(d.b0) + ";\n  using B1 = " + ctype(d.b1) + ";\n";
  c += "  using R = " + ctype(d.r) + ";\n";
  c += "  using NW = " + ctype(d.nw) + ";\n";
  c += "  using Epi = " + d.epilogue + ";\n";
  c += llvm::formatv("  static constexpr int M = {0}, kWarps = {1}, kUnroll = {2}, kRows = {3};\n",
                     d.M, sp.warps, sp.unroll, sp.rows)
           .str();
  c += std::string("  static constexpr bool kTensorCores = ") + (sp.tensorCores ? "true" : "false") +
       ", kPrefetch = " + (prefetch ? "true" : "false") +
       ", kXHalf = " + (xHalf ? "true" : "false") + ";\n";
  c += "  static constexpr long long N = " + lit(N) + ", K = " + lit(d.K) + ", E = " + lit(d.E) +
       ", kPairs = " + lit(d.pairs) + ", kk = " + lit(d.kk) + ";\n";
  const GemvPrefetch pf = choosePrefetch(d, sp, sw0, sw1, two ? 2 : 1, o);
  c += "  static constexpr long long kPfBlocks = " + lit(pf.blocks) +
       ", kPfBytes = " + lit(pf.rowBytes) + ";\n";
  c += std::string("  static constexpr bool kExpert = ") + (d.expert ? "true" : "false") +
       ", kBias = " + (d.bias ? "true" : "false") + ", kRes = " + (d.res ? "true" : "false") +
       ", kNorm = " + (d.norm ? "true" : "false") +
       ", kNormRow = " + (d.normRow ? "true" : "false") +
       ", kEarlyExtras = " + (o.gemvEarlyExtras ? "true" : "false") +
       ", kWVec = " + (wVec ? "true" : "false") +
       ", kXVec = " + (xVec ? "true" : "false") + ";\n";
  c += "  static constexpr long long w0_off = " + lit(sw0.off) + ", w0_ld = " + lit(sw0.ld) +
       ", w0_ks = " + lit(sw0.ks) + ", w0_es = " + lit(sw0.es) + ";\n";
  c += "  static constexpr long long w1_off = " + lit(sw1.off) + ", w1_ld = " + lit(sw1.ld) +
       ", w1_ks = " + lit(sw1.ks) + ", w1_es = " + lit(sw1.es) + ";\n";
  c += "  static constexpr long long b0_off = " + lit(d.b0Off) + ", b0_sn = " + lit(d.b0Sn) +
       ", b0_se = " + lit(d.b0Se) + ", b1_off = " + lit(d.b1Off) + ", b1_sn = " + lit(d.b1Sn) +
       ", b1_se = " + lit(d.b1Se) + ";\n";
  c += "  static constexpr long long res_off = " + lit(d.rOff) + ", res_sm = " + lit(d.rSm) +
       ", res_sn = " + lit(d.rSn) + ", nw_off = " + lit(d.nwOff) + ";\n";
  c += "  static constexpr int kNormEpsBits = " + std::to_string(floatBits(d.eps)) + ";\n";
  c += "  static constexpr long long x_ks = " + lit(d.xKs) + ", x_off = " + lit(d.xOff) +
       ", x_st = " + lit(d.xSt) + ", x_sj = " + lit(d.xSj) + ";\n";
  c += "  static constexpr long long ids_off = " + lit(d.idsOff) + ", ids_st = " + lit(d.idsSt) +
       ", ids_sj = " + lit(d.idsSj) + ";\n";
  c += "  static __device__ __forceinline__ long long xRow(int m) { return " + xr + "; }\n";
  c += "};\n";
  return c;
  };
  // q4_K, q8_0, q4_0 and q6_K at T = 1 on DP4A (EmitOptions::gemvDp4a,
  // kernels/gemv_dp4a.cuh): dense or expert-indexed (each pair one row of
  // x), the wide decoders' rows (whole k-steps, 16-byte aligned), x read
  // along K, at most 8 K-warps a block (K up to 64 k-steps); by the rule (1)
  // only launches that take no prefetch prologue (weights above its limit,
  // prologues off, or expert-indexed; the default); 3: the rule for dense
  // launches only. The rules take q4_K, q8_0, q4_0 (with x shared a block:
  // W-dense q4_0 3.32 -> 2.79 ms, fifteenth session; 27 % slower with x per
  // row group, fourteenth), q6_K with EmitOptions::gemvDp4aQ6k (on by
  // default), and dense weights above EmitOptions::gemvDp4aMinWeightBytes.
  if (d.moeSum) // emitMoeSum checked what the DP4A form needs
    return dp4aKernel(d, o, sp, cfgStruct);
  const int64_t weightBytes = gemvWeightBytes(d, w0, w1, two ? 2 : 1);
  const bool prefetched = !d.expert && prefetchLimitsAllow(weightBytes, o);
  const bool ruledType = w0.dtype == DType::Q4_K || w0.dtype == DType::Q8_0 ||
                         (w0.dtype == DType::Q4_0 && o.gemvDp4aShareX) ||
                         (w0.dtype == DType::Q6_K && o.gemvDp4aQ6k);
  const bool ruled = ruledType && !prefetched &&
                     (d.expert || weightBytes > o.gemvDp4aMinWeightBytes);
  bool dp4a = (o.gemvDp4a == 2 || (o.gemvDp4a == 1 && ruled) ||
               (o.gemvDp4a == 3 && ruled && !d.expert)) &&
              d.M == 1 && d.pairs <= 65535 && d.xKs == 1 && dp4aPolicy(w0.dtype, dp4aUse(d), o) != nullptr &&
              d.K <= 64 * dp4aStep(w0.dtype) && wideOk(w0) && (!two || wideOk(w1));
  for (const auto &seg : d.segs) // the merged segments: each read as its own matmul's
    dp4a &= wideOk(seg.second);
  dp4a &= !d.normRow; // the row's stores are gemv.cuh's (its two work splits)
  if (dp4a)
    return d.segs.empty() ? dp4aKernel(d, o, sp, cfgStruct) : dp4aMultiKernel(d, o, sp, cfgStruct);
  if (!d.segs.empty())
    return multiKernel(d, sp, cfgStruct);
  std::string c = cfgStruct("Cfg", d.N, w0);
  // The entry: exactly the pointers this launch passes.
  GemvEntry e = gemvEntry(d);
  c += kernelEntry(32 * sp.warps, e.params, "fg::gemv<Cfg>(fg::GemvArgs<Cfg>{" + e.args + "});",
                   sp.minBlocks,
                   "fg::gemvPrefetch<Cfg>(fg::GemvArgs<Cfg>{" + e.args + "}, blockIdx.x);");

  KernelSpec k = finishSpec(d.mnemonic, kernelSource("gemv.cuh").str() + c);
  k.grid[0] = static_cast<unsigned>((d.N + sp.rows - 1) / sp.rows);
  k.grid[1] = static_cast<unsigned>(std::clamp<int64_t>(d.pairs, 1, 65535));
  k.grid[2] = static_cast<unsigned>(d.expert ? 1 : (d.M + 7) / 8); // groups of 8 rows of x
  k.block[0] = 32 * sp.warps;
  k.params = std::move(e.bind);
  if (!d.expert && d.M == 1 && k.grid[1] == 1 && k.grid[2] == 1)
    k.tileRows = sp.tensorCores ? 16 : sp.rows; // gemvTile's rows of one block
  return k;
}

/// Checks the weight dtypes a GEMV can decode, and turns the element offsets
/// and strides of block-quantised streams into bytes (the decoders walk the
/// GGUF blocks of a row as stored).
llvm::Error checkWeights(const Node &node, GemvDesc &d) {
  for (const WeightStream &w : d.w)
    if (!isGemvWeightType(w.dtype))
      return unsupported(node, "weight dtype " + std::string(dtypeName(w.dtype)) + " in the GEMV");
  if (d.w.size() == 2 && (d.w[0].dtype == DType::F32) != (d.w[1].dtype == DType::F32))
    return unsupported(node, "an f32 and a 16-bit weight in one gated GEMV");
  for (WeightStream &w : d.w) {
    if (!isQuantized(w.dtype))
      continue;
    const DTypeInfo &qi = dtypeInfo(w.dtype);
    int64_t be = qi.blockElems, bb = qi.blockBytes;
    if (w.ks != 1 || d.K % be != 0 || w.off % be != 0 || w.ld % be != 0 || w.es % be != 0)
      return unsupported(node, "a " + std::string(dtypeName(w.dtype)) +
                                   " weight whose rows are not whole contiguous blocks");
    w.off = w.off / be * bb, w.ld = w.ld / be * bb, w.es = w.es / be * bb;
    const int64_t align = quantRowAlignment(w.dtype);
    if (w.off % align != 0 || w.ld % align != 0 || w.es % align != 0)
      return unsupported(node, "a " + std::string(dtypeName(w.dtype)) +
                                   " weight whose rows are not " + std::to_string(align) +
                                   "-byte aligned");
  }
  return llvm::Error::success();
}

/// Dense: x [.., K] (rows = all dims but the last), w [N, K] (1 or 2 of them),
/// optional biases [N].
llvm::Expected<std::vector<Launch>> emitDense(const Function &fn, const Node &node,
                                              llvm::ArrayRef<Layout> ls, unsigned streams,
                                              const EmitOptions &o) {
  // Operands: x, [norm weight], weights, [biases | addend].
  const unsigned w0At = gemvOperands(node.kind).first;
  const bool norm = w0At == 2;
  const TensorType &xt = fn.type(node.operands[0]), &wt = fn.type(node.operands[w0At]);
  GemvDesc d;
  d.mnemonic = node.info().mnemonic;
  d.x = xt.dtype;
  if (norm) {
    d.norm = true;
    d.nw = fn.type(node.operands[1]).dtype;
    d.nwOff = ls[1].offset;
    d.eps = node.kind == OpKind::FusedRmsNormMatmul      ? op::FusedRmsNormMatmul(node).eps()
            : node.kind == OpKind::FusedRmsNormMulMatmul ? op::FusedRmsNormMulMatmul(node).eps()
                                                         : op::FusedRmsNormGatedMatmul(node).eps();
    d.normRow = node.kind == OpKind::FusedRmsNormMulMatmul;
    if (ls[1].strides.back() != 1 && ls[1].shape.back() != 1)
      return unsupported(node, "a norm weight that is not unit-stride");
  }
  d.N = wt.shape[0];
  d.K = wt.shape[1];
  d.xRows = rowOffsets(ls[0]);
  d.M = static_cast<int64_t>(d.xRows.size());
  d.xKs = ls[0].strides.back();
  if (streams == 2 && d.M > o.maxGemvTokens)
    return unsupported(node, llvm::formatv("{0} rows of x (the GEMV takes at most {1})", d.M,
                                           o.maxGemvTokens)
                                 .str());
  for (unsigned s = 0; s < streams; ++s) {
    const Layout &wl = ls[w0At + s];
    d.w.push_back(
        {fn.type(node.operands[w0At + s]).dtype, wl.offset, wl.strides[0], wl.strides[1], 0});
  }
  if (streams == 2 && norm) {
    d.epilogue = gluEpilogue(op::FusedRmsNormGatedMatmul(node));
  } else if (streams == 2) {
    d.epilogue = gluEpilogue(op::FusedGatedMatmul(node));
    if (node.operands.size() > 3) {
      d.bias = true;
      d.b0 = fn.type(node.operands[3]).dtype;
      d.b1 = fn.type(node.operands[4]).dtype;
      d.b0Off = ls[3].offset, d.b0Sn = ls[3].strides.back();
      d.b1Off = ls[4].offset, d.b1Sn = ls[4].strides.back();
    }
  }
  if (node.kind == OpKind::FusedMatmulAdd) {
    // The addend: one row of N per row of y, evenly spaced, or one shared row.
    const Layout &rl = ls[2];
    std::vector<int64_t> rows = rowOffsets(rl);
    d.res = true;
    d.r = fn.type(node.operands[2]).dtype;
    d.rOff = rows.front();
    d.rSn = rl.strides.back();
    if (rows.size() == 1) {
      d.rSm = 0;
    } else if (static_cast<int64_t>(rows.size()) == d.M) {
      d.rSm = rows[1] - rows[0];
      for (size_t m = 1; m < rows.size(); ++m)
        if (rows[m] - rows[m - 1] != d.rSm)
          return unsupported(node, "an addend whose rows are not evenly spaced");
    } else {
      return unsupported(node, "an addend of " + std::to_string(rows.size()) + " rows for " +
                                   std::to_string(d.M) + " rows of x");
    }
  }
  if (llvm::Error e = checkWeights(node, d))
    return e;
  return std::vector<Launch>{gemvKernel(d, o)};
}

/// fused.matmul_multi: x [.., K] and 2 or 3 weights w_s [N_s, K] of one
/// dtype, one result [.., N_s] each; each segment is the one-stream GEMV a
/// plain matmul of that weight would run, in one launch.
/// fused.rms_norm_matmul_multi: the same after a norm weight, every block
/// normalising x as fused.rms_norm_matmul's do.
llvm::Expected<std::vector<Launch>> emitMulti(const Function &fn, const Node &node,
                                              llvm::ArrayRef<Layout> ls, const EmitOptions &o) {
  const TensorType &xt = fn.type(node.operands[0]);
  const unsigned w0At = gemvOperands(node.kind).first; // 2 after a norm weight
  GemvDesc d;
  d.mnemonic = node.info().mnemonic;
  d.x = xt.dtype;
  d.K = xt.rowLength();
  d.xRows = rowOffsets(ls[0]);
  d.M = static_cast<int64_t>(d.xRows.size());
  d.xKs = ls[0].strides.back();
  if (d.M > o.maxGemvTokens)
    return unsupported(node, llvm::formatv("{0} rows of x (the GEMV takes at most {1})", d.M,
                                           o.maxGemvTokens)
                                 .str());
  if (w0At == 2) { // fused.rms_norm_matmul_multi: every segment's blocks normalise x
    d.norm = true;
    d.nw = fn.type(node.operands[1]).dtype;
    d.nwOff = ls[1].offset;
    d.eps = op::FusedRmsNormMatmulMulti(node).eps();
    if (ls[1].strides.back() != 1 && ls[1].shape.back() != 1)
      return unsupported(node, "a norm weight that is not unit-stride");
  }
  for (size_t i = w0At; i < node.operands.size(); ++i) {
    const TensorType &wt = fn.type(node.operands[i]);
    const Layout &wl = ls[i];
    if (wt.dtype != fn.type(node.operands[w0At]).dtype)
      return unsupported(node, "weights of different dtypes (" +
                                   fn.type(node.operands[w0At]).str() + ", " + wt.str() + ")");
    // Where the plain matmul would go to cuBLAS the merged GEMV has no kernel.
    if (std::string why = cublasRowsRefusal(d.M, wt, o); !why.empty())
      return unsupported(node, why);
    GemvDesc seg;
    seg.K = d.K;
    seg.w.push_back({wt.dtype, wl.offset, wl.strides[0], wl.strides[1], 0});
    if (llvm::Error e = checkWeights(node, seg)) // quantised: offsets in bytes
      return e;
    d.segs.push_back({wt.shape[0], seg.w.front()});
    d.N += wt.shape[0];
  }
  d.w = {d.segs.front().second};
  return std::vector<Launch>{gemvKernel(d, o)};
}

/// Expert-indexed: x [T, X, K] (X = 1: every slot reads its token's row),
/// w [E, N, K] (1 or 2 of them), ids [T, k], optional biases [E, N].
llvm::Expected<std::vector<Launch>> emitExpert(const Function &fn, const Node &node,
                                               llvm::ArrayRef<Layout> ls, unsigned streams,
                                               const EmitOptions &o) {
  const TensorType &xt = fn.type(node.operands[0]), &wt = fn.type(node.operands[1]);
  unsigned idsAt = 1 + streams;
  const TensorType &it = fn.type(node.operands[idsAt]);
  const Layout &xl = ls[0], &il = ls[idsAt];
  GemvDesc d;
  d.mnemonic = node.info().mnemonic;
  d.expert = true;
  d.x = xt.dtype;
  d.ids = it.dtype;
  d.E = wt.shape[0];
  d.N = wt.shape[1];
  d.K = wt.shape[2];
  d.kk = it.shape[1];
  d.pairs = xt.shape[0] * d.kk;
  d.xKs = xl.strides[2];
  d.xOff = xl.offset, d.xSt = xl.strides[0], d.xSj = xt.shape[1] == 1 ? 0 : xl.strides[1];
  d.idsOff = il.offset, d.idsSt = il.strides[0], d.idsSj = il.strides[1];
  for (unsigned s = 0; s < streams; ++s) {
    const Layout &wl = ls[1 + s];
    d.w.push_back({fn.type(node.operands[1 + s]).dtype, wl.offset, wl.strides[1], wl.strides[2],
                   wl.strides[0]});
  }
  if (streams == 2) {
    d.epilogue = gluEpilogue(op::FusedGatedMatmulId(node));
    if (node.operands.size() > idsAt + 1) {
      d.bias = true;
      const Layout &bg = ls[idsAt + 1], &bu = ls[idsAt + 2];
      d.b0 = fn.type(node.operands[idsAt + 1]).dtype;
      d.b1 = fn.type(node.operands[idsAt + 2]).dtype;
      d.b0Off = bg.offset, d.b0Se = bg.strides[0], d.b0Sn = bg.strides[1];
      d.b1Off = bu.offset, d.b1Se = bu.strides[0], d.b1Sn = bu.strides[1];
    }
  }
  if (llvm::Error e = checkWeights(node, d))
    return e;
  return std::vector<Launch>{gemvKernel(d, o)};
}

/// Warps a block of the float-weight form, and 16-byte units a lane loads
/// before its arithmetic (kernels/moe_sum.cuh).
constexpr int kMoeSumWarps = 8, kMoeSumChunk = 8;

/// fused.matmul_id_sum_add at T = 1 with f16, bf16 or f32 expert rows
/// (kernels/moe_sum.cuh, moeSumFloat: a warp a row over the k slots' rows
/// end to end); emitMoeSum checked x, the routing weights and the residual.
llvm::Expected<std::vector<Launch>> emitMoeSumFloat(const Function &fn, const Node &node,
                                                    llvm::ArrayRef<Layout> ls,
                                                    const EmitOptions &o) {
  const TensorType &xt = fn.type(node.operands[0]), &wt = fn.type(node.operands[1]);
  const TensorType &it = fn.type(node.operands[2]), &st = fn.type(node.operands[3]);
  const TensorType &rt = fn.type(node.operands[4]), &yt = fn.type(node.result());
  const Layout &xl = ls[0], &wl = ls[1], &il = ls[2], &sl = ls[3], &rl = ls[4];
  const int64_t kk = it.shape[1], kc = wt.shape[2], n = wt.shape[1];
  const int64_t perLoad = wt.dtype == DType::F32 ? 4 : 8, esize = wt.dtype == DType::F32 ? 4 : 2;
  if (yt.dtype != DType::F32)
    return unsupported(node, "a result " + yt.str() + " (the float-weight form stores f32)");
  if (kc % perLoad != 0 || wl.strides[2] != 1 || (wl.offset * esize) % 16 != 0 ||
      (wl.strides[1] * esize) % 16 != 0 || (wl.strides[0] * esize) % 16 != 0)
    return unsupported(node, "expert rows " + wt.str() +
                                 " that are not whole 16-byte units starting 16-byte aligned");
  if (xl.offset % 4 != 0)
    return unsupported(node, "x " + xt.str() + " that does not start 16-byte aligned");
  if (kk > 64 || isQuantized(it.dtype) || isQuantized(st.dtype) || isQuantized(rt.dtype))
    return unsupported(node, llvm::formatv("{0} slots (at most 64)", kk).str());
  std::string c = "struct Cfg {\n";
  c += "  using W = " + ctype(wt.dtype) + ";\n  using Dec = " +
       decoderName(wt.dtype, false, false) + ";\n  using Ids = " + ctype(it.dtype) +
       ";\n  using SW = " + ctype(st.dtype) + ";\n  using R = " + ctype(rt.dtype) + ";\n";
  c += llvm::formatv("  static constexpr int kk = {0}, Kc = {1}, kWarps = {2}, kChunk = {3};\n", kk,
                     kc, kMoeSumWarps, kMoeSumChunk)
           .str();
  c += "  static constexpr bool kEarlyIds = false;\n"; // EarlyExperts.h may turn it on
  c += llvm::formatv("  static constexpr long long N = {0}, E = {1}, w_off = {2}, w_ld = {3}, "
                     "w_es = {4}, x_off = {5}, ids_off = {6}, ids_sj = {7}, sw_off = {8}, "
                     "sw_sj = {9}, r_off = {10}, r_sn = {11};\n",
                     lit(n), lit(wt.shape[0]), lit(wl.offset), lit(wl.strides[1]),
                     lit(wl.strides[0]), lit(xl.offset), lit(il.offset), lit(il.strides[1]),
                     lit(sl.offset), lit(sl.strides[1]), lit(rl.offset), lit(rl.strides.back()))
           .str();
  c += "};\n";
  c += kernelEntry(32 * kMoeSumWarps,
                   "float* y, const float* x, const Cfg::W* w, const Cfg::Ids* ids, "
                   "const Cfg::SW* sw, const Cfg::R* res",
                   "fg::moeSumFloat<Cfg>(ma, pre);", 2,
                   "const fg::MoeSumArgs<Cfg> ma{y, x, w, ids, sw, res};\n  "
                   "const fg::MoeSumPre<Cfg> pre = fg::moeSumPrologue<Cfg>(ma);");
  KernelSpec k = finishSpec(node.info().mnemonic,
                            kernelSource("gemv.cuh").str() + kernelSource("moe_sum.cuh").str() + c);
  // A warp a row; two blocks an SM at most (the rest loop).
  k.grid[0] = static_cast<unsigned>(std::clamp<int64_t>(
      (n + kMoeSumWarps - 1) / kMoeSumWarps, 1, 2 * int64_t(std::max(o.smCount, 1u))));
  k.block[0] = 32 * kMoeSumWarps;
  k.params = {Param::result(0),  Param::operand(0), Param::operand(1),
              Param::operand(2), Param::operand(3), Param::operand(4)};
  return std::vector<Launch>{std::move(k)};
}

/// fused.matmul_id_sum_add at T = 1: x [1, k, Kc] (contiguous: one row of
/// k·Kc), w [E, N, Kc], ids [1, k], routing weights [1, k(, 1)], residual
/// [1, N] -> [1, N], on the DP4A GEMV with each lane's k-steps from its
/// slot's expert (gemv_dp4a.cuh, Dp4aMoeSum). Anything else is refused, so
/// the fusion is declined and matmul_id and the sum keep their launches.
llvm::Expected<std::vector<Launch>> emitMoeSum(const Function &fn, const Node &node,
                                               llvm::ArrayRef<Layout> ls, const EmitOptions &o) {
  const TensorType &xt = fn.type(node.operands[0]), &wt = fn.type(node.operands[1]);
  const TensorType &it = fn.type(node.operands[2]), &st = fn.type(node.operands[3]);
  const TensorType &rt = fn.type(node.operands[4]);
  const Layout &xl = ls[0], &wl = ls[1], &il = ls[2], &sl = ls[3], &rl = ls[4];
  if (xt.rank() != 3 || wt.rank() != 3 || it.rank() != 2 || xt.shape[0] != 1)
    return unsupported(node, "x " + xt.str() + " (the fused down projection takes one token, "
                                               "x [1, k, K])");
  const DType t = wt.dtype;
  const int64_t kk = it.shape[1], kc = wt.shape[2];
  if (xt.dtype != DType::F32 || xl.strides[2] != 1 || xl.strides[1] != kc)
    return unsupported(node, "x " + xt.str() + " that is not one contiguous f32 row of k·K");
  if (st.numElements() != kk || !(st.rank() == 2 || (st.rank() == 3 && st.shape[2] == 1)))
    return unsupported(node, "routing weights " + st.str() + " (one per slot: [1, k] or [1, k, 1])");
  if (rt.numElements() != wt.shape[1] || rl.strides.back() != 1)
    return unsupported(node, "residual " + rt.str() + " (one unit-stride row of N)");
  if (o.moeSumFloat && (t == DType::F16 || t == DType::BF16 || t == DType::F32))
    return emitMoeSumFloat(fn, node, ls, o);
  if (o.gemvDp4a == 0 || dp4aPolicy(t, Dp4aUse::Lanes, o) == nullptr)
    return unsupported(node, "weights " + wt.str() +
                                 " (it runs on the DP4A GEMV: q4_K, q8_0, q4_0 or q6_K; f16, "
                                 "bf16 and f32 on moe_sum.cuh unless FG_DEBUG_MOE_SUM_FLOAT=0)");
  if (kc % dp4aStep(t) != 0 || kk * kc > 64 * dp4aStep(t))
    return unsupported(node, llvm::formatv("{0} slots of K {1} (each slot whole {2}-weight "
                                           "k-steps, at most 64 k-steps in all)",
                                           kk, kc, dp4aStep(t))
                                 .str());
  GemvDesc d;
  d.mnemonic = node.info().mnemonic;
  d.moeSum = true;
  d.x = xt.dtype;
  d.ids = it.dtype;
  d.E = wt.shape[0];
  d.N = wt.shape[1];
  d.kk = kk;
  d.K = kk * kc;
  d.slotSteps = kc / dp4aStep(t);
  d.xRows = {xl.offset};
  d.M = 1;
  d.idsOff = il.offset, d.idsSj = il.strides[1];
  d.sw = st.dtype, d.swOff = sl.offset, d.swSj = sl.strides[1];
  d.res = true, d.r = rt.dtype, d.rOff = rl.offset, d.rSm = 0, d.rSn = 1;
  d.w.push_back({t, wl.offset, wl.strides[1], wl.strides[2], wl.strides[0]});
  if (llvm::Error e = checkWeights(node, d))
    return e;
  const WeightStream &w = d.w.front();
  if (w.off % 16 != 0 || w.ld % 16 != 0 || w.es % 16 != 0)
    return unsupported(node, "expert rows that do not start 16-byte aligned");
  return std::vector<Launch>{gemvKernel(d, o)};
}

} // namespace

llvm::Expected<std::vector<Launch>> emitGemv(const Function &fn, const Node &node,
                                             llvm::ArrayRef<Layout> ls, const EmitOptions &o) {
  // Only the weight streams may be block-quantised; x, the norm weight, ids,
  // biases, addends and the result may not.
  const GemvOperands wo = gemvOperands(node.kind);
  for (size_t i = 0; i < node.operands.size(); ++i)
    if ((i < wo.first || i >= wo.first + wo.streams) &&
        isQuantized(fn.type(node.operands[i]).dtype))
      return unsupported(node, llvm::formatv("block-quantised operand {0} ({1})", i,
                                             fn.type(node.operands[i]).str())
                                   .str());
  for (ValueId r : node.results)
    if (isQuantized(fn.type(r).dtype))
      return unsupported(node, "a block-quantised result " + fn.type(r).str());
  // Prefill chunks of expert-indexed matmuls: one grouped GEMM (MoeEmitter.cpp).
  auto grouped = [&](unsigned n) {
    return fn.type(node.operands[0]).shape[0] >= o.groupedExpertMinTokens &&
           groupedExpertRefusal(fn, node, n, o.groupedExpertQuant).empty();
  };
  switch (node.kind) {
  case OpKind::FusedGatedMatmul:
  case OpKind::FusedRmsNormGatedMatmul: {
    // The GEMV only where each stream alone would take it: where the plain
    // matmul goes to cuBLAS (3+ rows over large 16-bit weights), the two
    // GEMMs and the glu are faster than the gated tensor-core GEMV
    // (thirty-seventh session, H200: W-dense gate|up f16 at T = 4 / 8
    // 115 / 106 µs, 46-50 % of the bandwidth, against 55-57 µs at T = 1 / 2;
    // fg_bench_patterns gated_matmul T = 8: 0.68x), so the fusion is refused.
    const int64_t rows = fn.type(node.operands[0]).numRows();
    const TensorType &wt = fn.type(node.operands[gemvOperands(node.kind).first]);
    if (std::string why = cublasRowsRefusal(rows, wt, o); rows <= o.maxGemvTokens && !why.empty())
      return unsupported(node, why);
    return emitDense(fn, node, ls, 2, o);
  }
  case OpKind::FusedMatmulMulti:
  case OpKind::FusedRmsNormMatmulMulti:
    return emitMulti(fn, node, ls, o);
  case OpKind::FusedGatedMatmulId:
    if (grouped(2))
      return emitGroupedExpert(fn, node, ls, 2, gluEpilogue(op::FusedGatedMatmulId(node)), o);
    return emitExpert(fn, node, ls, 2, o);
  case OpKind::FusedMatmulIdSumAdd:
    return emitMoeSum(fn, node, ls, o);
  case OpKind::MatMulId:
    if (grouped(1))
      return emitGroupedExpert(fn, node, ls, 1, "fg::EpiStore", o);
    return emitExpert(fn, node, ls, 1, o);
  case OpKind::FusedMatmulAdd: {
    // The GEMV with the addend in its epilogue where the plain matmul would
    // take the GEMV; where it would go to cuBLAS, one cuBLASLt GEMM with the
    // residual as C (makeLtAddend).
    const TensorType &xt = fn.type(node.operands[0]), &wt = fn.type(node.operands[1]);
    int64_t rows = xt.numRows();
    if (rows > o.maxGemvTokens || cublasIsFaster(rows, wt, o))
      return emitCublas(fn, node, ls);
    return emitDense(fn, node, ls, 1, o);
  }
  case OpKind::FusedRmsNormMatmul:
  case OpKind::FusedRmsNormMulMatmul: {
    // The GEMV only where the plain matmul would take it (cuBLAS, which has
    // no such prologue here, is faster above): the fusion is refused there.
    const TensorType &xt = fn.type(node.operands[0]);
    const TensorType &wt = fn.type(node.operands[2]);
    int64_t rows = xt.numRows();
    if (rows > o.maxGemvTokens)
      return unsupported(node, llvm::formatv("{0} rows of x (the GEMV takes at most {1})", rows,
                                             o.maxGemvTokens)
                                   .str());
    if (std::string why = cublasRowsRefusal(rows, wt, o); !why.empty())
      return unsupported(node, why);
    return emitDense(fn, node, ls, 1, o);
  }
  default:
    break;
  }
  const TensorType &xt = fn.type(node.operands[0]), &wt = fn.type(node.operands[1]);
  int64_t rows = xt.numRows();
  if (rows > o.maxGemvTokens)
    return emitCublas(fn, node, ls);
  if (cublasIsFaster(rows, wt, o))
    return emitCublas(fn, node, ls);
  return emitDense(fn, node, ls, 1, o);
}

} // namespace fg::cuda::detail

namespace fg::cuda {

bool readsQuantizedNatively(const Function &fn, const Node &node, unsigned operand,
                            const EmitOptions &o, std::string *why) {
  auto no = [&](std::string w) {
    if (why)
      *why = std::move(w);
    return false;
  };
  if (node.kind == OpKind::GetRows && operand == 0)
    return detail::quantGetRowsSupported(fn, node, why);
  const detail::GemvOperands wo = detail::gemvOperands(node.kind);
  if (!wo.family)
    return no("'" + std::string(node.info().mnemonic) + "' reads no quantised operand");
  if (operand < wo.first || operand >= wo.first + wo.streams)
    return no("operand " + std::to_string(operand) + " of '" + std::string(node.info().mnemonic) +
              "' is not a weight");
  DType t = fn.type(node.operands[operand]).dtype;
  if (!detail::gemvDecodesNatively(t))
    return no("no GEMV decoder for " + std::string(dtypeName(t)));
  // A plain matmul (and fused.matmul_add, as its cuBLASLt form) over more
  // rows decodes the weight to f16 in scratch for cuBLAS (emitCublasQuant);
  // the other fused forms refuse those rows, so their fusion is declined and
  // the plain matmul remains.
  (void)o;
  return true;
}

} // namespace fg::cuda
