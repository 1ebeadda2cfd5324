//===- WeightLoad.h - the bytes of a weight slot -----------------*- C++ -*-===//
//
// A plan refers to a model's weights in two ways (DESIGN.md, "Plan file"):
// mapped weights by model file + offset (the bytes on disk are the bytes the
// program uses), embedded ones by their bytes in the plan. Both executors
// (the CPU reference and CudaRunner) get a slot's bytes here. A slot whose
// `stored` dtype differs from its type (a quantised weight the GPU program
// sees as f16) is dequantised while loading (ir/Numeric.h decodeRow).
//
//===----------------------------------------------------------------------===//
#pragma once

#include "runtime/Program.h"

#include "llvm/Support/Error.h"

#include <cstdint>
#include <vector>

namespace fg {

/// The bytes of weight `slot` in `slot.type.dtype`: its embedded bytes, or
/// type.bytes() read from `slot.file` at `slot.offset`. Errors name the file,
/// the weight and the tensor: a missing or unreadable file, a file whose size
/// differs from the one recorded at compile time, a range past its end.
llvm::Expected<std::vector<uint8_t>> loadSlotBytes(const TensorSlot &slot);

/// Checks a slot as read from a plan, trusting nothing (the checksum may be
/// forged): dims are non-negative, byte sizes fit (checked arithmetic) and
/// rows are whole blocks, a stored dtype differs only to be converted to a
/// float type with rows of at least one element, and a mapped range lies
/// inside the recorded file size. The error says what, without "weight".
llvm::Error checkSlot(const TensorSlot &slot);

/// Converts `n` elements of `from` bytes into `to` (row by row: `rowLength`
/// elements per row, a multiple of the block size for block types); `to` must
/// be a float type. Used for quantised weights on the GPU (-> f16).
std::vector<uint8_t> convertWeightBytes(DType from, DType to, const uint8_t *src, int64_t n,
                                        int64_t rowLength);

} // namespace fg
