//===- Attr.h - typed op attributes ------------------------------*- C++ -*-===//
//
// Every op declares its attributes in its row of the op table (name, kind,
// default). A node stores one Attribute per declared attribute, in declaration
// order, with defaults filled in, so the printer's order is fixed and readers
// never look attributes up by position.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "ir/DType.h"

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/SmallVector.h"

#include <cstdint>
#include <string>
#include <string_view>

namespace fg {

enum class AttrKind : uint8_t {
  Int,   ///< 64-bit integer: `k = 2`
  Float, ///< double, printed shortest round-trip: `eps = 1e-06`, `max = inf`
  Ints,  ///< integer list: `shape = [1, 4096]`
  Enum,  ///< one of a fixed set of words: `mode = neox`
  DType, ///< an element type: `dtype = f16`
};

/// One attribute value. Only the field selected by the spec's kind is used.
struct Attribute {
  int64_t i = 0; ///< Int, Enum (index into the spec's words), DType (enum value)
  double f = 0;  ///< Float
  llvm::SmallVector<int64_t, 4> ints; ///< Ints

  static Attribute ofInt(int64_t v) { Attribute a; a.i = v; return a; }
  static Attribute ofFloat(double v) { Attribute a; a.f = v; return a; }
  static Attribute ofInts(llvm::ArrayRef<int64_t> v) {
    Attribute a; a.ints.assign(v.begin(), v.end()); return a;
  }
  static Attribute ofEnum(int64_t index) { return ofInt(index); }
  static Attribute ofDType(fg::DType t) { return ofInt(static_cast<int64_t>(t)); }

  bool equals(const Attribute &o, AttrKind kind) const;
};

/// The declaration of one attribute in an op's row.
struct AttrSpec {
  std::string_view name;
  AttrKind kind;
  bool required;     ///< no default: must be given
  Attribute dflt;    ///< the default when not required
  llvm::ArrayRef<std::string_view> words = {}; ///< Enum: the allowed words, by index
};

using AttrList = llvm::SmallVector<Attribute, 4>;

/// Prints an attribute value in its canonical text form.
std::string printAttr(const Attribute &a, const AttrSpec &spec);
/// Shortest text that reads back to the same double (`1e-06`, `0.5`, `inf`).
std::string printFloat(double v);

// Enumerations used by attributes (the words live in the op table).
enum class RopeMode : int64_t { Normal = 0, Neox = 1 };
enum class GluKind : int64_t { SwiGLU = 0, GeGLU = 1, SwiGLUOAI = 2, SwiGLUClamp = 3 };
enum class SortOrder : int64_t { Asc = 0, Desc = 1 };
/// How fused.topk_moe (and the decoder's MoE routing) turns router logits into
/// probabilities. Delayed: top-k of the raw logits, then a softmax of the k chosen.
enum class TopkGating : int64_t { Softmax = 0, Sigmoid = 1, SqrtSoftplus = 2, DelayedSoftmax = 3 };
constexpr unsigned kNumTopkGatings = 4;

} // namespace fg
