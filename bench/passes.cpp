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
#include "ir/Builder.h"
#include "passes/PassManager.h"

#include <benchmark/benchmark.h>

#include <sys/resource.h>

using namespace fg;

namespace {

constexpr int64_t kWidth = 64;

TensorType act() { return TensorType(DType::F32, {4, kWidth}); }

/// x through n ops cycling silu, mul w, add b, relu, sqr, add b, sigmoid, mul w.
Graph chainGraph(int64_t n) {
  Graph g;
  Builder b(g.addFunction("main"));
  ValueId x = b.input("x", act()), w = b.input("w", act()), bias = b.input("b", act());
  const OpKind cycle[] = {OpKind::Silu, OpKind::Mul, OpKind::Add,     OpKind::Relu,
                          OpKind::Sqr,  OpKind::Add, OpKind::Sigmoid, OpKind::Mul};
  for (int64_t i = 0; i < n; ++i) {
    OpKind k = cycle[i % 8];
    x = k == OpKind::Mul ? b.mul(x, w) : k == OpKind::Add ? b.add(x, bias) : b.unary(k, x);
  }
  b.result(x);
  llvm::consumeError(b.finish());
  return g;
}

/// x0 + x1 + ... + xn as n adds, each input its own argument.
Graph wideGraph(int64_t n) {
  Graph g;
  Builder b(g.addFunction("main"));
  ValueId s = b.input("x0", act());
  for (int64_t i = 1; i <= n; ++i)
    s = b.add(s, b.input("x" + std::to_string(i), act()));
  b.result(s);
  llvm::consumeError(b.finish());
  return g;
}

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
