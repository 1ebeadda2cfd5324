//===- CudaRunner.h - run a CompiledProgram on the GPU -----------*- C++ -*-===//
//
// Loads kernels through the CUDA runtime API (cudaLibraryLoadData; the
// driver library is never linked), allocates the arena, weights and state,
// and runs an entry eagerly or as a CUDA graph built once per entry from the
// launch DAG (kernel nodes with explicit dependencies; cuBLAS calls as
// captured child graphs). Replays need no graph update: inputs are copied
// into fixed arena slots before each launch and kernels read positions there.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "ir/Diag.h"
#include "runtime/Program.h"
#include "runtime/StepTrace.h"

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

#include <memory>
#include <optional>
#include <vector>

namespace fg {

class CudaRunner {
public:
  /// True when a CUDA device can be used (tests skip otherwise).
  static bool deviceAvailable();

  /// Uploads weights (materialising initialisers on the host), zeroes state,
  /// loads every kernel image. The program must outlive the runner.
  /// `progress` hears the weight upload, in bytes.
  static llvm::Expected<std::unique_ptr<CudaRunner>> create(const CompiledProgram &program,
                                                            LogSink log = {},
                                                            ProgressSink progress = {});
  ~CudaRunner();

  /// Stages an input's bytes for the next run of `entry`. While a step is
  /// enqueued (below) whose input check has not yet read its staging, this
  /// waits for it (spinning on the status word the check advances).
  llvm::Error setInput(llvm::StringRef entry, llvm::StringRef name, const void *data,
                       size_t bytes);

  /// Pipelined steps (a greedy Session's decode): enqueue() launches a step
  /// of `entry` (graph replay or eager) on the staged inputs and returns
  /// without waiting; awaitGreedy() waits for the oldest enqueued step and
  /// returns its greedy token (the ring slot of its number: kStatusWordRing),
  /// none when its row held a NaN or only -inf. A token staged as kFedToken
  /// is the previous step's greedy token, taken on the device, so step k + 1
  /// can be enqueued before the host has seen step k's token. At most a few
  /// steps in flight (the ring has two slots: await step k before enqueueing
  /// step k + 2). run() and readOutput() wait for every enqueued step first.
  llvm::Error enqueue(llvm::StringRef entry, bool useGraph);
  llvm::Expected<std::optional<int32_t>> awaitGreedy();
  size_t stepsInFlight() const;
  /// Copies staged inputs in, launches (graph replay or eager), synchronises.
  /// A value outside its input's range (the entry's device-side input check,
  /// runtime/InputCheck.h) is an InputRangeError after the step; that step
  /// wrote no state, so the next one may run.
  llvm::Error run(llvm::StringRef entry, bool useGraph);
  /// Eager, with a synchronisation after every launch: names the launch
  /// behind a CUDA error.
  llvm::Error runDebugSync(llvm::StringRef entry);
  /// Copies an output to the host.
  llvm::Error readOutput(llvm::StringRef entry, llvm::StringRef name, std::vector<uint8_t> &out);
  llvm::Error resetState();
  /// The device address of an output of `entry` (no copy; the next run
  /// overwrites it).
  llvm::Expected<const void *> outputAddress(llvm::StringRef entry, llvm::StringRef name);

  /// Graph runs join consecutive kernels with programmatic edges
  /// (programmatic dependent launch; default on). Changing it rebuilds the
  /// graphs at their next run; for measuring what PDL is worth.
  void setProgrammaticLaunch(bool on);

  /// Device time of the last run, from CUDA events (ms).
  float lastGpuMs() const { return lastGpuMs_; }
  /// Host time of the last run's own calls, in ms: the copies of inputs no
  /// kernel copies (none for a decoder's entries) and the cudaGraphLaunch
  /// (not the timing events around it), or every eager launch.
  double lastHostLaunchMs() const { return lastHostLaunchMs_; }
  /// After a successful run of `entry`: the greedy token its last launch
  /// computed on the device (codegen/cuda/GreedyToken.h), read from the
  /// status words in host memory (no copy); none when the entry has no such
  /// launch or the row held a NaN or only -inf.
  std::optional<int32_t> greedyToken(llvm::StringRef entry) const;
  /// Writes the token launches' draw settings (runtime/Program.h
  /// DeviceSampleParams) to the program's counters once the steps in flight
  /// are done, and again after every resetState. False when no entry's
  /// token launch takes them (a plan compiled before draws).
  llvm::Expected<bool> setTokenPick(const DeviceSampleParams &params);

  /// Eager runs record a CUDA event before the first launch and after each
  /// launch (this adds host time: for per-kernel breakdowns, not for timing
  /// steps). Graph runs are traced with CUPTI (KernelTrace.h; an error where
  /// libcupti cannot be loaded). Debug-sync runs ignore it. While it is on,
  /// graphs chain their cuBLAS calls (each waits for the previous one, as
  /// before workspace slots): CUPTI's records of library kernels name no
  /// call, so only calls that never overlap can be told apart; the traced
  /// step may be a little slower than the untraced one where GEMMs of
  /// parallel branches would have overlapped.
  void setProfileLaunches(bool on);
  /// Device time of each launch of the last profiled eager run, in launch
  /// order (ms); empty after any other run.
  const std::vector<float> &lastLaunchMs() const { return lastLaunchMs_; }
  /// Traced graph runs: each launch's device interval (StepTrace.h); empty
  /// after any other run.
  const std::vector<LaunchSpan> &lastLaunchSpans() const { return lastLaunchSpans_; }

  struct Impl;

private:
  explicit CudaRunner(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
  float lastGpuMs_ = 0;
  double lastHostLaunchMs_ = 0;
  bool profileLaunches_ = false;
  std::vector<float> lastLaunchMs_;
  std::vector<LaunchSpan> lastLaunchSpans_;
};

} // namespace fg
