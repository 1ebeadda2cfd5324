//===- GemvTailsGpuTest.cpp - one-token rows run by their GEMV, on the GPU ===//
//
// EmitOptions::gemvTails (codegen/cuda/GemvTails.h): decoders compiled with
// the tails off and on, decoded over the same tokens and positions (a jump
// to the cache's end included), replayed as graphs and launched eagerly.
// The local form (each GEMV block runs the rows it stored) and its register
// form (each thread on the value it stores) likewise.
// On, every logits row stays within 1e-5 (normalised) of the row without
// tails and within 1e-3 of the CPU reference (the demo: q / k norm + rope
// rows and k's / v's cache writes as tails of f16 GEMVs); on a quantised MoE
// workload's layers (q, k and v in one DP4A launch with three tails) within
// 1e-5 of the plan without tails. A wrong ticket, a stale read of another
// block's result, a counter left non-zero or a cache row not written shows
// up as a difference at a later step.
//
//===----------------------------------------------------------------------===//
#include "GpuTestUtil.h"

#include "frontends/Frontend.h"
#include "runtime/ProgramIO.h"

#include <cstring>
#include <optional>
#include <string>

using namespace fg;
using namespace fg::gputest;

namespace {

/// The tails' comparison: `env` is the ticket form (FG_DEBUG_GEMV_TAILS), the
/// local one or the store one; the store form (on by default, and taking the
/// local form's cases first) is off in both plans unless it is the switch.
void compareTails(const Graph &g, int64_t ctx, int32_t vocab, int32_t steps, int32_t cpuSteps,
                  const char *label, const char *env = "FG_DEBUG_GEMV_TAILS") {
  const bool store = std::strcmp(env, "FG_DEBUG_GEMV_STORE_TAILS") == 0;
  if (!store)
    ::setenv("FG_DEBUG_GEMV_STORE_TAILS", "0", 1);
  compareSwitch(g, ctx, vocab, steps, cpuSteps, label, env, "tails");
  if (!store)
    ::unsetenv("FG_DEBUG_GEMV_STORE_TAILS");
}

/// The local forms' cases: the demo (v's cache write; `demo` false skips it),
/// two layers of W-tiny (q's rope, k's rope + cache write, v's cache write)
/// and of W-dense, `env` off and on; `form` names them in the log.
void compareLocalCases(const char *env, const std::string &form, bool demo = true) {
  if (demo) {
    ModelOptions mo;
    mo.ctx = 256;
    auto g = loadModel("demo", mo);
    ASSERT_TRUE(bool(g)) << errString(g.takeError());
    compareTails(*g, 256, 512, 40, 40, ("demo, " + form).c_str(), env);
  }
  compareTails(workloadLayers("w-tiny"), 512, 4096, 40, 12, ("w-tiny, 2 layers, " + form).c_str(),
               env);
  compareTails(workloadLayers("w-dense"), 512, 4096, 40, 0, ("w-dense, 2 layers, " + form).c_str(),
               env);
}

} // namespace

TEST(GpuGemvTails, DemoMatchesNoTailsAndReference) {
  FG_REQUIRE_GPU();
  ModelOptions mo;
  mo.ctx = 256;
  auto g = loadModel("demo", mo);
  ASSERT_TRUE(bool(g)) << errString(g.takeError());
  compareTails(*g, 256, 512, 40, 40, "demo");
}

TEST(GpuGemvTails, QuantisedMoeLayersMatchNoTails) {
  FG_REQUIRE_GPU();
  compareTails(workloadLayers("w-moe-12-q4_k"), 512, 4096, 40, 0, "w-moe-12-q4_k, 2 layers");
}

TEST(GpuGemvTails, TinyLayersMatchNoTailsAndReference) {
  FG_REQUIRE_GPU();
  compareTails(workloadLayers("w-tiny"), 512, 4096, 40, 12, "w-tiny, 2 layers");
}

/// The local form (FG_DEBUG_GEMV_LOCAL_TAILS: each GEMV block runs the rows
/// it stored, no ticket): the demo (v's cache write), two layers of W-tiny
/// (q's rope, k's rope + cache write, v's cache write) and of W-dense.
TEST(GpuGemvTails, LocalFormMatchesNoTails) {
  FG_REQUIRE_GPU();
  compareLocalCases("FG_DEBUG_GEMV_LOCAL_TAILS", "local");
}

/// The register form (FG_DEBUG_GEMV_STORE_TAILS: each thread runs the row op
/// on the value it stores, the rope's partner added from the same partial
/// sums): the same cases as the local form.
TEST(GpuGemvTails, StoreFormMatchesNoTails) {
  FG_REQUIRE_GPU();
  compareLocalCases("FG_DEBUG_GEMV_STORE_TAILS", "store");
}

/// The register form with its rope angles and cache rows read before the
/// GEMV's wait (FG_DEBUG_STORE_TAIL_EARLY): W-tiny's and W-dense's layers,
/// eager and as graphs with programmatic edges.
TEST(GpuGemvTails, StoreFormEarlyMatchesNoTails) {
  FG_REQUIRE_GPU();
  ::setenv("FG_DEBUG_STORE_TAIL_EARLY", "1", 1);
  compareLocalCases("FG_DEBUG_GEMV_STORE_TAILS", "store, early", /*demo=*/false);
  ::unsetenv("FG_DEBUG_STORE_TAIL_EARLY");
}

/// The merged q / k / v launch (gemvMulti) with each segment's row work in
/// its stores (the default for projections under CudaCostModel::
/// mergedTensorCoreFreeBytes) against separate GEMVs with theirs
/// (FG_DEBUG_MERGED_TC_FREE_MB=-1): the demo (v's cache write; q / k norms
/// stay launches) and two layers of W-tiny (q's rope, k's rope + cache
/// write, v's cache write), eager and as graphs, and against the CPU.
TEST(GpuGemvTails, MergedStoreFormMatchesSeparate) {
  FG_REQUIRE_GPU();
  // The decode entry's launches (the merged plan has fewer).
  auto launches = [](const Plan &p) -> size_t {
    const PlanSection *s = p.section("program");
    auto prog = s ? decodeProgram(s->bytes) : llvm::Expected<CompiledProgram>(CompiledProgram{});
    if (!prog) {
      ADD_FAILURE() << errString(prog.takeError());
      return 0;
    }
    for (const CompiledEntry &e : prog->entries)
      if (e.name == "decode")
        return e.launches.size();
    return 0;
  };
  auto check = [&](const Graph &g, int64_t ctx, int32_t vocab, int32_t cpuSteps,
                   const char *label) {
    std::optional<Plan> separate;
    {
      ScopedEnv e("FG_DEBUG_MERGED_TC_FREE_MB", "-1");
      separate.emplace(planWithSwitch(g, "FG_DEBUG_GEMV_STORE_TAILS", true));
    }
    Plan merged = planWithSwitch(g, "FG_DEBUG_GEMV_STORE_TAILS", true);
    EXPECT_GT(launches(merged), 0u);
    EXPECT_LT(launches(merged), launches(*separate)) << label;
    comparePlans(merged, *separate, ctx, vocab, 40, cpuSteps, label, "merged tails");
  };
  ModelOptions mo;
  mo.ctx = 256;
  auto g = loadModel("demo", mo);
  ASSERT_TRUE(bool(g)) << errString(g.takeError());
  check(*g, 256, 512, 40, "demo");
  check(workloadLayers("w-tiny"), 512, 4096, 12, "w-tiny, 2 layers");
}

