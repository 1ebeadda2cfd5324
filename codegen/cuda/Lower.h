//===- Lower.h - Graph -> CompiledProgram (kernels, buffers, launch DAG) ---===//
//
// For every entry: layouts of every value (views compose strides, never
// copy), kernels emitted per node, memory planned over the launch DAG (with
// each node's emitted scratch) and that plan proven (a failed proof is an
// error naming both nodes), then every launch's pointer arguments resolved
// against the proven plan to (space, index, byte offset) and its dependencies
// taken from the DAG. Each unique kernel source is compiled once with NVRTC
// (disk-cached) into its own module; weights and state become the program's
// tables, shared by name. Lower.cpp drives the steps; each has its own file.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "codegen/cuda/Kernel.h"
#include "codegen/cuda/Nvrtc.h"
#include "codegen/cuda/ProvenPlan.h"
#include "ir/Diag.h"
#include "ir/Graph.h"
#include "runtime/Program.h"
#include "runtime/WorkspaceSlots.h"

#include "llvm/Support/Error.h"

namespace fg::cuda {

struct LowerOptions {
  EmitOptions emit;
  NvrtcOptions nvrtc;
  /// KV rows, recorded in the program (the input check enforces the
  /// positions' own binding).
  int64_t ctx = 0;
  uint64_t cublasWorkspaceBytes = 32ull << 20;
  /// cuBLAS workspaces an entry's GEMMs rotate through (1: every GEMM waits
  /// for the previous one, the form before the tenth session; at most
  /// kWorkspaceSlots). FG_DEBUG_WORKSPACE_SLOTS, for timing both in one run.
  unsigned workspaceSlots = kWorkspaceSlots;
  LogSink log;
  ProgressSink progress; ///< kernels compiled so far (KernelModules)
  /// Tests only: edits each entry's memory plan before it is proven (to plant
  /// an alias and see the compilation refuse it).
  PlanHook testPlanHook;
};

/// What lowering did, for `inspect` and logs.
struct LowerStats {
  unsigned kernels = 0, gemms = 0, modules = 0, cacheHits = 0;
  uint64_t arenaBytes = 0, peakLiveBytes = 0;
};

llvm::Expected<CompiledProgram> lowerGraph(const Graph &g, const LowerOptions &opts,
                                           LowerStats *stats = nullptr);

} // namespace fg::cuda
