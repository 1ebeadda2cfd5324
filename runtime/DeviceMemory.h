//===- DeviceMemory.h - what a plan takes on the device once loaded -*- C++ -*-===//
//
// The sum `inspect` and the Python module's `facts()` report, computed as
// the CUDA runner allocates: the weights as the program uploads them (else
// the graph's), the state (KV caches), one arena the size of the largest
// entry's, and the cuBLAS workspaces — one per slot the entries' GEMMs use
// (runtime/WorkspaceSlots.h), at least one, of workspaceBytes each.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "runtime/Program.h"

#include <cstdint>

namespace fg {

struct DeviceMemory {
  int64_t weights = 0, state = 0, arena = 0, workspace = 0;
  int64_t total() const { return weights + state + arena + workspace; }
};

/// `prog` may be null (a plan without a CUDA program): then the weights are
/// `graphWeightBytes` and there is no arena or workspace.
DeviceMemory deviceMemory(const CompiledProgram *prog, int64_t graphWeightBytes,
                          int64_t stateBytes);

} // namespace fg
