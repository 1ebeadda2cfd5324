//===- KernelModules.h - kernel sources -> NVRTC modules ------------*- C++ -*-===//
//
// Lowering, step 6: each unique kernel source is compiled once with NVRTC (in
// parallel, disk-cached) into its own module, and every kernel launch record
// gets its module index.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "codegen/cuda/LaunchSchedule.h"
#include "codegen/cuda/Nvrtc.h"
#include "ir/Diag.h"

namespace fg::cuda {

struct ModuleStats {
  unsigned modules = 0, cacheHits = 0;
};

/// Compiles `sources` into `prog.modules` and numbers the launches of
/// `prog.entries` (in the order `sources.sourceOfLaunch` lists them). Returns
/// the module index of every source.
llvm::Expected<std::vector<uint32_t>> buildModules(const KernelSources &sources,
                                                   llvm::StringRef arch, const NvrtcOptions &nvrtc,
                                                   const LogSink &log, CompiledProgram &prog,
                                                   ModuleStats &stats,
                                                   const ProgressSink &progress = {});

} // namespace fg::cuda
