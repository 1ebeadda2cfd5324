//===- Compare.h - how outputs are compared with the reference ---*- C++ -*-===//
#pragma once

#include "llvm/ADT/ArrayRef.h"

namespace fg {

/// ‖out − ref‖ / ‖ref‖ (‖out − ref‖ when ref is all zeros). NaN anywhere, or
/// a length mismatch, gives +inf, so it never passes a threshold. This is
/// the measure of `run --verify` and of every GPU and model test.
double normalizedError(llvm::ArrayRef<float> out, llvm::ArrayRef<float> ref);

} // namespace fg
