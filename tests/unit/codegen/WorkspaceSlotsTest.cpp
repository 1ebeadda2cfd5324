//===- WorkspaceSlotsTest.cpp - cuBLAS calls in parallel branches ---------===//
//
// Issue 15 item 2: "one handle and workspace per parallel graph branch (today
// cuBLAS calls are chained because they share one workspace)". The rule
// (runtime/WorkspaceSlots.h) on hand-built launch lists — parallel GEMMs
// take distinct slots with no edge, a fourth one waits for the oldest, an
// ancestor through a kernel frees a slot, the runner's recomputation agrees
// and refuses a list that would need an edge, a plan of the old chained form
// uses one slot — and on a compiled prefill: q, k and v (three GEMMs over
// the same x) get three slots and no edge between them, and the plan file
// round-trips to the same slots. CPU only.
//
//===----------------------------------------------------------------------===//
#include "ir/Builder.h"
#include "runtime/WorkspaceSlots.h"
#include "tests/unit/codegen/SwitchedProgram.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/SmallString.h"
#include "llvm/Support/Path.h"

#include <gtest/gtest.h>

#include <cstdlib>

using namespace fg;

namespace {

LaunchRecord kernel(std::vector<uint32_t> deps) {
  LaunchRecord r;
  r.kind = LaunchRecord::Kind::Kernel;
  r.deps = std::move(deps);
  r.what = "kernel";
  return r;
}
LaunchRecord gemm(std::vector<uint32_t> deps) {
  LaunchRecord r = kernel(std::move(deps));
  r.kind = LaunchRecord::Kind::Gemm;
  r.what = "gemm";
  return r;
}

std::vector<int> slots(std::vector<LaunchRecord> &ls, bool addEdges = true) {
  auto s = assignWorkspaceSlots(ls, kWorkspaceSlots, addEdges);
  EXPECT_TRUE(bool(s)) << llvm::toString(s.takeError());
  return s ? *s : std::vector<int>{};
}

} // namespace

TEST(WorkspaceSlots, ParallelGemmsTakeDistinctSlotsWithoutEdges) {
  // 0: a kernel; 1, 2, 3: three GEMMs reading its result; 4: a kernel after all three.
  std::vector<LaunchRecord> ls = {kernel({}), gemm({0}), gemm({0}), gemm({0}), kernel({1, 2, 3})};
  EXPECT_EQ(slots(ls), (std::vector<int>{-1, 0, 1, 2, -1}));
  for (uint32_t g : {1u, 2u, 3u})
    EXPECT_EQ(ls[g].deps, std::vector<uint32_t>{0}) << g;
  EXPECT_EQ(workspaceSlotsUsed(*workspaceSlotsOf(ls, kWorkspaceSlots)), 3u);
}

TEST(WorkspaceSlots, AFourthParallelGemmWaitsForTheOldest) {
  std::vector<LaunchRecord> ls = {kernel({}), gemm({0}), gemm({0}), gemm({0}), gemm({0})};
  std::vector<LaunchRecord> original = ls;
  EXPECT_EQ(slots(ls), (std::vector<int>{-1, 0, 1, 2, 0}));
  EXPECT_EQ(ls[4].deps, (std::vector<uint32_t>{0, 1})); // one edge, from slot 0's user
  // The runner recomputes the same slots from the edges the plan stores...
  auto again = workspaceSlotsOf(ls, kWorkspaceSlots);
  ASSERT_TRUE(bool(again));
  EXPECT_EQ(*again, (std::vector<int>{-1, 0, 1, 2, 0}));
  // ... and refuses launches that would need one more.
  auto bad = workspaceSlotsOf(original, kWorkspaceSlots);
  ASSERT_FALSE(bool(bad));
  EXPECT_NE(llvm::toString(bad.takeError()).find("launch 4 (gemm) may run beside 3"),
            std::string::npos);
}

TEST(WorkspaceSlots, AnAncestorFreesItsSlot) {
  // 1 → 2 (a kernel) → 3: GEMM 3 runs after GEMM 1, so it reuses slot 0;
  // GEMM 4 is parallel to both and takes slot 1.
  std::vector<LaunchRecord> ls = {kernel({}), gemm({0}), kernel({1}), gemm({2}), gemm({0})};
  EXPECT_EQ(slots(ls), (std::vector<int>{-1, 0, -1, 0, 1}));
  EXPECT_EQ(ls[3].deps, std::vector<uint32_t>{2});
  EXPECT_EQ(ls[4].deps, std::vector<uint32_t>{0});
}

TEST(WorkspaceSlots, ThePreviousChainedFormUsesOneSlot) {
  // A plan written before the slots: every GEMM also waits for the previous one.
  std::vector<LaunchRecord> ls = {kernel({}), gemm({0}), gemm({0, 1}), gemm({0, 2}), gemm({0, 3})};
  auto s = workspaceSlotsOf(ls, kWorkspaceSlots);
  ASSERT_TRUE(bool(s));
  EXPECT_EQ(*s, (std::vector<int>{-1, 0, 0, 0, 0}));
  EXPECT_EQ(workspaceSlotsUsed(*s), 1u);
  EXPECT_EQ(workspaceSlotsUsed({-1, -1}), 0u);
}

TEST(WorkspaceSlots, ALaterDependencyIsAnError) {
  std::vector<LaunchRecord> ls = {gemm({1}), kernel({})};
  auto s = assignWorkspaceSlots(ls, kWorkspaceSlots, true);
  ASSERT_FALSE(bool(s));
  EXPECT_NE(llvm::toString(s.takeError()).find("depends on a later launch 1"), std::string::npos);
}

namespace {

/// Random DAGs of kernels and GEMMs: after the assignment (edges added where
/// the slots run out), two GEMMs in one slot are always ordered (one is an
/// ancestor of the other), and the runner's recomputation from the edges
/// gives the same slots; with one slot every GEMM is ordered after the
/// previous one.
TEST(WorkspaceSlots, RandomDagsNeverShareASlotUnordered) {
  uint64_t state = 0x9E3779B97F4A7C15ull;
  auto next = [&](uint64_t n) {
    state ^= state << 13, state ^= state >> 7, state ^= state << 17;
    return state % n;
  };
  for (int round = 0; round < 300; ++round) {
    const uint32_t n = 2 + static_cast<uint32_t>(next(40));
    const unsigned slotCount = round % 5 == 0 ? 1 : kWorkspaceSlots;
    std::vector<LaunchRecord> ls;
    for (uint32_t i = 0; i < n; ++i) {
      std::vector<uint32_t> deps;
      for (uint32_t d = 0; d < i; ++d)
        if (next(8) == 0)
          deps.push_back(d);
      ls.push_back(next(2) ? gemm(deps) : kernel(deps));
    }
    auto got = assignWorkspaceSlots(ls, slotCount, true);
    ASSERT_TRUE(bool(got)) << llvm::toString(got.takeError());
    // Ancestors by a forward pass (deps point back).
    std::vector<std::vector<bool>> anc(n, std::vector<bool>(n, false));
    for (uint32_t i = 0; i < n; ++i)
      for (uint32_t d : ls[i].deps) {
        ASSERT_LT(d, i);
        anc[i][d] = true;
        for (uint32_t a = 0; a < n; ++a)
          if (anc[d][a])
            anc[i][a] = true;
      }
    for (uint32_t i = 0; i < n; ++i)
      for (uint32_t j = 0; j < i; ++j) {
        if ((*got)[i] >= 0 && (*got)[i] == (*got)[j]) {
          EXPECT_TRUE(anc[i][j]) << "round " << round << ": GEMMs " << j << " and " << i
                                 << " share slot " << (*got)[i] << " unordered";
        }
      }
    for (int s : *got)
      EXPECT_LT(s, static_cast<int>(slotCount));
    auto again = assignWorkspaceSlots(ls, slotCount, false);
    ASSERT_TRUE(bool(again)) << llvm::toString(again.takeError());
    EXPECT_EQ(*again, *got) << "round " << round;
  }
}

/// A prefill chunk's q, k and v projections of one x (cuBLAS above 8 rows),
/// compiled for sm_90 on the CPU: the entry's launches. `pairs`: k and v as
/// one strided batch (GemmPairs.h, the default); off, three GEMMs.
std::vector<LaunchRecord> qkvLaunches(bool pairs = false) {
  Graph g;
  Function &fn = g.addFunction("prefill");
  Builder b(fn);
  ValueId x = b.input("x", {DType::F32, {64, 128}});
  ValueId q = b.matmul(x, b.weight("wq", {DType::F16, {128, 128}}, WeightInit::normal(1, 0.1)));
  ValueId k = b.matmul(x, b.weight("wk", {DType::F16, {32, 128}}, WeightInit::normal(2, 0.1)));
  ValueId v = b.matmul(x, b.weight("wv", {DType::F16, {32, 128}}, WeightInit::normal(3, 0.1)));
  b.result(q);
  b.result(k);
  b.result(v);
  EXPECT_FALSE(bool(b.finish()));
  CompiledProgram prog = test::programWithSwitch(g, "FG_DEBUG_GEMM_PAIRS", pairs);
  return prog.entries.size() == 1 ? prog.entries[0].launches : std::vector<LaunchRecord>{};
}

std::vector<uint32_t> gemmsOf(const std::vector<LaunchRecord> &ls) {
  std::vector<uint32_t> gemms;
  for (uint32_t i = 0; i < ls.size(); ++i)
    if (ls[i].kind == LaunchRecord::Kind::Gemm)
      gemms.push_back(i);
  return gemms;
}

} // namespace

/// Three GEMMs in three slots, none waiting for another; the plan file
/// (decoded here) gives the runner the same slots.
TEST(WorkspaceSlots, PrefillQkvRunSideBySide) {
  const std::vector<LaunchRecord> ls = qkvLaunches();
  const std::vector<uint32_t> gemms = gemmsOf(ls);
  ASSERT_EQ(gemms.size(), 3u);
  for (uint32_t a : gemms)
    for (uint32_t d : ls[a].deps)
      EXPECT_FALSE(llvm::is_contained(gemms, d)) << ls[a].what << " waits for " << ls[d].what;
  auto slotsOf = workspaceSlotsOf(ls, kWorkspaceSlots);
  ASSERT_TRUE(bool(slotsOf)) << llvm::toString(slotsOf.takeError());
  std::vector<int> got;
  for (uint32_t a : gemms)
    got.push_back((*slotsOf)[a]);
  EXPECT_EQ(got, (std::vector<int>{0, 1, 2}));
}

/// With the GEMM pairs (the default) k and v are one strided batch beside q:
/// two GEMMs, neither waiting for the other, in two slots.
TEST(WorkspaceSlots, PrefillQAndTheKvPairRunSideBySide) {
  const std::vector<LaunchRecord> ls = qkvLaunches(/*pairs=*/true);
  const std::vector<uint32_t> gemms = gemmsOf(ls);
  ASSERT_EQ(gemms.size(), 2u);
  EXPECT_EQ(ls[gemms[0]].gemm.batch + ls[gemms[1]].gemm.batch, 3);
  for (uint32_t a : gemms)
    for (uint32_t d : ls[a].deps)
      EXPECT_FALSE(llvm::is_contained(gemms, d)) << ls[a].what << " waits for " << ls[d].what;
  auto slotsOf = workspaceSlotsOf(ls, kWorkspaceSlots);
  ASSERT_TRUE(bool(slotsOf)) << llvm::toString(slotsOf.takeError());
  EXPECT_EQ(workspaceSlotsUsed(*slotsOf), 2u);
}

/// FG_DEBUG_WORKSPACE_SLOTS=1 (for timing): the chained form, one slot.
TEST(WorkspaceSlots, OneSlotChainsTheGemms) {
  setenv("FG_DEBUG_WORKSPACE_SLOTS", "1", 1);
  const std::vector<LaunchRecord> ls = qkvLaunches();
  unsetenv("FG_DEBUG_WORKSPACE_SLOTS");
  const std::vector<uint32_t> gemms = gemmsOf(ls);
  ASSERT_EQ(gemms.size(), 3u);
  EXPECT_TRUE(llvm::is_contained(ls[gemms[1]].deps, gemms[0]));
  EXPECT_TRUE(llvm::is_contained(ls[gemms[2]].deps, gemms[1]));
  auto slotsOf = workspaceSlotsOf(ls, kWorkspaceSlots);
  ASSERT_TRUE(bool(slotsOf));
  EXPECT_EQ(workspaceSlotsUsed(*slotsOf), 1u);
}
