//===- matmul_id_sum_add.cpp - the expert down GEMV with the MoE sum and add -===//
//
//   %d = matmul_id(%h, %down_exps, %ids) : f32[1, 8, 2048]
//   %out = fused.moe_weighted_sum_add(%d, %w3, %r) : f32[1, 2048]
// becomes
//   %out = fused.matmul_id_sum_add(%h, %down_exps, %ids, %w3, %r) : f32[1, 2048]
//
// The expert down projection's k rows per token are summed right away, so
// one GEMV launch reads the k experts' rows as one row of k·K (each slot's
// K-slice from its own expert), scales each slot's share by its routing
// weight and adds the residual at the store: one launch fewer a MoE layer,
// and the [k, N] expert outputs are never written (issue 13, item 3). The
// third round of the fusion driver sees it: moe_weighted_sum (round 1),
// moe_weighted_sum_add (round 2), then this.
//
// Legality: the expert outputs have no other use; no expert_scale (the
// kernel scales by the routing weight only); the target's kernel decides
// the rest (CUDA: the DP4A GEMV at T = 1 over q4_K, q8_0 or q6_K experts
// whose K is whole k-steps; elsewhere the fusion is refused with its reason
// and the two launches stay).
//
//===----------------------------------------------------------------------===//
#include "passes/fusion/Pattern.h"

namespace fg::fusion {
namespace {

class MatmulIdSumAdd : public TreePattern {
public:
  MatmulIdSumAdd() {
    addVariant("matmul_id_sum_add",
               m::FusedMoeWeightedSumAdd(
                   m::MatMulId(m::Any(Cap::x), m::Any(Cap::w), m::Any(Cap::ids))
                       .bind(Cap::matmul)
                       .singleUse(),
                   m::Any(Cap::weights), m::Any(Cap::residual), m::Opt(Cap::expertScale)));
  }
  llvm::StringRef name() const override { return "matmul_id_sum_add"; }

  Decision check(const Function &fn, const Match &m) const override {
    if (m.get(Cap::expertScale) != kNoValue)
      return Decision::no("the sum scales the experts by " + label(fn, m.get(Cap::expertScale)) +
                          " (the fused GEMV scales by the routing weight only)");
    const TensorType &xt = fn.type(m.get(Cap::x)), &it = fn.type(m.get(Cap::ids));
    if (xt.rank() != 3 || it.rank() != 2 || xt.shape[1] != it.shape[1])
      return Decision::no("x " + xt.str() + " must hold one row per slot of ids " + it.str());
    return Decision::yes();
  }

  FusedOp rewrite(const Function &, const Match &m) const override {
    return FusedOp::of(op::FusedMatmulIdSumAddArgs{.x = m.get(Cap::x),
                                                   .w = m.get(Cap::w),
                                                   .ids = m.get(Cap::ids),
                                                   .weights = m.get(Cap::weights),
                                                   .residual = m.get(Cap::residual)});
  }
};

} // namespace

std::unique_ptr<FusionPattern> createMatmulIdSumAddPattern() {
  return std::make_unique<MatmulIdSumAdd>();
}

} // namespace fg::fusion
