//===- rms_norm_mul_matmul.cpp - the norm into the one GEMV that reads it --===//
//
//   %n = fused.rms_norm_mul(%h, %ffn_norm) {eps = 1e-06} : f32[1, 2048]
//   %l = matmul(%n, %router) : f32[1, 128]
//   %e = reshape(%n) ...                          // the experts read %n too
// becomes
//   %n, %l = fused.rms_norm_mul_matmul(%h, %ffn_norm, %router) {eps = 1e-06}
//
// A MoE layer's FFN norm feeds its router GEMV and its experts. The norm
// prologue (rms_norm_matmul) refuses it — the experts read the row, so the
// norm launch would stay — and the norm is then a launch of its own on the
// layer's chain, between the attention output and the router. Here the
// router's GEMV normalises x in its prologue as fused.rms_norm_matmul's does
// and its blocks also store the normalised row, a slice each, for the other
// readers: the chain is one launch shorter, and the router, a small GEMV,
// pays the prologue on 1 MB of weights.
//
// Candidates: a plain matmul whose x is the norm, where the norm has other
// readers and none of them is a GEMV the norm prologue could take
// (isNormPrologueGemv: rms_norm_matmul's rules decide there — q, k and v are
// not candidates, nor a norm read by this GEMV alone). Legality: the norm is f32
// (no convert); 1 to
// the target's GEMV token limit rows; x and the norm weight packed, one
// weight per column; the weight a matrix. Decided by the target's cost (the
// prologue's slowdown of the weights' time, CudaCostModel, against the norm
// launch it saves), so a large GEMV keeps the norm launch.
//
//===----------------------------------------------------------------------===//
#include "passes/fusion/Pattern.h"

namespace fg::fusion {
namespace {

class RmsNormMulMatmul : public FusionPattern {
public:
  llvm::StringRef name() const override { return "rms_norm_mul_matmul"; }

  void prepare(const Function &fn) override { users_ = valueUsers(fn); }

  void match(const Function &fn, NodeId root, llvm::SmallVectorImpl<Match> &out) const override {
    const Node &mm = fn.node(root);
    if (mm.kind != OpKind::MatMul || mm.operands[0] == mm.operands[1])
      return;
    const Node *norm = fn.producer(mm.operands[0]);
    if (!norm || norm->kind != OpKind::FusedRmsNormMul)
      return;
    // Not a candidate (nothing to report) where the row has no other reader
    // (rms_norm_matmul's form, which stores nothing) or another GEMV reads it
    // (q, k and v: the norm prologue's patterns decide there).
    bool others = false;
    for (NodeId u : users_[mm.operands[0]]) {
      if (u == root)
        continue;
      if (isNormPrologueGemv(fn.node(u)))
        return;
      others = true;
    }
    if (!others)
      return;
    Match m;
    m.root = root;
    m.nodes = {fn.value(mm.operands[0]).def, root};
    m.outputs = {norm->result(), mm.result()};
    m.set(Cap::norm, norm->result());
    m.set(Cap::x, norm->operands[0]);
    m.set(Cap::w, norm->operands[1]);
    m.set(Cap::matmul, mm.operands[1]);
    m.benefit = 2;
    out.push_back(std::move(m));
  }

  Decision check(const Function &fn, const Match &m) const override {
    if (Decision d = checkNormRowF32(fn, m.get(Cap::norm)); !d)
      return d;
    if (fn.type(m.get(Cap::matmul)).rank() != 2)
      return Decision::no("weight " + label(fn, m.get(Cap::matmul)) + " " +
                          fn.type(m.get(Cap::matmul)).str() + " is not a matrix");
    return checkNormPrologue(fn, m.get(Cap::x), m.get(Cap::w), target());
  }

  FusedOp rewrite(const Function &fn, const Match &m) const override {
    return FusedOp::of(op::FusedRmsNormMulMatmulArgs{
        .x = m.get(Cap::x),
        .normW = m.get(Cap::w),
        .w = m.get(Cap::matmul),
        .eps = op::FusedRmsNormMul(*fn.producer(m.get(Cap::norm))).eps()});
  }

private:
  UserTable users_;
};

} // namespace

std::unique_ptr<FusionPattern> createRmsNormMulMatmulPattern() {
  return std::make_unique<RmsNormMulMatmul>();
}

} // namespace fg::fusion
