//===- CpuBackend.cpp - the reference interpreter as an Executor backend ---===//
#include "runtime/Backend.h"

#include "runtime/ProgramIO.h"
#include "runtime/WeightLoad.h"
#include "runtime/WeightProgress.h"

#include "llvm/ADT/StringExtras.h"

using namespace llvm;

namespace fg {

ExecBackend::~ExecBackend() = default;

namespace {

/// Binds the weights a plan takes from a model file (its "weights" section,
/// else the CUDA program's weight table) into the CPU reference.
Error bindPlanWeights(const Plan &plan, ReferenceInterpreter &interp, const LogSink &log,
                      const ProgressSink &progress) {
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
  uint64_t total = 0;
  for (const TensorSlot &s : slots)
    if (s.hasSource())
      total += static_cast<uint64_t>(s.type.bytes());
  WeightProgress weightProgress(progress, total);
  for (const TensorSlot &s : slots) {
    if (!s.hasSource())
      continue;
    Expected<std::vector<uint8_t>> bytes = loadSlotBytes(s);
    if (!bytes)
      return bytes.takeError();
    if (Error e = interp.bindWeight(s.name, HostTensor{s.type, std::move(*bytes)}))
      return e;
    ++(s.recipe.empty() ? embedded : s.recipe.isPlainRange() ? mapped : transformed);
    weightProgress.add(static_cast<uint64_t>(s.type.bytes()));
  }
  if (log && mapped + transformed + embedded)
    log(LogLevel::Verbose, "executor: " + std::to_string(mapped) +
                               " weights read from model files as they are, " +
                               std::to_string(transformed) + " made by their recipes, " +
                               std::to_string(embedded) + " embedded in the plan");
  return Error::success();
}

/// ExecOptions::cpuActQuant: each entry's nodes read x as the CUDA program's
/// launches of them do (the DP4A GEMVs quantise it to int8).
Error applyActQuant(const Plan &plan, ReferenceInterpreter &interp, const LogSink &log) {
  const PlanSection *p = plan.section("program");
  if (!p)
    return Error::success(); // no CUDA program: every GEMV exact
  Expected<CompiledProgram> prog = decodeProgram(p->bytes);
  if (!prog)
    return prog.takeError();
  size_t quantised = 0;
  for (const CompiledEntry &e : prog->entries) {
    std::vector<ActQuant> act;
    for (const LaunchRecord &l : e.launches) {
      if (l.actQuant == ActQuant::Exact || l.node == kNoNode)
        continue;
      if (act.size() <= l.node)
        act.resize(l.node + 1, ActQuant::Exact);
      act[l.node] = l.actQuant;
      ++quantised;
    }
    interp.setActQuant(e.name, std::move(act));
  }
  if (log)
    log(LogLevel::Verbose, "executor: the reference quantises x to int8 as " +
                               std::to_string(quantised) + " launches of the CUDA program do");
  return Error::success();
}

class CpuBackend final : public ExecBackend {
public:
  explicit CpuBackend(const Graph &graph) : interp_(graph) {}

  ReferenceInterpreter &interp() { return interp_; }

  Error run(const Function &fn, const StringMap<HostTensor> &inputs) override {
    results_.clear();
    return interp_.run(fn.name(), inputs, results_);
  }

  Error readResults(const Function &,
                    std::vector<std::pair<std::string, HostTensor>> &out) override {
    out = std::move(results_);
    results_.clear();
    return Error::success();
  }

  Error resetState() override {
    interp_.resetState();
    return Error::success();
  }

private:
  ReferenceInterpreter interp_;
  std::vector<std::pair<std::string, HostTensor>> results_;
};

} // namespace

Expected<std::unique_ptr<ExecBackend>> createCpuBackend(const Plan &plan, const Graph &graph,
                                                        const ExecOptions &opts) {
  auto backend = std::make_unique<CpuBackend>(graph);
  if (Error err = bindPlanWeights(plan, backend->interp(), opts.log, opts.progress))
    return err;
  if (opts.cpuActQuant)
    if (Error err = applyActQuant(plan, backend->interp(), opts.log))
      return err;
  if (opts.log)
    opts.log(LogLevel::Verbose, "executor: cpu reference interpreter, ctx " +
                                    std::to_string(plan.options().ctx) + ", entries " +
                                    join(plan.entries(), ", "));
  if (Error err = backend->interp().prepare())
    return err;
  return std::unique_ptr<ExecBackend>(std::move(backend));
}

} // namespace fg
