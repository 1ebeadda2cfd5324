//===- QuantModelGpuTest.cpp - a quantised GGUF model on the GPU ------------===//
//
// tests/models/gen_models.py's qwen3 with q8_0 layer matrices, compiled for
// the GPU with its weights read as stored (no f16 copy): a Session on the
// cuda backend, teacher-forced with the CPU reference's tokens, gives the
// CPU's logits (normalised error ≤ 1e-2: weights dequantised to f16 in
// registers; the 16-token prefill bucket decodes them to f16 for cuBLAS, the
// 4-token bucket and decode steps use the GEMVs). Skips without a GPU or
// without the Python packages that write the model.
//
//===----------------------------------------------------------------------===//
#include "GpuTestUtil.h"

#include "../unit/models/ModelFiles.h"
#include "frontends/Frontend.h"
#include "runtime/Session.h"

#include <algorithm>

using namespace fg;
using namespace fg::gputest;

namespace {

std::vector<std::vector<float>> logitRows(const Plan &plan, ExecOptions::Device device,
                                          llvm::ArrayRef<int32_t> prompt, int64_t steps,
                                          llvm::ArrayRef<int32_t> forced,
                                          std::vector<int32_t> &tokens) {
  std::vector<std::vector<float>> rows;
  ExecOptions eo;
  eo.device = device;
  SessionOptions so;
  so.sample = [&](llvm::ArrayRef<float> l) -> llvm::Expected<int32_t> {
    rows.push_back(l.vec());
    return greedyToken(l);
  };
  auto s = Session::create(plan, eo, so);
  EXPECT_TRUE(bool(s)) << errString(s.takeError());
  if (!s)
    return rows;
  auto t = s->generate(prompt, steps, forced);
  EXPECT_TRUE(bool(t)) << errString(t.takeError());
  if (t)
    tokens = *t;
  return rows;
}

} // namespace

TEST(GpuQuantModel, Qwen3Q8_0MatchesTheCpuReference) {
  FG_REQUIRE_GPU();
  std::string why, dir = test::generatedModels(why);
  if (dir.empty())
    GTEST_SKIP() << "model files not generated: " << why;
  ModelOptions mo;
  mo.ctx = 64;
  mo.prefill = {4, 16};
  auto m = loadModelWithWeights(dir + "/qwen3-q8_0.gguf", mo);
  ASSERT_TRUE(bool(m)) << errString(m.takeError());
  CompileOptions co;
  std::string log;
  co.log = [&](LogLevel, llvm::StringRef s) { log += s.str() + "\n"; };
  for (const WeightEntry &w : m->weights.entries())
    co.weights.push_back({w.name, w.type, w.recipe, w.data});
  auto plan = compile(m->graph, co);
  ASSERT_TRUE(bool(plan)) << errString(plan.takeError());
  EXPECT_EQ(log.find("dequantised to f16"), std::string::npos) << log;
  size_t quantised = 0;
  for (const Argument &a : plan->graph().lookup("decode")->arguments())
    quantised += isQuantized(plan->graph().lookup("decode")->value(a.value).type.dtype);
  EXPECT_EQ(quantised, 14u) << "7 q8_0 matrices in each of 2 layers, read as stored";

  std::vector<int32_t> prompt;
  for (int32_t i = 0; i < 21; ++i)
    prompt.push_back((i * 37 + 11) % 64);
  const int64_t steps = 12;
  std::vector<int32_t> cpuTokens, gpuTokens;
  auto cpu = logitRows(*plan, ExecOptions::Device::Cpu, prompt, steps, {}, cpuTokens);
  ASSERT_EQ(cpuTokens.size(), static_cast<size_t>(steps));
  auto gpu = logitRows(*plan, ExecOptions::Device::Cuda, prompt, steps,
                       llvm::ArrayRef<int32_t>(cpuTokens).drop_back(), gpuTokens);
  ASSERT_EQ(gpu.size(), cpu.size());
  double worst = 0;
  for (size_t i = 0; i < cpu.size(); ++i) {
    double err = normalizedError(gpu[i], cpu[i]);
    worst = std::max(worst, err);
    EXPECT_LE(err, 1e-2) << "token " << i;
  }
  std::printf("[quant model] qwen3 q8_0: worst normalised error %.3g over %zu rows\n", worst,
              cpu.size());
}
