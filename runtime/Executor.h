//===- Executor.h - runs a Plan's entries ------------------------*- C++ -*-===//
//
//   auto exec = fg::Executor::create(plan, {});
//   exec->setInput("tokens", ids);  exec->setInput("positions", pos);
//   exec->run("decode");
//   auto logits = exec->outputFloats("logits");
//
// One Executor per stream of work; not thread-safe. State (the KV cache)
// persists across runs until resetState(). The Executor checks inputs and
// keeps outputs; a backend (runtime/Backend.h) runs the entries: the CPU
// device runs the reference interpreter, the CUDA device the plan's "program"
// section through CudaRunner (arena, NVRTC kernels, one CUDA graph per entry,
// replayed). Outputs stay on the device until output() asks for them.
// runtime/Session.h drives a decoder plan (prompt, prefill, decode, sampling)
// on top of an Executor.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "ir/Diag.h"
#include "runtime/Plan.h"
#include "runtime/reference/Interpreter.h"

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace fg {

struct SamplingOptions; // runtime/Sampler.h

struct ExecOptions {
  enum class Device { Cpu, Cuda };
  enum class Mode { Graph, Eager };
  Device device = Device::Cpu;
  Mode mode = Mode::Graph; ///< CUDA only: replay a CUDA graph, or launch eagerly
  bool debugSync = false;  ///< CUDA only: synchronise after every launch
  /// CUDA: time every launch (lastLaunchTimes()). Graph mode traces the
  /// replay with CUPTI (runtime/cuda/KernelTrace.h: the real step, each
  /// launch charged from its predecessor's end to its own end); eager mode
  /// records CUDA events around each launch, which adds host time per launch,
  /// so profiled steps are not timed steps.
  bool profileLaunches = false;
  /// CUDA graph only: programmatic dependent launch between consecutive
  /// kernels (CudaRunner::setProgrammaticLaunch).
  bool programmaticLaunch = true;
  /// CPU only: where the plan's CUDA program quantises a GEMV's x to int8
  /// (the DP4A kernels; LaunchRecord::actQuant), the reference does the same
  /// (ReferenceInterpreter::setActQuant), so it computes what the GPU
  /// computes to f32 rounding, not the exact product the int8 x misses by
  /// ~1e-2: kernels and whole quantised models are then compared tightly
  /// (issue 14). A plan without a CUDA program runs exactly.
  bool cpuActQuant = false;
  LogSink log;             ///< verbose messages; may be empty
  /// Long work: weights loaded (CPU) or uploaded (CUDA), in bytes, and a
  /// Session's prompt, in tokens (ir/Diag.h Progress); may be empty.
  ProgressSink progress;
};

class Executor {
public:
  /// Prepares `plan` for running (copies what it needs: the plan may go away).
  static llvm::Expected<Executor> create(const Plan &plan, const ExecOptions &opts);

  Executor(Executor &&) noexcept;
  Executor &operator=(Executor &&) noexcept;
  ~Executor();

  /// Sets an integer input (`tokens`, `positions`) for the next run. Errors: no
  /// entry has an input of that name (lists the inputs), or no entry's input of
  /// that name has `values.size()` elements.
  llvm::Error setInput(llvm::StringRef name, llvm::ArrayRef<int32_t> values);
  /// Runs entry `entry`. Checked before running: the entry exists (else the
  /// error lists the entries) and every input is set with the entry's length.
  /// Every value of an input with a range (its binding: token ids in
  /// [0, vocab), positions in [0, ctx)) is checked, by the CPU before the
  /// step, by the CUDA program on the device (runtime/InputCheck.h); a bad one
  /// is "step N: input 'positions'[0] = 5000 is outside [0, 4096)" (N counts
  /// this executor's runs from 0), the step writes no state and later steps
  /// may run. The CPU also checks that every value of an input that gathers
  /// rows (token ids) names a row of its table. After a step failed on the
  /// device (a fault) the executor refuses every later run with that first
  /// error.
  llvm::Error run(llvm::StringRef entry);
  /// A result of the last run, by value name.
  llvm::Expected<HostTensor> output(llvm::StringRef name) const;
  /// An f32 result of the last run (valid until the next run).
  llvm::Expected<llvm::ArrayRef<float>> outputFloats(llvm::StringRef name) const;
  /// A result of the last run where the device keeps it: its address and
  /// type, without a copy. It aliases the device's buffers, so the next run()
  /// (or resetState) overwrites it; the pointer stays valid as long as the
  /// Executor lives. Errors: the CPU device (results live on the host),
  /// nothing has run, no result of that name.
  struct DeviceOutput {
    const void *data = nullptr;
    TensorType type;
    int device = 0; ///< the CUDA device ordinal
  };
  llvm::Expected<DeviceOutput> deviceOutput(llvm::StringRef name) const;
  /// Zeroes every state tensor (a fresh conversation).
  void resetState();

  const std::vector<std::string> &entries() const { return entries_; }
  /// The KV context length positions are checked against.
  int64_t ctx() const { return ctx_; }
  /// The function of entry `name`, or null.
  const Function *entry(llvm::StringRef name) const;
  /// The plan's graph (every entry).
  const Graph &graph() const { return *graph_; }
  const ExecOptions &options() const { return opts_; }

  /// GPU time of the last CUDA run from CUDA events, in ms (0 on the CPU).
  float lastGpuMs() const;
  /// Host time of the last CUDA run until everything was enqueued, in ms.
  double lastHostLaunchMs() const;
  /// The token of the last run — the first argmax of the last row of its
  /// `logits`, or the draw setTokenPick asked for — where the device picked
  /// it at the end of the step (the CUDA backend; read without copying the
  /// row). None on the CPU backend, before a run, after a failed one, when
  /// the row holds a NaN or only -inf (sampling the row on the host then says
  /// why), and when a draw's candidates did not fit the device.
  std::optional<int32_t> greedyToken() const;
  /// From the next run on, the device's token launch draws with `sampling`
  /// instead of taking the argmax (a greedy `sampling` restores the argmax):
  /// draw counters (epoch << 32) | (the last row's position + 1), the
  /// TokenSampler's for the same row (runtime/Sampler.h). greedyToken() and
  /// awaitGreedyToken() then return the drawn token; none where the device
  /// left it to the host (more than kDeviceSampleCandidates sorted
  /// candidates: sample the row with the same draw). Returns false where the
  /// device picks no token (the CPU backend, a plan compiled before draws).
  llvm::Expected<bool> setTokenPick(const SamplingOptions &sampling, uint64_t epoch);

  /// Pipelined steps (the CUDA backend but in debug-sync or profiled runs;
  /// pipelines() says): enqueue() checks and stages the inputs like run()
  /// and launches the step without waiting for it; awaitGreedyToken() waits
  /// for the oldest enqueued step and returns its greedy token. A `tokens`
  /// value of kFedToken (runtime/Program.h) is the previous step's greedy
  /// token, taken on the device, so a greedy decode can enqueue step k + 1
  /// before it has seen step k's token. At most two steps in flight; run(),
  /// outputs and resetState() wait for all of them. Errors of awaitGreedy-
  /// Token: the step's row held a NaN or only -inf (no greedy token), what
  /// run() reports.
  bool pipelines() const;
  llvm::Error enqueue(llvm::StringRef entry);
  llvm::Expected<int32_t> awaitGreedyToken();

  /// One launch of a profiled run: what it computes (the launch record's
  /// `what`, "%q.3 = rope (line 12)"), its kernel symbol (empty for a cuBLAS
  /// call) and its device time.
  struct LaunchTime {
    std::string what; ///< for messages: "%q.3 = rope (line 12)"
    std::string symbol;
    bool gemm = false;
    float ms = 0;
    NodeId node = 0; ///< the node launched (index in the entry's function)
    OpKind op = OpKind{};
    /// Traced graph runs: device clock (ns) of its first kernel's start and
    /// last kernel's end; 0 otherwise.
    uint64_t startNs = 0, endNs = 0;
    /// Traced: its kernel record was matched by grid and block, not by name
    /// (LaunchSpan::byShape).
    bool byShape = false;
  };
  /// Per-launch device times of the last run, in launch order; empty unless it
  /// was a CUDA eager run with ExecOptions::profileLaunches.
  std::vector<LaunchTime> lastLaunchTimes() const;

private:
  Executor() = default;
  llvm::Error fetchOutputs() const;

  std::unique_ptr<Graph> graph_; ///< owned copy; the backend points into it
  std::unique_ptr<class ExecBackend> backend_;
  std::string lastEntry_;             ///< outputs are fetched lazily from the backend
  uint64_t steps_ = 0; ///< runs of an existing entry so far (error messages: "step N: ...")
  std::deque<uint64_t> pendingSteps_; ///< the numbers of enqueued steps not yet awaited
  llvm::Error gatherInputs(const Function &fn, uint64_t step,
                           llvm::StringMap<HostTensor> &out) const;
  mutable bool outputsStale_ = false;
  ExecOptions opts_;
  int64_t ctx_ = 0;
  std::vector<std::string> entries_;
  llvm::StringMap<std::vector<int32_t>> inputs_;
  mutable llvm::StringMap<HostTensor> outputs_;
  mutable llvm::StringMap<std::vector<float>> floatOutputs_;
};

llvm::StringRef deviceName(ExecOptions::Device d);

/// True when a CUDA device can be used by this process.
bool cudaDeviceAvailable();

} // namespace fg
