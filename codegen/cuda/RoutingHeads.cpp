//===- RoutingHeads.cpp - one token's MoE routing in the expert GEMV's blocks -===//
#include "codegen/cuda/RoutingHeads.h"

#include "codegen/cuda/EmitterCommon.h"
#include "codegen/cuda/KernelSources.h"
#include "ir/Diag.h"
#include "passes/memory/LaunchDag.h"

#include <algorithm>
#include <numeric>

namespace fg::cuda {

namespace {

using Range = ArenaRange;

/// The expert GEMV kernels whose entry reads its experts through a parameter
/// `ids` (gemv.cuh, gemv_dp4a.cuh: a.ids[ids_off + tok * ids_st + j * ids_sj]).
bool readsIdsParam(const KernelSpec &k) {
  const size_t entry = k.source.rfind("extern \"C\" __global__");
  return entry != std::string::npos &&
         k.source.find("::Ids* ids", entry) != std::string::npos &&
         (k.source.find("fg::gemv<", entry) != std::string::npos ||
          k.source.find("fg::gemvDp4a<", entry) != std::string::npos);
}

/// The topk kernel's configuration struct (FusedRowEmitter, emitTopkMoe),
/// renamed FgHead, with kRanksLogits (EmitOptions::routingHeadRanksLogits).
std::optional<std::string> headCfg(const std::string &topkSource, bool ranksLogits) {
  const size_t entry = topkSource.rfind("extern \"C\" __global__");
  const size_t at = topkSource.rfind("struct Cfg {\n", entry);
  if (entry == std::string::npos || at == std::string::npos)
    return std::nullopt;
  return "struct FgHead {\n  static constexpr bool kRanksLogits = " +
         std::string(ranksLogits ? "true" : "false") + ";\n" +
         topkSource.substr(at + 13, entry - at - 13);
}

/// `host`'s source with the routing at the start of its body: topk.cuh and
/// FgHead before its entry, the topk launch's pointers after its parameters,
/// and after its wait the routing, whose ids replace the parameter.
std::optional<std::string> mergedSource(const std::string &host, const std::string &cfg,
                                        bool bias) {
  return spliceRoutingHead(host, cfg,
                           ", int* fg_h_ids, float* fg_h_w" + routingHeadParams(bias),
                           "  ids = fg::topkHead<FgHead>(fg_h_logits, " +
                               std::string(bias ? "fg_h_bias" : "nullptr") +
                               ", fg_h_ids, fg_h_w);\n",
                           /*beforeWait=*/false);
}

} // namespace

std::string routingHeadParams(bool bias) {
  return ", const FgHead::Logit* fg_h_logits" +
         std::string(bias ? ", const FgHead::Bias* fg_h_bias" : "");
}

std::optional<std::string> spliceRoutingHead(const std::string &src, const std::string &cfg,
                                             llvm::StringRef params, llvm::StringRef code,
                                             bool beforeWait) {
  const size_t entry = src.rfind("extern \"C\" __global__");
  const size_t open = entry == std::string::npos ? entry : src.find(") {\n", entry);
  if (open == std::string::npos)
    return std::nullopt;
  size_t at = open + 4; // the body's first line
  if (!beforeWait) {
    at = src.find("\n  fg_pdl_begin", open);
    at = at == std::string::npos ? at : src.find(";\n", at);
    if (at == std::string::npos)
      return std::nullopt;
    at += 2; // the line after the wait
  }
  const std::string defs =
      (src.find("topkRow<") == std::string::npos ? kernelSource("topk.cuh").str() : "") + cfg;
  return src.substr(0, entry) + defs + src.substr(entry, open - entry) + params.str() +
         src.substr(open, at - open) + code.str() + src.substr(at);
}

llvm::Expected<unsigned> mergeRoutingHeads(const Function &fn, llvm::ArrayRef<Layout> layouts,
                                           llvm::ArrayRef<NodeCode> code, const ProvenPlan &proven,
                                           const EmitOptions &options, SlotTables &tables,
                                           KernelSources &sources, CompiledEntry &entry) {
  std::vector<LaunchRecord> &recs = entry.launches;
  std::vector<size_t> &sourceOf = sources.sourceOfLaunch.back();
  const uint32_t n = static_cast<uint32_t>(recs.size());
  std::vector<uint32_t> into(n);
  std::iota(into.begin(), into.end(), 0u);
  unsigned merged = 0;
  for (uint32_t b = 0; b < n; ++b) {
    const LaunchRecord &br = recs[b];
    if (br.kind != LaunchRecord::Kind::Kernel || br.node == kNoNode ||
        br.op != OpKind::FusedTopkMoe || code[br.node].launches.size() != 1)
      continue;
    const Node &bn = fn.node(br.node);
    const auto *bk = std::get_if<KernelSpec>(&code[br.node].launches.front());
    if (!bk || bk->name != br.symbol || fn.type(bn.operands[0]).shape[0] != 1 ||
        bk->grid[0] != 1 || bn.results.size() != 2)
      continue;
    const ValueId ids = bn.results[0], weights = bn.results[1];
    // A: the first launch that waits for B.
    uint32_t a = n;
    for (uint32_t j = b + 1; j < n && a == n; ++j)
      if (llvm::is_contained(recs[j].deps, b))
        a = j;
    if (a == n || into[a] != a)
      continue;
    LaunchRecord &ar = recs[a];
    if (ar.kind != LaunchRecord::Kind::Kernel || ar.node == kNoNode ||
        code[ar.node].launches.size() != 1)
      continue;
    const Node &an = fn.node(ar.node);
    if (an.kind != OpKind::FusedGatedMatmulId && an.kind != OpKind::MatMulId)
      continue;
    const auto *ak = std::get_if<KernelSpec>(&code[ar.node].launches.front());
    if (!ak || ak->name != ar.symbol || !readsIdsParam(*ak) || ak->block[1] != 1 ||
        ak->block[2] != 1 || ak->block[0] % 32 != 0 || ak->block[0] < bk->block[0] ||
        ak->sharedBytes != 0) // the DP4A staged ring's shared-memory budget has no room for it
      continue;
    // Every block resident at half occupancy: the routing's latency paid once (RoutingHeads.h).
    const uint64_t threads = uint64_t(ak->grid[0]) * ak->grid[1] * ak->grid[2] * ak->block[0];
    if (threads > uint64_t(std::max(options.smCount, 1u)) * 1024)
      continue;
    // A reads the ids whole (a.ids[j] is slot j) and not the weights, which
    // only block (0, 0, 0) stores.
    bool readsIds = false, idsWhole = true, readsWeights = false;
    for (ValueId o : an.operands) {
      if (storageRoot(fn, o) == weights)
        readsWeights = true;
      if (storageRoot(fn, o) == ids) {
        readsIds = true;
        idsWhole = idsWhole && layouts[o].isContiguous() &&
                   fn.type(o).numElements() == fn.type(ids).numElements();
      }
    }
    if (!readsIds || !idsWhole || readsWeights)
      continue;
    // (Every other launch that waits for B comes after A: A is the first
    // one, and the list is in program order.)
    // The arena ranges of the launch's side-by-side work (RoutingHeads.h).
    std::vector<Range> bStores, bReads, aReads, aStores;
    bool outside = false;
    auto collect = [&](llvm::ArrayRef<ValueId> vs, std::vector<Range> &into, bool arenaOnly) {
      for (ValueId v : vs) {
        if (auto r = arenaRangeOf(fn, proven, tables, v))
          into.push_back(*r);
        else if (arenaOnly)
          outside = true;
      }
    };
    collect(bn.results, bStores, true);
    collect(bn.operands, bReads, false);
    std::vector<ValueId> aIn;
    for (ValueId o : an.operands)
      if (storageRoot(fn, o) != ids)
        aIn.push_back(o);
    collect(aIn, aReads, false);
    collect(an.results, aStores, false);
    bool clash = outside;
    for (const Range &s : bStores) {
      for (const auto *set : {&bReads, &aReads, &aStores})
        for (const Range &r : *set)
          clash = clash || arenaRangesOverlap(s, r);
    }
    for (const Range &s : aStores)
      for (const Range &r : bReads)
        clash = clash || arenaRangesOverlap(s, r);
    if (clash)
      continue;
    std::optional<std::string> cfg = headCfg(bk->source, options.routingHeadRanksLogits);
    if (!cfg)
      continue;
    std::optional<std::string> src =
        mergedSource(sources.sources[sourceOf[a]].second, *cfg, bn.operands.size() > 1);
    if (!src)
      return makeError("internal: the expert GEMV kernel " + ar.symbol + " has no entry to extend");
    const std::string renamed = detail::renameRewritten(*src, ar.symbol);
    // The topk launch's pointers (ids, weights, logits[, bias]) in its own
    // order, as the merged parameters take them.
    ar.args.insert(ar.args.end(), br.args.begin(), br.args.end());
    ar.what += " + routing (" + br.what + ")";
    ar.symbol = renamed;
    sources.sources[sourceOf[a]] = {renamed, std::move(*src)};
    into[b] = a;
    ++merged;
  }
  if (merged)
    dropMergedLaunches(entry, sources, into);
  return merged;
}

} // namespace fg::cuda
