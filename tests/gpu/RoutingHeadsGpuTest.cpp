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

#include <limits>
#include <numeric>

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

namespace {

/// One token's MoE routing (softmax, top 8 of 128, renormalised) over logits
/// a / b from two integer inputs (so a case plants exact f32 values), and the
/// q4_K gated experts it selects (DP4A at T = 1: the routing runs as their
/// head). Results: the ids, the weights, the gated rows (one a slot, in the
/// ids' order).
Graph headGraph() {
  Graph g;
  Function &fn = g.addFunction("main");
  Builder b(fn);
  constexpr int64_t E = 128, K = 8, N = 64, D = 512;
  ValueId a = b.input("a", {DType::I32, {1, E}});
  ValueId d = b.input("b", {DType::I32, {1, E}});
  ValueId logits =
      b.div(b.convert(a, DType::F32), b.convert(d, DType::F32), "router_logits");
  ValueId p = b.softmax(logits, std::nullopt, 1, 0, "router_probs");
  ValueId ids = b.topK(p, K, "expert_ids");
  ValueId w = b.getRows(p, ids, "expert_weights");
  w = b.div(w, b.clamp(b.sumRows(w), kMoeRenormMin, std::numeric_limits<double>::infinity()),
            "expert_weights_norm");
  ValueId x = b.weight("x", {DType::F32, {1, D}}, randn());
  ValueId gw = b.weight("ffn_gate_exps", {DType::Q4_K, {E, N, D}}, randn(0.05));
  ValueId uw = b.weight("ffn_up_exps", {DType::Q4_K, {E, N, D}}, randn(0.05));
  ValueId xr = b.reshape(x, {1, 1, D}, "x_exp");
  ValueId y = b.glu(b.matmulId(xr, gw, ids, "gate"), b.matmulId(xr, uw, ids, "up"),
                    GluKind::SwiGLU, 1.702, 7.0, "ffn_act");
  b.result(ids);
  b.result(w);
  b.result(y);
  EXPECT_FALSE(bool(b.finish()));
  return g;
}

struct HeadCase {
  const char *name;
  std::vector<int32_t> a, b;
};

/// Logits a / 2^30: distinct multiples of 2^-30 apart by at least 2^10 of
/// them (2^-20), in [-1, 1): the ranking of the logits is the gate's.
HeadCase apartCase() {
  HeadCase c{"apart", std::vector<int32_t>(128), std::vector<int32_t>(128, 1 << 30)};
  std::vector<int32_t> perm(128);
  std::iota(perm.begin(), perm.end(), -64);
  std::mt19937 rng(static_cast<uint32_t>(baseSeed()));
  std::shuffle(perm.begin(), perm.end(), rng);
  for (int e = 0; e < 128; ++e)
    c.a[e] = perm[e] * (1 << 24) + static_cast<int32_t>(rng() % 1024) * 1024;
  return c;
}

/// Experts 3 and 5 in the top 8 with logits one f32 ulp apart near 0.01
/// (2^-30), expert 5 the larger: their probabilities round to one f32, so the
/// gate ranks 3 first (lower index), the logits 5.
HeadCase nearTieCase() {
  HeadCase c{"near tie", std::vector<int32_t>(128), std::vector<int32_t>(128, 1 << 30)};
  for (int e = 0; e < 128; ++e)
    c.a[e] = -(1 << 28) - e * (1 << 20); // -0.25 and below
  for (int e = 0; e < 6; ++e)
    c.a[100 + e] = (1 << 29) + e * (1 << 24); // the six largest, 0.5 and up
  c.a[3] = 10737418;                          // 0.0099999979...
  c.a[5] = 10737419;                          // one ulp (2^-30) more
  return c;
}

/// Seven experts near 100, the rest below -10: the others' probabilities
/// round to 0 and tie, so the gate's eighth is the lowest index among them
/// (expert 0), the logits' eighth the largest of them (expert 127 at -10).
HeadCase underflowCase() {
  HeadCase c{"underflow", std::vector<int32_t>(128), std::vector<int32_t>(128, 1)};
  for (int e = 0; e < 128; ++e)
    c.a[e] = -20 - e % 50;
  for (int e = 0; e < 7; ++e)
    c.a[40 + e] = 100 + e;
  c.a[127] = -10;
  return c;
}

} // namespace

// The blocks that do not store the ids rank the logits themselves
// (EmitOptions::routingHeadRanksLogits, topk.cuh topkRanksLogits) only where
// that is the gate's order: planted near ties and underflowing probabilities,
// where ranking the logits would give other ids or another order, must fall
// back to the whole routing. Every case against the CPU reference with x
// quantised as DP4A does (ids exactly, weights and rows 1e-5), and the same
// bits as the plan whose blocks all run the whole routing.
TEST(GpuRoutingHeads, RankedLogitsKeepTheGatesOrder) {
  const Graph g = headGraph();
  Plan fast = planWithSwitch(g, "FG_DEBUG_HEAD_RANKS_LOGITS", true);
  Plan whole = planWithSwitch(g, "FG_DEBUG_HEAD_RANKS_LOGITS", false);
  auto prog = decodeProgram(fast.section("program")->bytes);
  ASSERT_TRUE(bool(prog)) << errString(prog.takeError());
  size_t heads = 0;
  for (const CompiledEntry &e : prog->entries)
    for (const LaunchRecord &r : e.launches)
      heads += r.what.find("+ routing (") != std::string::npos;
  ASSERT_EQ(heads, 1u) << "the routing did not become the gated launch's head";

  ExecOptions ref;
  ref.cpuActQuant = true;
  auto cpu = Executor::create(fast, ref);
  ASSERT_TRUE(bool(cpu)) << errString(cpu.takeError());
  const std::vector<HeadCase> cases = {apartCase(), nearTieCase(), underflowCase()};
  std::vector<std::vector<int64_t>> wantIds;
  for (const HeadCase &c : cases) {
    ASSERT_FALSE(bool(cpu->setInput("a", c.a)));
    ASSERT_FALSE(bool(cpu->setInput("b", c.b)));
    ASSERT_FALSE(bool(cpu->run("main")));
    auto ids = cpu->output("expert_ids");
    ASSERT_TRUE(bool(ids)) << errString(ids.takeError());
    wantIds.push_back(ids->toInts());
  }
  // The premises: the gate's order is not the logits' in the planted cases.
  EXPECT_EQ(wantIds[1], (std::vector<int64_t>{105, 104, 103, 102, 101, 100, 3, 5}));
  EXPECT_EQ(wantIds[2], (std::vector<int64_t>{46, 45, 44, 43, 42, 41, 40, 0}));

  FG_REQUIRE_GPU();
  Executor gf = makeExecutor(fast, ExecOptions::Device::Cuda);
  Executor gw = makeExecutor(whole, ExecOptions::Device::Cuda);
  for (size_t i = 0; i < cases.size(); ++i) {
    const HeadCase &c = cases[i];
    for (Executor *e : {&gf, &gw, &*cpu}) {
      ASSERT_FALSE(bool(e->setInput("a", c.a)));
      ASSERT_FALSE(bool(e->setInput("b", c.b)));
      ASSERT_FALSE(bool(e->run("main"))) << c.name;
    }
    for (const char *name : {"expert_ids", "expert_weights_norm", "ffn_act"}) {
      auto f = gf.output(name), w = gw.output(name), r = cpu->output(name);
      ASSERT_TRUE(bool(f) && bool(w) && bool(r)) << name;
      EXPECT_EQ(f->data, w->data) << c.name << ": %" << name
                                  << " differs from the plan without ranked logits";
      if (isInteger(r->type.dtype))
        EXPECT_EQ(f->toInts(), r->toInts()) << c.name << ": %" << name;
      else
        EXPECT_LE(normalizedError(f->toFloats(), r->toFloats()), 1e-5) << c.name << ": %" << name;
    }
  }
}
