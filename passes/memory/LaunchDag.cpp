//===- LaunchDag.cpp - launches and their dependency edges -----------------===//
#include "passes/memory/LaunchDag.h"

#include "ir/Diag.h"

#include "llvm/ADT/STLExtras.h"

#include <algorithm>
#include <cassert>

namespace fg {

bool launchesWork(const Node &n) { return !n.info().has(kViewLike); }

ValueId viewRoot(const Function &fn, ValueId v) {
  while (const Node *p = fn.producer(v)) {
    if (!p->info().has(kViewLike))
      break;
    v = p->operands[0];
  }
  return v;
}

ValueId storageRoot(const Function &fn, ValueId v) {
  while (const Node *p = fn.producer(v)) {
    if (!p->info().has(kViewLike) && !p->info().has(kUpdatesState))
      break;
    v = p->operands[0];
  }
  return v;
}

std::string valueLabel(const Function &fn, ValueId v) {
  const std::string &name = fn.value(v).name;
  return name.empty() ? "%v" + std::to_string(v) : "%" + name;
}

std::string nodeLabel(const Function &fn, NodeId id) {
  const Node &n = fn.node(id);
  std::string s;
  for (size_t r = 0; r < n.results.size(); ++r)
    s += (r ? ", " : "") + valueLabel(fn, n.results[r]);
  s += " = " + std::string(n.info().mnemonic);
  if (n.loc.valid())
    s += " (line " + std::to_string(n.loc.line) + ")";
  return s;
}

llvm::Expected<LaunchDag> LaunchDag::build(const Function &fn) {
  LaunchDag dag;
  const size_t numNodes = fn.numNodes();
  dag.launchOfNode_.assign(numNodes, kNoLaunch);
  dag.producer_.assign(fn.numValues(), kNoLaunch);

  for (NodeId n = 0; n < numNodes; ++n) {
    const Node &node = fn.node(n);
    if (!launchesWork(node))
      continue;
    dag.launchOfNode_[n] = static_cast<LaunchId>(dag.launches_.size());
    dag.launches_.push_back(LaunchNode{n, {}, {}, 0});
  }
  // Who writes the bytes each value reads: its launch, or for a view the
  // producer of its operand (program order: operands come first).
  for (NodeId n = 0; n < numNodes; ++n) {
    const Node &node = fn.node(n);
    for (ValueId r : node.results)
      dag.producer_[r] =
          launchesWork(node) ? dag.launchOfNode_[n] : dag.producer_[node.operands[0]];
  }

  // The value each updater consumes (after views), and which launch updates it.
  std::vector<LaunchId> updaterOf(fn.numValues(), kNoLaunch);
  for (LaunchId l = 0; l < dag.launches_.size(); ++l) {
    const Node &node = fn.node(dag.launches_[l].node);
    if (!node.info().has(kUpdatesState) || node.operands.empty())
      continue;
    ValueId version = viewRoot(fn, node.operands[0]);
    if (updaterOf[version] == kNoLaunch || updaterOf[version] > l)
      updaterOf[version] = l; // two updaters of one version: order them (see WAR below)
  }

  // Edges: RAW through values, WAR for updated versions.
  std::vector<llvm::SmallVector<LaunchId, 4>> preds(dag.launches_.size());
  for (LaunchId l = 0; l < dag.launches_.size(); ++l) {
    const Node &node = fn.node(dag.launches_[l].node);
    for (ValueId op : node.operands) {
      if (op == kNoValue)
        continue;
      ValueId root = viewRoot(fn, op);
      LaunchId p = dag.producer_[root];
      if (p != kNoLaunch && p != l) {
        assert(p < l && "program order is a topological order");
        preds[l].push_back(p);
      }
      LaunchId u = updaterOf[root];
      if (u == kNoLaunch || u == l)
        continue;
      if (u < l) {
        // Reading an old version after its update (or a second updater of it).
        const Node &upd = fn.node(dag.launches_[u].node);
        return makeError(llvm::Twine(mnemonic(node.kind)) + " '" +
                         valueLabel(fn, node.results.empty() ? op : node.result()) + "' reads " +
                         valueLabel(fn, root) + " after its in-place update by '" +
                         valueLabel(fn, upd.result()) + "'; state versions must be linear");
      }
      preds[u].push_back(l); // write-after-read: the updater waits for this reader
    }
  }

  // Ancestor bitsets over the full edge set (ids are topological).
  const size_t numLaunches = dag.launches_.size();
  dag.ancestors_.assign(numLaunches, llvm::BitVector(numLaunches));
  for (LaunchId l = 0; l < numLaunches; ++l) {
    llvm::sort(preds[l]);
    preds[l].erase(std::unique(preds[l].begin(), preds[l].end()), preds[l].end());
    for (LaunchId p : preds[l]) {
      assert(p < l && "edges point forward in program order");
      dag.ancestors_[l] |= dag.ancestors_[p];
      dag.ancestors_[l].set(p);
    }
  }
  // Transitive reduction: drop p when another pred q already has p as ancestor.
  for (LaunchId l = 0; l < numLaunches; ++l) {
    LaunchNode &launch = dag.launches_[l];
    for (LaunchId p : preds[l]) {
      bool implied =
          llvm::any_of(preds[l], [&](LaunchId q) { return q != p && dag.ancestors_[q].test(p); });
      if (!implied)
        launch.preds.push_back(p);
    }
    dag.numEdges_ += launch.preds.size();
    for (LaunchId p : launch.preds) {
      dag.launches_[p].succs.push_back(l);
      launch.level = std::max(launch.level, dag.launches_[p].level + 1);
    }
    dag.numLevels_ = std::max(dag.numLevels_, launch.level + 1);
  }

  dag.levelOrder_.resize(numLaunches);
  for (LaunchId l = 0; l < numLaunches; ++l)
    dag.levelOrder_[l] = l;
  std::stable_sort(dag.levelOrder_.begin(), dag.levelOrder_.end(), [&](LaunchId a, LaunchId b) {
    return dag.launches_[a].level < dag.launches_[b].level;
  });
  std::vector<unsigned> width(dag.numLevels_, 0);
  for (const LaunchNode &launch : dag.launches_)
    dag.maxWidth_ = std::max(dag.maxWidth_, ++width[launch.level]);
  return dag;
}

} // namespace fg
