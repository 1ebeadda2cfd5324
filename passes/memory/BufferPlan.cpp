//===- BufferPlan.cpp - liveness over the launch DAG, best-fit arena -------===//
#include "passes/memory/BufferPlan.h"

#include "ir/Diag.h"
#include "ir/OpViews.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/Support/MathExtras.h"

#include <algorithm>
#include <cassert>

namespace fg {

llvm::StringRef locationName(Location l) {
  switch (l) {
  case Location::None:
    return "none";
  case Location::Arena:
    return "arena";
  case Location::Weight:
    return "weight";
  case Location::State:
    return "state";
  }
  return "?";
}

bool BufferPlan::sameBuffer(const Placement &a, const Placement &b) {
  if (a.loc != b.loc || a.loc == Location::None)
    return false;
  return a.loc == Location::Arena || a.buffer == b.buffer;
}

bool BufferPlan::overlaps(const Placement &a, const Placement &b) {
  return sameBuffer(a, b) && a.size > 0 && b.size > 0 && a.offset < b.end() && b.offset < a.end();
}

namespace {

/// Bytes of one element, or 0 for block-quantised types (not addressable per element).
int64_t elementBytes(DType t) {
  const DTypeInfo &i = dtypeInfo(t);
  return i.blockElems == 1 ? i.blockBytes : 0;
}

bool isRowMajor(llvm::ArrayRef<int64_t> shape, llvm::ArrayRef<int64_t> strides) {
  Shape dense = contiguousStrides(shape);
  for (size_t d = 0; d < shape.size(); ++d)
    if (shape[d] != 1 && strides[d] != dense[d])
      return false;
  return true;
}

/// A value stored densely at the start of its own buffer range.
Placement densePlacement(Location loc, ValueId buffer, const TensorType &t) {
  Placement p;
  p.loc = loc;
  p.buffer = buffer;
  p.size = t.bytes();
  p.strides = contiguousStrides(t.shape);
  return p;
}

void markOpaque(Placement &p) {
  p.addressable = false;
  p.contiguous = false;
  p.strides.clear();
}

/// The placement of a view-like node's result, from its operand's.
Placement derivePlacement(const Function &fn, const Node &node, const Placement &base) {
  Placement p = base;
  const TensorType &in = fn.type(node.operands[0]);
  const TensorType &out = fn.type(node.result());
  int64_t eb = elementBytes(in.dtype);
  switch (node.kind) {
  case OpKind::Reshape:
    if (base.contiguous)
      p.strides = contiguousStrides(out.shape);
    else
      markOpaque(p);
    return p;
  case OpKind::Permute:
  case OpKind::Transpose: {
    if (!base.addressable || eb == 0) {
      markOpaque(p);
      return p;
    }
    Shape perm;
    if (node.kind == OpKind::Permute) {
      llvm::ArrayRef<int64_t> nodePerm = op::Permute(node).perm();
      perm.assign(nodePerm.begin(), nodePerm.end());
    } else {
      for (int64_t d = 0; d < in.rank(); ++d)
        perm.push_back(d);
      if (perm.size() >= 2)
        std::swap(perm[perm.size() - 1], perm[perm.size() - 2]);
    }
    for (size_t d = 0; d < perm.size(); ++d)
      p.strides[d] = base.strides[perm[d]];
    p.contiguous = isRowMajor(out.shape, p.strides);
    return p;
  }
  case OpKind::View: {
    if (!base.contiguous || eb == 0) {
      markOpaque(p); // element offsets count in a dense x_flat we cannot address
      return p;
    }
    llvm::ArrayRef<int64_t> strides = op::View(node).strides();
    int64_t elemOffset = op::View(node).offset();
    int64_t lo = elemOffset, hi = elemOffset;
    for (size_t d = 0; d < out.shape.size(); ++d) {
      int64_t span = (out.shape[d] - 1) * strides[d];
      (span < 0 ? lo : hi) += span;
    }
    p.dataOffset = base.dataOffset + elemOffset * eb;
    p.strides.assign(strides.begin(), strides.end());
    p.contiguous = isRowMajor(out.shape, strides);
    if (out.numElements() == 0) {
      p.offset = p.dataOffset;
      p.size = 0;
    } else {
      p.offset = base.dataOffset + lo * eb;
      p.size = (hi - lo + 1) * eb;
    }
    assert(p.offset >= base.offset && p.end() <= base.end() && "the view rule keeps views inside");
    return p;
  }
  default:
    assert(false && "not a view-like op");
    return p;
  }
}

/// One arena allocation: a storage root's bytes, or a node's scratch.
struct Alloc {
  ValueId owner = kNoValue; ///< kNoValue for scratch
  NodeId scratchNode = ~0u;
  int64_t size = 0;                       ///< aligned
  LaunchId def = kNoLaunch;               ///< the launch writing it (kNoLaunch: an input)
  llvm::SmallVector<LaunchId, 4> touches; ///< def and every reader
  bool pinned = false;
  int64_t offset = -1;
};

/// Whether every launch in `touches` happens-before `l` in the DAG.
bool allBefore(const LaunchDag &dag, llvm::ArrayRef<LaunchId> touches, LaunchId l) {
  return llvm::all_of(touches, [&](LaunchId t) { return dag.happensBefore(t, l); });
}

bool conflict(const LaunchDag &dag, const Alloc &a, const Alloc &b) {
  if (a.size == 0 || b.size == 0)
    return false;
  if (a.pinned || b.pinned)
    return true;
  return !allBefore(dag, a.touches, b.def) && !allBefore(dag, b.touches, a.def);
}

/// Best fit over intervals sorted by start: the smallest gap between them
/// that holds `size`, else the first offset above all of them.
int64_t bestFitSorted(llvm::ArrayRef<std::pair<int64_t, int64_t>> busy, int64_t size) {
  int64_t cursor = 0, best = -1, bestGap = 0;
  for (auto [start, end] : busy) {
    if (start > cursor) {
      int64_t gap = start - cursor;
      if (gap >= size && (best < 0 || gap < bestGap)) {
        best = cursor;
        bestGap = gap;
      }
    }
    cursor = std::max(cursor, end);
  }
  return best >= 0 ? best : cursor;
}

/// Best fit: the smallest gap between the conflicting intervals that holds
/// `size`, else the first offset above all of them. Only the union of the
/// intervals matters (gaps are between covered ranges).
int64_t bestFit(llvm::SmallVectorImpl<std::pair<int64_t, int64_t>> &busy, int64_t size) {
  llvm::sort(busy);
  return bestFitSorted(busy, size);
}

/// Adds [start, end) to `set`: sorted, disjoint, non-touching intervals.
void addToUnion(std::vector<std::pair<int64_t, int64_t>> &set, std::pair<int64_t, int64_t> r) {
  auto it = std::lower_bound(set.begin(), set.end(), r);
  if (it != set.begin() && std::prev(it)->second >= r.first)
    --it;
  auto last = it;
  while (last != set.end() && last->first <= r.second) {
    r.first = std::min(r.first, last->first);
    r.second = std::max(r.second, last->second);
    ++last;
  }
  it = set.erase(it, last);
  set.insert(it, r);
}

} // namespace

llvm::Expected<BufferPlan> planMemory(const Function &fn, const LaunchDag &dag,
                                      const MemoryPlanOptions &opts) {
  if (dag.numNodes() != fn.numNodes())
    return makeError("memory planning: the launch DAG was built from another function (" +
                     llvm::Twine(dag.numNodes()) + " nodes, @" + fn.name() + " has " +
                     llvm::Twine(fn.numNodes()) + ")");
  if (opts.alignment <= 0 || !llvm::isPowerOf2_64(opts.alignment))
    return makeError("memory planning: alignment " + llvm::Twine(opts.alignment) +
                     " is not a power of two");
  const int64_t align = opts.alignment;
  BufferPlan plan;
  plan.alignment = align;
  plan.values.assign(fn.numValues(), Placement{});
  plan.scratch.assign(fn.numNodes(), ScratchSlice{});

  std::vector<Alloc> allocs;
  std::vector<uint32_t> allocOf(fn.numValues(), ~0u);
  auto newAlloc = [&](ValueId owner, LaunchId def) {
    allocOf[owner] = static_cast<uint32_t>(allocs.size());
    Alloc a;
    a.owner = owner;
    a.size = llvm::alignTo(fn.type(owner).bytes(), align);
    a.def = def;
    if (def != kNoLaunch)
      a.touches.push_back(def);
    allocs.push_back(std::move(a));
  };

  // Arguments: weights and state in their own buffers; inputs pinned in the arena.
  for (const Argument &arg : fn.arguments()) {
    const TensorType &t = fn.type(arg.value);
    switch (arg.role) {
    case ArgRole::Weight:
      plan.values[arg.value] = densePlacement(Location::Weight, arg.value, t);
      break;
    case ArgRole::State:
      plan.values[arg.value] = densePlacement(Location::State, arg.value, t);
      break;
    case ArgRole::Input:
      plan.values[arg.value] = densePlacement(Location::Arena, arg.value, t);
      plan.values[arg.value].pinned = true;
      newAlloc(arg.value, kNoLaunch);
      allocs.back().pinned = true;
      break;
    }
  }

  // Node results, in program order (offsets of arena values relative to their
  // allocation for now), and the launches touching each allocation.
  for (NodeId n = 0; n < fn.numNodes(); ++n) {
    const Node &node = fn.node(n);
    const OpInfo &info = node.info();
    if (info.has(kViewLike)) {
      plan.values[node.result()] = derivePlacement(fn, node, plan.values[node.operands[0]]);
      continue;
    }
    LaunchId l = dag.launchOf(n);
    assert(l != kNoLaunch && "every non-view node launches");
    for (ValueId op : node.operands) {
      if (op == kNoValue)
        continue;
      const Placement &p = plan.values[op];
      if (p.loc == Location::None)
        return makeError("memory planning: " + valueLabel(fn, op) + " read by " +
                         llvm::Twine(mnemonic(node.kind)) + " has no storage");
      if (p.loc == Location::Arena)
        allocs[allocOf[p.buffer]].touches.push_back(l);
    }
    for (unsigned r = 0; r < node.results.size(); ++r) {
      ValueId v = node.results[r];
      if (r < info.numUpdatedStates()) {
        plan.values[v] = plan.values[node.operands[r]]; // in place: the same bytes
        plan.values[v].pinned = false;
        continue;
      }
      plan.values[v] = densePlacement(Location::Arena, v, fn.type(v));
      newAlloc(v, l);
    }
    int64_t scratch = opts.scratchBytes ? opts.scratchBytes(fn, n) : 0;
    if (scratch < 0)
      return makeError("memory planning: negative scratch size for " +
                       llvm::Twine(mnemonic(node.kind)) + " '" + valueLabel(fn, node.result()) +
                       "'");
    if (scratch > 0) {
      Alloc a;
      a.scratchNode = n;
      a.size = llvm::alignTo(scratch, align);
      a.def = l;
      a.touches.push_back(l);
      allocs.push_back(std::move(a));
      plan.scratch[n].size = scratch;
    }
  }
  for (ValueId r : fn.results()) {
    Placement &p = plan.values[r];
    if (p.loc != Location::Arena)
      continue; // a weight or state returned as is lives in its own buffer
    p.pinned = true;
    allocs[allocOf[p.buffer]].pinned = true;
  }
  // Allocations pinned (an updated arena value, or a view of a result) pin
  // every placement in them.
  for (Placement &p : plan.values)
    if (p.loc == Location::Arena && allocs[allocOf[p.buffer]].pinned)
      p.pinned = true;

  // Place: pinned first (they conflict with everything), then by definition.
  std::vector<uint32_t> order(allocs.size());
  for (uint32_t i = 0; i < allocs.size(); ++i)
    order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](uint32_t a, uint32_t b) {
    if (allocs[a].pinned != allocs[b].pinned)
      return allocs[a].pinned;
    return !allocs[a].pinned && allocs[a].def < allocs[b].def;
  });
  // Each allocation avoids the placed ones it conflicts with. Pinned ones
  // conflict with every allocation (of non-zero size), so their union is kept
  // once. An unpinned one placed earlier (smaller def) conflicts only while
  // one of its touches does not happen-before the new def; once all its
  // touches lie below the settled prefix of every later launch, it never
  // conflicts again and leaves the active list. Same offsets as checking
  // every placed allocation, in time linear for chains.
  const size_t numLaunches = dag.size();
  std::vector<LaunchId> settledFrom(numLaunches + 1, static_cast<LaunchId>(numLaunches));
  for (size_t l = numLaunches; l-- > 0;)
    settledFrom[l] = std::min(settledFrom[l + 1], dag.settledPrefix(static_cast<LaunchId>(l)));
  std::vector<std::pair<int64_t, int64_t>> pinnedUnion;
  std::vector<uint32_t> active;
  std::vector<LaunchId> lastTouch(allocs.size(), 0);
  for (uint32_t i = 0; i < allocs.size(); ++i)
    for (LaunchId t : allocs[i].touches)
      lastTouch[i] = std::max(lastTouch[i], t);
  llvm::SmallVector<std::pair<int64_t, int64_t>, 32> busy;
  for (uint32_t i : order) {
    Alloc &a = allocs[i];
    if (a.size == 0) {
      a.offset = 0;
    } else if (a.pinned) {
      a.offset = bestFitSorted(pinnedUnion, a.size);
      addToUnion(pinnedUnion, {a.offset, a.offset + a.size});
    } else {
      LaunchId settled = a.def < numLaunches ? settledFrom[a.def] : 0;
      llvm::erase_if(active, [&](uint32_t j) { return lastTouch[j] < settled; });
      busy.assign(pinnedUnion.begin(), pinnedUnion.end());
      for (uint32_t j : active)
        if (conflict(dag, a, allocs[j]))
          busy.push_back({allocs[j].offset, allocs[j].offset + allocs[j].size});
      a.offset = bestFit(busy, a.size);
      active.push_back(i);
    }
    plan.arenaBytes = std::max(plan.arenaBytes, a.offset + a.size);
    plan.unsharedBytes += a.size;
  }

  // Final offsets.
  for (Placement &p : plan.values) {
    if (p.loc != Location::Arena)
      continue;
    int64_t base = allocs[allocOf[p.buffer]].offset;
    p.offset += base;
    p.dataOffset += base;
  }
  for (const Alloc &a : allocs)
    if (a.owner == kNoValue)
      plan.scratch[a.scratchNode].offset = a.offset;

  // Peak over program order (launch ids are program order).
  std::vector<int64_t> delta(numLaunches + 1, 0);
  for (const Alloc &a : allocs) {
    if (numLaunches == 0)
      break;
    LaunchId first = a.pinned ? 0 : a.def;
    LaunchId last =
        a.pinned ? numLaunches - 1 : *std::max_element(a.touches.begin(), a.touches.end());
    delta[first] += a.size;
    delta[last + 1] -= a.size;
  }
  int64_t live = 0;
  for (size_t l = 0; l < numLaunches; ++l)
    plan.peakLiveBytes = std::max(plan.peakLiveBytes, live += delta[l]);
  if (numLaunches == 0) // only inputs returned as results
    for (const Alloc &a : allocs)
      plan.peakLiveBytes += a.size;
  return plan;
}

//===----------------------------------------------------------------------===//
// verifyNoOverlap: recomputes allocation units from the IR (storage roots)
//===----------------------------------------------------------------------===//

namespace {

struct Unit {
  std::string label;
  int64_t offset = 0, size = 0;
  llvm::SmallVector<LaunchId, 8> touches;
  bool pinned = false;
};

/// Whether every touch of `a` happens-before every touch of `b`.
bool allTouchesBefore(const LaunchDag &dag, const Unit &a, const Unit &b) {
  for (LaunchId x : a.touches)
    for (LaunchId y : b.touches)
      if (!dag.happensBefore(x, y))
        return false;
  return true;
}

} // namespace

llvm::Error verifyNoOverlap(const Function &fn, const BufferPlan &plan, const LaunchDag &dag) {
  if (plan.values.size() != fn.numValues() || dag.numNodes() != fn.numNodes())
    return makeError("verifyNoOverlap: plan or DAG do not belong to @" + fn.name());
  std::vector<std::string> problems;
  std::vector<Unit> units;
  std::vector<int> unitOf(fn.numValues(), -1);
  auto unitFor = [&](ValueId v) -> Unit * {
    if (plan.values[v].loc != Location::Arena)
      return nullptr;
    ValueId root = storageRoot(fn, v);
    if (unitOf[root] < 0) {
      unitOf[root] = static_cast<int>(units.size());
      Unit u;
      u.label = valueLabel(fn, root);
      u.offset = plan.values[root].offset;
      u.size = fn.type(root).bytes();
      u.pinned = fn.value(root).isArgument();
      units.push_back(std::move(u));
    }
    Unit &u = units[unitOf[root]];
    const Placement &p = plan.values[v];
    if (p.size > 0 && (p.offset < u.offset || p.end() > u.offset + u.size))
      problems.push_back(valueLabel(fn, v) + " lies outside its base " + u.label);
    return &u;
  };
  for (const Argument &a : fn.arguments())
    unitFor(a.value);
  for (NodeId n = 0; n < fn.numNodes(); ++n) {
    const Node &node = fn.node(n);
    LaunchId l = dag.launchOf(n);
    for (ValueId r : node.results)
      if (Unit *u = unitFor(r); u && l != kNoLaunch)
        u->touches.push_back(l);
    if (l == kNoLaunch)
      continue;
    for (ValueId op : node.operands)
      if (op != kNoValue)
        if (Unit *u = unitFor(op))
          u->touches.push_back(l);
    if (plan.scratch[n].size > 0) {
      Unit u;
      u.label = "scratch of " + valueLabel(fn, node.result());
      u.offset = plan.scratch[n].offset;
      u.size = plan.scratch[n].size;
      u.touches.push_back(l);
      units.push_back(std::move(u));
    }
  }
  for (ValueId r : fn.results())
    if (Unit *u = unitFor(r))
      u->pinned = true;

  for (const Unit &u : units) {
    if (u.offset % plan.alignment)
      problems.push_back(u.label + " at offset " + std::to_string(u.offset) + " is not aligned");
    if (u.offset < 0 || u.offset + u.size > plan.arenaBytes)
      problems.push_back(u.label + " lies outside the arena");
  }
  for (size_t i = 0; i < units.size(); ++i)
    for (size_t j = i + 1; j < units.size(); ++j) {
      const Unit &a = units[i], &b = units[j];
      if (a.size == 0 || b.size == 0 || a.offset >= b.offset + b.size ||
          b.offset >= a.offset + a.size)
        continue;
      if (!a.pinned && !b.pinned && (allTouchesBefore(dag, a, b) || allTouchesBefore(dag, b, a)))
        continue;
      problems.push_back(a.label + " (bytes [" + std::to_string(a.offset) + ", " +
                         std::to_string(a.offset + a.size) + ")) and " + b.label + " (bytes [" +
                         std::to_string(b.offset) + ", " + std::to_string(b.offset + b.size) +
                         ")) may be live at once but overlap");
    }
  if (problems.empty())
    return llvm::Error::success();
  std::string msg = "memory plan of @" + fn.name().str() + " is unsafe: ";
  for (size_t i = 0; i < problems.size() && i < 5; ++i)
    msg += (i ? "; " : "") + problems[i];
  if (problems.size() > 5)
    msg += "; and " + std::to_string(problems.size() - 5) + " more";
  return makeError(msg);
}

} // namespace fg
