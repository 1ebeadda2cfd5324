//===- Executor.cpp - runs a Plan's entries -------------------------------===//
#include "runtime/Executor.h"

#include "runtime/Backend.h"
#include "runtime/InputCheck.h"
#include "runtime/Program.h"
#include "runtime/Sampler.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringExtras.h"

using namespace llvm;

namespace fg {

namespace {

/// "a, b, c" of the distinct input names over every entry, in first-seen order.
std::string inputNames(const Graph &g) {
  std::vector<std::string> names;
  for (const Function &fn : g.functions())
    for (const Argument &a : fn.arguments())
      if (a.role == ArgRole::Input && !is_contained(names, fn.value(a.value).name))
        names.push_back(fn.value(a.value).name);
  return names.empty() ? std::string("(none)") : join(names, ", ");
}

const Argument *findInput(const Function &fn, StringRef name) {
  ValueId v = fn.lookup(name);
  if (v == kNoValue)
    return nullptr;
  const Argument *a = fn.argumentOf(v);
  return a && a->role == ArgRole::Input ? a : nullptr;
}

/// The first value of input `a` outside its binding's range, or (CPU: the
/// gather would read outside the table) of an input that indexes rows of a
/// table (token ids into the embedding) that is not a row of it.
Error checkHostValues(const Function &fn, const Argument &a, ArrayRef<int32_t> vals) {
  const Value &v = fn.value(a.value);
  if (Error e = checkInputRange(v.name, a.bind, vals))
    return e;
  for (const Node &n : fn.nodes()) {
    if (n.kind != OpKind::GetRows || n.operands.size() < 2 || n.operands[1] != a.value)
      continue;
    // get_rows(table [B.., R, C..], idx [B.., N]): R sits at the rank of idx, minus one.
    const TensorType &table = fn.type(n.operands[0]);
    size_t rowDim = fn.type(n.operands[1]).shape.size() - 1;
    if (rowDim >= table.shape.size())
      continue; // the verifier refuses this; nothing to check against
    int64_t rows = table.shape[rowDim];
    for (size_t i = 0; i < vals.size(); ++i)
      if (vals[i] < 0 || vals[i] >= rows)
        return makeError("input '" + v.name + "' [" + Twine(i) + "] = " + Twine(vals[i]) +
                         " is not a row of '" + fn.value(n.operands[0]).name + "' (0 .. " +
                         Twine(rows - 1) + ")");
  }
  return Error::success();
}

} // namespace

/// "step N: <what>", N the run's index on this executor (from 0).
static Error stepError(uint64_t step, Error e) {
  return makeError("step " + Twine(step) + ": " + toString(std::move(e)));
}

StringRef deviceName(ExecOptions::Device d) {
  return d == ExecOptions::Device::Cpu ? "cpu" : "cuda";
}

Executor::Executor(Executor &&) noexcept = default;
Executor &Executor::operator=(Executor &&) noexcept = default;
Executor::~Executor() = default;

Expected<Executor> Executor::create(const Plan &plan, const ExecOptions &opts) {
  Executor e;
  e.opts_ = opts;
  e.graph_ = std::make_unique<Graph>(plan.graph());
  e.ctx_ = plan.options().ctx;
  e.entries_ = plan.entries();
  Expected<std::unique_ptr<ExecBackend>> backend = opts.device == ExecOptions::Device::Cuda
                                                       ? createCudaBackend(plan, opts)
                                                       : createCpuBackend(plan, *e.graph_, opts);
  if (!backend)
    return backend.takeError();
  e.backend_ = std::move(*backend);
  return e;
}

const Function *Executor::entry(StringRef name) const { return graph_->lookup(name); }

Error Executor::setInput(StringRef name, ArrayRef<int32_t> values) {
  std::vector<std::string> lengths;
  bool found = false;
  for (const Function &fn : graph_->functions()) {
    const Argument *a = findInput(fn, name);
    if (!a)
      continue;
    found = true;
    const TensorType &t = fn.type(a->value);
    if (!isInteger(t.dtype))
      return makeError("input '" + name + "' of entry '" + fn.name() + "' is " + t.str() +
                       ", not an integer tensor");
    if (t.numElements() == static_cast<int64_t>(values.size())) {
      inputs_[name] = std::vector<int32_t>(values.begin(), values.end());
      return Error::success();
    }
    lengths.push_back(std::to_string(t.numElements()) + " (" + fn.name().str() + ")");
  }
  if (!found)
    return makeError("no input named '" + name + "'; the inputs are: " + inputNames(*graph_));
  return makeError("input '" + name + "' has " + Twine(values.size()) +
                   " elements; the entries take " + join(lengths, ", "));
}

/// The inputs of `fn` as set, checked against the entry (every one set, with
/// its length) and, where the backend has no device check, their values.
Error Executor::gatherInputs(const Function &fn, uint64_t step, StringMap<HostTensor> &out) const {
  for (const Argument &a : fn.arguments()) {
    if (a.role != ArgRole::Input)
      continue;
    const Value &v = fn.value(a.value);
    auto it = inputs_.find(v.name);
    if (it == inputs_.end())
      return makeError("entry '" + fn.name() + "' needs input '" + v.name + "', which is not set");
    const std::vector<int32_t> &vals = it->second;
    if (static_cast<int64_t>(vals.size()) != v.type.numElements())
      return makeError("input '" + v.name + "' has " + Twine(vals.size()) +
                       " elements but entry '" + fn.name() + "' takes " + v.type.str());
    // The CPU checks every value against its binding's range here; the CUDA
    // program checks them on the device (the entry's input check), where a
    // value may come from a device-side sampler the host never sees.
    if (!backend_->checksInputsOnDevice())
      if (Error e = checkHostValues(fn, a, vals))
        return stepError(step, std::move(e));
    out[v.name] = HostTensor::fromInts(v.type, std::vector<int64_t>(vals.begin(), vals.end()));
  }
  return Error::success();
}

bool Executor::pipelines() const { return backend_->pipelines(); }

Error Executor::enqueue(StringRef name) {
  const Function *fn = graph_->lookup(name);
  if (!fn)
    return makeError("no entry named '" + name + "'; the entries are: " + join(entries_, ", "));
  if (!backend_->pipelines())
    return makeError("this executor runs every step to its end (pipelines() is false)");
  const uint64_t step = steps_++;
  StringMap<HostTensor> inputs;
  if (Error e = gatherInputs(*fn, step, inputs))
    return e;
  pendingSteps_.push_back(step);
  if (Error e = backend_->enqueue(*fn, inputs)) {
    pendingSteps_.pop_back();
    return stepError(step, std::move(e));
  }
  outputs_.clear();
  floatOutputs_.clear();
  lastEntry_ = name.str();
  outputsStale_ = true;
  return Error::success();
}

Expected<int32_t> Executor::awaitGreedyToken() {
  if (pendingSteps_.empty())
    return makeError("no step is in flight");
  const uint64_t step = pendingSteps_.front();
  pendingSteps_.pop_front();
  Expected<std::optional<int32_t>> t = backend_->awaitGreedyToken();
  if (!t) {
    pendingSteps_.clear(); // the backend drops the rest with the fault
    lastEntry_.clear();
    return stepError(step, t.takeError());
  }
  if (!*t)
    return stepError(step, makeError("no token from the device: the logits hold a NaN or only "
                                     "-inf (or +inf, for a draw), or a draw's sorted candidates "
                                     "exceed the device's " +
                                     std::to_string(kDeviceSampleCandidates)));
  return **t;
}

Error Executor::run(StringRef name) {
  const Function *fn = graph_->lookup(name);
  if (!fn)
    return makeError("no entry named '" + name + "'; the entries are: " + join(entries_, ", "));
  pendingSteps_.clear(); // the backend waits for them first
  const uint64_t step = steps_++;
  StringMap<HostTensor> inputs;
  if (Error e = gatherInputs(*fn, step, inputs))
    return e;

  if (Error e = backend_->run(*fn, inputs)) {
    if (e.isA<InputRangeError>()) {
      // A value the device check refused: that step wrote no state, so the
      // executor stays usable (the backend does not count it as a fault);
      // the outputs are not the step's.
      outputs_.clear();
      floatOutputs_.clear();
      outputsStale_ = false;
      lastEntry_.clear();
      return stepError(step, std::move(e));
    }
    return e;
  }
  outputs_.clear();
  floatOutputs_.clear();
  lastEntry_ = name.str();
  outputsStale_ = true;
  return Error::success();
}

/// Copies every output of the last run from the backend (once per run).
Error Executor::fetchOutputs() const {
  if (!outputsStale_)
    return Error::success();
  outputsStale_ = false;
  std::vector<std::pair<std::string, HostTensor>> results;
  if (Error e = backend_->readResults(*graph_->lookup(lastEntry_), results))
    return e;
  for (auto &[resultName, t] : results) {
    if (t.type.dtype == DType::F32)
      floatOutputs_[resultName] = t.toFloats();
    outputs_[resultName] = std::move(t);
  }
  return Error::success();
}

float Executor::lastGpuMs() const { return backend_->lastGpuMs(); }
double Executor::lastHostLaunchMs() const { return backend_->lastHostLaunchMs(); }
std::optional<int32_t> Executor::greedyToken() const {
  const Function *fn = lastEntry_.empty() ? nullptr : entry(lastEntry_);
  return fn ? backend_->greedyToken(*fn) : std::nullopt;
}
Expected<bool> Executor::setTokenPick(const SamplingOptions &sampling, uint64_t epoch) {
  DeviceSampleParams p;
  if (!sampling.greedy()) {
    p.mode = 1;
    p.topK = static_cast<uint32_t>(std::min<int64_t>(sampling.topK, UINT32_MAX));
    p.temperature = sampling.temperature;
    p.topP = sampling.topP;
    p.minP = sampling.minP;
    p.seed = sampling.seed;
    p.epoch = epoch;
  }
  return backend_->setTokenPick(p);
}
std::vector<Executor::LaunchTime> Executor::lastLaunchTimes() const {
  return backend_->lastLaunchTimes();
}

Expected<HostTensor> Executor::output(StringRef name) const {
  if (Error e = fetchOutputs())
    return e;
  auto it = outputs_.find(name);
  if (it == outputs_.end()) {
    if (outputs_.empty())
      return makeError("no output '" + name + "': nothing has run yet");
    std::vector<std::string> names;
    for (const auto &kv : outputs_)
      names.push_back(kv.getKey().str());
    llvm::sort(names);
    return makeError("no output named '" + name + "'; the last run produced: " + join(names, ", "));
  }
  return it->second;
}

Expected<Executor::DeviceOutput> Executor::deviceOutput(StringRef name) const {
  if (lastEntry_.empty())
    return makeError("no output '" + name + "': nothing has run yet");
  const Function *fn = graph_->lookup(lastEntry_);
  for (ValueId r : fn->results()) {
    if (fn->value(r).name != name)
      continue;
    Expected<const void *> p = backend_->deviceResult(*fn, name);
    if (!p)
      return p.takeError();
    return DeviceOutput{*p, fn->type(r), 0};
  }
  std::vector<std::string> names;
  for (ValueId r : fn->results())
    names.push_back(fn->value(r).name);
  return makeError("no output named '" + name + "'; the last run produced: " + join(names, ", "));
}

Expected<ArrayRef<float>> Executor::outputFloats(StringRef name) const {
  if (Error e = fetchOutputs())
    return e;
  auto it = floatOutputs_.find(name);
  if (it != floatOutputs_.end())
    return ArrayRef<float>(it->second);
  Expected<HostTensor> t = output(name);
  if (!t)
    return t.takeError();
  return makeError("output '" + name + "' is " + t->type.str() + ", not f32");
}

void Executor::resetState() {
  // A device failure here resurfaces at the next run.
  pendingSteps_.clear(); // the backend waits for them first
  consumeError(backend_->resetState());
}

} // namespace fg
