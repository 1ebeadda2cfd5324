//===- EmitNodes.cpp - every node's launches and scratch ------------------===//
#include "codegen/cuda/EmitNodes.h"

#include "codegen/cuda/CudaTarget.h"
#include "codegen/cuda/LowerError.h"
#include "passes/memory/LaunchDag.h"

namespace fg::cuda {

llvm::Expected<std::vector<NodeCode>> emitNodes(const Function &fn, llvm::ArrayRef<Layout> layouts,
                                                const EmitOptions &options) {
  std::vector<NodeCode> code(fn.numNodes());
  for (NodeId id = 0; id < fn.numNodes(); ++id) {
    const Node &n = fn.node(id);
    if (!launchesWork(n))
      continue;
    std::vector<Layout> operandLayouts;
    for (ValueId o : n.operands)
      operandLayouts.push_back(layouts[o]);
    llvm::Expected<std::vector<Launch>> launches = emitKernel(fn, n, operandLayouts, options);
    if (!launches)
      return nodeError(fn, n, llvm::toString(launches.takeError()));
    code[id].scratchBytes = scratchOf(*launches);
    code[id].launches = std::move(*launches);
  }
  return code;
}

} // namespace fg::cuda
