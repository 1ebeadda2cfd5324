//===- GatedGemm.cpp - fused.gated_gemm: gate|up stacked, then the GLU ----===//
//
// A prefill chunk's gate and up projections (passes/fusion/gated_gemm.cpp):
//
//   1. one cuBLAS GEMM, C[2N × T] = [W_gate; W_up] · xᵀ in cuBLAS's terms, A
//      the gate weight read on into the up weight (stackRows = N,
//      CublasGemmSpec): each row t of the scratch holds gate t then up t,
//      2N values — in the result's 16-bit type where that is the GEMM's
//      operand type (EmitOptions::gatedGemmNarrowC; f32 accumulation either
//      way), else f32. The launch schedule keeps it one GEMM where the up weight
//      starts on the byte after the gate weight ends in the runner's weight
//      allocation (runtime/Program.h, weightFollows), else issues two GEMMs
//      into the two halves of every row — the same scratch either way;
//   2. the GLU of each row's halves, written in the result's 16-bit type
//      (gluOfStackedRows, the elementwise template's EwGlu).
//
// Block-quantised weights are first decoded, gate's rows then up's, into one
// f16 matrix [2N, K] in scratch by one launch (kernels/dequant.cuh's pair
// form; emitCublasQuant decodes one weight so), so their GEMM is stacked
// wherever the weights lie.
//
// Scratch: [x dense, where its rows are not evenly spaced and unit-stride |
// 2N × K f16, quantised weights only | T × 2N C (f16, bf16 or f32)]. x must already be in the
// GEMM's type (the weights', f16 for quantised ones: the pattern's legality;
// the gemm-inputs pass converts it), the weights packed rows (whole blocks
// when quantised).
//
//===----------------------------------------------------------------------===//
#include "codegen/cuda/EmitterCommon.h"

#include "llvm/Support/FormatVariadic.h"

namespace fg::cuda::detail {

namespace {

/// Whether `l` (rank 2) has unit-stride rows `rowStride` elements apart.
bool evenRows(const Layout &l, int64_t &rowStride) {
  if (l.shape.size() != 2 || (l.shape[1] > 1 && l.strides[1] != 1))
    return false;
  rowStride = l.shape[0] > 1 ? l.strides[0] : l.shape[1];
  return rowStride >= l.shape[1];
}

} // namespace

llvm::Expected<std::vector<Launch>> emitGatedGemm(const Function &fn, const Node &node,
                                                  llvm::ArrayRef<Layout> ls,
                                                  const EmitOptions &o) {
  const TensorType &xt = fn.type(node.operands[0]), &wt = fn.type(node.operands[1]);
  const TensorType &ut = fn.type(node.operands[2]), &yt = fn.type(node.result());
  const bool quant = isQuantized(wt.dtype);
  if (quant && !gemvDecodesNatively(wt.dtype))
    return unsupported(node, "weight dtype " + std::string(dtypeName(wt.dtype)) + " for cuBLAS");
  if (!quant && wt.dtype != DType::F16 && wt.dtype != DType::BF16)
    return unsupported(node, "gate and up weights of dtype " + std::string(dtypeName(wt.dtype)) +
                                 " (f16, bf16 or block-quantised only)");
  if (ut != wt)
    return unsupported(node, "gate weights " + wt.str() + " and up weights " + ut.str());
  // The GEMM's operand type: the weights', or f16 for quantised weights
  // decoded into scratch (emitCublasQuant's rule).
  const DType gemmType = quant ? DType::F16 : wt.dtype;
  if (xt.dtype != gemmType)
    return unsupported(node, "x of dtype " + std::string(dtypeName(xt.dtype)) + ", not " +
                                 std::string(dtypeName(gemmType)));
  if (xt.rank() != 2 || wt.rank() != 2)
    return unsupported(node, "x and the weights must be matrices");
  const int64_t T = xt.shape[0], K = xt.shape[1], N = wt.shape[0];
  if (T <= o.maxGemvTokens)
    return unsupported(node, llvm::formatv("{0} rows of x (the GEMV takes up to {1}: "
                                           "fused.gated_matmul)",
                                           T, o.maxGemvTokens)
                                 .str());
  if (wt.shape[1] != K)
    return unsupported(node, "weights " + wt.str() + " do not match x " + xt.str());
  if (yt.dtype != DType::F16 && yt.dtype != DType::BF16)
    return unsupported(node, "a result of dtype " + std::string(dtypeName(yt.dtype)));
  // x rows evenly spaced and unit-stride are read in place; others (a view
  // the pattern accepted) are copied dense into scratch first, as emitCublas
  // does.
  int64_t xStride = 0;
  const bool xInPlace = evenRows(ls[0], xStride);
  const int64_t be = quant ? dtypeInfo(wt.dtype).blockElems : 1;
  for (unsigned i : {1u, 2u}) {
    const Layout &l = ls[i];
    bool rows = l.strides.size() == 2 && l.strides[1] == 1 &&
                (quant ? l.offset % be == 0 && l.strides[0] % be == 0 && K % be == 0
                       : l.strides[0] == K);
    if (!rows)
      return unsupported(node, quant ? "a quantised weight whose rows are not whole contiguous "
                                       "blocks"
                                     : "gate and up weights whose rows are not packed");
  }
  // Scratch: [x dense (only when not read in place) | the weights decoded,
  // 2N x K f16 (quantised only) | C, T x 2N f32], each part 256-byte aligned.
  auto align = [](uint64_t b) { return (b + 255) / 256 * 256; };
  const uint64_t gemmBytes = static_cast<uint64_t>(storageBytes(gemmType, 1));
  const uint64_t xBytes = xInPlace ? 0 : align(static_cast<uint64_t>(T * K) * gemmBytes);
  const uint64_t wAt = xBytes;
  const uint64_t wBytes = quant ? align(static_cast<uint64_t>(2 * N * K) * 2) : 0;
  const uint64_t cAt = wAt + wBytes;
  // gate|up in the result's type where the GEMM's operands have it
  // (EmitOptions::gatedGemmNarrowC), else f32.
  const DType cType = o.gatedGemmNarrowC && yt.dtype == gemmType ? gemmType : DType::F32;
  const uint64_t cElem = static_cast<uint64_t>(storageBytes(cType, 1));
  const uint64_t scratch = cAt + static_cast<uint64_t>(T) * static_cast<uint64_t>(2 * N) * cElem;
  std::vector<Launch> out;
  if (!xInPlace) {
    KernelSpec cvt = emitCopyKernel(xt.dtype, ls[0], gemmType, Param::scratch(), Param::operand(0));
    cvt.scratchBytes = scratch;
    out.push_back(std::move(cvt));
    xStride = K;
  }

  CublasGemmSpec g;
  g.name = "gated_gemm_cublas";
  g.transA = true;
  g.transB = false;
  g.m = 2 * N;
  g.n = T;
  g.k = K;
  g.aType = g.bType = gemmType;
  g.cType = cType;
  g.lda = K;
  g.ldb = xStride;
  g.ldc = 2 * N;
  g.b = xInPlace ? GemmOperand{Param::operand(0), static_cast<uint64_t>(ls[0].offset) * gemmBytes}
                 : GemmOperand{Param::scratch(), 0};
  g.c = {Param::scratch(), cAt};
  g.scratchBytes = scratch;
  if (quant) {
    // Gate's rows then up's, decoded by one launch into one f16 matrix
    // [2N, K]: the stacked GEMM needs no placement of quantised weights.
    DequantDesc dq;
    dq.mnemonic = node.info().mnemonic;
    dq.q = wt.dtype;
    dq.out = DType::F16;
    dq.K = K;
    dq.R = N;
    dq.V = N;
    dq.wOff = ls[1].offset;
    dq.wLd = ls[1].strides[0];
    dq.pair = true;
    dq.w2Off = ls[2].offset;
    dq.w2Ld = ls[2].strides[0];
    dq.w2Param = Param::operand(2);
    dq.oOff = static_cast<int64_t>(wAt / 2);
    dq.oLd = K;
    dq.outParam = Param::scratch();
    dq.wParam = Param::operand(1);
    KernelSpec deq = dequantKernel(dq);
    deq.scratchBytes = scratch;
    out.push_back(std::move(deq));
    g.a = {Param::scratch(), wAt};
  } else {
    const uint64_t es = static_cast<uint64_t>(storageBytes(wt.dtype, 1));
    g.a = {Param::operand(1), static_cast<uint64_t>(ls[1].offset) * es};
    g.a2 = {Param::operand(2), static_cast<uint64_t>(ls[2].offset) * es};
    g.stackRows = N;
  }
  out.push_back(std::move(g));
  KernelSpec glu =
      gluOfStackedRows(node, T, N, static_cast<int64_t>(cAt / cElem), cType, yt.dtype, o);
  glu.scratchBytes = scratch;
  out.push_back(std::move(glu));
  return out;
}

} // namespace fg::cuda::detail
