//===- Bench.cpp - `fusegraph bench`: decode steps against the roofline ----===//
//
// Compiles the variants asked for (fused / unfused), runs each in the modes
// asked for (eager / graph) and prints one table: wall ms per step (median),
// GPU ms (CUDA events), host launch ms, the ideal ms (bytes a step must move
// ÷ the read bandwidth measured in the same run) and % of that roofline.
// Without a CUDA device (or with --device cpu) it times the CPU reference
// interpreter's decode steps instead: wall time only.
// A missing model file is an error first. `--trace F` writes one traced decode step.
//
//===----------------------------------------------------------------------===//
#include "tools/Commands.h"
#include "tools/BenchPrefill.h"
#include "tools/Progress.h"

#include "codegen/cuda/Bandwidth.h"
#include "frontends/models/Workloads.h"
#include "runtime/BenchLoop.h"
#include "runtime/ProgramIO.h"
#include "passes/fusion/FusionReport.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/raw_ostream.h"

using namespace llvm;

namespace fg::cli {

namespace {

struct Row {
  std::string fusion; ///< "fused", "unfused" or "plan"
  std::string mode;   ///< "eager" or "graph"
  std::string skipped;
  StepSummary s;
  double idealMs = 0;
  int64_t launches = 0;
};

struct Variant {
  std::string fusion;
  std::optional<Plan> plan;
  std::string error;
  StepBytes ideal;
  int64_t launches = 0;
  std::vector<FamilyTime> families;
  TracedSpan span; ///< the traced replays' span, busy and idle time
  std::string familiesError;
};

int64_t countLaunches(const Plan &plan, StringRef entry) {
  const PlanSection *s = plan.section("program");
  if (!s)
    return 0;
  Expected<CompiledProgram> p = decodeProgram(s->bytes);
  if (!p) {
    consumeError(p.takeError());
    return 0;
  }
  for (const CompiledEntry &e : p->entries)
    if (e.name == entry)
      return static_cast<int64_t>(e.launches.size());
  return 0;
}

std::string firstLine(std::string s) {
  size_t nl = s.find('\n');
  return nl == std::string::npos ? s : s.substr(0, nl);
}

/// Without a GPU (or with --device cpu): decode steps of the CPU reference
/// interpreter, wall time only (the oracle, not a fast path: no roofline).
int benchCpu(StringRef model, const ModelSettings &ms, const StepLoopOptions &lo, bool verbose) {
  CompileOptions co;
  co.ctx = ms.ctx;
  co.cuda = false;
  co.log = ms.log;
  Expected<Plan> plan = planFor(model, ms, co);
  if (!plan)
    return reportError(plan.takeError());
  ExecOptions eo;
  eo.device = ExecOptions::Device::Cpu;
  eo.log = stderrLog(verbose);
  Expected<Executor> ex = Executor::create(*plan, eo);
  if (!ex)
    return reportError(ex.takeError());
  Expected<std::vector<StepSample>> samples = timeSteps(*ex, lo);
  if (!samples)
    return reportError(samples.takeError());
  StepSummary s = summarize(*samples);
  outs() << "bench " << model << ": decode on the CPU reference interpreter, KV "
         << lo.startPosition << ", median of " << lo.steps << " steps after " << lo.warmup
         << " warm-up\n"
         << "wall ms/step: " << format("%.2f", s.wallMs) << " (min " << format("%.2f", s.wallMinMs)
         << ", max " << format("%.2f", s.wallMaxMs)
         << "; the reference interpreter is the oracle, not a fast path: no roofline)\n";
  return kOk;
}

} // namespace

int runBench(ArrayRef<const char *> args) {
  Flags f("bench",
          "bench MODEL|X.plan|--workload NAME [--compare fused,unfused,eager,graph] [--steps N] "
          "[--json FILE]",
          "Times decode steps (inputs in, launch, synchronise) of the variants compared and\n"
          "prints wall, GPU and host-launch medians beside the ideal time: the bytes a step\n"
          "must move (weights used, KV rows read and written, inputs and logits) divided by\n"
          "the read bandwidth measured in the same run. Workloads (no files): w-dense,\n"
          "w-moe-12, w-moe-48, w-tiny (add -bf16 for bf16 weights). Without a GPU it times\n"
          "the CPU reference interpreter (wall time only).");
  f.option("workload", "NAME", "a benchmark workload instead of MODEL");
  f.option("compare", "LIST", "variants: fused, unfused (compiled), eager, graph (modes), nopdl (graph without programmatic launch)",
           "fused,unfused,eager,graph");
  f.option("steps", "N", "timed steps per variant (median reported)", "100");
  f.option("warmup", "N", "untimed steps first", "20");
  f.option("kv", "N", "tokens already in the KV cache: steps start at this position", "1024");
  f.option("ctx", "N", "KV cache rows the model is built for", "2048");
  f.option("weight-dtype", "T", "workload weights: f16 or bf16", "f16");
  f.option("arch", "SM", "GPU architecture to compile kernels for", "sm_90");
  f.option("disable-fusion", "a,b", "the fused variant without these fusion patterns");
  f.option("enable-fusion", "a,b", "the fused variant with these off-by-default patterns (" + llvm::join(optInFusionPatterns(), ", ") + ")");
  f.flag("gemm-x-once", "convert x of library GEMMs once per value, as an op (pass gemm-inputs; "
                        "the default)");
  f.flag("gemm-x-inside", "convert x inside each library GEMM launch instead (the form before "
                          "gemm-inputs)");
  f.option("json", "FILE", "also write the figures as JSON");
  f.option("trace", "FILE",
            "trace one decode step at --kv (CUDA graph, CUPTI) of the fused plan into FILE as "
            "a Chrome/Perfetto trace");
  f.flag("breakdown", "trace graph replays with CUPTI and print device time per kernel family");
  f.option("breakdown-launches", "N",
           "with --breakdown --prefill: also list the first N launches of one traced replay "
           "(device start, end, charged time)");
  f.option("device", "D",
           "cuda, cpu (the reference interpreter: wall time only; 3 steps, 1 warm-up unless "
           "given) or auto: cuda when a GPU is present",
           "auto");
  f.flag("verbose", "print what happens");
  addSamplingFlags(f); // a decode step's token drawn on the device instead of the argmax
  f.option("prefill", "N,...", "time the prefill entries of N tokens instead of decode (tokens/s, "
                               "% of a cuBLAS GEMM's TFLOP/s measured in the same run), every "
                               "step the same chunk at positions 0..N-1 (--kv S: S..S+N-1)");
  int code;
  if (!f.parse(args, code) || !checkFusionNames(f, code))
    return code;
  std::string model = f.get("workload");
  if (!model.empty() && !f.positional().empty())
    return f.usageError("give either MODEL or --workload, not both");
  if (model.empty()) {
    if (f.positional().size() != 1)
      return f.usageError("'bench' takes one MODEL, X.plan or --workload NAME");
    model = f.positional()[0];
  } else if (!isWorkloadName(model)) {
    return f.usageError("unknown workload '" + model + "' (workloads: w-dense, w-moe-12, " +
                        "w-moe-48, w-tiny)");
  }
  std::string wdt = f.get("weight-dtype", "f16");
  if (wdt != "f16" && wdt != "bf16")
    return f.usageError("--weight-dtype must be f16 or bf16, got '" + wdt + "'");
  if (wdt == "bf16" && isWorkloadName(model) && !StringRef(model).endswith("-bf16"))
    model += "-bf16";
  bool isPlan = isPlanFile(model);

  bool wantFused = false, wantUnfused = false, wantEager = false, wantGraph = false,
       wantNoPdl = false;
  for (const std::string &c : f.list("compare")) {
    if (c == "fused")
      wantFused = true;
    else if (c == "unfused")
      wantUnfused = true;
    else if (c == "eager")
      wantEager = true;
    else if (c == "graph")
      wantGraph = true;
    else if (c == "nopdl")
      wantNoPdl = true;
    else if (c != "all")
      return f.usageError("--compare takes fused, unfused, eager, graph, nopdl; got '" + c + "'");
  }
  if (!wantFused && !wantUnfused)
    wantFused = wantUnfused = true;
  if (!wantEager && !wantGraph)
    wantEager = wantGraph = true;
  // A plan is timed as compiled: fused/unfused do not apply to it.

  int64_t steps, warmup, kv, ctx;
  if (!f.getInt("steps", 100, steps, code) || !f.getInt("warmup", 20, warmup, code) ||
      !f.getInt("kv", 1024, kv, code) || !f.getInt("ctx", 2048, ctx, code))
    return code;
  if (steps < 1 || warmup < 0 || kv < 0)
    return f.usageError("--steps must be >= 1, --warmup and --kv >= 0");
  // (A prefill grows ctx to hold its chunk at --kv itself; a plan's ctx is
  // checked against the steps when they start.)
  if (!isPlan && !f.has("prefill") && kv + 1 > ctx)
    return f.usageError("--kv " + Twine(kv) + " needs --ctx > " + Twine(kv));
  bool verbose = f.has("verbose");
  SamplingOptions sampling;
  if (!readSamplingFlags(f, sampling, code))
    return code;
  // Each step's token drawn on the device (the greedy launch's draw,
  // kernels/sample.cuh) instead of the argmax: what a sampled decode costs.
  auto pickOnDevice = [&](Executor &ex) -> Error {
    if (sampling.greedy())
      return Error::success();
    Expected<bool> on = ex.setTokenPick(sampling, 0);
    if (!on)
      return on.takeError();
    if (!*on)
      return makeError("this plan's token launch cannot draw (compiled before device sampling)");
    return Error::success();
  };
  if (f.has("prefill")) {
    PrefillBenchArgs pa;
    pa.model = model;
    if (!f.getInts("prefill", pa.sizes, code))
      return code;
    if (pa.sizes.empty() || llvm::any_of(pa.sizes, [](int64_t n) { return n < 2; }))
      return f.usageError("--prefill takes token counts >= 2");
    pa.steps = steps, pa.warmup = warmup, pa.ctx = ctx, pa.arch = f.get("arch", "sm_90");
    // --kv places the chunk after that many cached rows (a later chunk of a
    // long prompt); without it, the prompt's first chunk at 0 .. N-1.
    pa.start = f.has("kv") ? kv : 0;
    pa.bf16 = wdt == "bf16", pa.breakdown = f.has("breakdown"), pa.verbose = verbose;
    // Prefill times one variant: the fused plan as a graph, without
    // programmatic launch where --compare names nopdl.
    pa.programmaticLaunch = !wantNoPdl;
    if (!f.getInt("breakdown-launches", 0, pa.breakdownLaunches, code))
      return code;
    pa.json = f.get("json");
    pa.gemmInputConverts = !f.has("gemm-x-inside");
    pa.disableFusion = f.list("disable-fusion");
    pa.enableFusion = f.list("enable-fusion");
    return runPrefillBench(pa);
  }

  if (isPlan && !sys::fs::exists(model))
    return reportError(makeError("plan '" + model + "' does not exist"));
  // A missing model file is an error here too, not a GPU skip.
  if (!isPlan && !isWorkloadName(model) && model != "demo" && !sys::fs::exists(model))
    return reportError(makeError("model '" + model + "' does not exist"));
  std::string device = f.get("device", "auto");
  if (device != "auto" && device != "cpu" && device != "cuda")
    return f.usageError("--device must be cpu, cuda or auto, got '" + device + "'");
  if (device == "cuda" && !cudaDeviceAvailable())
    return reportError(makeError("--device cuda: no CUDA device is available; use --device cpu "
                                 "(the reference interpreter) or auto"));
  if (device == "cpu" || !cudaDeviceAvailable()) {
    if (device == "auto")
      errs() << "fusegraph: note: no CUDA device: timing the CPU reference interpreter (give "
                "--device cpu to skip this note)\n";
    StepLoopOptions lo;
    lo.steps = f.has("steps") ? steps : 3;
    lo.warmup = f.has("warmup") ? warmup : 1;
    lo.startPosition = kv;
    ModelSettings ms;
    ms.ctx = ctx;
    ms.prefill = {};
    ms.log = stderrLog(verbose);
    return benchCpu(model, ms, lo, verbose);
  }

  Expected<cuda::Bandwidth> bw = cuda::measureBandwidth();
  if (!bw)
    return reportError(bw.takeError());
  double bwBytesPerMs = bw->readGBs * 1e6;

  // Compile the variants.
  std::vector<Variant> variants;
  if (isPlan) {
    Variant v;
    v.fusion = "plan";
    Expected<Plan> p = Plan::load(model);
    if (!p)
      return reportError(p.takeError());
    v.plan.emplace(std::move(*p));
    variants.push_back(std::move(v));
  } else {
    for (bool fused : {false, true}) {
      if ((fused && !wantFused) || (!fused && !wantUnfused))
        continue;
      Variant v;
      v.fusion = fused ? "fused" : "unfused";
      ModelSettings ms;
      ms.ctx = ctx;
      ms.prefill = {};
      ms.log = stderrLog(verbose);
      CompileOptions co;
      co.ctx = ctx;
      co.fusion = fused;
      co.disableFusion = f.list("disable-fusion");
      co.enableFusion = f.list("enable-fusion");
      co.gemmInputConverts = !f.has("gemm-x-inside");
      co.arch = f.get("arch", "sm_90");
      co.log = ms.log;
      co.progress = stderrProgress();
      if (verbose)
        errs() << "fusegraph: compiling " << model << " (" << v.fusion << ")\n";
      Expected<Plan> p = planFor(model, ms, co);
      if (!p)
        v.error = firstLine(toString(p.takeError()));
      else
        v.plan.emplace(std::move(*p));
      variants.push_back(std::move(v));
    }
  }

  StepLoopOptions lo;
  lo.steps = steps;
  lo.warmup = warmup;
  lo.startPosition = kv;
  std::vector<Row> rows;
  for (Variant &v : variants) {
    if (v.plan) {
      const Function *fn = v.plan->graph().lookup("decode");
      if (fn)
        v.ideal = idealStepBytes(*fn, kv);
      v.launches = countLaunches(*v.plan, "decode");
    }
    enum class M { Eager, Graph, GraphNoPdl };
    for (M m : {M::Eager, M::Graph, M::GraphNoPdl}) {
      if ((m == M::Graph && !wantGraph) || (m == M::Eager && !wantEager) ||
          (m == M::GraphNoPdl && !wantNoPdl))
        continue;
      bool graph = m != M::Eager;
      Row r;
      r.fusion = v.fusion;
      r.mode = m == M::Eager ? "eager" : m == M::Graph ? "graph" : "graph-nopdl";
      r.idealMs = v.ideal.total() / bwBytesPerMs;
      r.launches = v.launches;
      if (!v.plan) {
        r.skipped = v.error;
        rows.push_back(std::move(r));
        continue;
      }
      ExecOptions eo;
      eo.device = ExecOptions::Device::Cuda;
      eo.mode = graph ? ExecOptions::Mode::Graph : ExecOptions::Mode::Eager;
      eo.programmaticLaunch = m != M::GraphNoPdl;
      eo.log = stderrLog(verbose);
      Expected<Executor> ex = Executor::create(*v.plan, eo);
      if (ex)
        if (Error e = pickOnDevice(*ex))
          ex = std::move(e);
      if (!ex) {
        r.skipped = firstLine(toString(ex.takeError()));
      } else {
        Expected<std::vector<StepSample>> samples = timeSteps(*ex, lo);
        if (!samples)
          r.skipped = firstLine(toString(samples.takeError()));
        else
          r.s = summarize(*samples);
      }
      rows.push_back(std::move(r));
    }
    if (f.has("breakdown") && v.plan) {
      ExecOptions eo;
      eo.device = ExecOptions::Device::Cuda;
      eo.mode = ExecOptions::Mode::Graph; // replays traced with CUPTI: the real step
      eo.profileLaunches = true;
      Expected<Executor> ex = Executor::create(*v.plan, eo);
      if (ex)
        if (Error e = pickOnDevice(*ex))
          ex = std::move(e);
      if (!ex) {
        v.familiesError = firstLine(toString(ex.takeError()));
      } else {
        StepLoopOptions po = lo;
        po.warmup = std::min<int64_t>(lo.warmup, 5);
        auto fams = profileFamilies(*ex, po, 10, kv, &v.span);
        if (!fams)
          v.familiesError = firstLine(toString(fams.takeError()));
        else
          v.families = std::move(*fams);
      }
    }
  }

  // The table.
  raw_ostream &os = outs();
  os << "bench " << model << ": decode, KV " << kv << ", median of " << steps << " steps after "
     << warmup << " warm-up\n";
  if (!sampling.greedy())
    os << "sampling: " << sampling.str() << ", drawn on the device at the end of each step\n";
  os << "device " << bw->device << ": read " << format("%.0f", bw->readGBs) << " GB/s, D2D copy "
     << format("%.0f", bw->copyGBs) << " GB/s (" << (bw->bytes >> 20) << " MiB)\n";
  for (const Variant &v : variants)
    if (v.plan)
      os << "ideal (" << v.fusion << "): " << format("%.1f", v.ideal.total() / 1e6)
         << " MB/step (weights " << format("%.1f", v.ideal.weights / 1e6) << ", KV read "
         << format("%.1f", v.ideal.kvRead / 1e6) << ", KV write "
         << format("%.3f", v.ideal.kvWrite / 1e6) << ", io " << format("%.3f", v.ideal.io / 1e6)
         << ") = " << format("%.4f", v.ideal.total() / bwBytesPerMs) << " ms; " << v.launches
         << " launches\n";
  auto cs = [](const char *x) { return x; }; // llvm::format takes pointers, not arrays
  os << format("%-16s %10s %10s %10s %10s %10s\n", cs("mode"), cs("wall ms"), cs("GPU ms"),
               cs("host ms"), cs("ideal ms"), cs("% roofline"));
  for (const Row &r : rows) {
    std::string name = r.mode + "-" + r.fusion;
    if (!r.skipped.empty()) {
      os << format("%-16s ", name.c_str()) << "skipped: " << r.skipped << "\n";
      continue;
    }
    double pct = r.s.wallMs > 0 ? 100.0 * r.idealMs / r.s.wallMs : 0;
    os << format("%-16s %10.4f %10.4f %10.4f %10.4f %9.1f%%\n", name.c_str(), r.s.wallMs,
                 r.s.gpuMs, r.s.hostLaunchMs, r.idealMs, pct);
  }
  for (const Variant &v : variants) {
    if (!f.has("breakdown") || !v.plan)
      continue;
    os << "\nper kernel family, graph " << v.fusion
       << " (CUPTI kernel records of 10 replays; each launch charged from the end of what ran "
          "before it to its own end, so the column sums to the device-busy time of a step):\n";
    if (!v.familiesError.empty()) {
      os << "  skipped: " << v.familiesError << "\n";
      continue;
    }
    double totalMs = 0;
    int64_t byShape = 0;
    for (const FamilyTime &fam : v.families)
      totalMs += fam.ms, byShape += fam.byShape;
    if (byShape)
      os << "  (" << byShape
         << " launches matched their kernel records by grid and block: CUPTI named them after "
            "kernels of a plan traced before)\n";
    os << format("  %-34s %8s %10s %7s %10s %10s %8s\n", cs("family"), cs("launches"), cs("ms"),
                 cs("share"), cs("MB"), cs("ideal ms"), cs("% ideal"));
    for (const FamilyTime &fam : v.families) {
      double ideal = fam.bytes / bwBytesPerMs;
      os << format("  %-34s %8lld %10.4f %6.1f%% %10.2f %10.4f %7.1f%%\n", fam.family.c_str(),
                   static_cast<long long>(fam.launches), fam.ms,
                   totalMs > 0 ? 100 * fam.ms / totalMs : 0.0, fam.bytes / 1e6, ideal,
                   fam.ms > 0 ? 100 * ideal / fam.ms : 0.0);
    }
    if (v.span.runs)
      os << format("  traced replay: %.4f ms from the first kernel's start to the last one's end, "
                   "kernels busy %.4f, idle between them %.4f (%.1f%%)\n",
                   v.span.spanMs, v.span.busyMs, v.span.idleMs(),
                   v.span.spanMs > 0 ? 100 * v.span.idleMs() / v.span.spanMs : 0.0);
  }

  if (f.has("json")) {
    json::Array jrows;
    for (const Row &r : rows) {
      json::Object o{{"mode", r.mode + "-" + r.fusion}, {"fusion", r.fusion},
                     {"exec", r.mode}, {"ideal_ms", r.idealMs}, {"launches", r.launches}};
      if (!r.skipped.empty()) {
        o["skipped"] = r.skipped;
      } else {
        o["wall_ms_median"] = r.s.wallMs;
        o["wall_ms_min"] = r.s.wallMinMs;
        o["wall_ms_max"] = r.s.wallMaxMs;
        o["gpu_ms_median"] = r.s.gpuMs;
        o["host_launch_ms_median"] = r.s.hostLaunchMs;
        o["roofline_pct"] = r.s.wallMs > 0 ? 100.0 * r.idealMs / r.s.wallMs : 0.0;
        o["steps"] = r.s.steps;
      }
      jrows.push_back(std::move(o));
    }
    json::Object variantsJ;
    for (const Variant &v : variants) {
      json::Object vj{{"ideal_bytes", v.ideal.total()},
                      {"ideal_weight_bytes", v.ideal.weights},
                      {"ideal_kv_read_bytes", v.ideal.kvRead},
                      {"ideal_kv_write_bytes", v.ideal.kvWrite},
                      {"ideal_io_bytes", v.ideal.io},
                      {"launches", v.launches}};
      if (!v.error.empty())
        vj["error"] = v.error;
      if (!v.familiesError.empty())
        vj["families_error"] = v.familiesError;
      json::Array fams;
      for (const FamilyTime &fam : v.families)
        fams.push_back(json::Object{{"family", fam.family},
                                    {"launches", fam.launches},
                                    {"ms", fam.ms},
                                    {"bytes", fam.bytes},
                                    {"ideal_ms", fam.bytes / bwBytesPerMs}});
      if (!v.families.empty())
        vj["families"] = std::move(fams);
      variantsJ[v.fusion] = std::move(vj);
    }
    json::Object root{{"model", model},
                      {"kv", kv},
                      {"steps", steps},
                      {"warmup", warmup},
                      {"device", bw->device},
                      {"read_gbs", bw->readGBs},
                      {"copy_gbs", bw->copyGBs},
                      {"rows", std::move(jrows)},
                      {"variants", std::move(variantsJ)}};
    std::error_code ec;
    raw_fd_ostream out(f.get("json"), ec);
    if (ec)
      return reportError(makeError("cannot write '" + f.get("json") + "': " + ec.message()));
    out << formatv("{0:2}", json::Value(std::move(root))) << "\n";
  }
  if (f.has("trace")) {
    // The fused plan (or the plan given) when there is one, else the first.
    const Variant *traced = nullptr;
    for (const Variant &v : variants)
      if (v.plan && (!traced || v.fusion != "unfused"))
        traced = &v;
    if (!traced)
      return reportError(makeError("--trace: no plan compiled to trace"));
    if (Error e = writeStepTrace(*traced->plan, f.get("trace"), kv, stderrLog(true)))
      return reportError(std::move(e));
  }
  return kOk;
}

} // namespace fg::cli
