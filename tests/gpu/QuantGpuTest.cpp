//===- QuantGpuTest.cpp - quantised workloads on the GPU vs the reference --===//
//
// w-tiny's shapes (2 layers, vocab 4096, ffn 1536 so every matrix is whole
// 256-blocks and no fallback type appears) in each block type the native GEMV
// kernels of issue 14.2 decode, and the Q4_K_M mix (q4_k + q6_k): the weights
// are normal initialisers quantised on the host at load (the device has no
// quantiser: CudaRunner's host fallback); the embedding is read by get_rows
// from quantised rows. The CUDA session, teacher-forced with the CPU's tokens,
// must give every logits row within 1e-2 of the CPU reference (normalised, the
// issue's bound for f16-accumulating paths).
//
// A build whose CUDA code generation refuses quantised operands (this branch
// before the native kernels are merged) skips with the compiler's reason; the
// CPU side of the same graphs is tested in
// tests/unit/frontends/QuantWorkloadTest.cpp.
//
//===----------------------------------------------------------------------===//
#include "GpuTestUtil.h"

#include "frontends/models/Workloads.h"
#include "runtime/Session.h"

#include <functional>

using namespace fg;
using namespace fg::gputest;

namespace {

struct Rows {
  std::vector<int32_t> tokens;
  std::vector<std::vector<float>> logits;
};

Rows generate(const Plan &plan, ExecOptions::Device device, llvm::ArrayRef<int32_t> prompt,
              int64_t steps, llvm::ArrayRef<int32_t> forced) {
  Rows out;
  ExecOptions eo;
  eo.device = device;
  SessionOptions so;
  so.sample = [&](llvm::ArrayRef<float> l) -> llvm::Expected<int32_t> {
    out.logits.push_back(l.vec());
    return greedyToken(l);
  };
  auto s = Session::create(plan, eo, so);
  EXPECT_TRUE(bool(s)) << errString(s.takeError());
  if (!s)
    return out;
  auto t = s->generate(prompt, steps, forced);
  EXPECT_TRUE(bool(t)) << errString(t.takeError());
  if (t)
    out.tokens = *t;
  return out;
}

class GpuQuantWorkload : public ::testing::TestWithParam<const char *> {};

/// A workload's first two layers with a small vocabulary, decoded
/// teacher-forced on both devices: every GPU logit row within 1e-2
/// (normalised) of the CPU reference's. `adjust` shrinks the config further.
void teacherForced(const std::string &name, const std::function<void(DecoderConfig &)> &adjust,
                   double tol = 1e-2) {
  WorkloadOptions wo;
  wo.ctx = 256;
  auto cfg = workloadConfig(name, wo);
  ASSERT_TRUE(bool(cfg)) << errString(cfg.takeError());
  cfg->nLayers = 2;
  cfg->vocab = 4096;
  adjust(*cfg);
  auto g = buildDecoderGraph(*cfg, decoderEntries({8}, LogitRows::Last));
  ASSERT_TRUE(bool(g)) << errString(g.takeError());
  auto plan = compile(*g, CompileOptions{});
  if (!plan) {
    std::string why = errString(plan.takeError());
    if (why.find("block-quantised") != std::string::npos)
      GTEST_SKIP() << "no native quantised kernels in this build: " << why;
    FAIL() << why;
  }
  std::vector<int32_t> prompt;
  for (int32_t i = 0; i < 11; ++i)
    prompt.push_back((i * 389 + 17) % 4096);
  const int64_t steps = 8;
  Rows cpu = generate(*plan, ExecOptions::Device::Cpu, prompt, steps, {});
  ASSERT_EQ(cpu.tokens.size(), static_cast<size_t>(steps));
  Rows gpu = generate(*plan, ExecOptions::Device::Cuda, prompt, steps,
                      llvm::ArrayRef<int32_t>(cpu.tokens).drop_back());
  ASSERT_EQ(gpu.logits.size(), cpu.logits.size());
  double worst = 0;
  for (size_t i = 0; i < cpu.logits.size(); ++i) {
    double err = normalizedError(gpu.logits[i], cpu.logits[i]);
    worst = std::max(worst, err);
    EXPECT_LE(err, tol) << name << ", token " << i;
  }
  std::printf("[quant] %s (2 layers): worst normalised error %.3g\n", name.c_str(), worst);
}

TEST_P(GpuQuantWorkload, TeacherForcedMatchesReference) {
  FG_REQUIRE_GPU();
  teacherForced(std::string("w-tiny-") + GetParam(), [](DecoderConfig &c) {
    c.nFf = 1536; // whole 256-blocks: no fallback type (q5_0) without a native kernel
  });
}

/// W-moe's layers (Qwen3-MoE: q/k norms, 8 of the experts a token) with 16
/// experts: over q4_K / q8_0 experts its decode steps run the down
/// projection with the weighted sum and the residual (fused.matmul_id_sum_add).
/// The DP4A GEMVs quantise x to int8 in every projection (dense above 4 MiB,
/// every expert launch): measured on the H200 (twenty-first and
/// twenty-second sessions) the logits stay within 4.2e-2 (q4_K) and 3.3e-2
/// (q8_0) of the exact reference, 1e-2 for q6_K (its down projection off
/// DP4A: 630-byte rows) and 5e-5 for f16. That is the int8 x itself: the CPU
/// reference with and without it (ExecOptions::cpuActQuant) differs by as
/// much on this model (QuantWorkload.MoeInt8ActivationsMoveTheLogits), and
/// every DP4A kernel equals that reference to 1e-5 on its own (GpuQuantGemv,
/// GpuFused). A whole model cannot be held to it as tightly: upstream values
/// that differ in their last bits (attention, the f16 KV cache) flip some int8
/// roundings, each a jump of 1/127 of its block's max.
class GpuQuantMoeWorkload : public ::testing::TestWithParam<const char *> {};

TEST_P(GpuQuantMoeWorkload, TeacherForcedMatchesReference) {
  FG_REQUIRE_GPU();
  const std::string type = GetParam();
  const bool dp4aExperts = type == "q4_k" || type == "q8_0";
  teacherForced(type.empty() ? "w-moe-12" : "w-moe-12-" + type,
                [](DecoderConfig &c) { c.nExperts = 16; }, dp4aExperts ? 5e-2 : 1e-2);
}

INSTANTIATE_TEST_SUITE_P(Types, GpuQuantMoeWorkload, ::testing::Values("q4_k", "q8_0", "q6_k", ""),
                         [](const auto &info) {
                           return std::string(*info.param ? info.param : "f16");
                         });

INSTANTIATE_TEST_SUITE_P(Types, GpuQuantWorkload,
                         ::testing::Values("q8_0", "q4_0", "q4_1", "q4_k", "q6_k", "q4_k_m", "q5_0",
                                           "q5_1", "q5_k", "q2_k", "q3_k", "iq4_nl", "iq4_xs"));

} // namespace
