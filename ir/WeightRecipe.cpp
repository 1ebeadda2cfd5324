//===- WeightRecipe.cpp - a weight's bytes as a recipe over file ranges ---===//
#include "ir/WeightRecipe.h"

#include "ir/Checked.h"
#include "ir/Diag.h"
#include "ir/Numeric.h"

#include "llvm/Support/Format.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/raw_ostream.h"

#include <cassert>
#include <cstring>

namespace fg {

namespace {

/// No intermediate is larger than this (2^48 elements of 8 bytes, the parser's cap).
constexpr int64_t kMaxRecipeBytes = int64_t(1) << 51;

std::optional<int64_t> boundedBytes(const TensorType &t) {
  std::optional<int64_t> b = checkedBytes(t.dtype, t.shape);
  if (!b || *b > kMaxRecipeBytes)
    return std::nullopt;
  return b;
}

/// The type after `s` is applied to `in` (the step's size checks).
llvm::Expected<TensorType> stepResult(const RecipeStep &s, const TensorType &in) {
  std::string what = "step '" + s.str() + "' on " + in.str();
  switch (s.op) {
  case RecipeOp::Concat:
    return makeError(what + ": concat must be the first step");
  case RecipeOp::PermuteHeads: {
    int64_t rows = in.rank() ? in.shape[0] : 0;
    if (s.heads < 1 || rows % s.heads || (rows / s.heads) % 2 || rows / s.heads < 2)
      return makeError(what + ": " + llvm::Twine(rows) + " rows do not split into " +
                       llvm::Twine(s.heads) + " heads of an even number of rows");
    if (!checkedBytes(in.dtype, llvm::ArrayRef<int64_t>(in.shape).drop_front()))
      return makeError(what + ": its rows are not whole blocks");
    return in;
  }
  case RecipeOp::Convert: {
    if (!isReal(in.dtype) || !isFloat(s.dtype))
      return makeError(what + ": converts only between real dtypes, to a float dtype");
    TensorType out{s.dtype, in.shape};
    if (in.rowLength() < 1 || !boundedBytes(out))
      return makeError(what + ": its rows are empty or its size overflows");
    return out;
  }
  case RecipeOp::AddScalar:
    if (!isFloat(in.dtype))
      return makeError(what + ": adds only to a float tensor");
    return in;
  }
  return makeError("unknown recipe step " + llvm::Twine(static_cast<unsigned>(s.op)));
}

} // namespace

std::string RecipeStep::str() const {
  switch (op) {
  case RecipeOp::Concat:
    return "concat";
  case RecipeOp::PermuteHeads:
    return "permute_heads(" + std::to_string(heads) + ")";
  case RecipeOp::Convert:
    return "convert(" + std::string(dtypeName(dtype)) + ")";
  case RecipeOp::AddScalar: {
    std::string s;
    llvm::raw_string_ostream os(s);
    os << "add_scalar(" << llvm::format("%g", scalar) << ")";
    return os.str();
  }
  }
  return "unknown(" + std::to_string(static_cast<unsigned>(op)) + ")";
}

llvm::Expected<TensorType> WeightRecipe::resultType() const {
  if (sources.empty())
    return makeError("the recipe has no source");
  for (const RecipeSource &s : sources) {
    std::optional<int64_t> b = boundedBytes(s.type);
    std::string what = "source '" + s.tensor + "' " + s.type.str();
    if (!b)
      return makeError(what + ": its size overflows or its rows are not whole blocks");
    uint64_t end = 0;
    if (__builtin_add_overflow(s.offset, static_cast<uint64_t>(*b), &end) ||
        (s.fileSize && end > s.fileSize))
      return makeError(what + ": bytes [" + llvm::Twine(s.offset) + ", +" + llvm::Twine(*b) +
                       ") lie past the end of the " + llvm::Twine(s.fileSize) + "-byte file " +
                       s.file);
  }
  llvm::ArrayRef<RecipeStep> rest = steps;
  TensorType t = sources.front().type;
  if (!rest.empty() && rest.front().op == RecipeOp::Concat) {
    for (const RecipeSource &s : sources)
      if (s.type != t)
        return makeError("step 'concat': source '" + s.tensor + "' is " + s.type.str() +
                         " but the first is " + t.str());
    t.shape.insert(t.shape.begin(), static_cast<int64_t>(sources.size()));
    if (!boundedBytes(t))
      return makeError("step 'concat': " + t.str() + " overflows");
    rest = rest.drop_front();
  } else if (sources.size() > 1) {
    return makeError(llvm::Twine(sources.size()) + " sources but no concat first");
  }
  for (const RecipeStep &s : rest) {
    if (static_cast<uint8_t>(s.op) >= kNumRecipeOps)
      return makeError("unknown recipe step " + llvm::Twine(static_cast<unsigned>(s.op)));
    llvm::Expected<TensorType> next = stepResult(s, t);
    if (!next)
      return next.takeError();
    t = std::move(*next);
  }
  return t;
}

uint64_t WeightRecipe::sourceBytes() const {
  uint64_t n = 0;
  for (const RecipeSource &s : sources)
    n += static_cast<uint64_t>(s.type.bytes());
  return n;
}

std::string WeightRecipe::str() const {
  if (sources.empty())
    return "(no source)";
  std::string s;
  llvm::raw_string_ostream os(s);
  const RecipeSource &first = sources.front();
  os << llvm::sys::path::filename(first.file) << " @ " << llvm::format_hex(first.offset, 0);
  if (sources.size() > 1)
    os << " +" << (sources.size() - 1) << " sources";
  os << " " << first.type.str();
  for (const RecipeStep &st : steps)
    os << " | " << st.str();
  return os.str();
}

int64_t permutedRowSource(int64_t row, int64_t headDim) {
  int64_t head = row / headDim, r = row % headDim, half = headDim / 2;
  return head * headDim + (r % 2) * half + r / 2;
}

std::vector<uint8_t> convertRows(DType from, DType to, const uint8_t *src, int64_t n,
                                 int64_t rowLength) {
  assert(rowLength > 0 && n % rowLength == 0 && "whole rows");
  int64_t rows = n / rowLength;
  TensorType inRow{from, {rowLength}}, outRow{to, {rowLength}};
  uint64_t inBytes = static_cast<uint64_t>(inRow.bytes());
  uint64_t outBytes = static_cast<uint64_t>(outRow.bytes());
  std::vector<uint8_t> out(static_cast<size_t>(outBytes * rows));
  std::vector<float> f(static_cast<size_t>(rowLength));
  for (int64_t r = 0; r < rows; ++r) {
    decodeRow(from, src + r * inBytes, f.data(), rowLength);
    bool ok = encodeRow(to, f.data(), out.data() + r * outBytes, rowLength);
    assert(ok && "the target dtype is encodable");
    (void)ok;
  }
  return out;
}

llvm::Expected<std::vector<uint8_t>> applyRecipe(const WeightRecipe &r,
                                                 llvm::ArrayRef<llvm::ArrayRef<uint8_t>> sources) {
  llvm::Expected<TensorType> result = r.resultType();
  if (!result)
    return result.takeError();
  if (sources.size() != r.sources.size())
    return makeError("the recipe has " + llvm::Twine(r.sources.size()) + " sources but " +
                     llvm::Twine(sources.size()) + " were read");
  for (size_t i = 0; i < sources.size(); ++i)
    if (sources[i].size() != static_cast<uint64_t>(r.sources[i].type.bytes()))
      return makeError("source '" + r.sources[i].tensor + "': " + llvm::Twine(sources[i].size()) +
                       " bytes read but " + r.sources[i].type.str() + " needs " +
                       llvm::Twine(r.sources[i].type.bytes()));
  llvm::ArrayRef<RecipeStep> steps = r.steps;
  TensorType t = r.sources.front().type;
  std::vector<uint8_t> v;
  if (!steps.empty() && steps.front().op == RecipeOp::Concat) {
    for (llvm::ArrayRef<uint8_t> s : sources)
      v.insert(v.end(), s.begin(), s.end());
    t.shape.insert(t.shape.begin(), static_cast<int64_t>(sources.size()));
    steps = steps.drop_front();
  } else {
    v.assign(sources.front().begin(), sources.front().end());
  }
  for (const RecipeStep &s : steps) {
    switch (s.op) {
    case RecipeOp::Concat:
      llvm_unreachable("resultType() refuses a concat after the first step");
    case RecipeOp::PermuteHeads: {
      int64_t rows = t.shape[0], headDim = rows / s.heads;
      size_t rowBytes = rows ? v.size() / static_cast<size_t>(rows) : 0;
      std::vector<uint8_t> out(v.size());
      for (int64_t row = 0; row < rows; ++row) {
        int64_t from = permutedRowSource(row, headDim);
        std::memcpy(out.data() + row * rowBytes, v.data() + from * rowBytes, rowBytes);
      }
      v = std::move(out);
      break;
    }
    case RecipeOp::Convert: {
      TensorType out{s.dtype, t.shape};
      if (s.dtype != t.dtype)
        v = t.numElements()
                ? convertRows(t.dtype, s.dtype, v.data(), t.numElements(), t.rowLength())
                : std::vector<uint8_t>();
      t = std::move(out);
      break;
    }
    case RecipeOp::AddScalar: {
      int64_t n = t.numElements();
      std::vector<float> f(static_cast<size_t>(n));
      decodeRow(t.dtype, v.data(), f.data(), n);
      for (float &x : f)
        x += static_cast<float>(s.scalar);
      bool ok = encodeRow(t.dtype, f.data(), v.data(), n);
      assert(ok && "a float dtype is encodable");
      (void)ok;
      break;
    }
    }
  }
  assert(t == *result && "applying follows resultType");
  return v;
}

} // namespace fg
