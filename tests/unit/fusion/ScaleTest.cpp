//===- ScaleTest.cpp - the pass pipeline is linear in graph size (issue 10) ===//
//
// `canonicalize,cse,dce,fuse` over a 100000-op chain and a 100000-add sum of
// inputs took > 20 s and 1.5 GB (per-link use counts, a replaceAllUsesWith
// per fusion, ancestor bitsets and an all-pairs placement in the memory
// planner of the overlap proof); a long chain of reshapes was quadratic in
// the verifier and the launch DAG (each use walked the chain). Here: the work per op may not grow
// with the graph (CPU time at 4x the size stays well under 16x) and what fired at 100000 ops is what
// a small graph shows. No absolute time is asserted: CI's machine under the address sanitizer ran
// the 100000-op chain in 10.6 s where this one takes 2 s; the ratio is what catches a quadratic.
//
//===----------------------------------------------------------------------===//
#include "bench/PassGraphs.h"
#include "ir/Builder.h"
#include "passes/PassManager.h"
#include "passes/fusion/FusionReport.h"

#include <gtest/gtest.h>

#include <ctime>

namespace fg {
namespace {

using bench::chainGraph;
using bench::wideGraph;

TensorType act() { return bench::passGraphAct(); }

/// CPU seconds of this process (other processes share the machine: wall time
/// would measure them too).
double cpuSeconds() {
  timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

/// n reshapes in a row (f32[4, 64] <-> f32[256]), then exp: every use walked
/// the whole chain of views in the verifier and the launch DAG.
Graph viewChainGraph(int64_t n) {
  Graph g;
  Builder b(g.addFunction("main"));
  const Shape rows = {4, 64}, flat = {256};
  ValueId x = b.input("x", act());
  for (int64_t i = 0; i < n; ++i)
    x = b.reshape(x, i % 2 ? rows : flat);
  b.result(b.unary(OpKind::Exp, n % 2 ? b.reshape(x, rows) : x));
  EXPECT_FALSE(bool(b.finish()));
  return g;
}

struct PipelineRun {
  double seconds = 0; ///< CPU time of the pipeline
  size_t nodes = 0;
  FusionReport report;
};

PipelineRun runPipeline(Graph g) {
  PipelineRun r;
  PassOptions po;
  po.fusionReport = &r.report;
  PassManager pm(std::move(po));
  EXPECT_FALSE(bool(pm.addPipeline("canonicalize,cse,dce,fuse")));
  double start = cpuSeconds();
  llvm::Error e = pm.run(g);
  r.seconds = cpuSeconds() - start;
  EXPECT_FALSE(bool(e)) << llvm::toString(std::move(e));
  r.nodes = g.functions().front().numNodes();
  return r;
}

/// The faster of two runs.
double bestOf2(Graph (*make)(int64_t), int64_t n) {
  return std::min(runPipeline(make(n)).seconds, runPipeline(make(n)).seconds);
}

TEST(PassScale, ChainFusesLikeASmallOne) {
  // Every 8 ops: silu·w and sigmoid·w -> unary_mul, relu, sqr -> relu_sqr; the two adds stay.
  PipelineRun small = runPipeline(chainGraph(800)), big = runPipeline(chainGraph(100000));
  EXPECT_EQ(small.report.count("unary_mul"), 200);
  EXPECT_EQ(small.report.count("relu_sqr"), 100);
  EXPECT_EQ(small.nodes, 500u);
  EXPECT_EQ(big.report.count("unary_mul"), 25000);
  EXPECT_EQ(big.report.count("relu_sqr"), 12500);
  EXPECT_EQ(big.nodes, 62500u);
}

TEST(PassScale, WideSumFusesInChainsOfEight) {
  PipelineRun r = runPipeline(wideGraph(100000));
  EXPECT_EQ(r.report.count("add_chain"), 12500);
  EXPECT_EQ(r.nodes, 12500u);
}

TEST(PassScale, TimeGrowsLinearly) {
  for (Graph (*make)(int64_t) : {chainGraph, wideGraph, viewChainGraph}) {
    double t1 = bestOf2(make, 10000), t4 = bestOf2(make, 40000);
    EXPECT_LT(t4, 10 * t1 + 0.05) << "10000 ops: " << t1 << " s, 40000 ops: " << t4
                                  << " s (quadratic would be 16x)";
  }
}

} // namespace
} // namespace fg
