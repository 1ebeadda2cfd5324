//===- Commands.h - the fusegraph subcommands --------------------*- C++ -*-===//
#pragma once

#include "codegen/cuda/Compile.h"
#include "ir/Diag.h"
#include "ir/Graph.h"
#include "runtime/Executor.h"
#include "runtime/Plan.h"
#include "runtime/Sampler.h"
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
  bool prefillGiven = false; ///< --prefill was given (else `prefill` is the default)
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
/// `--device` cpu|cuda|auto; no flag means `defaultDevice`. auto is cuda when a
/// device is present, else cpu, and then `*cpuNote` (when given) is set to a
/// one-line note for stderr. `--device cuda` without a device is an error here,
/// before anything is compiled.
bool parseExecFlags(const Flags &f, ExecOptions &opts, int &exitCode,
                    llvm::StringRef defaultDevice = "auto", std::string *cpuNote = nullptr);
/// An output file (`-o`, `--dump-logits`) that cannot be written, found
/// before the work starts: a folder, a missing or read-only folder.
llvm::Error checkOutputPath(llvm::StringRef path, llvm::StringRef flag);
/// `run`'s sampling flags (--temperature, --top-k, --top-p, --min-p, --seed),
/// --ignore-eos and --chat.
void addSamplingFlags(Flags &f);
/// Reads them: the temperature defaults to 0 (greedy), or 1 when a filter is
/// given; no --seed is a random seed. Out-of-range values are usage errors.
bool readSamplingFlags(const Flags &f, SamplingOptions &s, int &exitCode);
/// Token ids of `--NAME` (its last value): integers in [0, 2^31); an empty
/// item is a usage error, not skipped.
bool getTokenIds(const Flags &f, llvm::StringRef name, std::vector<int32_t> &out, int &exitCode);
/// Token ids outside the plan's vocabulary (its `tokens` binding) are usage
/// errors naming the flag and the vocabulary size.
bool checkTokenIds(const Flags &f, const Plan &plan, llvm::ArrayRef<int32_t> prompt,
                   llvm::ArrayRef<int32_t> teacher, int &exitCode);
/// The stop ids of MODEL, or of the model file a plan was compiled from
/// (frontends/ModelChat.h); none for built-in models.
llvm::Error readStopTokens(llvm::StringRef modelOrPlan, const Plan &plan,
                           std::vector<int32_t> &out);
/// For a command given an X.plan: the compile flags that would change it
/// (`--ctx`, `--prefill`, `--kv-dtype`, `--arch`, `--no-fusion`,
/// `--disable-fusion`) are usage errors unless they repeat the plan's values;
/// those that only observe a compilation are warned about. True for a MODEL.
bool checkPlanCompileFlags(const Flags &f, const Plan &plan, int &exitCode);
/// MODEL or X.plan -> a Plan (loading and compiling a model as needed).
llvm::Expected<Plan> planFor(llvm::StringRef modelOrPlan, const ModelSettings &model,
                             const CompileOptions &compile);
/// Prints log messages to stderr as `fusegraph: msg` (verbose ones only when
/// `verbose`).
LogSink stderrLog(bool verbose);

/// What `run` adds to greedy decoding, to compare logits with another
/// implementation.
struct GenerateExtras {
  /// How tokens are picked (greedy by default) and where generation stops.
  SamplingOptions sampling;
  std::vector<int32_t> stopTokens;
  /// Printed on stderr once the session has started (the CPU fallback note).
  std::string deviceNote;
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
  /// SessionOptions::pipeline (`--no-pipeline` turns it off).
  bool pipeline = true;
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
