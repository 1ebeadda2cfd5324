//===- IdealBytesTest.cpp - ideal step bytes, workloads, kernel families ---===//
#include "codegen/cuda/CudaTarget.h"
#include "frontends/Frontend.h"
#include "frontends/models/Workloads.h"
#include "ir/Parser.h"
#include "passes/fusion/Fusion.h"
#include "runtime/BenchLoop.h"

#include <gtest/gtest.h>

using namespace fg;

namespace {

Graph workload(llvm::StringRef name) {
  auto g = buildWorkload(name, WorkloadOptions{});
  EXPECT_TRUE(static_cast<bool>(g)) << (g ? "" : llvm::toString(g.takeError()));
  return g ? std::move(*g) : Graph{};
}

TEST(IdealBytes, TinyDecodeByHand) {
  Graph g = workload("w-tiny");
  const Function *fn = g.lookup("decode");
  ASSERT_NE(fn, nullptr);
  StepBytes b = idealStepBytes(*fn, 1024);
  // Per layer: 2 f32 norms [512] = 4096; q, k, v, o f16 [512, 512] = 4 * 524288;
  // gate, up [1408, 512] and down [512, 1408] f16 = 3 * 1441792 -> 6426624.
  // 8 layers + output_norm 2048 + output [32000, 512] f16 32768000 + one
  // token_embd row 1024.
  EXPECT_DOUBLE_EQ(b.weights, 8.0 * 6426624 + 2048 + 32768000 + 1024);
  // K and V, 8 layers, 1024 rows of [8 heads, 64] f16.
  EXPECT_DOUBLE_EQ(b.kvRead, 8.0 * 2 * 1024 * 8 * 64 * 2);
  // One row of K and one of V written per layer.
  EXPECT_DOUBLE_EQ(b.kvWrite, 8.0 * 2 * 8 * 64 * 2);
  // tokens + positions (i32[1]) in, logits f32[1, 32000] out.
  EXPECT_DOUBLE_EQ(b.io, 4 + 4 + 32000.0 * 4);
  EXPECT_DOUBLE_EQ(b.total(), 101105672.0);
  // ~0.025 ms at 4 TB/s, the issue's ideal for W-tiny.
  EXPECT_NEAR(b.total() / 4.0e12 * 1e3, 0.025, 0.0005);
}

TEST(IdealBytes, KvRowsScaleOnlyTheCacheRead) {
  Graph g = workload("w-tiny");
  const Function *fn = g.lookup("decode");
  ASSERT_NE(fn, nullptr);
  StepBytes a = idealStepBytes(*fn, 1024), b = idealStepBytes(*fn, 512);
  EXPECT_DOUBLE_EQ(a.kvRead, 2 * b.kvRead);
  EXPECT_DOUBLE_EQ(a.weights, b.weights);
  // More rows than the cache holds read the whole cache (ctx 2048).
  EXPECT_DOUBLE_EQ(idealStepBytes(*fn, 1 << 20).kvRead, 2 * a.kvRead);
}

TEST(IdealBytes, MoeReadsOnlyTheSelectedExperts) {
  Graph g = workload("w-moe-12");
  const Function *fn = g.lookup("decode");
  ASSERT_NE(fn, nullptr);
  StepBytes b = idealStepBytes(*fn, 1024);
  // Per layer: norms 2 * 8192 + q/k-norm 2 * 512; q [4096, 2048] and o [2048,
  // 4096] f16 = 2 * 16777216; k, v [512, 2048] = 2 * 2097152; router f32
  // [128, 2048] = 1048576; 8 of 128 experts of gate/up/down [768 x 2048] f16 =
  // 3 * 8 * 3145728. Plus output_norm, output [151936, 2048] f16, one embd row.
  double layer = 2 * 8192 + 2 * 512 + 2 * 16777216.0 + 2 * 2097152 + 1048576 + 3 * 8 * 3145728.0;
  EXPECT_DOUBLE_EQ(layer, 114312192.0);
  EXPECT_DOUBLE_EQ(b.weights, 12 * layer + 8192 + 151936.0 * 2048 * 2 + 4096);
  EXPECT_DOUBLE_EQ(b.kvRead, 12.0 * 2 * 1024 * 4 * 128 * 2);
  EXPECT_DOUBLE_EQ(b.io, 8 + 151936.0 * 4);
  // ~0.50 ms at 4 TB/s, the issue's ideal for W-moe at 12 layers.
  EXPECT_NEAR(b.total() / 4.0e12 * 1e3, 0.50, 0.01);
}

TEST(IdealBytes, DenseMatchesTheIssueIdeal) {
  Graph g = workload("w-dense");
  const Function *fn = g.lookup("decode");
  ASSERT_NE(fn, nullptr);
  // 3.78 ms at 4.0 TB/s in issue 6's table.
  EXPECT_NEAR(idealStepBytes(*fn, 1024).total() / 4.0e12 * 1e3, 3.78, 0.02);
}

TEST(IdealBytes, NodeBytesOfAGetRowsAndAnExpertMatmul) {
  Graph g = workload("w-moe-12");
  const Function *fn = g.lookup("decode");
  ASSERT_NE(fn, nullptr);
  bool sawGetRows = false, sawMatmulId = false;
  for (const Node &n : fn->nodes()) {
    if (n.kind == OpKind::GetRows && fn->value(n.result()).name == "x") {
      // one f16 row of 2048 + the i32 index + the f32 row written
      EXPECT_DOUBLE_EQ(nodeBytes(*fn, n, 1024), 4096 + 4 + 2048 * 4);
      sawGetRows = true;
    }
    if (n.kind == OpKind::MatMulId && !sawMatmulId) {
      // gate experts: x f32[1, 1, 2048], 8 of [768, 2048] f16, ids i32[1, 8], f32[1, 8, 768] out
      EXPECT_DOUBLE_EQ(nodeBytes(*fn, n, 1024), 2048 * 4 + 8 * 3145728.0 + 8 * 4 + 8 * 768 * 4);
      sawMatmulId = true;
    }
  }
  EXPECT_TRUE(sawGetRows);
  EXPECT_TRUE(sawMatmulId);
}

TEST(Workloads, LoadModelKnowsTheNames) {
  ModelOptions mo;
  mo.ctx = 2048;
  mo.prefill = {};
  auto g = loadModel("w-tiny", mo);
  ASSERT_TRUE(static_cast<bool>(g)) << llvm::toString(g.takeError());
  const Function *fn = g->lookup("decode");
  ASSERT_NE(fn, nullptr);
  EXPECT_EQ(g->functions().size(), 1u);
  int weights = 0;
  for (const Argument &a : fn->arguments()) {
    if (a.role != ArgRole::Weight)
      continue;
    ++weights;
    const Value &v = fn->value(a.value);
    EXPECT_EQ(a.init.kind, WeightInit::Kind::Normal) << v.name;
    if (v.name == "output") {
      EXPECT_EQ(v.type.dtype, DType::F16);
    }
    if (llvm::StringRef(v.name).endswith("_norm")) {
      EXPECT_EQ(a.init.mean, 1.0) << v.name;
    }
  }
  EXPECT_EQ(weights, 8 * 9 + 3);
  EXPECT_EQ(fn->type(fn->lookup("k_cache.0")).shape, (Shape{2048, 8, 64}));
}

TEST(Workloads, Bf16SuffixAndUnknownNames) {
  auto c = workloadConfig("w-moe-48-bf16", WorkloadOptions{});
  ASSERT_TRUE(static_cast<bool>(c)) << llvm::toString(c.takeError());
  EXPECT_EQ(c->weightDType, DType::BF16);
  EXPECT_EQ(c->nLayers, 48);
  EXPECT_EQ(c->nExpertsUsed, 8);
  EXPECT_TRUE(isWorkloadName("w-dense-bf16"));
  EXPECT_FALSE(isWorkloadName("w-huge"));
  auto bad = buildWorkload("w-huge", WorkloadOptions{});
  ASSERT_FALSE(static_cast<bool>(bad));
  EXPECT_NE(llvm::toString(bad.takeError()).find("w-dense, w-moe-12, w-moe-48, w-tiny"),
            std::string::npos);
}

TEST(Families, GroupByMnemonicAndAverageRuns) {
  Graph g = workload("w-tiny");
  const Function *fn = g.lookup("decode");
  ASSERT_NE(fn, nullptr);
  EXPECT_EQ(launchFamily(OpKind::Rope, false), "rope");
  EXPECT_EQ(launchFamily(OpKind::FusedTopkMoe, false), "fused.topk_moe");
  EXPECT_EQ(launchFamily(OpKind::MatMul, true), "matmul [cublas]");
  // Launches name their node by id and op (as the launch records do), not by text.
  auto nodeOf = [&](llvm::StringRef value) { return fn->value(fn->lookup(value)).def; };
  NodeId x = nodeOf("x"), logits = nodeOf("logits");
  using LT = Executor::LaunchTime;
  std::vector<std::vector<LT>> runs = {
      {{"", "k0", false, 1.0f, x, OpKind::GetRows}, {"", "", true, 3.0f, logits, OpKind::MatMul}},
      {{"", "k0", false, 3.0f, x, OpKind::GetRows}, {"", "", true, 5.0f, logits, OpKind::MatMul}}};
  auto fams = familyBreakdown(*fn, runs, 1024);
  ASSERT_EQ(fams.size(), 2u);
  EXPECT_EQ(fams[0].family, "matmul [cublas]");
  EXPECT_DOUBLE_EQ(fams[0].ms, 4.0);
  EXPECT_EQ(fams[0].launches, 1);
  // logits = matmul(result_norm f32[1, 512], output f16[32000, 512]) -> f32[1, 32000]
  EXPECT_DOUBLE_EQ(fams[0].bytes, 512 * 4 + 32768000.0 + 32000 * 4);
  EXPECT_EQ(fams[1].family, "get_rows");
  EXPECT_DOUBLE_EQ(fams[1].ms, 2.0);
  EXPECT_DOUBLE_EQ(fams[1].bytes, 1024 + 4 + 512 * 4);
  EXPECT_EQ(fams[0].byShape + fams[1].byShape, 0);
  // A launch matched by grid and block in the first run is counted once.
  runs[0][0].byShape = runs[1][0].byShape = true;
  fams = familyBreakdown(*fn, runs, 1024);
  ASSERT_EQ(fams.size(), 2u);
  EXPECT_EQ(fams[1].byShape, 1);
  EXPECT_EQ(fams[0].byShape, 0);
}

/// A traced replay's span runs from its first kernel's start to its last
/// one's end; busy is the sum of the charged times; the rest is idle. Runs
/// without device clocks (eager profiles) are left out of the means.
TEST(FamilyBreakdown, TracedSpanSplitsBusyAndIdle) {
  using LT = Executor::LaunchTime;
  auto at = [](float ms, uint64_t start, uint64_t end) {
    LT l;
    l.ms = ms;
    l.startNs = start;
    l.endNs = end;
    return l;
  };
  // Run 1: kernels [1000, 3000) and [5000, 6000) ns: span 5 µs, busy 3, idle 2.
  // Run 2: [0, 4000) and [2000, 8000) overlapping: span 8, busy 8 (charged 4 + 4).
  std::vector<std::vector<LT>> runs = {{at(0.002f, 1000, 3000), at(0.001f, 5000, 6000)},
                                       {at(0.004f, 0, 4000), at(0.004f, 2000, 8000)},
                                       {at(0.5f, 0, 0)}};
  TracedSpan s = tracedSpan(runs);
  EXPECT_EQ(s.runs, 2);
  EXPECT_NEAR(s.spanMs, (0.005 + 0.008) / 2, 1e-9);
  EXPECT_NEAR(s.busyMs, (0.003 + 0.008) / 2, 1e-9);
  EXPECT_NEAR(s.idleMs(), 0.001, 1e-9);
  EXPECT_EQ(tracedSpan({{at(1.0f, 0, 0)}}).runs, 0);
  EXPECT_EQ(tracedSpan({}).spanMs, 0.0);
}

} // namespace

namespace {

/// One byte model: the ideal bytes of a step come from the op table, whose
/// fused rows read each operand once, so fusing changes none of them.
TEST(IdealBytes, FusionKeepsTheIdealBytes) {
  for (bool optIn : {false, true}) // (rope_kv_attention reads and writes the caches)
    for (const char *name : {"w-tiny", "w-moe-12"}) {
      Graph unfused = workload(name);
      Graph fused = workload(name);
      fg::cuda::CudaTarget target;
      FusionOptions fo;
      fo.target = &target;
      if (optIn)
        fo.optIn = optInFusionPatterns();
      FusionReport report;
      ASSERT_FALSE(static_cast<bool>(fuseWithOverlapProof(fused, fo, report)));
      ASSERT_GT(report.total(), 0) << name;
      StepBytes a = idealStepBytes(*unfused.lookup("decode"), 1024);
      StepBytes b = idealStepBytes(*fused.lookup("decode"), 1024);
      EXPECT_DOUBLE_EQ(a.weights, b.weights) << name;
      EXPECT_DOUBLE_EQ(a.kvRead, b.kvRead) << name;
      EXPECT_DOUBLE_EQ(a.kvWrite, b.kvWrite) << name;
      EXPECT_DOUBLE_EQ(a.io, b.io) << name;
    }
}

} // namespace

// The prefill table's "GEMM TF" column (stepFlops' matmul share) counts a
// fused.gated_gemm: 2·T·2N·K for its two products, as the matmuls it
// replaced. Before, the column dropped W-dense's gate|up work (7.148 ->
// 3.300 TF with the pattern on).
TEST(StepFlops, GatedGemmCountsAsGemmWork) {
  auto g = parseGraph(R"(
graph @f(input %x: f16[16, 32], weight %wg: f16[48, 32], weight %wu: f16[48, 32]) {
  %y = fused.gated_gemm(%x, %wg, %wu) {dtype = f16} : f16[16, 48]
  return %y
}
)");
  ASSERT_TRUE(static_cast<bool>(g)) << llvm::toString(g.takeError());
  StepFlops f = stepFlops(*g->lookup("f"), 0);
  EXPECT_GE(f.matmul, 2.0 * 2 * 16 * 48 * 32);
  EXPECT_DOUBLE_EQ(f.matmul, f.total);
}
