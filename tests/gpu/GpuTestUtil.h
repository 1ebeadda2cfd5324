//===- GpuTestUtil.h - compare a CUDA run with the CPU reference -*- C++ -*-===//
#pragma once

#include "codegen/cuda/Compile.h"
#include "tests/unit/codegen/SwitchedProgram.h"
#include "ir/Builder.h"
#include "runtime/Compare.h"
#include "runtime/Executor.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <cstdlib>
#include <map>
#include <optional>
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

/// `plan` (or `g` compiled with `co`, pipeline canonicalize,cse,dce) prepared
/// for the GPU, run as a CUDA graph; nothing, with a test failure, when a
/// step fails. For replay tests (runBytes).
inline std::optional<Executor> gpuGraphExecutor(const Plan &plan) {
  ExecOptions eo;
  eo.device = ExecOptions::Device::Cuda;
  eo.mode = ExecOptions::Mode::Graph;
  auto gpu = Executor::create(plan, eo);
  if (!gpu) {
    ADD_FAILURE() << errString(gpu.takeError());
    return std::nullopt;
  }
  return std::move(*gpu);
}
inline std::optional<Executor> gpuGraphExecutor(const Graph &g, CompileOptions co = {}) {
  co.pipeline = "canonicalize,cse,dce";
  auto plan = compile(g, co);
  if (!plan) {
    ADD_FAILURE() << errString(plan.takeError());
    return std::nullopt;
  }
  return gpuGraphExecutor(*plan);
}

/// Sets `inputs`, runs `entry` and returns the bytes of result `output`;
/// empty (with a test failure) when the run fails. For replay tests that
/// compare the bits of several runs of one executor.
inline std::vector<uint8_t> runBytes(Executor &e, const Inputs &inputs,
                                     llvm::StringRef entry = "main",
                                     llvm::StringRef output = "out") {
  for (const auto &[name, vals] : inputs)
    EXPECT_FALSE(bool(e.setInput(name, vals))) << name;
  if (auto err = e.run(entry)) {
    ADD_FAILURE() << errString(std::move(err));
    return {};
  }
  auto out = e.output(output);
  if (!out) {
    ADD_FAILURE() << errString(out.takeError());
    return {};
  }
  return out->data;
}

/// The graph of one attention op (q f32 [T, Hq, D], caches [ctx, Hkv, D|Dv],
/// positions, optional sinks) from a case with the fields tokens, headDim,
/// group, kvHeads, valueDim (0: = headDim), cache, window, softcap, sinks.
template <typename Case> Graph attentionGraph(const Case &c, int64_t ctx) {
  Graph g;
  Function &fn = g.addFunction("main");
  Builder b(fn);
  int64_t hq = c.kvHeads * c.group, dv = c.valueDim ? c.valueDim : c.headDim;
  auto q = b.weight("q", {DType::F32, {c.tokens, hq, c.headDim}}, randn());
  auto k = b.weight("k", {c.cache, {ctx, c.kvHeads, c.headDim}}, randn());
  auto v = b.weight("v", {c.cache, {ctx, c.kvHeads, dv}}, randn());
  auto pos = b.input("positions", {DType::I32, {c.tokens}});
  std::optional<ValueId> sinks;
  if (c.sinks)
    sinks = b.weight("sinks", {DType::F32, {hq}}, randn());
  Builder::AttentionParams p;
  p.scale = 1.0 / std::sqrt(static_cast<double>(c.headDim));
  p.window = c.window;
  p.softcap = c.softcap;
  b.result(b.attention(q, k, v, pos, p, sinks, "out"));
  EXPECT_FALSE(bool(b.finish()));
  return g;
}

/// An executor of `plan` on device `d` in mode `m` (a failure fails the test).
inline Executor makeExecutor(const Plan &plan, ExecOptions::Device d,
                             ExecOptions::Mode m = ExecOptions::Mode::Graph) {
  ExecOptions o;
  o.device = d;
  o.mode = m;
  auto e = Executor::create(plan, o);
  EXPECT_TRUE(bool(e)) << errString(e.takeError());
  return std::move(*e);
}

/// One decode step of token `token` at position `pos`: the logits.
inline std::vector<float> decodeStep(Executor &e, int32_t token, int32_t pos) {
  EXPECT_FALSE(bool(e.setInput("tokens", {token})));
  EXPECT_FALSE(bool(e.setInput("positions", {pos})));
  if (auto err = e.run("decode")) {
    ADD_FAILURE() << errString(std::move(err));
    return {};
  }
  auto l = e.outputFloats("logits");
  EXPECT_TRUE(bool(l));
  return l ? std::vector<float>(l->begin(), l->end()) : std::vector<float>{};
}

/// Tolerance for results computed from operands of dtype `t`.
inline double tolFor(DType t) { return t == DType::F32 ? 1e-5 : 1e-2; }

/// Sets an environment variable for one scope (compile() reads the FG_DEBUG_*
/// switches); its earlier value (or its absence) comes back at the end.
struct ScopedEnv {
  std::string name;
  std::optional<std::string> before;
  ScopedEnv(const char *n, const char *v) : name(n) {
    if (const char *old = std::getenv(n))
      before = old;
    ::setenv(n, v, 1);
  }
  ~ScopedEnv() {
    if (before)
      ::setenv(name.c_str(), before->c_str(), 1);
    else
      ::unsetenv(name.c_str());
  }
};

/// A plan of `g` compiled with the FG_DEBUG_* switch `env` on or off.
inline Plan planWithSwitch(const Graph &g, const char *env, bool on) {
  ScopedEnv e(env, on ? "1" : "0");
  auto plan = compile(g, CompileOptions{});
  EXPECT_TRUE(bool(plan)) << errString(plan.takeError());
  return std::move(*plan);
}

/// Two layers of workload `name` with a vocabulary of 4096 and 512 cache rows.
inline Graph workloadLayers(const char *name) { return test::workloadLayers(name, 512, {}); }

/// Decode positions 0, 1, ... with a jump to the last 40 rows of the cache at step 24.
inline int32_t positionWithJump(int32_t s, int64_t ctx) {
  return s < 24 ? s : static_cast<int32_t>(ctx) - 40 + (s - 24);
}

/// `steps` decode steps of `g` compiled with switch `env` on and off, over the
/// same tokens and positions (positionWithJump), replayed as graphs and
/// launched eagerly; on the graph run also against the CPU reference of the
/// plan with the switch on for the first `cpuSteps` steps. Every logits row
/// within 1e-5 (normalised) of the row with the switch off and within 1e-3 of
/// the CPU; prints "[tag] label mode: n of N steps bit-identical ...".
inline void comparePlans(const Plan &on, const Plan &off, int64_t ctx, int32_t vocab,
                         int32_t steps, int32_t cpuSteps, const char *label, const char *tag);
inline void compareSwitch(const Graph &g, int64_t ctx, int32_t vocab, int32_t steps,
                          int32_t cpuSteps, const char *label, const char *env, const char *tag) {
  Plan off = planWithSwitch(g, env, false), on = planWithSwitch(g, env, true);
  comparePlans(on, off, ctx, vocab, steps, cpuSteps, label, tag);
}

/// compareSwitch's comparison of two plans of one decoder (`on` the new
/// form, `off` the one it is held against).
inline void comparePlans(const Plan &on, const Plan &off, int64_t ctx, int32_t vocab,
                         int32_t steps, int32_t cpuSteps, const char *label, const char *tag) {
  for (ExecOptions::Mode m : {ExecOptions::Mode::Graph, ExecOptions::Mode::Eager}) {
    const bool graph = m == ExecOptions::Mode::Graph;
    Executor a = makeExecutor(on, ExecOptions::Device::Cuda, m),
             b = makeExecutor(off, ExecOptions::Device::Cuda, m);
    std::optional<Executor> cpu;
    if (graph && cpuSteps > 0)
      cpu.emplace(makeExecutor(on, ExecOptions::Device::Cpu, ExecOptions::Mode::Graph));
    double worstOff = 0, worstCpu = 0;
    int32_t identical = 0;
    for (int32_t s = 0; s < steps; ++s) {
      const int32_t tok = (s * 389 + 17) % vocab, pos = positionWithJump(s, ctx);
      std::vector<float> x = decodeStep(a, tok, pos), y = decodeStep(b, tok, pos);
      ASSERT_EQ(x.size(), y.size());
      identical += std::memcmp(x.data(), y.data(), x.size() * sizeof(float)) == 0;
      const double e = normalizedError(x, y);
      worstOff = std::max(worstOff, e);
      EXPECT_LE(e, 1e-5) << label << ": step " << s << " position " << pos;
      if (cpu && s < cpuSteps) {
        const double c = normalizedError(x, decodeStep(*cpu, tok, pos));
        worstCpu = std::max(worstCpu, c);
        EXPECT_LE(c, 1e-3) << label << ": step " << s << " position " << pos;
      }
    }
    std::printf("[%s] %s %s: %d of %d steps bit-identical to the switch off, worst %.3g; "
                "against the CPU %.3g\n",
                tag, label, graph ? "graph" : "eager", identical, steps, worstOff, worstCpu);
  }
}

} // namespace fg::gputest
