//===- workloads.cpp - decode steps of the DESIGN workloads, four modes ----===//
//
// For each workload (w-dense, w-moe-12, w-moe-48, w-tiny; random f16 weights
// generated on the device, ctx 2048) and each mode (eager|graph x
// unfused|fused): warm-up, then timed steps from position 1024 (KV 1024),
// each step = inputs in, launch, synchronise. Manual time = wall per step;
// counters: medians of wall, GPU (CUDA events) and host launch time, the
// ideal time (ideal bytes / read bandwidth measured in this run) and % of
// roofline. `<workload>/breakdown-<fused|unfused>` profiles graph replays (CUPTI) per
// launch and reports ms per kernel family (counters `ms:<family>` and
// `ideal_ms:<family>`; the table goes to stderr). `bandwidth/*` report the
// measured bandwidth.
//
//   fg_bench_workloads --benchmark_filter='w-tiny' --benchmark_out=tiny.json
//
//===----------------------------------------------------------------------===//
#include "BenchCommon.h"

#include "frontends/models/Workloads.h"

#include <cstdio>

using namespace fg;
using namespace fg::bench;

namespace {

constexpr int64_t kKv = 1024;
constexpr int64_t kCtx = 2048;
constexpr int64_t kWarmup = 20;
constexpr int64_t kSteps = 100;

const CachedPlan &workloadPlan(const std::string &name, bool fused) {
  return cachedPlan(name + (fused ? "/fused" : "/unfused"), [&]() -> llvm::Expected<Plan> {
    WorkloadOptions wo;
    wo.ctx = kCtx;
    auto g = buildWorkload(name, wo);
    if (!g)
      return g.takeError();
    CompileOptions co;
    co.ctx = kCtx;
    co.fusion = fused;
    co.source = name;
    return compile(*g, co);
  });
}

void modelStep(benchmark::State &state, const std::string &name, bool fused, bool graph) {
  if (!needDevice(state))
    return;
  const CachedPlan &cp = workloadPlan(name, fused);
  if (!cp.plan) {
    state.SkipWithError(("compile failed: " + firstLine(cp.error)).c_str());
    return;
  }
  ExecOptions eo;
  eo.device = ExecOptions::Device::Cuda;
  eo.mode = graph ? ExecOptions::Mode::Graph : ExecOptions::Mode::Eager;
  auto exec = Executor::create(*cp.plan, eo);
  if (!exec) {
    state.SkipWithError(firstLine(llvm::toString(exec.takeError())).c_str());
    return;
  }
  StepLoopOptions lo;
  lo.warmup = kWarmup;
  lo.startPosition = kKv;
  auto samples = timeSteps(state, *exec, lo, StepClock::Wall);
  if (!samples)
    return;
  StepSummary sum = summarize(*samples);
  StepBytes ideal = idealStepBytes(*cp.plan->graph().lookup("decode"), kKv);
  double idealMs = bytesPerMs() > 0 ? ideal.total() / bytesPerMs() : 0;
  state.counters["wall_ms_median"] = sum.wallMs;
  state.counters["gpu_ms_median"] = sum.gpuMs;
  state.counters["host_launch_ms_median"] = sum.hostLaunchMs;
  state.counters["ideal_bytes"] = ideal.total();
  state.counters["ideal_ms"] = idealMs;
  state.counters["roofline_pct"] = sum.wallMs > 0 ? 100 * idealMs / sum.wallMs : 0;
  state.counters["read_gbs"] = bandwidth() ? bandwidth()->readGBs : 0;
  state.counters["steps"] = static_cast<double>(sum.steps);
}

void breakdown(benchmark::State &state, const std::string &name, bool fused) {
  if (!needDevice(state))
    return;
  const CachedPlan &cp = workloadPlan(name, fused);
  if (!cp.plan) {
    state.SkipWithError(("compile failed: " + firstLine(cp.error)).c_str());
    return;
  }
  ExecOptions eo;
  eo.device = ExecOptions::Device::Cuda;
  eo.mode = ExecOptions::Mode::Graph; // CUPTI-traced replays
  eo.profileLaunches = true;
  auto exec = Executor::create(*cp.plan, eo);
  if (!exec) {
    state.SkipWithError(firstLine(llvm::toString(exec.takeError())).c_str());
    return;
  }
  StepLoopOptions lo;
  lo.warmup = 5;
  lo.startPosition = kKv;
  std::vector<FamilyTime> fams;
  for (auto _ : state) {
    auto f = profileFamilies(*exec, lo, 10, kKv);
    if (!f) {
      state.SkipWithError(firstLine(llvm::toString(f.takeError())).c_str());
      return;
    }
    fams = std::move(*f);
    double total = 0;
    for (const FamilyTime &x : fams)
      total += x.ms;
    state.SetIterationTime(total / 1e3);
  }
  double bpm = bytesPerMs();
  std::fprintf(stderr, "\n%s eager %s, per kernel family (mean of 10 profiled steps):\n",
               name.c_str(), fused ? "fused" : "unfused");
  std::fprintf(stderr, "  %-34s %8s %10s %10s %10s %8s\n", "family", "launches", "ms", "MB",
               "ideal ms", "% ideal");
  for (const FamilyTime &x : fams) {
    double ideal = bpm > 0 ? x.bytes / bpm : 0;
    state.counters["ms:" + x.family] = x.ms;
    state.counters["ideal_ms:" + x.family] = ideal;
    state.counters["launches:" + x.family] = static_cast<double>(x.launches);
    std::fprintf(stderr, "  %-34s %8lld %10.4f %10.2f %10.4f %7.1f%%\n", x.family.c_str(),
                 static_cast<long long>(x.launches), x.ms, x.bytes / 1e6, ideal,
                 x.ms > 0 ? 100 * ideal / x.ms : 0.0);
  }
}

void bandwidthCase(benchmark::State &state, bool read) {
  if (!needDevice(state))
    return;
  std::string err;
  const cuda::Bandwidth *bw = bandwidth(&err);
  if (!bw) {
    state.SkipWithError(firstLine(err).c_str());
    return;
  }
  double gbs = read ? bw->readGBs : bw->copyGBs;
  double bytes = static_cast<double>(bw->bytes) * (read ? 1 : 2);
  for (auto _ : state)
    state.SetIterationTime(gbs > 0 ? bytes / (gbs * 1e9) : 0);
  state.counters["GB/s"] = gbs;
  state.counters["bytes"] = bytes;
}

} // namespace

int main(int argc, char **argv) {
  benchmark::RegisterBenchmark("bandwidth/read", bandwidthCase, true)
      ->UseManualTime()->Iterations(1)->Unit(benchmark::kMillisecond);
  benchmark::RegisterBenchmark("bandwidth/d2d_copy", bandwidthCase, false)
      ->UseManualTime()->Iterations(1)->Unit(benchmark::kMillisecond);
  for (const std::string &w : workloadNames()) {
    for (bool graph : {false, true})
      for (bool fused : {false, true}) {
        std::string name = w + "/" + (graph ? "graph-" : "eager-") + (fused ? "fused" : "unfused");
        benchmark::RegisterBenchmark(name.c_str(), modelStep, w, fused, graph)
            ->UseManualTime()->Iterations(kSteps)->Unit(benchmark::kMillisecond);
      }
    for (bool fused : {false, true})
      benchmark::RegisterBenchmark((w + "/breakdown-" + (fused ? "fused" : "unfused")).c_str(),
                                   breakdown, w, fused)
          ->UseManualTime()->Iterations(1)->Unit(benchmark::kMillisecond);
  }
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv))
    return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
