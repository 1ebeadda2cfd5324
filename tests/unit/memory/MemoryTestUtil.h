// Shared helpers of the memory-planning tests: plan a function, and a
// brute-force checker that recomputes liveness and ordering from the IR alone.
#pragma once

#include "passes/memory/BufferPlan.h"
#include "passes/memory/LaunchDag.h"
#include "passes/memory/OverlapProof.h"

#include "ir/Builder.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace fg::testing {

struct Planned {
  LaunchDag dag;
  BufferPlan plan;
};

inline Planned planOrDie(const Function &fn, const MemoryPlanOptions &opts = {}) {
  auto dag = LaunchDag::build(fn);
  EXPECT_TRUE(static_cast<bool>(dag)) << (dag ? "" : llvm::toString(dag.takeError()));
  if (!dag)
    return {};
  auto plan = planMemory(fn, *dag, opts);
  EXPECT_TRUE(static_cast<bool>(plan)) << (plan ? "" : llvm::toString(plan.takeError()));
  if (!plan)
    return {};
  return {std::move(*dag), std::move(*plan)};
}

/// Brute force, sharing no code with the planner: node-level transitive
/// closure of dataflow (through views) plus write-after-read edges of
/// in-place updaters; then every two arena values with different storage
/// owners whose byte ranges intersect must be ordered (all touches of one
/// strictly before all touches of the other), and never pinned.
struct BruteForce {
  const Function &fn;
  std::vector<std::vector<bool>> before;    // before[a][b]: node a happens-before node b
  std::vector<ValueId> owner;               // storage owner of each value
  std::vector<std::vector<NodeId>> touches; // by owner: launching nodes writing or reading it

  explicit BruteForce(const Function &f) : fn(f) {
    size_t n = fn.numNodes();
    before.assign(n, std::vector<bool>(n, false));
    owner.assign(fn.numValues(), kNoValue);
    for (const Argument &a : fn.arguments())
      owner[a.value] = a.value;
    std::vector<std::vector<NodeId>> readers(fn.numValues()); // by owner
    for (NodeId i = 0; i < n; ++i) {
      const Node &node = fn.node(i);
      const unsigned aliased = node.info().has(kViewLike) ? 1 : node.info().numUpdatedStates();
      for (unsigned k = 0; k < node.results.size(); ++k)
        owner[node.results[k]] = k < aliased ? owner[node.operands[k]] : node.results[k];
    }
    // Direct edges: producer node of each operand (views are nodes too).
    for (NodeId i = 0; i < n; ++i)
      for (ValueId op : fn.node(i).operands)
        if (!fn.value(op).isArgument())
          before[fn.value(op).def][i] = true;
    // WAR: an updater follows every other reader of the version it updates
    // (readers through views included).
    auto versionOf = [&](ValueId v) {
      while (!fn.value(v).isArgument() && fn.node(fn.value(v).def).info().has(kViewLike))
        v = fn.node(fn.value(v).def).operands[0];
      return v;
    };
    for (NodeId u = 0; u < n; ++u) {
      for (unsigned k = 0; k < fn.node(u).info().numUpdatedStates(); ++k) {
        ValueId ver = versionOf(fn.node(u).operands[k]);
        for (NodeId r = 0; r < u; ++r) {
          if (fn.node(r).info().has(kViewLike))
            continue;
          for (ValueId op : fn.node(r).operands)
            if (versionOf(op) == ver)
              before[r][u] = true;
        }
      }
    }
    // Closure (Floyd–Warshall style, nodes are topological).
    for (NodeId k = 0; k < n; ++k)
      for (NodeId i = 0; i < n; ++i)
        if (before[i][k])
          for (NodeId j = 0; j < n; ++j)
            if (before[k][j])
              before[i][j] = true;
    touches.assign(fn.numValues(), {});
    for (NodeId i = 0; i < n; ++i) {
      const Node &node = fn.node(i);
      if (node.info().has(kViewLike))
        continue;
      for (ValueId r : node.results)
        touches[owner[r]].push_back(i);
      for (ValueId op : node.operands)
        touches[owner[op]].push_back(i);
    }
  }

  bool allBefore(ValueId a, ValueId b) const {
    for (NodeId x : touches[a])
      for (NodeId y : touches[b])
        if (!before[x][y])
          return false;
    return true;
  }

  /// Empty when safe; otherwise a description of the first problem.
  std::string check(const BufferPlan &plan) const {
    std::vector<bool> pinned(fn.numValues(), false);
    for (const Argument &a : fn.arguments())
      pinned[owner[a.value]] = a.role == ArgRole::Input;
    for (ValueId r : fn.results())
      pinned[owner[r]] = true;
    std::vector<ValueId> arena;
    for (ValueId v = 0; v < fn.numValues(); ++v)
      if (owner[v] != kNoValue && plan.values[v].loc == Location::Arena)
        arena.push_back(v);
    for (ValueId a : arena) {
      const Placement &pa = plan.values[a];
      if (pa.offset < 0 || pa.end() > plan.arenaBytes)
        return valueLabel(fn, a) + " outside the arena";
      if (plan.values[owner[a]].offset % plan.alignment)
        return valueLabel(fn, a) + " misaligned";
      for (ValueId b : arena) {
        if (owner[a] == owner[b])
          continue;
        const Placement &pb = plan.values[b];
        if (pa.size == 0 || pb.size == 0 || pa.end() <= pb.offset || pb.end() <= pa.offset)
          continue;
        ValueId oa = owner[a], ob = owner[b];
        if (!pinned[oa] && !pinned[ob] && (allBefore(oa, ob) || allBefore(ob, oa)))
          continue;
        return valueLabel(fn, a) + " and " + valueLabel(fn, b) + " overlap while both may be live";
      }
    }
    return "";
  }
};

} // namespace fg::testing
