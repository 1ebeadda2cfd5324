//===- OverlapProof.h - no launch writes bytes it still reads ------*- C++ -*-===//
//
// ggml's check_fusion_memory_ranges (FUSIONS.md §1.4), made ahead of time and
// exact: for every node that writes in place (kUpdatesState) and every fused
// node — and, by default, every launching node, which also catches planner
// bugs — no byte range it writes may overlap a byte range it reads from
// outside itself (a fused node is its own group: its operands are exactly what
// it reads from memory), unless the op declares that operand safe to alias:
//
//   %k_cache.0.1 = set_rows(%k_cache.0, %k, %pos)   dest is written in place: fine
//   %src = view(%k_cache.0) {...}
//   %k_cache.0.1 = set_rows(%k_cache.0, %src, %pos) refused: %src (bytes [0, 256))
//                                                   overlaps the write of %k_cache.0.1
//
// Runs after planning; a fused group it refuses is split back and planning
// runs again (the fusion driver's loop).
//
//===----------------------------------------------------------------------===//
#pragma once

#include "passes/memory/BufferPlan.h"

#include "ir/Graph.h"

#include <string>
#include <vector>

namespace fg {

struct OverlapViolation {
  NodeId node;        ///< the writing node
  ValueId written;    ///< its result whose bytes are written
  unsigned operand;   ///< index of the operand read
  ValueId read;       ///< that operand's value
  std::string reason; ///< "%x (bytes [a, b)) overlaps the write of %k_cache.0.1 (bytes [c, d))"
};

struct OverlapOptions {
  /// Check every launching node, not only in-place and fused ones.
  bool allLaunches = true;
};

/// Whether operand `operand` of `node` may share bytes with result `result`:
/// the kernel writes that operand in place, or reads all of it before writing
/// anything. set_rows: the destination (operand 0) is its result, updated in
/// place. New fused ops add their row here (e.g. single-row top-k routing,
/// which reads the whole row before writing).
bool mayAliasResult(const Function &fn, const Node &node, unsigned operand, unsigned result);

/// Whether the proof must look at `node` at all (in-place or fused, or any
/// launch with opts.allLaunches).
bool needsOverlapProof(const Node &node, const OverlapOptions &opts = {});

/// Every violation in `fn` under `plan`; empty when the plan is proven safe.
std::vector<OverlapViolation> proveNoOverlap(const Function &fn, const BufferPlan &plan,
                                             const OverlapOptions &opts = {});

/// The same, as an error naming the first violations (for pipelines).
llvm::Error checkNoOverlap(const Function &fn, const BufferPlan &plan,
                           const OverlapOptions &opts = {});

} // namespace fg
