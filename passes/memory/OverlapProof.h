//===- OverlapProof.h - no launch writes bytes it still reads ------*- C++ -*-===//
//
// ggml's check_fusion_memory_ranges (FUSIONS.md §1.4), made ahead of time and
// exact: for every node that writes in place (kUpdatesState) and every fused
// node — and, by default, every launching node, which also catches planner
// bugs — no byte range it writes may overlap a byte range it reads from
// outside itself (a fused node is its own group: its operands are exactly what
// it reads from memory), unless the IR updates that operand in place or the
// target says its kernel reads all of it before writing (Target::readsAllBeforeWrite):
//
//   %k_cache.0.1 = set_rows(%k_cache.0, %k, %pos)   dest is written in place: fine
//   %src = view(%k_cache.0) {...}
//   %k_cache.0.1 = set_rows(%k_cache.0, %src, %pos) refused: %src (bytes [0, 256))
//                                                   overlaps the write of %k_cache.0.1
//
// Runs twice: in the fusion driver as a pre-check (a fused group it refuses is
// split back and planning runs again), and in lowering over the final plan,
// with the scratch the emitters reported, where a violation fails the
// compilation naming both nodes: the plan written is the plan proven.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "passes/Target.h"
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
  NodeId producer;    ///< the node that wrote `read` (views followed), or kNoNode for an argument
  std::string reason; ///< "%x (bytes [a, b)) overlaps the write of %k_cache.0.1 (bytes [c, d))"
};

struct OverlapOptions {
  /// Check every launching node, not only in-place and fused ones.
  bool allLaunches = true;
  /// Asked which operands a kernel reads whole before writing (null: none).
  const Target *target = nullptr;
};

/// Whether operand `operand` of `node` may share bytes with result `result`:
/// the IR updates that operand in place (kUpdatesState: operand i is result
/// i for i < OpInfo::numUpdatedStates, e.g. set_rows' destination), or the target's kernel reads all of it
/// before writing anything (`target` null: never).
bool mayAliasResult(const Function &fn, const Node &node, unsigned operand, unsigned result,
                    const Target *target = nullptr);

/// Whether the proof must look at `node` at all (in-place or fused, or any
/// launch with opts.allLaunches).
bool needsOverlapProof(const Node &node, const OverlapOptions &opts = {});

/// Every violation in `fn` under `plan`; empty when the plan is proven safe.
std::vector<OverlapViolation> proveNoOverlap(const Function &fn, const BufferPlan &plan,
                                             const OverlapOptions &opts = {});

/// The same, as an error naming the first violations and, for each, both
/// nodes: the writer and the producer of the bytes it clobbers
/// ("%c = exp (line 4) writes ... over %a, the result of %a = silu (line 3)").
llvm::Error checkNoOverlap(const Function &fn, const BufferPlan &plan,
                           const OverlapOptions &opts = {});

} // namespace fg
