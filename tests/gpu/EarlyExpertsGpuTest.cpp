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
// before (or of another layer) would move the logits far past 1e-5. The
// plans are also held to the CPU reference for the first steps.
//
//===----------------------------------------------------------------------===//
#include "GpuTestUtil.h"

using namespace fg;
using namespace fg::gputest;

TEST(GpuEarlyExperts, MoeLayersMatchTheLateForm) {
  FG_REQUIRE_GPU();
  const char *env = "FG_DEBUG_EARLY_EXPERTS";
  compareSwitch(workloadLayers("w-moe-12"), 512, 4096, 40, 3, "w-moe-12 f16, 2 layers", env,
                "early");
  // With the routing heads: the down projection ranks the logits again.
  compareSwitch(workloadLayers("w-moe-12-q4_k"), 512, 4096, 40, 0,
                "w-moe-12-q4_k ranked again, 2 layers", env, "early");
  ScopedEnv noHeads("FG_DEBUG_ROUTING_HEADS", "0");
  compareSwitch(workloadLayers("w-moe-12-q4_k"), 512, 4096, 40, 0,
                "w-moe-12-q4_k without routing heads, 2 layers", env, "early");
}
