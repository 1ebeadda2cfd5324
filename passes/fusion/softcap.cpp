//===- softcap.cpp - scale(tanh(scale(x))) -> fused.softcap ----------------===//
//
//   %a = scale(%x) {scale = 0.02} : f32[1, 512]
//   %t = tanh(%a) : f32[1, 512]
//   %y = scale(%t) {scale = 50} : f32[1, 512]
// becomes
//   %y = fused.softcap(%x) {in_scale = 0.02, out_scale = 50} : f32[1, 512]
//
// Legality (FUSIONS.md F20): both scales without bias, a contiguous f32 input.
//
//===----------------------------------------------------------------------===//
#include "passes/fusion/Pattern.h"

namespace fg::fusion {
namespace {

class Softcap : public TreePattern {
public:
  Softcap() {
    addVariant(
        "softcap",
        m::Scale(
            m::Tanh(m::Scale(m::Any(Cap::x)).bind(Cap::in).singleUse()).bind(Cap::tanh).singleUse())
            .bind(Cap::out));
  }
  llvm::StringRef name() const override { return "softcap"; }

  Decision check(const Function &fn, const Match &m) const override {
    for (Cap s : {Cap::in, Cap::out})
      if (m.op<op::Scale>(fn, s)->bias() != 0)
        return Decision::no("scale " + label(fn, m.get(s)) + " has a bias");
    ValueId x = m.get(Cap::x);
    if (Decision d = expectDType(fn, x, {DType::F32}, "input"); !d)
      return d;
    if (!isContiguous(fn, x))
      return Decision::no("input " + label(fn, x) + " must be contiguous");
    return Decision::yes();
  }

  FusedOp rewrite(const Function &fn, const Match &m) const override {
    return FusedOp::of(op::FusedSoftcapArgs{.x = m.get(Cap::x),
                                            .inScale = m.op<op::Scale>(fn, Cap::in)->scale(),
                                            .outScale = m.op<op::Scale>(fn, Cap::out)->scale()});
  }
};

} // namespace

std::unique_ptr<FusionPattern> createSoftcapPattern() { return std::make_unique<Softcap>(); }

} // namespace fg::fusion
