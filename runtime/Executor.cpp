//===- Executor.cpp - runs a Plan's entries -------------------------------===//
#include "runtime/Executor.h"

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

} // namespace

StringRef deviceName(ExecOptions::Device d) {
  return d == ExecOptions::Device::Cpu ? "cpu" : "cuda";
}

Executor::Executor(Executor &&) noexcept = default;
Executor &Executor::operator=(Executor &&) noexcept = default;
Executor::~Executor() = default;

Expected<Executor> Executor::create(const Plan &plan, const ExecOptions &opts) {
  if (opts.device == ExecOptions::Device::Cuda)
    return makeError("CUDA backend not built yet; run with --device cpu (the reference "
                     "interpreter)");
  Executor e;
  e.opts_ = opts;
  e.graph_ = std::make_unique<Graph>(plan.graph());
  e.interp_ = std::make_unique<ReferenceInterpreter>(*e.graph_);
  e.ctx_ = plan.options().ctx;
  e.entries_ = plan.entries();
  if (opts.log)
    opts.log(LogLevel::Verbose, "executor: cpu reference interpreter, ctx " +
                                    std::to_string(e.ctx_) + ", entries " + join(e.entries_, ", "));
  if (Error err = e.interp_->prepare())
    return err;
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

Error Executor::run(StringRef name) {
  const Function *fn = graph_->lookup(name);
  if (!fn)
    return makeError("no entry named '" + name + "'; the entries are: " + join(entries_, ", "));
  StringMap<HostTensor> inputs;
  for (const Argument &a : fn->arguments()) {
    if (a.role != ArgRole::Input)
      continue;
    const Value &v = fn->value(a.value);
    auto it = inputs_.find(v.name);
    if (it == inputs_.end())
      return makeError("entry '" + name + "' needs input '" + v.name + "', which is not set");
    const std::vector<int32_t> &vals = it->second;
    if (static_cast<int64_t>(vals.size()) != v.type.numElements())
      return makeError("input '" + v.name + "' has " + Twine(vals.size()) +
                       " elements but entry '" + name + "' takes " + v.type.str());
    if (v.name == "positions") {
      for (int32_t p : vals) {
        if (p < 0)
          return makeError("position " + Twine(p) + " is negative");
        if (ctx_ > 0 && p >= ctx_)
          return makeError("position " + Twine(p) + " is past the context (ctx = " + Twine(ctx_) +
                           "); compile with a larger --ctx");
      }
    }
    inputs[v.name] = HostTensor::fromInts(v.type, std::vector<int64_t>(vals.begin(), vals.end()));
  }

  std::vector<std::pair<std::string, HostTensor>> results;
  if (Error e = interp_->run(name, inputs, results))
    return e;
  outputs_.clear();
  floatOutputs_.clear();
  for (auto &[resultName, t] : results) {
    if (t.type.dtype == DType::F32)
      floatOutputs_[resultName] = t.toFloats();
    outputs_[resultName] = std::move(t);
  }
  return Error::success();
}

Expected<HostTensor> Executor::output(StringRef name) const {
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

Expected<ArrayRef<float>> Executor::outputFloats(StringRef name) const {
  auto it = floatOutputs_.find(name);
  if (it != floatOutputs_.end())
    return ArrayRef<float>(it->second);
  Expected<HostTensor> t = output(name);
  if (!t)
    return t.takeError();
  return makeError("output '" + name + "' is " + t->type.str() + ", not f32");
}

void Executor::resetState() { interp_->resetState(); }

} // namespace fg
