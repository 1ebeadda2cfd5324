//===- EarlyExpertsGpuTest.cpp - the down projection's experts read before its wait ===//
//
// EmitOptions::earlyExperts (codegen/cuda/EarlyExperts.h): two layers of
// W-moe-12 with f16 experts (the routing its own launch, two launches before
// the float down projection, kernels/moe_sum.cuh) and with q4_K experts and
// the routing heads on (the down projection ranks the router's logits again
// before its wait) and off (the DP4A down projection, gemv_dp4a.cuh), compiled
// with the early form off and on and decoded over the same tokens and
// positions, as graphs and eagerly. The prologue reads the ids and routing
// weights and loads the first rows before the programmatic-launch wait; had
// it read them before the routing wrote them, the experts of the step
// before (or of another layer) would move the logits far past 1e-5; and the
// graph replays give the same bits as the late form's (the same loads and
// sums). The f16 plans are also held to the CPU reference for the first
// steps. scripts/gpu-s40-a.sh runs these again with every kernel's tail
// delayed after its trigger (FG_DEBUG_PDL_DELAY_NS), which widens any race.
//
//===----------------------------------------------------------------------===//
#include "GpuTestUtil.h"

using namespace fg;
using namespace fg::gputest;

namespace {

/// `steps` graph-replayed decode steps of `g` with the early form off and on:
/// the same bits every step (the same loads and sums in the same order).
void expectSameBits(const Graph &g, int32_t steps, const char *label) {
  const char *env = "FG_DEBUG_EARLY_EXPERTS";
  Plan off = planWithSwitch(g, env, false), on = planWithSwitch(g, env, true);
  Executor a = makeExecutor(on, ExecOptions::Device::Cuda, ExecOptions::Mode::Graph),
           b = makeExecutor(off, ExecOptions::Device::Cuda, ExecOptions::Mode::Graph);
  for (int32_t s = 0; s < steps; ++s) {
    const int32_t tok = (s * 389 + 17) % 4096, pos = positionWithJump(s, 512);
    const std::vector<float> x = decodeStep(a, tok, pos), y = decodeStep(b, tok, pos);
    ASSERT_EQ(x.size(), y.size());
    EXPECT_EQ(std::memcmp(x.data(), y.data(), x.size() * sizeof(float)), 0)
        << label << ": step " << s << " differs";
  }
}

} // namespace

TEST(GpuEarlyExperts, MoeLayersMatchTheLateForm) {
  FG_REQUIRE_GPU();
  const char *env = "FG_DEBUG_EARLY_EXPERTS";
  compareSwitch(workloadLayers("w-moe-12"), 512, 4096, 40, 3, "w-moe-12 f16, 2 layers", env,
                "early");
  // With the routing heads: the down projection ranks the logits again.
  ScopedEnv ranked("FG_DEBUG_EARLY_RANKED", "1");
  compareSwitch(workloadLayers("w-moe-12-q4_k"), 512, 4096, 40, 0,
                "w-moe-12-q4_k ranked again, 2 layers", env, "early");
  ScopedEnv noHeads("FG_DEBUG_ROUTING_HEADS", "0");
  compareSwitch(workloadLayers("w-moe-12-q4_k"), 512, 4096, 40, 0,
                "w-moe-12-q4_k without routing heads, 2 layers", env, "early");
}

TEST(GpuEarlyExperts, SameBitsAsTheLateForm) {
  FG_REQUIRE_GPU();
  expectSameBits(workloadLayers("w-moe-12"), 30, "w-moe-12 f16");
  ScopedEnv ranked("FG_DEBUG_EARLY_RANKED", "1");
  expectSameBits(workloadLayers("w-moe-12-q4_k"), 30, "w-moe-12-q4_k ranked again");
  ScopedEnv noHeads("FG_DEBUG_ROUTING_HEADS", "0");
  expectSameBits(workloadLayers("w-moe-12-q4_k"), 30, "w-moe-12-q4_k read");
}
