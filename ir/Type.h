//===- Type.h - tensor types: element type and row-major shape ---*- C++ -*-===//
#pragma once

#include "ir/DType.h"

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/SmallVector.h"

#include <string>

namespace fg {

using Shape = llvm::SmallVector<int64_t, 4>;

/// A tensor type: dtype plus a row-major shape, outermost dimension first
/// (`f32[32, 4096]` has 32 rows of 4096). Values are always logically dense;
/// views express strides as attributes of the `view` op.
struct TensorType {
  DType dtype = DType::F32;
  Shape shape;

  TensorType() = default;
  TensorType(DType dt, llvm::ArrayRef<int64_t> s) : dtype(dt), shape(s.begin(), s.end()) {}

  int64_t rank() const { return static_cast<int64_t>(shape.size()); }
  int64_t numElements() const {
    int64_t n = 1;
    for (int64_t d : shape)
      n *= d;
    return n;
  }
  /// Innermost dimension (the row length); 1 for scalars.
  int64_t rowLength() const { return shape.empty() ? 1 : shape.back(); }
  int64_t numRows() const { return rowLength() ? numElements() / rowLength() : 0; }
  int64_t bytes() const { return storageBytes(dtype, numElements()); }

  bool operator==(const TensorType &o) const {
    return dtype == o.dtype && shape == o.shape;
  }
  bool operator!=(const TensorType &o) const { return !(*this == o); }

  /// `f32[1, 4096]`; a scalar prints as `f32[]`.
  std::string str() const;
};

/// Row-major strides (in elements) of a dense shape.
Shape contiguousStrides(llvm::ArrayRef<int64_t> shape);
/// "[1, 4096]"
std::string shapeStr(llvm::ArrayRef<int64_t> shape);

} // namespace fg
