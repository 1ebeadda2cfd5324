//===- relu_sqr.cpp - sqr(relu(x)) -> fused.relu_sqr -----------------------===//
//
//   %r = relu(%x) : f32[1, 512]
//   %y = sqr(%r) : f32[1, 512]
// becomes
//   %y = fused.relu_sqr(%x) : f32[1, 512]
//
// Legality (FUSIONS.md F19): f32 or f16, a contiguous input.
//
//===----------------------------------------------------------------------===//
#include "passes/fusion/Pattern.h"

namespace fg::fusion {
namespace {

class ReluSqr : public TreePattern {
public:
  ReluSqr() { addVariant("relu_sqr", m::Sqr(m::Relu(m::Any(Cap::x)).bind(Cap::relu).singleUse())); }
  llvm::StringRef name() const override { return "relu_sqr"; }

  Decision check(const Function &fn, const Match &m) const override {
    ValueId x = m.get(Cap::x);
    if (Decision d = expectDType(fn, x, {DType::F32, DType::F16}, "input"); !d)
      return d;
    if (!isContiguous(fn, x))
      return Decision::no("input " + label(fn, x) + " must be contiguous");
    return Decision::yes();
  }

  FusedOp rewrite(const Function &, const Match &m) const override {
    return FusedOp::of(op::FusedReluSqrArgs{.x = m.get(Cap::x)});
  }
};

} // namespace

std::unique_ptr<FusionPattern> createReluSqrPattern() { return std::make_unique<ReluSqr>(); }

} // namespace fg::fusion
