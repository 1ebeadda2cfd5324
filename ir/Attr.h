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
#include <iterator>
#include <limits>
#include <string>
#include <string_view>
#include <type_traits>

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

// --- enumerations of attributes (ir/Enums.def: each defined once) -------------------

// Each FG_ENUM closes the previous enum and opens the next one.
enum class DummyEnumStart_ : int64_t {
#define FG_ENUM(Name)                                                                              \
  }                                                                                                \
  ;                                                                                                \
  enum class Name : int64_t {
#define FG_ENUMERATOR(Name, Value, word) Value,
#include "ir/Enums.def"
};

/// The printed words of enum E, by value (EnumWords<RopeMode>::kWords[1] == "neox").
template <typename E> struct EnumWords;
template <> struct EnumWords<DummyEnumStart_> {
  static constexpr std::string_view kWords[] = {""
#define FG_ENUM(Name)                                                                              \
  }                                                                                                \
  ;                                                                                                \
  }                                                                                                \
  ;                                                                                                \
  template <> struct EnumWords<Name> {                                                             \
    static constexpr std::string_view kWords[] = {
#define FG_ENUMERATOR(Name, Value, word) word,
#include "ir/Enums.def"
  };
};

/// How many values enum E has.
template <typename E> constexpr unsigned enumCount() {
  return static_cast<unsigned>(std::size(EnumWords<E>::kWords));
}
/// The word of `v` (`neox`).
template <typename E> constexpr std::string_view enumWord(E v) {
  return EnumWords<E>::kWords[static_cast<size_t>(v)];
}
constexpr unsigned kNumTopkGatings = enumCount<TopkGating>();

// --- typed attributes: what a C++ type means as an attribute -----------------------

/// An integer-list attribute as the Builder's argument structs hold it.
using IntList = llvm::SmallVector<int64_t, 4>;
/// `inf` as an attribute default (ir/Ops.def).
inline constexpr double kAttrInf = std::numeric_limits<double>::infinity();

/// AttrTraits<T>: the AttrKind of T, how a value is stored (make) and read
/// back (get), the type a Builder argument struct holds (Value) and the type a
/// view returns (Ref). T is double, int64_t, IntList, DType or an enum of
/// ir/Enums.def.
// (SFINAE, not `requires`: the tools that include llvm/Support/JSON.h are
// compiled as C++17 by clang 14; see CMakeLists.txt.)
template <typename T, typename = void> struct AttrTraits;
template <> struct AttrTraits<double> {
  using Value = double;
  using Ref = double;
  static constexpr AttrKind kKind = AttrKind::Float;
  static Attribute make(double v) { return Attribute::ofFloat(v); }
  static double get(const Attribute &a) { return a.f; }
  static llvm::ArrayRef<std::string_view> words() { return {}; }
};
template <> struct AttrTraits<int64_t> {
  using Value = int64_t;
  using Ref = int64_t;
  static constexpr AttrKind kKind = AttrKind::Int;
  static Attribute make(int64_t v) { return Attribute::ofInt(v); }
  static int64_t get(const Attribute &a) { return a.i; }
  static llvm::ArrayRef<std::string_view> words() { return {}; }
};
template <> struct AttrTraits<IntList> {
  using Value = IntList;
  using Ref = llvm::ArrayRef<int64_t>;
  static constexpr AttrKind kKind = AttrKind::Ints;
  static Attribute make(llvm::ArrayRef<int64_t> v) { return Attribute::ofInts(v); }
  static llvm::ArrayRef<int64_t> get(const Attribute &a) { return a.ints; }
  static llvm::ArrayRef<std::string_view> words() { return {}; }
};
template <> struct AttrTraits<DType> {
  using Value = DType;
  using Ref = DType;
  static constexpr AttrKind kKind = AttrKind::DType;
  static Attribute make(DType v) { return Attribute::ofDType(v); }
  static DType get(const Attribute &a) { return static_cast<DType>(a.i); }
  static llvm::ArrayRef<std::string_view> words() { return {}; }
};
template <typename E> struct AttrTraits<E, std::void_t<decltype(EnumWords<E>::kWords)>> {
  using Value = E;
  using Ref = E;
  static constexpr AttrKind kKind = AttrKind::Enum;
  static Attribute make(E v) { return Attribute::ofEnum(static_cast<int64_t>(v)); }
  static E get(const Attribute &a) { return static_cast<E>(a.i); }
  static llvm::ArrayRef<std::string_view> words() { return EnumWords<E>::kWords; }
};

} // namespace fg
