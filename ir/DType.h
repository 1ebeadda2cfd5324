//===- DType.h - element types and their storage traits ---------*- C++ -*-===//
//
// One table describes every element type: its mnemonic, how many logical
// elements one storage block holds and how many bytes that block takes.
// Scalar types are blocks of one element; the GGUF block-quantised types hold
// 32 (q4_0, q4_1, q5_0, q5_1, q8_0, iq4_nl) or 256 (the k-quants q2_k … q6_k,
// iq4_xs) elements per block. Nothing in the
// compiler assumes one element == one scalar: byte sizes go through here.
//
//===----------------------------------------------------------------------===//
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

namespace fg {

enum class DType : uint8_t {
#define FG_DTYPE(Kind, name, blockElems, blockBytes, flags) Kind,
#include "ir/DTypes.def"
};

/// How many dtypes there are: a reader refuses a stored dtype value at or past it.
inline constexpr unsigned kNumDTypes = 0
#define FG_DTYPE(Kind, name, blockElems, blockBytes, flags) +1
#include "ir/DTypes.def"
    ;

enum DTypeFlags : unsigned {
  kFloat = 1u << 0,     ///< a real-valued scalar type (f32, f16, bf16)
  kInteger = 1u << 1,   ///< an integer scalar type (i32, i64)
  kQuantized = 1u << 2, ///< a block-quantised weight type
};

struct DTypeInfo {
  std::string_view name;
  int64_t blockElems; ///< logical elements per storage block
  int64_t blockBytes; ///< bytes per storage block
  unsigned flags;
};

const DTypeInfo &dtypeInfo(DType t);
inline std::string_view dtypeName(DType t) { return dtypeInfo(t).name; }
std::optional<DType> parseDType(std::string_view name);

inline bool isFloat(DType t) { return dtypeInfo(t).flags & kFloat; }
inline bool isInteger(DType t) { return dtypeInfo(t).flags & kInteger; }
inline bool isQuantized(DType t) { return dtypeInfo(t).flags & kQuantized; }
/// Float or quantised: anything that reads as real numbers.
inline bool isReal(DType t) { return isFloat(t) || isQuantized(t); }

/// Bytes taken by `elems` elements laid out contiguously along a row. For block
/// types `elems` must be a multiple of the block size (the verifier checks
/// that rows of quantised weights are whole blocks).
inline int64_t storageBytes(DType t, int64_t elems) {
  const DTypeInfo &i = dtypeInfo(t);
  return (elems / i.blockElems) * i.blockBytes;
}

} // namespace fg
