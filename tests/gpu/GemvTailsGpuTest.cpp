//===- GemvTailsGpuTest.cpp - one-token rows run by their GEMV, on the GPU ===//
//
// EmitOptions::gemvTails (codegen/cuda/GemvTails.h): decoders compiled with
// the tails off and on, decoded over the same tokens and positions (a jump
// to the cache's end included), replayed as graphs and launched eagerly.
// The local form (each GEMV block runs the rows it stored) likewise.
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
#include "frontends/DecoderBlocks.h"
#include "frontends/models/Workloads.h"

#include <cstring>

using namespace fg;
using namespace fg::gputest;

namespace {

/// `env`: the switch, the ticket form (FG_DEBUG_GEMV_TAILS) or the local one.
Plan planOf(const Graph &g, bool tails, const char *env) {
  ScopedEnv e(env, tails ? "1" : "0");
  auto plan = compile(g, CompileOptions{});
  EXPECT_TRUE(bool(plan)) << errString(plan.takeError());
  return std::move(*plan);
}

/// Positions 0, 1, ... with a jump to the last rows of the cache.
int32_t positionAt(int32_t s, int64_t ctx) {
  return s < 24 ? s : static_cast<int32_t>(ctx) - 40 + (s - 24);
}

/// `steps` decode steps of the two plans (and of the CPU reference when
/// `cpuSteps` > 0, for that many steps); the worst normalised errors.
void compareTails(const Graph &g, int64_t ctx, int32_t vocab, int32_t steps, int32_t cpuSteps,
                  const char *label, const char *env = "FG_DEBUG_GEMV_TAILS") {
  Plan off = planOf(g, false, env), on = planOf(g, true, env);
  for (ExecOptions::Mode m : {ExecOptions::Mode::Graph, ExecOptions::Mode::Eager}) {
    const bool graph = m == ExecOptions::Mode::Graph;
    Executor a = makeExecutor(on, ExecOptions::Device::Cuda, m), b = makeExecutor(off, ExecOptions::Device::Cuda, m);
    std::optional<Executor> cpu;
    if (graph && cpuSteps > 0)
      cpu.emplace(makeExecutor(on, ExecOptions::Device::Cpu, ExecOptions::Mode::Graph));
    double worstOff = 0, worstCpu = 0;
    int32_t identical = 0;
    for (int32_t s = 0; s < steps; ++s) {
      const int32_t tok = (s * 389 + 17) % vocab, pos = positionAt(s, ctx);
      std::vector<float> x = decodeStep(a, tok, pos), y = decodeStep(b, tok, pos);
      ASSERT_EQ(x.size(), y.size());
      identical += std::memcmp(x.data(), y.data(), x.size() * sizeof(float)) == 0;
      const double e = normalizedError(x, y);
      worstOff = std::max(worstOff, e);
      EXPECT_LE(e, 1e-5) << label << ": step " << s << " position " << pos;
      if (cpu && s < cpuSteps) {
        const double c = normalizedError(x, decodeStep(*cpu, tok, pos));
        worstCpu = std::max(worstCpu, c);
        EXPECT_LE(c, 1e-3) << label << ": step " << s << " position " << pos;
      }
    }
    std::printf("[tails] %s %s: %d of %d steps bit-identical to no tails, worst %.3g; "
                "against the CPU %.3g\n",
                label, graph ? "graph" : "eager", identical, steps, worstOff, worstCpu);
  }
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

/// Two layers of workload `name` with a vocabulary of 4096 and 512 cache rows.
static Graph workloadLayers(const char *name) {
  WorkloadOptions wo;
  wo.ctx = 512;
  auto cfg = workloadConfig(name, wo);
  EXPECT_TRUE(bool(cfg)) << errString(cfg.takeError());
  cfg->nLayers = 2;
  cfg->vocab = 4096;
  auto g = buildDecoderGraph(*cfg, decoderEntries({}, LogitRows::Last));
  EXPECT_TRUE(bool(g)) << errString(g.takeError());
  return std::move(*g);
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
  const char *env = "FG_DEBUG_GEMV_LOCAL_TAILS";
  ModelOptions mo;
  mo.ctx = 256;
  auto g = loadModel("demo", mo);
  ASSERT_TRUE(bool(g)) << errString(g.takeError());
  compareTails(*g, 256, 512, 40, 40, "demo, local", env);
  compareTails(workloadLayers("w-tiny"), 512, 4096, 40, 12, "w-tiny, 2 layers, local", env);
  compareTails(workloadLayers("w-dense"), 512, 4096, 40, 0, "w-dense, 2 layers, local", env);
}
