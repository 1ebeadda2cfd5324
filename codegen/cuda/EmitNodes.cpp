//===- EmitNodes.cpp - every node's launches and scratch ------------------===//
#include "codegen/cuda/EmitNodes.h"

#include "codegen/cuda/CudaTarget.h"
#include "codegen/cuda/EmitterCommon.h"
#include "codegen/cuda/LowerError.h"
#include "passes/memory/LaunchDag.h"

namespace fg::cuda {

namespace {

/// The nodes whose results a one-token decode attention reads, directly or
/// through views (EmitOptions::pdlTriggerBeforeAttention).
std::vector<bool> feedsDecodeAttention(const Function &fn) {
  std::vector<bool> feeds(fn.numNodes(), false);
  for (NodeId id = fn.numNodes(); id-- > 0;) {
    const Node &n = fn.node(id);
    bool attn = ((n.kind == OpKind::Attention || n.kind == OpKind::FusedRopeAttention) &&
                 fn.type(n.operands[0]).shape[0] == 1) ||
                (n.kind == OpKind::FusedRopeKvAttention && fn.type(n.operands[2]).shape[0] == 1);
    // Views pass the mark on to what they view.
    if (!attn && !(n.info().has(kViewLike) && feeds[id]))
      continue;
    for (ValueId o : n.operands)
      if (!fn.value(o).isArgument())
        feeds[fn.value(o).def] = true;
  }
  return feeds;
}

/// The entry's wait, made to trigger first (common.cuh).
void triggerFirst(std::vector<Launch> &launches) {
  for (Launch &l : launches)
    if (auto *k = std::get_if<KernelSpec>(&l)) {
      if (!makeTriggerFirst(k->source))
        continue;
      // Another source, another name (modules are keyed by kernel names).
      detail::renameKernel(k->source, k->name, k->name + "_tf");
      k->name += "_tf";
    }
}

} // namespace

bool makeTriggerFirst(std::string &source) {
  const std::string plain = "\n  fg_pdl_begin();\n";
  size_t at = source.rfind(plain);
  if (at == std::string::npos)
    return false;
  source.replace(at, plain.size(), "\n  fg_pdl_begin_trigger_first();\n");
  return true;
}

llvm::Expected<std::vector<NodeCode>> emitNodes(const Function &fn, llvm::ArrayRef<Layout> layouts,
                                                const EmitOptions &options) {
  std::vector<NodeCode> code(fn.numNodes());
  std::vector<bool> feeds;
  if (options.pdlTriggerBeforeAttention)
    feeds = feedsDecodeAttention(fn);
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
    if (!feeds.empty() && feeds[id])
      triggerFirst(*launches);
    code[id].scratchBytes = scratchOf(*launches);
    code[id].launches = std::move(*launches);
  }
  return code;
}

} // namespace fg::cuda
