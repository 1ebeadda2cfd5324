//===- BenchLoop.h - timed decode steps, ideal bytes, kernel families -*- C++ -*-===//
//
// What bench/ and `fusegraph bench` share (DESIGN "Benchmarks"):
//
//   * the timed step: set the step's inputs (tokens, positions), run the
//     entry (copy in, launch, synchronise); wall time around all of it, GPU
//     time from the executor's CUDA events, host time to enqueue;
//   * the ideal bytes of a step: what it must move at least (weights actually
//     used, the KV rows attention reads, the KV rows written, inputs and
//     results), for the roofline `ideal ms = bytes / measured bandwidth`;
//   * the per-kernel-family breakdown of a profiled eager step, with each
//     family's bytes under the same access rules.
//
// Bytes come from the op table's one byte model (ir/OpTable.h opCost, Cost),
// which inspect and the target's fusion cost model read too: a weight read by
// get_rows reads only the indexed rows; an expert-indexed op only min(E, |ids|)
// of its E experts (an upper bound: ids may repeat); attention reads `kvRows`
// rows of each cache; a state updater (set_rows and its fusions) writes
// |indices| rows; every other operand and result is read or written whole. In
// the ideal, operands are classified by the storage they alias (weight, state
// read, state written) and a weight used several times counts once (its
// largest read); the families count it once per use.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "ir/Graph.h"
#include "runtime/Executor.h"

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace fg {

/// Bytes one run of an entry must move at least.
struct StepBytes {
  double weights = 0; ///< weight bytes read (the used fraction of each weight)
  double kvRead = 0;  ///< KV cache rows read by attention
  double kvWrite = 0; ///< KV cache rows written
  double io = 0;      ///< inputs read and results written
  double total() const { return weights + kvRead + kvWrite + io; }
};

/// The ideal bytes of one run of `fn` with `kvRows` rows of every KV cache read.
StepBytes idealStepBytes(const Function &fn, int64_t kvRows);

/// Bytes node `n` of `fn` reads and writes (0 for view-like nodes, which launch nothing).
double nodeBytes(const Function &fn, const Node &n, int64_t kvRows);

/// Floating-point operations of one run of `fn` by the op table's cost model
/// (a matmul 2·M·N·K; attention 2·kvRows·(|q| + |y|), every query against
/// kvRows keys, so a causal prefill counts its masked half too).
struct StepFlops {
  double matmul = 0; ///< matmul-like nodes (matmul, matmul_id and their fusions)
  double total = 0;  ///< every node
};
StepFlops stepFlops(const Function &fn, int64_t kvRows);

/// How a timed step loop runs an entry.
struct StepLoopOptions {
  std::string entry = "decode";
  int64_t warmup = 20;
  int64_t steps = 100;
  /// The first position; each step advances by the entry's token count and
  /// wraps back here before passing the executor's ctx (unless `advance` is
  /// false).
  int64_t startPosition = 1024;
  /// false: every step feeds the same positions, startPosition onwards — a
  /// prefill is timed as the same prompt chunk each time (ggml's `--L 0`),
  /// not as chunks at ever later positions whose attention sees more keys.
  bool advance = true;
};

/// One timed step.
struct StepSample {
  double wallMs = 0;       ///< inputs in, launch, synchronise (what a user sees)
  double gpuMs = 0;        ///< CUDA events around the launches (0 on the CPU)
  double hostLaunchMs = 0; ///< host time until everything was enqueued
};

/// Drives an executor step by step: integer inputs are set from the position
/// (`tokens` = a small deterministic id, `positions` = consecutive rows, any
/// other integer input 0, 1, 2, ... in row-major order — modulo its bound
/// range where it has one: distinct indices, e.g. expert ids).
class StepDriver {
public:
  /// Checks the entry exists and its inputs can be fed.
  static llvm::Expected<StepDriver> create(Executor &exec, const StepLoopOptions &opts);
  /// Runs `opts.warmup` untimed steps (graph instantiation, caches).
  llvm::Error warmup();
  /// Runs one timed step.
  llvm::Expected<StepSample> step();
  /// Tokens the entry takes per step.
  int64_t tokensPerStep() const { return tokens_; }

private:
  StepDriver(Executor &exec, StepLoopOptions opts) : exec_(&exec), opts_(std::move(opts)) {}
  llvm::Error setInputs();

  Executor *exec_;
  StepLoopOptions opts_;
  int64_t tokens_ = 1;
  int64_t vocab_ = 1; ///< token ids stay below it (the tokens binding's range, else token_embd's rows)
  /// The inputs bound to tokens and positions (by name in a graph without
  /// bindings: `tokens`, `positions`); empty when the entry has none.
  std::string tokensInput_, positionsInput_;
  int64_t pos_ = 0;
  std::vector<std::string> otherInputs_;
  std::vector<int64_t> otherSizes_;
  std::vector<std::pair<int64_t, int64_t>> otherRanges_; ///< bound [lo, hi), or (0, 0)
};

/// Medians of a run of timed steps.
struct StepSummary {
  double wallMs = 0, gpuMs = 0, hostLaunchMs = 0;
  double wallMinMs = 0, wallMaxMs = 0;
  int64_t steps = 0;
};

/// The median (upper median for even counts); 0 when empty.
double median(std::vector<double> values);
StepSummary summarize(llvm::ArrayRef<StepSample> samples);

/// Warm-up then `opts.steps` timed steps.
llvm::Expected<std::vector<StepSample>> timeSteps(Executor &exec, const StepLoopOptions &opts);

/// One kernel family of a profiled step: launches grouped by op mnemonic
/// (cuBLAS calls apart: "matmul [cublas]").
struct FamilyTime {
  std::string family;
  int64_t launches = 0;
  double ms = 0;    ///< summed device time of its launches
  double bytes = 0; ///< summed nodeBytes of the nodes behind its launches
  int64_t byShape = 0; ///< launches whose records matched by grid and block (first run)
};

/// The family of a launch: its op's mnemonic ("rope"; cuBLAS calls "matmul [cublas]").
std::string launchFamily(OpKind op, bool gemm);

/// Groups per-launch times (averaged over the runs given) by family, largest
/// time first. `fn` is the entry the launches came from (the plan's final IR).
std::vector<FamilyTime> familyBreakdown(const Function &fn,
                                        llvm::ArrayRef<std::vector<Executor::LaunchTime>> runs,
                                        int64_t kvRows);

/// Where a traced replay's time goes between its kernels: the span from its
/// first kernel's start to its last kernel's end, the device-busy time in it
/// (the union of the kernels' intervals: the sum of the charged times) and
/// the rest, idle — launch latency between dependent nodes that neither
/// programmatic launch nor overlap hides. Means over the runs that carry
/// device clocks (traced graph replays); zero when none does.
struct TracedSpan {
  double spanMs = 0, busyMs = 0;
  int64_t runs = 0; ///< runs with device clocks
  double idleMs() const { return spanMs > busyMs ? spanMs - busyMs : 0; }
};
TracedSpan tracedSpan(llvm::ArrayRef<std::vector<Executor::LaunchTime>> runs);

/// Runs `opts.warmup` steps and then `runs` profiled steps on an executor
/// created with ExecOptions::profileLaunches and eager mode, and groups them;
/// `span`, when given, receives the traced replays' span (tracedSpan);
/// `firstRun`, the first profiled run's launches as they were timed.
llvm::Expected<std::vector<FamilyTime>>
profileFamilies(Executor &exec, const StepLoopOptions &opts, int runs, int64_t kvRows,
                TracedSpan *span = nullptr, std::vector<Executor::LaunchTime> *firstRun = nullptr);

} // namespace fg
