//===- EmitNodes.h - every node's launches and scratch -------------*- C++ -*-===//
//
// Lowering, step 2: each launching node is emitted (Kernel.h emitKernel) with
// the layouts its operands are read through; the largest scratchBytes of its
// launches is the node's one scratch buffer. The memory plan takes exactly
// these sizes, so the plan proven is the plan of the emitted kernels.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "codegen/cuda/Kernel.h"

#include "llvm/Support/Error.h"

#include <vector>

namespace fg::cuda {

/// What one node was emitted as.
struct NodeCode {
  std::vector<Launch> launches; ///< empty for view-like nodes
  uint64_t scratchBytes = 0;    ///< the largest scratchBytes of `launches`
};

/// One NodeCode per node of `fn` (indexed by NodeId); an error located at the
/// first node the emitters refuse.
/// Makes an entry's programmatic-launch wait trigger its dependents first
/// (common.cuh, fg_pdl_begin_trigger_first); false where the source has no
/// plain fg_pdl_begin(). The caller renames the kernel (another source).
bool makeTriggerFirst(std::string &source);

llvm::Expected<std::vector<NodeCode>> emitNodes(const Function &fn, llvm::ArrayRef<Layout> layouts,
                                                const EmitOptions &options);

} // namespace fg::cuda
