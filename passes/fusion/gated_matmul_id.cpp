//===- gated_matmul_id.cpp - expert gate/up -> glu -> fused.gated_matmul_id ===//
//
//   %g = matmul_id(%x, %gate_exps, %ids) : f32[1, 2, 128]
//   %u = matmul_id(%x, %up_exps, %ids) : f32[1, 2, 128]     // same input and ids
//   %y = glu(%g, %u) : f32[1, 2, 128]
// becomes
//   %y = fused.gated_matmul_id(%x, %gate_exps, %up_exps, %ids) : f32[1, 2, 128]
// and with add_id biases on both lanes:
//   %y = fused.gated_matmul_id(%x, %gate_exps, %up_exps, %ids, %b_gate, %b_up)
//
// Legality (FUSIONS.md F8, S3): 1-8 tokens, the rules of gated_matmul.
//
//===----------------------------------------------------------------------===//
#include "passes/fusion/GatedMatmul.h"

namespace fg::fusion {

std::unique_ptr<FusionPattern> createGatedMatmulIdPattern() {
  return createGatedPattern(/*expertIndexed=*/true);
}

} // namespace fg::fusion
