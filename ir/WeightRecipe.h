//===- WeightRecipe.h - a weight's bytes as a recipe over file ranges -*- C++ -*-===//
//
// A weight the frontend transformed (rows permuted, experts stacked, gemma's
// +1, a dtype conversion, a quantised weight dequantised for the GPU) is not
// stored as bytes: it is a recipe, applied at load time, over ranges of the
// model file(s). Sources are read in order; steps from a small closed set
// turn them into the weight's bytes:
//
//   concat              stacks every source along a new first dim (all of one
//                       type): n × [out, in] -> [n, out, in]; must come first
//                       when there is more than one source
//   permute_heads(n)    the llama q/k row permutation (convert_hf_to_gguf.py's
//                       permute) in n heads of rows/n rows: canonical row 2i+j
//                       of a head is row j·headDim/2 + i of the source
//   convert(dtype)      row by row (last dim) to a float dtype; from any float
//                       or block-quantised dtype (dequantisation)
//   add_scalar(c)       adds c to every element of a float tensor (in f32)
//
// One line describes it (inspect):
//   model.safetensors @ 0x1234 f16 [256, 64] | permute_heads(4)
//   model.safetensors @ 0x40, 0x2040, ... (4 sources) f32 [32, 64] | concat
//
// Every step checks its sizes (checked arithmetic, ir/Checked.h); a recipe read
// from a forged plan gives an error naming what is wrong, never a crash.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "ir/Type.h"

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

#include <cstdint>
#include <string>
#include <vector>

namespace fg {

/// A range of a model file read as a tensor.
struct RecipeSource {
  std::string file;      ///< the model file (absolute in plans)
  uint64_t fileSize = 0; ///< its size when compiled (0: not recorded); a changed file is refused
  uint64_t offset = 0;   ///< byte offset of the data in `file`
  TensorType type;       ///< dtype and shape of the bytes there
  std::string tensor;    ///< the tensor's name in the file, for messages

  bool operator==(const RecipeSource &o) const {
    return file == o.file && fileSize == o.fileSize && offset == o.offset && type == o.type &&
           tensor == o.tensor;
  }
};

enum class RecipeOp : uint8_t { Concat, PermuteHeads, Convert, AddScalar };
constexpr uint8_t kNumRecipeOps = 4;

struct RecipeStep {
  RecipeOp op = RecipeOp::Concat;
  int64_t heads = 0;        ///< permute_heads
  DType dtype = DType::F32; ///< convert
  double scalar = 0;        ///< add_scalar

  static RecipeStep concat() { return {}; }
  static RecipeStep permuteHeads(int64_t n) { return {RecipeOp::PermuteHeads, n, DType::F32, 0}; }
  static RecipeStep convert(DType t) { return {RecipeOp::Convert, 0, t, 0}; }
  static RecipeStep addScalar(double c) { return {RecipeOp::AddScalar, 0, DType::F32, c}; }
  bool operator==(const RecipeStep &o) const {
    return op == o.op && heads == o.heads && dtype == o.dtype && scalar == o.scalar;
  }
  /// "permute_heads(32)", "convert(f16)", "add_scalar(1)", "concat".
  std::string str() const;
};

struct WeightRecipe {
  std::vector<RecipeSource> sources;
  std::vector<RecipeStep> steps;

  bool empty() const { return sources.empty(); }
  /// One source used as it is (a plain mapped weight).
  bool isPlainRange() const { return sources.size() == 1 && steps.empty(); }
  /// The type the recipe produces, checking every step: source types with
  /// checked byte sizes, concat first and over sources of one type, heads
  /// dividing the rows into even heads, conversions between real and float
  /// dtypes with whole-block rows. The error says what, without the weight.
  llvm::Expected<TensorType> resultType() const;
  /// Bytes read from the files (sum of the sources' sizes; call after
  /// resultType() succeeded).
  uint64_t sourceBytes() const;
  /// One line: first source, how many, then the steps.
  std::string str() const;
  bool operator==(const WeightRecipe &o) const { return sources == o.sources && steps == o.steps; }
};

/// Applies `r` to `sources` (the bytes of each source, in order: exactly
/// their types' sizes). `r.resultType()` must have succeeded.
llvm::Expected<std::vector<uint8_t>> applyRecipe(const WeightRecipe &r,
                                                 llvm::ArrayRef<llvm::ArrayRef<uint8_t>> sources);

/// Row r of the canonical (permuted) q/k matrix is row permutedRowSource(r) of
/// the source's: within each head of `headDim` rows, row 2i + j is source row
/// j·headDim/2 + i (convert_hf_to_gguf.py's permute; permute_heads).
int64_t permutedRowSource(int64_t row, int64_t headDim);

/// Converts `n` elements of `from` bytes into float dtype `to`, row by row
/// (`rowLength` elements per row, whole blocks for block types).
std::vector<uint8_t> convertRows(DType from, DType to, const uint8_t *src, int64_t n,
                                 int64_t rowLength);

} // namespace fg
