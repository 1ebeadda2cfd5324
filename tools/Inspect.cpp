//===- Inspect.cpp - `fusegraph inspect`: what a model or plan holds -------===//
#include "tools/Commands.h"

#include "codegen/cuda/EarlyExperts.h"
#include "codegen/cuda/Lower.h"
#include "passes/fusion/FusionReport.h"
#include "runtime/DeviceMemory.h"
#include "runtime/GraphPicture.h"
#include "runtime/LaunchChains.h"
#include "runtime/ProgramIO.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/raw_ostream.h"

#include <chrono>
#include <map>
#include <optional>

using namespace llvm;

namespace fg::cli {

namespace {

struct EntrySummary {
  std::string name;
  EntryContract contract;
  std::vector<std::pair<std::string, InputBinding>> bindings; ///< bound inputs, in order
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
    e.contract = fn.contract();
    for (const Argument &a : fn.arguments()) {
      const Value &v = fn.value(a.value);
      if (a.role == ArgRole::Input) {
        e.inputs.push_back(v.name + ": " + v.type.str());
        if (!a.bind.empty())
          e.bindings.push_back({v.name, a.bind});
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

/// "decode", "prefill 64", "other".
std::string roleText(const EntryContract &c) {
  return c.role == EntryRole::Prefill ? "prefill " + std::to_string(c.tokens)
                                      : entryRoleName(c.role).str();
}

/// "tokens [0, 512)", "positions (no range)".
std::string bindingText(llvm::StringRef name, const InputBinding &b) {
  std::string kind = b.kind == BindKind::Other || bindKindName(b.kind) == name
                         ? ""
                         : " (" + bindKindName(b.kind).str() + ")";
  if (!b.hasRange())
    return name.str() + kind + " unchecked";
  return name.str() + kind + " in [" + std::to_string(b.lo) + ", " + std::to_string(b.hi) + ")";
}

/// Distinct kernels the program launches (one symbol each).
size_t distinctKernels(const CompiledProgram &prog) {
  std::vector<std::string> symbols;
  for (const CompiledEntry &e : prog.entries)
    for (const LaunchRecord &l : e.launches)
      if (l.kind == LaunchRecord::Kind::Kernel && !is_contained(symbols, l.symbol))
        symbols.push_back(l.symbol);
  return symbols.size();
}

/// The node a fusion root (`%name`) names in `entry` of the plan's graph, or
/// none (unnamed or gone).
std::optional<int64_t> rootNode(const Graph &g, StringRef entry, StringRef root) {
  const Function *fn = g.lookup(entry);
  if (!fn || !root.startswith("%"))
    return std::nullopt;
  ValueId v = fn->lookup(root.drop_front());
  if (v == kNoValue || fn->value(v).isArgument())
    return std::nullopt;
  return static_cast<int64_t>(fn->value(v).def);
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

/// `--compile-time`: the cold compile of the plan's kernels, lowering its
/// graph again with the kernel cache off (NVRTC compiles every module; no GPU
/// needed). Not stored in the plan: plans stay byte-reproducible.
struct ColdCompile {
  unsigned modules = 0;
  double seconds = 0;
};

Expected<ColdCompile> coldCompile(const Plan &plan) {
  cuda::LowerOptions lo;
  lo.emit.arch = plan.options().arch;
  lo.ctx = plan.options().ctx;
  lo.nvrtc.useCache = false;
  cuda::LowerStats stats;
  auto t0 = std::chrono::steady_clock::now();
  Expected<CompiledProgram> prog = cuda::lowerGraph(plan.graph(), lo, &stats);
  if (!prog)
    return prog.takeError();
  ColdCompile c;
  c.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  c.modules = static_cast<unsigned>(prog->modules.size());
  return c;
}

/// What the plan takes in device memory once loaded (runtime/DeviceMemory.h).
DeviceMemory memoryTotals(const Plan &plan, const Summary &s) {
  if (const PlanSection *p = plan.section("program")) {
    Expected<CompiledProgram> prog = decodeProgram(p->bytes);
    if (prog)
      return deviceMemory(&*prog, s.weights.bytes, s.state.bytes);
    consumeError(prog.takeError());
  }
  return deviceMemory(nullptr, s.weights.bytes, s.state.bytes);
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
     << ", arch " << o.arch << ", fusion " << (o.fusion ? "on" : "off") << ", kv " << dtypeName(o.kvDType);
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
       << " moved (attention over the full context, " << o.ctx << " rows)\n";
    os << "    role: " << roleText(e.contract);
    for (const auto &[name, b] : e.bindings)
      os << "; " << bindingText(name, b);
    os << "\n";
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
    os << "cuda: " << prog->arch << ", " << distinctKernels(*prog) << " kernels in "
       << prog->modules.size() << " modules, " << kernels << " kernel launches, " << gemms
       << " cuBLAS calls\n";
    for (const CompiledEntry &e : prog->entries) {
      os << "  " << e.name << ": " << e.launches.size() << " launches, arena "
         << humanBytes(static_cast<double>(e.arenaBytes)) << ", peak live "
         << humanBytes(static_cast<double>(e.peakLiveBytes)) << "\n";
      LaunchChains c = launchChains(e, plan.graph().lookup(e.name));
      os << "    " << c.longest << " in a row (the longest chain of the launch DAG)";
      if (!c.layer.empty())
        os << "; layer " << c.layer << ": " << c.layerLaunches << " launches, "
           << c.layerLongest << " in a row";
      os << "\n";
      if (const size_t int8 = quantisedXLaunches(e))
        os << "    " << int8 << (int8 == 1 ? " launch quantises" : " launches quantise")
           << " x to int8 (DP4A GEMVs, int8 expert GEMMs: the CPU reference matches them with "
           << "cpuActQuant; "
           << "run --verify allows 5e-2)\n";
      // Early experts (codegen/cuda/EarlyExperts.h): the labels say which.
      size_t read = 0, ranked = 0;
      for (const LaunchRecord &l : e.launches) {
        read += llvm::StringRef(l.what).endswith(cuda::kEarlyReadLabel);
        ranked += llvm::StringRef(l.what).endswith(cuda::kEarlyRankedLabel);
      }
      if (read + ranked)
        os << "    " << read + ranked
           << (read + ranked == 1 ? " expert down projection reads its"
                                  : " expert down projections read their")
           << " experts before the programmatic-launch wait (" << read << " the stored ids, "
           << ranked << " ranked again from the router's logits)\n";
    }
  } else {
    os << "cuda: no program in this plan (compiled without CUDA code generation)\n";
  }
  DeviceMemory mem = memoryTotals(plan, s);
  os << "memory: weights " << humanBytes(static_cast<double>(mem.weights)) << " + state (KV) "
     << humanBytes(static_cast<double>(mem.state)) << " + arena "
     << humanBytes(static_cast<double>(mem.arena));
  if (mem.workspace)
    os << " + cuBLAS workspace " << humanBytes(static_cast<double>(mem.workspace));
  os << " = " << humanBytes(static_cast<double>(mem.total())) << "\n";
  if (const PlanSection *f = plan.section("fusion")) {
    os << "fusions:\n";
    Expected<FusionReport> report = FusionReport::parse(f->bytes);
    if (report)
      report->print(os);
    else // a plan from before the report was structured: its text as written
      os << (consumeError(report.takeError()), f->bytes.empty() ? std::string("  none\n")
                                                                : f->bytes);
  } else
    os << "fusions: not recorded in this plan\n";
  os << "passes:";
  if (plan.passes().empty())
    os << " none";
  for (const PlanPassRecord &p : plan.passes())
    os << " " << p.name << (p.changed ? " (changed)" : "");
  os << "\n";
}

/// "fusions": applied (entry, pattern, count, roots and their node ids in the
/// plan's graph) and refused (entry, pattern, root, node, reason), and the
/// split-back count; null when the plan recorded none, or its error text.
void printFusionsJson(const Plan &plan, json::OStream &j) {
  const PlanSection *f = plan.section("fusion");
  if (!f) {
    j.attribute("fusions", nullptr);
    return;
  }
  Expected<FusionReport> report = FusionReport::parse(f->bytes);
  if (!report) {
    j.attribute("fusions", toString(report.takeError()));
    return;
  }
  auto node = [&](StringRef entry, StringRef root) {
    std::optional<int64_t> n = rootNode(plan.graph(), entry, root);
    if (n)
      j.value(*n);
    else
      j.value(nullptr);
  };
  j.attributeObject("fusions", [&] {
    j.attributeArray("applied", [&] {
      for (const FusionReport::Applied &a : report->applied)
        j.object([&] {
          j.attribute("entry", a.entry);
          j.attribute("pattern", a.pattern);
          j.attribute("count", a.count);
          j.attributeArray("roots", [&] {
            for (const std::string &r : a.roots)
              j.value(r);
          });
          j.attributeArray("nodes", [&] {
            for (const std::string &r : a.roots)
              node(a.entry, r);
          });
        });
    });
    j.attributeArray("refused", [&] {
      for (const FusionReport::Refusal &r : report->refused)
        j.object([&] {
          j.attribute("entry", r.entry);
          j.attribute("pattern", r.pattern);
          j.attribute("root", r.root);
          j.attributeBegin("node");
          node(r.entry, r.root);
          j.attributeEnd();
          j.attribute("reason", r.reason);
        });
    });
    j.attribute("split_back", report->splitBack);
  });
}

/// "cuda": the program (modules, kernels, every launch with its node, op,
/// kernel or cuBLAS call, dependencies; arena and peak bytes per entry), null
/// without one, or the decoding error.
void printProgramJson(const Plan &plan, json::OStream &j) {
  const PlanSection *p = plan.section("program");
  if (!p) {
    j.attribute("cuda", nullptr);
    return;
  }
  Expected<CompiledProgram> prog = decodeProgram(p->bytes);
  if (!prog) {
    j.attribute("cuda", toString(prog.takeError()));
    return;
  }
  auto space = [](BufferSpace s) {
    switch (s) {
    case BufferSpace::Arena:
      return "arena";
    case BufferSpace::Weight:
      return "weight";
    case BufferSpace::State:
      return "state";
    case BufferSpace::Workspace:
      return "workspace";
    case BufferSpace::Counters:
      return "counters";
    case BufferSpace::Status:
      return "status";
    case BufferSpace::Staging:
      return "staging";
    }
    return "?";
  };
  auto ref = [&](const BufferRef &r) {
    j.object([&] {
      j.attribute("space", space(r.space));
      j.attribute("index", static_cast<int64_t>(r.index));
      j.attribute("offset", static_cast<int64_t>(r.offset));
    });
  };
  j.attributeObject("cuda", [&] {
    j.attribute("arch", prog->arch);
    j.attribute("ctx", prog->ctx);
    j.attribute("kernels", static_cast<int64_t>(distinctKernels(*prog)));
    j.attribute("workspace_bytes", static_cast<int64_t>(prog->workspaceBytes));
    j.attribute("init_module", prog->initModule);
    j.attributeArray("modules", [&] {
      for (const KernelImage &m : prog->modules)
        j.object([&] {
          j.attribute("name", m.name);
          j.attribute("cubin_bytes", static_cast<int64_t>(m.cubin.size()));
          j.attribute("ptx_bytes", static_cast<int64_t>(m.ptx.size()));
        });
    });
    j.attributeArray("entries", [&] {
      for (const CompiledEntry &e : prog->entries)
        j.object([&] {
          int64_t kernels = 0, gemms = 0;
          for (const LaunchRecord &l : e.launches)
            ++(l.kind == LaunchRecord::Kind::Gemm ? gemms : kernels);
          j.attribute("name", e.name);
          j.attribute("arena_bytes", static_cast<int64_t>(e.arenaBytes));
          j.attribute("peak_live_bytes", static_cast<int64_t>(e.peakLiveBytes));
          j.attribute("kernel_launches", kernels);
          j.attribute("cublas_calls", gemms);
          LaunchChains c = launchChains(e, plan.graph().lookup(e.name));
          j.attribute("longest_chain", static_cast<int64_t>(c.longest));
          if (c.layer.empty())
            j.attribute("layer", nullptr);
          else
            j.attributeObject("layer", [&] {
              j.attribute("name", c.layer);
              j.attribute("launches", static_cast<int64_t>(c.layerLaunches));
              j.attribute("longest_chain", static_cast<int64_t>(c.layerLongest));
            });
          j.attributeArray("launches", [&] {
            for (const LaunchRecord &l : e.launches)
              j.object([&] {
                bool gemm = l.kind == LaunchRecord::Kind::Gemm;
                j.attribute("kind", gemm ? "cublas" : "kernel");
                if (l.node == kNoNode) {
                  j.attribute("node", nullptr);
                  j.attribute("op", nodelessLaunchName(static_cast<size_t>(&l - &e.launches[0])));
                } else {
                  j.attribute("node", static_cast<int64_t>(l.node));
                  j.attribute("op", std::string(mnemonic(l.op)));
                }
                j.attribute("what", l.what);
                if (l.actQuant != ActQuant::Exact)
                  j.attribute("act_quant", l.actQuant == ActQuant::Int8 ? "int8" : "int8_norm_deferred");
                if (gemm) {
                  const GemmDesc &g = l.gemm;
                  j.attributeObject("gemm", [&] {
                    j.attribute("m", g.m);
                    j.attribute("n", g.n);
                    j.attribute("k", g.k);
                    j.attribute("trans_a", g.transA);
                    j.attribute("trans_b", g.transB);
                    j.attribute("a_type", std::string(dtypeName(g.aType)));
                    j.attribute("b_type", std::string(dtypeName(g.bType)));
                    j.attribute("c_type", std::string(dtypeName(g.cType)));
                    if (g.lt) // cublasLtMatmul: C (the residual) read, D written
                      j.attribute("lt", true);
                    if (g.batch > 1) { // one strided batch (GemmPairs)
                      j.attribute("batch", static_cast<int64_t>(g.batch));
                      j.attribute("stride_a", g.strideA);
                      j.attribute("stride_c", g.strideC);
                    }
                  });
                } else {
                  j.attribute("module", static_cast<int64_t>(l.module));
                  j.attribute("symbol", l.symbol);
                  j.attributeArray("grid", [&] {
                    for (uint32_t g : l.grid)
                      j.value(static_cast<int64_t>(g));
                  });
                  j.attributeArray("block", [&] {
                    for (uint32_t b : l.block)
                      j.value(static_cast<int64_t>(b));
                  });
                  j.attribute("shared_bytes", static_cast<int64_t>(l.sharedBytes));
                  j.attributeArray("args", [&] {
                    for (const BufferRef &r : l.args)
                      ref(r);
                  });
                }
                j.attributeArray("deps", [&] {
                  for (uint32_t d : l.deps)
                    j.value(static_cast<int64_t>(d));
                });
              });
          });
        });
    });
  });
}

void printJson(const Plan &plan, StringRef path, bool isPlan, const Summary &s,
               const std::optional<ColdCompile> &cold, raw_ostream &os) {
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
      j.attribute("kv_dtype", std::string(dtypeName(o.kvDType)));
      j.attribute("source", o.source);
    });
    j.attributeArray("entries", [&] {
      for (const EntrySummary &e : s.entries)
        j.object([&] {
          j.attribute("name", e.name);
          j.attribute("role", entryRoleName(e.contract.role));
          j.attribute("tokens", e.contract.tokens);
          j.attributeArray("inputs", [&] {
            for (const std::string &i : e.inputs)
              j.value(i);
          });
          j.attributeArray("bindings", [&] {
            for (const auto &binding : e.bindings) // no structured binding: captured below (C++17)
              j.object([&] {
                const InputBinding &b = binding.second;
                j.attribute("input", binding.first);
                j.attribute("kind", bindKindName(b.kind));
                if (b.hasRange()) {
                  j.attribute("lo", b.lo);
                  j.attribute("hi", b.hi);
                }
              });
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
    DeviceMemory mem = memoryTotals(plan, s);
    j.attributeObject("memory", [&] {
      j.attribute("weight_bytes", mem.weights);
      j.attribute("state_bytes", mem.state);
      j.attribute("arena_bytes", mem.arena);
      j.attribute("workspace_bytes", mem.workspace);
      j.attribute("total_bytes", mem.total());
    });
    printFusionsJson(plan, j);
    printProgramJson(plan, j);
    if (cold)
      j.attributeObject("cold_compile", [&] {
        j.attribute("modules", static_cast<int64_t>(cold->modules));
        j.attribute("seconds", cold->seconds);
      });
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

/// `--graph FILE`: a picture of one entry (`--entry`, default decode, else
/// the first) or one layer of it (`--layer N`), as .html, .svg or .dot.
Error writeGraphPicture(const Plan &plan, StringRef path, StringRef out, StringRef entryName,
                        std::optional<int64_t> layer) {
  StringRef ext = sys::path::extension(out);
  if (ext != ".html" && ext != ".svg" && ext != ".dot")
    return makeError("--graph " + out + ": the picture is written as .html, .svg or .dot");
  const Graph &g = plan.graph();
  const Function *fn = nullptr;
  if (!entryName.empty()) {
    fn = g.lookup(entryName);
    if (!fn) {
      std::vector<std::string> names;
      for (const Function &f : g.functions())
        names.push_back(f.name().str());
      return makeError("--entry " + entryName + ": no such entry (entries: " + join(names, ", ") +
                       ")");
    }
  } else {
    fn = g.lookup("decode");
    if (!fn && !g.functions().empty())
      fn = &g.functions().front();
    if (!fn)
      return makeError("the plan has no entry to draw");
  }
  std::optional<CompiledProgram> prog;
  if (const PlanSection *p = plan.section("program")) {
    Expected<CompiledProgram> decoded = decodeProgram(p->bytes);
    if (!decoded)
      return decoded.takeError();
    prog = std::move(*decoded);
  }
  const CompiledEntry *entry = nullptr;
  if (prog)
    for (const CompiledEntry &e : prog->entries)
      if (e.name == fn->name())
        entry = &e;
  std::vector<PictureRefusal> refusals;
  if (const PlanSection *f = plan.section("fusion")) {
    Expected<FusionReport> report = FusionReport::parse(f->bytes);
    if (report) {
      for (const FusionReport::Refusal &r : report->refused)
        if (r.entry == fn->name())
          refusals.push_back({r.pattern, r.root, r.reason});
    } else {
      consumeError(report.takeError()); // an old plan: no structured refusals to mark
    }
  }
  PictureOptions po;
  po.layer = layer;
  po.title = sys::path::filename(path).str() + ", entry " + fn->name().str() +
             (layer ? ", layer " + std::to_string(*layer) : std::string());
  Expected<GraphPicture> pic = buildGraphPicture(*fn, entry, refusals, po);
  if (!pic)
    return pic.takeError();
  std::string text = ext == ".html"  ? renderPictureHtml(*pic)
                     : ext == ".svg" ? renderPictureSvg(*pic)
                                     : renderPictureDot(*pic);
  std::error_code ec;
  raw_fd_ostream os(out, ec, sys::fs::OF_None);
  if (ec)
    return makeError("cannot write '" + out + "': " + ec.message());
  os << text;
  os.close();
  if (os.has_error())
    return makeError("cannot write '" + out + "': " + os.error().message());
  return Error::success();
}

} // namespace

int runInspect(ArrayRef<const char *> args) {
  Flags f("inspect", "inspect MODEL|X.plan [--json] [--compile-time]",
          "Shows the entries (roles, input ranges), op counts per kind, weights and state\n"
          "(values and bytes), cost totals (flops, bytes), the CUDA program (kernels, modules,\n"
          "launches, cuBLAS calls, arena and peak bytes per entry), fusions applied and refused\n"
          "with reasons, and the passes of a plan; a MODEL is compiled first.");
  f.flag("json", "print JSON instead of text");
  f.flag("compile-time", "compile the plan's kernels again with the kernel cache off and report "
                         "the cold NVRTC compile time");
  f.option("graph", "FILE", "draw the graph (fused groups as boxes, refusals, the launch DAG) "
                            "into FILE: .html (self-contained), .svg or .dot");
  f.option("entry", "NAME", "the entry --graph draws", "decode");
  f.option("layer", "N", "--graph draws only decoder layer N (values blk.N.*)");
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
  std::optional<int64_t> layer;
  if (f.has("layer")) {
    int64_t n;
    if (!f.getInt("layer", 0, n, code))
      return code;
    layer = n;
  }
  if ((layer || f.has("entry")) && !f.has("graph"))
    return f.usageError("--layer and --entry choose what --graph draws; add --graph FILE");
  Expected<Plan> plan = planFor(path, ms, co);
  if (!plan)
    return reportError(plan.takeError());
  // A corrupt program section is the plan's error, not a line of the report.
  if (const PlanSection *p = plan->section("program")) {
    Expected<CompiledProgram> prog = decodeProgram(p->bytes);
    if (!prog)
      return reportError(makeError(path + ": corrupt program section: " +
                                   toString(prog.takeError())));
  }
  if (f.has("graph")) {
    if (Error e = writeGraphPicture(*plan, path, f.get("graph"), f.get("entry"), layer))
      return reportError(std::move(e));
    errs() << "fusegraph: wrote " << f.get("graph") << "\n";
    return kOk;
  }
  Summary s = summarize(plan->graph());
  std::optional<ColdCompile> cold;
  if (f.has("compile-time")) {
    if (!plan->section("program"))
      return reportError(makeError("--compile-time needs a plan with a CUDA program"));
    Expected<ColdCompile> c = coldCompile(*plan);
    if (!c)
      return reportError(c.takeError());
    cold = *c;
  }
  if (f.has("json"))
    printJson(*plan, path, isPlanFile(path), s, cold, outs());
  else
    printText(*plan, path, isPlanFile(path), s, outs());
  if (cold && !f.has("json"))
    outs() << formatv("cold compile: {0} modules in {1:f2} s (NVRTC, kernel cache off)\n",
                      cold->modules, cold->seconds);
  return kOk;
}

} // namespace fg::cli
