//===- RoutingHeadsTest.cpp - MoE routing run by the expert GEMV, without a GPU ===//
//
// EmitOptions::routingHeads (codegen/cuda/RoutingHeads.h): two layers of
// W-moe-12 (128 experts, top 8, softmax + renormalisation), q4_K and q8_0
// weights (the DP4A expert GEMVs), compiled with the heads off and on. On, every decode layer's fused.topk_moe launch is gone into the
// gated expert GEMV after it: that record's `what` says so, its arguments
// are its own then the topk launch's (ids, weights, logits), it waits for
// what the topk launch waited for (the router GEMV), the down projection
// (which reads the ids, and weights, block (0, 0, 0) stores) waits for it, and
// every dependency is earlier; the merged kernels compile with NVRTC for
// sm_90 (compile() builds every module); the prefill entry is unchanged.
//
//===----------------------------------------------------------------------===//
#include "tests/unit/codegen/SwitchedProgram.h"

#include "llvm/ADT/StringRef.h"

#include <gtest/gtest.h>

using namespace fg;
using fg::test::entryNamed;

namespace {

CompiledProgram programOf(const Graph &g, bool heads) {
  return test::programWithSwitch(g, "FG_DEBUG_ROUTING_HEADS", heads);
}

size_t countOp(const CompiledEntry &e, OpKind k) {
  size_t n = 0;
  for (const LaunchRecord &l : e.launches)
    n += l.node != kNoNode && l.op == k;
  return n;
}

} // namespace

TEST(RoutingHeads, MoeLayersRouteInTheirGatedExpertGemv) {
  for (const char *name : {"w-moe-12-q4_k", "w-moe-12-q8_0"}) {
    SCOPED_TRACE(name);
    const Graph g = test::workloadLayers(name, 256, {64});
    const CompiledProgram off = programOf(g, false), on = programOf(g, true);
    const CompiledEntry *d0 = entryNamed(off, "decode"), *d1 = entryNamed(on, "decode");
    ASSERT_TRUE(d0 && d1);
    ASSERT_EQ(countOp(*d0, OpKind::FusedTopkMoe), 2u);
    EXPECT_EQ(countOp(*d1, OpKind::FusedTopkMoe), 0u);
    EXPECT_EQ(d1->launches.size(), d0->launches.size() - 2);

    unsigned hosts = 0;
    for (size_t i = 0; i < d1->launches.size(); ++i) {
      const LaunchRecord &l = d1->launches[i];
      SCOPED_TRACE(l.what);
      for (uint32_t dep : l.deps)
        EXPECT_LT(dep, i);
      if (!llvm::StringRef(l.what).contains(" + routing ("))
        continue;
      ++hosts;
      EXPECT_EQ(l.op, OpKind::FusedGatedMatmulId);
      // The same launch without the head, and the topk launch it waited for.
      const LaunchRecord *host = nullptr, *topk = nullptr;
      for (const LaunchRecord &h : d0->launches)
        if (h.node == l.node && h.op == l.op)
          host = &h;
      ASSERT_NE(host, nullptr);
      for (uint32_t dep : host->deps)
        if (d0->launches[dep].op == OpKind::FusedTopkMoe)
          topk = &d0->launches[dep];
      ASSERT_NE(topk, nullptr);
      EXPECT_TRUE(llvm::StringRef(l.symbol).startswith(host->symbol + "_"));
      EXPECT_EQ(l.grid[0], host->grid[0]);
      EXPECT_EQ(l.grid[1], host->grid[1]);
      EXPECT_EQ(l.block[0], host->block[0]);
      ASSERT_EQ(l.args.size(), host->args.size() + topk->args.size());
      for (size_t a = 0; a < host->args.size(); ++a)
        EXPECT_EQ(l.args[a], host->args[a]);
      for (size_t a = 0; a < topk->args.size(); ++a)
        EXPECT_EQ(l.args[host->args.size() + a], topk->args[a]);
      // It waits for the router GEMV (the topk launch's one dependency).
      ASSERT_EQ(topk->deps.size(), 1u);
      const LaunchRecord &router0 = d0->launches[topk->deps.front()];
      bool waitsForRouter = false;
      for (uint32_t dep : l.deps)
        waitsForRouter = waitsForRouter || (d1->launches[dep].node == router0.node &&
                                            d1->launches[dep].op == router0.op);
      EXPECT_TRUE(waitsForRouter);
      // The down projection, which reads the stored ids and weights, waits for it.
      bool downWaits = false;
      for (size_t j = i + 1; j < d1->launches.size(); ++j)
        if (d1->launches[j].op == OpKind::FusedMatmulIdSumAdd ||
            d1->launches[j].op == OpKind::MatMulId)
          downWaits = downWaits || llvm::is_contained(d1->launches[j].deps, uint32_t(i));
      EXPECT_TRUE(downWaits);
    }
    EXPECT_EQ(hosts, 2u);

    // Prefill routes 64 tokens: unchanged.
    const CompiledEntry *p0 = entryNamed(off, "prefill_64"), *p1 = entryNamed(on, "prefill_64");
    ASSERT_TRUE(p0 && p1);
    EXPECT_EQ(p1->launches.size(), p0->launches.size());
  }
}

/// The tensor-core expert GEMV of f16 weights runs 3072 blocks of 128 threads
/// at W-moe's shape, more than the GPU holds at half occupancy: each wave
/// would pay the routing again (measured +14-16 % a step), so its topk
/// launch stays.
TEST(RoutingHeads, ManyWavesKeepTheTopkLaunch) {
  const Graph g = test::workloadLayers("w-moe-12", 256, {});
  const CompiledProgram on = programOf(g, true);
  const CompiledEntry *d = entryNamed(on, "decode");
  ASSERT_TRUE(d);
  EXPECT_EQ(countOp(*d, OpKind::FusedTopkMoe), 2u);
  for (const LaunchRecord &l : d->launches) {
    EXPECT_FALSE(llvm::StringRef(l.what).contains("routing")) << l.what;
    if (l.op == OpKind::FusedGatedMatmulId) {
      EXPECT_GT(uint64_t(l.grid[0]) * l.grid[1] * l.block[0], 132u * 1024) << l.what;
    }
  }
}
