//===- rms_norm_matmul.cpp - norm prologue into the GEMVs that read it ----===//
//
//   %n = fused.rms_norm_mul(%h, %attn_norm) {eps = 1e-05} : f32[1, 4096]
//   %q = matmul(%n, %wq) : f32[1, 4096]
//   %k = matmul(%n, %wk) : f32[1, 1024]
//   %v = matmul(%n, %wv) : f32[1, 1024]
// becomes
//   %q = fused.rms_norm_matmul(%h, %attn_norm, %wq) {eps = 1e-05}
//   %k = fused.rms_norm_matmul(%h, %attn_norm, %wk) {eps = 1e-05}
//   %v = fused.rms_norm_matmul(%h, %attn_norm, %wv) {eps = 1e-05}
// and a fused.gated_matmul (no biases) reading %n becomes
// fused.rms_norm_gated_matmul(%h, %attn_norm, %w_gate, %w_up), a
// fused.matmul_multi (q, k and v merged, opt-in) reading %n
// fused.rms_norm_matmul_multi(%h, %attn_norm, %wq, %wk, %wv): one launch a
// layer for the norm and the three projections.
//
// Unlike the other patterns this one does not absorb the norm: each
// consumer recomputes it (a GEMV block reads the x row it would have read
// anyway, plus the norm weight), and the norm node dies once its last
// consumer is rewritten. Legality: every consumer of the norm is such a
// GEMV (else the norm launch stays and the recomputation is pure cost), the
// norm is the GEMV's x, 1 to the target's GEMV token limit rows, x packed.
// The cost comparison credits each rewrite with its share of the norm.
//
// Decided by cost, all or nothing per norm (issue 13 item 6; opt-in before
// the tenth session): a prologue GEMV streams its weights slower than the
// plain one (measured on the H200, fourth session: W-dense gate|up 1.753 ->
// 2.086 ms, +19 %; the CUDA target models +25 % of the weights' bandwidth
// time, CudaCostModel::normPrologueSlowdown), so the norm launch it saves
// pays off only for small GEMVs. Every consumer of the norm must pass the
// driver's comparison (its fused cost against its GEMV's plus its share of
// the norm) or none is rewritten (the driver's rule for recomputed nodes):
// one refusal keeps the norm launch, and the others would pay the slowdown
// for nothing. On the measured workloads this
// rule fuses W-tiny's 17 norms (sixth session, same run, all fused: 0.2117
// -> 0.1989 ms a step) and none of W-dense's (4.127 -> 4.270 all fused) or
// W-moe-12's (0.875 -> 0.902); --disable-fusion rms_norm_matmul turns it off.
//
//===----------------------------------------------------------------------===//
#include "passes/fusion/Pattern.h"

namespace fg::fusion {
namespace {

class RmsNormMatmul : public FusionPattern {
public:
  llvm::StringRef name() const override { return "rms_norm_matmul"; }

  void prepare(const Function &fn) override { users_ = valueUsers(fn); }

  void match(const Function &fn, NodeId root, llvm::SmallVectorImpl<Match> &out) const override {
    const Node &gemv = fn.node(root);
    if (!isNormPrologueGemv(gemv))
      return;
    const Node *norm = fn.producer(gemv.operands[0]);
    if (!norm || norm->kind != OpKind::FusedRmsNormMul)
      return;
    Match m;
    m.root = root;
    m.nodes.push_back(root);
    for (ValueId r : gemv.results)
      m.outputs.push_back(r);
    m.recomputed.push_back(fn.value(gemv.operands[0]).def);
    m.set(Cap::norm, gemv.operands[0]);
    m.set(Cap::x, norm->operands[0]);
    m.set(Cap::w, norm->operands[1]);
    if (gemv.kind == OpKind::FusedMatmulMulti) {
      constexpr Cap kSegs[3] = {Cap::w0, Cap::w1, Cap::w2};
      for (size_t s = 1; s < gemv.operands.size(); ++s)
        m.set(kSegs[s - 1], gemv.operands[s]);
    } else {
      m.set(Cap::wGate, gemv.operands[1]);
    }
    if (gemv.kind == OpKind::FusedGatedMatmul)
      m.set(Cap::wUp, gemv.operands[2]);
    m.benefit = 1;
    m.variant = gemv.kind == OpKind::MatMul            ? "matmul"
                : gemv.kind == OpKind::FusedMatmulMulti ? "matmul_multi"
                                                        : "gated_matmul";
    out.push_back(std::move(m));
  }

  Decision check(const Function &fn, const Match &m) const override {
    ValueId n = m.get(Cap::norm), x = m.get(Cap::x);
    if (llvm::is_contained(fn.results(), n))
      return Decision::no("the normalised row " + label(fn, n) + " is a result of @" + fn.name());
    if (Decision d = checkNormRowF32(fn, n); !d)
      return d;
    for (NodeId u : users_[n]) {
      const Node &user = fn.node(u);
      if (!isNormPrologueGemv(user) || user.operands[0] != n ||
          llvm::count(user.operands, n) != 1)
        return Decision::no("the normalised row " + label(fn, n) + " also feeds " +
                            label(fn, user.result()) + " (" + std::string(mnemonic(user.kind)) +
                            "): the norm launch would stay");
    }
    // The driver compares each consumer's cost (its prologue GEMV against its
    // GEMV plus its share of the norm) and keeps a norm's consumers only all
    // together (Fuse.cpp, keepWholeRecomputations).
    return checkNormPrologue(fn, x, m.get(Cap::w), target());
  }

  FusedOp rewrite(const Function &fn, const Match &m) const override {
    double eps = op::FusedRmsNormMul(*fn.producer(m.get(Cap::norm))).eps();
    if (m.has(Cap::w0))
      return FusedOp::of(op::FusedRmsNormMatmulMultiArgs{.x = m.get(Cap::x),
                                                         .normW = m.get(Cap::w),
                                                         .w0 = m.get(Cap::w0),
                                                         .w1 = m.get(Cap::w1),
                                                         .w2 = m.get(Cap::w2),
                                                         .eps = eps});
    if (!m.has(Cap::wUp))
      return FusedOp::of(op::FusedRmsNormMatmulArgs{
          .x = m.get(Cap::x), .normW = m.get(Cap::w), .w = m.get(Cap::wGate), .eps = eps});
    op::FusedGatedMatmul gated(fn.node(m.root));
    return FusedOp::of(op::FusedRmsNormGatedMatmulArgs{.x = m.get(Cap::x),
                                                        .normW = m.get(Cap::w),
                                                        .wGate = m.get(Cap::wGate),
                                                        .wUp = m.get(Cap::wUp),
                                                        .eps = eps,
                                                        .kind = gated.kind(),
                                                        .alpha = gated.alpha(),
                                                        .limit = gated.limit()});
  }

private:
  UserTable users_;
};

} // namespace

std::unique_ptr<FusionPattern> createRmsNormMatmulPattern() {
  return std::make_unique<RmsNormMatmul>();
}

} // namespace fg::fusion
