//===- OverlapProof.cpp - byte ranges written vs. read, per launch ---------===//
#include "passes/memory/OverlapProof.h"

#include "ir/Diag.h"

namespace fg {

bool mayAliasResult(const Function &fn, const Node &node, unsigned operand, unsigned result,
                    const Target *target) {
  // An in-place updater (set_rows and its fusions) writes operand i as its result i.
  if (operand == result && operand < node.info().numUpdatedStates())
    return true;
  // A kernel that reads the operand whole before writing (FUSIONS.md S4).
  return target && target->readsAllBeforeWrite(NodeDesc::of(fn, node), operand);
}

bool needsOverlapProof(const Node &node, const OverlapOptions &opts) {
  const OpInfo &info = node.info();
  if (info.has(kViewLike))
    return false; // launches nothing, writes nothing
  return opts.allLaunches || info.has(kUpdatesState) || info.has(kFused);
}

/// The node whose launch wrote the bytes `v` reads (views and in-place
/// updates followed), or kNoNode when they belong to an argument.
static NodeId producerOf(const Function &fn, ValueId v) {
  ValueId root = viewRoot(fn, v);
  return fn.value(root).isArgument() ? kNoNode : fn.value(root).def;
}

static std::string bytesStr(const Placement &p) {
  std::string where = p.loc == Location::Arena ? "" : std::string(locationName(p.loc)) + " ";
  return where + "bytes [" + std::to_string(p.offset) + ", " + std::to_string(p.end()) + ")";
}

std::vector<OverlapViolation> proveNoOverlap(const Function &fn, const BufferPlan &plan,
                                             const OverlapOptions &opts) {
  std::vector<OverlapViolation> out;
  for (NodeId n = 0; n < fn.numNodes(); ++n) {
    const Node &node = fn.node(n);
    if (!needsOverlapProof(node, opts))
      continue;
    for (unsigned r = 0; r < node.results.size(); ++r) {
      ValueId w = node.results[r];
      const Placement &wp = plan.values[w];
      for (unsigned i = 0; i < node.operands.size(); ++i) {
        ValueId op = node.operands[i];
        if (op == kNoValue || !BufferPlan::overlaps(wp, plan.values[op]))
          continue;
        if (mayAliasResult(fn, node, i, r, opts.target))
          continue;
        std::string reason = valueLabel(fn, op) + " (" + bytesStr(plan.values[op]) +
                             ") overlaps the write of " + valueLabel(fn, w) + " (" + bytesStr(wp) +
                             ")";
        if (wp.loc != Location::Arena)
          reason += " in " + valueLabel(fn, wp.buffer);
        out.push_back({n, w, i, op, producerOf(fn, op), std::move(reason)});
      }
      // Two results of one node must not overlap each other either.
      for (unsigned r2 = r + 1; r2 < node.results.size(); ++r2)
        if (BufferPlan::overlaps(wp, plan.values[node.results[r2]]))
          out.push_back({n, w, ~0u, node.results[r2], n,
                         valueLabel(fn, node.results[r2]) + " (" +
                             bytesStr(plan.values[node.results[r2]]) + ") overlaps the write of " +
                             valueLabel(fn, w) + " (" + bytesStr(wp) + ")"});
    }
  }
  return out;
}

llvm::Error checkNoOverlap(const Function &fn, const BufferPlan &plan, const OverlapOptions &opts) {
  std::vector<OverlapViolation> v = proveNoOverlap(fn, plan, opts);
  if (v.empty())
    return llvm::Error::success();
  std::string msg = "overlap proof of @" + fn.name().str() + " failed: ";
  for (size_t i = 0; i < v.size() && i < 5; ++i) {
    msg += (i ? "; " : "") + std::string(mnemonic(fn.node(v[i].node).kind)) + ": " + v[i].reason;
    msg += " (writer: " + nodeLabel(fn, v[i].node) + "; " +
           (v[i].producer == kNoNode
                ? "the bytes belong to argument " + valueLabel(fn, viewRoot(fn, v[i].read))
                : "the bytes were written by " + nodeLabel(fn, v[i].producer)) +
           ")";
  }
  if (v.size() > 5)
    msg += "; and " + std::to_string(v.size() - 5) + " more";
  return makeError(msg);
}

} // namespace fg
