//===- Executor.cpp - runs a Plan's entries -------------------------------===//
#include "runtime/Executor.h"

#include "runtime/ProgramIO.h"
#include "runtime/WeightLoad.h"
#include "runtime/cuda/CudaRunner.h"

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

/// Binds the weights a plan takes from a model file (its "weights" section,
/// else the CUDA program's weight table) into the CPU reference.
Error bindPlanWeights(const Plan &plan, ReferenceInterpreter &interp, const LogSink &log) {
  std::vector<TensorSlot> slots;
  if (const PlanSection *w = plan.section("weights")) {
    Expected<std::vector<TensorSlot>> t = decodeWeightTable(w->bytes);
    if (!t)
      return t.takeError();
    slots = std::move(*t);
  } else if (const PlanSection *p = plan.section("program")) {
    Expected<CompiledProgram> prog = decodeProgram(p->bytes);
    if (!prog)
      return prog.takeError();
    slots = std::move(prog->weights);
  }
  size_t mapped = 0, transformed = 0, embedded = 0;
  for (const TensorSlot &s : slots) {
    if (!s.hasSource())
      continue;
    Expected<std::vector<uint8_t>> bytes = loadSlotBytes(s);
    if (!bytes)
      return bytes.takeError();
    if (Error e = interp.bindWeight(s.name, HostTensor{s.type, std::move(*bytes)}))
      return e;
    ++(s.recipe.empty() ? embedded : s.recipe.isPlainRange() ? mapped : transformed);
  }
  if (log && mapped + transformed + embedded)
    log(LogLevel::Verbose, "executor: " + std::to_string(mapped) +
                               " weights read from model files as they are, " +
                               std::to_string(transformed) + " made by their recipes, " +
                               std::to_string(embedded) + " embedded in the plan");
  return Error::success();
}

} // namespace

StringRef deviceName(ExecOptions::Device d) {
  return d == ExecOptions::Device::Cpu ? "cpu" : "cuda";
}

bool cudaDeviceAvailable() { return CudaRunner::deviceAvailable(); }

Executor::Executor(Executor &&) noexcept = default;
Executor &Executor::operator=(Executor &&) noexcept = default;
Executor::~Executor() = default;

Expected<Executor> Executor::create(const Plan &plan, const ExecOptions &opts) {
  Executor e;
  e.opts_ = opts;
  e.graph_ = std::make_unique<Graph>(plan.graph());
  e.ctx_ = plan.options().ctx;
  e.entries_ = plan.entries();
  if (opts.device == ExecOptions::Device::Cuda) {
    const PlanSection *section = plan.section("program");
    if (!section)
      return makeError("this plan has no CUDA program (it was compiled without CUDA code "
                       "generation); recompile it, or run with --device cpu");
    Expected<CompiledProgram> prog = decodeProgram(section->bytes);
    if (!prog)
      return prog.takeError();
    e.program_ = std::make_unique<CompiledProgram>(std::move(*prog));
    if (opts.log)
      opts.log(LogLevel::Verbose, "executor: cuda, " + std::to_string(e.program_->modules.size()) +
                                      " kernel modules loaded from the plan (no NVRTC work), "
                                      "mode " + (opts.mode == ExecOptions::Mode::Graph
                                                     ? "graph"
                                                     : "eager"));
    auto runner = CudaRunner::create(*e.program_, opts.log);
    if (!runner)
      return runner.takeError();
    e.cuda_ = std::move(*runner);
    e.cuda_->setProfileLaunches(opts.profileLaunches);
    e.cuda_->setProgrammaticLaunch(opts.programmaticLaunch);
    return e;
  }
  e.interp_ = std::make_unique<ReferenceInterpreter>(*e.graph_);
  if (Error err = bindPlanWeights(plan, *e.interp_, opts.log))
    return err;
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
    // An input that indexes rows of a table (token ids into the embedding):
    // every value must name a row, or the gather would read outside it.
    for (const Node &n : fn->nodes()) {
      if (n.kind != OpKind::GetRows || n.operands.size() < 2 || n.operands[1] != a.value)
        continue;
      // get_rows(table [B.., R, C..], idx [B.., N]): R sits at the rank of idx, minus one.
      const TensorType &table = fn->type(n.operands[0]);
      size_t rowDim = fn->type(n.operands[1]).shape.size() - 1;
      if (rowDim >= table.shape.size())
        continue; // the verifier refuses this; nothing to check against
      int64_t rows = table.shape[rowDim];
      for (size_t i = 0; i < vals.size(); ++i)
        if (vals[i] < 0 || vals[i] >= rows)
          return makeError("input '" + v.name + "' [" + Twine(i) + "] = " + Twine(vals[i]) +
                           " is not a row of '" + fn->value(n.operands[0]).name + "' (0 .. " +
                           Twine(rows - 1) + ")");
    }
    inputs[v.name] = HostTensor::fromInts(v.type, std::vector<int64_t>(vals.begin(), vals.end()));
  }

  if (!deviceFault_.empty())
    return makeError("an earlier step failed on the device (" + deviceFault_ +
                     "); the CUDA context cannot be trusted: create a new executor");
  if (cuda_) {
    for (const auto &kv : inputs)
      if (Error e = cuda_->setInput(name, kv.getKey(), kv.getValue().data.data(),
                                    kv.getValue().data.size()))
        return e;
    Error e = opts_.debugSync ? cuda_->runDebugSync(name)
                              : cuda_->run(name, opts_.mode == ExecOptions::Mode::Graph);
    if (e) {
      // A failed launch or step leaves a CUDA context that is sticky-broken:
      // refuse every later step with this first message, never crash.
      std::string msg = toString(std::move(e));
      deviceFault_ = msg;
      return makeError(msg);
    }
    outputs_.clear();
    floatOutputs_.clear();
    lastEntry_ = name.str();
    outputsStale_ = true;
    return Error::success();
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

/// Copies every output of the last CUDA run to the host (once per run).
Error Executor::fetchCudaOutputs() const {
  if (!cuda_ || !outputsStale_)
    return Error::success();
  outputsStale_ = false;
  const Function *fn = graph_->lookup(lastEntry_);
  for (ValueId r : fn->results()) {
    const Value &v = fn->value(r);
    HostTensor t;
    t.type = v.type;
    if (Error e = cuda_->readOutput(lastEntry_, v.name, t.data))
      return e;
    if (t.type.dtype == DType::F32)
      floatOutputs_[v.name] = t.toFloats();
    outputs_[v.name] = std::move(t);
  }
  return Error::success();
}

float Executor::lastGpuMs() const { return cuda_ ? cuda_->lastGpuMs() : 0.0f; }
double Executor::lastHostLaunchMs() const { return cuda_ ? cuda_->lastHostLaunchMs() : 0.0; }

std::vector<Executor::LaunchTime> Executor::lastLaunchTimes() const {
  std::vector<LaunchTime> out;
  if (!cuda_ || !program_)
    return out;
  const std::vector<float> &ms = cuda_->lastLaunchMs();
  for (const CompiledEntry &ce : program_->entries) {
    if (ce.name != lastEntry_ || ce.launches.size() != ms.size())
      continue;
    for (size_t i = 0; i < ms.size(); ++i) {
      const LaunchRecord &l = ce.launches[i];
      out.push_back({l.what, l.symbol, l.kind == LaunchRecord::Kind::Gemm, ms[i], l.node, l.op});
    }
  }
  return out;
}

Expected<HostTensor> Executor::output(StringRef name) const {
  if (Error e = fetchCudaOutputs())
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

Expected<ArrayRef<float>> Executor::outputFloats(StringRef name) const {
  if (Error e = fetchCudaOutputs())
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
  if (cuda_) {
    // A failure here resurfaces at the next run.
    consumeError(cuda_->resetState());
    return;
  }
  interp_->resetState();
}

} // namespace fg
