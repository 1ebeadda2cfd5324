//===- AttentionGpuTest.cpp - decode/prefill attention vs the reference ----===//
//
// The flash-decoding kernel (codegen/cuda/kernels/attention.cuh) against the
// CPU reference: KV lengths {1, 33, 1024, 5000} × head dims {64, 128, 256} ×
// GQA groups {1, 4, 8} × f16 and f32 caches at T = 1; then T = 5 (a prefill
// chunk, causal by position), windows, softcap, sinks, bf16, Dv ≠ D, head
// dims that are not multiples of 32 or 8 (element loads), a group of 12 (two
// head chunks), D = 512 (dv slices), and replays of one graph: bit-identical
// outputs, also after a step with another split count in between (the
// split counters are cleared and reset every run). The cluster form (the
// default on caches of up to 4096 rows; these cases' cache has 8192) at
// its own lengths and shapes, and the split forms with it off.
//
//===----------------------------------------------------------------------===//
#include "GpuTestUtil.h"

#include <cstring>

using namespace fg;
using namespace fg::gputest;

namespace {

constexpr int64_t kCtx = 8192;

struct AttnCase {
  int64_t live;     ///< rows visible to the last query (its position + 1)
  int64_t headDim;
  int64_t group = 4; ///< query heads per kv head
  DType cache = DType::F16;
  int64_t tokens = 1;
  int64_t window = 0;
  double softcap = 0;
  bool sinks = false;
  int64_t valueDim = 0; ///< 0: = headDim
  int64_t kvHeads = 2;
};

Graph buildGraph(const AttnCase &c) { return attentionGraph(c, kCtx); }

Inputs positionsFor(const AttnCase &c, int64_t live) {
  Inputs in;
  for (int64_t t = 0; t < c.tokens; ++t)
    in["positions"].push_back(static_cast<int32_t>(std::max<int64_t>(live - c.tokens + t, 0)));
  return in;
}

double tolerance(DType cache) { return cache == DType::BF16 ? 1e-3 : 5e-5; }

/// One graph of `c` over a cache of `ctx` rows replayed at `live` rows twice,
/// at `other` and at `live` again: the same bits each time at `live`
/// (nothing a run leaves behind changes the next), other bits at `other`.
void expectReplaysBitIdentical(const AttnCase &c, int64_t ctx, int64_t live, int64_t other) {
  CompileOptions co;
  co.ctx = ctx;
  auto gpu = gpuGraphExecutor(attentionGraph(c, ctx), co);
  ASSERT_TRUE(gpu.has_value());
  auto step = [&](int64_t n) { return runBytes(*gpu, positionsFor(c, n)); };
  std::vector<uint8_t> a = step(live), b = step(live), mid = step(other), d = step(live);
  ASSERT_FALSE(a.empty());
  EXPECT_EQ(a, b) << "two replays differ";
  EXPECT_EQ(a, d) << "a replay after another length differs";
  EXPECT_NE(a, mid);
}

void runCase(const AttnCase &c) {
  Graph g = buildGraph(c);
  // Chunks of 9+ queries over 16-bit caches take the flash prefill kernel,
  // whose q and P are one rounded half each (AttentionPrefillGpuTest.cpp).
  double tol = c.tokens >= 9 && c.cache != DType::F32 ? 5e-3 : tolerance(c.cache);
  expectMatchesReference(g, positionsFor(c, c.live), tol, "main", /*eager=*/false, kCtx);
}

using GridParam = std::tuple<int64_t, int64_t, int64_t, DType>;
class GpuAttention : public ::testing::TestWithParam<GridParam> {};

/// T = 1 over KV lengths × head dims × GQA groups × cache dtypes.
TEST_P(GpuAttention, DecodeStep) {
  FG_REQUIRE_GPU();
  auto [live, hd, group, cache] = GetParam();
  runCase({live, hd, group, cache});
}

INSTANTIATE_TEST_SUITE_P(Grid, GpuAttention,
                         ::testing::Combine(::testing::Values(1, 33, 1024, 5000),
                                            ::testing::Values(64, 128, 256),
                                            ::testing::Values(1, 4, 8),
                                            ::testing::Values(DType::F16, DType::F32)),
                         [](const auto &info) {
                           return "live" + std::to_string(std::get<0>(info.param)) + "_d" +
                                  std::to_string(std::get<1>(info.param)) + "_g" +
                                  std::to_string(std::get<2>(info.param)) + "_" +
                                  std::string(dtypeName(std::get<3>(info.param)));
                         });

/// T = 5 (a prefill chunk: query t sees rows <= live - 5 + t) over the same
/// lengths and head dims, group 4.
class GpuAttentionPrefill
    : public ::testing::TestWithParam<std::tuple<int64_t, int64_t, DType>> {};

TEST_P(GpuAttentionPrefill, FiveTokens) {
  FG_REQUIRE_GPU();
  auto [live, hd, cache] = GetParam();
  AttnCase c{live, hd, 4, cache};
  c.tokens = 5;
  runCase(c);
}

INSTANTIATE_TEST_SUITE_P(Grid, GpuAttentionPrefill,
                         ::testing::Combine(::testing::Values(5, 33, 1024, 5000),
                                            ::testing::Values(64, 128, 256),
                                            ::testing::Values(DType::F16, DType::F32)),
                         [](const auto &info) {
                           return "live" + std::to_string(std::get<0>(info.param)) + "_d" +
                                  std::to_string(std::get<1>(info.param)) + "_" +
                                  std::string(dtypeName(std::get<2>(info.param)));
                         });

TEST(GpuAttentionOptions, Window8) {
  FG_REQUIRE_GPU();
  AttnCase c{1500, 128};
  c.window = 8;
  runCase(c);
}

TEST(GpuAttentionOptions, Window100LongKvF32) {
  FG_REQUIRE_GPU();
  AttnCase c{5000, 64, 8, DType::F32};
  c.window = 100;
  runCase(c);
}

TEST(GpuAttentionOptions, Window8Prefill) {
  FG_REQUIRE_GPU();
  AttnCase c{40, 64};
  c.tokens = 12;
  c.window = 8;
  runCase(c);
}

TEST(GpuAttentionOptions, SoftcapAndSinks) {
  FG_REQUIRE_GPU();
  AttnCase c{777, 128};
  c.softcap = 30.0;
  c.sinks = true;
  runCase(c);
}

TEST(GpuAttentionOptions, SinksPrefillFiveTokensGroup8) {
  FG_REQUIRE_GPU();
  AttnCase c{5000, 256, 8};
  c.tokens = 5;
  c.sinks = true;
  c.softcap = 50.0;
  runCase(c);
}

TEST(GpuAttentionOptions, SinkOnlyKvLength1) {
  FG_REQUIRE_GPU();
  AttnCase c{1, 128, 1, DType::F32};
  c.sinks = true;
  runCase(c);
}

TEST(GpuAttentionOptions, PrefillChunkCausal) {
  FG_REQUIRE_GPU();
  AttnCase c{100, 128};
  c.tokens = 64;
  runCase(c);
}

TEST(GpuAttentionOptions, Bf16Cache) {
  FG_REQUIRE_GPU();
  for (int64_t live : {33, 5000})
    runCase({live, 128, 8, DType::BF16});
}

TEST(GpuAttentionOptions, ValueDimDiffers) {
  FG_REQUIRE_GPU();
  AttnCase c{1024, 192, 4};
  c.valueDim = 128;
  runCase(c);
  c.cache = DType::F32;
  c.live = 33;
  runCase(c);
}

TEST(GpuAttentionOptions, HeadDimsNotMultiplesOf32) {
  FG_REQUIRE_GPU();
  runCase({1024, 80, 4});               // 16-byte loads, a partial 32-chunk
  runCase({33, 36, 4});                 // element loads
  runCase({1024, 36, 4, DType::F32});
}

TEST(GpuAttentionOptions, Group12TwoHeadChunks) {
  FG_REQUIRE_GPU();
  runCase({1024, 64, 12});
  AttnCase c{5000, 128, 12};
  c.sinks = true;
  runCase(c);
}

TEST(GpuAttentionOptions, HeadDim512DvSlices) {
  FG_REQUIRE_GPU();
  runCase({1024, 512, 4});
  runCase({33, 320, 2, DType::F32});
}

TEST(GpuAttentionOptions, WDenseShape) {
  FG_REQUIRE_GPU();
  AttnCase c{1024, 128, 4};
  c.kvHeads = 8;
  runCase(c);
  c.live = kCtx;
  runCase(c);
}

/// The split form's tree merge (attention.cuh, attnMergeSplits; opt-in,
/// FG_DEBUG_ATTN_MERGE_GROUP): W-moe's shape (8 q heads a kv head, 4 kv
/// heads) at a full cache (32 splits), at 5003 rows with sinks (33: the last
/// group short for groups of 2 and 9), at 1500 (the hybrid's register path:
/// 24 splits) and 33 (one split: one level), and a 3-token chunk, with
/// groups of 2, 3 and 9 and without (one block merges all) — each against
/// the reference; replays bit-identical with groups of 3, also after a
/// one-level step.
TEST(GpuAttentionOptions, TreeMerge) {
  FG_REQUIRE_GPU();
  ScopedEnv noCluster("FG_DEBUG_ATTN_CLUSTER", "0");
  for (const char *group : {"9", "2", "3", ""}) {
    SCOPED_TRACE(std::string("merge group '") + group + "'");
    ScopedEnv e("FG_DEBUG_ATTN_MERGE_GROUP", group);
    AttnCase moe{kCtx, 128, 8};
    moe.kvHeads = 4;
    runCase(moe);
    moe.live = 5003;
    moe.sinks = true;
    runCase(moe);
    moe.live = 1500;
    runCase(moe);
    moe.live = 33;
    runCase(moe);
    AttnCase chunk{4099, 64, 8, DType::F16, 3};
    runCase(chunk);
  }
  ScopedEnv e("FG_DEBUG_ATTN_MERGE_GROUP", "3");
  AttnCase moe{5003, 128, 8};
  moe.kvHeads = 4;
  moe.sinks = true;
  expectReplaysBitIdentical(moe, kCtx, 5003, 33);
}

/// `ac` compiled over a cache of `ctx` rows with `env` set to `off` and to
/// `on`: each plan's replays give the same bits, and so do the two plans.
void expectSwitchBitIdentical(const AttnCase &ac, const char *env, const char *off = "0",
                              const char *on = "1", int64_t ctx = 4096) {
  const Graph g = attentionGraph(ac, ctx);
  auto bits = [&](const char *value) {
    ScopedEnv e(env, value);
    CompileOptions co;
    co.ctx = ctx;
    auto gpu = gpuGraphExecutor(g, co);
    if (!gpu)
      return std::vector<uint8_t>{};
    std::vector<uint8_t> a = runBytes(*gpu, positionsFor(ac, ac.live));
    EXPECT_EQ(runBytes(*gpu, positionsFor(ac, ac.live)), a) << "a replay differs";
    return a;
  };
  const std::vector<uint8_t> offBits = bits(off), onBits = bits(on);
  ASSERT_FALSE(offBits.empty());
  EXPECT_EQ(onBits, offBits) << env << "=" << on << " changed the bits";
}

/// The split form's merge (attnMergeSplits) on W-moe's shape at a full cache
/// and at 5003 rows with sinks, W-dense's, a group of 9 (a padded head) with
/// Dv 80 and 3 tokens, a window with softcap and sinks — against the
/// reference, and to the same bits with the o loop in batches of 32
/// (FG_DEBUG_ATTN_MERGE_UNROLL=32); replays bit-identical, also after a
/// one-split step. (A one-pass form passed this test too, thirty-eighth
/// session, and was slower.)
TEST(GpuAttentionOptions, SplitMergeShapes) {
  FG_REQUIRE_GPU();
  ScopedEnv noCluster("FG_DEBUG_ATTN_CLUSTER", "0");
  AttnCase moe{kCtx, 128, 8};
  moe.kvHeads = 4;
  AttnCase moeSinks = moe;
  moeSinks.live = 5003;
  moeSinks.sinks = true;
  AttnCase dense{kCtx, 128, 4};
  dense.kvHeads = 8;
  AttnCase odd{4001, 96, 9, DType::F16, 3};
  odd.valueDim = 80;
  AttnCase window{6000, 64, 4};
  window.window = 3000;
  window.softcap = 30.0;
  window.sinks = true;
  for (const AttnCase &c : {moe, moeSinks, dense, odd, window}) {
    SCOPED_TRACE("live " + std::to_string(c.live) + " group " + std::to_string(c.group) +
                 " kv heads " + std::to_string(c.kvHeads));
    runCase(c);
    // Batches of 32 partials while 32 are left (FG_DEBUG_ATTN_MERGE_UNROLL=32)
    // add in the same order: the same bits.
    expectSwitchBitIdentical(c, "FG_DEBUG_ATTN_MERGE_UNROLL", "", "32", kCtx);
  }
  expectReplaysBitIdentical(moeSinks, kCtx, 5003, 33);
}

/// The load forms and ring depths of the flash-decoding kernel: register
/// loads only (FG_DEBUG_ATTN_STAGES=0, the form before the cp.async ring),
/// the default hybrid (register loads up to 2048 live rows, then the ring),
/// and the ring at every length (FG_DEBUG_ATTN_REG_MAX_LIVE=0) with 2, 3
/// and 4 stages, tiles of 2 steps, a grid sized for 1 and 3 blocks per SM —
/// each against the reference on lengths that end mid-tile, T = 5, f32
/// caches, D = 256 and a window. The splits merge through global memory
/// here (FG_DEBUG_ATTN_CLUSTER=0; the cluster form, the default on caches of
/// up to 4096 rows: ClusterForm below).
TEST(GpuAttentionOptions, LoadFormsAndRingDepths) {
  FG_REQUIRE_GPU();
  ScopedEnv noCluster("FG_DEBUG_ATTN_CLUSTER", "0");
  struct Form {
    const char *stages, *steps, *blocks, *regMaxLive, *minTiles;
  };
  // The last two give each warp 4+ tiles per split at D = 64, so every slot
  // of a 3-stage ring of 2-step tiles and of a 2-stage ring is reused.
  for (Form f : {Form{"0", "", "", "", ""}, Form{"", "", "", "", ""}, Form{"2", "", "", "0", ""},
                 Form{"4", "", "", "0", ""}, Form{"3", "2", "", "0", ""}, Form{"", "", "1", "0", ""},
                 Form{"", "2", "3", "0", ""}, Form{"", "", "", "1000", ""},
                 Form{"3", "2", "", "0", "4"}, Form{"2", "", "", "0", "8"}}) {
    SCOPED_TRACE(std::string("stages '") + f.stages + "' steps '" + f.steps + "' blocks '" +
                 f.blocks + "' reg max live '" + f.regMaxLive + "' min tiles '" + f.minTiles +
                 "'");
    ScopedEnv st("FG_DEBUG_ATTN_STAGES", f.stages), sp("FG_DEBUG_ATTN_STEPS", f.steps),
        bl("FG_DEBUG_ATTN_BLOCKS_PER_SM", f.blocks), rm("FG_DEBUG_ATTN_REG_MAX_LIVE", f.regMaxLive),
        mt("FG_DEBUG_ATTN_MIN_TILES", f.minTiles);
    AttnCase dense{5003, 128, 4};
    dense.kvHeads = 8;
    runCase(dense);
    AttnCase narrow{5003, 64, 4};
    narrow.kvHeads = 8;
    runCase(narrow);
    runCase({1021, 256, 8, DType::F32});
    AttnCase chunk{997, 64, 4, DType::F16, 5};
    chunk.window = 300;
    runCase(chunk);
    runCase({7, 128, 1, DType::BF16});
  }
}

/// The cluster form (EmitOptions::attentionCluster, on by default for caches
/// of up to 4096 rows: a (kv head, token)'s
/// splits are one thread-block cluster; each block sends its partial of head
/// h into block h's shared memory and block h merges it): against the
/// reference with clusters of 8 and 4 blocks of 8 and 4 warps (and tiles of
/// 3 steps, FG_DEBUG_ATTN_CLUSTER_STEPS), on a cache of
/// 2048 rows (the form's home: register loads) at lengths of one key, one
/// split, past one round and the whole cache, with sinks, a group of 12 (two
/// head chunks of 6), a group of 9 (a padded head), a window and T = 5,
/// softcap, f32 and bf16 caches; on a 4096-row cache, the longest it takes
/// (4+ rounds a warp); and replays of one graph to the same bits, also
/// after a shorter step.
TEST(GpuAttentionOptions, ClusterForm) {
  FG_REQUIRE_GPU();
  constexpr int64_t kShort = 2048;
  auto runShort = [&](const AttnCase &c) {
    expectMatchesReference(attentionGraph(c, kShort), positionsFor(c, c.live),
                           tolerance(c.cache), "main", /*eager=*/false, kShort);
  };
  struct Form {
    const char *cluster, *warps, *steps;
  };
  for (Form f : {Form{"8", "8", ""}, Form{"8", "4", ""}, Form{"4", "8", ""}, Form{"8", "8", "3"}}) {
    SCOPED_TRACE(std::string("cluster ") + f.cluster + " warps " + f.warps + " steps '" + f.steps +
                 "'");
    ScopedEnv cl("FG_DEBUG_ATTN_CLUSTER", f.cluster), wa("FG_DEBUG_ATTN_CLUSTER_WARPS", f.warps),
        st("FG_DEBUG_ATTN_CLUSTER_STEPS", f.steps);
    for (int64_t live : {int64_t{1}, int64_t{100}, int64_t{1025}, kShort}) {
      AttnCase dense{live, 128, 4};
      dense.kvHeads = 8;
      dense.sinks = true;
      runShort(dense);
    }
    AttnCase wide{1500, 128, 12};
    wide.sinks = true;
    runShort(wide);
    AttnCase chunk{997, 64, 4, DType::F16, 5};
    chunk.window = 300;
    runShort(chunk);
    AttnCase capped{777, 256, 4, DType::F32};
    capped.softcap = 30.0;
    runShort(capped);
    runShort({7, 128, 1, DType::BF16});
    {
      // The longest cache the form takes (4096 rows, the ring's threshold):
      // 3999 live keys, 4+ rounds a warp.
      AttnCase longer{3999, 128, 4};
      longer.kvHeads = 8;
      expectMatchesReference(attentionGraph(longer, 4096), positionsFor(longer, longer.live),
                             tolerance(longer.cache), "main", /*eager=*/false, 4096);
    }
    // A group of 9: two head chunks of 5, the second with a padded head.
    AttnCase nine{1200, 64, 9};
    nine.sinks = true;
    runShort(nine);
    AttnCase r{kShort, 128, 4};
    r.sinks = true;
    expectReplaysBitIdentical(r, kShort, 1500, 9);
  }
}

/// One graph replayed: bit-identical outputs for the same positions, also
/// after a step with another split count (the counters start at 0 every run).
/// The output bits of case `ac` (a cache of 4096 rows) compiled with the
/// switch `env` set to "0" and to "1", each replayed twice (a replay that
/// differs fails): one form against the other, which must agree bit
/// for bit.

/// q loaded before the position (EmitOptions::attentionQFirst) gives the
/// same bits as the default order: the cluster form, the split form, a group
/// of 12 and D = 256, at KV lengths 1, 1025 and 4000.
TEST(GpuAttentionOptions, QFirstBitIdentical) {
  FG_REQUIRE_GPU();
  for (const char *cluster : {"8", "0"}) {
    ScopedEnv c("FG_DEBUG_ATTN_CLUSTER", cluster);
    for (AttnCase ac : {AttnCase{1025, 128, 4}, AttnCase{4000, 64, 1}, AttnCase{1, 128, 12},
                        AttnCase{1025, 256, 8, DType::BF16}}) {
      SCOPED_TRACE(std::string("cluster ") + cluster + " live " + std::to_string(ac.live) + " D " +
                   std::to_string(ac.headDim) + " G " + std::to_string(ac.group));
      expectSwitchBitIdentical(ac, "FG_DEBUG_ATTN_Q_FIRST");
    }
  }
}

/// The cluster form's partials by st.async into the merging block's
/// mbarrier (EmitOptions::attentionClusterAsync) give the same bits as the
/// remote stores and the second cluster barrier: groups of 4, 1, 9 (two head
/// chunks of 5 and 4: a block of the second merges no head) and 8, lengths
/// from 1 (one split) to 4000, replayed.
TEST(GpuAttentionOptions, ClusterAsyncBitIdentical) {
  FG_REQUIRE_GPU();
  for (AttnCase ac : {AttnCase{1025, 128, 4}, AttnCase{4000, 64, 1}, AttnCase{1, 128, 9},
                      AttnCase{100, 128, 9}, AttnCase{2048, 128, 8, DType::BF16},
                      AttnCase{3001, 64, 4, DType::F32}}) {
    SCOPED_TRACE("live " + std::to_string(ac.live) + " D " + std::to_string(ac.headDim) + " G " +
                 std::to_string(ac.group));
    ac.sinks = ac.group == 9;
    expectSwitchBitIdentical(ac, "FG_DEBUG_ATTN_CLUSTER_ASYNC");
  }
}

TEST(GpuAttentionReplay, BitIdentical) {
  FG_REQUIRE_GPU();
  for (DType cache : {DType::F16, DType::F32}) {
    SCOPED_TRACE(dtypeName(cache));
    AttnCase c{5000, 128, 4, cache};
    c.sinks = true;
    expectReplaysBitIdentical(c, kCtx, 5000, 33);
  }
}

/// One decode step's cache writes and attention (get_rows of q and the new
/// K/V rows from per-position tables, set_rows into state caches at the
/// position, attention over them): the early loads' form (attention.cuh,
/// attentionEarly: the first tile before the wait, the token's own row
/// again after it). Steps at positions 0..39, then jumps (rows in between
/// stay zero), replayed as a graph: every step within the f16 tolerance of
/// the CPU reference, and bit-identical to the same plan compiled with the
/// early loads off (FG_DEBUG_ATTN_EARLY=0), in the cluster form (4096 rows)
/// and the split form (FG_DEBUG_ATTN_CLUSTER=0).
TEST(GpuAttentionEarly, SetRowsThenAttentionOverSteps) {
  FG_REQUIRE_GPU();
  constexpr int64_t ctx = 4096, Hkv = 2, G = 4, D = 128;
  auto build = [&] {
    Graph g;
    Function &fn = g.addFunction("main");
    Builder b(fn);
    auto pos = b.input("positions", {DType::I32, {1}});
    auto table = [&](const char *name, int64_t heads) {
      auto t = b.weight(name, {DType::F32, {ctx, heads * D}}, randn());
      return b.reshape(b.getRows(t, pos), {1, heads, D});
    };
    auto q = table("q_table", Hkv * G), kn = table("k_table", Hkv), vn = table("v_table", Hkv);
    auto kc = b.state("k_cache.0", {DType::F16, {ctx, Hkv, D}});
    auto vc = b.state("v_cache.0", {DType::F16, {ctx, Hkv, D}});
    Builder::AttentionParams p;
    p.scale = 1.0 / std::sqrt(static_cast<double>(D));
    b.result(b.attention(q, b.setRows(kc, kn, pos), b.setRows(vc, vn, pos), pos, p, std::nullopt,
                         "out"));
    EXPECT_FALSE(bool(b.finish()));
    return g;
  };
  std::vector<int32_t> steps;
  for (int32_t i = 0; i < 40; ++i)
    steps.push_back(i);
  for (int32_t i : {511, 1023, 1024, 1025, 2047, 4000, 4095})
    steps.push_back(i);
  // One graph (its weights' seeds drawn once) compiled each way.
  const Graph g = build();
  auto run = [&](const char *early, const char *cluster) {
    ScopedEnv e("FG_DEBUG_ATTN_EARLY", early), c("FG_DEBUG_ATTN_CLUSTER", cluster);
    CompileOptions co;
    co.ctx = ctx;
    co.pipeline = "canonicalize,cse,dce";
    auto plan = compile(g, co);
    EXPECT_TRUE(bool(plan)) << (plan ? "" : errString(plan.takeError()));
    std::vector<std::vector<uint8_t>> outs;
    if (!plan)
      return outs;
    ExecOptions go, co2;
    go.device = ExecOptions::Device::Cuda;
    go.mode = ExecOptions::Mode::Graph;
    auto gpu = Executor::create(*plan, go);
    auto cpu = Executor::create(*plan, co2);
    EXPECT_TRUE(bool(gpu) && bool(cpu));
    if (!gpu || !cpu)
      return outs;
    for (int32_t p : steps) {
      SCOPED_TRACE(p);
      outs.push_back(runBytes(*gpu, {{"positions", {p}}}));
      EXPECT_FALSE(bool(cpu->setInput("positions", std::vector<int32_t>{p})));
      EXPECT_FALSE(bool(cpu->run("main")));
      auto out = gpu->output("out");
      auto ref = cpu->output("out");
      EXPECT_TRUE(bool(out) && bool(ref));
      if (out && ref) {
        EXPECT_LE(normalizedError(out->toFloats(), ref->toFloats()), 1e-3) << "position " << p;
      }
    }
    return outs;
  };
  for (const char *cluster : {"8", "0"}) {
    SCOPED_TRACE(std::string("FG_DEBUG_ATTN_CLUSTER=") + cluster);
    auto on = run("1", cluster), off = run("0", cluster);
    ASSERT_EQ(on.size(), steps.size());
    ASSERT_EQ(off.size(), steps.size());
    for (size_t i = 0; i < steps.size(); ++i)
      EXPECT_EQ(on[i], off[i]) << "position " << steps[i] << ": early loads changed the bits";
  }
}

} // namespace
