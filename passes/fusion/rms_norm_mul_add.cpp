//===- rms_norm_mul_add.cpp - rms_norm(x) * w + r -> fused.rms_norm_mul_add ===//
//
//   %n = rms_norm(%x) {eps = 1e-06} : f32[1, 256]
//   %m = mul(%n, %w) : f32[1, 256]
//   %y = add(%r, %m) : f32[1, 256]                 // either order, at both ops
// becomes
//   %y = fused.rms_norm_mul_add(%x, %w, %r) {eps = 1e-06} : f32[1, 256]
//
// Legality (FUSIONS.md F14): as rms_norm_mul, and the residual is f32 with
// packed rows, broadcasting into x.
//
//===----------------------------------------------------------------------===//
#include "passes/fusion/Pattern.h"

namespace fg::fusion {
namespace {

class RmsNormMulAdd : public TreePattern {
public:
  RmsNormMulAdd() {
    addVariant("rms_norm_mul_add",
               m::Add(normMulPat().singleUse(), m::Any(Cap::residual)).commutative().bind(Cap::add));
  }
  llvm::StringRef name() const override { return "rms_norm_mul_add"; }

  Decision check(const Function &fn, const Match &m) const override {
    if (Decision d = checkNormMul(fn, m); !d)
      return d;
    ValueId r = m.get(Cap::residual);
    if (Decision d = expectDType(fn, r, {DType::F32}, "residual"); !d)
      return d;
    if (!hasContiguousRows(fn, r))
      return Decision::no("the rows of residual " + label(fn, r) + " must be packed");
    if (fn.type(m.get(Cap::add)).shape != fn.type(m.get(Cap::x)).shape)
      return expectBroadcastsInto(fn, r, m.get(Cap::x), "residual");
    return Decision::yes();
  }

  FusedOp rewrite(const Function &fn, const Match &m) const override {
    return FusedOp::of(op::FusedRmsNormMulAddArgs{.x = m.get(Cap::x),
                                                  .w = m.get(Cap::w),
                                                  .residual = m.get(Cap::residual),
                                                  .eps = m.op<op::RmsNorm>(fn, Cap::norm)->eps()});
  }
};

} // namespace

std::unique_ptr<FusionPattern> createRmsNormMulAddPattern() {
  return std::make_unique<RmsNormMulAdd>();
}

} // namespace fg::fusion
