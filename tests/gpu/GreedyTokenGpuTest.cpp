//===- GreedyTokenGpuTest.cpp - the greedy token picked on the device -------===//
//
// An entry with an f32 `logits` result ends with a launch that takes the first
// argmax of the last row (codegen/cuda/GreedyToken.h); Executor::greedyToken
// reads it from the status words. Here `logits` = a / b over two integer
// inputs, so a case can hold ties (first index wins, -0 against +0 too), +inf,
// -inf rows and NaN: the token must equal the host's first argmax of the
// row the GPU computed, and be absent where the row has a NaN, a +inf or only
// -inf (the host sampler's refusals).
// Vocabularies of one block and of 128 blocks; every case replayed in turn
// (the counters reset themselves), in graph and eager mode.
//
//===----------------------------------------------------------------------===//
#include "GpuTestUtil.h"

#include "frontends/Frontend.h"
#include "runtime/Session.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>

using namespace fg;
using namespace fg::gputest;

namespace {

Graph divGraph(int64_t rows, int64_t vocab) {
  Graph g;
  Function &fn = g.addFunction("main");
  Builder b(fn);
  auto a = b.input("a", {DType::I32, {rows, vocab}});
  auto d = b.input("b", {DType::I32, {rows, vocab}});
  b.result(b.div(b.convert(a, DType::F32), b.convert(d, DType::F32), "logits"));
  EXPECT_FALSE(bool(b.finish()));
  return g;
}

struct Case {
  std::string name;
  std::vector<int32_t> a, b;
};

/// The host's greedy pick of `row`: the first argmax; none for a NaN, a
/// +inf (the host sampler refuses both; so does the device since the
/// thirty-sixth session, and the host then reads the row and says which) or
/// a row of -inf.
std::optional<int32_t> hostGreedy(llvm::ArrayRef<float> row) {
  int32_t best = 0;
  for (size_t i = 0; i < row.size(); ++i) {
    if (std::isnan(row[i]))
      return std::nullopt;
    if (row[i] > row[static_cast<size_t>(best)])
      best = static_cast<int32_t>(i);
  }
  if (std::isinf(row[static_cast<size_t>(best)]))
    return std::nullopt;
  return best;
}

void greedyCases(int64_t vocab, ExecOptions::Mode mode) {
  const int64_t rows = 2, n = rows * vocab;
  std::mt19937 rng(static_cast<uint32_t>(baseSeed() + vocab));
  std::uniform_int_distribution<int32_t> small(-40, 40);
  std::vector<Case> cases;
  auto make = [&](std::string name) {
    Case c{std::move(name), std::vector<int32_t>(n), std::vector<int32_t>(n, 1)};
    for (auto &x : c.a)
      x = small(rng);
    return c;
  };
  const int64_t last = (rows - 1) * vocab;
  cases.push_back(make("ties")); // 81 values over the row: many ties at the top
  {
    Case c = make("minus-zero-first");
    for (int64_t i = 0; i < vocab; ++i)
      c.a[last + i] = -5;
    c.a[last + 3] = 0, c.b[last + 3] = -1; // -0
    c.a[last + vocab - 2] = 0;             // +0, later: index 3 wins
    cases.push_back(c);
  }
  {
    Case c = make("plus-inf");
    c.a[last + vocab / 2] = 1, c.b[last + vocab / 2] = 0;
    cases.push_back(c);
  }
  {
    Case c = make("nan-in-last-row");
    c.a[last + vocab - 1] = 0, c.b[last + vocab - 1] = 0;
    cases.push_back(c);
  }
  {
    Case c = make("nan-in-an-earlier-row");
    c.a[1] = 0, c.b[1] = 0;
    cases.push_back(c);
  }
  {
    Case c = make("all-minus-inf");
    for (int64_t i = 0; i < vocab; ++i)
      c.a[last + i] = -1, c.b[last + i] = 0;
    cases.push_back(c);
  }
  {
    Case c = make("max-at-the-end");
    c.a[last + vocab - 1] = 1000;
    cases.push_back(c);
  }
  CompileOptions co;
  co.pipeline = "canonicalize,cse,dce";
  auto plan = compile(divGraph(rows, vocab), co);
  ASSERT_TRUE(bool(plan)) << errString(plan.takeError());
  ExecOptions eo;
  eo.device = ExecOptions::Device::Cuda;
  eo.mode = mode;
  auto gpu = Executor::create(*plan, eo);
  ASSERT_TRUE(bool(gpu)) << errString(gpu.takeError());
  EXPECT_FALSE(gpu->greedyToken().has_value()); // nothing has run
  int absent = 0;
  for (int round = 0; round < 2; ++round)
    for (const Case &c : cases) {
      SCOPED_TRACE(c.name + ", vocab " + std::to_string(vocab) + ", round " +
                   std::to_string(round));
      ASSERT_FALSE(bool(gpu->setInput("a", c.a)));
      ASSERT_FALSE(bool(gpu->setInput("b", c.b)));
      ASSERT_FALSE(bool(gpu->run("main")));
      std::optional<int32_t> device = gpu->greedyToken();
      auto out = gpu->outputFloats("logits");
      ASSERT_TRUE(bool(out)) << errString(out.takeError());
      llvm::ArrayRef<float> row = out->drop_front(static_cast<size_t>(last));
      std::optional<int32_t> want = hostGreedy(row);
      EXPECT_EQ(device, want);
      absent += !want;
      if (c.name == "minus-zero-first") {
        EXPECT_EQ(want, 3);
      }
      if (c.name == "plus-inf") {
        EXPECT_EQ(row[static_cast<size_t>(vocab / 2)], std::numeric_limits<float>::infinity());
        EXPECT_FALSE(want.has_value());
      }
      if (c.name == "max-at-the-end") {
        EXPECT_EQ(want, vocab - 1);
      }
    }
  EXPECT_EQ(absent, 6); // the NaN, +inf and -inf rows, twice: the cases are what they say
}

} // namespace

TEST(GpuGreedyToken, OneBlockGraph) {
  FG_REQUIRE_GPU();
  greedyCases(509, ExecOptions::Mode::Graph);
}

TEST(GpuGreedyToken, ManyBlocksGraph) {
  FG_REQUIRE_GPU();
  greedyCases(130001, ExecOptions::Mode::Graph);
}

TEST(GpuGreedyToken, ManyBlocksEager) {
  FG_REQUIRE_GPU();
  greedyCases(4099, ExecOptions::Mode::Eager);
}

/// A greedy Session on the GPU takes the device's token (no logits copy)
/// and generates what the CPU session generates, twice (the second from a
/// reset); lastLogits() still gives the row when asked, equal to the CPU's.
TEST(GpuGreedyToken, SessionTakesTheDevicesToken) {
  FG_REQUIRE_GPU();
  ModelOptions mo;
  mo.ctx = 64;
  mo.prefill = {4};
  auto g = loadModel("demo", mo);
  ASSERT_TRUE(bool(g)) << errString(g.takeError());
  auto plan = compile(*g, CompileOptions{});
  ASSERT_TRUE(bool(plan)) << errString(plan.takeError());
  std::vector<std::vector<int32_t>> tokens;
  std::vector<std::vector<float>> rows;
  for (ExecOptions::Device d : {ExecOptions::Device::Cpu, ExecOptions::Device::Cuda}) {
    ExecOptions eo;
    eo.device = d;
    auto s = Session::create(*plan, eo, SessionOptions{});
    ASSERT_TRUE(bool(s)) << errString(s.takeError());
    auto t = s->generate({5, 17, 42, 7, 99}, 12);
    ASSERT_TRUE(bool(t)) << errString(t.takeError());
    tokens.push_back(*t);
    rows.push_back(s->lastLogits().vec());
    if (d == ExecOptions::Device::Cuda) {
      EXPECT_TRUE(s->executor().greedyToken().has_value());
      // Again from a reset (the state, the counters with the status words'
      // device mirror, and the host's status words): the same tokens, the
      // pipelined steps waiting on the count the check now writes from 1.
      s->reset();
      auto again = s->generate({5, 17, 42, 7, 99}, 12);
      ASSERT_TRUE(bool(again)) << errString(again.takeError());
      EXPECT_EQ(*again, *t);
    }
  }
  EXPECT_EQ(tokens[0], tokens[1]);
  ASSERT_EQ(rows[1].size(), 512u);
  EXPECT_LE(normalizedError(rows[1], rows[0]), 1e-3);
}

/// The pipelined generate (step k + 1 enqueued before step k's token is
/// read, its token fed on the device): a stop token in the middle ends both
/// devices at the same token with the same history; lastLogits() is the last
/// fed token's row (the GPU runs it again: a step past the stop ran after
/// it); a second generate from there continues equally; an onToken that
/// refuses stops both after the same token. Graph and eager mode.
TEST(GpuGreedyToken, PipelinedSessionStopsWhereTheCpuStops) {
  FG_REQUIRE_GPU();
  ModelOptions mo;
  mo.ctx = 96;
  mo.prefill = {4};
  auto g = loadModel("demo", mo);
  ASSERT_TRUE(bool(g)) << errString(g.takeError());
  auto plan = compile(*g, CompileOptions{});
  ASSERT_TRUE(bool(plan)) << errString(plan.takeError());
  const std::vector<int32_t> prompt = {11, 3, 250, 8, 77};
  // The CPU's free run picks the stop token: the last one that first occurs
  // at an index >= 1 (the demo's greedy runs repeat themselves), so the
  // stop comes while a step past it is in flight.
  std::vector<int32_t> free;
  {
    ExecOptions eo;
    eo.device = ExecOptions::Device::Cpu;
    auto s = Session::create(*plan, eo, SessionOptions{});
    ASSERT_TRUE(bool(s)) << errString(s.takeError());
    auto t = s->generate(prompt, 10);
    ASSERT_TRUE(bool(t)) << errString(t.takeError());
    free = *t;
  }
  size_t stopAt = 0;
  for (size_t j = 1; j < free.size(); ++j)
    if (std::find(free.begin(), free.begin() + static_cast<std::ptrdiff_t>(j), free[j]) ==
        free.begin() + static_cast<std::ptrdiff_t>(j))
      stopAt = j;
  ASSERT_GE(stopAt, 1u) << "the free run repeats one token";
  const int32_t stop = free[stopAt];
  for (ExecOptions::Mode mode : {ExecOptions::Mode::Graph, ExecOptions::Mode::Eager}) {
    SCOPED_TRACE(mode == ExecOptions::Mode::Graph ? "graph" : "eager");
    struct Run {
      std::vector<int32_t> first, second, history, refused;
      std::vector<float> logits;
      bool stopped = false;
    };
    std::vector<Run> runs;
    for (ExecOptions::Device d : {ExecOptions::Device::Cpu, ExecOptions::Device::Cuda}) {
      Run r;
      ExecOptions eo;
      eo.device = d;
      eo.mode = mode;
      SessionOptions so;
      so.stopTokens = {stop};
      auto s = Session::create(*plan, eo, so);
      ASSERT_TRUE(bool(s)) << errString(s.takeError());
      if (d == ExecOptions::Device::Cuda) {
        EXPECT_TRUE(s->executor().pipelines());
      }
      auto t = s->generate(prompt, 10);
      ASSERT_TRUE(bool(t)) << errString(t.takeError());
      r.first = *t;
      if (d == ExecOptions::Device::Cuda) {
        EXPECT_EQ(s->stats().decodeSteps, static_cast<int64_t>(stopAt));
      }
      r.stopped = s->stats().stopped;
      r.logits = s->lastLogits().vec();
      r.history = s->history().vec();
      auto t2 = s->generate({5, 6}, 7);
      ASSERT_TRUE(bool(t2)) << errString(t2.takeError());
      r.second = *t2;
      // onToken refusing the 3rd token.
      int seen = 0;
      SessionOptions so2;
      so2.onToken = [&](int32_t) { return ++seen < 3; };
      auto s2 = Session::create(*plan, eo, so2);
      ASSERT_TRUE(bool(s2)) << errString(s2.takeError());
      auto t3 = s2->generate(prompt, 9);
      ASSERT_TRUE(bool(t3)) << errString(t3.takeError());
      r.refused = *t3;
      EXPECT_EQ(s2->history().size(), prompt.size() + 2); // the 3rd token is not fed
      runs.push_back(std::move(r));
    }
    const Run &cpu = runs[0], &gpu = runs[1];
    ASSERT_EQ(cpu.first.size(), stopAt + 1); // ended at the stop token
    EXPECT_TRUE(cpu.stopped);
    EXPECT_EQ(gpu.first, cpu.first);
    EXPECT_TRUE(gpu.stopped);
    EXPECT_EQ(gpu.history, cpu.history);
    ASSERT_EQ(gpu.logits.size(), cpu.logits.size());
    EXPECT_LE(normalizedError(gpu.logits, cpu.logits), 1e-3);
    EXPECT_EQ(gpu.second, cpu.second);
    EXPECT_EQ(cpu.refused.size(), 3u);
    EXPECT_EQ(gpu.refused, cpu.refused);
  }
}
