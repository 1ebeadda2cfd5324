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
               m::Add(normMulPat().singleUse(), m::Any("residual")).commutative().bind("add"));
  }
  llvm::StringRef name() const override { return "rms_norm_mul_add"; }

  Decision check(const Function &fn, const Match &m) const override {
    if (Decision d = checkNormMul(fn, m); !d)
      return d;
    ValueId r = m.get("residual");
    if (Decision d = expectDType(fn, r, {DType::F32}, "residual"); !d)
      return d;
    if (!hasContiguousRows(fn, r))
      return Decision::no("the rows of residual " + label(fn, r) + " must be packed");
    if (fn.type(m.get("add")).shape != fn.type(m.get("x")).shape)
      return expectBroadcastsInto(fn, r, m.get("x"), "residual");
    return Decision::yes();
  }

  FusedOp rewrite(const Function &fn, const Match &m) const override {
    return {OpKind::FusedRmsNormMulAdd,
            {m.get("x"), m.get("w"), m.get("residual")},
            copyAttrs(OpKind::FusedRmsNormMulAdd, {&m.node(fn, "norm")})};
  }
};

} // namespace

std::unique_ptr<FusionPattern> createRmsNormMulAddPattern() {
  return std::make_unique<RmsNormMulAdd>();
}

} // namespace fg::fusion
