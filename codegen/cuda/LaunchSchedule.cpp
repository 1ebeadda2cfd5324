//===- LaunchSchedule.cpp - launch records of one entry -------------------===//
#include "codegen/cuda/LaunchSchedule.h"

#include "ir/Diag.h"
#include "runtime/WorkspaceSlots.h"

#include "llvm/ADT/STLExtras.h"

namespace fg::cuda {

uint32_t SlotTables::slot(const Function &fn, const Argument &a) {
  const Value &v = fn.value(a.value);
  auto &index = a.role == ArgRole::Weight ? weightIndex_ : stateIndex_;
  auto &list = a.role == ArgRole::Weight ? prog_.weights : prog_.state;
  auto it = index.find(v.name);
  if (it != index.end())
    return it->second;
  uint32_t i = static_cast<uint32_t>(list.size());
  list.push_back({v.name, v.type, a.init, {}});
  index[v.name] = i;
  return i;
}

uint64_t SlotTables::counters(uint64_t bytes) {
  uint64_t at = (prog_.counterBytes + 255) / 256 * 256;
  prog_.counterBytes = at + bytes;
  return at;
}

bool SlotTables::weightsAdjoin(const BufferRef &a, uint64_t aBytes, const BufferRef &b) const {
  if (a.space != BufferSpace::Weight || b.space != BufferSpace::Weight || b.offset != 0 ||
      !weightFollows(prog_.weights, a.index, b.index))
    return false;
  return a.offset + aBytes == static_cast<uint64_t>(prog_.weights[a.index].type.bytes());
}

uint64_t SlotTables::statusMirror() {
  if (!statusMirror_)
    statusMirror_ = counters(kStatusBytes);
  return *statusMirror_;
}

uint64_t SlotTables::sampleParams() {
  if (!sampleParams_)
    sampleParams_ = counters(sizeof(DeviceSampleParams));
  return *sampleParams_;
}

llvm::Expected<BufferRef> bufferOfValue(const Function &fn, const ProvenPlan &proven,
                                        SlotTables &tables, ValueId v) {
  ValueId root = storageRoot(fn, v);
  if (const Argument *a = fn.argumentOf(root)) {
    if (a->role == ArgRole::Weight)
      return BufferRef{BufferSpace::Weight, tables.slot(fn, *a), 0};
    if (a->role == ArgRole::State)
      return BufferRef{BufferSpace::State, tables.slot(fn, *a), 0};
  }
  const Placement &p = proven.plan.at(root);
  if (p.loc != Location::Arena)
    return makeError("internal: " + valueLabel(fn, v) + " has no arena placement");
  return BufferRef{BufferSpace::Arena, 0, static_cast<uint64_t>(p.offset)};
}

std::optional<ArenaRange> arenaRangeOf(const Function &fn, const ProvenPlan &proven,
                                       SlotTables &tables, ValueId v) {
  llvm::Expected<BufferRef> ref = bufferOfValue(fn, proven, tables, v);
  if (!ref) {
    llvm::consumeError(ref.takeError());
    return ArenaRange{0, ~uint64_t(0)}; // unknown: overlaps everything
  }
  if (ref->space != BufferSpace::Arena)
    return std::nullopt;
  const uint64_t bytes = static_cast<uint64_t>(fn.type(storageRoot(fn, v)).bytes());
  return ArenaRange{ref->offset, ref->offset + bytes};
}

void dropMergedLaunches(CompiledEntry &entry, KernelSources &sources,
                        llvm::ArrayRef<uint32_t> into) {
  std::vector<LaunchRecord> &recs = entry.launches;
  std::vector<size_t> &sourceOf = sources.sourceOfLaunch.back();
  const size_t n = recs.size();
  auto hostOf = [&](uint32_t j) { return into[j]; };
  // The hosts take their merged launches' dependencies.
  for (uint32_t j = 0; j < n; ++j)
    if (hostOf(j) != j)
      for (uint32_t d : recs[j].deps)
        recs[hostOf(j)].deps.push_back(d);
  std::vector<uint32_t> newIndex(n);
  std::vector<LaunchRecord> kept;
  std::vector<size_t> keptSources;
  for (uint32_t j = 0; j < n; ++j) {
    newIndex[j] = static_cast<uint32_t>(kept.size());
    if (hostOf(j) != j)
      continue;
    kept.push_back(std::move(recs[j]));
    keptSources.push_back(sourceOf[j]);
  }
  for (uint32_t k = 0; k < kept.size(); ++k) {
    LaunchRecord &r = kept[k];
    for (uint32_t &d : r.deps)
      d = newIndex[hostOf(d)];
    llvm::sort(r.deps);
    r.deps.erase(std::unique(r.deps.begin(), r.deps.end()), r.deps.end());
    llvm::erase_value(r.deps, k); // a host does not wait for itself
  }
  // The removed launches' sources go (nothing compiles a kernel no launch
  // runs): this entry's sources are the last ones, so only its indices move.
  std::vector<size_t> dropped;
  for (uint32_t j = 0; j < n; ++j)
    if (hostOf(j) != j && sourceOf[j] != ~size_t(0)) // a cuBLAS call has no source
      dropped.push_back(sourceOf[j]);
  llvm::sort(dropped);
  for (size_t &x : keptSources)
    if (x != ~size_t(0))
      x -= static_cast<size_t>(std::lower_bound(dropped.begin(), dropped.end(), x) -
                               dropped.begin());
  for (auto it = dropped.rbegin(); it != dropped.rend(); ++it)
    sources.sources.erase(sources.sources.begin() + static_cast<std::ptrdiff_t>(*it));
  recs = std::move(kept);
  sourceOf = std::move(keptSources);
}

namespace {

class Scheduler {
public:
  Scheduler(const Function &fn, const ProvenPlan &proven, SlotTables &tables)
      : fn_(fn), proven_(proven), tables_(tables) {}

  llvm::Expected<BufferRef> bufferOf(ValueId v) { return bufferOfValue(fn_, proven_, tables_, v); }

  /// `counters`: this launch's range in the program's counters.
  llvm::Expected<BufferRef> resolve(NodeId id, const Param &p, uint64_t counters = 0) {
    const Node &n = fn_.node(id);
    switch (p.kind) {
    case Param::Kind::Operand:
      return bufferOf(n.operands[p.index]);
    case Param::Kind::Result:
      return bufferOf(n.results[p.index]);
    case Param::Kind::Scratch:
      return BufferRef{BufferSpace::Arena, 0,
                       static_cast<uint64_t>(proven_.plan.scratch[id].offset)};
    case Param::Kind::Counters:
      return BufferRef{BufferSpace::Counters, 0, counters};
    }
    return makeError("bad param");
  }

private:
  const Function &fn_;
  const ProvenPlan &proven_;
  SlotTables &tables_;
};

llvm::Error fillGemm(Scheduler &s, NodeId id, const CublasGemmSpec &g, GemmDesc &d) {
  static_cast<GemmShape &>(d) = g;
  // The Lt form reads C (the residual) and writes D (the result); the plain
  // form's C is its result.
  std::vector<std::pair<const GemmOperand *, BufferRef *>> refs = {
      {&g.a, &d.a}, {&g.b, &d.b}, {&g.c, &d.c}};
  if (g.lt)
    refs.push_back({&g.d, &d.d});
  for (auto [from, to] : refs) {
    llvm::Expected<BufferRef> ref = s.resolve(id, from->param);
    if (!ref)
      return ref.takeError();
    *to = *ref;
    to->offset += from->byteOffset;
  }
  return llvm::Error::success();
}

} // namespace

llvm::Error scheduleLaunches(const Function &fn, llvm::ArrayRef<Layout> layouts,
                             llvm::ArrayRef<NodeCode> code, const ProvenPlan &proven,
                             SlotTables &tables, KernelSources &sources, CompiledEntry &out,
                             unsigned workspaceSlots) {
  Scheduler s(fn, proven, tables);
  const LaunchDag &dag = proven.dag;
  out.name = fn.name().str();
  out.arenaBytes = static_cast<uint64_t>(proven.plan.arenaBytes);
  out.peakLiveBytes = static_cast<uint64_t>(proven.plan.peakLiveBytes);
  sources.sourceOfLaunch.emplace_back();
  std::vector<size_t> &sourceOfLaunch = sources.sourceOfLaunch.back();

  // Inputs and outputs.
  for (const Argument &a : fn.arguments()) {
    if (a.role != ArgRole::Input)
      continue;
    llvm::Expected<BufferRef> where = s.bufferOf(a.value);
    if (!where)
      return where.takeError();
    out.inputs.push_back({fn.value(a.value).name, fn.type(a.value), *where, a.bind});
  }
  for (ValueId r : fn.results()) {
    if (!layouts[r].isContiguous() || fn.argumentOf(storageRoot(fn, r)))
      return makeError("@" + fn.name() + ": result " + valueLabel(fn, r) +
                       " must be a dense computed value (add a cont)");
    llvm::Expected<BufferRef> where = s.bufferOf(r);
    if (!where)
      return where.takeError();
    out.outputs.push_back({fn.value(r).name, fn.type(r), *where, {}});
  }

  std::vector<int64_t> lastRecordOfLaunch(dag.launches().size(), -1);
  for (LaunchId lid = 0; lid < dag.launches().size(); ++lid) {
    const LaunchNode &ln = dag.launch(lid);
    const Node &n = fn.node(ln.node);
    const NodeCode &nc = code[ln.node];
    std::vector<uint32_t> deps;
    for (LaunchId p : ln.preds)
      if (lastRecordOfLaunch[p] >= 0)
        deps.push_back(static_cast<uint32_t>(lastRecordOfLaunch[p]));
    for (const Launch &launch : nc.launches) {
      LaunchRecord rec;
      rec.node = ln.node;
      rec.op = n.kind;
      rec.what = nodeLabel(fn, ln.node);
      rec.deps = deps;
      if (const auto *ks = std::get_if<KernelSpec>(&launch)) {
        rec.kind = LaunchRecord::Kind::Kernel;
        rec.symbol = ks->name;
        for (int d = 0; d < 3; ++d) {
          rec.grid[d] = ks->grid[d];
          rec.block[d] = ks->block[d];
        }
        rec.sharedBytes = ks->sharedBytes;
        rec.actQuant = ks->actQuant;
        uint64_t counters = ks->counterBytes ? tables.counters(ks->counterBytes) : 0;
        for (const Param &p : ks->params) {
          if (p.kind == Param::Kind::Counters && !ks->counterBytes)
            return makeError("internal: " + nodeLabel(fn, ln.node) +
                             " takes counters but reports none");
          llvm::Expected<BufferRef> ref = s.resolve(ln.node, p, counters);
          if (!ref)
            return ref.takeError();
          rec.args.push_back(*ref);
        }
        // Modules are numbered after all entries are lowered.
        sourceOfLaunch.push_back(sources.sources.size());
        sources.sources.emplace_back(ks->name, ks->source);
      } else {
        rec.kind = LaunchRecord::Kind::Gemm;
        const CublasGemmSpec &spec = std::get<CublasGemmSpec>(launch);
        // A stacked over two weights: whether they adjoin depends on their
        // slots, which follow the graph's weight arguments (Lower.cpp
        // declares them all, in order, before any launch): the decoder
        // blocks declare a layer's ffn_gate right before its ffn_up.
        BufferRef a2;
        if (spec.stackRows > 0) {
          llvm::Expected<BufferRef> r = s.resolve(ln.node, spec.a2.param);
          if (!r)
            return r.takeError();
          a2 = *r;
          a2.offset += spec.a2.byteOffset;
        }
        if (llvm::Error e = fillGemm(s, ln.node, spec, rec.gemm))
          return e;
        sourceOfLaunch.push_back(~size_t(0));
        if (spec.stackRows > 0) {
          // One GEMM where the second weight follows the first in the
          // runner's weight allocation, else two (CublasGemmSpec).
          const uint64_t elem = static_cast<uint64_t>(storageBytes(spec.aType, 1));
          const uint64_t firstBytes = static_cast<uint64_t>(spec.stackRows * spec.lda) * elem;
          if (spec.transA && spec.lda == spec.k &&
              tables.weightsAdjoin(rec.gemm.a, firstBytes, a2)) {
            rec.what += " [gate|up stacked]";
          } else {
            LaunchRecord second = rec;
            rec.gemm.m = spec.stackRows;
            second.gemm.m = spec.m - spec.stackRows;
            second.gemm.a = a2;
            second.what += " [up]";
            second.gemm.c.offset +=
                static_cast<uint64_t>(spec.stackRows) *
                static_cast<uint64_t>(storageBytes(spec.cType, 1));
            out.launches.push_back(std::move(rec));
            second.deps = {static_cast<uint32_t>(out.launches.size() - 1)};
            rec = std::move(second);
            sourceOfLaunch.push_back(~size_t(0));
          }
        }
      }
      out.launches.push_back(std::move(rec));
      deps = {static_cast<uint32_t>(out.launches.size() - 1)};
    }
    if (!nc.launches.empty())
      lastRecordOfLaunch[lid] = static_cast<int64_t>(out.launches.size() - 1);
    else if (!ln.preds.empty())
      // A node without launches (cannot happen for launching nodes) forwards deps.
      lastRecordOfLaunch[lid] = deps.empty() ? -1 : deps.front();
  }
  // cuBLAS calls that may run at the same time take different workspaces
  // (runtime/WorkspaceSlots.h); an edge only where the slots run out.
  if (auto slots = assignWorkspaceSlots(out.launches, workspaceSlots, /*addEdges=*/true); !slots)
    return slots.takeError();
  return llvm::Error::success();
}

} // namespace fg::cuda
