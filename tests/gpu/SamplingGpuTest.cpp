//===- SamplingGpuTest.cpp - seeded sampling: same tokens on both devices --===//
//
// A seed gives the same tokens on both devices. First on the host's logits
// (a custom sampler on each device's rows): the GPU run is teacher-forced with
// the CPU's sampled tokens (the same inputs at every step) and samples its own
// token from its own logits with the same seed: each must equal the CPU's,
// unless the step's uniform draw lies within the logits' error of a boundary
// of the CPU's cumulative distribution (then either token is a correct draw).
// Then drawn on the device (kernels/sample.cuh, Executor::setTokenPick):
// against the host's TokenSampler on the very row the device drew from, for
// odd vocabularies, ties, -inf, every filter and the candidate cap; a Session
// drawing on the device (pipelined where the settings fit) against one that
// copies every row and draws on the host.
//
//===----------------------------------------------------------------------===//
#include "GpuTestUtil.h"

#include "frontends/Frontend.h"
#include "runtime/Sampler.h"
#include "runtime/Session.h"
#include "tests/unit/codegen/SamplingCases.h"

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
  int same = 0;
  for (int64_t i = 0; i < steps; ++i) {
    double u = samplerUniform(so.seed, static_cast<uint64_t>(i)); // the samplers' draw i
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

namespace {

/// logits = a / b over two integer inputs (ties, -inf from x / 0), with a
/// `positions` input the draw's counter reads.
Graph drawGraph(int64_t vocab) {
  Graph g;
  Function &fn = g.addFunction("main");
  Builder b(fn);
  auto a = b.input("a", {DType::I32, {1, vocab}});
  auto d = b.input("b", {DType::I32, {1, vocab}});
  b.input("positions", {DType::I32, {1}});
  b.result(b.div(b.convert(a, DType::F32), b.convert(d, DType::F32), "logits"));
  EXPECT_FALSE(bool(b.finish()));
  return g;
}

void drawCases(int64_t vocab, ExecOptions::Mode mode) {
  std::mt19937 rng(static_cast<uint32_t>(baseSeed() + 31 * vocab));
  auto plan = compile(drawGraph(vocab), [] {
    CompileOptions co;
    co.pipeline = "canonicalize,cse,dce";
    return co;
  }());
  ASSERT_TRUE(bool(plan)) << errString(plan.takeError());
  ExecOptions eo;
  eo.device = ExecOptions::Device::Cuda;
  eo.mode = mode;
  auto gpu = Executor::create(*plan, eo);
  ASSERT_TRUE(bool(gpu)) << errString(gpu.takeError());
  const std::vector<SamplingOptions> settings = test::drawSettings();
  // Rows: small integers over small divisors (many ties), a few -inf, a peak.
  std::uniform_int_distribution<int32_t> num(-60, 60), den(1, 6), pick(0, int32_t(vocab - 1));
  int drawn = 0, left = 0, boundary = 0, tied = 0;
  for (int r = 0; r < 6; ++r) {
    std::vector<int32_t> a(static_cast<size_t>(vocab)), b(static_cast<size_t>(vocab));
    for (int64_t i = 0; i < vocab; ++i)
      a[size_t(i)] = num(rng), b[size_t(i)] = den(rng);
    if (vocab > 4)
      for (int j = 0; j < 3; ++j) {
        size_t at = size_t(pick(rng));
        a[at] = -1, b[at] = 0; // -inf
      }
    if (r % 2) { // a peak (flat rows otherwise); at one index, or a / 0 is +inf
      const size_t at = size_t(pick(rng));
      a[at] = 400, b[at] = 1;
    }
    const int32_t pos = int32_t(r * 37 + 5);
    ASSERT_FALSE(bool(gpu->setInput("a", a)));
    ASSERT_FALSE(bool(gpu->setInput("b", b)));
    ASSERT_FALSE(bool(gpu->setInput("positions", std::vector<int32_t>{pos})));
    for (const SamplingOptions &so : settings)
      for (uint64_t epoch : {uint64_t(0), uint64_t(3)}) {
        SCOPED_TRACE("vocab " + std::to_string(vocab) + ", row " + std::to_string(r) + ", " +
                     so.str() + ", epoch " + std::to_string(epoch));
        auto on = gpu->setTokenPick(so, epoch);
        ASSERT_TRUE(bool(on)) << errString(on.takeError());
        ASSERT_TRUE(*on);
        ASSERT_FALSE(bool(gpu->run("main")));
        std::optional<int32_t> device = gpu->greedyToken();
        auto out = gpu->outputFloats("logits");
        ASSERT_TRUE(bool(out)) << errString(out.takeError());
        auto host = TokenSampler::create(so);
        ASSERT_TRUE(bool(host));
        const uint64_t draw = (epoch << 32) | uint32_t(pos + 1);
        auto want = host->sample(*out, draw);
        ASSERT_TRUE(bool(want)) << errString(want.takeError());
        if (!device) {
          EXPECT_TRUE(test::mayExceedTheCap(so)) << "the device left a row to the host";
          ++left;
          continue;
        }
        ++drawn;
        if (*device != *want)
          ++(test::checkDifferentDraw(so, *out, samplerUniform(so.seed, draw), *device, *want)
                 ? tied
                 : boundary);
      }
  }
  // Greedy again: the argmax, whatever was drawn before.
  auto off = gpu->setTokenPick(SamplingOptions{}, 0);
  ASSERT_TRUE(off && *off);
  ASSERT_FALSE(bool(gpu->run("main")));
  auto out = gpu->outputFloats("logits");
  ASSERT_TRUE(bool(out));
  EXPECT_EQ(gpu->greedyToken(), greedyToken(*out));
  EXPECT_GT(drawn, 0);
  EXPECT_LE(boundary, 1);
  if (vocab > 4000) {
    EXPECT_GT(left, 0) << "the flat rows' top-p should leave some rows to the host";
  }
  std::printf("vocab %lld: %d drawn on the device (%d at a boundary, %d past a tied top-p "
              "cut), %d left to the host\n",
              (long long)vocab, drawn, boundary, tied, left);
}

} // namespace

TEST(GpuSampling, DeviceDrawEqualsTheHostsOneBlock) {
  FG_REQUIRE_GPU();
  drawCases(1, ExecOptions::Mode::Graph);
  drawCases(7, ExecOptions::Mode::Graph);
  drawCases(509, ExecOptions::Mode::Graph);
}

TEST(GpuSampling, DeviceDrawEqualsTheHostsManyBlocks) {
  FG_REQUIRE_GPU();
  drawCases(32000, ExecOptions::Mode::Graph);
  drawCases(151936, ExecOptions::Mode::Eager);
}

/// A Session drawing on the device (no observers: pipelined where the
/// settings fit) generates what one drawing on the host from each copied row
/// generates (an observer forces the copy) — the same plan and device, so the
/// same rows — from a prompt and again after a reset; and a teacher-forced
/// device-drawing run equals the CPU session's draws but at boundaries.
TEST(GpuSampling, SessionDrawsOnTheDevice) {
  FG_REQUIRE_GPU();
  ModelOptions mo;
  mo.ctx = 160;
  mo.prefill = {4};
  auto g = loadModel("demo", mo);
  ASSERT_TRUE(bool(g)) << errString(g.takeError());
  auto plan = compile(*g, CompileOptions{});
  ASSERT_TRUE(bool(plan)) << errString(plan.takeError());
  const std::vector<int32_t> prompt = {1, 7, 42, 3, 99, 5};
  std::vector<SamplingOptions> settings(3);
  settings[0].temperature = 0.9, settings[0].topK = 40, settings[0].topP = 0.95;
  settings[1].temperature = 1.2, settings[1].minP = 0.01; // index order
  settings[2].temperature = 1.1, settings[2].topP = 0.8;  // not pipelined: may exceed the cap
  for (size_t i = 0; i < settings.size(); ++i) {
    SamplingOptions so = settings[i];
    so.seed = 77 + i;
    SCOPED_TRACE(so.str());
    auto run = [&](bool observe, bool pipeline) {
      ExecOptions eo;
      eo.device = ExecOptions::Device::Cuda;
      SessionOptions opts;
      opts.sampling = so;
      opts.pipeline = pipeline;
      if (observe)
        opts.onRun = [](const SessionRun &, Executor &) { return llvm::Error::success(); };
      auto s = Session::create(*plan, eo, opts);
      EXPECT_TRUE(bool(s)) << errString(s.takeError());
      std::vector<int32_t> out;
      if (!s)
        return out;
      for (int call = 0; call < 2; ++call) {
        auto t = s->generate(prompt, 40);
        EXPECT_TRUE(bool(t)) << errString(t.takeError());
        if (t)
          out.insert(out.end(), t->begin(), t->end());
        s->reset();
      }
      return out;
    };
    std::vector<int32_t> host = run(true, true), device = run(false, true),
                         unpipelined = run(false, false);
    ASSERT_EQ(host.size(), 80u);
    EXPECT_EQ(device, host);
    EXPECT_EQ(unpipelined, host);
    // The second generate draws anew (another epoch): not a repeat.
    EXPECT_NE(std::vector<int32_t>(host.begin(), host.begin() + 40),
              std::vector<int32_t>(host.begin() + 40, host.end()));
  }
  // Teacher-forced against the CPU's own draws: the CPU samples its rows on
  // the host, the GPU draws on the device from its own rows.
  SamplingOptions so = settings[0];
  so.seed = 5;
  const int64_t steps = 40;
  std::vector<std::vector<float>> cpuRows;
  std::vector<int32_t> cpuTokens;
  {
    ExecOptions eo;
    eo.device = ExecOptions::Device::Cpu;
    SessionOptions opts;
    opts.sampling = so;
    opts.onRun = [&](const SessionRun &r, Executor &) {
      cpuRows.emplace_back(r.logits.end() - 512, r.logits.end());
      return llvm::Error::success();
    };
    auto s = Session::create(*plan, eo, opts);
    ASSERT_TRUE(bool(s)) << errString(s.takeError());
    auto t = s->generate(prompt, steps);
    ASSERT_TRUE(bool(t)) << errString(t.takeError());
    cpuTokens = *t;
  }
  std::vector<int32_t> forced(cpuTokens.begin(), cpuTokens.end() - 1);
  ExecOptions eo;
  eo.device = ExecOptions::Device::Cuda;
  SessionOptions opts;
  opts.sampling = so;
  auto s = Session::create(*plan, eo, opts);
  ASSERT_TRUE(bool(s)) << errString(s.takeError());
  auto t = s->generate(prompt, steps, forced);
  ASSERT_TRUE(bool(t)) << errString(t.takeError());
  ASSERT_EQ(t->size(), size_t(steps));
  // The prompt's chunks add rows before the first draw: the draws' rows are
  // the last `steps` the CPU session saw.
  ASSERT_GE(cpuRows.size(), size_t(steps));
  int same = 0;
  for (int64_t i = 0; i < steps; ++i) {
    if ((*t)[size_t(i)] == cpuTokens[size_t(i)]) {
      ++same;
      continue;
    }
    const uint64_t draw = uint64_t(prompt.size() + size_t(i));
    EXPECT_LT(test::nearestBoundary(so, cpuRows[cpuRows.size() - size_t(steps) + size_t(i)],
                              samplerUniform(so.seed, draw)),
              1e-2)
        << "step " << i;
  }
  EXPECT_GE(same, steps - 2);
}
