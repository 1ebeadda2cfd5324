//===- Fuse.cpp - the fusion driver (`fuse`) and its overlap-proof loop ----===//
//
// Each round: every enabled pattern proposes candidates at every node; the
// shared rules and the pattern's own check decide; legal candidates are
// applied by decreasing benefit (a candidate touching a node already fused
// this round is skipped, so the larger pattern wins); the function is then
// rebuilt in a topological order that keeps the original order as far as it
// can (a fused node takes its root's place). Rounds repeat until nothing
// applies. With a target (passes/Target.h), a candidate the target has no
// kernel for is refused with the target's reason. Then memory is planned (with
// the target's scratch) and the overlap proof runs as a pre-check; fused nodes
// it refuses are split back and the loop starts again. The plan that ships is
// planned and proven again by lowering, over the final program.
//
//   %n = rms_norm(%x) {eps = 1e-06} : f32[1, 256]
//   %y = mul(%n, %w) : f32[1, 256]
// becomes
//   %y = fused.rms_norm_mul(%x, %w) {eps = 1e-06} : f32[1, 256]
//
//===----------------------------------------------------------------------===//
#include "passes/fusion/Fusion.h"

#include "ir/Decomposition.h"
#include "passes/FunctionCopy.h"
#include "passes/Passes.h"
#include "passes/fusion/Pattern.h"
#include "passes/memory/BufferPlan.h"
#include "passes/memory/LaunchDag.h"
#include "passes/memory/OverlapProof.h"

#include "llvm/ADT/DenseMap.h"
#include "llvm/Support/FormatVariadic.h"

#include <algorithm>
#include <queue>

namespace fg {
namespace {

using namespace fusion;

/// Patterns kept off at a root after the overlap proof split them back:
/// "pattern|%root" -> reason.
using Blocked = llvm::StringMap<std::string>;

std::string blockKey(llvm::StringRef pattern, llvm::StringRef root) {
  return (pattern + "|" + root).str();
}

/// Rebuilds `fn` without the `dead` nodes, in a topological order (data and
/// state write-after-read edges) that follows `key` wherever it may, with
/// values compacted and `rename` applied. A cycle (a fused node that must
/// both precede and follow another: patterns refuse the shapes that make
/// one) is an error, and `fn` is left as it was.
llvm::Error rebuild(Function &fn, const std::vector<bool> &dead, llvm::ArrayRef<uint64_t> key,
                    const llvm::DenseMap<ValueId, std::string> &rename) {
  const size_t n = fn.numNodes();
  std::vector<llvm::SmallVector<NodeId, 4>> succs(n);
  std::vector<unsigned> preds(n, 0);
  auto edge = [&](NodeId from, NodeId to) {
    succs[from].push_back(to);
    ++preds[to];
  };
  // Updaters of each state version (operands 0 and 1 of a two-state
  // updater, views followed).
  llvm::DenseMap<ValueId, llvm::SmallVector<NodeId, 1>> updaters;
  const std::vector<ValueId> roots = viewRoots(fn);
  for (NodeId i = 0; i < n; ++i)
    if (!dead[i])
      for (unsigned s = 0; s < fn.node(i).info().numUpdatedStates(); ++s)
        updaters[roots[fn.node(i).operands[s]]].push_back(i);
  for (NodeId i = 0; i < n; ++i) {
    if (dead[i])
      continue;
    for (ValueId o : fn.node(i).operands) {
      if (const Node *p = fn.producer(o)) {
        NodeId pid = fn.value(o).def;
        assert(!dead[pid] && "a live node reads a value of a fused-away node");
        (void)p;
        edge(pid, i);
      }
      auto u = updaters.find(roots[o]);
      if (u != updaters.end())
        for (NodeId upd : u->second)
          if (upd != i)
            edge(i, upd); // read the old version before it is updated
    }
  }
  using Item = std::pair<uint64_t, NodeId>;
  std::priority_queue<Item, std::vector<Item>, std::greater<Item>> ready;
  for (NodeId i = 0; i < n; ++i)
    if (!dead[i] && preds[i] == 0)
      ready.push({key[i], i});
  std::vector<NodeId> order;
  while (!ready.empty()) {
    NodeId i = ready.top().second;
    ready.pop();
    order.push_back(i);
    for (NodeId s : succs[i])
      if (--preds[s] == 0)
        ready.push({key[s], s});
  }

  const size_t live = static_cast<size_t>(llvm::count(dead, false));
  if (order.size() != live) {
    for (NodeId i = 0; i < n; ++i)
      if (!dead[i] && preds[i] != 0)
        return makeError("internal: fusing @" + fn.name().str() + " made a cycle through " +
                         nodeLabel(fn, i) + " (" + std::to_string(live - order.size()) +
                         " nodes could not be ordered)");
  }
  FunctionCopy copy(fn, &rename);
  for (NodeId i : order)
    copy.copy(fn.node(i));
  fn = copy.finish();
  return llvm::Error::success();
}

/// Replaces every use of a key of `repl` (operands and results) by its value,
/// following chains, in one sweep (replaceAllUsesWith per value would be
/// quadratic in the number of fusions applied).
void replaceUses(Function &fn, const llvm::DenseMap<ValueId, ValueId> &repl) {
  auto resolve = [&](ValueId v) {
    for (auto it = repl.find(v); it != repl.end(); it = repl.find(v))
      v = it->second;
    return v;
  };
  for (NodeId i = 0; i < fn.numNodes(); ++i)
    for (ValueId &o : fn.node(i).operands)
      o = resolve(o);
  llvm::SmallVector<ValueId, 4> results;
  for (ValueId r : fn.results())
    results.push_back(resolve(r));
  fn.setResults(results);
}

struct Candidate {
  unsigned pattern; ///< index into the pattern list
  Match match;
};

llvm::StringRef patternOf(OpKind k);

class Driver {
public:
  Driver(Function &fn, const FusionOptions &opts, FusionReport &report, const LogSink &log,
         const Blocked &blocked)
      : fn_(fn), opts_(opts), report_(report), log_(log), blocked_(blocked) {
    for (auto &p : fusionPatterns())
      if (opts.isEnabled(p->name())) {
        p->setTarget(opts.target);
        patterns_.push_back(std::move(p));
      }
  }

  llvm::Expected<bool> run() {
    bool changed = false;
    for (unsigned round = 1;; ++round) {
      std::vector<Candidate> legal;
      std::vector<FusionReport::Refusal> refused;
      collect(round, legal, refused);
      llvm::Expected<unsigned> appliedOrError = apply(round, legal);
      if (!appliedOrError)
        return appliedOrError.takeError();
      const unsigned applied = *appliedOrError;
      if (!applied) {
        for (FusionReport::Refusal &r : refused)
          report_.addRefusal(std::move(r));
        return changed;
      }
      changed = true;
    }
  }

private:
  Function &fn_;
  const FusionOptions &opts_;
  FusionReport &report_;
  const LogSink &log_;
  const Blocked &blocked_;
  std::vector<std::unique_ptr<FusionPattern>> patterns_;

  void debug(const FusionPattern &p, unsigned round, const Match &m, llvm::StringRef what) {
    if (!log_ || !opts_.isDebugged(p.name()))
      return;
    log_(LogLevel::Info, ("fuse[" + p.name() + "] @" + fn_.name() + " round " + llvm::Twine(round) +
                          ": candidate at " + rootLabel(m) + " (" + m.variant + ", " +
                          llvm::Twine(m.benefit) + " ops): " + what)
                             .str());
  }

  std::string rootLabel(const Match &m) const { return label(fn_, fn_.node(m.root).result()); }

  void collect(unsigned round, std::vector<Candidate> &legal,
               std::vector<FusionReport::Refusal> &refused) {
    std::vector<unsigned> uses = fn_.useCounts();
    std::vector<llvm::SmallVector<NodeId, 2>> users(fn_.numValues());
    for (NodeId i = 0; i < fn_.numNodes(); ++i)
      for (ValueId o : fn_.node(i).operands)
        if (users[o].empty() || users[o].back() != i)
          users[o].push_back(i);
    for (unsigned pi = 0; pi < patterns_.size(); ++pi) {
      patterns_[pi]->prepare(fn_);
      const FusionPattern &p = *patterns_[pi];
      for (NodeId root = 0; root < fn_.numNodes(); ++root) {
        llvm::SmallVector<Match, 2> found;
        p.match(fn_, root, found);
        for (Match &m : found) {
          Decision d = sharedRules(p, m, uses, users);
          if (d)
            d = p.check(fn_, m);
          if (d && opts_.target)
            d = targetAccepts(p, m, uses);
          if (!d) {
            debug(p, round, m, "refused: " + d.reason());
            refused.push_back({fn_.name().str(), p.name().str(), rootLabel(m), d.reason()});
            continue;
          }
          debug(p, round, m, "legal");
          legal.push_back({pi, std::move(m)});
        }
      }
    }
    keepWholeRecomputations(round, legal, refused, users);
  }

  /// A recomputed node (the norm a GEMV prologue repeats) is saved only when
  /// every one of its consumers is rewritten: where some consumer has no legal
  /// candidate recomputing it (refused by its pattern, its shape, or the
  /// target's cost), the others are refused too — each would pay the
  /// repetition while the node keeps its launch.
  void keepWholeRecomputations(unsigned round, std::vector<Candidate> &legal,
                               std::vector<FusionReport::Refusal> &refused,
                               llvm::ArrayRef<llvm::SmallVector<NodeId, 2>> users) {
    llvm::DenseMap<NodeId, llvm::SmallVector<NodeId, 4>> takenBy; // recomputed -> roots
    for (const Candidate &c : legal)
      for (NodeId n : c.match.recomputed)
        if (!llvm::is_contained(takenBy[n], c.match.root))
          takenBy[n].push_back(c.match.root);
    std::vector<Candidate> kept;
    for (Candidate &c : legal) {
      std::string why;
      for (NodeId n : c.match.recomputed)
        for (ValueId r : fn_.node(n).results)
          for (NodeId u : users[r])
            if (why.empty() && !llvm::is_contained(takenBy[n], u))
              why = label(fn_, r) + " keeps its launch: its consumer " +
                    label(fn_, fn_.node(u).result()) + " (" +
                    std::string(mnemonic(fn_.node(u).kind)) + ") is not fused with it";
      if (why.empty()) {
        kept.push_back(std::move(c));
        continue;
      }
      const FusionPattern &p = *patterns_[c.pattern];
      debug(p, round, c.match, "refused: " + why);
      refused.push_back({fn_.name().str(), p.name().str(), rootLabel(c.match), why});
    }
    legal = std::move(kept);
  }

  /// Rules every fusion shares (FUSIONS.md §6.1).
  Decision sharedRules(const FusionPattern &p, const Match &m, llvm::ArrayRef<unsigned> uses,
                       llvm::ArrayRef<llvm::SmallVector<NodeId, 2>> users) const {
    auto b = blocked_.find(blockKey(p.name(), rootLabel(m)));
    if (b != blocked_.end())
      return Decision::no(b->second);
    for (NodeId n : m.nodes)
      for (ValueId r : fn_.node(n).results) {
        if (llvm::is_contained(m.outputs, r))
          continue;
        if (llvm::is_contained(fn_.results(), r))
          return Decision::no("intermediate " + label(fn_, r) + " is a result of @" + fn_.name());
        for (NodeId u : users[r])
          if (!m.absorbs(u))
            return Decision::no("intermediate " + label(fn_, r) + " has another consumer, " +
                                label(fn_, fn_.node(u).result()) + " (" +
                                std::string(mnemonic(fn_.node(u).kind)) + ")");
      }
    for (ValueId v : m.singleUse)
      if (uses[v] != 1 && !llvm::is_contained(m.outputs, v))
        return Decision::no(label(fn_, v) + " has " + llvm::Twine(uses[v]) +
                            " uses; the fusion needs it to have one");
    return Decision::yes();
  }

  /// Whether the target has a kernel for the fused op `m` would become, and
  /// its cost estimate (the op table's bytes and flops plus launch costs)
  /// says the fused node is no slower than the nodes it absorbs.
  Decision targetAccepts(const FusionPattern &p, const Match &m,
                         llvm::ArrayRef<unsigned> uses) const {
    FusedOp op = p.rewrite(fn_, m);
    NodeDesc desc{op.kind, {}, op.attrs, {}};
    for (ValueId v : op.operands)
      desc.operands.push_back(fn_.type(v));
    if (llvm::Error e = inferResultTypes(op.kind, desc.operands, op.attrs, desc.results))
      return Decision::no(llvm::toString(std::move(e)));
    if (llvm::Error e = opts_.target->canEmit(desc))
      return Decision::no(opts_.target->name().str() + " target: " + llvm::toString(std::move(e)));
    double fused = opts_.target->cost(desc).seconds, unfused = 0;
    for (NodeId n : m.nodes)
      unfused += opts_.target->cost(NodeDesc::of(fn_, fn_.node(n))).seconds;
    for (NodeId n : m.recomputed) {
      unsigned consumers = std::max(1u, uses[fn_.node(n).result()]);
      unfused += opts_.target->cost(NodeDesc::of(fn_, fn_.node(n))).seconds / consumers;
    }
    if (fused > unfused)
      return Decision::no(llvm::formatv("the {0} target estimates the fused op at {1:f2} us, "
                                        "the ops it replaces at {2:f2} us",
                                        opts_.target->name(), fused * 1e6, unfused * 1e6)
                              .str());
    return Decision::yes();
  }

  llvm::Expected<unsigned> apply(unsigned round, std::vector<Candidate> &legal) {
    std::stable_sort(legal.begin(), legal.end(), [](const Candidate &a, const Candidate &b) {
      if (a.match.benefit != b.match.benefit)
        return a.match.benefit > b.match.benefit;
      if (a.pattern != b.pattern)
        return a.pattern < b.pattern;
      return a.match.root > b.match.root; // a chain's last link first
    });
    const size_t numNodes = fn_.numNodes();
    std::vector<bool> dead(numNodes, false);
    std::vector<uint64_t> key;
    for (NodeId i = 0; i < numNodes; ++i)
      key.push_back(uint64_t(i) << 8);
    llvm::DenseMap<ValueId, ValueId> repl;
    llvm::DenseMap<ValueId, std::string> rename;
    unsigned applied = 0;
    for (Candidate &c : legal) {
      const FusionPattern &p = *patterns_[c.pattern];
      const Match &m = c.match;
      if (llvm::any_of(m.nodes, [&](NodeId n) { return dead[n]; })) {
        debug(p, round, m, "skipped: overlaps a larger fusion");
        continue;
      }
      FusedOp op = p.rewrite(fn_, m);
      llvm::SmallVector<TensorType, 6> operandTypes;
      for (ValueId &v : op.operands) {
        for (auto it = repl.find(v); it != repl.end(); it = repl.find(v))
          v = it->second;
        operandTypes.push_back(fn_.type(v));
      }
      llvm::SmallVector<TensorType, 2> types;
      if (llvm::Error e = inferResultTypes(op.kind, operandTypes, op.attrs, types)) {
        debug(p, round, m, "refused: " + llvm::toString(std::move(e)));
        continue;
      }
      bool sameTypes = types.size() == m.outputs.size();
      for (size_t i = 0; sameTypes && i < types.size(); ++i)
        sameTypes = types[i] == fn_.type(m.outputs[i]);
      if (!sameTypes) {
        debug(p, round, m, "refused: the fused op's result types differ from the group's");
        continue;
      }
      NodeId id = fn_.addNode(op.kind, op.operands, op.attrs, types, {}, fn_.node(m.root).loc);
      key.push_back(key[m.root] + 1);
      dead.push_back(false);
      for (size_t i = 0; i < m.outputs.size(); ++i) {
        ValueId nv = fn_.node(id).results[i];
        repl[m.outputs[i]] = nv; // uses are replaced once, below
        rename[nv] = fn_.value(m.outputs[i]).name;
      }
      for (NodeId n : m.nodes) {
        dead[n] = true;
        // An earlier round's fused node absorbed by this one (fused.gated_matmul
        // into fused.rms_norm_gated_matmul): its record goes, or both count.
        const Node &gone = fn_.node(n);
        if (gone.info().has(kFused))
          report_.withdraw(fn_.name(), label(fn_, gone.results.back()));
      }
      report_.addApplied(fn_.name(), p.name(), 1, label(fn_, m.outputs.back()));
      debug(p, round, m, "applied");
      ++applied;
    }
    if (applied) {
      replaceUses(fn_, repl);
      // A recomputed node whose last consumer was rewritten is dead too.
      std::vector<unsigned> uses(fn_.numValues(), 0);
      for (NodeId i = 0; i < fn_.numNodes(); ++i)
        if (!dead[i])
          for (ValueId o : fn_.node(i).operands)
            ++uses[o];
      for (const Candidate &c : legal)
        for (NodeId n : c.match.recomputed)
          if (!dead[n] && llvm::all_of(fn_.node(n).results, [&](ValueId r) {
                return uses[r] == 0 && !llvm::is_contained(fn_.results(), r);
              })) {
            dead[n] = true;
            // An earlier fusion's node that is gone: its record goes too.
            const Node &gone = fn_.node(n);
            if (gone.info().has(kFused))
              report_.withdraw(fn_.name(), label(fn_, gone.results.back()));
          }
      if (llvm::Error e = rebuild(fn_, dead, key, rename))
        return e;
    }
    return applied;
  }
};

/// The pattern name of a fused op ("fused.rms_norm_mul" -> "rms_norm_mul").
llvm::StringRef patternOf(OpKind k) {
  llvm::StringRef m(mnemonic(k).data(), mnemonic(k).size());
  return m.drop_front(m.startswith("fused.") ? 6 : 0);
}

/// Splits `nodes` (fused) back into their decompositions and rebuilds `fn`.
llvm::Error splitBack(Function &fn, llvm::ArrayRef<NodeId> nodes) {
  const size_t numNodes = fn.numNodes();
  std::vector<bool> dead(numNodes, false);
  std::vector<uint64_t> key;
  for (NodeId i = 0; i < numNodes; ++i)
    key.push_back(uint64_t(i) << 8);
  llvm::DenseMap<ValueId, std::string> rename;
  for (NodeId n : nodes) {
    llvm::SmallVector<ValueId, 2> repl;
    std::string prefix = fn.value(fn.node(n).results.back()).name;
    size_t before = fn.numNodes();
    if (llvm::Error e = expandFusedNode(fn, n, repl, prefix))
      return e;
    for (size_t i = before; i < fn.numNodes(); ++i) {
      key.push_back(key[n] + 1);
      dead.push_back(false);
    }
    const Node &node = fn.node(n);
    for (size_t r = 0; r < node.results.size(); ++r) {
      fn.replaceAllUsesWith(node.results[r], repl[r]);
      rename[repl[r]] = fn.value(node.results[r]).name;
    }
    dead[n] = true;
  }
  return rebuild(fn, dead, key, rename);
}

llvm::Expected<bool> fuseLoop(Function &fn, const FusionOptions &opts, FusionReport &report,
                              const LogSink &log, bool proveOverlap) {
  if (!opts.enabled)
    return false;
  Blocked blocked;
  bool changed = false;
  while (true) {
    llvm::Expected<bool> c = Driver(fn, opts, report, log, blocked).run();
    if (!c)
      return c.takeError();
    changed |= *c;
    if (!proveOverlap)
      return changed;
    llvm::Expected<LaunchDag> dag = LaunchDag::build(fn);
    if (!dag)
      return dag.takeError();
    // A pre-check: lowering plans again with the emitted scratch and proves
    // that plan (the one that ships); here the target's scratch estimate.
    MemoryPlanOptions mo;
    if (opts.target)
      mo.scratchBytes = [&](const Function &f, NodeId n) {
        return opts.target->scratchBytes(NodeDesc::of(f, f.node(n)));
      };
    llvm::Expected<BufferPlan> plan = planMemory(fn, *dag, mo);
    if (!plan)
      return plan.takeError();
    OverlapOptions oo;
    oo.allLaunches = false;
    oo.target = opts.target;
    llvm::SmallVector<NodeId, 4> refused;
    for (const OverlapViolation &v : proveNoOverlap(fn, *plan, oo)) {
      const Node &node = fn.node(v.node);
      if (!node.info().has(kFused) || llvm::is_contained(refused, v.node))
        continue;
      refused.push_back(v.node);
      llvm::StringRef pattern = patternOf(node.kind);
      std::string root = label(fn, node.results.back());
      std::string reason = "split back after planning: " + v.reason;
      blocked[blockKey(pattern, root)] = reason;
      report.addApplied(fn.name(), pattern, -1, root);
      report.addRefusal({fn.name().str(), pattern.str(), root, reason});
      ++report.splitBack;
      if (log && opts.isDebugged(pattern))
        log(LogLevel::Info,
            ("fuse[" + pattern + "] @" + fn.name() + ": " + root + " " + reason).str());
    }
    if (refused.empty())
      return changed;
    if (llvm::Error e = splitBack(fn, refused))
      return e;
  }
}

class FusePass : public Pass {
public:
  llvm::StringRef name() const override { return "fuse"; }

  llvm::Expected<bool> run(Function &fn, PassContext &ctx) override {
    FusionOptions opts = ctx.fusionOptions ? *ctx.fusionOptions : FusionOptions{};
    if (!opts.target)
      opts.target = ctx.target;
    FusionReport local;
    FusionReport &report = ctx.fusionReport ? *ctx.fusionReport : local;
    std::vector<std::pair<std::string, int64_t>> before;
    for (const std::string &p : fusionPatternNames())
      before.emplace_back(p, report.count(p, fn.name()));
    llvm::Expected<bool> changed = fuseFunctionWithOverlapProof(fn, opts, report, ctx.log);
    if (!changed)
      return changed.takeError();
    for (auto &[p, n] : before)
      if (int64_t d = report.count(p, fn.name()) - n)
        ctx.stat(p, d);
    return *changed;
  }
};

} // namespace

llvm::Expected<bool> fuseFunctionWithOverlapProof(Function &fn, const FusionOptions &opts,
                                                  FusionReport &report, const LogSink &log) {
  return fuseLoop(fn, opts, report, log, opts.overlapProof);
}

llvm::Error fuseWithOverlapProof(Graph &g, const FusionOptions &opts, FusionReport &report,
                                 const LogSink &log) {
  for (Function &fn : g.functions()) {
    llvm::Expected<bool> c = fuseFunctionWithOverlapProof(fn, opts, report, log);
    if (!c)
      return makeError("fusion of @" + fn.name() + ": " + llvm::toString(c.takeError()));
  }
  return llvm::Error::success();
}

std::unique_ptr<Pass> createFusePass() { return std::make_unique<FusePass>(); }

} // namespace fg
