//===- FusionReportTest.cpp - which fusions fire on each model family ------===//
//
// Every family, loaded from its GGUF file, fuses its decode entry as the
// issue expects: q/k-norm → rope (→ KV write) for qwen3 and qwen3moe (and
// gemma3), top-k routing, the expert-indexed gated FFN and the MoE weighted
// reduction for qwen3moe, the dense gated FFN for every dense family.
//
//===----------------------------------------------------------------------===//
#include "ModelFiles.h"

#include "frontends/Frontend.h"
#include "passes/fusion/Fusion.h"

#include <gtest/gtest.h>

using namespace fg;

namespace {

struct Expect {
  const char *family;
  int64_t layers;
  bool qkNorm, moe;
};

class FamilyFusion : public ::testing::TestWithParam<Expect> {};

TEST_P(FamilyFusion, ExpectedPatternsFire) {
  std::string why;
  std::string dir = test::generatedModels(why);
  if (dir.empty())
    GTEST_SKIP() << why;
  const Expect &e = GetParam();
  ModelOptions mo;
  mo.ctx = 64;
  auto g = loadModel(dir + "/" + e.family + ".gguf", mo);
  ASSERT_TRUE(bool(g)) << llvm::toString(g.takeError());
  FusionReport report;
  ASSERT_FALSE(bool(fuseWithOverlapProof(*g, FusionOptions{}, report)));
  int64_t L = e.layers;
  EXPECT_EQ(report.count("rms_norm_mul_rope", "decode"), e.qkNorm ? L : 0);
  EXPECT_EQ(report.count("rms_norm_mul_rope_set_rows", "decode"), e.qkNorm ? L : 0);
  EXPECT_EQ(report.count("rope_set_rows", "decode"), e.qkNorm ? 0 : L);
  // The router in one launch (rms_norm_matmul_topk_moe) is opt-in.
  EXPECT_EQ(report.count("rms_norm_matmul_topk_moe", "decode"), 0);
  EXPECT_EQ(report.count("topk_moe", "decode"), e.moe ? L : 0);
  EXPECT_EQ(report.count("gated_matmul_id", "decode"), e.moe ? L : 0);
  // No target here: the down projection joins the sum and add (the CUDA
  // target refuses it for experts without a DP4A GEMV).
  EXPECT_EQ(report.count("matmul_id_sum_add", "decode"), e.moe ? L : 0);
  EXPECT_EQ(report.count("moe_weighted_sum_add", "decode"), 0);
  EXPECT_EQ(report.count("moe_weighted_sum", "decode"), 0);
  EXPECT_EQ(report.count("gated_matmul", "decode"), e.moe ? 0 : L);
  EXPECT_EQ(report.splitBack, 0);
}

INSTANTIATE_TEST_SUITE_P(Families, FamilyFusion,
                         ::testing::Values(Expect{"llama3", 2, false, false},
                                           Expect{"smollm2", 2, false, false},
                                           Expect{"qwen2", 2, false, false},
                                           Expect{"qwen3", 2, true, false},
                                           Expect{"qwen3moe", 2, true, true},
                                           Expect{"gemma3", 7, true, false}),
                         [](const auto &info) { return std::string(info.param.family); });

} // namespace
