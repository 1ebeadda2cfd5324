//===- gated_matmul_id_chunk.cpp - gated experts of a prefill chunk ---------===//
//
// gated_matmul_id's rewrite for prefill chunks: more tokens than the GEMV
// takes, 16-bit expert weights, so fused.gated_matmul_id runs as the grouped
// expert GEMM's two-stream form with the GLU in its epilogue (one routing and
// one GEMM launch instead of two of each plus the glu).
//
//   %g = matmul_id(%x, %gate_exps, %ids) : f32[512, 8, 768]   (f16 weights)
//   %u = matmul_id(%x, %up_exps, %ids) : f32[512, 8, 768]
//   %y = glu(%g, %u) : f32[512, 8, 768]
// becomes
//   %y = fused.gated_matmul_id(%x, %gate_exps, %up_exps, %ids) : f32[512, 8, 768]
//
// Opt-in (--enable-fusion gated_matmul_id_chunk; optInFusionPatterns()): the
// kernel passed its GPU tests (GpuGroupedExpert.*), the whole-model check and
// the timing wait for a GPU call (scripts/gpu-next-call.sh).
//
//===----------------------------------------------------------------------===//
#include "passes/fusion/GatedMatmul.h"

namespace fg::fusion {

std::unique_ptr<FusionPattern> createGatedMatmulIdChunkPattern() {
  return createGatedPattern(/*expertIndexed=*/true, /*chunks=*/true);
}

} // namespace fg::fusion
