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

std::vector<ValueId> viewRoots(const Function &fn) {
  std::vector<ValueId> root(fn.numValues(), kNoValue);
  llvm::SmallVector<ValueId, 8> path;
  for (ValueId v = 0; v < fn.numValues(); ++v) {
    ValueId r = v;
    path.clear();
    while (root[r] == kNoValue) {
      if (fn.value(r).def >= fn.numNodes())
        break; // an argument, or a value whose node was erased
      const Node *p = fn.producer(r);
      if (!p->info().has(kViewLike))
        break;
      path.push_back(r);
      r = p->operands[0];
    }
    r = root[r] != kNoValue ? root[r] : r;
    root[v] = r;
    for (ValueId x : path)
      root[x] = r;
  }
  return root;
}

ValueId storageRoot(const Function &fn, ValueId v) {
  while (const Node *p = fn.producer(v)) {
    ValueId next = p->info().has(kViewLike) ? p->operands[0] : fn.updatedOperand(v);
    if (next == kNoValue)
      break;
    v = next;
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
  const std::vector<ValueId> roots = viewRoots(fn);
  std::vector<LaunchId> updaterOf(fn.numValues(), kNoLaunch);
  for (LaunchId l = 0; l < dag.launches_.size(); ++l) {
    const Node &node = fn.node(dag.launches_[l].node);
    for (unsigned i = 0; i < node.info().numUpdatedStates() && i < node.operands.size(); ++i) {
      ValueId version = roots[node.operands[i]];
      if (updaterOf[version] == kNoLaunch || updaterOf[version] > l)
        updaterOf[version] = l; // two updaters of one version: order them (see WAR below)
    }
  }

  // Edges: RAW through values, WAR for updated versions.
  std::vector<llvm::SmallVector<LaunchId, 4>> preds(dag.launches_.size());
  for (LaunchId l = 0; l < dag.launches_.size(); ++l) {
    const Node &node = fn.node(dag.launches_[l].node);
    for (ValueId op : node.operands) {
      if (op == kNoValue)
        continue;
      ValueId root = roots[op];
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

  // Ancestor sets over the full edge set (ids are topological): the union of
  // each pred and its ancestors, as intervals, or as a bitset when the
  // intervals would take more memory than one.
  const size_t numLaunches = dag.launches_.size();
  const size_t denseAbove = std::max<size_t>(8, numLaunches / 64);
  dag.ancestors_.assign(numLaunches, {});
  dag.denseIndex_.assign(numLaunches, ~0u);
  std::vector<std::pair<LaunchId, LaunchId>> pieces;
  for (LaunchId l = 0; l < numLaunches; ++l) {
    llvm::sort(preds[l]);
    preds[l].erase(std::unique(preds[l].begin(), preds[l].end()), preds[l].end());
    pieces.clear();
    bool dense = false;
    for (LaunchId p : preds[l]) {
      assert(p < l && "edges point forward in program order");
      pieces.push_back({p, p});
      if (dag.denseIndex_[p] != ~0u)
        dense = true;
      else
        pieces.insert(pieces.end(), dag.ancestors_[p].begin(), dag.ancestors_[p].end());
    }
    llvm::sort(pieces);
    Intervals merged;
    for (auto [lo, hi] : pieces) {
      if (!merged.empty() && lo <= merged.back().second + 1)
        merged.back().second = std::max(merged.back().second, hi);
      else
        merged.push_back({lo, hi});
    }
    if (!dense && merged.size() <= denseAbove) {
      dag.ancestors_[l] = std::move(merged);
      continue;
    }
    llvm::BitVector bits(numLaunches);
    for (auto [lo, hi] : merged)
      bits.set(lo, hi + 1);
    for (LaunchId p : preds[l])
      if (dag.denseIndex_[p] != ~0u)
        bits |= dag.dense_[dag.denseIndex_[p]];
    dag.denseIndex_[l] = static_cast<uint32_t>(dag.dense_.size());
    dag.dense_.push_back(std::move(bits));
  }
  // Transitive reduction: drop p when another pred q already has p as ancestor.
  for (LaunchId l = 0; l < numLaunches; ++l) {
    LaunchNode &launch = dag.launches_[l];
    for (LaunchId p : preds[l]) {
      bool implied =
          llvm::any_of(preds[l], [&](LaunchId q) { return q != p && dag.happensBefore(p, q); });
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

  std::vector<unsigned> width(dag.numLevels_, 0);
  for (const LaunchNode &launch : dag.launches_)
    dag.maxWidth_ = std::max(dag.maxWidth_, ++width[launch.level]);
  return dag;
}

bool LaunchDag::happensBefore(LaunchId a, LaunchId b) const {
  if (a >= b)
    return false; // ids are topological
  if (denseIndex_[b] != ~0u)
    return dense_[denseIndex_[b]].test(a);
  const Intervals &iv = ancestors_[b];
  auto it = std::upper_bound(
      iv.begin(), iv.end(), a,
      [](LaunchId x, const std::pair<LaunchId, LaunchId> &r) { return x < r.first; });
  return it != iv.begin() && a <= std::prev(it)->second;
}

LaunchId LaunchDag::settledPrefix(LaunchId l) const {
  if (denseIndex_[l] != ~0u) {
    int first = dense_[denseIndex_[l]].find_first_unset();
    return first < 0 ? static_cast<LaunchId>(launches_.size()) : static_cast<LaunchId>(first);
  }
  const Intervals &iv = ancestors_[l];
  return !iv.empty() && iv.front().first == 0 ? iv.front().second + 1 : 0;
}

} // namespace fg
