//===- ValueLayouts.h - where every value's elements lie -----------*- C++ -*-===//
//
// Lowering, step 1: every value gets (shape, strides, offset) relative to its
// storage root. Arguments and computed values are dense; view ops (reshape,
// view, permute, transpose) compose strides and launch nothing.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "codegen/cuda/Kernel.h"

#include "llvm/Support/Error.h"

#include <vector>

namespace fg::cuda {

/// One layout per value of `fn` (indexed by ValueId); an error, located at
/// the view, when a view cannot be expressed with strides.
llvm::Expected<std::vector<Layout>> computeLayouts(const Function &fn);

} // namespace fg::cuda
