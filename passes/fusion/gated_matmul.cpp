//===- gated_matmul.cpp - gate/up matmuls -> glu -> fused.gated_matmul -----===//
//
//   %g = matmul(%x, %w_gate) : f32[1, 512]
//   %u = matmul(%x, %w_up) : f32[1, 512]           // the same input
//   %y = glu(%g, %u) {kind = swiglu} : f32[1, 512]
// becomes
//   %y = fused.gated_matmul(%x, %w_gate, %w_up) : f32[1, 512]
// and with a bias on both lanes (add after each matmul, either order):
//   %y = fused.gated_matmul(%x, %w_gate, %w_up, %b_gate, %b_up)
//
// The GEMV kernel reads x once. Legality (FUSIONS.md F7): 1-8 tokens, f32
// input, gate and up weights of one dtype and shape, biases on both lanes or
// neither, f32 with one value per output column. Every glu kind (alpha and
// limit are attributes the kernel reads).
//
//===----------------------------------------------------------------------===//
#include "passes/fusion/GatedMatmul.h"

namespace fg::fusion {

std::unique_ptr<FusionPattern> createGatedMatmulPattern() {
  return createGatedPattern(/*expertIndexed=*/false);
}

} // namespace fg::fusion
