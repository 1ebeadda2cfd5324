//===- EarlyExpertsTest.cpp - the down projection's experts read early, without a GPU ===//
//
// EmitOptions::earlyExperts (codegen/cuda/EarlyExperts.h): which expert down
// projections (fused.matmul_id_sum_add) the lowering proves may read their
// ids and routing weights before their programmatic-launch wait. Two layers
// of W-moe-12: with f16 experts (the routing its own launch, two launches
// back) both decode layers' launches switch, same grid, arguments and
// dependencies, the kernel renamed (its source says kEarlyIds = true; every
// module is built by NVRTC with the program); with q4_K experts and the routing
// heads on (the ids written by the gated launch right before) none reads them
// early, but both rank the router's logits (two launches back) again before
// the wait, taking one more pointer, the one the head ranks from; with the
// heads off both read them. A down projection whose ids are a graph input
// (written by the input check or a copy, not a launch of the entry) never
// does; nor a ranked form whose own result may overwrite the logits (a
// planted alias).
//
//===----------------------------------------------------------------------===//
#include "tests/unit/codegen/SwitchedProgram.h"

#include "codegen/cuda/EarlyExperts.h"
#include "ir/Builder.h"
#include "passes/memory/LaunchDag.h"

#include "llvm/ADT/StringRef.h"

#include <gtest/gtest.h>

using namespace fg;
using fg::test::entryNamed;

namespace {

constexpr llvm::StringLiteral kEarly = cuda::kEarlyReadLabel, kRanked = cuda::kEarlyRankedLabel;

std::vector<const LaunchRecord *> downs(const CompiledEntry &e) {
  std::vector<const LaunchRecord *> out;
  for (const LaunchRecord &l : e.launches)
    if (l.node != kNoNode && l.op == OpKind::FusedMatmulIdSumAdd)
      out.push_back(&l);
  return out;
}

size_t earlyCount(const CompiledEntry &e) {
  size_t n = 0;
  for (const LaunchRecord *l : downs(e))
    n += llvm::StringRef(l->what).endswith(kEarly);
  return n;
}

} // namespace

TEST(EarlyExperts, FloatExpertsReadTheirIdsBeforeTheWait) {
  const Graph g = test::workloadLayers("w-moe-12", 256, {64});
  const CompiledProgram off = test::programWithSwitch(g, "FG_DEBUG_EARLY_EXPERTS", false),
                        on = test::programWithSwitch(g, "FG_DEBUG_EARLY_EXPERTS", true);
  const CompiledEntry *d0 = entryNamed(off, "decode"), *d1 = entryNamed(on, "decode");
  ASSERT_TRUE(d0 && d1);
  ASSERT_EQ(downs(*d0).size(), 2u);
  ASSERT_EQ(downs(*d1).size(), 2u);
  EXPECT_EQ(earlyCount(*d0), 0u);
  EXPECT_EQ(earlyCount(*d1), 2u);
  // On by default.
  const CompiledProgram byDefault = test::compiledProgram(g);
  const CompiledEntry *dd = entryNamed(byDefault, "decode");
  ASSERT_TRUE(dd);
  EXPECT_EQ(earlyCount(*dd), 2u);
  ASSERT_EQ(d0->launches.size(), d1->launches.size());
  for (size_t i = 0; i < d1->launches.size(); ++i) {
    const LaunchRecord &a = d0->launches[i], &b = d1->launches[i];
    SCOPED_TRACE(b.what);
    EXPECT_EQ(a.deps, b.deps);
    EXPECT_EQ(a.args, b.args);
    EXPECT_EQ(a.grid[0], b.grid[0]);
    if (!llvm::StringRef(b.what).endswith(kEarly)) {
      EXPECT_EQ(a.symbol, b.symbol);
      continue;
    }
    EXPECT_EQ(b.what, a.what + kEarly.str());
    EXPECT_TRUE(llvm::StringRef(b.symbol).startswith(a.symbol + "_")) << b.symbol;
    EXPECT_LT(b.module, on.modules.size()); // its own module, built by NVRTC
  }
  // The prefill entry has no one-token down projection: unchanged.
  const CompiledEntry *p0 = entryNamed(off, "prefill_64"), *p1 = entryNamed(on, "prefill_64");
  ASSERT_TRUE(p0 && p1);
  ASSERT_EQ(p0->launches.size(), p1->launches.size());
  for (size_t i = 0; i < p0->launches.size(); ++i)
    EXPECT_EQ(p0->launches[i].symbol, p1->launches[i].symbol);
}

TEST(EarlyExperts, WithRoutingHeadsTheDownProjectionRanksAgain) {
  const Graph g = test::workloadLayers("w-moe-12-q4_k", 256, {64});
  // The heads on (the default): the gated launch right before writes the
  // ids, so they are not read early; the down projection ranks the router's
  // logits (written two launches back) again, taking them as one more pointer.
  // The ranked form is off by default (measured slower): the default leaves
  // these down projections late.
  ::setenv("FG_DEBUG_ROUTING_HEADS", "1", 1);
  const CompiledProgram byDefault = test::compiledProgram(g);
  ::setenv("FG_DEBUG_EARLY_RANKED", "1", 1);
  const CompiledProgram off = test::programWithSwitch(g, "FG_DEBUG_EARLY_EXPERTS", false),
                        on = test::programWithSwitch(g, "FG_DEBUG_EARLY_EXPERTS", true);
  ::unsetenv("FG_DEBUG_EARLY_RANKED");
  ::unsetenv("FG_DEBUG_ROUTING_HEADS");
  const CompiledEntry *d0 = entryNamed(off, "decode"), *d1 = entryNamed(on, "decode"),
                      *dd = entryNamed(byDefault, "decode");
  ASSERT_TRUE(d0 && d1 && dd);
  ASSERT_EQ(downs(*dd).size(), 2u);
  for (const LaunchRecord *l : downs(*dd))
    EXPECT_FALSE(llvm::StringRef(l->what).endswith(kRanked)) << l->what;
  ASSERT_EQ(downs(*d1).size(), 2u);
  EXPECT_EQ(earlyCount(*d1), 0u);
  ASSERT_EQ(d0->launches.size(), d1->launches.size());
  unsigned ranked = 0;
  for (size_t i = 0; i < d1->launches.size(); ++i) {
    const LaunchRecord &a = d0->launches[i], &b = d1->launches[i];
    if (!llvm::StringRef(b.what).endswith(kRanked))
      continue;
    ++ranked;
    SCOPED_TRACE(b.what);
    EXPECT_EQ(a.deps, b.deps);
    ASSERT_EQ(b.args.size(), a.args.size() + 1);
    for (size_t j = 0; j < a.args.size(); ++j)
      EXPECT_EQ(a.args[j], b.args[j]);
    // The new pointer is the one the gated launch's head ranks from: the
    // logits, the last of its pointers (W-moe's routing has no bias).
    bool fromHead = false;
    for (uint32_t dep : b.deps)
      fromHead |= llvm::StringRef(d1->launches[dep].what).contains(" + routing (") &&
                  d1->launches[dep].args.back() == b.args.back();
    EXPECT_TRUE(fromHead);
    EXPECT_TRUE(llvm::StringRef(b.symbol).startswith(a.symbol + "_")) << b.symbol;
  }
  EXPECT_EQ(ranked, 2u);
  // The heads off: the topk launch writes them, two launches back: read.
  ::setenv("FG_DEBUG_ROUTING_HEADS", "0", 1);
  const CompiledProgram noHeads = test::programWithSwitch(g, "FG_DEBUG_EARLY_EXPERTS", true);
  ::unsetenv("FG_DEBUG_ROUTING_HEADS");
  const CompiledEntry *e = entryNamed(noHeads, "decode");
  ASSERT_TRUE(e);
  EXPECT_EQ(earlyCount(*e), 2u);
}

/// The ranked form by the gated launch's bytes (FG_DEBUG_EARLY_RANKED_MIN_MB):
/// at 20 MiB, W-moe-12 q8_0's gated experts (8 of 3.34 MB a layer: 26.7 MB)
/// take it and q4_K's (8 of 1.77 MB: 14.2 MB) do not; at 10 MiB both do.
TEST(EarlyExperts, TheRankedFormByTheGatedLaunchsBytes) {
  auto ranked = [](const char *workload, const char *mb) {
    const Graph g = test::workloadLayers(workload, 256, {});
    ::setenv("FG_DEBUG_EARLY_RANKED_MIN_MB", mb, 1);
    const CompiledProgram p = test::compiledProgram(g);
    ::unsetenv("FG_DEBUG_EARLY_RANKED_MIN_MB");
    const CompiledEntry *d = entryNamed(p, "decode");
    EXPECT_TRUE(d);
    size_t n = 0;
    if (d)
      for (const LaunchRecord *l : downs(*d))
        n += llvm::StringRef(l->what).endswith(kRanked);
    return n;
  };
  EXPECT_EQ(ranked("w-moe-12-q8_0", "20"), 2u);
  EXPECT_EQ(ranked("w-moe-12-q4_k", "20"), 0u);
  EXPECT_EQ(ranked("w-moe-12-q4_k", "10"), 2u);
}

TEST(EarlyExperts, GraphInputsAreNeverReadEarly) {
  Graph g;
  Function &fn = g.addFunction("main");
  Builder b(fn);
  b.result(b.create(op::FusedMatmulIdSumAddArgs{
      .x = b.weight("h", {DType::F32, {1, 8, 768}}, {}),
      .w = b.weight("w", {DType::F16, {16, 256, 768}}, {}),
      .ids = b.input("ids", {DType::I32, {1, 8}}),
      // Graph inputs (written by the input check or a copy before the
      // graph, not by a launch the pass sees): the only launch is the down
      // projection, so nothing but the input rule stands in the way.
      .weights = b.input("sw", {DType::F32, {1, 8, 1}}),
      .residual = b.weight("r", {DType::F32, {1, 256}}, {})},
                    "y"));
  ASSERT_FALSE(bool(b.finish()));
  const CompiledProgram p = test::programWithSwitch(g, "FG_DEBUG_EARLY_EXPERTS", true);
  const CompiledEntry *e = entryNamed(p, "main");
  ASSERT_TRUE(e);
  ASSERT_EQ(downs(*e).size(), 1u);
  EXPECT_EQ(earlyCount(*e), 0u);
}

/// Planted: the first layer's down projection's result placed on the same
/// fresh arena bytes as that layer's router logits (legal: the logits die at
/// the routing, before the down projection defines its result). The plan is
/// proven; ranking the logits again before the wait would read bytes a
/// block of the same launch may already have overwritten, so that layer's
/// down projection keeps the late form and the other layer's is ranked again.
TEST(EarlyExperts, ALogitsAliasRefusesTheRankedForm) {
  const Graph g = test::workloadLayers("w-moe-12-q4_k", 256, {});
  CompileOptions co;
  co.kernelCacheDir = test::kernelCacheDir();
  bool planted = false;
  co.testPlanHook = [&](const Function &fn, BufferPlan &plan) {
    for (NodeId n = 0; n < fn.numNodes() && !planted; ++n) {
      const Node &down = fn.node(n);
      if (down.kind != OpKind::FusedMatmulIdSumAdd)
        continue;
      const Node *topk = fn.producer(storageRoot(fn, down.operands[2]));
      ASSERT_TRUE(topk && topk->kind == OpKind::FusedTopkMoe);
      const ValueId logits = storageRoot(fn, topk->operands[0]), y = down.results[0];
      const int64_t at = plan.arenaBytes;
      int64_t bytes = 0;
      for (ValueId root : {logits, y}) {
        const int64_t delta = at - plan.values[root].offset;
        bytes = std::max(bytes, plan.values[root].size);
        for (Placement &p : plan.values)
          if (p.loc == Location::Arena && p.buffer == root)
            p.offset += delta, p.dataOffset += delta;
      }
      plan.arenaBytes += (bytes + plan.alignment - 1) / plan.alignment * plan.alignment;
      planted = true;
    }
  };
  ::setenv("FG_DEBUG_EARLY_EXPERTS", "1", 1);
  ::setenv("FG_DEBUG_EARLY_RANKED", "1", 1);
  auto plan = compile(g, co);
  ::unsetenv("FG_DEBUG_EARLY_RANKED");
  ::unsetenv("FG_DEBUG_EARLY_EXPERTS");
  ASSERT_TRUE(planted);
  ASSERT_TRUE(bool(plan)) << llvm::toString(plan.takeError());
  auto prog = decodeProgram(plan->section("program")->bytes);
  ASSERT_TRUE(bool(prog)) << llvm::toString(prog.takeError());
  const CompiledEntry *d = entryNamed(*prog, "decode");
  ASSERT_TRUE(d);
  const std::vector<const LaunchRecord *> ds = downs(*d);
  ASSERT_EQ(ds.size(), 2u);
  EXPECT_FALSE(llvm::StringRef(ds[0]->what).endswith(kRanked)) << ds[0]->what;
  EXPECT_TRUE(llvm::StringRef(ds[1]->what).endswith(kRanked)) << ds[1]->what;
}
