//===- LaunchDag.h - the launches of a Function and their dependencies --*- C++ -*-===//
//
// One launch per node that does work; view-like nodes (reshape, view, permute,
// transpose) launch nothing and alias their operand. Edges are explicit:
//   - read-after-write through values: a launch reading %v (directly or
//     through views of it) depends on the launch that produced %v;
//   - state: the updater of a version (set_rows, any kUpdatesState op) comes
//     after every other reader of that version (write-after-read); readers of
//     the new version read its updater's result, so they follow by the first rule.
// Edges are kept minimal (transitive reduction), so independent branches (the
// Q, K and V projections) have no edge between them and come out parallel.
//
//   %q = matmul(%x, %wq)   launch 0 ─┐
//   %k = matmul(%x, %wk)   launch 1 ─┼─> launch 3
//   %v = matmul(%x, %wv)   launch 2 ─┘   (0, 1, 2 pairwise unordered)
//
// Launch ids follow program order, which is a topological order of the DAG.
// happensBefore(a, b) is reachability: each launch keeps its ancestors as
// sorted id intervals (program order keeps them few: a chain's are one
// interval each, so memory stays linear in the launches), or as a bitset
// when that is smaller.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "ir/Graph.h"

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/BitVector.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/Support/Error.h"

#include <cstdint>
#include <vector>

namespace fg {

using LaunchId = uint32_t;
constexpr LaunchId kNoLaunch = ~0u;

struct LaunchNode {
  NodeId node;                          ///< the node this launch executes
  llvm::SmallVector<LaunchId, 4> preds; ///< direct dependencies (transitively reduced)
  llvm::SmallVector<LaunchId, 4> succs; ///< launches that depend directly on this one
  unsigned level = 0;                   ///< 0 for launches without preds, else 1 + max pred level
};

/// Whether node `n` launches work (false for view-like ops, which alias operand 0).
bool launchesWork(const Node &n);
/// Follows view-like producers to the value whose storage `v` aliases:
/// the value written by a launch, or an argument.
ValueId viewRoot(const Function &fn, ValueId v);
/// viewRoot of every value, in time linear in the function (each chain of
/// views is walked once; calling viewRoot per use is quadratic on long chains).
std::vector<ValueId> viewRoots(const Function &fn);
/// Like viewRoot, but also follows in-place updaters (kUpdatesState: result
/// i of an updater to its operand i, Function::updatedOperand) to the value they update: the value that owns the bytes `v` lives in.
ValueId storageRoot(const Function &fn, ValueId v);
/// `%name`, or `%v<id>` for an unnamed value (for messages).
std::string valueLabel(const Function &fn, ValueId v);
/// A node for messages: `%q, %k = mnemonic (line 12)` (results, op, source line).
std::string nodeLabel(const Function &fn, NodeId n);

class LaunchDag {
public:
  /// Builds the DAG of `fn`. Fails when a version of state is read after its
  /// update in program order (the verifier forbids that IR).
  static llvm::Expected<LaunchDag> build(const Function &fn);

  size_t size() const { return launches_.size(); }
  const LaunchNode &launch(LaunchId l) const { return launches_[l]; }
  llvm::ArrayRef<LaunchNode> launches() const { return launches_; }
  /// The launch executing node `n`, or kNoLaunch for a view-like node.
  LaunchId launchOf(NodeId n) const { return launchOfNode_[n]; }
  /// The launch that writes the bytes `v` reads from (views followed), or
  /// kNoLaunch when `v` aliases an argument that no launch has updated.
  LaunchId producer(ValueId v) const { return producer_[v]; }
  /// Number of nodes of the function the DAG was built from.
  size_t numNodes() const { return launchOfNode_.size(); }
  size_t numEdges() const { return numEdges_; }

  /// Whether a path a -> ... -> b exists (strict: false for a == b).
  bool happensBefore(LaunchId a, LaunchId b) const;
  /// The largest c such that every launch before c happens-before `l`
  /// (0 when launch 0 does not); everything below it is settled for `l`.
  LaunchId settledPrefix(LaunchId l) const;
  /// Whether a and b are ordered either way (or equal).
  bool ordered(LaunchId a, LaunchId b) const {
    return a == b || happensBefore(a, b) || happensBefore(b, a);
  }
  /// Length of the longest dependency chain (levels 0 .. numLevels() - 1).
  unsigned numLevels() const { return numLevels_; }
  /// The largest number of launches sharing one level.
  unsigned maxLevelWidth() const { return maxWidth_; }

private:
  std::vector<LaunchNode> launches_;
  std::vector<LaunchId> launchOfNode_;
  std::vector<LaunchId> producer_;
  /// Ancestors of launch l: sorted, disjoint, non-adjacent [lo, hi] id
  /// intervals, unless denseIndex_[l] names a bitset in dense_.
  using Intervals = llvm::SmallVector<std::pair<LaunchId, LaunchId>, 1>;
  std::vector<Intervals> ancestors_;
  std::vector<uint32_t> denseIndex_;
  std::vector<llvm::BitVector> dense_;
  unsigned numLevels_ = 0, maxWidth_ = 0;
  size_t numEdges_ = 0;
};

} // namespace fg
