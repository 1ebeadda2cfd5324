//===- Verifier.h - structural and type checks of a Graph -------*- C++ -*-===//
//
// Checks: operands defined before use (program order is a topological order);
// every node's result types equal what its type rule infers; argument names
// unique; results exist; state versions are linear (each version updated at
// most once, nothing — including views of it — reads a version after its
// update in program order); updaters only update state; weights and state
// shared between entries agree on type (and weights on init).
//
//===----------------------------------------------------------------------===//
#pragma once

#include "ir/Graph.h"

#include "llvm/Support/Error.h"

namespace fg {

/// `filename` is used to format locations of nodes parsed from text.
llvm::Error verifyFunction(const Function &fn, llvm::StringRef filename = "");
llvm::Error verifyGraph(const Graph &g, llvm::StringRef filename = "");

/// The state argument that `v` is a version of (following set_rows chains and
/// views), or kNoValue when `v` is not derived from state.
ValueId stateRoot(const Function &fn, ValueId v);

} // namespace fg
