//===- SwitchedProgram.h - a program compiled with one FG_DEBUG_* switch -*- C++ -*-===//
//
// The codegen tests that read a compiled program's launch records: the
// merges after the plan is proven (GEMV tails, routing heads) compile one
// graph with a switch off and on and compare the two programs.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "codegen/cuda/Compile.h"
#include "frontends/DecoderBlocks.h"
#include "frontends/models/Workloads.h"
#include "runtime/ProgramIO.h"
#include "tests/unit/codegen/TestKernelCache.h"

#include "llvm/ADT/StringRef.h"

#include <gtest/gtest.h>

#include <cstdlib>

namespace fg::test {

/// The CUDA program of `g` compiled (every module built with NVRTC).
inline CompiledProgram compiledProgram(const Graph &g) {
  CompileOptions co;
  co.kernelCacheDir = kernelCacheDir();
  auto plan = compile(g, co);
  EXPECT_TRUE(bool(plan)) << llvm::toString(plan.takeError());
  if (!plan)
    return {};
  auto prog = decodeProgram(plan->section("program")->bytes);
  EXPECT_TRUE(bool(prog)) << llvm::toString(prog.takeError());
  return prog ? std::move(*prog) : CompiledProgram{};
}

/// The same with the environment switch `env` set to 1 or 0.
inline CompiledProgram programWithSwitch(const Graph &g, const char *env, bool on) {
  ::setenv(env, on ? "1" : "0", 1);
  CompiledProgram p = compiledProgram(g);
  ::unsetenv(env);
  return p;
}

/// The entry called `name`, or nullptr.
inline const CompiledEntry *entryNamed(const CompiledProgram &p, llvm::StringRef name) {
  for (const CompiledEntry &e : p.entries)
    if (e.name == name)
      return &e;
  return nullptr;
}

/// Two layers of workload `name` (a vocabulary of 4096, `ctx` cache rows,
/// prefill entries of `buckets` tokens).
inline Graph workloadLayers(const char *name, int64_t ctx, llvm::ArrayRef<int64_t> buckets) {
  WorkloadOptions wo;
  wo.ctx = ctx;
  auto cfg = workloadConfig(name, wo);
  EXPECT_TRUE(bool(cfg)) << llvm::toString(cfg.takeError());
  cfg->nLayers = 2;
  cfg->vocab = 4096;
  auto g = buildDecoderGraph(*cfg, decoderEntries(buckets, LogitRows::Last));
  EXPECT_TRUE(bool(g)) << llvm::toString(g.takeError());
  return std::move(*g);
}

} // namespace fg::test
