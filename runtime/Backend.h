//===- Backend.h - what an Executor runs entries on --------------*- C++ -*-===//
//
// An Executor checks what does not depend on the device (the entry exists,
// every input is set with the entry's length; on a backend without a device
// input check, every value lies in its binding's range and token ids name
// rows), numbers the steps and keeps the outputs of the last run; a backend
// runs one checked entry and hands its results back. A step the device's
// input check refused comes back as an InputRangeError (runtime/InputCheck.h):
// no state was written, it is no device fault, later steps may run. Two
// backends exist:
//
//   cpu    the reference interpreter over the plan's graph (the oracle);
//          weights from the plan's `weights` or `program` section
//   cuda   the plan's `program` section through CudaRunner (arena, NVRTC
//          kernels, one CUDA graph per entry); results stay on the device
//          until readResults asks for them
//
// A new device is one more subclass and one more case in Executor::create.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "ir/Graph.h"
#include "runtime/Executor.h"
#include "runtime/InputCheck.h"
#include "runtime/Plan.h"
#include "runtime/Program.h"
#include "runtime/reference/Interpreter.h"

#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace fg {

class ExecBackend {
public:
  virtual ~ExecBackend();

  /// Runs entry `fn` (a function of the plan's graph) on `inputs`: one tensor
  /// per input argument, already checked by the Executor.
  virtual llvm::Error run(const Function &fn, const llvm::StringMap<HostTensor> &inputs) = 0;
  /// Every result of the last successful run of `fn`, by value name, in the
  /// entry's result order. Called at most once per run.
  virtual llvm::Error readResults(const Function &fn,
                                  std::vector<std::pair<std::string, HostTensor>> &out) = 0;
  /// The device address of result `name` of the last successful run of `fn`
  /// (valid until the next run); an error on a backend whose results live on
  /// the host. Executor::deviceOutput's way in (DLPack views, python/).
  virtual llvm::Expected<const void *> deviceResult(const Function &fn, llvm::StringRef name) {
    (void)fn;
    return makeError("result '" + name + "' lives on the host (this device has no device memory)");
  }
  /// Zeroes every state tensor. An error of the device may also surface at the
  /// next run instead.
  virtual llvm::Error resetState() = 0;

  /// True when the backend checks every ranged input on the device (the CUDA
  /// program's input check) and reports a bad value as an InputRangeError
  /// from run(); false: the Executor checks the values on the host first.
  virtual bool checksInputsOnDevice() const { return false; }

  /// Device time of the last run from events, in ms (0 where not measured).
  virtual float lastGpuMs() const { return 0; }
  /// Host time of the last run until everything was enqueued, in ms.
  virtual double lastHostLaunchMs() const { return 0; }
  /// The greedy token of the last successful run of `fn` (the first argmax
  /// of the last row of its `logits`) where the device computed it; none
  /// where it did not (the CPU backend, an entry without it, a row with a
  /// NaN or only -inf).
  virtual std::optional<int32_t> greedyToken(const Function &fn) const {
    (void)fn;
    return std::nullopt;
  }
  /// Sets what the device's token launch picks from now on: the argmax
  /// (params.mode 0) or a seeded draw (runtime/Program.h DeviceSampleParams;
  /// kept across resetState). False where the device picks nothing (the CPU
  /// backend, a plan without the launch's draw settings).
  virtual llvm::Expected<bool> setTokenPick(const DeviceSampleParams &params) {
    (void)params;
    return false;
  }
  /// Pipelined steps (Executor::enqueue): whether this backend has them, a
  /// step launched without waiting, and the oldest one awaited with its
  /// greedy token (none: its row held a NaN or only -inf).
  virtual bool pipelines() const { return false; }
  virtual llvm::Error enqueue(const Function &fn, const llvm::StringMap<HostTensor> &inputs) {
    (void)fn;
    (void)inputs;
    return makeError("this device runs every step to its end");
  }
  virtual llvm::Expected<std::optional<int32_t>> awaitGreedyToken() {
    return makeError("this device runs every step to its end");
  }
  /// Per-launch device times of the last run (profiled CUDA eager runs only).
  virtual std::vector<Executor::LaunchTime> lastLaunchTimes() const { return {}; }
};

/// The reference interpreter over `graph` (which must outlive the backend),
/// with the weights `plan` takes from model files bound.
llvm::Expected<std::unique_ptr<ExecBackend>>
createCpuBackend(const Plan &plan, const Graph &graph, const ExecOptions &opts);

/// The plan's CUDA program on the first device. Errors: the plan has no
/// `program` section, no device, a module or weight that does not load.
llvm::Expected<std::unique_ptr<ExecBackend>> createCudaBackend(const Plan &plan,
                                                               const ExecOptions &opts);

} // namespace fg
