//===- GpuTestUtil.h - compare a CUDA run with the CPU reference -*- C++ -*-===//
#pragma once

#include "codegen/cuda/Compile.h"
#include "ir/Builder.h"
#include "runtime/Compare.h"
#include "runtime/Executor.h"

#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <random>
#include <string>
#include <vector>

namespace fg::gputest {

#define FG_REQUIRE_GPU()                                                                           \
  do {                                                                                             \
    if (!::fg::cudaDeviceAvailable())                                                              \
      GTEST_SKIP() << "no CUDA device";                                                            \
  } while (0)

/// A fresh seed per process (printed), so every run draws new inputs.
inline uint64_t baseSeed() {
  static const uint64_t seed = [] {
    uint64_t s = std::random_device{}();
    if (const char *env = std::getenv("FG_TEST_SEED"))
      s = std::strtoull(env, nullptr, 10);
    std::printf("[fusegraph gpu tests] seed %llu (set FG_TEST_SEED to repeat)\n",
                static_cast<unsigned long long>(s));
    return s;
  }();
  return seed;
}

inline WeightInit randn(double std = 1.0, double mean = 0.0) {
  static uint64_t counter = 0;
  return WeightInit::normal(baseSeed() * 1000003 + ++counter, std, mean);
}
inline WeightInit randu(double lo, double hi) {
  static uint64_t counter = 0;
  return WeightInit::uniform(baseSeed() * 7919 + ++counter, lo, hi);
}

inline std::string errString(llvm::Error e) { return llvm::toString(std::move(e)); }

using Inputs = std::map<std::string, std::vector<int32_t>>;

/// Runs entry `entry` of `g` on the GPU (graph mode unless `eager`) and on the
/// CPU reference with the same inputs, and checks every result within `tol`.
/// `base` carries compile options a test sets (ctx and pipeline are set here).
/// Integer results must match exactly.
inline void expectMatchesReference(const Graph &g, const Inputs &inputs, double tol,
                                   llvm::StringRef entry = "main", bool eager = false,
                                   int64_t ctx = 0, const CompileOptions &base = {}) {
  CompileOptions co = base;
  co.ctx = ctx;
  co.pipeline = "canonicalize,cse,dce";
  auto plan = compile(g, co);
  ASSERT_TRUE(bool(plan)) << errString(plan.takeError());
  ExecOptions gpuOpts, cpuOpts;
  gpuOpts.device = ExecOptions::Device::Cuda;
  gpuOpts.mode = eager ? ExecOptions::Mode::Eager : ExecOptions::Mode::Graph;
  auto gpu = Executor::create(*plan, gpuOpts);
  ASSERT_TRUE(bool(gpu)) << errString(gpu.takeError());
  auto cpu = Executor::create(*plan, cpuOpts);
  ASSERT_TRUE(bool(cpu)) << errString(cpu.takeError());
  for (const auto &[name, vals] : inputs) {
    ASSERT_FALSE(bool(gpu->setInput(name, vals)));
    ASSERT_FALSE(bool(cpu->setInput(name, vals)));
  }
  if (auto e = gpu->run(entry)) {
    ADD_FAILURE() << "gpu run: " << errString(std::move(e));
    return;
  }
  if (auto e = cpu->run(entry)) {
    ADD_FAILURE() << "cpu run: " << errString(std::move(e));
    return;
  }
  const Function *fn = plan->graph().lookup(entry);
  for (ValueId r : fn->results()) {
    const std::string &name = fn->value(r).name;
    auto out = gpu->output(name);
    auto ref = cpu->output(name);
    ASSERT_TRUE(bool(out)) << errString(out.takeError());
    ASSERT_TRUE(bool(ref)) << errString(ref.takeError());
    if (isInteger(out->type.dtype)) {
      EXPECT_EQ(out->toInts(), ref->toInts()) << "result %" << name;
      continue;
    }
    double err = normalizedError(out->toFloats(), ref->toFloats());
    EXPECT_LE(err, tol) << "result %" << name << " (" << out->type.str() << ")";
  }
}

/// Tolerance for results computed from operands of dtype `t`.
inline double tolFor(DType t) { return t == DType::F32 ? 1e-5 : 1e-2; }

} // namespace fg::gputest
