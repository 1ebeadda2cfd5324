//===- BenchCommon.h - what the bench programs share ----------------*- C++ -*-===//
//
// The measured bandwidth (once per process) and compiled plans cached by key,
// so each Google Benchmark case compiles only what it needs (a filtered run
// compiles nothing else). The timing loop itself is runtime/BenchLoop.h, which
// `fusegraph bench` uses too.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "codegen/cuda/Bandwidth.h"
#include "codegen/cuda/Compile.h"
#include "runtime/BenchLoop.h"
#include "runtime/Executor.h"

#include <benchmark/benchmark.h>

#include <functional>
#include <map>
#include <optional>
#include <string>

namespace fg::bench {

/// The bandwidth measured at first use; null (with `error`) when it failed.
inline const cuda::Bandwidth *bandwidth(std::string *error = nullptr) {
  static std::string err;
  static std::optional<cuda::Bandwidth> bw = []() -> std::optional<cuda::Bandwidth> {
    auto b = cuda::measureBandwidth();
    if (!b) {
      err = llvm::toString(b.takeError());
      return std::nullopt;
    }
    return *b;
  }();
  if (error)
    *error = err;
  return bw ? &*bw : nullptr;
}

/// Read bandwidth in bytes per ms (0 when it could not be measured).
inline double bytesPerMs() {
  const cuda::Bandwidth *b = bandwidth();
  return b ? b->readGBs * 1e6 : 0;
}

/// A plan compiled once per key; null with `error` set when it failed.
struct CachedPlan {
  std::optional<Plan> plan;
  std::string error;
};

inline const CachedPlan &cachedPlan(const std::string &key,
                                    const std::function<llvm::Expected<Plan>()> &make) {
  static std::map<std::string, CachedPlan> cache;
  auto it = cache.find(key);
  if (it != cache.end())
    return it->second;
  CachedPlan c;
  auto p = make();
  if (p)
    c.plan.emplace(std::move(*p));
  else
    c.error = llvm::toString(p.takeError());
  return cache.emplace(key, std::move(c)).first->second;
}

/// First line of an error, for SkipWithError.
inline std::string firstLine(const std::string &s) { return s.substr(0, s.find('\n')); }

/// Skips the case without a device; returns false then.
inline bool needDevice(benchmark::State &state) {
  if (cudaDeviceAvailable())
    return true;
  state.SkipWithError("no CUDA device");
  return false;
}

/// Which clock a case reports as the benchmark's manual time.
enum class StepClock { Wall, Gpu };

/// The timed loop shared by the programs: a StepDriver over `exec` (warm-up,
/// then one step per benchmark iteration, manual time from `clock`). Returns
/// the samples, or nothing after skipping the case with the first error line.
inline std::optional<std::vector<StepSample>> timeSteps(benchmark::State &state, Executor &exec,
                                                        const StepLoopOptions &lo,
                                                        StepClock clock) {
  auto skip = [&](llvm::Error e, const char *what) {
    state.SkipWithError((what + firstLine(llvm::toString(std::move(e)))).c_str());
    return std::nullopt;
  };
  auto driver = StepDriver::create(exec, lo);
  if (!driver)
    return skip(driver.takeError(), "");
  if (auto e = driver->warmup())
    return skip(std::move(e), "warm-up: ");
  std::vector<StepSample> samples;
  for (auto _ : state) {
    auto s = driver->step();
    if (!s)
      return skip(s.takeError(), "");
    state.SetIterationTime((clock == StepClock::Gpu ? s->gpuMs : s->wallMs) / 1e3);
    samples.push_back(*s);
  }
  return samples;
}

} // namespace fg::bench
