//===- TraceGpuTest.cpp - `--trace`: a traced graph replay on the GPU -------===//
//
// One decode step of the demo replayed as a CUDA graph with CUPTI tracing
// (ExecOptions::profileLaunches): every launch gets a device interval and the
// Chrome trace written from them parses with one event per launch.
//
// CUPTI and compute-sanitizer both subscribe to the driver's callbacks and
// CUPTI refuses a second subscriber: under scripts/gpu-sanitize.sh (which sets
// FG_UNDER_SANITIZER) the test skips, naming why.
//
//===----------------------------------------------------------------------===//
#include "GpuTestUtil.h"

#include "frontends/Frontend.h"
#include "runtime/StepTrace.h"

#include "llvm/Support/JSON.h"

#include <cstdlib>

using namespace fg;
using namespace fg::gputest;

TEST(TraceGpu, GraphReplayGivesEveryLaunchAnIntervalAndATraceEvent) {
  FG_REQUIRE_GPU();
  if (std::getenv("FG_UNDER_SANITIZER"))
    GTEST_SKIP() << "CUPTI cannot subscribe beside compute-sanitizer";
  ModelOptions mo;
  mo.ctx = 256;
  auto g = loadModel("demo", mo);
  ASSERT_TRUE(bool(g)) << errString(g.takeError());
  auto plan = compile(*g, CompileOptions{});
  ASSERT_TRUE(bool(plan)) << errString(plan.takeError());
  ExecOptions o;
  o.device = ExecOptions::Device::Cuda;
  o.mode = ExecOptions::Mode::Graph;
  o.profileLaunches = true;
  auto exec = Executor::create(*plan, o);
  ASSERT_TRUE(bool(exec)) << errString(exec.takeError());
  ASSERT_FALSE(bool(exec->setInput("tokens", {3})));
  ASSERT_FALSE(bool(exec->setInput("positions", {0})));
  for (int i = 0; i < 2; ++i)
    ASSERT_FALSE(bool(exec->run("decode")));
  std::vector<Executor::LaunchTime> launches = exec->lastLaunchTimes();
  const Function &fn = *exec->entry("decode");
  ASSERT_FALSE(launches.empty());
  for (const Executor::LaunchTime &l : launches) {
    EXPECT_GT(l.endNs, l.startNs) << l.what;
    EXPECT_GT(l.ms, -1e-9) << l.what;
  }
  std::string text = chromeTraceJson(fn, launches, 1, "demo");
  llvm::Expected<llvm::json::Value> v = llvm::json::parse(text);
  ASSERT_TRUE(bool(v)) << errString(v.takeError());
  size_t complete = 0;
  for (const llvm::json::Value &e : *v->getAsObject()->getArray("traceEvents"))
    complete += *e.getAsObject()->getString("ph") == "X";
  EXPECT_EQ(complete, launches.size());
  uint64_t first = launches.front().startNs, last = 0;
  for (const Executor::LaunchTime &l : launches) {
    first = std::min(first, l.startNs);
    last = std::max(last, l.endNs);
  }
  // The step's span is at least the busiest launch and under a second.
  EXPECT_GT(last - first, 0u);
  EXPECT_LT(last - first, 1000000000u);
}
