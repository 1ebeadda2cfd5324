//===- WeightLoad.h - the bytes of a weight slot -----------------*- C++ -*-===//
//
// A plan refers to a model's weights by recipe (ir/WeightRecipe.h): ranges of
// the model file(s) and the steps that make the program's bytes from them
// (rows permuted, experts stacked, +1, dtype conversion, quantised -> f16
// dequantisation). Only computed weights (rope factors) are embedded. Both
// executors (the CPU reference and CudaRunner) get a slot's bytes here.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "runtime/Program.h"

#include "llvm/Support/Error.h"

#include <cstdint>
#include <vector>

namespace fg {

/// The bytes of weight `slot` (type.bytes() of them): its embedded bytes, or
/// its recipe applied to the ranges read from its files. Errors name the file,
/// the weight and the tensor: a missing or unreadable file, a file whose size
/// differs from the one recorded at compile time, a range past its end.
llvm::Expected<std::vector<uint8_t>> loadSlotBytes(const TensorSlot &slot);

/// Checks a slot as read from a plan, trusting nothing (the checksum may be
/// forged): dims are non-negative and byte sizes fit (checked arithmetic); a
/// recipe's every step checks its sizes, its sources lie inside the recorded
/// file sizes and its result is the slot's type. The error says what, naming
/// the weight.
llvm::Error checkSlot(const TensorSlot &slot);

} // namespace fg
