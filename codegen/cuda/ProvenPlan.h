//===- ProvenPlan.h - the memory plan that ships, proven -----------*- C++ -*-===//
//
// Lowering, step 3, over the final program (after every rewrite, with the
// scratch the emitters reported):
//   1. the launch DAG (passes/memory/LaunchDag.h);
//   2. the arena plan (planMemory) with each node's emitted scratch;
//   3. the proof of that plan: no launch writes bytes it reads (proveNoOverlap
//      over every launch; the target answers which operands its kernels read
//      whole before writing), and no two allocations that may be live at once
//      share bytes (verifyNoOverlap).
// A failed proof fails the compilation, naming the writing node and the node
// whose bytes it would clobber. Launch records are resolved against the plan
// returned here, so the plan written is the plan proven. (The fusion driver's
// proof is a pre-check that decides split-backs; this one is the guarantee.)
//
//===----------------------------------------------------------------------===//
#pragma once

#include "codegen/cuda/EmitNodes.h"
#include "passes/Target.h"
#include "passes/memory/BufferPlan.h"
#include "passes/memory/LaunchDag.h"

#include "llvm/Support/Error.h"

#include <functional>

namespace fg::cuda {

/// Edits a freshly planned entry before it is proven (tests plant aliases with it).
using PlanHook = std::function<void(const Function &, BufferPlan &)>;

struct ProvenPlanOptions {
  const Target *target = nullptr; ///< asked for the proof's aliasing exemptions
  PlanHook testHook;              ///< tests only; empty in real compilations
};

struct ProvenPlan {
  LaunchDag dag;
  BufferPlan plan;
};

/// Plans `fn`'s memory with the scratch of `code` (one entry per node) and
/// proves the plan; the error names both nodes of the first violations.
llvm::Expected<ProvenPlan> planAndProve(const Function &fn, llvm::ArrayRef<NodeCode> code,
                                        const ProvenPlanOptions &opts = {});

} // namespace fg::cuda
