//===- SamplingGpuTest.cpp - seeded sampling: same tokens on both devices --===//
//
// Sampling runs on the host logits with fusegraph's own generator, so a seed
// gives the same tokens on the cuda backend as on the cpu one. The GPU run is
// teacher-forced with the CPU's sampled tokens (the same inputs at every step)
// and samples its own token from its own logits with the same seed: each must
// equal the CPU's, unless the step's uniform draw lies within the logits'
// error of a boundary of the CPU's cumulative distribution (then either token
// is a correct draw).
//
//===----------------------------------------------------------------------===//
#include "GpuTestUtil.h"

#include "frontends/Frontend.h"
#include "runtime/Sampler.h"
#include "runtime/Session.h"

using namespace fg;
using namespace fg::gputest;

namespace {

struct SampledRun {
  std::vector<int32_t> tokens;
  std::vector<std::vector<float>> rows;
};

SampledRun sampled(const Plan &plan, ExecOptions::Device device, const SamplingOptions &so,
            llvm::ArrayRef<int32_t> prompt, int64_t steps, llvm::ArrayRef<int32_t> forced) {
  SampledRun out;
  auto sampler = TokenSampler::create(so);
  EXPECT_TRUE(bool(sampler));
  ExecOptions eo;
  eo.device = device;
  SessionOptions opts;
  opts.sample = [&](llvm::ArrayRef<float> l) -> llvm::Expected<int32_t> {
    out.rows.push_back(l.vec());
    return sampler->sample(l);
  };
  auto s = Session::create(plan, eo, opts);
  EXPECT_TRUE(bool(s)) << errString(s.takeError());
  if (!s)
    return out;
  auto t = s->generate(prompt, steps, forced);
  EXPECT_TRUE(bool(t)) << errString(t.takeError());
  if (t)
    out.tokens = *t;
  return out;
}

} // namespace

TEST(GpuSampling, SameSeedSameTokensOnBothDevices) {
  FG_REQUIRE_GPU();
  ModelOptions mo;
  mo.ctx = 128;
  mo.prefill = {4};
  auto g = loadModel("demo", mo);
  ASSERT_TRUE(bool(g)) << errString(g.takeError());
  auto plan = compile(*g, CompileOptions{});
  ASSERT_TRUE(bool(plan)) << errString(plan.takeError());
  SamplingOptions so;
  so.temperature = 0.9;
  so.topK = 50;
  so.topP = 0.95;
  so.seed = 2024;
  const std::vector<int32_t> prompt = {1, 7, 42, 3, 99};
  const int64_t steps = 48;
  SampledRun cpu = sampled(*plan, ExecOptions::Device::Cpu, so, prompt, steps, {});
  ASSERT_EQ(cpu.tokens.size(), size_t(steps));
  std::vector<int32_t> forced(cpu.tokens.begin(), cpu.tokens.end() - 1);
  SampledRun gpu = sampled(*plan, ExecOptions::Device::Cuda, so, prompt, steps, forced);
  ASSERT_EQ(gpu.tokens.size(), size_t(steps));
  auto ref = TokenSampler::create(so);
  ASSERT_TRUE(bool(ref));
  SamplerRng rng(so.seed); // the draws both samplers made, one per step
  int same = 0;
  for (int64_t i = 0; i < steps; ++i) {
    double u = rng.uniform();
    if (gpu.tokens[i] == cpu.tokens[i]) {
      ++same;
      continue;
    }
    // A different token: only when u sits at a boundary of the CPU's distribution.
    auto d = ref->distribution(cpu.rows[i]);
    ASSERT_TRUE(bool(d));
    double cum = 0, nearest = 1;
    for (const TokenProb &t : *d) {
      cum += t.prob;
      nearest = std::min(nearest, std::abs(cum - u));
    }
    EXPECT_LT(nearest, 1e-2) << "step " << i << ": cpu " << cpu.tokens[i] << ", gpu "
                             << gpu.tokens[i] << ", u " << u;
  }
  EXPECT_GE(same, steps - 2);
}
