// Memory planning: sharing only along happens-before, views, pinned values,
// weights/state outside the arena, alignment, scratch.
#include "MemoryTestUtil.h"

#include "frontends/DecoderBlocks.h"
#include "frontends/models/Demo.h"
#include "ScheduleSummary.h"

namespace fg {
namespace {

using testing::BruteForce;
using testing::planOrDie;

TensorType f32(std::initializer_list<int64_t> s) { return {DType::F32, s}; }

bool disjoint(const Placement &a, const Placement &b) {
  return a.end() <= b.offset || b.end() <= a.offset;
}

/// x -> a -> b -> c -> d: a and c share bytes, the arena is smaller than the sum.
TEST(BufferPlan, ChainReusesMemory) {
  Function fn("chain");
  Builder b(fn);
  ValueId x = b.input("x", f32({1, 1024})); // 4096 bytes each
  ValueId a = b.unary(OpKind::Silu, x, "a");
  ValueId bb = b.unary(OpKind::Exp, a, "b");
  ValueId c = b.unary(OpKind::Tanh, bb, "c");
  ValueId d = b.unary(OpKind::Sigmoid, c, "d");
  b.result(d);
  ASSERT_FALSE(b.finish());
  auto [dag, plan] = planOrDie(fn);
  EXPECT_EQ(plan.unsharedBytes, 5 * 4096);
  EXPECT_EQ(plan.arenaBytes, 4 * 4096); // x, d pinned; a/c share; b
  EXPECT_EQ(plan.at(a).offset, plan.at(c).offset);
  EXPECT_TRUE(disjoint(plan.at(a), plan.at(bb)));
  EXPECT_TRUE(disjoint(plan.at(bb), plan.at(c)));
  EXPECT_LE(plan.peakLiveBytes, plan.arenaBytes);
  EXPECT_EQ(plan.peakLiveBytes, 4 * 4096); // at b's launch: x, d, a, b
  EXPECT_FALSE(verifyNoOverlap(fn, plan, dag));
  EXPECT_EQ(BruteForce(fn).check(plan), "");
  EXPECT_TRUE(proveNoOverlap(fn, plan).empty());
}

/// a -> {b, c} -> d: b and c are parallel (disjoint); d may take a's bytes.
TEST(BufferPlan, DiamondBranchesNeverShare) {
  Function fn("diamond");
  Builder b(fn);
  ValueId x = b.input("x", f32({1, 1024}));
  ValueId a = b.unary(OpKind::Silu, x, "a");
  ValueId bb = b.unary(OpKind::Exp, a, "b");
  ValueId c = b.unary(OpKind::Tanh, a, "c");
  ValueId d = b.add(bb, c, "d");
  ValueId e = b.unary(OpKind::Sqr, d, "e");
  b.result(e);
  ASSERT_FALSE(b.finish());
  auto [dag, plan] = planOrDie(fn);
  EXPECT_TRUE(disjoint(plan.at(bb), plan.at(c)));
  EXPECT_TRUE(disjoint(plan.at(a), plan.at(bb)));
  EXPECT_TRUE(disjoint(plan.at(a), plan.at(c)));
  EXPECT_EQ(plan.at(d).offset, plan.at(a).offset); // best fit: a's freed slot
  EXPECT_EQ(plan.arenaBytes, 5 * 4096);
  EXPECT_FALSE(verifyNoOverlap(fn, plan, dag));
  EXPECT_EQ(BruteForce(fn).check(plan), "");
}

/// q, k, v ∥; q2 = silu(q) etc. In program order q is dead before k2 is
/// defined, but q2 ∥ k2 in the DAG, so q and k2 must not share.
TEST(BufferPlan, QkvBranchesNeverShare) {
  Function fn("qkv");
  Builder b(fn);
  ValueId x = b.input("x", f32({1, 256}));
  ValueId q = b.matmul(x, b.weight("wq", {DType::F16, {64, 256}}), "q");
  ValueId k = b.matmul(x, b.weight("wk", {DType::F16, {64, 256}}), "k");
  ValueId v = b.matmul(x, b.weight("wv", {DType::F16, {64, 256}}), "v");
  ValueId q2 = b.unary(OpKind::Silu, q, "q2");
  ValueId k2 = b.unary(OpKind::Silu, k, "k2");
  ValueId v2 = b.unary(OpKind::Silu, v, "v2");
  ValueId s = b.add(b.add(q2, k2, "qk"), v2, "s");
  b.result(s);
  ASSERT_FALSE(b.finish());
  auto [dag, plan] = planOrDie(fn);
  std::vector<ValueId> branch = {q, k, v, q2, k2, v2};
  for (ValueId p : branch)
    for (ValueId o : branch) {
      if (p == o)
        continue;
      EXPECT_TRUE(disjoint(plan.at(p), plan.at(o)))
          << valueLabel(fn, p) << " vs " << valueLabel(fn, o);
    }
  EXPECT_FALSE(verifyNoOverlap(fn, plan, dag));
  EXPECT_EQ(BruteForce(fn).check(plan), "");
  EXPECT_EQ(summarizeSchedule(dag).parallelBranches, 2u);
}

/// A dense view narrows its base's slice; uses of a view keep the base alive.
TEST(BufferPlan, ViewsShareSlicesAndExtendLiveness) {
  Function fn("views");
  Builder b(fn);
  ValueId x = b.input("x", f32({4, 64}));
  ValueId a = b.unary(OpKind::Silu, x, "a");
  ValueId v = b.view(a, {2, 64}, {64, 1}, 128, "v"); // rows 2..3
  ValueId e = b.unary(OpKind::Exp, a, "e");          // a's only direct use
  ValueId c = b.unary(OpKind::Sqr, e, "c");          // after e, parallel to the view's user
  ValueId d = b.unary(OpKind::Tanh, v, "d");         // reads a through the view
  b.result(b.add(c, b.concat(d, d, 0, "dd"), "r"));
  ASSERT_FALSE(b.finish());
  auto [dag, plan] = planOrDie(fn);
  const Placement &pa = plan.at(a), &pv = plan.at(v);
  EXPECT_EQ(pv.loc, Location::Arena);
  EXPECT_EQ(pv.buffer, a);
  EXPECT_EQ(pv.offset, pa.offset + 128 * 4);
  EXPECT_EQ(pv.size, 2 * 64 * 4);
  EXPECT_EQ(pv.dataOffset, pv.offset);
  EXPECT_TRUE(pv.contiguous);
  EXPECT_EQ(pv.strides, (Shape{64, 1}));
  EXPECT_TRUE(disjoint(plan.at(c), pa)) << "the view's user keeps a alive";
  EXPECT_FALSE(verifyNoOverlap(fn, plan, dag));
  EXPECT_EQ(BruteForce(fn).check(plan), "");
}

/// Transposed and permuted views keep the base's range, with permuted strides;
/// a strided view of a transposed value is not addressable.
TEST(BufferPlan, StridedViewsKeepTheBaseRange) {
  Function fn("strided");
  Builder b(fn);
  ValueId x = b.input("x", f32({2, 3, 4}));
  ValueId a = b.unary(OpKind::Silu, x, "a");
  ValueId t = b.transpose(a, "t");                  // [2, 4, 3]
  ValueId p = b.permute(a, {2, 0, 1}, "p");         // [4, 2, 3]
  ValueId sv = b.view(a, {2, 2}, {12, 1}, 1, "sv"); // strided slice
  ValueId tv = b.view(t, {2}, {1}, 0, "tv");        // a view of a transposed value
  b.result(b.cont(t, "tc"));
  b.result(b.cont(p, "pc"));
  b.result(b.cont(sv, "svc"));
  b.result(b.cont(tv, "tvc"));
  ASSERT_FALSE(b.finish());
  auto [dag, plan] = planOrDie(fn);
  const Placement &pa = plan.at(a);
  EXPECT_EQ(plan.at(t).offset, pa.offset);
  EXPECT_EQ(plan.at(t).size, pa.size);
  EXPECT_EQ(plan.at(t).strides, (Shape{12, 1, 4}));
  EXPECT_FALSE(plan.at(t).contiguous);
  EXPECT_EQ(plan.at(p).strides, (Shape{1, 12, 4}));
  // sv touches elements 1, 2, 13, 14: bytes [4, 60) of a.
  EXPECT_EQ(plan.at(sv).offset, pa.offset + 4);
  EXPECT_EQ(plan.at(sv).size, 56);
  EXPECT_FALSE(plan.at(sv).contiguous);
  EXPECT_FALSE(plan.at(tv).addressable);
  EXPECT_EQ(plan.at(tv).offset, pa.offset);
  EXPECT_EQ(plan.at(tv).size, pa.size);
  EXPECT_FALSE(verifyNoOverlap(fn, plan, dag));
  EXPECT_EQ(BruteForce(fn).check(plan), "");
}

/// Weights, state and state versions live in their own buffers; the arena
/// holds only activations.
TEST(BufferPlan, WeightsAndStateOutsideTheArena) {
  Function fn("state");
  Builder b(fn);
  ValueId pos = b.input("positions", {DType::I32, {1}});
  ValueId x = b.input("x", f32({1, 16}));
  ValueId w = b.weight("w", {DType::F16, {16, 16}});
  ValueId kc = b.state("k_cache", {DType::F16, {16, 2, 8}});
  ValueId kv = b.reshape(b.matmul(x, w, "k"), {1, 2, 8}, "k3");
  ValueId kc1 = b.setRows(kc, kv, pos, "k_cache.1");
  ValueId rows = b.view(kc1, {4, 2, 8}, {16, 8, 1}, 32, "rows");
  ValueId att =
      b.attention(b.reshape(x, {1, 2, 8}, "q"), kc1, kc1, pos, {0.5, 0, 0}, std::nullopt, "att");
  ValueId got = b.getRows(b.reshape(rows, {4, 16}, "rows2"), pos, "got");
  b.result(att);
  b.result(got);
  ASSERT_FALSE(b.finish());
  auto [dag, plan] = planOrDie(fn);
  EXPECT_EQ(plan.at(w).loc, Location::Weight);
  EXPECT_EQ(plan.at(w).buffer, w);
  EXPECT_EQ(plan.at(kc).loc, Location::State);
  EXPECT_EQ(plan.at(kc1).loc, Location::State);
  EXPECT_EQ(plan.at(kc1).buffer, kc);
  EXPECT_EQ(plan.at(kc1).offset, 0);
  EXPECT_EQ(plan.at(kc1).size, 16 * 2 * 8 * 2);
  EXPECT_EQ(plan.at(rows).loc, Location::State);
  EXPECT_EQ(plan.at(rows).offset, 32 * 2);
  EXPECT_EQ(plan.at(rows).size, 4 * 16 * 2);
  // Arena: positions, x, att, got pinned (256 each after alignment), k (64 B -> 256).
  EXPECT_EQ(plan.arenaBytes, 5 * 256);
  EXPECT_FALSE(verifyNoOverlap(fn, plan, dag));
  EXPECT_TRUE(proveNoOverlap(fn, plan).empty());
}

/// Inputs and results keep their slices for the whole run.
TEST(BufferPlan, InputsAndResultsAreNeverReused) {
  Function fn("pinned");
  Builder b(fn);
  ValueId x = b.input("x", f32({1, 1024}));
  ValueId a = b.unary(OpKind::Silu, x, "a");
  ValueId bb = b.unary(OpKind::Exp, a, "b");
  ValueId c = b.unary(OpKind::Tanh, bb, "c");
  ValueId d = b.unary(OpKind::Sqr, c, "d");
  ValueId e = b.unary(OpKind::Sqrt, d, "e");
  b.result(a); // an early result: dead after b in the DAG, but returned
  b.result(e);
  ASSERT_FALSE(b.finish());
  auto [dag, plan] = planOrDie(fn);
  EXPECT_TRUE(plan.at(x).pinned);
  EXPECT_TRUE(plan.at(a).pinned);
  EXPECT_FALSE(plan.at(bb).pinned);
  for (ValueId v : {bb, c, d, e})
    for (ValueId p : {x, a})
      EXPECT_TRUE(disjoint(plan.at(v), plan.at(p))) << valueLabel(fn, v);
  EXPECT_EQ(plan.at(bb).offset, plan.at(d).offset); // the unpinned ones still share
  EXPECT_FALSE(verifyNoOverlap(fn, plan, dag));
  EXPECT_EQ(BruteForce(fn).check(plan), "");
}

/// Every arena offset is a multiple of the alignment; odd sizes round up.
TEST(BufferPlan, Alignment) {
  Function fn("odd");
  Builder b(fn);
  ValueId x = b.input("x", f32({1, 3})); // 12 bytes
  ValueId a = b.unary(OpKind::Silu, x, "a");
  ValueId bb = b.unary(OpKind::Exp, x, "b");
  b.result(b.add(a, bb, "c"));
  ASSERT_FALSE(b.finish());
  for (int64_t align : {256, 1024}) {
    MemoryPlanOptions opts;
    opts.alignment = align;
    auto [dag, plan] = planOrDie(fn, opts);
    for (ValueId v = 0; v < fn.numValues(); ++v) {
      EXPECT_EQ(plan.at(v).offset % align, 0) << valueLabel(fn, v);
      EXPECT_EQ(plan.at(v).size, 12);
    }
    EXPECT_EQ(plan.arenaBytes, 4 * align);
    EXPECT_FALSE(verifyNoOverlap(fn, plan, dag));
  }
  auto dag = LaunchDag::build(fn);
  ASSERT_TRUE(static_cast<bool>(dag));
  MemoryPlanOptions bad;
  bad.alignment = 100;
  auto plan = planMemory(fn, *dag, bad);
  ASSERT_FALSE(static_cast<bool>(plan));
  EXPECT_NE(llvm::toString(plan.takeError()).find("alignment 100 is not a power of two"),
            std::string::npos);
}

/// Scratch is live only during its node: disjoint from that node's operands
/// and results, reusable by later values.
TEST(BufferPlan, ScratchLivesOnlyDuringItsNode) {
  Function fn("scratch");
  Builder b(fn);
  ValueId x = b.input("x", f32({1, 256}));
  ValueId a = b.matmul(x, b.weight("w", {DType::F16, {256, 256}}), "a"); // 1024 B
  ValueId s = b.unary(OpKind::Silu, a, "s");
  ValueId e = b.unary(OpKind::Exp, s, "e");
  b.result(e);
  ASSERT_FALSE(b.finish());
  MemoryPlanOptions opts;
  opts.scratchBytes = [](const Function &f, NodeId n) -> int64_t {
    return f.node(n).kind == OpKind::MatMul ? 1000 : 0;
  };
  auto [dag, plan] = planOrDie(fn, opts);
  const ScratchSlice &sc = plan.scratch[0];
  EXPECT_EQ(sc.size, 1000);
  EXPECT_EQ(sc.offset % 256, 0);
  Placement scp;
  scp.loc = Location::Arena;
  scp.offset = sc.offset;
  scp.size = sc.size;
  EXPECT_TRUE(disjoint(scp, plan.at(a)));
  EXPECT_TRUE(disjoint(scp, plan.at(x)));
  EXPECT_TRUE(disjoint(scp, plan.at(e)));
  EXPECT_EQ(plan.at(s).offset, sc.offset); // s is defined after the matmul ends
  EXPECT_EQ(plan.scratch[1].size, 0);
  EXPECT_FALSE(verifyNoOverlap(fn, plan, dag));
  // Planted: the scratch moved onto the matmul's own result is caught.
  plan.scratch[0].offset = plan.at(a).offset;
  llvm::Error err = verifyNoOverlap(fn, plan, dag);
  ASSERT_TRUE(static_cast<bool>(err));
  EXPECT_NE(llvm::toString(std::move(err)).find("scratch of %a"), std::string::npos);

  opts.scratchBytes = [](const Function &, NodeId) -> int64_t { return -1; };
  auto bad = planMemory(fn, dag, opts);
  ASSERT_FALSE(static_cast<bool>(bad));
  EXPECT_NE(llvm::toString(bad.takeError()).find("negative scratch"), std::string::npos);
}

/// A decoder layer built by hand: embedding, attention with KV-cache writes,
/// gated FFN, logits.
TEST(BufferPlan, DecoderLayerByHand) {
  const int64_t E = 64, H = 4, KV = 2, D = 16, F = 128, V = 100, C = 32;
  Function fn("decode");
  Builder b(fn);
  ValueId tokens = b.input("tokens", {DType::I32, {1}});
  ValueId pos = b.input("positions", {DType::I32, {1}});
  auto w = [&](const char *n, std::initializer_list<int64_t> s, DType t = DType::F16) {
    return b.weight(n, {t, s});
  };
  ValueId emb = w("token_embd", {V, E});
  ValueId attnNorm = w("blk.0.attn_norm", {E}, DType::F32);
  ValueId wq = w("blk.0.attn_q", {H * D, E}), wk = w("blk.0.attn_k", {KV * D, E});
  ValueId wv = w("blk.0.attn_v", {KV * D, E}), wo = w("blk.0.attn_output", {E, H * D});
  ValueId ffnNorm = w("blk.0.ffn_norm", {E}, DType::F32);
  ValueId wg = w("blk.0.ffn_gate", {F, E}), wu = w("blk.0.ffn_up", {F, E});
  ValueId wd = w("blk.0.ffn_down", {E, F});
  ValueId outNorm = w("output_norm", {E}, DType::F32), wout = w("output", {V, E});
  ValueId kc = b.state("k_cache.0", {DType::F16, {C, KV, D}});
  ValueId vc = b.state("v_cache.0", {DType::F16, {C, KV, D}});

  ValueId x = b.getRows(emb, tokens, "x");
  ValueId n = b.mul(b.rmsNorm(x, 1e-6), attnNorm, "attn_in");
  ValueId q = b.rope(b.reshape(b.matmul(n, wq, "q"), {1, H, D}), pos, {}, std::nullopt, "q_rope");
  ValueId k = b.rope(b.reshape(b.matmul(n, wk, "k"), {1, KV, D}), pos, {}, std::nullopt, "k_rope");
  ValueId v = b.reshape(b.matmul(n, wv, "v"), {1, KV, D}, "v3");
  ValueId kc1 = b.setRows(kc, k, pos, "k_cache.0.1");
  ValueId vc1 = b.setRows(vc, v, pos, "v_cache.0.1");
  ValueId att = b.attention(q, kc1, vc1, pos, {0.25, 0, 0}, std::nullopt, "att");
  ValueId h = b.add(b.matmul(b.reshape(att, {1, H * D}), wo, "attn_out"), x, "h");
  ValueId fn2 = b.mul(b.rmsNorm(h, 1e-6), ffnNorm, "ffn_in");
  ValueId g = b.glu(b.matmul(fn2, wg, "gate"), b.matmul(fn2, wu, "up"), GluKind::SwiGLU);
  ValueId h2 = b.add(b.matmul(g, wd, "ffn_out"), h, "h2");
  ValueId logits = b.matmul(b.mul(b.rmsNorm(h2, 1e-6), outNorm), wout, "logits");
  b.result(logits);
  ASSERT_FALSE(b.finish());

  auto [dag, plan] = planOrDie(fn);
  EXPECT_FALSE(verifyNoOverlap(fn, plan, dag));
  EXPECT_EQ(BruteForce(fn).check(plan), "");
  EXPECT_TRUE(proveNoOverlap(fn, plan).empty());
  EXPECT_LT(plan.arenaBytes, plan.unsharedBytes);
  EXPECT_LE(plan.peakLiveBytes, plan.arenaBytes);
  auto launchOfValue = [&, &dag = dag](ValueId val) { return dag.launchOf(fn.value(val).def); };
  LaunchId lq = launchOfValue(fn.lookup("q")), lk = launchOfValue(fn.lookup("k")),
           lv = launchOfValue(fn.lookup("v"));
  EXPECT_FALSE(dag.ordered(lq, lk));
  EXPECT_FALSE(dag.ordered(lk, lv));
  EXPECT_FALSE(dag.ordered(lq, lv));
  EXPECT_TRUE(dag.happensBefore(launchOfValue(kc1), launchOfValue(att)));
  EXPECT_TRUE(dag.happensBefore(launchOfValue(vc1), launchOfValue(att)));
  EXPECT_FALSE(dag.ordered(launchOfValue(fn.lookup("gate")), launchOfValue(fn.lookup("up"))));
  EXPECT_EQ(plan.at(kc1).loc, Location::State);
  EXPECT_EQ(plan.at(kc1).buffer, kc);
  EXPECT_EQ(plan.at(vc1).buffer, vc);
  EXPECT_GE(summarizeSchedule(dag).parallelBranches, 3u);
}

/// The demo decoder (every entry) plans safely.
TEST(BufferPlan, DemoDecoderPlansSafely) {
  auto g = buildDemoGraph(/*ctx=*/64, {8});
  ASSERT_TRUE(static_cast<bool>(g)) << llvm::toString(g.takeError());
  for (const Function &fn : g->functions()) {
    auto [dag, plan] = planOrDie(fn);
    EXPECT_FALSE(verifyNoOverlap(fn, plan, dag)) << fn.name().str();
    EXPECT_EQ(BruteForce(fn).check(plan), "") << fn.name().str();
    EXPECT_TRUE(proveNoOverlap(fn, plan).empty()) << fn.name().str();
    EXPECT_LT(plan.arenaBytes, plan.unsharedBytes) << fn.name().str();
    EXPECT_GT(summarizeSchedule(dag).parallelBranches, 0u);
  }
}

} // namespace
} // namespace fg
