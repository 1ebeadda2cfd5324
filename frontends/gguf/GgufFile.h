//===- GgufFile.h - a bounds-checked GGUF (v2, v3) reader --------*- C++ -*-===//
//
//   magic "GGUF" | u32 version | u64 n_tensors | u64 n_kv
//   n_kv × (string key, u32 type, value)       metadata, every value type
//   n_tensors × (string name, u32 n_dims, u64 ne[n_dims], u32 ggml_type, u64 offset)
//   padding to `general.alignment` (32 by default) | tensor data
//
// The file is memory-mapped; every read is checked against the mapped end, so
// a truncated or corrupt file gives an error naming the file and the key or
// tensor, never a read past the end. ggml lists dims innermost first; shapes
// here are ours, outermost first (ne = [4096, 32000] → [32000, 4096]).
//
//===----------------------------------------------------------------------===//
#pragma once

#include "ir/DType.h"
#include "ir/Type.h"

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"
#include "llvm/Support/MemoryBuffer.h"

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace fg {

enum class GgufType : uint32_t {
  U8 = 0,
  I8 = 1,
  U16 = 2,
  I16 = 3,
  U32 = 4,
  I32 = 5,
  F32 = 6,
  Bool = 7,
  String = 8,
  Array = 9,
  U64 = 10,
  I64 = 11,
  F64 = 12,
};
llvm::StringRef ggufTypeName(GgufType t);

/// One metadata value. Integers (and bools) are kept in `i` (u64 values above
/// INT64_MAX in `u`), floats in `f`, strings in `s`, arrays in `elems`.
struct GgufValue {
  GgufType type = GgufType::U8;
  GgufType elemType = GgufType::U8; ///< arrays only
  int64_t i = 0;
  uint64_t u = 0;
  double f = 0;
  std::string s;
  std::vector<GgufValue> elems;

  bool isInteger() const;
  bool isFloat() const { return type == GgufType::F32 || type == GgufType::F64; }
  std::optional<int64_t> asInt() const;  ///< integers and bools
  std::optional<double> asFloat() const; ///< floats and integers
};

struct GgufTensorInfo {
  std::string name;
  DType dtype = DType::F32;
  Shape shape;         ///< outermost first
  uint64_t offset = 0; ///< absolute, in the file
  uint64_t bytes = 0;
};

class GgufFile {
public:
  /// Maps and parses `path`.
  static llvm::Expected<std::unique_ptr<GgufFile>> open(llvm::StringRef path);

  llvm::StringRef path() const { return path_; }
  uint32_t version() const { return version_; }
  uint64_t alignment() const { return alignment_; }
  uint64_t dataOffset() const { return dataOffset_; }

  const llvm::StringMap<GgufValue> &metadata() const { return meta_; }
  const GgufValue *meta(llvm::StringRef key) const;
  /// Typed getters: an error naming the file and key when absent or of the
  /// wrong type. The `opt` forms return nullopt when absent (still an error
  /// for a wrong type).
  llvm::Expected<int64_t> getInt(llvm::StringRef key) const;
  llvm::Expected<double> getFloat(llvm::StringRef key) const;
  llvm::Expected<std::string> getString(llvm::StringRef key) const;
  llvm::Expected<std::optional<int64_t>> optInt(llvm::StringRef key) const;
  llvm::Expected<std::optional<double>> optFloat(llvm::StringRef key) const;

  llvm::ArrayRef<GgufTensorInfo> tensors() const { return tensors_; }
  const GgufTensorInfo *tensor(llvm::StringRef name) const;
  /// The tensor's bytes inside the mapping (checked at open).
  llvm::ArrayRef<uint8_t> data(const GgufTensorInfo &t) const;
  const std::shared_ptr<const llvm::MemoryBuffer> &mapping() const { return buf_; }

  /// `<file>: error: msg`.
  llvm::Error error(const llvm::Twine &msg) const;

private:
  GgufFile() = default;
  llvm::Error parse();

  std::string path_;
  std::shared_ptr<const llvm::MemoryBuffer> buf_;
  uint32_t version_ = 0;
  uint64_t alignment_ = 32;
  uint64_t dataOffset_ = 0;
  llvm::StringMap<GgufValue> meta_;
  std::vector<GgufTensorInfo> tensors_;
  llvm::StringMap<size_t> tensorIndex_;
};

/// ggml type id → our dtype (f32, f16, bf16, the legacy and k-quants, iq4_nl, iq4_xs).
std::optional<DType> dtypeFromGgml(uint32_t ggmlType);
/// ggml's name for a type id ("q5_K"), or "type N".
std::string ggmlTypeName(uint32_t ggmlType);
/// The ggml types dtypeFromGgml maps, by name in ggml's order ("f32, f16, q4_0, ...").
std::string supportedGgmlTypes();

} // namespace fg
