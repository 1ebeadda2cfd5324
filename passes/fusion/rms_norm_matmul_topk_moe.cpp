//===- rms_norm_matmul_topk_moe.cpp - the MoE router in one launch ---------===//
//
//   %n = fused.rms_norm_mul(%h, %ffn_norm) : f32[1, 2048]       // also read by the experts
//   %l = matmul(%n, %router) : f32[1, 128]
//   %ids, %w = fused.topk_moe(%l [, %bias]) {k = 8, ...}
// becomes
//   %n, %ids, %w = fused.rms_norm_matmul_topk_moe(%h, %ffn_norm, %router [, %bias]) {eps, k, ...}
//
// The second round of the fusion driver sees the FFN norm and the routing
// that the first made (rms_norm_mul, topk_moe) and the router GEMV between
// them: one launch instead of three a MoE layer (issue 13: the router GEMV
// with softmax / sigmoid + top-k + renormalise in one kernel). The norm
// cannot be the router's prologue alone (rms_norm_matmul refuses: the
// experts read the normalised row too), so the fused op writes that row as
// its first result.
//
// Legality: the logits have no other use (the driver's rule: an elided
// value); the norm is f32 without a convert; the router is a matrix. The
// target decides the rest (CUDA: one token, a warp an expert over the whole
// GPU and the last block ranking them: CudaEmit's reasons otherwise).
//
//===----------------------------------------------------------------------===//
#include "passes/fusion/Pattern.h"

namespace fg::fusion {
namespace {

class RmsNormMatmulTopkMoe : public FusionPattern {
public:
  llvm::StringRef name() const override { return "rms_norm_matmul_topk_moe"; }

  void match(const Function &fn, NodeId root, llvm::SmallVectorImpl<Match> &out) const override {
    const Node &topk = fn.node(root);
    if (topk.kind != OpKind::FusedTopkMoe)
      return;
    const Node *mm = fn.producer(topk.operands[0]);
    if (!mm || mm->kind != OpKind::MatMul)
      return;
    const Node *norm = fn.producer(mm->operands[0]);
    if (!norm || norm->kind != OpKind::FusedRmsNormMul || mm->operands[1] == mm->operands[0])
      return;
    Match m;
    m.root = root;
    m.nodes = {fn.value(mm->operands[0]).def, fn.value(topk.operands[0]).def, root};
    m.outputs = {norm->result(), topk.results[0], topk.results[1]};
    m.set(Cap::x, norm->operands[0]);
    m.set(Cap::w, norm->operands[1]);
    m.set(Cap::norm, norm->result());
    m.set(Cap::matmul, mm->operands[1]);
    m.set(Cap::logits, topk.operands[0]);
    if (topk.operands.size() > 1)
      m.set(Cap::bias, topk.operands[1]);
    m.benefit = 3;
    m.variant = enumWord(op::FusedTopkMoe(topk).gating());
    out.push_back(std::move(m));
  }

  Decision check(const Function &fn, const Match &m) const override {
    if (fn.type(m.get(Cap::norm)).dtype != DType::F32)
      return Decision::no("the norm " + label(fn, m.get(Cap::norm)) + " converts its row to " +
                          std::string(dtypeName(fn.type(m.get(Cap::norm)).dtype)));
    const TensorType &wt = fn.type(m.get(Cap::matmul));
    if (wt.rank() != 2)
      return Decision::no("router " + label(fn, m.get(Cap::matmul)) + " " + wt.str() +
                          " is not a matrix");
    return Decision::yes();
  }

  FusedOp rewrite(const Function &fn, const Match &m) const override {
    op::FusedRmsNormMul norm(*fn.producer(m.get(Cap::norm)));
    op::FusedTopkMoe topk(fn.node(m.root));
    return FusedOp::of(op::FusedRmsNormMatmulTopkMoeArgs{.x = m.get(Cap::x),
                                                         .normW = m.get(Cap::w),
                                                         .wRouter = m.get(Cap::matmul),
                                                         .bias = m.get(Cap::bias),
                                                         .eps = norm.eps(),
                                                         .gating = topk.gating(),
                                                         .k = topk.k(),
                                                         .renorm = topk.renorm(),
                                                         .clampMin = topk.clampMin(),
                                                         .scale = topk.scale()});
  }
};

} // namespace

std::unique_ptr<FusionPattern> createRmsNormMatmulTopkMoePattern() {
  return std::make_unique<RmsNormMatmulTopkMoe>();
}

} // namespace fg::fusion
