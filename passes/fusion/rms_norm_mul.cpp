//===- rms_norm_mul.cpp - rms_norm(x) * w -> fused.rms_norm_mul -------------===//
//
//   %n = rms_norm(%x) {eps = 1e-06} : f32[1, 256]
//   %y = mul(%w, %n) : f32[1, 256]                 // either operand order
// becomes
//   %y = fused.rms_norm_mul(%x, %w) {eps = 1e-06} : f32[1, 256]
//
// Legality (FUSIONS.md F15): f32 throughout, packed rows, w broadcasts into x.
//
//===----------------------------------------------------------------------===//
#include "passes/fusion/Pattern.h"

namespace fg::fusion {
namespace {

class RmsNormMul : public TreePattern {
public:
  RmsNormMul() { addVariant("rms_norm_mul", normMulPat()); }
  llvm::StringRef name() const override { return "rms_norm_mul"; }

  Decision check(const Function &fn, const Match &m) const override { return checkNormMul(fn, m); }

  FusedOp rewrite(const Function &fn, const Match &m) const override {
    return FusedOp::of(op::FusedRmsNormMulArgs{
        .x = m.get(Cap::x), .w = m.get(Cap::w), .eps = m.op<op::RmsNorm>(fn, Cap::norm)->eps()});
  }
};

} // namespace

std::unique_ptr<FusionPattern> createRmsNormMulPattern() { return std::make_unique<RmsNormMul>(); }

} // namespace fg::fusion
