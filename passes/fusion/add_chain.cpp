//===- add_chain.cpp - add(add(x, b0), b1)... -> fused.add_chain -----------===//
//
//   %a = add(%x, %b0) : f32[1, 256]
//   %y = add(%b1, %a) : f32[1, 256]                // linked through either operand
// becomes
//   %y = fused.add_chain(%x, %b0, %b1) : f32[1, 256]
//
// 2 to 8 links of one shape; longer chains split (the last 8 first).
// Legality (FUSIONS.md F5): f32/f16, every b of one layout and contiguous.
//
//===----------------------------------------------------------------------===//
#include "passes/fusion/Chain.h"

namespace fg::fusion {

std::unique_ptr<FusionPattern> createAddChainPattern() {
  return createChainPattern(OpKind::Add, OpKind::FusedAddChain, "add_chain");
}

} // namespace fg::fusion
