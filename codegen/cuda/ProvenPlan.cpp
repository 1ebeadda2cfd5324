//===- ProvenPlan.cpp - the memory plan that ships, proven ----------------===//
#include "codegen/cuda/ProvenPlan.h"

#include "ir/Diag.h"
#include "passes/memory/OverlapProof.h"

namespace fg::cuda {

llvm::Expected<ProvenPlan> planAndProve(const Function &fn, llvm::ArrayRef<NodeCode> code,
                                        const ProvenPlanOptions &opts) {
  assert(code.size() == fn.numNodes() && "one NodeCode per node");
  llvm::Expected<LaunchDag> dag = LaunchDag::build(fn);
  if (!dag)
    return dag.takeError();
  MemoryPlanOptions mopts;
  mopts.scratchBytes = [code](const Function &, NodeId n) {
    return static_cast<int64_t>(code[n].scratchBytes);
  };
  llvm::Expected<BufferPlan> plan = planMemory(fn, *dag, mopts);
  if (!plan)
    return plan.takeError();
  if (opts.testHook)
    opts.testHook(fn, *plan);

  OverlapOptions proof;
  proof.allLaunches = true; // every launch, not only fused and in-place ones
  proof.target = opts.target;
  if (llvm::Error e = checkNoOverlap(fn, *plan, proof))
    return makeError("the memory plan of @" + fn.name() +
                     " is not safe: " + llvm::toString(std::move(e)));
  if (llvm::Error e = verifyNoOverlap(fn, *plan, *dag))
    return makeError("the memory plan of @" + fn.name() +
                     " is not safe: " + llvm::toString(std::move(e)));
  return ProvenPlan{std::move(*dag), std::move(*plan)};
}

} // namespace fg::cuda
