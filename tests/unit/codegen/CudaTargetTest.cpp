//===- CudaTargetTest.cpp - the CUDA target answers from its emitters -----===//
//
// Every answer of fg::Target comes from the emitters (or their options): the
// passes ask, never copy. No GPU needed.
//
//===----------------------------------------------------------------------===//
#include "codegen/cuda/CudaTarget.h"
#include "passes/fusion/Fusion.h"

#include "frontends/Frontend.h"

#include <gtest/gtest.h>

using namespace fg;
using namespace fg::cuda;

namespace {

/// A node description with the op's defaults, `set` attributes and inferred results.
NodeDesc desc(OpKind kind, std::vector<TensorType> operands,
              std::vector<std::pair<std::string_view, Attribute>> set = {}) {
  NodeDesc d{kind, {}, defaultAttrs(kind), {}};
  d.operands.assign(operands.begin(), operands.end());
  for (auto &[name, value] : set) {
    std::optional<unsigned> i = opInfo(kind).findAttr(name);
    EXPECT_TRUE(i) << name;
    if (i)
      d.attrs[*i] = value;
  }
  llvm::Error e = inferResultTypes(kind, d.operands, d.attrs, d.results);
  EXPECT_FALSE(static_cast<bool>(e)) << llvm::toString(std::move(e));
  return d;
}

TensorType f32(std::initializer_list<int64_t> s) { return {DType::F32, s}; }

TEST(CudaTarget, GemvTokensAreTheEmitOption) {
  EXPECT_EQ(CudaTarget().maxGemvTokens(), EmitOptions().maxGemvTokens);
  EmitOptions wide;
  wide.maxGemvTokens = 16;
  EXPECT_EQ(CudaTarget(wide).maxGemvTokens(), 16);
}

/// emit-or-why: the emitter's own refusal comes back as the reason.
TEST(CudaTarget, CanEmitSaysWhyNot) {
  CudaTarget t;
  EXPECT_FALSE(static_cast<bool>(t.canEmit(desc(OpKind::Silu, {f32({4, 64})}))));
  // q8_0 weights are decoded by the GEMV; a q8_0 x is not.
  EXPECT_FALSE(static_cast<bool>(
      t.canEmit(desc(OpKind::MatMul, {f32({1, 64}), TensorType{DType::Q8_0, {32, 64}}}))));
  llvm::Error e = t.canEmit(desc(
      OpKind::MatMul, {TensorType{DType::Q8_0, {1, 64}}, TensorType{DType::F16, {32, 64}}}));
  ASSERT_TRUE(static_cast<bool>(e));
  std::string why = llvm::toString(std::move(e));
  EXPECT_NE(why.find("no CUDA kernel for 'matmul'"), std::string::npos) << why;
  EXPECT_NE(why.find("block-quantised operand 0"), std::string::npos) << why;
}

/// Scratch is what the emitted launches ask for: a cuBLAS matmul of f32 rows
/// against f16 weights converts x into scratch; a GEMV needs none.
TEST(CudaTarget, ScratchBytesComeFromTheEmitters) {
  CudaTarget t;
  TensorType w{DType::F16, {128, 64}};
  EXPECT_EQ(t.scratchBytes(desc(OpKind::MatMul, {f32({1, 64}), w})), 0);
  EXPECT_EQ(t.scratchBytes(desc(OpKind::MatMul, {f32({32, 64}), w})), 32 * 64 * 2);
}

/// The overlap proof's exemption: top-k routing of at most kTopkMoeAliasRows
/// rows reads its logits whole before writing; only the logits.
TEST(CudaTarget, TopkMoeOfFewRowsReadsItsLogitsFirst) {
  CudaTarget t;
  auto topk = [](int64_t rows) {
    return desc(OpKind::FusedTopkMoe, {f32({rows, 8})}, {{"k", Attribute::ofInt(2)}});
  };
  EXPECT_TRUE(t.readsAllBeforeWrite(topk(1), 0));
  EXPECT_TRUE(t.readsAllBeforeWrite(topk(kTopkMoeAliasRows), 0));
  EXPECT_FALSE(t.readsAllBeforeWrite(topk(kTopkMoeAliasRows + 1), 0));
  EXPECT_FALSE(t.readsAllBeforeWrite(desc(OpKind::Silu, {f32({1, 8})}), 0));
}

/// The cost is the op table's bytes and flops plus a fixed cost per launch.
TEST(CudaTarget, CostIsTheOpTableBytesPlusLaunches) {
  CudaCostModel m;
  CudaTarget t({}, m);
  NodeDesc d = desc(OpKind::Silu, {f32({1, 1 << 20})});
  NodeCost c = t.cost(d);
  Cost table = opCost(d.kind, d.operands, d.attrs, d.results);
  EXPECT_EQ(c.bytes, table.bytes);
  EXPECT_EQ(c.flops, table.flops);
  EXPECT_EQ(c.launches, 1u);
  EXPECT_DOUBLE_EQ(c.seconds, std::max(table.bytes / m.readBandwidth, table.flops / m.peakFlops) +
                                  m.launchSeconds);
}

/// The norm prologue's slowdown: a DP4A launch (q4_K at T = 1, above the
/// DP4A rule's 4 MiB) takes CudaCostModel::normPrologueSlowdownDp4a, a
/// tensor-core one (f16) normPrologueSlowdown, each of its weights' time.
TEST(CudaTarget, NormPrologueSlowdownByTheLaunchsForm) {
  auto normMatmul = [](DType w) {
    return desc(OpKind::FusedRmsNormMatmul, {f32({1, 4096}), f32({4096}), {w, {4096, 4096}}},
                {{"eps", Attribute::ofFloat(1e-5)}});
  };
  for (DType w : {DType::Q4_K, DType::F16}) {
    SCOPED_TRACE(dtypeName(w));
    const NodeDesc d = normMatmul(w);
    const double weightSeconds = static_cast<double>(d.operands[2].bytes()) / CudaCostModel{}.readBandwidth;
    CudaCostModel none;
    none.normPrologueSlowdown = none.normPrologueSlowdownDp4a = 0;
    const double base = CudaTarget({}, none).cost(d).seconds;
    CudaCostModel dp4a = none;
    dp4a.normPrologueSlowdownDp4a = 0.5;
    CudaCostModel other = none;
    other.normPrologueSlowdown = 0.5;
    const bool onDp4a = w == DType::Q4_K;
    EXPECT_NEAR(CudaTarget({}, dp4a).cost(d).seconds - base, onDp4a ? 0.5 * weightSeconds : 0.0,
                1e-12);
    EXPECT_NEAR(CudaTarget({}, other).cost(d).seconds - base, onDp4a ? 0.0 : 0.5 * weightSeconds,
                1e-12);
  }
}

Graph demo(std::vector<int64_t> prefill) {
  ModelOptions mo;
  mo.ctx = 256;
  mo.prefill = std::move(prefill);
  auto g = loadModel("demo", mo);
  EXPECT_TRUE(bool(g)) << llvm::toString(g.takeError());
  return g ? std::move(*g) : Graph{};
}

/// Fusion asks the target for the GEMV token limit: a target whose GEMV takes
/// 16 tokens fuses the gated FFN of a 9-token prefill, the default one does not.
TEST(CudaTarget, FusionAsksTheTargetForTheGemvTokenLimit) {
  for (int64_t limit : {8, 16}) {
    Graph g = demo({9});
    EmitOptions eo;
    eo.maxGemvTokens = limit;
    CudaTarget t(eo);
    FusionOptions fo;
    fo.target = &t;
    FusionReport report;
    ASSERT_FALSE(static_cast<bool>(fuseWithOverlapProof(g, fo, report)));
    EXPECT_EQ(report.count("gated_matmul_id", "prefill_9"), limit >= 9 ? 2 : 0) << limit;
  }
}

} // namespace
