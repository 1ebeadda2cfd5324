//===- CudaBackend.cpp - CudaRunner as an Executor backend -----------------===//
#include "runtime/Backend.h"

#include "runtime/ProgramIO.h"
#include "runtime/cuda/CudaRunner.h"

using namespace llvm;

namespace fg {

namespace {

class CudaBackend final : public ExecBackend {
public:
  CudaBackend(std::unique_ptr<CompiledProgram> program, std::unique_ptr<CudaRunner> runner,
              const ExecOptions &opts)
      : program_(std::move(program)), runner_(std::move(runner)), opts_(opts) {
    runner_->setProfileLaunches(opts.profileLaunches);
    runner_->setProgrammaticLaunch(opts.programmaticLaunch);
  }

  /// After a fault every step is refused with its first message.
  Error refuseAfterFault() const {
    if (fault_.empty())
      return Error::success();
    return makeError("an earlier step failed on the device (" + fault_ +
                     "); the CUDA context cannot be trusted: create a new executor");
  }

  Error run(const Function &fn, const StringMap<HostTensor> &inputs) override {
    if (Error e = refuseAfterFault())
      return e;
    if (Error e = stage(fn, inputs))
      return e;
    if (Error e = opts_.debugSync ? runner_->runDebugSync(fn.name())
                                  : runner_->run(fn.name(), opts_.mode == ExecOptions::Mode::Graph))
      return noteFault(std::move(e));
    lastEntry_ = fn.name().str();
    return Error::success();
  }

  Error readResults(const Function &fn,
                    std::vector<std::pair<std::string, HostTensor>> &out) override {
    out.clear();
    for (ValueId r : fn.results()) {
      const Value &v = fn.value(r);
      HostTensor t;
      t.type = v.type;
      if (Error e = runner_->readOutput(fn.name(), v.name, t.data))
        return e;
      out.emplace_back(v.name, std::move(t));
    }
    return Error::success();
  }

  Expected<const void *> deviceResult(const Function &fn, StringRef name) override {
    return runner_->outputAddress(fn.name(), name);
  }

  Error resetState() override { return runner_->resetState(); }

  bool checksInputsOnDevice() const override { return true; }

  float lastGpuMs() const override { return runner_->lastGpuMs(); }
  double lastHostLaunchMs() const override { return runner_->lastHostLaunchMs(); }
  std::optional<int32_t> greedyToken(const Function &fn) const override {
    return runner_->greedyToken(fn.name());
  }

  Expected<bool> setTokenPick(const DeviceSampleParams &params) override {
    if (Error e = refuseAfterFault())
      return e;
    return runner_->setTokenPick(params);
  }

  bool pipelines() const override { return !opts_.debugSync && !opts_.profileLaunches; }

  Error enqueue(const Function &fn, const StringMap<HostTensor> &inputs) override {
    if (Error e = refuseAfterFault())
      return e;
    if (Error e = stage(fn, inputs)) // may wait for a step in flight: a fault there sticks
      return noteFault(std::move(e));
    if (Error e = runner_->enqueue(fn.name(), opts_.mode == ExecOptions::Mode::Graph))
      return noteFault(std::move(e));
    lastEntry_ = fn.name().str();
    return Error::success();
  }

  Expected<std::optional<int32_t>> awaitGreedyToken() override {
    Expected<std::optional<int32_t>> t = runner_->awaitGreedy();
    if (!t)
      return noteFault(t.takeError());
    return t;
  }

  Error stage(const Function &fn, const StringMap<HostTensor> &inputs) {
    for (const auto &kv : inputs)
      if (Error e = runner_->setInput(fn.name(), kv.getKey(), kv.getValue().data.data(),
                                      kv.getValue().data.size()))
        return e;
    return Error::success();
  }

  /// The entry's input check refusing a value is no fault (the step wrote
  /// no state, the context is fine; the Executor adds the step); anything
  /// else from the device leaves a sticky-broken context: every later step
  /// is refused with this first message, never a crash.
  Error noteFault(Error e) {
    if (e.isA<InputRangeError>())
      return e;
    fault_ = toString(std::move(e));
    return makeError(fault_);
  }

  std::vector<Executor::LaunchTime> lastLaunchTimes() const override {
    std::vector<Executor::LaunchTime> out;
    const std::vector<float> &ms = runner_->lastLaunchMs();
    for (const CompiledEntry &ce : program_->entries) {
      if (ce.name != lastEntry_ || ce.launches.size() != ms.size())
        continue;
      for (size_t i = 0; i < ms.size(); ++i) {
        const LaunchRecord &l = ce.launches[i];
        out.push_back({l.what, l.symbol, l.kind == LaunchRecord::Kind::Gemm, ms[i], l.node, l.op});
        if (runner_->lastLaunchSpans().size() == ms.size()) {
          out.back().startNs = runner_->lastLaunchSpans()[i].startNs;
          out.back().endNs = runner_->lastLaunchSpans()[i].endNs;
          out.back().byShape = runner_->lastLaunchSpans()[i].byShape;
        }
      }
    }
    return out;
  }

private:
  std::unique_ptr<CompiledProgram> program_; ///< the runner points into it
  std::unique_ptr<CudaRunner> runner_;
  ExecOptions opts_;
  std::string lastEntry_;
  std::string fault_; ///< the first failed step's error; later runs refuse
};

} // namespace

bool cudaDeviceAvailable() { return CudaRunner::deviceAvailable(); }

Expected<std::unique_ptr<ExecBackend>> createCudaBackend(const Plan &plan,
                                                         const ExecOptions &opts) {
  const PlanSection *section = plan.section("program");
  if (!section)
    return makeError("this plan has no CUDA program (it was compiled without CUDA code "
                     "generation); recompile it, or run with --device cpu");
  Expected<CompiledProgram> prog = decodeProgram(section->bytes);
  if (!prog)
    return prog.takeError();
  auto program = std::make_unique<CompiledProgram>(std::move(*prog));
  if (opts.log)
    opts.log(LogLevel::Verbose, "executor: cuda, " + std::to_string(program->modules.size()) +
                                    " kernel modules loaded from the plan (no NVRTC work), "
                                    "mode " +
                                    (opts.mode == ExecOptions::Mode::Graph ? "graph" : "eager"));
  Expected<std::unique_ptr<CudaRunner>> runner =
      CudaRunner::create(*program, opts.log, opts.progress);
  if (!runner)
    return runner.takeError();
  return std::unique_ptr<ExecBackend>(
      std::make_unique<CudaBackend>(std::move(program), std::move(*runner), opts));
}

} // namespace fg
