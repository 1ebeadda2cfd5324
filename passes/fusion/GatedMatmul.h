//===- GatedMatmul.h - the factory of the two gated-matmul patterns -*- C++ -*-===//
//
// gated_matmul and gated_matmul_id are one pattern factory (STYLE.md §6):
// dense or expert-indexed, each with and without biases.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "passes/fusion/Pattern.h"

namespace fg::fusion {

std::unique_ptr<FusionPattern> createGatedPattern(bool expertIndexed);

} // namespace fg::fusion
