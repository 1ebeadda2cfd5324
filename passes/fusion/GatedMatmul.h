//===- GatedMatmul.h - the factory of the two gated-matmul patterns -*- C++ -*-===//
//
// gated_matmul, gated_matmul_id and gated_matmul_id_chunk are one pattern
// factory (STYLE.md §6): dense or expert-indexed (decode-sized, or prefill
// chunks for the grouped expert GEMM), each with and without biases.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "passes/fusion/Pattern.h"

namespace fg::fusion {

std::unique_ptr<FusionPattern> createGatedPattern(bool expertIndexed, bool chunks = false);

} // namespace fg::fusion
