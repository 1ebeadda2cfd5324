//===- RoutingHeadsGpuTest.cpp - MoE routing run by the expert GEMV, on the GPU ===//
//
// EmitOptions::routingHeads (codegen/cuda/RoutingHeads.h): two layers of
// W-moe-12 (128 experts, top 8, softmax + renormalisation) with q4_K and
// q8_0 weights (DP4A: the gated GEMV, then the down projection with the sum),
// compiled with the heads off and on and decoded over the same tokens and
// positions, as graphs and eagerly. Every block ranks the experts itself
// with the topk kernel's code and order of sums, so the logits should be the
// same bits: within 1e-5 of the plan without heads at every step (a block
// reading a stale expert, the down projection reading ids before block
// (0, 0, 0) stored them, or a different ranking would move them by far
// more). The plans without heads are held to the CPU reference by
// GpuQuantMoeWorkload.
//
//===----------------------------------------------------------------------===//
#include "GpuTestUtil.h"

using namespace fg;
using namespace fg::gputest;

TEST(GpuRoutingHeads, MoeLayersMatchTheTopkLaunch) {
  FG_REQUIRE_GPU();
  const char *env = "FG_DEBUG_ROUTING_HEADS";
  compareSwitch(workloadLayers("w-moe-12-q8_0"), 512, 4096, 40, 0, "w-moe-12-q8_0, 2 layers",
                env, "heads");
  compareSwitch(workloadLayers("w-moe-12-q4_k"), 512, 4096, 40, 0, "w-moe-12-q4_k, 2 layers",
                env, "heads");
}
