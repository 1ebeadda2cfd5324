//===- moe_weighted_sum_add.cpp - the MoE sum and its residual add ---------===//
//
//   %sum = fused.moe_weighted_sum(%experts, %w3 [, %scale]) : f32[1, 2048]
//   %out = add(%sum, %r) : f32[1, 2048]         // either operand order
// becomes
//   %out = fused.moe_weighted_sum_add(%experts, %w3, %r [, %scale]) : f32[1, 2048]
//
// The second round of the fusion driver sees the sum that moe_weighted_sum
// made in the first and the MoE block's residual add after it: one launch
// instead of two, and the sum is never written and read back (issue 13: the
// launches of a MoE layer). The result gets its own buffer (the target does
// not declare the residual read before any write: a strided residual is not
// read at the flat index the kernel writes).
//
// Legality: the sum has no other use; r f32 with the sum's shape (the add may
// not broadcast either side).
//
//===----------------------------------------------------------------------===//
#include "passes/fusion/Pattern.h"

namespace fg::fusion {
namespace {

class MoeWeightedSumAdd : public TreePattern {
public:
  MoeWeightedSumAdd() {
    addVariant("moe_weighted_sum_add",
               m::Add(m::FusedMoeWeightedSum(m::Any(Cap::experts), m::Any(Cap::weights),
                                             m::Opt(Cap::expertScale))
                          .bind(Cap::weighted)
                          .singleUse(),
                      m::Any(Cap::residual))
                   .commutative());
  }
  llvm::StringRef name() const override { return "moe_weighted_sum_add"; }

  Decision check(const Function &fn, const Match &m) const override {
    ValueId sum = m.get(Cap::weighted), r = m.get(Cap::residual);
    if (Decision d = expectDType(fn, r, {DType::F32}, "residual"); !d)
      return d;
    const TensorType &st = fn.type(sum), &rt = fn.type(r), &ot = fn.type(m.outputs.front());
    if (rt.shape != st.shape || ot.shape != st.shape)
      return Decision::no("residual " + label(fn, r) + " " + rt.str() + " must have the sum's shape " +
                          st.str());
    return Decision::yes();
  }

  FusedOp rewrite(const Function &, const Match &m) const override {
    return FusedOp::of(op::FusedMoeWeightedSumAddArgs{.experts = m.get(Cap::experts),
                                                      .weights = m.get(Cap::weights),
                                                      .residual = m.get(Cap::residual),
                                                      .expertScale = m.get(Cap::expertScale)});
  }
};

} // namespace

std::unique_ptr<FusionPattern> createMoeWeightedSumAddPattern() {
  return std::make_unique<MoeWeightedSumAdd>();
}

} // namespace fg::fusion
