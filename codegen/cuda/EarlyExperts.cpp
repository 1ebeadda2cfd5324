//===- EarlyExperts.cpp - an expert launch reads its experts before its wait -===//
#include "codegen/cuda/EarlyExperts.h"

#include "codegen/cuda/EmitterCommon.h"
#include "codegen/cuda/KernelSources.h"
#include "passes/memory/LaunchDag.h"

#include "llvm/ADT/BitVector.h"

namespace fg::cuda {

namespace {

using Range = std::pair<uint64_t, uint64_t>;

bool overlaps(const Range &a, const Range &b) { return a.first < b.second && b.first < a.second; }

/// The arena bytes launch `l` may write: its node's results, or everything
/// where it also runs other nodes' work (a merged launch: "+" in its label)
/// or computes no node.
std::vector<Range> mayWrite(const Function &fn, const ProvenPlan &proven, SlotTables &tables,
                            const LaunchRecord &l) {
  if (l.node == kNoNode || l.what.find("+ ") != std::string::npos)
    return {Range{0, ~uint64_t(0)}};
  std::vector<Range> out;
  for (ValueId r : fn.node(l.node).results)
    if (auto range = arenaRangeOf(fn, proven, tables, r))
      out.push_back(*range);
  return out;
}

} // namespace

llvm::Expected<unsigned> markEarlyExperts(const Function &fn, const ProvenPlan &proven,
                                          SlotTables &tables, KernelSources &sources,
                                          CompiledEntry &entry) {
  std::vector<LaunchRecord> &recs = entry.launches;
  std::vector<size_t> &sourceOf = sources.sourceOfLaunch.back();
  const size_t n = recs.size();
  // Strict ancestors (deps point to earlier launches).
  std::vector<llvm::BitVector> anc(n, llvm::BitVector(n));
  for (size_t i = 0; i < n; ++i)
    for (uint32_t d : recs[i].deps) {
      anc[i].set(d);
      anc[i] |= anc[d];
    }
  std::vector<std::vector<Range>> writes;
  unsigned marked = 0;
  for (size_t d = 0; d < n; ++d) {
    LaunchRecord &dr = recs[d];
    if (dr.kind != LaunchRecord::Kind::Kernel || dr.node == kNoNode ||
        dr.op != OpKind::FusedMatmulIdSumAdd || dr.what.find("+ ") != std::string::npos)
      continue;
    std::string &src = sources.sources[sourceOf[d]].second;
    const size_t at = src.find(kEarlyIdsOff);
    if (at == std::string::npos || src.find(kEarlyIdsOff, at + 1) != std::string::npos)
      continue;
    // F: finished whenever D starts. Every direct predecessor must trigger
    // after its wait.
    llvm::BitVector finished(n);
    bool ok = true;
    for (uint32_t p : dr.deps) {
      const LaunchRecord &pr = recs[p];
      if (pr.kind == LaunchRecord::Kind::Kernel &&
          sources.sources[sourceOf[p]].second.find("fg_pdl_begin_trigger_first();") !=
              std::string::npos)
        ok = false;
      finished |= anc[p];
    }
    if (!ok)
      continue;
    // The ids and the routing weights: arena values made by launches.
    const Node &dn = fn.node(dr.node);
    std::vector<Range> read;
    for (ValueId v : {dn.operands[2], dn.operands[3]}) {
      if (fn.producer(storageRoot(fn, v)) == nullptr) { // a graph input or weight
        ok = false;
        break;
      }
      if (auto r = arenaRangeOf(fn, proven, tables, v))
        read.push_back(*r);
      else
        ok = false;
    }
    if (!ok)
      continue;
    if (writes.empty())
      for (const LaunchRecord &l : recs)
        writes.push_back(mayWrite(fn, proven, tables, l));
    for (size_t l = 0; l < n && ok; ++l) {
      if (l == d || finished.test(l) || (l > d && anc[l].test(d)))
        continue;
      for (const Range &w : writes[l])
        for (const Range &r : read)
          ok = ok && !overlaps(w, r);
    }
    if (!ok)
      continue;
    src.replace(at, std::string(kEarlyIdsOff).size(), kEarlyIdsOn);
    dr.symbol = detail::renameRewritten(src, dr.symbol);
    sources.sources[sourceOf[d]].first = dr.symbol;
    dr.what += " (experts read before the wait)";
    ++marked;
  }
  return marked;
}

} // namespace fg::cuda
