//===- passes.cpp - pass pipeline time against graph size (issue 10) ------===//
//
// `canonicalize,cse,dce,fuse` (what `fusegraph opt` runs for a full cleanup
// and fusion) over two synthetic graphs at 1k, 10k and 100k ops, to show the
// passes scale linearly:
//   chain/N   one value through N elementwise ops cycling silu, mul, add, relu,
//             sqr, add, sigmoid, mul (unary_mul and relu_sqr fire)
//   wide/N    N adds summing N + 1 inputs, x0 + x1 + ... (add_chain fires on
//             every 8 links; N + 1 pinned inputs for the memory planner)
// Each iteration runs the pipeline on a fresh copy of the graph (the copy is
// not timed). Read the CPU column: the machines this runs on are shared, so
// wall time also measures the neighbours. Counters: ops (before), ops_after,
// cpu_us_per_op (CPU time per input op) and the process's peak RSS so far
// (max_rss_mb: cases run in order of size, so it is the largest case's peak).
// No GPU needed.
//
//   fg_bench_passes --benchmark_out=passes.json --benchmark_out_format=json
//
//===----------------------------------------------------------------------===//
#include "PassGraphs.h"
#include "ir/Builder.h"
#include "passes/PassManager.h"

#include <benchmark/benchmark.h>

#include <sys/resource.h>

using namespace fg;
using fg::bench::chainGraph;
using fg::bench::wideGraph;

namespace {

double maxRssMb() {
  struct rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  return static_cast<double>(ru.ru_maxrss) / 1024.0;
}

void pipelineCase(benchmark::State &state, Graph (*make)(int64_t)) {
  const int64_t n = state.range(0);
  const Graph original = make(n);
  size_t after = 0;
  for (auto _ : state) {
    state.PauseTiming();
    Graph g = original;
    PassManager pm;
    if (llvm::Error e = pm.addPipeline("canonicalize,cse,dce,fuse")) {
      state.SkipWithError(llvm::toString(std::move(e)).c_str());
      return;
    }
    state.ResumeTiming();
    if (llvm::Error e = pm.run(g)) {
      state.SkipWithError(llvm::toString(std::move(e)).c_str());
      return;
    }
    after = g.functions().front().numNodes();
  }
  state.counters["ops"] = static_cast<double>(n);
  state.counters["ops_after"] = static_cast<double>(after);
  state.counters["cpu_us_per_op"] = benchmark::Counter(
      static_cast<double>(n) * 1e-6,
      benchmark::Counter::kIsIterationInvariantRate | benchmark::Counter::kInvert);
  state.counters["max_rss_mb"] = maxRssMb();
}

} // namespace

BENCHMARK_CAPTURE(pipelineCase, chain, chainGraph)
    ->Arg(1000)
    ->Arg(10000)
    ->Arg(100000)
    ->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(pipelineCase, wide, wideGraph)
    ->Arg(1000)
    ->Arg(10000)
    ->Arg(100000)
    ->Unit(benchmark::kMillisecond);

BENCHMARK_MAIN();
