//===- QuantGemvGpuTest.cpp - native quantised GEMVs vs the CPU reference ----===//
//
// Every GEMV form with block-quantised weights read as stored (the GGUF
// decoders of kernels/gemv.cuh: q8_0, q4_0, q4_1, q4_k, q6_k): matmul at
// T = 1, 2, 3, 8, fused.matmul_add (residual and shared bias),
// fused.gated_matmul with biases, matmul_id and fused.gated_matmul_id with
// repeated experts. Shapes are odd on purpose: N odd, K not a multiple of 256
// for the 32-element types. The weights are random valid blocks (random bytes
// with finite f16 scales), which the CPU reference decodes with
// ir/Numeric.cpp; the GPU dequantises in registers to f16 and accumulates in
// f32 with x split hi + lo, so f32 activations meet ≤ 1e-3 (normalised;
// q4_k 2e-3, see tolF32).
// Each case also checks that the plan kept the weight quantised (no f16
// copy: the device weight bytes are the GGUF bytes). Also the two users of
// kernels/dequant.cuh: get_rows of a quantised table, and a prefill-sized
// matmul (16 rows: the weight decoded to f16 in scratch, then cuBLAS in f16,
// so ≤ 1e-2).
//
//===----------------------------------------------------------------------===//
#include "GpuTestUtil.h"

#include "ir/Numeric.h"

#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>

using namespace fg;
using namespace fg::gputest;

namespace {

const DType kQuants[] = {DType::Q8_0, DType::Q4_0, DType::Q4_1, DType::Q4_K, DType::Q6_K};

/// Random valid blocks for `elems` elements of `t`: random bytes, then each
/// f16 scale field set to a finite value of magnitude ~`scale`.
std::vector<uint8_t> randomBlocks(DType t, int64_t elems, uint64_t salt, float scale) {
  const DTypeInfo &qi = dtypeInfo(t);
  int64_t blocks = elems / qi.blockElems;
  std::mt19937_64 rng(baseSeed() * 131 + salt);
  std::vector<uint8_t> bytes(static_cast<size_t>(blocks * qi.blockBytes));
  for (auto &b : bytes)
    b = static_cast<uint8_t>(rng());
  std::uniform_real_distribution<float> u(0.5f, 1.5f);
  auto put = [&](uint8_t *p, float v) {
    uint16_t h = floatToHalf(v);
    std::memcpy(p, &h, 2);
  };
  for (int64_t i = 0; i < blocks; ++i) {
    uint8_t *b = bytes.data() + i * qi.blockBytes;
    switch (t) {
    case DType::Q8_0:
    case DType::Q4_0:
      put(b, scale * u(rng) * ((rng() & 1) ? 1.f : -1.f));
      break;
    case DType::Q4_1:
      put(b, scale * u(rng));
      put(b + 2, -8 * scale * u(rng)); // the min
      break;
    case DType::Q5_0:
      put(b, scale * u(rng) * ((rng() & 1) ? 1.f : -1.f));
      break;
    case DType::Q5_1:
      put(b, scale * u(rng));
      put(b + 2, -16 * scale * u(rng)); // the min
      break;
    case DType::Q4_K:
    case DType::Q5_K:
      put(b, scale * u(rng) / 32);
      put(b + 2, scale * u(rng) / 4);
      break;
    case DType::IQ4_NL:
    case DType::IQ4_XS: // d at 0 (iq4_xs's 6-bit sub-block scales are random bytes)
      put(b, scale * u(rng) / 64);
      break;
    case DType::Q6_K:
      put(b + 208, scale * u(rng) / 64);
      break;
    case DType::Q2_K:
      put(b + 80, scale * u(rng) / 8);
      put(b + 82, scale * u(rng) / 16);
      break;
    case DType::Q3_K:
      put(b + 108, scale * u(rng) / 64);
      break;
    default:
      ADD_FAILURE() << "not a block type";
    }
  }
  return bytes;
}

/// K for `t`: not a multiple of 256 for the 32-element types.
int64_t oddK(DType t, int variant) {
  if (variant == 2) // whole 512-weight groups: the wide q4_0 and q8_0 decoders
    return 1536;
  if (variant == 3) // whole 8-super-block groups: the wide q6_K decoder
    return 4096;
  if (dtypeInfo(t).blockElems == 256)
    return variant ? 1280 : 512;
  return variant ? 4160 : 288;
}

struct QuantCase {
  Graph g;
  std::vector<ExternalWeight> weights;
  Inputs inputs;
  std::vector<std::string> outputs{"y"}; ///< the results compared, in order
};

ValueId quantWeight(Builder &b, QuantCase &c, const std::string &name, DType t,
                    std::vector<int64_t> shape, uint64_t salt) {
  TensorType type(t, llvm::ArrayRef<int64_t>(shape));
  ExternalWeight w;
  w.name = name;
  w.type = type;
  w.bytes = randomBlocks(t, type.numElements(), salt, 0.05f);
  c.weights.push_back(std::move(w));
  return b.weight(name, type);
}

/// Compiles `c` (no fusion: the graph's ops are the kernels), checks that
/// every quantised weight stayed quantised, runs it on the GPU and the CPU
/// reference and compares the result.
/// `pipeline`: the passes ("": the default, with fusion); `fused`: an op the
/// plan must then contain (the fused form under test).
void expectQuantMatches(QuantCase &c, double tol, const char *pipeline = "canonicalize,cse,dce",
                        std::optional<OpKind> fused = std::nullopt) {
  CompileOptions co;
  if (*pipeline)
    co.pipeline = pipeline;
  co.weights = c.weights;
  auto plan = compile(c.g, co);
  ASSERT_TRUE(bool(plan)) << errString(plan.takeError());
  const Function *fn = plan->graph().lookup("main");
  ASSERT_NE(fn, nullptr);
  if (fused) {
    bool found = false;
    for (const Node &node : fn->nodes())
      found |= node.kind == *fused;
    ASSERT_TRUE(found) << "the plan has no " << std::string(opInfo(*fused).mnemonic);
  }
  for (const Argument &a : fn->arguments())
    for (const ExternalWeight &w : c.weights) {
      if (fn->value(a.value).name != w.name)
        continue;
      EXPECT_EQ(fn->value(a.value).type.dtype, w.type.dtype)
          << w.name << " was retyped instead of read natively";
    }
  ExecOptions gpuOpts, cpuOpts;
  gpuOpts.device = ExecOptions::Device::Cuda;
  auto gpu = Executor::create(*plan, gpuOpts);
  ASSERT_TRUE(bool(gpu)) << errString(gpu.takeError());
  auto cpu = Executor::create(*plan, cpuOpts);
  ASSERT_TRUE(bool(cpu)) << errString(cpu.takeError());
  for (const auto &[name, vals] : c.inputs) {
    ASSERT_FALSE(bool(gpu->setInput(name, vals)));
    ASSERT_FALSE(bool(cpu->setInput(name, vals)));
  }
  for (int rep = 0; rep < 2; ++rep) { // the second replay must be bit-identical
    if (auto e = gpu->run("main")) {
      ADD_FAILURE() << "gpu run: " << errString(std::move(e));
      return;
    }
  }
  if (auto e = cpu->run("main")) {
    ADD_FAILURE() << "cpu run: " << errString(std::move(e));
    return;
  }
  for (const std::string &name : c.outputs) {
    auto out = gpu->output(name);
    auto ref = cpu->output(name);
    ASSERT_TRUE(bool(out)) << errString(out.takeError());
    ASSERT_TRUE(bool(ref)) << errString(ref.takeError());
    double err = normalizedError(out->toFloats(), ref->toFloats());
    EXPECT_LE(err, tol) << name << " " << out->type.str();
    // The reference result is not trivially zero (the comparison can fail).
    double norm = 0;
    for (float v : ref->toFloats())
      norm += double(v) * v;
    EXPECT_GT(norm, 0.0) << name;
  }
}

constexpr double kTolF32 = 1e-3; ///< f32 activations (issue 14)
constexpr double kTolF16 = 1e-2; ///< 16-bit activations
/// The DP4A GEMV against the CPU reference: x quantised to int8 costs ~1/254
/// of each x, and on these random-byte q4_K blocks (random 6-bit scales and
/// mins, whose terms cancel) that gave a normalised error of up to 1.12e-2
/// (H200, thirteenth session, call 2): 2e-2, twice the 16-bit bound.
constexpr double kTolDp4a = 2e-2;
/// A GLU of two DP4A GEMVs (silu(gate) · up) carries both products' errors:
/// the rms_norm + gate|up case (130 rows, random seed 1054506092) gave
/// 2.37e-2 in the eighteenth session's call 1, at the defaults and with the
/// rstd deferred alike (the x quantisation, not the form): 1.5 x kTolDp4a.
constexpr double kTolDp4aGlu = 3e-2;

/// The f32-activation bound of type t's GEMV. q4_k misses issue 14's 1e-3 on
/// these random-byte blocks: its scale d·sc and min dmin·m are rounded to f16
/// before one HFMA2 gives d·sc·q − dmin·m, and random 6-bit scales and mins
/// make the two terms cancel (the worst of 30 repeats of the gated case on
/// the H200: 1.2e-3, bench/RESULTS.md, fifth session); the other types'
/// scales are the file's own f16 values (exact), so only the final rounding
/// remains. 2e-3 for q4_k (and q5_k, the same scales; q2_k, a scale and a min
/// from 4-bit values) until the dequantisation
/// keeps the scales in f32.
double tolF32(DType t) {
  return t == DType::Q4_K || t == DType::Q5_K || t == DType::Q2_K ? 2e-3 : kTolF32;
}

/// The GEMV forms every block type is checked in (salts offset by `salt0`, so
/// two tests of one type draw other weights): matmul of M rows (variant 1:
/// N 1001 and the longer K; 2: N 1001, K 1536), fused.gated_matmul (kind 1 with biases),
/// matmul_id / fused.gated_matmul_id with repeated experts, get_rows.
void checkDense(DType t, int variant, int64_t M, double tol, uint64_t salt0 = 0) {
  int64_t K = oddK(t, variant), N = variant ? 1001 : 77;
  SCOPED_TRACE(std::string(dtypeName(t)) + " N " + std::to_string(N) + " K " + std::to_string(K) +
               " T " + std::to_string(M));
  QuantCase c;
  Function &fn = c.g.addFunction("main");
  Builder b(fn);
  auto x = b.weight("x", {DType::F32, {M, K}}, randn(1.0));
  b.result(b.matmul(x, quantWeight(b, c, "w", t, {N, K}, salt0 + 1), "y"));
  ASSERT_FALSE(bool(b.finish()));
  expectQuantMatches(c, tol);
}

/// Builds y = fused.gated_matmul(x [M, K], w_gate, w_up [N, K] of type t,
/// GLU `kind`, with biases [N] if `bias`) into `c`; the weights draw salts
/// `salt` and `salt` + 1.
void buildGated(QuantCase &c, DType t, int kind, int64_t M, int64_t N, int64_t K, bool bias,
                uint64_t salt) {
  Function &fn = c.g.addFunction("main");
  Builder b(fn);
  auto x = b.weight("x", {DType::F32, {M, K}}, randn(1.0));
  std::vector<ValueId> ops{x, quantWeight(b, c, "w_gate", t, {N, K}, salt),
                           quantWeight(b, c, "w_up", t, {N, K}, salt + 1)};
  if (bias) {
    ops.push_back(b.weight("b_gate", {DType::F32, {N}}, randn(0.5)));
    ops.push_back(b.weight("b_up", {DType::F32, {N}}, randn(0.5)));
  }
  b.result(b.create(OpKind::FusedGatedMatmul, ops, {{"kind", Attribute::ofEnum(kind)}}, "y"));
  ASSERT_FALSE(bool(b.finish()));
}

void checkGated(DType t, int kind, int64_t M, double tol, uint64_t salt0 = 0, int kv = 0) {
  SCOPED_TRACE(std::string(dtypeName(t)) + " glu " + std::to_string(kind) + " T " +
               std::to_string(M));
  QuantCase c;
  buildGated(c, t, kind, M, 67, oddK(t, kv), kind == 1, salt0 + 4);
  expectQuantMatches(c, tol);
}

void checkExpert(DType t, bool gated, double tol, uint64_t salt0 = 0, int kv = 0) {
  SCOPED_TRACE(std::string(dtypeName(t)) + (gated ? " gated" : " matmul_id"));
  // The tensor-core decoder under test: an expert-indexed launch of one x
  // row a pair takes DP4A by default (its own tolerance, kTolDp4a, in
  // Q4KDp4aEveryForm).
  ScopedEnv tc("FG_DEBUG_GEMV_DP4A", "0");
  QuantCase c;
  Function &fn = c.g.addFunction("main");
  Builder b(fn);
  int64_t K = oddK(t, kv), N = 45, E = 6, T = 3, k = 4;
  auto x = b.weight("x", {DType::F32, {T, 1, K}}, randn(1.0));
  auto ids = b.input("ids", {DType::I32, {T, k}});
  // Token 0 picks expert 5 twice, token 2 expert 1 three times.
  c.inputs["ids"] = {5, 0, 5, 2, 3, 4, 1, 0, 1, 1, 1, 5};
  if (gated)
    b.result(b.create(OpKind::FusedGatedMatmulId,
                      {x, quantWeight(b, c, "gate_exps", t, {E, N, K}, salt0 + 6),
                       quantWeight(b, c, "up_exps", t, {E, N, K}, salt0 + 7), ids},
                      {}, "y"));
  else
    b.result(b.matmulId(x, quantWeight(b, c, "down_exps", t, {E, N, K}, salt0 + 8), ids, "y"));
  ASSERT_FALSE(bool(b.finish()));
  expectQuantMatches(c, tol);
}

void checkGetRows(DType t, double tol, uint64_t salt0 = 0) {
  SCOPED_TRACE(std::string(dtypeName(t)) + " get_rows");
  QuantCase c;
  Function &fn = c.g.addFunction("main");
  Builder b(fn);
  int64_t K = oddK(t, 0);
  auto ids = b.input("ids", {DType::I32, {5}});
  c.inputs["ids"] = {5, 99, 0, 5, 42}; // a repeated row and the last one
  b.result(b.getRows(quantWeight(b, c, "token_embd", t, {100, K}, salt0 + 9), ids, "y"));
  ASSERT_FALSE(bool(b.finish()));
  expectQuantMatches(c, tol);
}

TEST(GpuQuantGemv, DenseEveryTypeAndTokenCount) {
  FG_REQUIRE_GPU();
  for (DType t : kQuants)
    for (int variant : {0, 1})
      for (int64_t M : {1, 2, 3, 8})
        checkDense(t, variant, M, tolF32(t));
}

TEST(GpuQuantGemv, HalfActivations) {
  FG_REQUIRE_GPU();
  for (DType t : kQuants) {
    SCOPED_TRACE(dtypeName(t));
    QuantCase c;
    Function &fn = c.g.addFunction("main");
    Builder b(fn);
    int64_t K = oddK(t, 0);
    auto x = b.weight("x", {DType::F16, {2, K}}, randn(1.0));
    b.result(b.matmul(x, quantWeight(b, c, "w", t, {45, K}, 2), "y"));
    ASSERT_FALSE(bool(b.finish()));
    expectQuantMatches(c, kTolF16);
  }
}

TEST(GpuQuantGemv, MatmulAddResidualAndBias) {
  FG_REQUIRE_GPU();
  for (DType t : kQuants)
    for (bool residual : {true, false}) {
      SCOPED_TRACE(std::string(dtypeName(t)) + (residual ? " residual" : " bias"));
      QuantCase c;
      Function &fn = c.g.addFunction("main");
      Builder b(fn);
      int64_t K = oddK(t, 0), N = 77, M = residual ? 3 : 1;
      auto x = b.weight("x", {DType::F32, {M, K}}, randn(1.0));
      auto r = residual ? b.weight("r", {DType::F32, {M, N}}, randn(1.0))
                        : b.weight("bias", {DType::F32, {N}}, randn(1.0));
      b.result(
          b.create(OpKind::FusedMatmulAdd, {x, quantWeight(b, c, "w", t, {N, K}, 3), r}, {}, "y"));
      ASSERT_FALSE(bool(b.finish()));
      expectQuantMatches(c, tolF32(t));
    }
}

TEST(GpuQuantGemv, GatedWithBiasEveryGlu) {
  FG_REQUIRE_GPU();
  for (DType t : kQuants)
    for (int kind : {0, 1})
      for (int64_t M : {1, 8})
        checkGated(t, kind, M, tolF32(t));
}

TEST(GpuQuantGemv, ExpertIndexedWithRepeatedExperts) {
  FG_REQUIRE_GPU();
  for (DType t : kQuants)
    for (bool gated : {false, true})
      checkExpert(t, gated, tolF32(t));
}

TEST(GpuQuantGemv, GetRowsDequantises) {
  FG_REQUIRE_GPU();
  for (DType t : kQuants)
    checkGetRows(t, tolF32(t));
}

TEST(GpuQuantGemv, PrefillMatmulThroughCublas) {
  FG_REQUIRE_GPU();
  for (DType t : kQuants) {
    SCOPED_TRACE(dtypeName(t));
    QuantCase c;
    Function &fn = c.g.addFunction("main");
    Builder b(fn);
    int64_t K = oddK(t, 1), N = 333;
    auto x = b.weight("x", {DType::F32, {16, K}}, randn(1.0));
    b.result(b.matmul(x, quantWeight(b, c, "w", t, {N, K}, 10), "y"));
    ASSERT_FALSE(bool(b.finish()));
    expectQuantMatches(c, kTolF16);
  }
}

/// The grouped expert GEMM over block-quantised experts (the default; forced
/// on here so that FG_DEBUG_GROUPED_QUANT=0 in the environment cannot skip
/// it): 40 tokens × 4 slots over 9 experts, where
/// expert 8 gets no pair, expert 0 one and expert 1 most (more than one
/// 32-row tile) (no out-of-range id: the CPU reference refuses one); one
/// stream and gate|up + GLU,
/// against the CPU reference.
TEST(GpuQuantGemv, GroupedExpertGemmQuantised) {
  FG_REQUIRE_GPU();
  ScopedEnv on("FG_DEBUG_GROUPED_QUANT", "1");
  // Both forms: the f16 one (the weights' blocks decoded to f16, x rounded
  // to f16) at the float GEMV's tolerance, and the default, which takes
  // q4_K / q5_K / q8_0 / q4_0 to integer tensor cores with x quantised to
  // int8 per 32 (moe_i8.cuh) — the DP4A GEMV's x quantisation, so its
  // tolerance (q4_K at 5.5e-3 and, gated, 9.2e-3 on the first H100 run).
  for (const char *form : {"0", "1"})
    for (DType t : kQuants)
      for (bool gated : {false, true}) {
        ScopedEnv int8("FG_DEBUG_MOE_INT8", form);
        SCOPED_TRACE(std::string(dtypeName(t)) + (gated ? " gated" : " matmul_id") +
                     (*form == '1' ? ", int8 form" : ", f16 form"));
        QuantCase c;
        Function &fn = c.g.addFunction("main");
        Builder b(fn);
        const int64_t K = dtypeInfo(t).blockElems == 256 ? 512 : 288, N = 100, E = 9, T = 40, k = 4;
        auto x = b.weight("x", {DType::F32, {T, 1, K}}, randn(1.0));
        auto ids = b.input("ids", {DType::I32, {T, k}});
        std::vector<int32_t> v;
        for (int64_t i = 0; i < T * k; ++i)
          v.push_back(i == 0 ? 0 : i % 3 == 0 ? 1 : static_cast<int32_t>(2 + i % 6));
        c.inputs["ids"] = v;
        if (gated)
          b.result(b.create(OpKind::FusedGatedMatmulId,
                            {x, quantWeight(b, c, "gate_exps", t, {E, N, K}, 61),
                             quantWeight(b, c, "up_exps", t, {E, N, K}, 62), ids},
                            {}, "y"));
        else
          b.result(b.matmulId(x, quantWeight(b, c, "down_exps", t, {E, N, K}, 63), ids, "y"));
        ASSERT_FALSE(bool(b.finish()));
        expectQuantMatches(c, *form == '1' ? (gated ? kTolDp4aGlu : kTolDp4a) : tolF32(t));
      }
}

/// x of one row as an external f32 weight (so the test knows its values).
ValueId hostX(Builder &b, QuantCase &c, const std::string &name, const std::vector<float> &x) {
  TensorType type(DType::F32, llvm::ArrayRef<int64_t>{1, static_cast<int64_t>(x.size())});
  ExternalWeight w;
  w.name = name;
  w.type = type;
  w.bytes.resize(x.size() * 4);
  std::memcpy(w.bytes.data(), x.data(), w.bytes.size());
  c.weights.push_back(std::move(w));
  return b.weight(name, type);
}

} // namespace

/// Every compared result of `c` (its inputs set; "y" by default), in order,
/// from `plan` run with `eo`.
std::vector<float> runPlan(const Plan &plan, const QuantCase &c, const ExecOptions &eo) {
  auto ex = Executor::create(plan, eo);
  if (!ex) {
    ADD_FAILURE() << errString(ex.takeError());
    return {};
  }
  for (const auto &[name, vals] : c.inputs)
    if (auto e = ex->setInput(name, vals)) {
      ADD_FAILURE() << errString(std::move(e));
      return {};
    }
  if (auto e = ex->run("main")) {
    ADD_FAILURE() << errString(std::move(e));
    return {};
  }
  std::vector<float> all;
  for (const std::string &name : c.outputs) {
    auto out = ex->output(name);
    if (!out) {
      ADD_FAILURE() << errString(out.takeError());
      return {};
    }
    std::vector<float> v = out->toFloats();
    all.insert(all.end(), v.begin(), v.end());
  }
  return all;
}

llvm::Expected<Plan> compileCase(const QuantCase &c, const char *pipeline) {
  CompileOptions co;
  if (*pipeline)
    co.pipeline = pipeline;
  co.weights = c.weights;
  return compile(c.g, co);
}

/// The GPU result "y" of `c` (its inputs set) compiled with `pipeline` (""
/// the default).
std::vector<float> gpuResult(const QuantCase &c, const char *pipeline) {
  auto plan = compileCase(c, pipeline);
  if (!plan) {
    ADD_FAILURE() << errString(plan.takeError());
    return {};
  }
  ExecOptions go;
  go.device = ExecOptions::Device::Cuda;
  return runPlan(*plan, c, go);
}

/// The CPU reference that quantises x as the plan's DP4A launches do
/// (ExecOptions::cpuActQuant) against the GPU: issue 14's 1e-5 — the int8
/// dots are exact, so only f32 rounding and the rstd's last bits differ.
constexpr double kTolInt8Reference = 1e-5;

/// `c`'s GPU result against that reference (one plan for both).
void expectInt8Reference(const QuantCase &c, const char *pipeline) {
  auto plan = compileCase(c, pipeline);
  ASSERT_TRUE(bool(plan)) << errString(plan.takeError());
  ExecOptions go, co;
  go.device = ExecOptions::Device::Cuda;
  co.cpuActQuant = true;
  const std::vector<float> gpu = runPlan(*plan, c, go), cpu = runPlan(*plan, c, co);
  ASSERT_FALSE(cpu.empty());
  EXPECT_LE(normalizedError(gpu, cpu), kTolInt8Reference)
      << "against the reference with x quantised as the DP4A launches do";
}

/// `c` under FG_DEBUG_GEMV_DP4A=2 against the CPU reference (kTolDp4a), the
/// same bits with x quantised by every row group and the K-warps' sums
/// combined every tile (FG_DEBUG_DP4A_SHARE_X=0, FG_DEBUG_DP4A_COMBINE=1: the
/// form before the defaults of x shared a block and sums every 4 tiles) and
/// two tiles asked of L2 ahead (FG_DEBUG_DP4A_L2_AHEAD=2), the same bits
/// through the staged ring (FG_DEBUG_DP4A_STAGES=4, q4_K) and with 2 and 3
/// tiles in registers ahead (FG_DEBUG_DP4A_AHEAD) and with the biases and
/// addends loaded early (FG_DEBUG_GEMV_EARLY_EXTRAS=1); for the norm prologue
/// (its rstd deferred to the stores by default), the rstd applied before x is
/// quantised (FG_DEBUG_DP4A_NORM_DEFERRED=0) against the CPU reference and to
/// the same bits across x's sharing and the combine; and proof that the DP4A kernel ran: the
/// tensor-core GEMV (=0) gives other bits.
void expectDp4aForm(QuantCase &c, const char *pipeline = "canonicalize,cse,dce",
                    std::optional<OpKind> fused = std::nullopt, double tol = kTolDp4a) {
  ScopedEnv on("FG_DEBUG_GEMV_DP4A", "2"); // every size
  expectQuantMatches(c, tol, pipeline, fused);
  expectInt8Reference(c, pipeline);
  const std::vector<float> dp4a = gpuResult(c, pipeline);
  {
    // x quantised by every row group, the K-warps' sums combined every
    // tile, two tiles asked of L2 ahead: the same bits.
    ScopedEnv share("FG_DEBUG_DP4A_SHARE_X", "0");
    ScopedEnv combine("FG_DEBUG_DP4A_COMBINE", "1");
    ScopedEnv ahead("FG_DEBUG_DP4A_L2_AHEAD", "2");
    EXPECT_EQ(gpuResult(c, pipeline), dp4a)
        << "x quantised by every row group, sums combined every tile, L2 ahead 2 "
           "(FG_DEBUG_DP4A_SHARE_X=0, FG_DEBUG_DP4A_COMBINE=1, FG_DEBUG_DP4A_L2_AHEAD=2)";
  }
  {
    // q4_K's weights through a ring of 4 stages in shared memory (the other
    // types have no staged form: the same kernel).
    ScopedEnv stages("FG_DEBUG_DP4A_STAGES", "4");
    EXPECT_EQ(gpuResult(c, pipeline), dp4a) << "FG_DEBUG_DP4A_STAGES=4";
  }
  {
    // Each row's bias and addend loaded when its tile starts: the same bits.
    ScopedEnv early("FG_DEBUG_GEMV_EARLY_EXTRAS", "1");
    EXPECT_EQ(gpuResult(c, pipeline), dp4a) << "FG_DEBUG_GEMV_EARLY_EXTRAS=1";
    ScopedEnv combine("FG_DEBUG_DP4A_COMBINE", "1");
    EXPECT_EQ(gpuResult(c, pipeline), dp4a)
        << "FG_DEBUG_GEMV_EARLY_EXTRAS=1 FG_DEBUG_DP4A_COMBINE=1";
  }
  for (const char *ahead : {"1", "2", "3"}) {
    // One, two and three tiles held in registers ahead of the arithmetic.
    ScopedEnv env("FG_DEBUG_DP4A_AHEAD", ahead);
    EXPECT_EQ(gpuResult(c, pipeline), dp4a) << "FG_DEBUG_DP4A_AHEAD=" << ahead;
  }
  {
    // q6_K's rows loaded lane by lane (DecQ6_KW), not by whole warps: the
    // same bits (the other types: the same kernel).
    ScopedEnv lanes("FG_DEBUG_DP4A_Q6K_WARP", "0");
    EXPECT_EQ(gpuResult(c, pipeline), dp4a) << "FG_DEBUG_DP4A_Q6K_WARP=0";
  }
  {
    // q4_K, q8_0 and q4_0 rows loaded lane by lane (dense launches read by
    // whole warps by default, Dp4aWarpOf), and expert-indexed ones by whole
    // warps and lane by lane (by default q8_0's by whole warps, the others'
    // lane by lane): the same bits.
    {
      ScopedEnv lanes("FG_DEBUG_DP4A_WARP_LOAD", "0");
      EXPECT_EQ(gpuResult(c, pipeline), dp4a) << "FG_DEBUG_DP4A_WARP_LOAD=0";
    }
    {
      ScopedEnv warps("FG_DEBUG_DP4A_WARP_LOAD_EXPERTS", "1");
      EXPECT_EQ(gpuResult(c, pipeline), dp4a) << "FG_DEBUG_DP4A_WARP_LOAD_EXPERTS=1";
    }
    ScopedEnv expertLanes("FG_DEBUG_DP4A_WARP_LOAD_EXPERTS", "0");
    EXPECT_EQ(gpuResult(c, pipeline), dp4a) << "FG_DEBUG_DP4A_WARP_LOAD_EXPERTS=0";
  }
  if (fused == OpKind::FusedRmsNormMatmul || fused == OpKind::FusedRmsNormGatedMatmul ||
      fused == OpKind::FusedRmsNormMatmulMulti) {
    // The defaults defer the norm prologue's rstd to the stores (checked to
    // the same bits across x's sharing and the combine above: its sum of
    // squares in one order). The form that applies it before x is quantised
    // (FG_DEBUG_DP4A_NORM_DEFERRED=0): against the CPU reference, and the
    // same bits with x quantised by every row group and sums combined every tile.
    ScopedEnv deferred("FG_DEBUG_DP4A_NORM_DEFERRED", "0");
    expectQuantMatches(c, tol, pipeline, fused);
    const std::vector<float> d = gpuResult(c, pipeline);
    ScopedEnv share("FG_DEBUG_DP4A_SHARE_X", "0");
    ScopedEnv combine("FG_DEBUG_DP4A_COMBINE", "1");
    EXPECT_EQ(gpuResult(c, pipeline), d)
        << "FG_DEBUG_DP4A_NORM_DEFERRED=0 with FG_DEBUG_DP4A_SHARE_X=0, FG_DEBUG_DP4A_COMBINE=1";
  }
  std::vector<float> tc;
  {
    ScopedEnv off("FG_DEBUG_GEMV_DP4A", "0");
    tc = gpuResult(c, pipeline);
  }
  ASSERT_EQ(dp4a.size(), tc.size());
  EXPECT_NE(dp4a, tc) << "the same bits as the tensor-core GEMV: DP4A did not run";
}

/// The GEMV at T = 1 on DP4A (kernels/gemv_dp4a.cuh, FG_DEBUG_GEMV_DP4A=2),
/// q4_K, q8_0, q4_0 and q6_K (K whole 2048-weight groups): against the CPU
/// reference that quantises x as it does (cpuActQuant; the 1e-5;
/// tests/unit/reference/ActQuantTest.cpp ties that reference to the formula
/// of gemv_dp4a.cuh's header) and against the exact one (kTolDp4a), at the defaults (x quantised
/// once a block, the K-warps' sums combined every 4 tiles) and to the same bits with x quantised by
/// every row group (FG_DEBUG_DP4A_SHARE_X=0) and with the sums combined every 3 tiles (with 3 tiles
/// asked of L2 ahead) and every tile (FG_DEBUG_DP4A_COMBINE=3 FG_DEBUG_DP4A_L2_AHEAD=3, COMBINE=1).
/// K from one super-block to 21 (one K-warp with idle lanes, two, three with idle lanes), N not a
/// multiple of the rows a tile; N 4103 and 4500 give more tiles than the grid's 264 blocks (two
/// K-warps, and one), so blocks walk several tiles (the pipelined loads and
/// both shared-memory buffers).
TEST(GpuQuantGemv, Q4KDp4aExactAndAgainstTheReference) {
  FG_REQUIRE_GPU();
  ScopedEnv on("FG_DEBUG_GEMV_DP4A", "2"); // every size
  struct Shape {
    DType t;
    int64_t N, K;
  };
  // q8_0 as q4_K (256-weight k-steps); q4_0 by 512-weight k-steps: one
  // K-warp up to K 4096, two at 4608 (idle lanes), three at 12288 (two row
  // groups: each quantises two pairs of runs when x is shared), 264+ tiles
  // at N 4500; q6_K rows of whole 2048-weight groups.
  const Shape shapes[] = {
      {DType::Q4_K, 77, 256},    {DType::Q4_K, 1001, 1280}, {DType::Q4_K, 333, 4096},
      {DType::Q4_K, 45, 5376},   {DType::Q4_K, 4103, 4096}, {DType::Q4_K, 4500, 1280},
      {DType::Q8_0, 77, 256},    {DType::Q8_0, 1001, 5376}, {DType::Q8_0, 4500, 1280},
      {DType::Q8_0, 1801, 5376}, {DType::Q4_0, 77, 512},    {DType::Q4_0, 333, 4608},
      {DType::Q4_0, 4500, 1024}, {DType::Q4_0, 333, 12288}, {DType::Q6_K, 77, 2048},
      {DType::Q6_K, 1001, 6144}, {DType::Q6_K, 4500, 2048}, {DType::Q6_K, 333, 14336}};
  uint64_t salt = 70;
  for (auto [t, N, K] : shapes) {
    SCOPED_TRACE(std::string(dtypeName(t)) + " N " + std::to_string(N) + " K " + std::to_string(K));
    QuantCase c;
    Function &fn = c.g.addFunction("main");
    Builder b(fn);
    std::mt19937_64 rng(baseSeed() * 977 + salt);
    std::normal_distribution<float> nd(0.0f, 1.0f);
    std::vector<float> xs(K);
    for (float &v : xs)
      v = nd(rng);
    for (int i = 32; i < 64; ++i) // one block of x all zeros (dx = 0)
      xs[i] = 0.0f;
    auto x = hostX(b, c, "x", xs);
    auto w = quantWeight(b, c, "w", t, {N, K}, salt++);
    b.result(b.matmul(x, w, "y"));
    ASSERT_FALSE(bool(b.finish()));
    expectQuantMatches(c, kTolDp4a);
    expectInt8Reference(c, "canonicalize,cse,dce");
    std::vector<float> got = gpuResult(c, "canonicalize,cse,dce");
    {
      ScopedEnv share("FG_DEBUG_DP4A_SHARE_X",
                      "0"); // x quantised by every row group: the same bits
      EXPECT_EQ(gpuResult(c, "canonicalize,cse,dce"), got) << "FG_DEBUG_DP4A_SHARE_X=0";
    }
    {
      ScopedEnv combine("FG_DEBUG_DP4A_COMBINE", "1"); // one combine a tile
      EXPECT_EQ(gpuResult(c, "canonicalize,cse,dce"), got) << "FG_DEBUG_DP4A_COMBINE=1";
    }
    // The K-warps' sums combined every 3 tiles: every block here ends its
    // one combine early except at q8_0 N 1801 K 5376 (3 K-warps, 901 tiles
    // of 2 rows over 264 blocks: blocks 0-108 fill a combine, reset and
    // flush a partial one).
    // With 3 tiles asked of L2 ahead (a hint: past the last tile it asks
    // nothing).
    ScopedEnv combine("FG_DEBUG_DP4A_COMBINE", "3");
    {
      ScopedEnv ahead("FG_DEBUG_DP4A_L2_AHEAD", "3");
      EXPECT_EQ(gpuResult(c, "canonicalize,cse,dce"), got)
          << "FG_DEBUG_DP4A_COMBINE=3 FG_DEBUG_DP4A_L2_AHEAD=3";
    }
    // q6_K's rows loaded lane by lane (DecQ6_KW, FG_DEBUG_DP4A_Q6K_WARP=0),
    // not by whole warps: the same bits.
    if (t == DType::Q6_K) {
      ScopedEnv lanes("FG_DEBUG_DP4A_Q6K_WARP", "0");
      EXPECT_EQ(gpuResult(c, "canonicalize,cse,dce"), got) << "FG_DEBUG_DP4A_Q6K_WARP=0";
    } else {
      // q4_K, q8_0 and q4_0 rows loaded lane by lane, not by whole warps
      // (Dp4aWarpOf, the dense default; K-warps that end inside their span
      // at K 256, 1280, 4608, 5376): the same bits.
      ScopedEnv lanes("FG_DEBUG_DP4A_WARP_LOAD", "0");
      EXPECT_EQ(gpuResult(c, "canonicalize,cse,dce"), got) << "FG_DEBUG_DP4A_WARP_LOAD=0";
      ScopedEnv combine("FG_DEBUG_DP4A_COMBINE", "1");
      EXPECT_EQ(gpuResult(c, "canonicalize,cse,dce"), got)
          << "FG_DEBUG_DP4A_WARP_LOAD=0 FG_DEBUG_DP4A_COMBINE=1";
    }
    // q4_K read lane by lane through a ring of 3 stages in shared memory
    // (N 4103 and 4500: blocks of several tiles, so stages are reused; read
    // by whole warps, the dense default, it takes no ring).
    ScopedEnv lanes("FG_DEBUG_DP4A_WARP_LOAD", "0");
    ScopedEnv stages("FG_DEBUG_DP4A_STAGES", "3");
    EXPECT_EQ(gpuResult(c, "canonicalize,cse,dce"), got)
        << "FG_DEBUG_DP4A_COMBINE=3 FG_DEBUG_DP4A_STAGES=3 FG_DEBUG_DP4A_WARP_LOAD=0";
  }
}

/// The DP4A GEMV's other forms at T = 1, each against the CPU reference and
/// shown to have run on DP4A (expectDp4aForm): q4_K gate|up + GLU with
/// biases (both GLUs; N 1101 at K 4096: 4 rows a tile, 276 tiles, more than
/// the grid), q8_0, q4_0 and q6_K gate|up and matmul_add with a residual,
/// expert-indexed (one stream with an x row per pair, gate|up with biases;
/// all four types, repeated experts), q4_K matmul_add with a bias, f16 x, the rms_norm prologue
/// (one stream and gate|up, through the fusion pass), and q, k and v merged
/// (fused.matmul_multi and fused.rms_norm_matmul_multi, every type).
TEST(GpuQuantGemv, Q4KDp4aEveryForm) {
  FG_REQUIRE_GPU();
  for (int kind : {0, 1}) {
    SCOPED_TRACE("glu " + std::to_string(kind));
    QuantCase c;
    buildGated(c, DType::Q4_K, kind, 1, 1101, 4096, true, 80 + 2 * kind);
    expectDp4aForm(c);
  }
  {
    SCOPED_TRACE("matmul_add");
    QuantCase c;
    Function &fn = c.g.addFunction("main");
    Builder b(fn);
    auto x = b.weight("x", {DType::F32, {1, 4096}}, randn(1.0));
    auto bias = b.weight("bias", {DType::F32, {301}}, randn(1.0));
    b.result(b.create(OpKind::FusedMatmulAdd,
                      {x, quantWeight(b, c, "w", DType::Q4_K, {301, 4096}, 84), bias}, {}, "y"));
    ASSERT_FALSE(bool(b.finish()));
    expectDp4aForm(c);
  }
  for (DType t : {DType::Q8_0, DType::Q4_0, DType::Q6_K}) {
    SCOPED_TRACE(std::string(dtypeName(t)) + " gate|up + matmul_add");
    const int64_t N = 203, K = 2048;
    QuantCase c;
    buildGated(c, t, 0, 1, N, K, true, 90);
    expectDp4aForm(c);
    QuantCase c2;
    Function &fn2 = c2.g.addFunction("main");
    Builder b2(fn2);
    auto x2 = b2.weight("x", {DType::F32, {1, K}}, randn(1.0));
    b2.result(b2.create(OpKind::FusedMatmulAdd,
                        {x2, quantWeight(b2, c2, "w", t, {N, K}, 92),
                         b2.weight("r", {DType::F32, {1, N}}, randn(1.0))},
                        {}, "y"));
    ASSERT_FALSE(bool(b2.finish()));
    expectDp4aForm(c2);
  }
  // Expert-indexed: token 0 picks expert 5 twice, token 2 expert 1 three
  // times. gate|up with per-expert biases and one x row a token; the one
  // stream as down runs, with one x row a (token, slot) pair (x [T, k, K]);
  // q4_K at K 4096 (two K-warps).
  for (DType t : {DType::Q4_K, DType::Q8_0, DType::Q4_0, DType::Q6_K})
    for (bool gated : {false, true}) {
      SCOPED_TRACE(std::string(dtypeName(t)) + (gated ? " gated_matmul_id" : " matmul_id"));
      QuantCase c;
      Function &fn = c.g.addFunction("main");
      Builder b(fn);
      const int64_t K = t == DType::Q4_K   ? 4096
                        : t == DType::Q6_K ? 2048
                                           : 1024,
                    N = 301, E = 6, T = 3, k = 4;
      auto ids = b.input("ids", {DType::I32, {T, k}});
      c.inputs["ids"] = {5, 0, 5, 2, 3, 4, 1, 0, 1, 1, 1, 5};
      if (gated) {
        auto x = b.weight("x", {DType::F32, {T, 1, K}}, randn(1.0));
        b.result(b.create(OpKind::FusedGatedMatmulId,
                          {x, quantWeight(b, c, "gate_exps", t, {E, N, K}, 93),
                           quantWeight(b, c, "up_exps", t, {E, N, K}, 94), ids,
                           b.weight("b_gate", {DType::F32, {E, N}}, randn(0.5)),
                           b.weight("b_up", {DType::F32, {E, N}}, randn(0.5))},
                          {}, "y"));
      } else {
        auto x = b.weight("x", {DType::F32, {T, k, K}}, randn(1.0));
        b.result(b.matmulId(x, quantWeight(b, c, "down_exps", t, {E, N, K}, 95), ids, "y"));
      }
      ASSERT_FALSE(bool(b.finish()));
      expectDp4aForm(c);
    }
  {
    SCOPED_TRACE("f16 x");
    QuantCase c;
    Function &fn = c.g.addFunction("main");
    Builder b(fn);
    auto x = b.weight("x", {DType::F16, {1, 1280}}, randn(1.0));
    b.result(b.matmul(x, quantWeight(b, c, "w", DType::Q4_K, {99, 1280}, 85), "y"));
    ASSERT_FALSE(bool(b.finish()));
    expectDp4aForm(c);
  }
  for (bool gated : {false, true}) {
    SCOPED_TRACE(gated ? "rms_norm + gate|up" : "rms_norm + matmul");
    QuantCase c;
    Function &fn = c.g.addFunction("main");
    Builder b(fn);
    const int64_t K = 2048 + 512;
    auto h = b.weight("h", {DType::F32, {1, K}}, randn(3.0));
    auto g = b.weight("norm", {DType::F32, {K}}, randn(1.0, 1.0));
    auto n = b.mul(b.rmsNorm(h, 1e-5), g);
    if (gated)
      b.result(b.glu(b.matmul(n, quantWeight(b, c, "wg", DType::Q4_K, {130, K}, 86)),
                     b.matmul(n, quantWeight(b, c, "wu", DType::Q4_K, {130, K}, 87)),
                     GluKind::SwiGLU, 1.702, 7.0, "y"));
    else
      b.result(b.matmul(n, quantWeight(b, c, "w", DType::Q4_K, {130, K}, 88), "y"));
    ASSERT_FALSE(bool(b.finish()));
    expectDp4aForm(c, "", gated ? OpKind::FusedRmsNormGatedMatmul : OpKind::FusedRmsNormMatmul,
                   gated ? kTolDp4aGlu : kTolDp4a);
  }
  // q, k and v in one launch (fused.matmul_multi, and with the norm
  // prologue fused.rms_norm_matmul_multi): segments of 1000 / 4500 rows (not
  // whole tiles; 4500 gives blocks several tiles, across the segments'
  // borders), 136 and 133, three segments and two, each result checked.
  struct Multi {
    DType t;
    int64_t K, N0;
    bool norm;
    int segs;
  };
  const Multi multis[] = {{DType::Q4_K, 4096, 1000, true, 3},
                          {DType::Q4_K, 1280, 4500, false, 3},
                          {DType::Q8_0, 1280, 1000, true, 2},
                          {DType::Q4_0, 4608, 4500, true, 3},
                          {DType::Q6_K, 2048, 1000, false, 3}};
  uint64_t salt = 120;
  for (const Multi &m : multis) {
    SCOPED_TRACE(std::string(dtypeName(m.t)) +
                 (m.norm ? " rms_norm_matmul_multi" : " matmul_multi") + " K " +
                 std::to_string(m.K) + " N0 " + std::to_string(m.N0) + " segments " +
                 std::to_string(m.segs));
    QuantCase c;
    Function &fn = c.g.addFunction("main");
    Builder b(fn);
    const int64_t rows[] = {m.N0, 136, 133};
    std::vector<ValueId> ops{b.weight("h", {DType::F32, {1, m.K}}, randn(3.0))};
    if (m.norm)
      ops.push_back(b.weight("norm", {DType::F32, {m.K}}, randn(1.0, 1.0)));
    for (int s = 0; s < m.segs; ++s)
      ops.push_back(quantWeight(b, c, "w" + std::to_string(s), m.t, {rows[s], m.K}, salt++));
    ValueId y0 = m.norm ? b.create(OpKind::FusedRmsNormMatmulMulti, ops,
                                   {{"eps", Attribute::ofFloat(1e-5)}}, "y")
                        : b.create(OpKind::FusedMatmulMulti, ops, {}, "y");
    const Node &node = fn.node(fn.value(y0).def);
    c.outputs.clear();
    for (ValueId r : node.results) {
      b.result(r);
      c.outputs.push_back(fn.value(r).name);
    }
    ASSERT_EQ(c.outputs.size(), static_cast<size_t>(m.segs));
    ASSERT_FALSE(bool(b.finish()));
    expectDp4aForm(c, "canonicalize,cse,dce",
                   m.norm ? OpKind::FusedRmsNormMatmulMulti : OpKind::FusedMatmulMulti);
  }
}

/// The opt-in q4_K form with the scales applied in f32 after the mma
/// (DecQ4_KS, FG_DEBUG_GEMV_WIDE_SCALED=1) in every GEMV form: dense at
/// T = 1, 2, 3, 8 on two K, gated with biases, expert-indexed with repeated
/// experts. Its scale and min are never rounded to f16, so it is held to the
/// issue's 1e-3 (x enters the mma as one f16: ~1e-4 of it).
TEST(GpuQuantGemv, Q4KScaledAfterTheMmaEveryForm) {
  FG_REQUIRE_GPU();
  ScopedEnv scaled("FG_DEBUG_GEMV_WIDE_SCALED", "1");
  const DType t = DType::Q4_K;
  for (int variant : {0, 1})
    for (int64_t M : {1, 2, 3, 8})
      checkDense(t, variant, M, kTolF32, 10);
  for (int64_t M : {1, 8})
    checkGated(t, 1, M, kTolF32, 10);
  for (bool gated : {false, true})
    checkExpert(t, gated, kTolF32, 10);
}

/// q4_0 and q8_0 read wide (DecQ4_0W, DecQ8_0W: K a multiple of 512 / 256,
/// rows 16-byte aligned; the other tests' K of 288 and 4160 take the narrow
/// decoders): dense at T = 1, 2, 3, 8 (T = 2 also with x as hi + lo), gated
/// with biases, expert-indexed (one stream and two) with repeated experts;
/// the bounds of tolF32.
TEST(GpuQuantGemv, Q4_0AndQ8_0WideEveryForm) {
  FG_REQUIRE_GPU();
  for (DType t : {DType::Q4_0, DType::Q8_0}) {
    for (int64_t M : {1, 2, 3, 8})
      checkDense(t, 2, M, kTolF32, 30);
    for (int64_t M : {1, 8})
      checkGated(t, 1, M, kTolF32, 30, 2);
    for (bool gated : {false, true})
      checkExpert(t, gated, kTolF32, 30, 2);
    ScopedEnv split("FG_DEBUG_GEMV_X_HALF", "0");
    checkDense(t, 2, 2, kTolF32, 40);
  }
}

/// q6_K through the wide loop (DecQ6_KW, the default since this passed; K 4096:
/// super-blocks at every offset within 16 bytes): dense at T = 1, 2, 3, 8,
/// gated with biases, expert-indexed (one stream and two).
TEST(GpuQuantGemv, Q6_KWideEveryForm) {
  FG_REQUIRE_GPU();
  ScopedEnv on("FG_DEBUG_GEMV_WIDE_Q6K", "1");
  for (int64_t M : {1, 2, 3, 8})
    checkDense(DType::Q6_K, 3, M, kTolF32, 60);
  for (int64_t M : {1, 8})
    checkGated(DType::Q6_K, 1, M, kTolF32, 60, 3);
  for (bool gated : {false, true})
    checkExpert(DType::Q6_K, gated, kTolF32, 60, 3);
}

/// q6_K's narrow loop (DecQ6_K: rows with K % 2048 != 0 take it) in the forms
/// of the test above.
TEST(GpuQuantGemv, Q6_KNarrowEveryForm) {
  FG_REQUIRE_GPU();
  ScopedEnv off("FG_DEBUG_GEMV_WIDE_Q6K", "0");
  for (int64_t M : {1, 2, 3, 8})
    checkDense(DType::Q6_K, 3, M, kTolF32, 60);
  checkGated(DType::Q6_K, 1, 8, kTolF32, 60, 3);
  for (bool gated : {false, true})
    checkExpert(DType::Q6_K, gated, kTolF32, 60, 3);
}

/// iq4_nl through the wide loop (DecIQ4_NLW, the default since this passed):
/// the forms of the test above.
TEST(GpuQuantGemv, IQ4_NLWideEveryForm) {
  FG_REQUIRE_GPU();
  ScopedEnv on("FG_DEBUG_GEMV_WIDE_IQ4NL", "1");
  for (int64_t M : {1, 2, 3, 8})
    checkDense(DType::IQ4_NL, 2, M, kTolF32, 50);
  for (int64_t M : {1, 8})
    checkGated(DType::IQ4_NL, 1, M, kTolF32, 50, 2);
  for (bool gated : {false, true})
    checkExpert(DType::IQ4_NL, gated, kTolF32, 50, 2);
}

/// q5_0, q5_1, q5_k, q2_k, q3_k, iq4_nl, iq4_xs (decoders written without a GPU at hand,
/// opt-in until this passed on the H200 in the sixth session): dense at T = 1, 2, 3,
/// 8 on two K, gated with biases, expert-indexed with repeated experts,
/// get_rows; the bounds of tolF32.
TEST(GpuQuantGemv, NewTypesEveryForm) {
  FG_REQUIRE_GPU();
  // iq4_nl's narrow loop (K % 512 != 0 takes it; IQ4_NLWideEveryForm checks the wide one).
  ScopedEnv narrow("FG_DEBUG_GEMV_WIDE_IQ4NL", "0");
  for (DType t : {DType::Q5_0, DType::Q5_1, DType::Q5_K, DType::Q2_K, DType::Q3_K, DType::IQ4_NL,
                  DType::IQ4_XS}) {
    for (int variant : {0, 1})
      for (int64_t M : {1, 2, 3, 8})
        checkDense(t, variant, M, tolF32(t), 20);
    checkGated(t, 1, 2, tolF32(t), 20);
    checkExpert(t, false, tolF32(t), 20);
    checkGetRows(t, tolF32(t), 20);
  }
}
