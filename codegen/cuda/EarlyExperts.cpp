//===- EarlyExperts.cpp - an expert launch reads its experts before its wait -===//
#include "codegen/cuda/EarlyExperts.h"

#include "codegen/cuda/EmitterCommon.h"
#include "codegen/cuda/KernelSources.h"
#include "codegen/cuda/RoutingHeads.h"
#include "passes/memory/LaunchDag.h"

#include "llvm/ADT/BitVector.h"
#include "llvm/ADT/StringRef.h"

#include <algorithm>

namespace fg::cuda {

namespace {

using Range = ArenaRange;

/// Replaces the one occurrence of `from` in `s`; false (unchanged) where it
/// is not exactly one.
bool replaceOnce(std::string &s, llvm::StringRef from, llvm::StringRef to) {
  const size_t at = s.find(from.str());
  if (at == std::string::npos || s.find(from.str(), at + 1) != std::string::npos)
    return false;
  s.replace(at, from.size(), to.str());
  return true;
}

class Prover {
public:
  Prover(const Function &fn, const ProvenPlan &proven, SlotTables &tables,
         const KernelSources &sources, const CompiledEntry &entry)
      : fn(fn), proven(proven), tables(tables), sources(sources), recs(entry.launches),
        sourceOf(sources.sourceOfLaunch.back()), anc(recs.size(), llvm::BitVector(recs.size())) {
    for (size_t i = 0; i < recs.size(); ++i)
      for (uint32_t d : recs[i].deps) {
        anc[i].set(d);
        anc[i] |= anc[d];
      }
  }

  const std::string &source(size_t l) const { return sources.sources[sourceOf[l]].second; }

  /// Whether launch d's prologue, before its wait, sees the bytes of `vs` as
  /// its body would after it (EarlyExperts.h, the proof): d reads them, so
  /// the plan keeps them live through d.
  bool readableEarly(size_t d, llvm::ArrayRef<ValueId> vs) {
    std::optional<llvm::BitVector> finished = finishedAtStart(d);
    std::optional<std::vector<Range>> read = rangesOf(vs);
    return finished && read && othersLeave(d, *read, *finished);
  }

  /// The same for `v`, which the plan never had d read (the router's
  /// logits, whose last reader was the routing): its bytes may have been
  /// given to a value defined after that reader — by d itself, or by any
  /// launch before d that is not an ancestor of v's producer. So the only
  /// writers allowed are v's producing launch p (finished when d starts) and
  /// p's ancestors, and d's descendants; d's own results and scratch must
  /// not touch v's bytes.
  bool readableEarlyUnplanned(size_t d, ValueId v) {
    std::optional<llvm::BitVector> finished = finishedAtStart(d);
    std::optional<std::vector<Range>> read = rangesOf({v});
    if (!finished || !read)
      return false;
    const Node *prod = fn.producer(storageRoot(fn, v));
    size_t p = recs.size();
    for (size_t l = 0; l < d; ++l)
      if (recs[l].node != kNoNode && &fn.node(recs[l].node) == prod)
        p = l;
    if (p == recs.size() || !finished->test(p))
      return false;
    llvm::BitVector allowed = anc[p];
    allowed.set(p);
    for (const Range &w : writesOf(d))
      for (const Range &r : *read)
        if (arenaRangesOverlap(w, r))
          return false;
    return othersLeave(d, *read, allowed);
  }

private:
  /// Every direct predecessor of d triggers after its own wait: then the
  /// strict ancestors of each have finished when d starts.
  std::optional<llvm::BitVector> finishedAtStart(size_t d) {
    llvm::BitVector finished(recs.size());
    for (uint32_t p : recs[d].deps) {
      if (recs[p].kind == LaunchRecord::Kind::Kernel &&
          source(p).find("fg_pdl_begin_trigger_first();") != std::string::npos)
        return std::nullopt;
      finished |= anc[p];
    }
    return finished;
  }

  /// The arena bytes of values a launch of the entry computes (graph inputs
  /// and weights refuse).
  std::optional<std::vector<Range>> rangesOf(llvm::ArrayRef<ValueId> vs) {
    std::vector<Range> read;
    for (ValueId v : vs) {
      if (fn.producer(storageRoot(fn, v)) == nullptr)
        return std::nullopt;
      auto r = arenaRangeOf(fn, proven, tables, v);
      if (!r)
        return std::nullopt;
      read.push_back(*r);
    }
    return read;
  }

  /// Whether every launch other than d that may write `read` is in `ok` or a
  /// descendant of d.
  bool othersLeave(size_t d, const std::vector<Range> &read, const llvm::BitVector &ok) {
    for (size_t l = 0; l < recs.size(); ++l) {
      if (l == d || ok.test(l) || (l > d && anc[l].test(d)))
        continue;
      for (const Range &w : writesOf(l))
        for (const Range &r : read)
          if (arenaRangesOverlap(w, r))
            return false;
    }
    return true;
  }

  const std::vector<Range> &writesOf(size_t l) {
    if (writes.empty())
      for (const LaunchRecord &r : recs)
        writes.push_back(mayWrite(r));
    return writes[l];
  }

  /// The arena bytes launch `l` may write: its node's results and scratch; for an
  /// expert GEMV running the routing head (RoutingHeads.h: "+ routing (" in
  /// its label, nothing else merged), the topk node's results too (block
  /// (0, 0, 0) stores the ids and weights); everything where it runs other
  /// merged work ("+" otherwise in its label) or computes no node.
  std::vector<Range> mayWrite(const LaunchRecord &l) {
    if (l.node == kNoNode)
      return {Range{0, ~uint64_t(0)}};
    const Node &node = fn.node(l.node);
    std::vector<ValueId> results(node.results.begin(), node.results.end());
    const size_t plus = l.what.find("+ ");
    if (plus != std::string::npos) {
      const size_t routing = l.what.find(" + routing (");
      if (routing == std::string::npos || routing + 1 != plus ||
          l.what.find("+ ", plus + 2) != std::string::npos)
        return {Range{0, ~uint64_t(0)}};
      for (ValueId o : node.operands)
        if (const Node *p = fn.producer(storageRoot(fn, o)); p && p->kind == OpKind::FusedTopkMoe)
          results.insert(results.end(), p->results.begin(), p->results.end());
    }
    std::vector<Range> out;
    for (ValueId r : results)
      if (auto range = arenaRangeOf(fn, proven, tables, r))
        out.push_back(*range);
    if (l.node < proven.plan.scratch.size() && proven.plan.scratch[l.node].size > 0) {
      const ScratchSlice &sc = proven.plan.scratch[l.node];
      out.push_back(Range{static_cast<uint64_t>(sc.offset),
                          static_cast<uint64_t>(sc.offset + sc.size)});
    }
    return out;
  }

  const Function &fn;
  const ProvenPlan &proven;
  SlotTables &tables;
  const KernelSources &sources;
  const std::vector<LaunchRecord> &recs;
  const std::vector<size_t> &sourceOf;
  std::vector<llvm::BitVector> anc;
  std::vector<std::vector<Range>> writes;
};

/// The DP4A down projection's source with the routing run again before its
/// wait (topk.cuh, topkHeadEarly) from the routing head's configuration
/// `head` (struct FgHead, taken from the gated launch that runs the head),
/// its ids and weights read from shared memory; or nothing where the source
/// is not the expected form.
std::optional<std::string> rankedAgainSource(const std::string &src, const std::string &head,
                                             bool bias) {
  if (src.find("  const fg::GemvArgs<CfgM> ga{") == std::string::npos)
    return std::nullopt;
  std::optional<std::string> out = spliceRoutingHead(
      src, head, routingHeadParams(bias),
      "  const float* fg_h_w = nullptr;\n  ids = fg::topkHeadEarly<FgHead>(fg_h_logits, " +
          std::string(bias ? "fg_h_bias" : "nullptr") + ", &fg_h_w);\n  sw = fg_h_w;\n",
      /*beforeWait=*/true);
  if (!out || !replaceOnce(*out, kEarlyIdsOff, kEarlyIdsOn) ||
      !replaceOnce(*out, "kSlotsShared = false", "kSlotsShared = true"))
    return std::nullopt;
  return out;
}

} // namespace

llvm::Expected<unsigned> markEarlyExperts(const Function &fn, const ProvenPlan &proven,
                                          int64_t rankMinGatedBytes, SlotTables &tables, KernelSources &sources,
                                          CompiledEntry &entry) {
  std::vector<LaunchRecord> &recs = entry.launches;
  std::vector<size_t> &sourceOf = sources.sourceOfLaunch.back();
  Prover prove(fn, proven, tables, sources, entry);
  unsigned marked = 0;
  for (size_t d = 0; d < recs.size(); ++d) {
    LaunchRecord &dr = recs[d];
    if (dr.kind != LaunchRecord::Kind::Kernel || dr.node == kNoNode ||
        dr.op != OpKind::FusedMatmulIdSumAdd || dr.what.find("+ ") != std::string::npos)
      continue;
    std::string src = prove.source(d);
    const Node &dn = fn.node(dr.node);
    const ValueId ids = dn.operands[2], weights = dn.operands[3];
    llvm::StringRef what;
    if (prove.readableEarly(d, {ids, weights})) {
      // The writers of the ids and weights have finished: read them.
      if (!replaceOnce(src, kEarlyIdsOff, kEarlyIdsOn))
        continue;
      what = kEarlyReadLabel;
    } else if (rankMinGatedBytes < 0) {
      continue;
    } else {
      // The routing heads (RoutingHeads.h): the gated launch right before
      // ranks the router's logits and stores the ids; rank them again here,
      // from the logits, where their writer has finished.
      const Node *topk = fn.producer(storageRoot(fn, ids));
      if (!topk || topk->kind != OpKind::FusedTopkMoe || topk->results.size() != 2 ||
          storageRoot(fn, ids) != topk->results[0] ||
          storageRoot(fn, weights) != topk->results[1] || dr.args.size() != 6)
        continue;
      const bool bias = topk->operands.size() > 1;
      const size_t nb = bias ? 4 : 3; // the topk launch's pointers: ids, weights, logits[, bias]
      const LaunchRecord *host = nullptr;
      size_t hostIndex = 0;
      for (uint32_t p : dr.deps) {
        const LaunchRecord &a = recs[p];
        if (a.args.size() >= nb && a.args[a.args.size() - nb] == dr.args[3] &&
            prove.source(p).find("fg::topkHead<FgHead>(") != std::string::npos)
          host = &a, hostIndex = p;
      }
      if (!host)
        continue;
      // The gated launch's selected experts: the bytes its blocks stream
      // while this launch's blocks rank again.
      if (host->node == kNoNode || fn.node(host->node).kind != OpKind::FusedGatedMatmulId)
        continue;
      const Node &gated = fn.node(host->node);
      const TensorType &gt = fn.type(gated.operands[1]), &ut = fn.type(gated.operands[2]),
                       &it = fn.type(gated.operands[3]);
      if (gt.rank() != 3 || ut.rank() != 3 || gt.shape[0] <= 0 || it.numElements() <= 0)
        continue;
      const int64_t selectedBytes = (gt.bytes() + ut.bytes()) / gt.shape[0] * it.numElements();
      if (selectedBytes < rankMinGatedBytes)
        continue;
      const std::string &hs = prove.source(hostIndex);
      const size_t at = hs.find("struct FgHead {");
      const size_t end = at == std::string::npos ? at : hs.find("extern \"C\" __global__", at);
      if (end == std::string::npos)
        continue;
      const std::string head = hs.substr(at, end - at);
      // The head's threads must fit this block (topkRow's fgFirst).
      const size_t kt = head.find("kThreads = ");
      unsigned threads = 0;
      if (kt == std::string::npos ||
          llvm::StringRef(head).substr(kt + 11).take_while([](char c) { return c >= '0' && c <= '9'; })
              .getAsInteger(10, threads) ||
          threads > dr.block[0])
        continue;
      // The slots as the kernel indexes them must be the whole arrays.
      const std::string zero = detail::ilit(0), one = detail::ilit(1);
      if (src.find("ids_off = " + zero + ", ids_st = ") == std::string::npos ||
          src.find(", ids_sj = " + one + ";") == std::string::npos ||
          src.find("sw_off = " + zero + ", sw_sj = " + one + ";") == std::string::npos ||
          src.find("using Ids = " + detail::ctype(DType::I32) + ";") == std::string::npos ||
          src.find("using SW = " + detail::ctype(DType::F32) + ";") == std::string::npos)
        continue;
      // The logits (read at L2); the bias only as a weight, which no launch
      // writes (topkRow reads it through L1).
      if (bias) {
        const Argument *arg = fn.argumentOf(storageRoot(fn, topk->operands[1]));
        if (!arg || arg->role != ArgRole::Weight)
          continue;
      }
      if (!prove.readableEarlyUnplanned(d, topk->operands[0]))
        continue;
      std::optional<std::string> ranked = rankedAgainSource(src, head, bias);
      if (!ranked)
        continue;
      src = std::move(*ranked);
      for (size_t i = host->args.size() - nb + 2; i < host->args.size(); ++i)
        dr.args.push_back(host->args[i]);
      what = kEarlyRankedLabel;
    }
    dr.symbol = detail::renameRewritten(src, dr.symbol);
    sources.sources[sourceOf[d]] = {dr.symbol, std::move(src)};
    dr.what += what.str();
    ++marked;
  }
  return marked;
}

} // namespace fg::cuda
