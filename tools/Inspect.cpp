//===- Inspect.cpp - `fusegraph inspect`: what a model or plan holds -------===//
#include "tools/Commands.h"

#include "runtime/ProgramIO.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/raw_ostream.h"

#include <map>

using namespace llvm;

namespace fg::cli {

namespace {

struct EntrySummary {
  std::string name;
  std::vector<std::string> inputs, results; ///< "tokens: i32[1]"
  std::map<std::string, int64_t> opCounts;  ///< mnemonic -> count
  size_t ops = 0;
  Cost cost;
};

struct ArgTotals {
  int64_t values = 0, bytes = 0;
};

struct Summary {
  std::vector<EntrySummary> entries;
  ArgTotals weights, state;
};

Summary summarize(const Graph &g) {
  Summary s;
  StringMap<bool> seen; // weights and state are shared by name between entries
  for (const Function &fn : g.functions()) {
    EntrySummary e;
    e.name = fn.name().str();
    for (const Argument &a : fn.arguments()) {
      const Value &v = fn.value(a.value);
      if (a.role == ArgRole::Input) {
        e.inputs.push_back(v.name + ": " + v.type.str());
        continue;
      }
      if (!seen.insert({v.name, true}).second)
        continue;
      ArgTotals &t = a.role == ArgRole::Weight ? s.weights : s.state;
      ++t.values;
      t.bytes += v.type.bytes();
    }
    for (ValueId r : fn.results())
      e.results.push_back(fn.value(r).name + ": " + fn.type(r).str());
    for (const Node &n : fn.nodes()) {
      ++e.opCounts[std::string(mnemonic(n.kind))];
      ++e.ops;
      SmallVector<TensorType, 4> in, out;
      for (ValueId v : n.operands)
        in.push_back(fn.type(v));
      for (ValueId v : n.results)
        out.push_back(fn.type(v));
      Cost c = opCost(n.kind, in, n.attrs, out);
      e.cost.flops += c.flops;
      e.cost.bytes += c.bytes;
    }
    s.entries.push_back(std::move(e));
  }
  return s;
}

std::string humanBytes(double b) {
  const char *units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int u = 0;
  while (b >= 1024 && u < 4) {
    b /= 1024;
    ++u;
  }
  return u == 0 ? formatv("{0} B", static_cast<int64_t>(b)).str()
                : formatv("{0:f2} {1}", b, units[u]).str();
}

std::string humanFlops(double f) {
  if (f < 1e3)
    return formatv("{0} flop", static_cast<int64_t>(f)).str();
  const char *units[] = {"kflop", "Mflop", "Gflop", "Tflop"};
  int u = -1;
  while (f >= 1e3 && u < 3) {
    f /= 1e3;
    ++u;
  }
  return formatv("{0:f2} {1}", f, units[u]).str();
}

/// The plan's weight slots (its "weights" section, else its CUDA program's);
/// an error for a corrupt weights section, nothing for a corrupt program
/// (reported with the cuda line).
Expected<std::vector<TensorSlot>> planWeightSlots(const Plan &plan) {
  if (const PlanSection *w = plan.section("weights"))
    return decodeWeightTable(w->bytes);
  if (const PlanSection *p = plan.section("program")) {
    Expected<CompiledProgram> prog = decodeProgram(p->bytes);
    if (!prog) {
      consumeError(prog.takeError());
      return std::vector<TensorSlot>();
    }
    return std::move(prog->weights);
  }
  return std::vector<TensorSlot>();
}

/// One weight's source in one line: its recipe, or its embedded bytes.
std::string weightSourceLine(const TensorSlot &t) {
  if (!t.recipe.empty())
    return t.recipe.str();
  return "embedded " + t.type.str() + " (" + humanBytes(static_cast<double>(t.bytes.size())) + ")";
}

/// Where a model's weights come from: mapped from model files (by path and
/// offset), made by a load-time recipe over file ranges, embedded in the plan;
/// then each weight's recipe on one line.
void printWeightSources(raw_ostream &os, const Plan &plan) {
  Expected<std::vector<TensorSlot>> table = planWeightSlots(plan);
  if (!table) {
    os << "  " << toString(table.takeError()) << "\n";
    return;
  }
  std::vector<TensorSlot> slots = std::move(*table);
  unsigned mapped = 0, transformed = 0, embedded = 0, dequantised = 0;
  double embeddedBytes = 0, deviceBytes = 0;
  std::vector<std::string> files;
  for (const TensorSlot &t : slots) {
    if (!t.hasSource())
      continue;
    deviceBytes += static_cast<double>(t.type.bytes());
    if (t.recipe.empty()) {
      ++embedded;
      embeddedBytes += static_cast<double>(t.bytes.size());
      continue;
    }
    ++(t.recipe.isPlainRange() ? mapped : transformed);
    for (const RecipeSource &src : t.recipe.sources)
      if (!is_contained(files, src.file))
        files.push_back(src.file);
    dequantised += llvm::any_of(t.recipe.steps, [&](const RecipeStep &st) {
      return st.op == RecipeOp::Convert && !t.recipe.sources.empty() &&
             isQuantized(t.recipe.sources.front().type.dtype);
    });
  }
  if (!mapped && !transformed && !embedded)
    return;
  os << "  from the model: " << mapped << " mapped, " << transformed
     << " made by load-time recipes";
  if (!files.empty())
    os << " (" << files.front()
       << (files.size() > 1 ? " and " + std::to_string(files.size() - 1) + " more files" : "")
       << ")";
  os << ", " << embedded << " embedded in the plan (" << humanBytes(embeddedBytes) << ")";
  if (dequantised)
    os << ", " << dequantised << " quantised ones dequantised to f16 at load time";
  os << "; " << humanBytes(deviceBytes) << " of weights once loaded\n";
  // One line per weight: its recipe (or its embedded bytes).
  for (const TensorSlot &t : slots) {
    if (!t.hasSource())
      continue;
    os << "    " << t.name << ": " << weightSourceLine(t) << "\n";
  }
}

void printText(const Plan &plan, StringRef path, bool isPlan, const Summary &s, raw_ostream &os) {
  const PlanOptions &o = plan.options();
  if (isPlan)
    os << "plan: " << path << " (format " << Plan::kFormatMajor << "." << Plan::kFormatMinor
       << ", cuda " << cudaVersionStr(plan.cudaRuntimeVersion()) << ", nvrtc "
       << cudaVersionStr(plan.nvrtcVersion()) << ")\n";
  else
    os << "model: " << path << " (compiled in memory)\n";
  os << "options: ctx " << o.ctx << ", prefill "
     << (o.prefill.empty()
             ? std::string("none")
             : join(map_range(o.prefill, [](int64_t n) { return std::to_string(n); }), ","))
     << ", arch " << o.arch << ", fusion " << (o.fusion ? "on" : "off") << ", kv " << o.kvDtype;
  if (!o.disableFusion.empty())
    os << ", disabled fusions " << join(o.disableFusion, ",");
  os << "\n";
  os << "entries:\n";
  for (const EntrySummary &e : s.entries) {
    os << "  " << e.name << "(" << join(e.inputs, ", ") << ") -> " << join(e.results, ", ") << "\n";
    os << "    ops: " << e.ops << " (";
    bool first = true;
    for (const auto &[name, count] : e.opCounts) {
      os << (first ? "" : ", ") << name << " " << count;
      first = false;
    }
    os << ")\n";
    os << "    cost: " << humanFlops(e.cost.flops) << ", " << humanBytes(e.cost.bytes)
       << " moved\n";
  }
  os << "weights: " << s.weights.values << " values, " << humanBytes(s.weights.bytes) << "\n";
  printWeightSources(os, plan);
  os << "state: " << s.state.values << " values, " << humanBytes(s.state.bytes) << "\n";
  if (const PlanSection *p = plan.section("program")) {
    Expected<CompiledProgram> prog = decodeProgram(p->bytes);
    if (!prog) {
      os << "cuda: " << toString(prog.takeError()) << "\n";
      return;
    }
    unsigned gemms = 0, kernels = 0;
    for (const CompiledEntry &e : prog->entries)
      for (const LaunchRecord &l : e.launches)
        (l.kind == LaunchRecord::Kind::Gemm ? gemms : kernels) += 1;
    os << "cuda: " << prog->arch << ", " << prog->modules.size() << " kernel modules, "
       << kernels << " kernel launches, " << gemms << " cuBLAS calls\n";
    for (const CompiledEntry &e : prog->entries)
      os << "  " << e.name << ": " << e.launches.size() << " launches, arena "
         << humanBytes(static_cast<double>(e.arenaBytes)) << ", peak live "
         << humanBytes(static_cast<double>(e.peakLiveBytes)) << "\n";
  } else {
    os << "cuda: no program in this plan (compiled without CUDA code generation)\n";
  }
  if (const PlanSection *f = plan.section("fusion"))
    os << "fusions:\n" << (f->bytes.empty() ? std::string("  none\n") : f->bytes);
  else
    os << "fusions: not recorded in this plan\n";
  os << "passes:";
  if (plan.passes().empty())
    os << " none";
  for (const PlanPassRecord &p : plan.passes())
    os << " " << p.name << (p.changed ? " (changed)" : "");
  os << "\n";
}

void printJson(const Plan &plan, StringRef path, bool isPlan, const Summary &s, raw_ostream &os) {
  const PlanOptions &o = plan.options();
  json::OStream j(os, 2);
  j.object([&] {
    j.attribute(isPlan ? "plan" : "model", path);
    if (isPlan) {
      j.attribute("format", formatv("{0}.{1}", Plan::kFormatMajor, Plan::kFormatMinor).str());
      j.attribute("cuda_runtime_version", static_cast<int64_t>(plan.cudaRuntimeVersion()));
      j.attribute("nvrtc_version", static_cast<int64_t>(plan.nvrtcVersion()));
    }
    j.attributeObject("options", [&] {
      j.attribute("ctx", o.ctx);
      j.attributeArray("prefill", [&] {
        for (int64_t n : o.prefill)
          j.value(n);
      });
      j.attribute("arch", o.arch);
      j.attribute("fusion", o.fusion);
      j.attributeArray("disable_fusion", [&] {
        for (const std::string &n : o.disableFusion)
          j.value(n);
      });
      j.attribute("kv_dtype", o.kvDtype);
      j.attribute("source", o.source);
    });
    j.attributeArray("entries", [&] {
      for (const EntrySummary &e : s.entries)
        j.object([&] {
          j.attribute("name", e.name);
          j.attributeArray("inputs", [&] {
            for (const std::string &i : e.inputs)
              j.value(i);
          });
          j.attributeArray("results", [&] {
            for (const std::string &r : e.results)
              j.value(r);
          });
          j.attribute("ops", static_cast<int64_t>(e.ops));
          j.attributeObject("op_counts", [&] {
            for (const auto &[name, count] : e.opCounts)
              j.attribute(name, count);
          });
          j.attribute("flops", e.cost.flops);
          j.attribute("bytes", e.cost.bytes);
        });
    });
    j.attributeObject("weights", [&] {
      j.attribute("values", s.weights.values);
      j.attribute("bytes", s.weights.bytes);
      // Each model weight's source: its recipe or embedded bytes, one line.
      Expected<std::vector<TensorSlot>> slots = planWeightSlots(plan);
      j.attributeObject("sources", [&] {
        if (!slots) {
          consumeError(slots.takeError());
          return;
        }
        for (const TensorSlot &t : *slots)
          if (t.hasSource())
            j.attribute(t.name, weightSourceLine(t));
      });
    });
    j.attributeObject("state", [&] {
      j.attribute("values", s.state.values);
      j.attribute("bytes", s.state.bytes);
    });
    j.attributeArray("fusions", [] {});
    j.attributeArray("passes", [&] {
      for (const PlanPassRecord &p : plan.passes())
        j.object([&] {
          j.attribute("name", p.name);
          j.attribute("changed", p.changed);
        });
    });
  });
  os << "\n";
}

} // namespace

int runInspect(ArrayRef<const char *> args) {
  Flags f("inspect", "inspect MODEL|X.plan [--json]",
          "Shows the entries, op counts per kind, weights and state (values and bytes), cost\n"
          "totals (flops, bytes) and the passes of a plan; a MODEL is compiled first.");
  f.flag("json", "print JSON instead of text");
  addCompileFlags(f);
  int code;
  if (!f.parse(args, code))
    return code;
  if (f.positional().size() != 1)
    return f.usageError("'inspect' takes one MODEL or X.plan (see fusegraph inspect --help)");
  ModelSettings ms;
  CompileOptions co;
  if (!readCompileFlags(f, ms, co, code))
    return code;
  StringRef path = f.positional()[0];
  Expected<Plan> plan = planFor(path, ms, co);
  if (!plan)
    return reportError(plan.takeError());
  Summary s = summarize(plan->graph());
  if (f.has("json"))
    printJson(*plan, path, isPlanFile(path), s, outs());
  else
    printText(*plan, path, isPlanFile(path), s, outs());
  return kOk;
}

} // namespace fg::cli
