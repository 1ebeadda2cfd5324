//===- decode_step.cpp - one decode step of a model, eager vs CUDA graph ---===//
//
// A timed step is what a user sees: copy the step's inputs (token, position)
// in, launch, synchronise (DESIGN "Benchmarks"). Reported per case: wall time
// per step (the benchmark's manual time, plus its median as a counter), the
// GPU time from CUDA events and the host time to enqueue a step, as medians
// over every timed step. The KV position advances each step.
//
//   fg_bench_decode_step --benchmark_filter=demo
//
//===----------------------------------------------------------------------===//
#include "codegen/cuda/Compile.h"
#include "frontends/Frontend.h"
#include "runtime/Executor.h"

#include <benchmark/benchmark.h>

#include <algorithm>
#include <chrono>
#include <cstdio>

using namespace fg;

namespace {

double median(std::vector<double> v) {
  if (v.empty())
    return 0;
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

const Plan *demoPlan() {
  static std::optional<Plan> plan = []() -> std::optional<Plan> {
    ModelOptions mo;
    mo.ctx = 4096;
    auto g = loadModel("demo", mo);
    if (!g) {
      std::fprintf(stderr, "%s\n", llvm::toString(g.takeError()).c_str());
      return std::nullopt;
    }
    auto p = compile(*g, CompileOptions{});
    if (!p) {
      std::fprintf(stderr, "%s\n", llvm::toString(p.takeError()).c_str());
      return std::nullopt;
    }
    return std::move(*p);
  }();
  return plan ? &*plan : nullptr;
}

void decodeStep(benchmark::State &state, ExecOptions::Mode mode) {
  if (!cudaDeviceAvailable()) {
    state.SkipWithError("no CUDA device");
    return;
  }
  const Plan *plan = demoPlan();
  if (!plan) {
    state.SkipWithError("compile failed");
    return;
  }
  ExecOptions eo;
  eo.device = ExecOptions::Device::Cuda;
  eo.mode = mode;
  auto exec = Executor::create(*plan, eo);
  if (!exec) {
    state.SkipWithError(llvm::toString(exec.takeError()).c_str());
    return;
  }
  int32_t pos = 0;
  auto step = [&]() -> bool {
    int32_t tok = (pos * 31 + 7) % 512;
    bool ok = !exec->setInput("tokens", {tok}) && !exec->setInput("positions", {pos});
    ok = ok && !exec->run("decode");
    pos = (pos + 1) % 4000;
    return ok;
  };
  for (int i = 0; i < 20; ++i) // warm-up (graph instantiation, caches)
    if (!step()) {
      state.SkipWithError("warm-up step failed");
      return;
    }
  std::vector<double> wall, gpu, host;
  for (auto _ : state) {
    auto t0 = std::chrono::steady_clock::now();
    if (!step()) {
      state.SkipWithError("step failed");
      return;
    }
    double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    state.SetIterationTime(ms / 1e3);
    wall.push_back(ms);
    gpu.push_back(exec->lastGpuMs());
    host.push_back(exec->lastHostLaunchMs());
  }
  state.counters["wall_ms_median"] = median(wall);
  state.counters["gpu_ms_median"] = median(gpu);
  state.counters["host_launch_ms_median"] = median(host);
  state.counters["steps"] = static_cast<double>(wall.size());
}

BENCHMARK_CAPTURE(decodeStep, demo_eager, ExecOptions::Mode::Eager)
    ->UseManualTime()->Iterations(300)->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(decodeStep, demo_graph, ExecOptions::Mode::Graph)
    ->UseManualTime()->Iterations(300)->Unit(benchmark::kMillisecond);

} // namespace

BENCHMARK_MAIN();
