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
// On by default since the eighth session: the whole-model check
// (GpuPrefillThenDecode.GatedExpertChunksEqualsDecodeOnly) passed on the
// H200, and W-moe-12's prefill of 512 tokens went 14.95 -> 12.43 ms (one
// run). `--disable-fusion gated_matmul_id_chunk` turns it off.
//
//===----------------------------------------------------------------------===//
#include "passes/fusion/GatedMatmul.h"

namespace fg::fusion {

std::unique_ptr<FusionPattern> createGatedMatmulIdChunkPattern() {
  return createGatedPattern(/*expertIndexed=*/true, /*chunks=*/true);
}

} // namespace fg::fusion
