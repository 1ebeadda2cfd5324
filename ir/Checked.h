//===- Checked.h - overflow-checked sizes for every reader ------*- C++ -*-===//
//
// Element counts and byte sizes of tensors read from files (GGUF, safetensors,
// plans, flags) are products of untrusted numbers. Every reader computes them
// here: a product that does not fit in int64 is nullopt, never a wrapped value
// that then passes a bounds check.
//
//   checkedMul(1 << 40, 1 << 30)            -> nullopt
//   checkedBytes(DType::F32, {1 << 56, 64}) -> nullopt   (2^64 bytes)
//   checkedBytes(DType::Q8_0, {2, 64})      -> 136
//
//===----------------------------------------------------------------------===//
#pragma once

#include "ir/DType.h"

#include "llvm/ADT/ArrayRef.h"

#include <cstdint>
#include <optional>

namespace fg {

/// a · b for non-negative a and b; nullopt when either is negative or the
/// product does not fit in int64.
inline std::optional<int64_t> checkedMul(int64_t a, int64_t b) {
  int64_t r = 0;
  if (a < 0 || b < 0 || __builtin_mul_overflow(a, b, &r))
    return std::nullopt;
  return r;
}

/// a + b for non-negative a and b; nullopt when either is negative or the sum
/// overflows.
inline std::optional<int64_t> checkedAdd(int64_t a, int64_t b) {
  int64_t r = 0;
  if (a < 0 || b < 0 || __builtin_add_overflow(a, b, &r))
    return std::nullopt;
  return r;
}

/// The number of elements of `shape` (1 for a scalar); nullopt for a negative
/// dimension or an overflowing product.
inline std::optional<int64_t> checkedElements(llvm::ArrayRef<int64_t> shape) {
  int64_t n = 1;
  for (int64_t d : shape) {
    std::optional<int64_t> m = checkedMul(n, d);
    if (!m)
      return std::nullopt;
    n = *m;
  }
  return n;
}

/// Storage bytes of a dense `dt` tensor of `shape` (storageBytes, checked).
/// For block types the row length must be a whole number of blocks; nullopt
/// otherwise, and for negative dims or overflow.
inline std::optional<int64_t> checkedBytes(DType dt, llvm::ArrayRef<int64_t> shape) {
  std::optional<int64_t> elems = checkedElements(shape);
  if (!elems)
    return std::nullopt;
  const DTypeInfo &i = dtypeInfo(dt);
  int64_t row = shape.empty() ? 1 : shape.back();
  if (i.blockElems > 1 && row % i.blockElems)
    return std::nullopt;
  return checkedMul(*elems / i.blockElems, i.blockBytes);
}

} // namespace fg
