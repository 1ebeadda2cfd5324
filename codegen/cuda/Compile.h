//===- Compile.h - Graph -> Plan ----------------------------------*- C++ -*-===//
//
// fg::compile runs the pass pipeline (cleanup, fusion with its overlap
// pre-check, dce) over a copy of the graph, with the CUDA target
// (codegen/cuda/CudaTarget.h) handed to the passes, and packs the result into
// an immutable Plan; with `cuda` on it also lowers the graph
// (codegen/cuda/Lower.h: kernels through NVRTC, the memory plan and its proof,
// launch DAG) into the plan's "program" section, and stores the fusion report
// in its "fusion" section.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "codegen/cuda/ProvenPlan.h"
#include "ir/Diag.h"
#include "ir/Graph.h"
#include "passes/PassManager.h"
#include "runtime/Plan.h"
#include "runtime/Program.h"

#include "llvm/Support/Error.h"

#include <string>
#include <vector>

namespace fg {

struct CompileOptions {
  bool fusion = true;                     ///< run the fusion passes
  std::vector<std::string> disableFusion; ///< fusion patterns to skip, by name
  std::vector<std::string> enableFusion;  ///< off-by-default patterns to apply, by name
  std::vector<std::string> debugFusion;   ///< patterns whose decisions are logged
  std::string arch = "sm_90";             ///< GPU architecture for NVRTC
  /// KV context the model was built for; 0 takes it from the graph (the
  /// range of the inputs bound to positions), else 4096.
  int64_t ctx = 0;
  DType kvDType = DType::F16;             ///< the model's KV cache dtype, recorded in the plan
  std::string source; ///< model path or name, recorded in the plan
  /// The pipeline; empty: passes/Passes.h defaultPipeline().
  std::string pipeline;
  PassOptions passOptions; ///< IR dumps, stats, timing
  /// Generate CUDA code (kernels through NVRTC, buffer plan, launch DAG) into
  /// the plan's "program" section. Off: a plan only the CPU reference runs.
  bool cuda = true;
  /// NVRTC kernel cache folder; empty: $FG_KERNEL_CACHE or ~/.cache/fusegraph/kernels.
  std::string kernelCacheDir;
  LogSink log;             ///< verbose messages; may be empty
  ProgressSink progress;   ///< kernels compiled (and from the cache) so far; may be empty
  /// Weights a model frontend provides (mapped: file + offset; embedded:
  /// bytes), by the graph's weight name. The plan refers to mapped ones by
  /// file and offset and stores embedded ones (bulk bytes, outside the
  /// checksum): in the CUDA program's weight table, else in a "weights"
  /// section the CPU reference reads. With `cuda`, quantised ones become f16
  /// weights in the plan's graph, dequantised at load time.
  std::vector<ExternalWeight> weights;
  /// Attention over at least this many queries takes the flash-attention
  /// prefill kernel (cuda::EmitOptions::attentionPrefillMinTokens); 0 keeps
  /// the target's default. Tests set 1 to run it on every chunk length.
  int64_t attentionPrefillMinTokens = 0;
  /// Convert x of library GEMMs once per value, as an op (the `gemm-inputs`
  /// pass after `fuse`), instead of inside every GEMM's launch. On by
  /// default (measured on the H200: W-dense prefill 512 22.15 -> 21.06 ms);
  /// `--gemm-x-inside` turns it off.
  bool gemmInputConverts = true;
  /// Tests only: edits each entry's memory plan before lowering proves it
  /// (cuda::LowerOptions::testPlanHook).
  cuda::PlanHook testPlanHook;
};

llvm::Expected<Plan> compile(const Graph &g, const CompileOptions &opts);

/// The pipeline compile() runs for `opts` ("canonicalize,cse,dce", ...).
std::string compilePipeline(const CompileOptions &opts);

/// CUDART_VERSION of the headers this was built with, and the linked NVRTC's
/// version (major*1000 + minor*10; 0 when unknown).
uint32_t buildCudaRuntimeVersion();
uint32_t buildNvrtcVersion();

} // namespace fg
