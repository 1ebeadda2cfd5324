//===- gated_gemm.cpp - a prefill chunk's gate|up GEMM with the GLU --------===//
//
// Above the GEMV's token limit the gate and up projections are two library
// GEMMs over one x, and fused.glu_convert writes the GLU in the down
// projection's 16-bit type:
//
//   %g = matmul(%x, %w_gate) : f32[512, 14336]     // x: f16[512, 4096]
//   %u = matmul(%x, %w_up) : f32[512, 14336]
//   %t = glu(%g, %u) {kind = swiglu} : f32[512, 14336]
//   %y = convert(%t) {dtype = f16} : f16[512, 14336]
// becomes
//   %y = fused.gated_gemm(%x, %w_gate, %w_up) {kind = swiglu, dtype = f16}
//
// The CUDA target runs it as one GEMM over gate and up stacked (N = 28672 at
// W-dense's shape) into scratch, then the GLU from the two halves of each
// row. fg_bench_prefill_gemms (twenty-eighth session, H200) timed a W-dense
// layer's GEMMs at 512 rows with q|k|v and gate|up merged 9.3 % faster than
// one GEMM each (276 against 304 µs); at 2048 rows 2.8 % slower (1200 against
// 1167), where the separate GEMMs already fill the GPU. The stacked GEMM
// needs the two weights one after the other in device memory (the runner
// places weight slots in table order: runtime/Program.h, weightFollows);
// where they are not, the target runs two GEMMs into the scratch's halves.
//
// Block-quantised weights (W-dense q4_K's prefill) are decoded into one f16
// matrix first, so their GEMM is stacked wherever they lie.
//
// Legality: more rows than the target's GEMV takes (below, gated_matmul);
// x in the GEMM's type (the weights', f16 for quantised ones: the gemm-inputs
// pass converted it) with evenly spaced unit-stride rows; gate and up weights
// of one type (16-bit float or block-quantised) and shape, contiguous; each
// matmul and the GLU used once; a 16-bit target type.
// On by default since the twenty-ninth session: with random weights (the
// constant-filled bench above flatters every form by ~14 %: tensor cores draw
// less power on constant data) the plan's stacked GEMM takes 167.6 µs at 512
// rows where gate and up took 98.6 each (Nsight Compute, H200).
//
//===----------------------------------------------------------------------===//
#include "passes/fusion/Pattern.h"

namespace fg::fusion {
namespace {

class GatedGemm : public TreePattern {
public:
  GatedGemm() {
    addVariant("gated_gemm",
               m::Convert(m::Glu(m::MatMul(m::Any(Cap::x), m::Any(Cap::wGate)).bind(Cap::gate)
                                     .singleUse(),
                                 m::MatMul(m::Any(Cap::x), m::Any(Cap::wUp)).bind(Cap::up)
                                     .singleUse())
                              .bind(Cap::glu)
                              .singleUse()));
  }
  llvm::StringRef name() const override { return "gated_gemm"; }
  bool foldsGemmInputConverts() const override { return true; }

  Decision check(const Function &fn, const Match &m) const override {
    ValueId x = m.get(Cap::x), wg = m.get(Cap::wGate), wu = m.get(Cap::wUp);
    const TensorType &xt = fn.type(x), &wt = fn.type(wg);
    int64_t rows = xt.numRows();
    int64_t maxTokens = target() ? target()->maxGemvTokens() : 0;
    if (rows <= maxTokens)
      return Decision::no(label(fn, x) + " has " + llvm::Twine(rows) +
                          " rows; the GEMV takes up to " + llvm::Twine(maxTokens) +
                          " (gated_matmul)");
    const bool quant = isQuantized(wt.dtype);
    if (!quant && wt.dtype != DType::F16 && wt.dtype != DType::BF16)
      return Decision::no("weights " + label(fn, wg) + " " + wt.str() +
                          " are neither 16-bit floats nor block-quantised");
    if (fn.type(wu) != wt)
      return Decision::no("gate weights " + label(fn, wg) + " " + wt.str() + " and up weights " +
                          label(fn, wu) + " " + fn.type(wu).str() + " differ");
    if (wg == wu)
      return Decision::no("gate and up are one weight " + label(fn, wg));
    // The library GEMM's type: the weights', f16 for quantised weights (the
    // target decodes them in scratch).
    const DType gemmType = quant ? DType::F16 : wt.dtype;
    if (xt.dtype != gemmType)
      return Decision::no("input " + label(fn, x) + " " + xt.str() + " is not in the GEMM's " +
                          std::string(dtypeName(gemmType)) + " (gemm-inputs converts it)");
    if (!hasContiguousRows(fn, x))
      return Decision::no("the rows of input " + label(fn, x) + " must be packed");
    if (!isContiguous(fn, wg) || !isContiguous(fn, wu))
      return Decision::no("the gate and up weights must be contiguous");
    DType to = fn.type(fn.node(m.root).result()).dtype;
    if (to != DType::F16 && to != DType::BF16)
      return Decision::no("the convert's target " + std::string(dtypeName(to)) +
                          " is not a 16-bit float");
    return Decision::yes();
  }

  FusedOp rewrite(const Function &fn, const Match &m) const override {
    auto glu = m.op<op::Glu>(fn, Cap::glu);
    return FusedOp::of(op::FusedGatedGemmArgs{.x = m.get(Cap::x),
                                              .wGate = m.get(Cap::wGate),
                                              .wUp = m.get(Cap::wUp),
                                              .kind = glu->kind(),
                                              .alpha = glu->alpha(),
                                              .limit = glu->limit(),
                                              .dtype = fn.type(fn.node(m.root).result()).dtype});
  }
};

} // namespace

std::unique_ptr<FusionPattern> createGatedGemmPattern() { return std::make_unique<GatedGemm>(); }

} // namespace fg::fusion
