//===- OpTable.h - the one table that defines every op -----------*- C++ -*-===//
//
// Each op is one record in ir/Ops.def: mnemonic, named operands (with how
// many are optional), typed attributes, traits, the shape/type rule (which is
// also the op's verifier), its cost and, for fused ops, its decomposition.
// This header gives the runtime view of those rows (OpInfo); ir/OpViews.h
// gives the typed one (op::RmsNorm(node).eps()).
//
//===----------------------------------------------------------------------===//
#pragma once

#include "ir/Attr.h"
#include "ir/Type.h"

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/Support/Error.h"

#include <optional>
#include <string_view>

namespace fg {

enum class OpKind : uint16_t {
#define FG_OP(Kind, ...) Kind,
#include "ir/Ops.def"
};

enum OpTraits : unsigned {
  kNoTraits = 0,
  kElementwise = 1u << 0,  ///< out[i] = f(a[i], b[bcast(i)]); same layout in and out
  kRowWise = 1u << 1,      ///< works on whole rows (norms, softmax, top-k)
  kCommutative = 1u << 2,  ///< operands 0 and 1 may be swapped
  kViewLike = 1u << 3,     ///< result aliases operand 0 (reshape/view/permute/transpose)
  kUpdatesState = 1u << 4, ///< consumes state version (operand 0) and yields the next one in place
  kFused = 1u << 5,        ///< a fusion of other ops; reference = its decomposition
  /// numResults is the most results; the decomposition's `return` drops the
  /// items whose guard fails (fused.matmul_multi: one result per weight).
  kVariadicResults = 1u << 6,
  /// With kUpdatesState: operand 1 is a second state version, updated in
  /// place as result 1 (fused.rope_kv_attention writes the k and v caches).
  kUpdatesTwoStates = 1u << 7,
};

/// What the type rule sees: operand types and the node's attributes.
struct OpSignature {
  llvm::ArrayRef<TensorType> operands;
  llvm::ArrayRef<Attribute> attrs;
};

using TypeRule = llvm::Error (*)(const OpSignature &, llvm::SmallVectorImpl<TensorType> &results);

/// What the cost rules see beyond types: facts known only at run time.
struct CostContext {
  /// Rows of each KV cache attention reads (the live length); 0: every row.
  int64_t kvRows = 0;
};

/// The one byte model (inspect, the bench rooflines and the target's fusion
/// cost model all read it). Bytes are what a node touches, each operand once:
/// get_rows reads only the indexed rows of its table, an expert-indexed op
/// (matmul_id, add_id) only min(E, |ids|) of its E experts, attention only
/// kvRows rows of each cache, an in-place update (set_rows) writes only its
/// rows (counted on operand 0, its result adds nothing); every other operand
/// and result is read or written whole. A fused op reads each of its operands
/// once (the largest use in its decomposition) and elides its intermediates;
/// an operand it updates in place counts the rows its decomposition writes
/// plus its largest read (Cost::updatedBytes says which part was written).
struct Cost {
  double flops = 0;
  double bytes = 0;                          ///< Σ operandBytes + resultBytes
  llvm::SmallVector<double, 6> operandBytes; ///< bytes touched through each operand
  double resultBytes = 0;                    ///< bytes written to results
  /// Of operandBytes[i] for an operand updated in place (i <
  /// OpInfo::numUpdatedStates), the bytes written; the rest were read
  /// (fused.rope_kv_attention writes a row of each cache and reads the live
  /// rows). Empty: all of them written (set_rows and its fusions).
  llvm::SmallVector<double, 2> updatedBytes;
};
/// Adjusts the default cost (1 flop per result element, every operand read
/// whole, every result written whole) in place; opCost sums `bytes` after.
using CostRule = void (*)(const OpSignature &, llvm::ArrayRef<TensorType> results,
                          const CostContext &, Cost &);

struct OpInfo {
  OpKind kind;
  std::string_view mnemonic;
  llvm::ArrayRef<std::string_view> operandNames; ///< all operands, required first
  unsigned numOptional;                          ///< trailing operands that may be absent
  unsigned numResults;
  unsigned traits;
  llvm::ArrayRef<AttrSpec> attrs;
  TypeRule inferTypes; ///< shape inference and the op's own checks
  CostRule cost;       ///< null: the default (1 flop per result element, bytes in + out)
  /// kFused ops: the decomposition that defines them, as data (the template
  /// language of ir/Decomposition.h); empty for every other op.
  std::string_view decomposition = {};

  unsigned minOperands() const { return static_cast<unsigned>(operandNames.size()) - numOptional; }
  unsigned maxOperands() const { return static_cast<unsigned>(operandNames.size()); }
  bool has(OpTraits t) const { return traits & t; }
  /// How many leading operands the op updates in place, operand i becoming
  /// result i: 0, 1 (set_rows and its fusions) or 2 (kUpdatesTwoStates).
  unsigned numUpdatedStates() const {
    return !has(kUpdatesState) ? 0 : has(kUpdatesTwoStates) ? 2 : 1;
  }
  /// Index of attribute `name`, for the generic printer, parser and
  /// decomposition (data-driven: a missing name is their error to report).
  /// Code reads attributes through the typed views of ir/OpViews.h.
  std::optional<unsigned> findAttr(std::string_view name) const;
};

const OpInfo &opInfo(OpKind kind);
inline std::string_view mnemonic(OpKind kind) { return opInfo(kind).mnemonic; }
std::optional<OpKind> lookupOp(std::string_view mnemonic);
llvm::ArrayRef<OpInfo> allOps();

/// Fills `attrs` with every declared attribute's default (required ones zeroed).
AttrList defaultAttrs(OpKind kind);

/// Runs the op's type rule after checking operand count. The error message
/// names the op and says what was expected (callers add the location).
llvm::Error inferResultTypes(OpKind kind, llvm::ArrayRef<TensorType> operands,
                             llvm::ArrayRef<Attribute> attrs,
                             llvm::SmallVectorImpl<TensorType> &results);

/// The op's cost (see Cost) for these operand and result types.
Cost opCost(OpKind kind, llvm::ArrayRef<TensorType> operands, llvm::ArrayRef<Attribute> attrs,
            llvm::ArrayRef<TensorType> results, const CostContext &ctx = {});

/// Numpy-style broadcast of two shapes (trailing dims aligned, 1 stretches).
std::optional<Shape> broadcastShapes(llvm::ArrayRef<int64_t> a, llvm::ArrayRef<int64_t> b);

} // namespace fg
