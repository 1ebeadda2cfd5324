// Fusion of the demo decoder: the counts the issue asks for, per layer, and
// the same reference logits fused and unfused (the fused ops evaluate through
// their decompositions, so the results are bit-identical).
#include "codegen/cuda/CudaTarget.h"
#include "frontends/Frontend.h"
#include "ir/Printer.h"
#include "ir/Verifier.h"
#include "passes/fusion/Fusion.h"
#include "runtime/reference/Interpreter.h"

#include <gtest/gtest.h>

using namespace fg;

namespace {

Graph demo(llvm::ArrayRef<int64_t> prefill) {
  ModelOptions o;
  o.ctx = 64;
  o.prefill.assign(prefill.begin(), prefill.end());
  auto g = loadModel("demo", o);
  if (!g) {
    ADD_FAILURE() << llvm::toString(g.takeError());
    return Graph();
  }
  return std::move(*g);
}

std::vector<float> run(ReferenceInterpreter &ri, llvm::StringRef entry,
                       llvm::ArrayRef<int64_t> tokens, int64_t start) {
  int64_t t = static_cast<int64_t>(tokens.size());
  std::vector<int64_t> pos;
  for (int64_t i = 0; i < t; ++i)
    pos.push_back(start + i);
  llvm::StringMap<HostTensor> inputs;
  inputs["tokens"] = HostTensor::fromInts({DType::I32, {t}}, tokens);
  inputs["positions"] = HostTensor::fromInts({DType::I32, {t}}, pos);
  std::vector<std::pair<std::string, HostTensor>> out;
  if (llvm::Error e = ri.run(entry, inputs, out)) {
    ADD_FAILURE() << llvm::toString(std::move(e));
    return {};
  }
  return out.at(0).second.toFloats();
}

size_t countOps(const Function &fn, OpKind k) {
  size_t n = 0;
  for (const Node &node : fn.nodes())
    n += node.kind == k;
  return n;
}

} // namespace

/// Decode, per layer: 2 rms_norm_mul (attention and FFN norms), 1 q-norm ->
/// rope, 1 k-norm -> rope -> KV write, 1 routing, 1 expert gated FFN, 1
/// expert down projection + MoE weighted sum + residual, 1 output projection
/// + residual, 1 merged q/k/v projection; plus the final norm. Nothing is
/// split back.
TEST(DemoFusion, DecodeCountsPerLayer) {
  Graph g = demo({});
  FusionReport report;
  ASSERT_FALSE(static_cast<bool>(fuseWithOverlapProof(g, {}, report)));
  ASSERT_FALSE(static_cast<bool>(verifyGraph(g)));
  const int64_t layers = 2;
  // The attention and FFN norms a layer and the final norm (the router in
  // one launch, rms_norm_matmul_topk_moe, is opt-in: measured slower).
  EXPECT_EQ(report.count("rms_norm_mul", "decode"), 2 * layers + 1);
  EXPECT_EQ(report.count("rms_norm_mul_rope", "decode"), layers);
  EXPECT_EQ(report.count("rms_norm_mul_rope_set_rows", "decode"), layers);
  EXPECT_EQ(report.count("rms_norm_matmul_topk_moe", "decode"), 0);
  EXPECT_EQ(report.count("topk_moe", "decode"), layers);
  EXPECT_EQ(report.count("gated_matmul_id", "decode"), layers);
  // The expert down projection, the sum and the MoE block's residual add
  // (each round's record is withdrawn when the next absorbs it: the sum,
  // then the sum and add; without a target nothing refuses the f32 experts).
  EXPECT_EQ(report.count("matmul_id_sum_add", "decode"), layers);
  EXPECT_EQ(report.count("moe_weighted_sum_add", "decode"), 0);
  EXPECT_EQ(report.count("moe_weighted_sum", "decode"), 0);
  EXPECT_EQ(report.count("matmul_add", "decode"), layers);
  // q, k and v in one op (without a target nothing weighs the merge: its
  // legality alone decides; the CUDA target keeps it for DP4A launches).
  EXPECT_EQ(report.count("matmul_multi", "decode"), layers);
  EXPECT_EQ(report.total("decode"), 9 * layers + 1);
  EXPECT_EQ(report.splitBack, 0);
  const Function &fn = *g.lookup("decode");
  EXPECT_EQ(countOps(fn, OpKind::FusedRmsNormMul), 5u);
  EXPECT_EQ(countOps(fn, OpKind::FusedTopkMoe), 2u);
  EXPECT_EQ(countOps(fn, OpKind::FusedRmsNormMatmulTopkMoe), 0u);
  EXPECT_EQ(countOps(fn, OpKind::RmsNorm), 0u);
  EXPECT_EQ(countOps(fn, OpKind::Glu), 0u);
  std::string text;
  llvm::raw_string_ostream os(text);
  report.print(os);
  EXPECT_NE(text.find("@decode  topk_moe x2"), std::string::npos) << text;
}

/// Prefill with 8 tokens still fits the CUDA target's GEMV; 9 tokens do not,
/// and the report says why.
TEST(DemoFusion, GatedFfnTokenLimit) {
  Graph g = demo({8, 9});
  FusionReport report;
  cuda::CudaTarget target;
  FusionOptions opts;
  opts.target = &target;
  ASSERT_FALSE(static_cast<bool>(fuseWithOverlapProof(g, opts, report)));
  EXPECT_EQ(report.count("gated_matmul_id", "prefill_8"), 2);
  EXPECT_EQ(report.count("gated_matmul_id", "prefill_9"), 0);
  EXPECT_EQ(report.count("topk_moe", "prefill_9"), 2);
  bool found = false;
  for (const FusionReport::Refusal &r : report.refused)
    if (r.entry == "prefill_9" && r.pattern == "gated_matmul_id") {
      found = true;
      EXPECT_NE(r.reason.find("has 9 tokens; the fused GEMV takes 1 to 8"), std::string::npos)
          << r.reason;
    }
  EXPECT_TRUE(found);
}

/// --no-fusion and --disable-fusion.
TEST(DemoFusion, Options) {
  Graph g = demo({});
  FusionReport report;
  FusionOptions off;
  off.enabled = false;
  ASSERT_FALSE(static_cast<bool>(fuseWithOverlapProof(g, off, report)));
  EXPECT_EQ(report.total(), 0);
  FusionOptions some;
  some.disabled = {"rms_norm_mul_rope_set_rows", "topk_moe"};
  ASSERT_FALSE(static_cast<bool>(fuseWithOverlapProof(g, some, report)));
  EXPECT_EQ(report.count("topk_moe"), 0);
  EXPECT_EQ(report.count("rms_norm_mul_rope_set_rows"), 0);
  // The k-norm falls back to the next largest fusions.
  EXPECT_EQ(report.count("rms_norm_mul_rope"), 4);
  EXPECT_EQ(report.count("matmul_id_sum_add"), 2);
  EXPECT_EQ(report.count("moe_weighted_sum_add"), 0);
}

/// --debug-fusion=NAME logs each candidate of NAME and its decision.
TEST(DemoFusion, DebugLog) {
  Graph g = demo({});
  FusionReport report;
  FusionOptions o;
  o.debug = {"topk_moe"};
  std::vector<std::string> lines;
  LogSink sink = [&](LogLevel, llvm::StringRef s) { lines.push_back(s.str()); };
  ASSERT_FALSE(static_cast<bool>(fuseWithOverlapProof(g, o, report, sink)));
  ASSERT_FALSE(lines.empty());
  for (const std::string &l : lines)
    EXPECT_EQ(l.rfind("fuse[topk_moe] @decode", 0), 0u) << l;
  bool applied = false;
  for (const std::string &l : lines)
    applied |= l.find("expert_weights_norm (softmax+renorm, 6 ops): applied") != std::string::npos;
  EXPECT_TRUE(applied) << lines.front();
}

/// The fused demo computes the same logits as the unfused one, bit for bit,
/// over a prefill and two decode steps (the KV cache goes through the fused
/// k-norm -> rope -> set_rows).
TEST(DemoFusion, SameReferenceLogits) {
  Graph plain = demo({4});
  Graph fused = plain;
  FusionReport report;
  ASSERT_FALSE(static_cast<bool>(fuseWithOverlapProof(fused, {}, report)));
  ASSERT_GT(report.total("prefill_4"), 0);
  ReferenceInterpreter a(plain), b(fused);
  EXPECT_EQ(run(a, "prefill_4", {1, 7, 42, 3}, 0), run(b, "prefill_4", {1, 7, 42, 3}, 0));
  EXPECT_EQ(run(a, "decode", {11}, 4), run(b, "decode", {11}, 4));
  std::vector<float> la = run(a, "decode", {300}, 5), lb = run(b, "decode", {300}, 5);
  ASSERT_EQ(la.size(), 512u);
  EXPECT_EQ(la, lb);
}
