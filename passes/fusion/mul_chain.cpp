//===- mul_chain.cpp - mul(mul(x, b0), b1)... -> fused.mul_chain -----------===//
//
//   %a = mul(%x, %b0) : f32[1, 256]
//   %y = mul(%a, %b1) : f32[1, 256]
// becomes
//   %y = fused.mul_chain(%x, %b0, %b1) : f32[1, 256]
//
// The rules of add_chain (FUSIONS.md F6).
//
//===----------------------------------------------------------------------===//
#include "passes/fusion/Chain.h"

namespace fg::fusion {

std::unique_ptr<FusionPattern> createMulChainPattern() {
  return createChainPattern(OpKind::Mul, OpKind::FusedMulChain, "mul_chain");
}

} // namespace fg::fusion
