//===- rms_norm_mul_rope.cpp - q/k-norm then rope -> fused.rms_norm_mul_rope ===//
//
//   %n = rms_norm(%q) {eps = 1e-06} : f32[1, 4, 64]
//   %m = mul(%n, %q_norm) : f32[1, 4, 64]
//   %r = rope(%m, %pos) {mode = neox, n_dims = 64} : f32[1, 4, 64]
// becomes
//   %r = fused.rms_norm_mul_rope(%q, %q_norm, %pos) {eps = 1e-06, mode = neox, n_dims = 64}
//
// Legality (FUSIONS.md F13): the rms_norm_mul rules; the rope takes the
// product as its input; an even head dim; normal and neox modes (all ours).
//
//===----------------------------------------------------------------------===//
#include "passes/fusion/Pattern.h"

namespace fg::fusion {
namespace {

class RmsNormMulRope : public TreePattern {
public:
  RmsNormMulRope() { addVariant("rms_norm_mul_rope", ropePat(normMulPat().singleUse())); }
  llvm::StringRef name() const override { return "rms_norm_mul_rope"; }

  Decision check(const Function &fn, const Match &m) const override {
    if (Decision d = checkNormMul(fn, m); !d)
      return d;
    return checkRope(fn, *m.producer(fn, Cap::rope));
  }

  FusedOp rewrite(const Function &fn, const Match &m) const override {
    auto rope = m.op<op::Rope>(fn, Cap::rope);
    op::FusedRmsNormMulRopeArgs a{.x = m.get(Cap::x),
                                  .w = m.get(Cap::w),
                                  .positions = m.get(Cap::positions),
                                  .freqFactors = m.get(Cap::freqFactors),
                                  .eps = m.op<op::RmsNorm>(fn, Cap::norm)->eps(),
                                  .nDims = rope->nDims()};
    setRopeAttrs(a, *rope);
    return FusedOp::of(a);
  }
};

} // namespace

std::unique_ptr<FusionPattern> createRmsNormMulRopePattern() {
  return std::make_unique<RmsNormMulRope>();
}

} // namespace fg::fusion
