//===- ScheduleSummary.h - how parallel a launch DAG is (tests) ----*- C++ -*-===//
// A test helper: the memory and DAG tests count a DAG's parallel branches
// with it (nothing in the compiler needs the summary).
#pragma once

#include "passes/memory/LaunchDag.h"

#include <cstddef>

namespace fg {

struct ScheduleSummary {
  size_t launches = 0;
  size_t edges = 0;      ///< after transitive reduction
  unsigned levels = 0;   ///< length of the longest dependency chain
  unsigned maxWidth = 0; ///< most launches on one level
  /// Branches a CUDA graph forks beyond one stream: Σ over launches of
  /// (successors − 1) when positive, plus (sources − 1). 0 for a chain; 2 for
  /// Q, K, V projections of one input.
  unsigned parallelBranches = 0;
};

inline ScheduleSummary summarizeSchedule(const LaunchDag &dag) {
  ScheduleSummary s;
  s.launches = dag.size();
  s.edges = dag.numEdges();
  s.levels = dag.numLevels();
  s.maxWidth = dag.maxLevelWidth();
  unsigned sources = 0;
  for (const LaunchNode &l : dag.launches()) {
    if (l.succs.size() > 1)
      s.parallelBranches += static_cast<unsigned>(l.succs.size()) - 1;
    sources += l.preds.empty();
  }
  if (sources > 1)
    s.parallelBranches += sources - 1;
  return s;
}

} // namespace fg
