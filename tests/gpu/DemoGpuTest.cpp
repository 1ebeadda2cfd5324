//===- DemoGpuTest.cpp - the demo decoder on the GPU ------------------------===//
//
// Graph replay equals eager bit for bit; teacher-forced logits over 1000
// decode steps stay within 1e-3 of the CPU reference; prefill then decode
// equals decode only; a saved and reloaded plan runs the same.
//
//===----------------------------------------------------------------------===//
#include "GpuTestUtil.h"

#include "frontends/Frontend.h"

#include "llvm/Support/FileSystem.h"

#include <cstring>

using namespace fg;
using namespace fg::gputest;

namespace {

Plan demoPlan(int64_t ctx = 2048) {
  ModelOptions mo;
  mo.ctx = ctx;
  auto g = loadModel("demo", mo);
  EXPECT_TRUE(bool(g)) << errString(g.takeError());
  CompileOptions co;
  auto plan = compile(*g, co);
  EXPECT_TRUE(bool(plan)) << errString(plan.takeError());
  return std::move(*plan);
}

Executor make(const Plan &plan, ExecOptions::Device d,
              ExecOptions::Mode m = ExecOptions::Mode::Graph) {
  return makeExecutor(plan, d, m);
}

std::vector<float> step(Executor &e, int32_t token, int32_t pos) {
  return decodeStep(e, token, pos);
}

// The graph joins kernels with programmatic edges (PDL) and eager launches do
// not: equal bits say no kernel reads an input before its producer is done.
TEST(GpuDemo, GraphReplayEqualsEagerBitForBit) {
  FG_REQUIRE_GPU();
  Plan plan = demoPlan();
  Executor graph = make(plan, ExecOptions::Device::Cuda, ExecOptions::Mode::Graph);
  Executor eager = make(plan, ExecOptions::Device::Cuda, ExecOptions::Mode::Eager);
  for (int32_t p = 0; p < 50; ++p) {
    int32_t tok = (p * 37 + 11) % 512;
    auto a = step(graph, tok, p), b = step(eager, tok, p);
    ASSERT_EQ(a.size(), b.size());
    ASSERT_EQ(0, std::memcmp(a.data(), b.data(), a.size() * sizeof(float))) << "step " << p;
  }
}

/// Teacher-forced steps of `plan` on the GPU (`mode`) against the CPU
/// reference, random tokens from the test seed; the worst normalised error.
double teacherForcedWorst(const Plan &plan, ExecOptions::Mode mode, int32_t steps) {
  Executor gpu = make(plan, ExecOptions::Device::Cuda, mode);
  Executor cpu = make(plan, ExecOptions::Device::Cpu);
  std::mt19937 rng(static_cast<uint32_t>(baseSeed()));
  double worst = 0;
  for (int32_t p = 0; p < steps; ++p) {
    int32_t tok = static_cast<int32_t>(rng() % 512);
    auto a = step(gpu, tok, p), b = step(cpu, tok, p);
    double err = normalizedError(a, b);
    worst = std::max(worst, err);
    EXPECT_LE(err, 1e-3) << "step " << p << " token " << tok;
    if (err > 1e-3)
      break;
  }
  return worst;
}

/// The same tokens through the unfused plan and through eager launches:
/// tells a fused kernel, the graph (PDL edges, in-graph copies) and the
/// kernels themselves apart when the fused graph run disagrees.
TEST(GpuDemo, TeacherForcedUnfusedAndEagerMatchReference) {
  FG_REQUIRE_GPU();
  ModelOptions mo;
  mo.ctx = 2048;
  auto g = loadModel("demo", mo);
  ASSERT_TRUE(bool(g)) << errString(g.takeError());
  CompileOptions co;
  co.fusion = false;
  auto unfused = compile(*g, co);
  ASSERT_TRUE(bool(unfused)) << errString(unfused.takeError());
  std::printf("[demo] teacher-forced 200 steps unfused graph: worst %.3g\n",
              teacherForcedWorst(*unfused, ExecOptions::Mode::Graph, 200));
  Plan fused = demoPlan();
  std::printf("[demo] teacher-forced 200 steps fused eager: worst %.3g\n",
              teacherForcedWorst(fused, ExecOptions::Mode::Eager, 200));
}

TEST(GpuDemo, TeacherForced1000StepsMatchReference) {
  FG_REQUIRE_GPU();
  Plan plan = demoPlan();
  Executor gpu = make(plan, ExecOptions::Device::Cuda);
  Executor cpu = make(plan, ExecOptions::Device::Cpu);
  std::mt19937 rng(static_cast<uint32_t>(baseSeed()));
  double worst = 0;
  for (int32_t p = 0; p < 1000; ++p) {
    int32_t tok = static_cast<int32_t>(rng() % 512);
    auto a = step(gpu, tok, p), b = step(cpu, tok, p);
    double err = normalizedError(a, b);
    worst = std::max(worst, err);
    ASSERT_LE(err, 1e-3) << "step " << p;
  }
  std::printf("[demo] teacher-forced 1000 steps: worst normalised error %.3g\n", worst);
}

TEST(GpuDemo, PrefillThenDecodeEqualsDecodeOnly) {
  FG_REQUIRE_GPU();
  Plan plan = demoPlan();
  Executor a = make(plan, ExecOptions::Device::Cuda);
  Executor b = make(plan, ExecOptions::Device::Cuda);
  const std::vector<int32_t> prompt = {1, 7, 42, 3, 99, 12, 5, 8};
  // a: the prompt through prefill_64, padded as Session pads: 56 padding rows
  // FIRST (positions 8..63, past the prompt), then the prompt at 0..7, so the
  // entry's one row of logits (the last row) is the prompt's last token's.
  const int32_t P = static_cast<int32_t>(prompt.size());
  std::vector<int32_t> toks(64, 0), pos(64);
  for (int32_t i = 0; i < 64 - P; ++i)
    pos[i] = P + i;
  for (int32_t i = 0; i < P; ++i) {
    toks[64 - P + i] = prompt[i];
    pos[64 - P + i] = i;
  }
  ASSERT_FALSE(bool(a.setInput("tokens", toks)));
  ASSERT_FALSE(bool(a.setInput("positions", pos)));
  ASSERT_FALSE(bool(a.run("prefill_64")));
  auto all = a.outputFloats("logits");
  ASSERT_TRUE(bool(all));
  ASSERT_EQ(all->size(), 512u); // prefill returns the last row only
  std::vector<float> lastA(all->begin(), all->end());
  // b: the prompt token by token.
  std::vector<float> lastB;
  for (size_t i = 0; i < prompt.size(); ++i)
    lastB = step(b, prompt[i], static_cast<int32_t>(i));
  // 1e-3 (issue 15's bound for f32 logits): the prefill's flash kernel keeps
  // q and P as one rounded half each over the f16 cache (2.1e-4 measured on
  // the H200, eighth session); decode steps after it read the same cache.
  EXPECT_LE(normalizedError(lastA, lastB), 1e-3);
  for (int32_t p = 8; p < 24; ++p) {
    int32_t tok = (p * 13) % 512;
    EXPECT_LE(normalizedError(step(a, tok, p), step(b, tok, p)), 1e-3) << "step " << p;
  }
}

TEST(GpuDemo, SavedPlanRunsTheSame) {
  FG_REQUIRE_GPU();
  Plan plan = demoPlan();
  llvm::SmallString<128> path;
  ASSERT_FALSE(bool(llvm::sys::fs::createTemporaryFile("demo", "plan", path)));
  ASSERT_FALSE(bool(plan.save(path)));
  auto loaded = Plan::load(path);
  ASSERT_TRUE(bool(loaded)) << errString(loaded.takeError());
  Executor a = make(plan, ExecOptions::Device::Cuda);
  Executor b = make(*loaded, ExecOptions::Device::Cuda);
  for (int32_t p = 0; p < 5; ++p) {
    auto x = step(a, p + 3, p), y = step(b, p + 3, p);
    ASSERT_EQ(0, std::memcmp(x.data(), y.data(), x.size() * sizeof(float)));
  }
  llvm::sys::fs::remove(path);
}

// A position at ctx is refused by the device-side input check (the step's
// error names the input, its value and the range of the positions binding),
// and the next good step runs.
TEST(GpuDemo, PositionPastCtxIsRefused) {
  FG_REQUIRE_GPU();
  Plan plan = demoPlan(256);
  Executor e = make(plan, ExecOptions::Device::Cuda);
  ASSERT_FALSE(bool(e.setInput("tokens", {1})));
  ASSERT_FALSE(bool(e.setInput("positions", {256})));
  auto err = e.run("decode");
  ASSERT_TRUE(bool(err));
  std::string msg = errString(std::move(err));
  EXPECT_NE(msg.find("'positions'[0] = 256 is outside [0, 256)"), std::string::npos) << msg;
  EXPECT_FALSE(step(e, 1, 0).empty());
}

} // namespace

namespace {

/// Every computed (non-view, non-state) value of `entry` becomes a result, and
/// each is compared with the reference: names the first op that goes wrong.
void compareEveryValue(llvm::StringRef entry, int32_t tokens, bool eager, double tol) {
  ModelOptions mo;
  mo.ctx = 2048;
  auto g = loadModel("demo", mo);
  ASSERT_TRUE(bool(g));
  Graph one;
  Function &fn = one.addFunction(entry.str());
  fn = *g->lookup(entry);
  llvm::SmallVector<ValueId, 64> results;
  for (const Node &n : fn.nodes()) {
    if (n.info().has(kViewLike))
      continue;
    for (size_t r = n.info().numUpdatedStates(); r < n.results.size(); ++r)
      results.push_back(n.results[r]);
  }
  fn.setResults(results);
  Inputs in;
  for (int32_t i = 0; i < tokens; ++i) {
    in["tokens"].push_back((i * 37 + 11) % 512);
    in["positions"].push_back(i);
  }
  expectMatchesReference(one, in, tol, entry, eager);
}

/// The prefill's attention is the flash kernel with q and P as one rounded
/// half each (2.1e-4 on its output on the H200, eighth session): 1e-3.
constexpr double kPrefillTol = 1e-3, kDecodeTol = 1e-4;

TEST(GpuDemoDiag, PrefillEveryValueGraph) {
  FG_REQUIRE_GPU();
  compareEveryValue("prefill_64", 64, false, kPrefillTol);
}
TEST(GpuDemoDiag, PrefillEveryValueEager) {
  FG_REQUIRE_GPU();
  compareEveryValue("prefill_64", 64, true, kPrefillTol);
}
TEST(GpuDemoDiag, DecodeEveryValue) {
  FG_REQUIRE_GPU();
  compareEveryValue("decode", 1, false, kDecodeTol);
}

} // namespace

namespace {

/// The demo's fused and unfused plans give teacher-forced logits within 1e-3
/// over 64 steps, and the same greedy token wherever the top-2 margin (as a
/// fraction of the logits' norm) exceeds that error.
TEST(GpuDemo, FusedEqualsUnfused64Steps) {
  FG_REQUIRE_GPU();
  ModelOptions mo;
  mo.ctx = 2048;
  auto g = loadModel("demo", mo);
  ASSERT_TRUE(bool(g));
  CompileOptions fusedOpts, plainOpts;
  plainOpts.fusion = false;
  auto fused = compile(*g, fusedOpts);
  auto plain = compile(*g, plainOpts);
  ASSERT_TRUE(bool(fused)) << errString(fused.takeError());
  ASSERT_TRUE(bool(plain)) << errString(plain.takeError());
  size_t fusedOps = 0;
  for (const Node &n : fused->graph().lookup("decode")->nodes())
    fusedOps += n.info().has(kFused);
  EXPECT_GT(fusedOps, 0u) << "the fused plan has no fused op";
  Executor a = make(*fused, ExecOptions::Device::Cuda);
  Executor b = make(*plain, ExecOptions::Device::Cuda);
  std::mt19937 rng(static_cast<uint32_t>(baseSeed() + 1));
  double worst = 0;
  int compared = 0, agreed = 0;
  for (int32_t p = 0; p < 64; ++p) {
    int32_t tok = static_cast<int32_t>(rng() % 512);
    auto x = step(a, tok, p), y = step(b, tok, p);
    double err = normalizedError(x, y);
    worst = std::max(worst, err);
    EXPECT_LE(err, 1e-3) << "step " << p;
    // Greedy agreement where the reference's top-2 margin is clear.
    std::vector<float> s = y;
    std::partial_sort(s.begin(), s.begin() + 2, s.end(), std::greater<float>());
    double norm = 0;
    for (float v : y)
      norm += double(v) * v;
    if ((s[0] - s[1]) / std::sqrt(norm / y.size()) <= 1e-3)
      continue;
    ++compared;
    auto am = [](const std::vector<float> &v) { return std::max_element(v.begin(), v.end()) - v.begin(); };
    agreed += am(x) == am(y);
  }
  EXPECT_EQ(agreed, compared);
  std::printf("[demo] fused vs unfused over 64 steps: worst normalised error %.3g, greedy %d/%d\n",
              worst, agreed, compared);
}

} // namespace
