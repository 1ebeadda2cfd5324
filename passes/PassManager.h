//===- PassManager.h - named pipelines with IR dumps -------------*- C++ -*-===//
//
// A pass transforms one Function and says whether it changed anything. The
// manager runs a pipeline over every entry of a Graph and offers what MLIR and
// XLA users expect: print IR before/after a pass, a numbered dump file per
// pass, statistics and per-pass timing. Output goes to a sink, never stdout.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "ir/Diag.h"
#include "ir/Graph.h"

#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace fg {

struct FusionOptions; // passes/fusion/FusionReport.h
struct FusionReport;
class Target; // passes/Target.h

/// What a pass may record while running: named counters shown by --stats.
class PassContext {
public:
  void stat(llvm::StringRef name, int64_t delta = 1) { stats_[name] += delta; }
  const llvm::StringMap<int64_t> &stats() const { return stats_; }
  LogSink log; ///< may be empty
  /// The `fuse` pass's options and report (null: defaults, report dropped).
  const FusionOptions *fusionOptions = nullptr;
  FusionReport *fusionReport = nullptr;
  /// The code generator's answers for its kernels (null: none assumed).
  const Target *target = nullptr;

private:
  llvm::StringMap<int64_t> stats_;
};

class Pass {
public:
  virtual ~Pass() = default;
  virtual llvm::StringRef name() const = 0;
  /// Returns whether the function changed.
  virtual llvm::Expected<bool> run(Function &fn, PassContext &ctx) = 0;
};

/// Creates a registered pass by name ("dce", "cse", "canonicalize", ...).
llvm::Expected<std::unique_ptr<Pass>> createPass(llvm::StringRef name);
/// Names of every registered pass, for help text and errors.
std::vector<std::string> registeredPasses();

/// A pass named `name` that runs `passes` in order over a function until none
/// of them changes it. Running more than `maxIterations` rounds is an error (a
/// pair of passes undoing each other). Counters of the inner passes are kept
/// as `<inner>.<counter>` (so `--stats` shows `<name>.<inner>.<counter>`).
std::unique_ptr<Pass> createFixedPointPass(std::string name,
                                           std::vector<std::unique_ptr<Pass>> passes,
                                           unsigned maxIterations = 16);

struct PassOptions {
  bool printIrAfterAll = false;
  bool printIrBeforeAll = false;
  std::vector<std::string> printIrAfter;  ///< pass names
  std::vector<std::string> printIrBefore; ///< pass names
  std::string dumpDir;                    ///< one numbered file per pass when set
  bool stats = false;                     ///< report counters at the end
  bool timing = false;                    ///< report per-pass wall time at the end
  bool verifyEach = true;                 ///< verify the input and the IR after each pass
  /// Receives printed IR, statistics and timing (LogLevel::Info).
  LogSink sink;
  /// Handed to every pass's context: options of `fuse` (--no-fusion,
  /// --disable-fusion, --debug-fusion) and where it reports (for `inspect`).
  const FusionOptions *fusionOptions = nullptr;
  FusionReport *fusionReport = nullptr;
  /// Handed to every pass's context: what the code generator answers for its
  /// kernels (token limits, aliasing, scratch, cost); null: no target.
  const Target *target = nullptr;
};

struct PassRecord {
  std::string name;
  bool changed = false;
  double seconds = 0;
};

class PassManager {
public:
  explicit PassManager(PassOptions opts = {}) : opts_(std::move(opts)) {}
  void addPass(std::unique_ptr<Pass> p) { passes_.push_back(std::move(p)); }
  /// Appends passes from a comma-separated list ("dce,cse"); unknown names
  /// are an error listing the known ones.
  llvm::Error addPipeline(llvm::StringRef spec);
  /// Runs every pass over every function, in order, and verifies after each
  /// pass (a pass that breaks the IR is reported by name).
  llvm::Error run(Graph &g);
  /// Names of the passes added so far, in order.
  std::vector<std::string> pipeline() const;

  llvm::ArrayRef<PassRecord> records() const { return records_; }
  const PassContext &context() const { return ctx_; }

private:
  PassOptions opts_;
  std::vector<std::unique_ptr<Pass>> passes_;
  std::vector<PassRecord> records_;
  PassContext ctx_;
  std::vector<std::string> statOrder_; ///< counters in order of first report
};

} // namespace fg
