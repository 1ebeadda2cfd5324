//===- patterns.cpp - each fused kernel against its unfused launch sequence ===//
//
// One small graph per fusion pattern, spelled as frontends/DecoderBlocks
// spells it (activations are f32 weights generated on the device, so an entry
// needs only positions as input), at decode (T = 1) and T = 8, on the shapes
// of the workloads (W-dense 4096 / 14336, W-moe 2048 / 128 experts x 768,
// top-8). Two cases per pattern and T:
//   pattern/<name>/T<t>/unfused   fusion off
//   pattern/<name>/T<t>/fused     only this pattern on (the others disabled);
//                                 skipped with the compile error when the
//                                 fused op has no kernel yet, or when the
//                                 pattern did not fire
// Plans compile even without a GPU (then every case skips after compiling:
// "no CUDA device"), so CI checks the graphs and kernels.
// Each runs the entry in graph mode. Manual time = GPU time (CUDA events)
// per run; counters: gpu/wall medians, bytes (the entry's ideal bytes),
// effective GB/s = bytes / GPU time, bw_fraction of the measured read
// bandwidth, launches, and for fused cases speedup = unfused / fused GPU time.
//
//   fg_bench_patterns --benchmark_out=patterns.json
//
//===----------------------------------------------------------------------===//
#include "BenchCommon.h"

#include "frontends/DecoderBlocks.h"
#include "passes/fusion/FusionReport.h"
#include "runtime/ProgramIO.h"

using namespace fg;
using namespace fg::bench;

namespace {

constexpr int64_t kSteps = 200;

struct Pattern {
  const char *name;
  /// Builds the pattern's graph for T tokens into `b` (results set).
  void (*build)(Builder &b, int64_t T);
};

WeightInit act(unsigned seed) { return WeightInit::normal(seed, 1.0); }
WeightInit mat(unsigned seed) { return WeightInit::normal(seed, 0.02); }
WeightInit norm(unsigned seed) { return WeightInit::normal(seed, 0.02, 1.0); }

Builder::RopeParams denseRope() {
  Builder::RopeParams r;
  r.mode = RopeMode::Normal;
  r.theta = 500000;
  return r;
}
Builder::RopeParams moeRope() {
  Builder::RopeParams r;
  r.mode = RopeMode::Neox;
  r.theta = 1e6;
  return r;
}

const Pattern kPatterns[] = {
    {"rms_norm_mul",
     [](Builder &b, int64_t T) {
       ValueId x = b.weight("x", {DType::F32, {T, 4096}}, act(1));
       ValueId w = b.weight("attn_norm", {DType::F32, {4096}}, norm(2));
       b.result(rmsNormMul(b, x, w, 1e-5, kNoValue, "y"));
     }},
    {"rms_norm_mul_add",
     [](Builder &b, int64_t T) {
       ValueId x = b.weight("x", {DType::F32, {T, 4096}}, act(1));
       ValueId r = b.weight("residual", {DType::F32, {T, 4096}}, act(3));
       ValueId w = b.weight("post_norm", {DType::F32, {4096}}, norm(2));
       b.result(rmsNormMul(b, x, w, 1e-5, r, "y"));
     }},
    {"rms_norm_mul_rope",
     [](Builder &b, int64_t T) { // W-moe's q path after the projection
       ValueId pos = b.input("positions", {DType::I32, {T}});
       ValueId q = b.weight("q", {DType::F32, {T, 32, 128}}, act(1));
       ValueId w = b.weight("attn_q_norm", {DType::F32, {128}}, norm(2));
       ValueId n = b.mul(b.rmsNorm(q, 1e-6), w, "q_normed");
       b.result(b.rope(n, pos, moeRope(), std::nullopt, "q_rope"));
     }},
    {"rms_norm_mul_rope_set_rows",
     [](Builder &b, int64_t T) { // W-moe's k path into the cache
       ValueId pos = b.input("positions", {DType::I32, {T}});
       ValueId k = b.weight("k", {DType::F32, {T, 4, 128}}, act(1));
       ValueId w = b.weight("attn_k_norm", {DType::F32, {128}}, norm(2));
       ValueId cache = b.state("k_cache.0", {DType::F16, {2048, 4, 128}});
       ValueId n = b.mul(b.rmsNorm(k, 1e-6), w, "k_normed");
       ValueId r = b.rope(n, pos, moeRope(), std::nullopt, "k_rope");
       b.setRows(cache, r, pos, "k_cache.0.1");
     }},
    {"rope_set_rows",
     [](Builder &b, int64_t T) { // W-dense's k path into the cache
       ValueId pos = b.input("positions", {DType::I32, {T}});
       ValueId k = b.weight("k", {DType::F32, {T, 8, 128}}, act(1));
       ValueId cache = b.state("k_cache.0", {DType::F16, {2048, 8, 128}});
       ValueId r = b.rope(k, pos, denseRope(), std::nullopt, "k_rope");
       b.setRows(cache, r, pos, "k_cache.0.1");
     }},
    {"topk_moe",
     [](Builder &b, int64_t T) {
       ValueId x = b.weight("x", {DType::F32, {T, 2048}}, act(1));
       ValueId gate = b.weight("ffn_gate_inp", {DType::F32, {128, 2048}}, mat(2));
       MoeRoutingOptions o;
       o.nExpertsUsed = 8;
       o.gating = TopkGating::Softmax;
       o.renormalize = true;
       MoeRouting r = moeRouting(b, x, gate, kNoValue, o, "blk.0.");
       b.result(r.ids);
       b.result(r.weights);
     }},
    {"gated_matmul",
     [](Builder &b, int64_t T) {
       ValueId x = b.weight("x", {DType::F32, {T, 4096}}, act(1));
       ValueId g = b.weight("ffn_gate", {DType::F16, {14336, 4096}}, mat(2));
       ValueId u = b.weight("ffn_up", {DType::F16, {14336, 4096}}, mat(3));
       b.result(b.glu(b.matmul(x, g, "gate"), b.matmul(x, u, "up"), GluKind::SwiGLU, 1.702, 7.0,
                      "ffn_act"));
     }},
    {"gated_matmul_id",
     [](Builder &b, int64_t T) {
       ValueId ids = b.input("ids", {DType::I32, {T, 8}}); // 0, 1, 2, ...: distinct experts
       ValueId x = b.weight("x", {DType::F32, {T, 2048}}, act(1));
       ValueId g = b.weight("ffn_gate_exps", {DType::F16, {128, 768, 2048}}, mat(2));
       ValueId u = b.weight("ffn_up_exps", {DType::F16, {128, 768, 2048}}, mat(3));
       ValueId xr = b.reshape(x, {T, 1, 2048}, "x_exp");
       b.result(b.glu(b.matmulId(xr, g, ids, "gate"), b.matmulId(xr, u, ids, "up"),
                      GluKind::SwiGLU, 1.702, 7.0, "ffn_act"));
     }},
    {"moe_weighted_sum",
     [](Builder &b, int64_t T) {
       ValueId e = b.weight("experts", {DType::F32, {T, 8, 2048}}, act(1));
       ValueId w = b.weight("weights", {DType::F32, {T, 8}}, WeightInit::uniform(2, 0, 0.25));
       b.result(moeWeightedSum(b, e, w, "blk.0."));
     }},
    {"add_chain",
     [](Builder &b, int64_t T) {
       ValueId a = b.weight("a", {DType::F32, {T, 4096}}, act(1));
       ValueId c = b.weight("c", {DType::F32, {T, 4096}}, act(2));
       ValueId d = b.weight("d", {DType::F32, {T, 4096}}, act(3));
       b.result(b.add(b.add(a, c, "ac"), d, "acd"));
     }},
    {"unary_mul",
     [](Builder &b, int64_t T) {
       ValueId g = b.weight("g", {DType::F32, {T, 14336}}, act(1));
       ValueId u = b.weight("u", {DType::F32, {T, 14336}}, act(2));
       b.result(b.mul(b.unary(OpKind::Silu, g, "silu_g"), u, "y"));
     }},
    {"mul_chain",
     [](Builder &b, int64_t T) {
       ValueId a = b.weight("a", {DType::F32, {T, 4096}}, act(1));
       ValueId c = b.weight("c", {DType::F32, {T, 4096}}, act(2));
       ValueId d = b.weight("d", {DType::F32, {T, 4096}}, act(3));
       b.result(b.mul(b.mul(a, c, "ac"), d, "acd"));
     }},
    {"relu_sqr",
     [](Builder &b, int64_t T) {
       ValueId x = b.weight("x", {DType::F32, {T, 14336}}, act(1));
       b.result(b.unary(OpKind::Sqr, b.unary(OpKind::Relu, x, "r"), "y"));
     }},
    {"softcap",
     [](Builder &b, int64_t T) {
       // Gemma-style logit softcap over a vocabulary row: 30·tanh(x / 30).
       ValueId x = b.weight("x", {DType::F32, {T, 256000}}, act(1));
       b.result(b.scale(b.unary(OpKind::Tanh, b.scale(x, 1.0 / 30, 0, "s"), "t"), 30, 0, "y"));
     }},
};

std::string fusedMnemonic(const char *pattern) { return std::string("fused.") + pattern; }

llvm::Expected<Plan> patternPlan(const Pattern &p, int64_t T, bool fused) {
  Graph g;
  Function &fn = g.addFunction("decode");
  Builder b(fn);
  p.build(b, T);
  if (auto e = b.finish())
    return e;
  CompileOptions co;
  co.fusion = fused;
  co.source = std::string("pattern ") + p.name;
  if (fused)
    for (const std::string &other : fusionPatternNames())
      if (other != p.name)
        co.disableFusion.push_back(other);
  auto plan = compile(g, co);
  if (!plan)
    return plan.takeError();
  if (fused) {
    bool fired = false;
    for (const Node &n : plan->graph().lookup("decode")->nodes())
      fired |= n.info().mnemonic == fusedMnemonic(p.name);
    if (!fired)
      return makeError(std::string("pattern ") + p.name + " did not fire on its canonical form");
  }
  return plan;
}

int64_t launchesOf(const Plan &plan) {
  const PlanSection *s = plan.section("program");
  if (!s)
    return 0;
  auto prog = decodeProgram(s->bytes);
  if (!prog) {
    llvm::consumeError(prog.takeError());
    return 0;
  }
  return prog->entries.empty() ? 0 : static_cast<int64_t>(prog->entries[0].launches.size());
}

std::map<std::string, double> &unfusedGpuMs() {
  static std::map<std::string, double> m;
  return m;
}

void patternCase(benchmark::State &state, const Pattern *p, int64_t T, bool fused) {
  // Compiled before the device check: without a GPU this still proves each
  // graph builds, fuses and gets its kernels (NVRTC needs no device).
  std::string key = std::string(p->name) + "/T" + std::to_string(T);
  const CachedPlan &cp = cachedPlan(key + (fused ? "/fused" : "/unfused"),
                                    [&] { return patternPlan(*p, T, fused); });
  if (!cp.plan) {
    state.SkipWithError(("skipped: " + firstLine(cp.error)).c_str());
    return;
  }
  if (!needDevice(state))
    return;
  ExecOptions eo;
  eo.device = ExecOptions::Device::Cuda;
  eo.mode = ExecOptions::Mode::Graph;
  auto exec = Executor::create(*cp.plan, eo);
  if (!exec) {
    state.SkipWithError(firstLine(llvm::toString(exec.takeError())).c_str());
    return;
  }
  StepLoopOptions lo;
  lo.warmup = 20;
  lo.startPosition = 1024;
  auto samples = timeSteps(state, *exec, lo, StepClock::Gpu);
  if (!samples)
    return;
  StepSummary sum = summarize(*samples);
  double bytes = idealStepBytes(*cp.plan->graph().lookup("decode"), 1024).total();
  double gbs = sum.gpuMs > 0 ? bytes / (sum.gpuMs * 1e-3) / 1e9 : 0;
  const cuda::Bandwidth *bw = bandwidth();
  state.counters["gpu_ms_median"] = sum.gpuMs;
  state.counters["wall_ms_median"] = sum.wallMs;
  state.counters["bytes"] = bytes;
  state.counters["GB/s"] = gbs;
  state.counters["bw_fraction"] = bw && bw->readGBs > 0 ? gbs / bw->readGBs : 0;
  state.counters["launches"] = static_cast<double>(launchesOf(*cp.plan));
  if (!fused) {
    unfusedGpuMs()[key] = sum.gpuMs;
  } else {
    auto it = unfusedGpuMs().find(key);
    if (it != unfusedGpuMs().end() && sum.gpuMs > 0)
      state.counters["speedup"] = it->second / sum.gpuMs;
  }
}

} // namespace

int main(int argc, char **argv) {
  for (const Pattern &p : kPatterns)
    for (int64_t T : {1, 8})
      for (bool fused : {false, true}) { // unfused first: the fused case reports the ratio
        std::string name = std::string("pattern/") + p.name + "/T" + std::to_string(T) +
                           (fused ? "/fused" : "/unfused");
        benchmark::RegisterBenchmark(name.c_str(), patternCase, &p, T, fused)
            ->UseManualTime()->Iterations(kSteps)->Unit(benchmark::kMicrosecond);
      }
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv))
    return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
