//===- GemvTails.cpp - one-token row work at the end of the GEMV it reads -===//
#include "codegen/cuda/GemvTails.h"

#include "codegen/cuda/EmitterCommon.h"
#include "codegen/cuda/KernelSources.h"
#include "codegen/cuda/RowKernels.h"
#include "ir/Diag.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/Support/FormatVariadic.h"

#include <algorithm>
#include <functional>
#include <numeric>
#include <optional>

namespace fg::cuda {

namespace {

/// Tails one GEMV takes at most (q, k and v of a merged projection).
constexpr size_t kMaxTails = 3;
/// Blocks that run the tails at most (each a warp a row).
constexpr int64_t kMaxTailBlocks = 16;

/// The GEMV launches that may take tails: one kernel of one-token rows, a
/// one-dimensional grid and block, no cluster.
bool canHostTails(const Function &fn, const Node &n, const NodeCode &code) {
  switch (n.kind) {
  case OpKind::MatMul:
  case OpKind::FusedRmsNormMatmul:
  case OpKind::FusedMatmulMulti:
  case OpKind::FusedRmsNormMatmulMulti:
    break;
  default:
    return false;
  }
  if (fn.type(n.operands[0]).numRows() != 1 || code.launches.size() != 1)
    return false;
  const auto *k = std::get_if<KernelSpec>(&code.launches.front());
  return k && k->grid[0] >= kMaxTails && k->grid[1] == 1 && k->grid[2] == 1 && k->block[1] == 1 &&
         k->block[2] == 1 && k->block[0] % 32 == 0 &&
         k->source.find("__cluster_dims__") == std::string::npos &&
         k->source.find("fg_tails<") == std::string::npos;
}

/// How a GEMV runs its tails (one form a GEMV).
enum class Form {
  Ticket, ///< the last blocks to finish, after every block's stores (fg_tails)
  Local,  ///< each block on its own tile, after a barrier (normRowsRange)
  Store,  ///< each thread on the value it stores (normRowsElement): one tail
};

struct Tail {
  uint32_t record; ///< the tail's own launch, removed
  detail::RowTail body;
  Form form = Form::Ticket;
  /// The result of the GEMV it reads (a merged projection's segment: one
  /// store tail each); -1 outside the local forms.
  int segment = -1;
};

/// Whether a GEMV node is a merged projection (gemvMulti: one result and
/// one tile range a segment).
bool isMulti(const Node &n) {
  return n.kind == OpKind::FusedMatmulMulti || n.kind == OpKind::FusedRmsNormMatmulMulti;
}

/// The call in a GEMV kernel's entry that the store form gives its tails as
/// arguments (GemvEmitter.cpp writes both).
const char *gemvCall(bool multi) {
  return multi ? "fg::gemvMulti<Multi>(" : "fg::gemv<Cfg>(fg::GemvArgs<Cfg>{";
}

/// The segment (result) of GEMV node `an` that tail `b` (node bn) can run
/// on in each GEMV block, on the elements that block stored, or -1: the
/// plain GEMV kernel (a tile of rows a block) or the merged one (gemvMulti:
/// each segment its own range of tiles), a row op without statistics and
/// with neighbouring pairs, reading exactly one result of the GEMV as its
/// rows (a view of it from element 0), and writing nothing the GEMV reads or
/// writes (other blocks may still read x, or store other segments).
int localSegment(const Function &fn, llvm::ArrayRef<Layout> layouts, const ProvenPlan &proven,
                 SlotTables &tables, const Node &an, const KernelSpec &host, const Node &bn,
                 const detail::RowTail &b) {
  const bool multi = isMulti(an);
  const bool plain = an.kind == OpKind::MatMul || an.kind == OpKind::FusedRmsNormMatmul;
  if (!b.local || host.tileRows <= 0 || !(multi || plain) ||
      host.source.find(gemvCall(multi)) == std::string::npos)
    return -1;
  const ValueId x = bn.operands[static_cast<size_t>(b.x)];
  // A rope pair (c, c + 1), c even, must lie in one block's rows: even rows
  // (and even row lengths, so a pair's parity is its channel's). The GEMV's
  // store loops take a tail only over even tiles (gemv.cuh), whatever it is.
  const bool rope = bn.kind == OpKind::Rope || bn.kind == OpKind::FusedRopeSetRows;
  if (host.tileRows % 2 != 0 || (rope && fn.type(x).shape.back() % 2 != 0))
    return -1;
  const auto at = std::find(an.results.begin(), an.results.end(), storageRoot(fn, x));
  if (at == an.results.end() || !layouts[x].isContiguous() ||
      fn.type(x).numElements() != fn.type(*at).numElements())
    return -1;
  const int segment = static_cast<int>(at - an.results.begin());
  // Its other operands (positions, cache row indices, frequency factors) are
  // read from memory while the GEMV's blocks still store: none may be, or
  // overlap, a result of the GEMV (a merged projection's other segments
  // included).
  for (size_t o = 0; o < bn.operands.size(); ++o) {
    if (static_cast<int>(o) == b.x)
      continue;
    const ValueId v = bn.operands[o];
    if (llvm::is_contained(an.results, storageRoot(fn, v)))
      return -1;
    if (auto r = arenaRangeOf(fn, proven, tables, v))
      for (ValueId res : an.results)
        if (auto w = arenaRangeOf(fn, proven, tables, res); w && arenaRangesOverlap(*r, *w))
          return -1;
  }
  // The grid is one block a tile of each result in turn (what the rows a
  // block stores rely on; gemvMulti's kTiles0, kTiles1).
  int64_t tiles = 0;
  for (ValueId r : an.results)
    tiles += (fn.type(r).numElements() + host.tileRows - 1) / host.tileRows;
  if (static_cast<int64_t>(host.grid[0]) != tiles)
    return -1;
  auto written = arenaRangeOf(fn, proven, tables, bn.result());
  if (!written) {
    // A state (the cache): the GEMV must not read it.
    llvm::Expected<BufferRef> w = bufferOfValue(fn, proven, tables, bn.result());
    if (!w) {
      llvm::consumeError(w.takeError());
      return -1;
    }
    for (ValueId v : an.operands) {
      llvm::Expected<BufferRef> r = bufferOfValue(fn, proven, tables, v);
      if (!r) {
        llvm::consumeError(r.takeError());
        return -1;
      }
      if (r->space == w->space && r->index == w->index)
        return -1;
    }
    return segment;
  }
  std::vector<ValueId> read(an.operands.begin(), an.operands.end());
  read.insert(read.end(), an.results.begin(), an.results.end());
  for (ValueId v : read)
    if (auto r = arenaRangeOf(fn, proven, tables, v); r && arenaRangesOverlap(*r, *written))
      return -1;
  return segment;
}

/// Tail t's policy struct as a store tail (FgStoreTail<t>): the tail's
/// pointers as members, put(f, v, vp) for each value the GEMV stores (gemv.cuh
/// GemvNoTail is the empty one) and, ahead (`early`), early(f), which reads
/// element f's angle and cache row before the wait (gemvTailEarly) for put()
/// to use; else put() reads them itself (fg_early a constant null).
std::string storeTailStruct(size_t t, const detail::RowTail &b, bool early,
                            const std::function<std::string(std::string)> &spell) {
  std::string members;
  for (const auto &[type, pname] : b.params)
    members += "  " + spell(type) + " " + pname + ";\n";
  const std::string put =
      "  __device__ __forceinline__ void put(long long fg_f, float fg_v, float fg_vp) const "
      "{\n" +
      std::string(early ? "    const fg::FgElementEarly *fg_early = fg_f == fg_early_f ? "
                          "&fg_e : nullptr;\n"
                        : "    constexpr const fg::FgElementEarly *fg_early = nullptr;\n") +
      "    " + spell(b.elementCall) + "\n  }\n";
  const std::string ahead =
      early ? "  long long fg_early_f = -1;\n  fg::FgElementEarly fg_e;\n"
              "  __device__ __forceinline__ void early(long long fg_f) {\n    " +
                  spell(b.earlyCall) + "\n    fg_early_f = fg_f;\n  }\n"
            : std::string();
  return "struct FgStoreTail" + std::to_string(t) +
         " {\n  static constexpr bool kOn = true, kPairs = " + std::string(b.pairs ? "true" : "false") +
         ";\n" + members + ahead + put + "};\n";
}

/// `host`'s source with its tails: their policy structs (and functions)
/// before its entry, their pointers after its parameters, and in the body,
/// by form — store: the tails as arguments of the GEMV call (gemv<Cfg>, or
/// gemvMulti<Multi> with one a segment); local: each block's rows after a
/// barrier; ticket: fg_tails after the body, with the counters.
llvm::Expected<std::string> mergedSource(const KernelSpec &host, bool multi,
                                         llvm::ArrayRef<Tail> tails,
                                         llvm::ArrayRef<int64_t> blocks, Form form, bool early,
                                         bool noAngle) {
  const bool local = form != Form::Ticket;
  const std::string &src = host.source;
  const std::optional<detail::EntrySplice> at = detail::entrySplice(src, host.name);
  if (!at)
    return makeError("internal: the GEMV kernel " + host.name + " has no entry to extend");
  const size_t entry = at->entry, open = at->open, close = at->close;
  std::string defs = "#define FG_TAIL_THREADS " + std::to_string(host.block[0]) +
                     (local ? "\n#define FG_TAIL_LOCAL 1\n" : "\n#define FG_TAIL_COHERENT 1\n") +
                     (noAngle ? "#define FG_DEBUG_TAIL_NO_ANGLE 1\n" : "") +
                     kernelSource("row.cuh").str() + "\n";
  std::string params, calls;
  std::string storeInit[kMaxTails]; // each segment's store tail, built
  int64_t from = 0;
  for (size_t t = 0; t < tails.size(); ++t) {
    const detail::RowTail &b = tails[t].body;
    const std::string cfg = "FgTail" + std::to_string(t);
    auto spell = [&](std::string s) {
      for (size_t p = 0; (p = s.find("Cfg", p)) != std::string::npos; p += cfg.size())
        s.replace(p, 3, cfg);
      return s;
    };
    std::string fparams, fargs;
    for (const auto &[type, pname] : b.params) {
      fparams += (fparams.empty() ? "" : ", ") + spell(type) + " " + pname;
      const std::string mine = "t" + std::to_string(t) + "_" + pname;
      params += ", " + spell(type) + " " + mine;
      fargs += (fargs.empty() ? "" : ", ") + mine;
    }
    defs += "struct " + cfg + " {\n" + b.cfg + "};\n";
    if (form == Form::Store) {
      defs += storeTailStruct(t, b, early, spell);
      storeInit[static_cast<size_t>(tails[t].segment)] =
          "FgStoreTail" + std::to_string(t) + "{" + fargs + "}";
    } else if (local) {
      defs += "static __device__ __forceinline__ void fg_tail" + std::to_string(t) + "(" + fparams +
              ", long long fg_begin, long long fg_end) {\n  " + spell(b.rangeCall) + "\n}\n";
      calls += llvm::formatv("\n    fg_tail{0}({1}, fg_begin, fg_end);", t, fargs).str();
    } else {
      defs += "static __device__ __forceinline__ void fg_tail" + std::to_string(t) + "(" + fparams +
              ") {\n  " + spell(b.call) + "\n}\n";
      calls += llvm::formatv("\n    if (fg_tail_share(b, {0}, {1})) fg_tail{2}({3});", from,
                             blocks[t], t, fargs)
                   .str();
      from += blocks[t];
    }
  }
  // Everything up to the end of the parameter list, the tails' included.
  const std::string head =
      src.substr(0, entry) + defs + src.substr(entry, open - entry) + params;
  if (form == Form::Store) {
    // The tails ride on the GEMV call: gemv<Cfg>(args, FgStoreTail0{...}),
    // or gemvMulti<Multi>(a0, a1, a2, FgStoreTail0{...}, fg::GemvNoTail{},
    // ...) up to the last segment that has one.
    const size_t call = src.find(gemvCall(multi), open);
    const size_t end = call == std::string::npos ? call : src.find(multi ? ");" : "});", call);
    if (end == std::string::npos || end > close)
      return makeError("internal: the GEMV kernel " + host.name + " has no " +
                       (multi ? "gemvMulti" : "gemv<Cfg>") + " call");
    const size_t args = multi ? end : end + 1; // where the call's arguments end
    if (multi) {
      size_t last = 0;
      for (size_t g = 0; g < kMaxTails; ++g)
        if (!storeInit[g].empty())
          last = g + 1;
      for (size_t g = 0; g < last; ++g)
        calls += ", " + (storeInit[g].empty() ? std::string("fg::GemvNoTail{}") : storeInit[g]);
      return head + src.substr(open, args - open) + calls + src.substr(args);
    }
    if (tails.size() != 1)
      return makeError("internal: a GEMV runs one store tail, not " + std::to_string(tails.size()));
    if (!early)
      return head + src.substr(open, args - open) + ", " + storeInit[0] + src.substr(args);
    // The angle ahead: the tail built and its early() run before the wait.
    const size_t wait = src.find("  fg_pdl_begin", open);
    if (wait == std::string::npos || wait > call)
      return makeError("internal: the GEMV kernel " + host.name + " has no wait before its body");
    return head + src.substr(open, wait - open) + "  auto fg_st = " + storeInit[0] +
           ";\n  fg::gemvTailEarly<Cfg>(fg_st);\n" + src.substr(wait, args - wait) + ", fg_st" +
           src.substr(args);
  }
  if (local) {
    // Each block, on the rows of its own tile of the result (KernelSpec::
    // tileRows: 16 on the tensor cores, kRows on the lanes), once stored.
    const std::string body =
        "\n  __syncthreads();\n  {\n"
        "    constexpr long long fg_rows = " +
        std::to_string(host.tileRows) +
        ";\n"
        "    const long long fg_begin = (long long)blockIdx.x * fg_rows;\n"
        "    const long long fg_end = fg_begin + fg_rows < Cfg::N ? fg_begin + fg_rows : Cfg::N;" +
        calls + "\n  }";
    return head + src.substr(open, close - open) + body + src.substr(close);
  }
  return head + ", unsigned* fg_tail_ctr" + src.substr(open, close - open) +
         llvm::formatv("\n  fg_tails<{0}>(fg_tail_ctr, [&](int b) {{{1}\n  });", from, calls).str() +
         src.substr(close);
}

/// Whether GEMV launch `i` may read its store tail's positions and cache
/// row indices before its wait (EmitOptions::gemvStoreTailEarly). Code
/// before the wait runs once every predecessor has triggered. A predecessor
/// that triggers after its own wait has by then seen every launch before it
/// complete (each waited for its own predecessors): the input check — added
/// after this merge as the entry's first launch, which every root launch
/// waits for and which copies the step's inputs into the arena — included,
/// and with it the previous step. So: at least one predecessor, each a
/// node's kernel that does not trigger first (its current source, after the
/// merges of earlier launches), and the values read ahead are the entry's
/// inputs or weights (no launch of the step writes them).
bool earlyOk(const Function &fn, const ProvenPlan &proven, SlotTables &tables,
             llvm::ArrayRef<LaunchRecord> recs, const KernelSources &sources,
             llvm::ArrayRef<size_t> sourceOf, uint32_t i, const Node &tail,
             const detail::RowTail &body, const EmitOptions &options) {
  if (!options.gemvStoreTailEarly || recs[i].deps.empty())
    return false;
  for (uint32_t d : recs[i].deps) {
    const LaunchRecord &p = recs[d];
    if (p.kind != LaunchRecord::Kind::Kernel || p.node == kNoNode ||
        sources.sources[sourceOf[d]].second.find("fg_pdl_begin_trigger_first();") !=
            std::string::npos)
      return false;
  }
  for (int o : body.earlyReads) {
    const ValueId v = tail.operands[static_cast<size_t>(o)];
    if (fn.producer(storageRoot(fn, v)))
      return false;
    llvm::Expected<BufferRef> ref = bufferOfValue(fn, proven, tables, v);
    if (!ref) {
      llvm::consumeError(ref.takeError());
      return false;
    }
    if (ref->space != BufferSpace::Arena && ref->space != BufferSpace::Weight)
      return false;
  }
  return true;
}

} // namespace

llvm::Expected<unsigned> mergeGemvTails(const Function &fn, llvm::ArrayRef<Layout> layouts,
                                        llvm::ArrayRef<NodeCode> code, const ProvenPlan &proven,
                                        const EmitOptions &options, SlotTables &tables,
                                        KernelSources &sources, CompiledEntry &entry) {
  std::vector<LaunchRecord> &recs = entry.launches;
  std::vector<size_t> &sourceOf = sources.sourceOfLaunch.back();
  const size_t n = recs.size();
  std::vector<std::vector<Tail>> tails(n);
  std::vector<bool> removed(n, false);
  std::vector<uint32_t> hostOf(n);
  for (uint32_t j = 0; j < n; ++j) {
    const LaunchRecord &b = recs[j];
    if (b.kind != LaunchRecord::Kind::Kernel || b.deps.size() != 1 || b.node == kNoNode ||
        code[b.node].launches.size() != 1)
      continue;
    const uint32_t i = b.deps.front();
    const LaunchRecord &a = recs[i];
    if (a.kind != LaunchRecord::Kind::Kernel || a.node == kNoNode || removed[i] ||
        tails[i].size() == kMaxTails || !canHostTails(fn, fn.node(a.node), code[a.node]) ||
        std::get<KernelSpec>(code[a.node].launches.front()).name != a.symbol)
      continue;
    const Node &bn = fn.node(b.node);
    std::vector<Layout> ls;
    for (ValueId o : bn.operands)
      ls.push_back(layouts[o]);
    llvm::Expected<detail::RowTail> body = detail::emitRowTail(fn, bn, ls, options);
    if (!body) {
      llvm::consumeError(body.takeError());
      continue;
    }
    // One form a GEMV, the one its first tail takes (the store form where
    // it is on and can be, else the local form likewise, else the ticket); a
    // later tail that needs another form stays a launch, and so does a
    // second store tail of one result (a merged projection takes one a
    // segment).
    const Node &an = fn.node(a.node);
    // The local form's rows are a block's tile of one result: a merged
    // projection takes the store form only.
    const int segment =
        options.gemvStoreTails || (options.gemvLocalTails && !isMulti(an))
            ? localSegment(fn, layouts, proven, tables, an,
                           std::get<KernelSpec>(code[a.node].launches.front()), bn, *body)
            : -1;
    const Form form = segment < 0              ? Form::Ticket
                      : options.gemvStoreTails ? Form::Store
                                               : Form::Local;
    if (form == Form::Ticket && !options.gemvTails)
      continue;
    if (!tails[i].empty() &&
        (tails[i].front().form != form ||
         (form == Form::Store &&
          std::any_of(tails[i].begin(), tails[i].end(),
                      [&](const Tail &t) { return t.segment == segment; }))))
      continue;
    tails[i].push_back({j, std::move(*body), form, segment});
    removed[j] = true;
    hostOf[j] = i;
  }

  unsigned merged = 0;
  for (uint32_t i = 0; i < n; ++i) {
    if (tails[i].empty())
      continue;
    LaunchRecord &a = recs[i];
    const KernelSpec &host = std::get<KernelSpec>(code[a.node].launches.front());
    // Each tail its own blocks, a warp an item (at most kMaxTailBlocks), and
    // together at most the grid (canHostTails: the grid has a block a tail).
    const int64_t warps = host.block[0] / 32;
    std::vector<int64_t> blocks;
    for (const Tail &t : tails[i])
      blocks.push_back(std::clamp<int64_t>((t.body.items + warps - 1) / warps, 1, kMaxTailBlocks));
    while (std::accumulate(blocks.begin(), blocks.end(), int64_t(0)) > host.grid[0])
      *std::max_element(blocks.begin(), blocks.end()) -= 1;
    const Form form = tails[i].front().form;
    const bool multi = isMulti(fn.node(a.node));
    llvm::Expected<std::string> src =
        mergedSource(host, multi, tails[i], blocks, form,
                     form == Form::Store && !multi &&
                         earlyOk(fn, proven, tables, recs, sources, sourceOf, i,
                                                    fn.node(recs[tails[i].front().record].node),
                                                    tails[i].front().body, options),
                     options.debugStoreTailNoAngle);
    if (!src)
      return src.takeError();
    // A tail whose own launch triggered its dependents first (the rows a
    // decode attention reads: EmitOptions::pdlTriggerBeforeAttention) makes
    // its GEMV trigger first, or the attention, now waiting for the GEMV,
    // would be scheduled only as the GEMV's blocks pass their wait.
    for (const Tail &t : tails[i]) {
      const auto &own = std::get<KernelSpec>(code[recs[t.record].node].launches.front());
      if (own.source.find("fg_pdl_begin_trigger_first();") != std::string::npos) {
        makeTriggerFirst(*src);
        break;
      }
    }
    const std::string renamed = detail::renameRewritten(*src, host.name);
    for (const Tail &t : tails[i]) {
      const Node &bn = fn.node(recs[t.record].node);
      for (const Param &p : t.body.ps) {
        const ValueId v =
            p.kind == Param::Kind::Result ? bn.results[p.index] : bn.operands[p.index];
        llvm::Expected<BufferRef> ref = bufferOfValue(fn, proven, tables, v);
        if (!ref)
          return ref.takeError();
        a.args.push_back(*ref);
      }
      a.what += " + " + t.body.what;
    }
    if (form == Form::Ticket)
      a.args.push_back(BufferRef{BufferSpace::Counters, 0, tables.counters(8)});
    a.symbol = renamed;
    sources.sources[sourceOf[i]] = {renamed, std::move(*src)};
    merged += static_cast<unsigned>(tails[i].size());
  }
  if (!merged)
    return 0u;

  // A removed tail's dependents wait for its GEMV.
  std::vector<uint32_t> into(n);
  for (uint32_t j = 0; j < n; ++j)
    into[j] = removed[j] ? hostOf[j] : j;
  dropMergedLaunches(entry, sources, into);
  return merged;
}

} // namespace fg::cuda
