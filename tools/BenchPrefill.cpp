//===- BenchPrefill.cpp - `fusegraph bench --prefill N,...` ---------------===//
//
// Prefill is compute-bound, so its roofline is a FLOP rate, not bandwidth:
// each prefill_N entry is timed warm (graph instantiated and cuBLAS
// heuristics run during the untimed warm-up steps) as a whole prompt chunk
// at positions S .. S+N-1 (S = --kv, default 0: a prompt's first chunk;
// every step the same positions), inputs in, launch, synchronise, and its FLOPs (the
// op table's cost model) are set against one large cuBLAS GEMM timed in the
// same process (codegen/cuda/GemmPeak.h). `--breakdown` traces the graph
// replays with CUPTI and groups the device time by kernel family.
//
//===----------------------------------------------------------------------===//
#include "tools/BenchPrefill.h"

#include "codegen/cuda/GemmPeak.h"
#include "runtime/BenchLoop.h"
#include "runtime/Session.h"
#include "tools/Commands.h"

#include "llvm/Support/Format.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/JSON.h"

#include <algorithm>

using namespace llvm;

namespace fg::cli {

namespace {

struct PrefillRow {
  int64_t tokens = 0;
  std::string entry, skipped;
  StepSummary s;
  StepFlops flops;
  std::vector<FamilyTime> families;
  TracedSpan span; ///< the traced replays' span, busy and idle time
  std::vector<Executor::LaunchTime> launches; ///< the first traced replay's launches
  std::string familiesError;
};

std::string firstLine(std::string s) {
  size_t nl = s.find('\n');
  return nl == std::string::npos ? s : s.substr(0, nl);
}

/// The first `n` launches of one traced replay in launch order: start and
/// end on the device clock from the first kernel's start, the charged time
/// (from the end of what ran before it), the launch. Where two columns
/// disagree — a kernel that starts long before the one it follows ends (a
/// programmatic launch waiting), or one charged more than its span — the
/// family table alone would mislead.
void printLaunchList(raw_ostream &os, ArrayRef<Executor::LaunchTime> ls, int64_t n) {
  if (n <= 0 || ls.empty())
    return;
  uint64_t t0 = UINT64_MAX;
  for (const Executor::LaunchTime &l : ls)
    if (l.endNs > l.startNs)
      t0 = std::min(t0, l.startNs);
  if (t0 == UINT64_MAX) {
    os << "  launches: no device clocks in this replay\n";
    return;
  }
  os << format("  first %lld launches of one replay (µs from the first kernel's start):\n",
               static_cast<long long>(std::min<int64_t>(n, static_cast<int64_t>(ls.size()))));
  auto cs = [](const char *x) { return x; }; // format() takes pointers, not arrays
  os << format("  %5s %10s %10s %9s %9s  %s\n", cs("#"), cs("start"), cs("end"), cs("span"),
               cs("charged"), cs("launch"));
  for (size_t i = 0; i < ls.size() && static_cast<int64_t>(i) < n; ++i) {
    const Executor::LaunchTime &l = ls[i];
    if (l.endNs <= l.startNs) {
      os << format("  %5zu %10s %10s %9s %9.2f  %s\n", i, cs("-"), cs("-"), cs("-"), 1e3 * l.ms,
                   l.what.c_str());
      continue;
    }
    os << format("  %5zu %10.2f %10.2f %9.2f %9.2f  %s\n", i, (l.startNs - t0) / 1e3,
                 (l.endNs - t0) / 1e3, (l.endNs - l.startNs) / 1e3, 1e3 * l.ms, l.what.c_str());
  }
}

} // namespace

int runPrefillBench(const PrefillBenchArgs &a) {
  if (!cudaDeviceAvailable()) {
    outs() << "bench " << a.model << ": skipped: no CUDA device available\n";
    return kOk;
  }
  Expected<cuda::GemmPeak> peak = cuda::measureGemmPeak({8192, a.bf16, 10});
  if (!peak)
    return reportError(peak.takeError());

  int64_t largest = *std::max_element(a.sizes.begin(), a.sizes.end());
  ModelSettings ms;
  ms.ctx = std::max(a.ctx, largest + a.start);
  ms.prefill = a.sizes;
  ms.log = stderrLog(a.verbose);
  CompileOptions co;
  co.ctx = ms.ctx;
  co.arch = a.arch;
  co.log = ms.log;
  co.gemmInputConverts = a.gemmInputConverts;
  co.disableFusion = a.disableFusion;
  co.enableFusion = a.enableFusion;
  Expected<Plan> plan = planFor(a.model, ms, co);
  if (!plan)
    return reportError(plan.takeError());
  std::vector<PrefillBucket> buckets = prefillBuckets(plan->graph());

  std::vector<PrefillRow> rows;
  for (int64_t n : a.sizes) {
    PrefillRow r;
    r.tokens = n;
    auto b = llvm::find_if(buckets, [&](const PrefillBucket &x) { return x.tokens == n; });
    if (b == buckets.end()) {
      r.skipped = "the plan has no prefill entry of " + std::to_string(n) + " tokens";
      rows.push_back(std::move(r));
      continue;
    }
    r.entry = b->entry;
    r.flops = stepFlops(*plan->graph().lookup(r.entry), a.start + n);
    StepLoopOptions lo;
    lo.entry = r.entry;
    lo.steps = a.steps;
    lo.warmup = std::max<int64_t>(a.warmup, 1); // graph instantiation, cuBLAS heuristics
    lo.startPosition = a.start;
    lo.advance = false; // every step the same chunk at positions S .. S+N-1
    ExecOptions eo;
    eo.device = ExecOptions::Device::Cuda;
    eo.mode = ExecOptions::Mode::Graph;
    eo.programmaticLaunch = a.programmaticLaunch;
    eo.log = stderrLog(a.verbose);
    Expected<Executor> ex = Executor::create(*plan, eo);
    if (!ex) {
      r.skipped = firstLine(toString(ex.takeError()));
      rows.push_back(std::move(r));
      continue;
    }
    Expected<std::vector<StepSample>> samples = timeSteps(*ex, lo);
    if (!samples)
      r.skipped = firstLine(toString(samples.takeError()));
    else
      r.s = summarize(*samples);
    if (a.breakdown && r.skipped.empty()) {
      eo.profileLaunches = true;
      Expected<Executor> px = Executor::create(*plan, eo);
      if (!px) {
        r.familiesError = firstLine(toString(px.takeError()));
      } else {
        StepLoopOptions po = lo;
        po.warmup = std::min<int64_t>(lo.warmup, 3);
        auto fams = profileFamilies(*px, po, 5, a.start + n, &r.span, &r.launches);
        if (!fams)
          r.familiesError = firstLine(toString(fams.takeError()));
        else
          r.families = std::move(*fams);
      }
    }
    rows.push_back(std::move(r));
  }

  raw_ostream &os = outs();
  auto cs = [](const char *x) { return x; };
  os << "bench " << a.model << ": prefill at positions " << a.start << ".." << a.start << "+N-1, graph" << (a.programmaticLaunch ? "" : " without programmatic launch") << ", median of " << a.steps
     << " runs after " << std::max<int64_t>(a.warmup, 1) << " warm-up\n";
  os << format("peak: cuBLAS %lld^3 %s GEMM (random operands, f32 accumulate) %.3f ms = %.1f TFLOP/s\n",
               static_cast<long long>(peak->n), a.bf16 ? "bf16" : "f16", peak->ms, peak->tflops);
  os << format("%-14s %7s %10s %10s %12s %10s %10s %9s %9s\n", cs("entry"), cs("tokens"),
               cs("wall ms"), cs("GPU ms"), cs("tokens/s"), cs("GEMM TF"), cs("all TF"),
               cs("TFLOP/s"), cs("% peak"));
  for (const PrefillRow &r : rows) {
    if (!r.skipped.empty()) {
      os << format("%-14s %7lld ", r.entry.c_str(), static_cast<long long>(r.tokens))
         << "skipped: " << r.skipped << "\n";
      continue;
    }
    double tfs = r.s.wallMs > 0 ? r.flops.total / (r.s.wallMs * 1e9) : 0;
    os << format("%-14s %7lld %10.3f %10.3f %12.0f %10.3f %10.3f %9.1f %8.1f%%\n",
                 r.entry.c_str(), static_cast<long long>(r.tokens), r.s.wallMs, r.s.gpuMs,
                 r.s.wallMs > 0 ? 1e3 * r.tokens / r.s.wallMs : 0.0, r.flops.matmul / 1e12,
                 r.flops.total / 1e12, tfs, peak->tflops > 0 ? 100 * tfs / peak->tflops : 0.0);
  }
  os << "(FLOPs from the op table: attention counted against all N keys, the masked half "
        "included)\n";
  for (const PrefillRow &r : rows) {
    if (!a.breakdown || !r.skipped.empty())
      continue;
    os << "\nper kernel family, " << r.entry
       << " (CUPTI records of 5 graph replays; each launch charged from the end of what ran "
          "before it):\n";
    if (!r.familiesError.empty()) {
      os << "  skipped: " << r.familiesError << "\n";
      continue;
    }
    double totalMs = 0;
    for (const FamilyTime &fam : r.families)
      totalMs += fam.ms;
    os << format("  %-34s %8s %10s %7s\n", cs("family"), cs("launches"), cs("ms"), cs("share"));
    for (const FamilyTime &fam : r.families)
      os << format("  %-34s %8lld %10.4f %6.1f%%\n", fam.family.c_str(),
                   static_cast<long long>(fam.launches), fam.ms,
                   totalMs > 0 ? 100 * fam.ms / totalMs : 0.0);
    if (r.span.runs)
      os << format("  traced replay: %.4f ms from the first kernel's start to the last one's end, "
                   "kernels busy %.4f, idle between them %.4f (%.1f%%)\n",
                   r.span.spanMs, r.span.busyMs, r.span.idleMs(),
                   r.span.spanMs > 0 ? 100 * r.span.idleMs() / r.span.spanMs : 0.0);
    printLaunchList(os, r.launches, a.breakdownLaunches);
  }

  if (!a.json.empty()) {
    json::Array jrows;
    for (const PrefillRow &r : rows) {
      json::Object o{{"entry", r.entry}, {"tokens", r.tokens}};
      if (!r.skipped.empty()) {
        o["skipped"] = r.skipped;
      } else {
        o["wall_ms_median"] = r.s.wallMs;
        o["gpu_ms_median"] = r.s.gpuMs;
        o["tokens_per_s"] = r.s.wallMs > 0 ? 1e3 * r.tokens / r.s.wallMs : 0.0;
        o["matmul_flops"] = r.flops.matmul;
        o["flops"] = r.flops.total;
        json::Array fams;
        for (const FamilyTime &fam : r.families)
          fams.push_back(
              json::Object{{"family", fam.family}, {"launches", fam.launches}, {"ms", fam.ms}});
        if (!r.families.empty())
          o["families"] = std::move(fams);
      }
      jrows.push_back(std::move(o));
    }
    json::Object root{{"model", a.model},
                      {"start_position", a.start},
                      {"peak_tflops", peak->tflops},
                      {"peak_gemm_n", peak->n},
                      {"prefill", std::move(jrows)}};
    std::error_code ec;
    raw_fd_ostream out(a.json, ec);
    if (ec)
      return reportError(makeError("cannot write '" + a.json + "': " + ec.message()));
    out << formatv("{0:2}", json::Value(std::move(root))) << "\n";
  }
  return kOk;
}

} // namespace fg::cli
