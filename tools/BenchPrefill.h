//===- BenchPrefill.h - `fusegraph bench --prefill N,...` ----------*- C++ -*-===//
#pragma once

#include "llvm/Support/raw_ostream.h"

#include <cstdint>
#include <string>
#include <vector>

namespace fg::cli {

/// What `bench --prefill` was asked for (Bench.cpp parses the flags).
struct PrefillBenchArgs {
  std::string model; ///< a workload name, a MODEL or an X.plan
  std::vector<int64_t> sizes;
  int64_t steps = 20, warmup = 3, ctx = 2048;
  /// The chunk's first position (--kv with --prefill): 0, a prompt's first
  /// chunk, by default; every step feeds the same positions.
  int64_t start = 0;
  std::string arch = "sm_90";
  bool bf16 = false; ///< the peak GEMM in bf16 (the workload's weight type)
  bool breakdown = false, verbose = false;
  bool programmaticLaunch = true; ///< off: --compare nopdl (graph edges without PDL)
  int64_t breakdownLaunches = 0; ///< --breakdown-launches N: list one replay's first N launches
  bool gemmInputConverts = true; ///< off: --gemm-x-inside (CompileOptions::gemmInputConverts)
  std::vector<std::string> disableFusion, enableFusion; ///< --disable-fusion, --enable-fusion
  std::string json;
};

/// Times the prefill entries of `sizes` tokens; returns the exit code.
int runPrefillBench(const PrefillBenchArgs &args);

} // namespace fg::cli
