//===- Commands.h - the fusegraph subcommands --------------------*- C++ -*-===//
#pragma once

#include "codegen/cuda/Compile.h"
#include "ir/Diag.h"
#include "ir/Graph.h"
#include "runtime/Executor.h"
#include "runtime/Plan.h"
#include "tools/Flags.h"

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

#include <optional>
#include <string>
#include <vector>

namespace fg::text {
class Tokenizer;
}

namespace fg::cli {

// Each takes the arguments after the subcommand name and returns the exit code.
int runOpt(llvm::ArrayRef<const char *> args);
int runInspect(llvm::ArrayRef<const char *> args);
int runCompile(llvm::ArrayRef<const char *> args);
int runRun(llvm::ArrayRef<const char *> args);
int runDemo(llvm::ArrayRef<const char *> args);

/// What a MODEL argument is built with (the frontend's ModelOptions subset the
/// CLI sets).
struct ModelSettings {
  int64_t ctx = 4096;
  std::vector<int64_t> prefill = {64};
  DType kvDType = DType::F16;
  bool allLogits = false; ///< prefill entries return every logits row (--all-logits)
  LogSink log;
};

/// Adds the flags that shape a model and its compilation (`--ctx`, `--prefill`,
/// `--arch`, `--no-fusion`, dump flags, ...) to a subcommand.
void addCompileFlags(Flags &f);
/// `--disable-fusion` and `--debug-fusion` name fusion patterns: an unknown
/// name is a usage error (with a "did you mean"). Returns false on one.
bool checkFusionNames(const Flags &f, int &exitCode);
/// Reads them back. Returns false (with `exitCode` set) on a usage error.
bool readCompileFlags(const Flags &f, ModelSettings &model, CompileOptions &compile, int &exitCode);
/// Reads `--device`, `--mode`, `--debug-sync`, `--verbose` (declared by the caller).
/// `--device` (cpu|cuda; "auto" and no flag mean `defaultDevice`), `--mode`, `--debug-sync`.
bool parseExecFlags(const Flags &f, ExecOptions &opts, int &exitCode,
                    llvm::StringRef defaultDevice = "cpu");
/// MODEL or X.plan -> a Plan (loading and compiling a model as needed).
llvm::Expected<Plan> planFor(llvm::StringRef modelOrPlan, const ModelSettings &model,
                             const CompileOptions &compile);
/// Prints log messages to stderr as `fusegraph: msg` (verbose ones only when
/// `verbose`).
LogSink stderrLog(bool verbose);

/// What `run` adds to greedy decoding, to compare logits with another
/// implementation.
struct GenerateExtras {
  /// Fed at decode steps 1, 2, ... instead of the greedy tokens (steps - 1 of
  /// them are needed).
  std::vector<int32_t> teacherForced;
  /// Writes every logits row (one per prompt token, then one per decode step)
  /// as f32: a .npy file [rows, vocab] when the name ends in .npy, else raw
  /// little-endian rows.
  std::string dumpLogits;
  /// `--prompt`: generated text is streamed through it (text/Tokenizer.h),
  /// generation stops at its end-of-generation tokens.
  const text::Tokenizer *tokenizer = nullptr;
};

/// Writes rows × vocab f32 values as .npy (path ends in .npy) or raw f32.
llvm::Error writeLogits(llvm::StringRef path, llvm::ArrayRef<float> values, int64_t rows,
                        int64_t vocab);

/// Runs a Session (runtime/Session.h) over `plan`: feeds `prompt`, generates
/// `steps` tokens greedily, prints them as they come (after the verbose
/// messages' lines when `verbose`), then the timing.
int generate(const Plan &plan, const ExecOptions &opts, llvm::ArrayRef<int32_t> prompt,
             int64_t steps, bool verbose, bool verify = false,
             const GenerateExtras &extras = {});

/// `--trace FILE` (run, bench): replays one decode step of `plan` at
/// `position` as a CUDA graph traced with CUPTI and writes it as a Chrome /
/// Perfetto trace (runtime/StepTrace.h). Needs a GPU.
llvm::Error writeStepTrace(const Plan &plan, llvm::StringRef path, int64_t position,
                           const LogSink &log);

/// Loads MODEL (`.fg`, `.gguf`, an HF folder or `demo`) into a Graph; with
/// `weights`, also the model file's weight table (for CompileOptions::weights).
llvm::Expected<Graph> loadModelGraph(llvm::StringRef model, const ModelSettings &s,
                                     std::vector<ExternalWeight> *weights = nullptr);
bool isPlanFile(llvm::StringRef path);

} // namespace fg::cli
