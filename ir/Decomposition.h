//===- Decomposition.h - fused ops defined by their decomposition -*- C++ -*-===//
//
// A fused op (trait kFused) is defined by a short program over unfused ops,
// kept as data in its row of the op table (OpInfo::decomposition). One
// interpreter walks that program for every use: the fused op's type rule,
// the CPU reference (runtime/reference/Decompose.cpp) and splitting a fused
// node back into its pieces (the fusion driver's overlap loop).
//
// The template language, one statement per line:
//
//   %n = rms_norm(%x) {$eps}                 // `{$eps}` is short for `{eps = $eps}`
//   %m = mul(%n, %w)
//   [has bias] %s = add(%m, %bias)           // a guarded step
//   [gating == softmax, !renorm] ...         // guards: all must hold
//   for $j in 0 .. dim(%m, 1) { ... }        // loops over an integer range
//   return %s, %m
//   return %y0, %y1, [has w2] %y2             // a guarded item: a result only when
//                                            // the guard holds (kVariadicResults rows)
//
// Operand references name the fused op's operands (OpInfo::operandNames) or
// values bound by earlier steps; a reference to an absent optional operand is
// dropped from the call. A step that runs (re)binds its result names. A step
// whose guard fails binds each result name that is still unbound to its first
// operand: `[has bias] %s = add(%m, %bias)` leaves %s = %m without a bias.
// Guards: `has NAME` (optional operand present), `NAME` / `!NAME` (an integer
// attribute is non-zero / zero), `NAME == word|number`, `NAME != ...`, and
// loop-variable comparisons `$j > 0`. Attribute values: `$attr` (the fused
// op's attribute), numbers, words, lists `[a, b]`, `dim(%v, i)`, `$j`, with
// `+`, `-`, `*`.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "ir/Graph.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/Support/Error.h"

namespace fg {

/// Called once per step that runs. Handles number values: the fused op's
/// present operands are 0..n-1, then each step's results in order.
using DecompositionStep = llvm::function_ref<llvm::Error(
    OpKind kind, llvm::ArrayRef<unsigned> operands, llvm::ArrayRef<Attribute> attrs,
    llvm::ArrayRef<TensorType> results)>;

/// Walks the decomposition of fused op `fused` applied to operands of types
/// `operands` (present ones only) with attributes `attrs`. Each step's types
/// come from its op's type rule. `results` receives the handles of the fused
/// op's results, `resultTypes` (if given) their types.
llvm::Error walkDecomposition(OpKind fused, llvm::ArrayRef<TensorType> operands,
                              llvm::ArrayRef<Attribute> attrs, DecompositionStep step,
                              llvm::SmallVectorImpl<unsigned> &results,
                              llvm::SmallVectorImpl<TensorType> *resultTypes = nullptr);

/// The type rule of every fused row: the result types of its decomposition.
llvm::Error inferFusedTypes(OpKind fused, const OpSignature &s,
                            llvm::SmallVectorImpl<TensorType> &results);

/// The cost of a fused row: the flops of its steps; each operand read once
/// (the largest number of bytes a step touches through it, views followed);
/// its results written once, except those that alias an operand (in-place
/// updates, whose rows are counted on that operand); intermediates elided.
Cost fusedCost(OpKind fused, const OpSignature &s, llvm::ArrayRef<TensorType> results,
               const CostContext &ctx = {});

/// Appends the decomposition of node `n` (a kFused node of `fn`) at the end of
/// `fn`, and returns the values that replace the node's results. The caller
/// rewires uses and puts the new nodes in order (they are appended last).
/// New values are named `<prefix>.<step name>` when `prefix` is non-empty.
llvm::Error expandFusedNode(Function &fn, NodeId n, llvm::SmallVectorImpl<ValueId> &replacements,
                            llvm::StringRef prefix = {});

} // namespace fg
