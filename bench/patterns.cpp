//===- patterns.cpp - each fused kernel against its unfused launch sequence ===//
//
// One small graph per fusion pattern, spelled as frontends/DecoderBlocks
// spells it (activations are f32 weights generated on the device, so an entry
// needs only positions as input), at decode (T = 1) and T = 8, on the shapes
// of the workloads (W-dense 4096 / 14336, W-moe 2048 / 128 experts x 768,
// top-8), for every fusion pattern (`--check-coverage`, a ctest, fails when
// one has no case). Two cases per pattern and T (decode's 1 and 8, or the
// pattern's own: prefill chunks of 64 and 512 for the GEMM forms):
//   pattern/<name>/T<t>/unfused   fusion off — or, for a pattern that
//                                 matches other patterns' fused ops (its
//                                 `after`), only those on
//   pattern/<name>/T<t>/fused     this pattern on too (the others disabled;
//                                 opt-in ones enabled); skipped with the
//                                 pattern's first refusal when it did not
//                                 fire
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

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string_view>

using namespace fg;
using namespace fg::bench;

namespace {

constexpr int64_t kSteps = 200;

struct Pattern {
  const char *name;
  /// Builds the pattern's graph for T tokens into `b` (results set).
  void (*build)(Builder &b, int64_t T);
  /// The token counts it is timed at: decode's T = 1 and 8 unless the
  /// pattern fuses only one token (rope_kv_attention) or only prefill
  /// chunks (the GEMM forms: T = 64 and 512).
  std::vector<int64_t> tokens = {1, 8};
  /// Patterns whose fused ops this one matches: on in both cases, so the
  /// ratio is this pattern's alone.
  std::vector<std::string> after = {};
};

/// Prefill chunk sizes for the patterns of the GEMM path.
const std::vector<int64_t> kPrefillTokens = {64, 512};

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

/// An expert-id input [T, 8] bound to [0, 128): the step loop feeds
/// 0, 1, 2, ... modulo the range (distinct experts per token).
ValueId expertIds(Builder &b, int64_t T) {
  ValueId ids = b.input("ids", {DType::I32, {T, 8}});
  for (Argument &a : b.function().arguments())
    if (a.value == ids)
      a.bind = {BindKind::Other, 0, 128};
  return ids;
}

/// W-moe's gated experts: glu(matmul_id(x, gate_exps, ids), matmul_id(x,
/// up_exps, ids)) for T tokens, 8 experts each of 128.
ValueId gatedExperts(Builder &b, int64_t T) {
  ValueId ids = expertIds(b, T);
  ValueId x = b.weight("x", {DType::F32, {T, 2048}}, act(1));
  ValueId g = b.weight("ffn_gate_exps", {DType::F16, {128, 768, 2048}}, mat(2));
  ValueId u = b.weight("ffn_up_exps", {DType::F16, {128, 768, 2048}}, mat(3));
  ValueId xr = b.reshape(x, {T, 1, 2048}, "x_exp");
  return b.glu(b.matmulId(xr, g, ids, "gate"), b.matmulId(xr, u, ids, "up"), GluKind::SwiGLU,
               1.702, 7.0, "ffn_act");
}

/// W-dense's gate and up GEMVs and the GLU over T rows: glu(matmul(x,
/// gate), matmul(x, up)).
ValueId denseGatedFfn(Builder &b, int64_t T) {
  ValueId x = b.weight("x", {DType::F32, {T, 4096}}, act(1));
  ValueId g = b.weight("ffn_gate", {DType::F16, {14336, 4096}}, mat(2));
  ValueId u = b.weight("ffn_up", {DType::F16, {14336, 4096}}, mat(3));
  return b.glu(b.matmul(x, g, "gate"), b.matmul(x, u, "up"), GluKind::SwiGLU, 1.702, 7.0,
               "ffn_act");
}

/// W-dense's attention after the projections: q and k rotated, k and v
/// written into 2048-row caches at the positions, decode attention (or a
/// prefill chunk's) over them; returns y [T, 32, 128].
ValueId denseAttention(Builder &b, int64_t T) {
  ValueId pos = b.input("positions", {DType::I32, {T}});
  ValueId q = b.weight("q", {DType::F32, {T, 32, 128}}, act(1));
  ValueId k = b.weight("k", {DType::F32, {T, 8, 128}}, act(2));
  ValueId v = b.weight("v", {DType::F32, {T, 8, 128}}, act(3));
  ValueId kc = b.state("k_cache.0", {DType::F16, {2048, 8, 128}});
  ValueId vc = b.state("v_cache.0", {DType::F16, {2048, 8, 128}});
  ValueId qr = b.rope(q, pos, denseRope(), std::nullopt, "q_rope");
  ValueId kr = b.rope(k, pos, denseRope(), std::nullopt, "k_rope");
  ValueId kc1 = b.setRows(kc, kr, pos, "k_cache.0.1");
  ValueId vc1 = b.setRows(vc, v, pos, "v_cache.0.1");
  Builder::AttentionParams ap;
  ap.scale = 1.0 / std::sqrt(128.0);
  return b.attention(qr, kc1, vc1, pos, ap, std::nullopt, "attn");
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
     [](Builder &b, int64_t T) { b.result(denseGatedFfn(b, T)); },
     // (3+ rows over W-dense's weights: refused, cuBLAS is faster there)
     {1, 2}},
    {"gated_matmul_id",
     [](Builder &b, int64_t T) { b.result(gatedExperts(b, T)); }},
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
    {"matmul_add",
     [](Builder &b, int64_t T) { // W-dense's o projection and the residual
       ValueId x = b.weight("attn_out_in", {DType::F32, {T, 4096}}, act(1));
       ValueId w = b.weight("attn_output", {DType::F16, {4096, 4096}}, mat(2));
       ValueId r = b.weight("residual", {DType::F32, {T, 4096}}, act(3));
       b.result(b.add(b.matmul(x, w, "o"), r, "ffn_inp"));
     }},
    {"matmul_multi",
     [](Builder &b, int64_t T) {
       // W-dense q4_K's q, k and v from one row (the f16 tensor-core form
       // is refused by the target's cost: CudaCostModel).
       ValueId x = b.weight("x", {DType::F32, {T, 4096}}, act(1));
       ValueId wq = b.weight("attn_q", {DType::Q4_K, {4096, 4096}}, mat(2));
       ValueId wk = b.weight("attn_k", {DType::Q4_K, {1024, 4096}}, mat(3));
       ValueId wv = b.weight("attn_v", {DType::Q4_K, {1024, 4096}}, mat(4));
       b.result(b.matmul(x, wq, "q"));
       b.result(b.matmul(x, wk, "k"));
       b.result(b.matmul(x, wv, "v"));
     },
     {1}},
    {"rms_norm_matmul",
     [](Builder &b, int64_t T) {
       // W-tiny's attention norm and q, k, v: the target's cost takes the
       // prologue for small GEMVs only.
       ValueId x = b.weight("x", {DType::F32, {T, 512}}, act(1));
       ValueId g = b.weight("attn_norm", {DType::F32, {512}}, norm(2));
       ValueId n = rmsNormMul(b, x, g, 1e-5, kNoValue, "attn_in");
       b.result(b.matmul(n, b.weight("attn_q", {DType::F16, {512, 512}}, mat(3)), "q"));
       b.result(b.matmul(n, b.weight("attn_k", {DType::F16, {512, 512}}, mat(4)), "k"));
       b.result(b.matmul(n, b.weight("attn_v", {DType::F16, {512, 512}}, mat(5)), "v"));
     },
     {1, 8},
     {"rms_norm_mul"}},
    {"rms_norm_matmul_topk_moe",
     [](Builder &b, int64_t T) { // W-moe's FFN norm, router and routing (opt-in)
       ValueId x = b.weight("x", {DType::F32, {T, 2048}}, act(1));
       ValueId w = b.weight("ffn_norm", {DType::F32, {2048}}, norm(2));
       ValueId gate = b.weight("ffn_gate_inp", {DType::F32, {128, 2048}}, mat(3));
       ValueId n = rmsNormMul(b, x, w, 1e-6, kNoValue, "ffn_in");
       MoeRoutingOptions o;
       o.nExpertsUsed = 8;
       o.gating = TopkGating::Softmax;
       o.renormalize = true;
       MoeRouting r = moeRouting(b, n, gate, kNoValue, o, "blk.0.");
       b.result(n); // the experts read the normalised row
       b.result(r.ids);
       b.result(r.weights);
     },
     {1}, // (its kernel takes one token)
     {"rms_norm_mul", "topk_moe"}},
    {"rms_norm_mul_matmul",
     [](Builder &b, int64_t T) { // W-moe's FFN norm stored by its router GEMV (opt-in)
       ValueId x = b.weight("x", {DType::F32, {T, 2048}}, act(1));
       ValueId w = b.weight("ffn_norm", {DType::F32, {2048}}, norm(2));
       ValueId n = rmsNormMul(b, x, w, 1e-6, kNoValue, "ffn_in");
       b.result(b.matmul(n, b.weight("ffn_gate_inp", {DType::F32, {128, 2048}}, mat(3)),
                         "router_logits"));
       b.result(b.reshape(n, {T, 1, 2048}, "ffn_exps_in")); // the experts read the row
     },
     {1, 8},
     {"rms_norm_mul"}},
    {"matmul_id_sum_add",
     [](Builder &b, int64_t T) { // W-moe's expert down projection, weighted sum, residual
       ValueId ids = expertIds(b, T);
       ValueId h = b.weight("ffn_act", {DType::F32, {T, 8, 768}}, act(1));
       ValueId down = b.weight("ffn_down_exps", {DType::F16, {128, 2048, 768}}, mat(2));
       ValueId w = b.weight("weights", {DType::F32, {T, 8}}, WeightInit::uniform(3, 0, 0.25));
       ValueId r = b.weight("residual", {DType::F32, {T, 2048}}, act(4));
       ValueId e = b.matmulId(h, down, ids, "ffn_out_exps");
       b.result(b.add(moeWeightedSum(b, e, w, "blk.0."), r, "out"));
     },
     {1}, // (its kernel takes one token)
     {"moe_weighted_sum", "moe_weighted_sum_add"}},
    {"moe_weighted_sum_add",
     [](Builder &b, int64_t T) {
       ValueId e = b.weight("experts", {DType::F32, {T, 8, 2048}}, act(1));
       ValueId w = b.weight("weights", {DType::F32, {T, 8}}, WeightInit::uniform(2, 0, 0.25));
       ValueId r = b.weight("residual", {DType::F32, {T, 2048}}, act(3));
       b.result(b.add(moeWeightedSum(b, e, w, "blk.0."), r, "out"));
     },
     {1, 8},
     {"moe_weighted_sum"}},
    {"rope_attention", [](Builder &b, int64_t T) { b.result(denseAttention(b, T)); }},
    {"rope_kv_attention", [](Builder &b, int64_t T) { b.result(denseAttention(b, T)); }, {1}},
    {"gated_gemm",
     [](Builder &b, int64_t T) { // a prefill chunk's gate|up (W-dense), one stacked GEMM, into down
       ValueId down = b.weight("ffn_down", {DType::F16, {4096, 14336}}, mat(4));
       b.result(b.matmul(denseGatedFfn(b, T), down, "ffn_out"));
     },
     kPrefillTokens},
    {"gated_matmul_id_chunk",
     // a prefill chunk's experts (W-moe): the grouped GEMM
     [](Builder &b, int64_t T) { b.result(gatedExperts(b, T)); },
     kPrefillTokens},
    {"glu_convert",
     [](Builder &b, int64_t T) { // a prefill chunk's GLU into the down GEMM's f16 input
       ValueId g = b.weight("gate", {DType::F32, {T, 14336}}, act(1));
       ValueId u = b.weight("up", {DType::F32, {T, 14336}}, act(2));
       ValueId down = b.weight("ffn_down", {DType::F16, {4096, 14336}}, mat(3));
       b.result(b.matmul(b.glu(g, u, GluKind::SwiGLU, 1.702, 7.0, "ffn_act"), down, "ffn_out"));
     },
     kPrefillTokens},
    {"rms_norm_mul_convert",
     [](Builder &b, int64_t T) { // a prefill chunk's norm into the q GEMM's f16 input
       ValueId x = b.weight("x", {DType::F32, {T, 4096}}, act(1));
       ValueId w = b.weight("attn_norm", {DType::F32, {4096}}, norm(2));
       ValueId wq = b.weight("attn_q", {DType::F16, {4096, 4096}}, mat(3));
       b.result(b.matmul(rmsNormMul(b, x, w, 1e-5, kNoValue, "attn_in"), wq, "q"));
     },
     kPrefillTokens,
     {"rms_norm_mul"}},
    {"attention_convert",
     [](Builder &b, int64_t T) { // a prefill chunk's attention into the o GEMM's f16 input
       ValueId y = denseAttention(b, T);
       ValueId wo = b.weight("attn_output", {DType::F16, {4096, 4096}}, mat(9));
       b.result(b.matmul(b.reshape(y, {T, 4096}, "attn_flat"), wo, "attn_out"));
     },
     kPrefillTokens},
};

/// The plan's fusion report (none when the section is missing or unreadable).
std::optional<FusionReport> reportOf(const Plan &plan) {
  const PlanSection *sec = plan.section("fusion");
  if (!sec)
    return std::nullopt;
  auto report = FusionReport::parse(sec->bytes);
  if (!report) {
    llvm::consumeError(report.takeError());
    return std::nullopt;
  }
  return std::move(*report);
}

/// The plan of pattern `p` at T tokens: with only `p` and the patterns it
/// builds on (`after`) enabled (fused), or those without `p` (unfused: with
/// no `after`, fusion off). A fused plan in which `p` applied nowhere is an
/// error that gives the pattern's first refusal.
llvm::Expected<Plan> patternPlan(const Pattern &p, int64_t T, bool fused) {
  Graph g;
  Function &fn = g.addFunction("decode");
  Builder b(fn);
  p.build(b, T);
  if (auto e = b.finish())
    return e;
  CompileOptions co;
  // The patterns' caches hold 2048 rows: the step loop's positions wrap there.
  co.ctx = 2048;
  co.fusion = fused || !p.after.empty();
  co.source = std::string("pattern ") + p.name;
  auto on = [&](llvm::StringRef name) {
    return (fused && name == p.name) || llvm::is_contained(p.after, name.str());
  };
  for (const std::string &name : fusionPatternNames()) {
    if (!on(name))
      co.disableFusion.push_back(name);
    else if (llvm::is_contained(optInFusionPatterns(), name))
      co.enableFusion.push_back(name);
  }
  auto plan = compile(g, co);
  if (!plan)
    return plan.takeError();
  if (fused) {
    std::optional<FusionReport> report = reportOf(*plan);
    if (!report || report->count(p.name) == 0) {
      std::string why;
      if (report)
        for (const FusionReport::Refusal &r : report->refused)
          if (r.pattern == p.name && why.empty())
            why = ": " + r.root + ": " + r.reason;
      return makeError(std::string("pattern ") + p.name + " did not fire on its canonical form" +
                       (why.empty() ? " (no candidate)" : why));
    }
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
    state.SkipWithError(("failed: " + firstLine(llvm::toString(exec.takeError()))).c_str());
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

/// The patterns with no case here (fusionPatternNames() less kPatterns).
std::vector<std::string> patternsWithoutCase() {
  std::vector<std::string> missing;
  for (const std::string &name : fusionPatternNames())
    if (std::none_of(std::begin(kPatterns), std::end(kPatterns),
                     [&](const Pattern &p) { return name == p.name; }))
      missing.push_back(name);
  return missing;
}

int main(int argc, char **argv) {
  // --check-coverage: exit 1 naming every fusion pattern without a case (a
  // ctest runs it, so a new pattern comes with its case).
  for (int i = 1; i < argc; ++i)
    if (std::string_view(argv[i]) == "--check-coverage") {
      std::vector<std::string> missing = patternsWithoutCase();
      for (const std::string &m : missing)
        std::fprintf(stderr, "fg_bench_patterns: fusion pattern '%s' has no case\n", m.c_str());
      std::printf("%zu patterns, %zu without a case\n", fusionPatternNames().size(),
                  missing.size());
      return missing.empty() ? 0 : 1;
    }
  for (const Pattern &p : kPatterns)
    for (int64_t T : p.tokens)
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
