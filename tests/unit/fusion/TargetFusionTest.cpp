//===- TargetFusionTest.cpp - fusion and the overlap proof ask the target --===//
//
// The driver refuses a candidate the target has no kernel for (with the
// target's reason) or estimates slower than the ops it absorbs; the overlap
// proof's aliasing exemption is the target's answer, not a copied constant.
//
//===----------------------------------------------------------------------===//
#include "codegen/cuda/CudaTarget.h"
#include "ir/Parser.h"
#include "passes/fusion/Fusion.h"
#include "passes/memory/OverlapProof.h"

#include <gtest/gtest.h>

using namespace fg;

namespace {

/// A target whose answers a test chooses.
class FakeTarget final : public Target {
public:
  OpKind refuse = OpKind::Cont; ///< canEmit fails for this kind
  double fusedSeconds = 0;      ///< the cost of every kFused node
  llvm::StringRef name() const override { return "fake"; }
  llvm::Error canEmit(const NodeDesc &n) const override {
    if (n.kind == refuse)
      return makeError("no kernel for it today");
    return llvm::Error::success();
  }
  int64_t scratchBytes(const NodeDesc &) const override { return 0; }
  bool readsAllBeforeWrite(const NodeDesc &, unsigned) const override { return false; }
  int64_t maxGemvTokens() const override { return 8; }
  bool groupsQuantisedExperts() const override { return quantGroups; }
  bool quantGroups = false; ///< groupsQuantisedExperts()
  NodeCost cost(const NodeDesc &n) const override {
    NodeCost c;
    c.launches = 1;
    c.seconds = opInfo(n.kind).has(kFused) ? fusedSeconds : 1e-6;
    return c;
  }
};

constexpr const char *kNormMul = R"(graph @f(input %x: f32[1, 64], weight %w: f32[64]) {
  %n = rms_norm(%x) {eps = 1e-06} : f32[1, 64]
  %y = mul(%n, %w) : f32[1, 64]
  return %y
}
)";

Graph parseOrDie(llvm::StringRef text) {
  llvm::Expected<Graph> g = parseGraph(text, "t.fg");
  EXPECT_TRUE(bool(g)) << llvm::toString(g.takeError());
  return g ? std::move(*g) : Graph{};
}

std::string refusalOf(const FusionReport &r, llvm::StringRef pattern) {
  for (const FusionReport::Refusal &x : r.refused)
    if (x.pattern == pattern)
      return x.reason;
  return "";
}

/// gated_matmul_id_chunk over q4_K experts: fused only where the target
/// groups quantised experts (CudaTarget: EmitOptions::groupedExpertQuant).
TEST(TargetFusion, QuantisedExpertChunksFuseWhereTheTargetGroupsThem) {
  constexpr const char *kChunk = R"(graph @f(input %x: f32[16, 1, 256], input %ids: i32[16, 2],
    weight %g: q4_k[4, 64, 256], weight %u: q4_k[4, 64, 256]) {
  %a = matmul_id(%x, %g, %ids) : f32[16, 2, 64]
  %b = matmul_id(%x, %u, %ids) : f32[16, 2, 64]
  %y = glu(%a, %b) : f32[16, 2, 64]
  return %y
}
)";
  for (bool groups : {false, true}) {
    Graph g = parseOrDie(kChunk);
    FakeTarget t;
    t.fusedSeconds = 1e-7;
    t.quantGroups = groups;
    FusionOptions o;
    o.target = &t;
    FusionReport report;
    ASSERT_FALSE(static_cast<bool>(fuseWithOverlapProof(g, o, report)));
    EXPECT_EQ(report.count("gated_matmul_id_chunk"), groups ? 1 : 0);
    if (!groups) {
      EXPECT_NE(refusalOf(report, "gated_matmul_id_chunk").find("over q4_k weights"),
                std::string::npos);
    }
  }
}

/// The target has no kernel: not fused, and the refusal carries its reason.
TEST(TargetFusion, NoKernelIsARefusalWithTheTargetsReason) {
  Graph g = parseOrDie(kNormMul);
  FakeTarget t;
  t.refuse = OpKind::FusedRmsNormMul;
  FusionOptions o;
  o.target = &t;
  FusionReport report;
  ASSERT_FALSE(static_cast<bool>(fuseWithOverlapProof(g, o, report)));
  EXPECT_EQ(report.count("rms_norm_mul"), 0);
  EXPECT_EQ(refusalOf(report, "rms_norm_mul"), "fake target: no kernel for it today");
}

/// The target estimates the fused op slower than the two it replaces.
TEST(TargetFusion, SlowerByTheTargetsEstimateIsARefusal) {
  for (double fused : {1e-6, 3e-6}) {
    Graph g = parseOrDie(kNormMul);
    FakeTarget t;
    t.fusedSeconds = fused;
    FusionOptions o;
    o.target = &t;
    FusionReport report;
    ASSERT_FALSE(static_cast<bool>(fuseWithOverlapProof(g, o, report)));
    EXPECT_EQ(report.count("rms_norm_mul"), fused < 2e-6 ? 1 : 0) << fused;
    if (fused > 2e-6) {
      EXPECT_EQ(
          refusalOf(report, "rms_norm_mul"),
          "the fake target estimates the fused op at 3.00 us, the ops it replaces at 2.00 us");
    }
  }
}

/// Top-k routing whose ids are planted onto its own logits: refused without a
/// target; with the CUDA target, up to kTopkMoeAliasRows rows the kernel reads
/// the logits whole first, so the alias is allowed; above, refused.
TEST(TargetFusion, OverlapProofAsksTheTargetWhichOperandsAreReadFirst) {
  cuda::CudaTarget cudaTarget;
  for (int64_t rows : {int64_t(1), cuda::kTopkMoeAliasRows + 1}) {
    std::string r = std::to_string(rows);
    Graph g = parseOrDie("graph @f(input %x: f32[" + r +
                         ", 8]) {\n"
                         "  %l = exp(%x) : f32[" +
                         r +
                         ", 8]\n"
                         "  %ids, %w = fused.topk_moe(%l) {k = 2} : i32[" +
                         r + ", 2], f32[" + r +
                         ", 2]\n"
                         "  return %ids, %w\n}\n");
    const Function &fn = g.functions().front();
    auto dag = LaunchDag::build(fn);
    ASSERT_TRUE(bool(dag));
    auto plan = planMemory(fn, *dag);
    ASSERT_TRUE(bool(plan));
    ValueId l = fn.lookup("l"), ids = fn.lookup("ids");
    plan->values[ids].offset = plan->values[l].offset;
    OverlapOptions none;
    EXPECT_EQ(proveNoOverlap(fn, *plan, none).size(), 1u) << rows;
    OverlapOptions cuda;
    cuda.target = &cudaTarget;
    EXPECT_EQ(proveNoOverlap(fn, *plan, cuda).size(), rows <= cuda::kTopkMoeAliasRows ? 0u : 1u)
        << rows;
  }
}

} // namespace
