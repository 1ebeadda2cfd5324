//===- Chain.h - the factory of the add_chain and mul_chain patterns -*- C++ -*-===//
#pragma once

#include "passes/fusion/Pattern.h"

namespace fg::fusion {

/// op(op(op(x, b0), b1), ...) of 2 to 8 links of one shape -> `fused`.
std::unique_ptr<FusionPattern> createChainPattern(OpKind op, OpKind fused, llvm::StringRef name);

} // namespace fg::fusion
