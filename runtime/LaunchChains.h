//===- LaunchChains.h - how an entry's launches line up -----------*- C++ -*-===//
//
// What issue 13 counts: launches per decoder layer, and how many of them run
// one after another. Inside a CUDA graph each launch that waits for another
// pays its ramp-up and tail (programmatic launch hides part of it), so the
// longest chain of the launch DAG, not the launch count, bounds a step's
// fixed cost; launches of parallel branches overlap.
//
//   longest       the most launches on one path of the DAG (deps)
//   layer         the first decoder layer's launches: those computing values
//                 named "blk.0." or writing its KV cache ("k_cache.0", the
//                 decoder ABI's names; `fusegraph inspect` prints them), with
//                 their own longest chain (paths through launches of that
//                 layer only)
//
//===----------------------------------------------------------------------===//
#pragma once

#include "ir/Graph.h"
#include "runtime/Program.h"

#include <string>

namespace fg {

struct LaunchChains {
  size_t launches = 0, longest = 0;
  std::string layer; ///< "blk.0", or empty when no launch computes a value of it
  size_t layerLaunches = 0, layerLongest = 0;
};

/// The chains of `entry`; `fn` is its function in the plan's graph (the
/// launches' node ids index it), or null (then no layer is found).
LaunchChains launchChains(const CompiledEntry &entry, const Function *fn);

} // namespace fg
