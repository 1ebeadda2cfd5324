//===- PrefillDecodeGpuTest.cpp - prefill then decode == decode only --------===//
//
// Issue 15's equality: a prompt fed through the prefill buckets (flash-
// attention prefill, the grouped expert GEMM, cuBLAS) and then decoded gives
// the same teacher-forced logits as the same prompt fed one token at a time
// through `decode`, for prompt lengths 1, 63, 64, 65, 511 and chunked long
// prompts (several full chunks, then a padded one). The demo MoE decoder with
// f32 weights (1e-3), with f16 weights (1e-2: the grouped GEMM takes the
// 16-bit expert weights) and with q4_K / q5_0 weights (1e-2; there also 2047
// and 2049), all on the GPU; short prompts also against the CPU reference's
// decode-only run.
//
//===----------------------------------------------------------------------===//
#include "GpuTestUtil.h"

#include "frontends/models/Demo.h"
#include "frontends/models/Workloads.h"
#include "runtime/Session.h"

using namespace fg;
using namespace fg::gputest;

namespace {

constexpr int64_t kCtx = 1280;

Plan demoPlan(DType weights, std::vector<int64_t> buckets, bool gemmInputs = false,
              std::vector<std::string> enable = {}) {
  DecoderConfig c = demoConfig(kCtx, DType::F16);
  c.weightDType = weights;
  auto g = buildDecoderGraph(c, decoderEntries(buckets));
  EXPECT_TRUE(bool(g)) << errString(g.takeError());
  CompileOptions co;
  co.gemmInputConverts = gemmInputs;
  co.enableFusion = std::move(enable);
  auto plan = compile(*g, co);
  EXPECT_TRUE(bool(plan)) << errString(plan.takeError());
  return std::move(*plan);
}

struct Run {
  std::vector<std::vector<float>> rows; ///< the last prompt token's, then each step's
  std::vector<std::string> entries;
};

Run generate(const Plan &plan, ExecOptions::Device device, llvm::ArrayRef<int32_t> prompt,
             llvm::ArrayRef<int32_t> forced) {
  Run out;
  ExecOptions eo;
  eo.device = device;
  SessionOptions so;
  so.sample = [&](llvm::ArrayRef<float> l) -> llvm::Expected<int32_t> {
    out.rows.push_back(l.vec());
    return greedyToken(l);
  };
  so.onRun = [&](const SessionRun &r, Executor &) {
    out.entries.push_back(r.entry.str());
    return llvm::Error::success();
  };
  auto s = Session::create(plan, eo, so);
  EXPECT_TRUE(bool(s)) << errString(s.takeError());
  if (!s)
    return out;
  auto t = s->generate(prompt, static_cast<int64_t>(forced.size()) + 1, forced);
  EXPECT_TRUE(bool(t)) << errString(t.takeError());
  return out;
}

std::vector<int32_t> promptOf(int64_t n) {
  std::vector<int32_t> p;
  for (int64_t i = 0; i < n; ++i)
    p.push_back(static_cast<int32_t>((i * 37 + 11) % 512));
  return p;
}

void expectSameRows(const Run &a, const Run &b, double tol, const std::string &what) {
  ASSERT_EQ(a.rows.size(), b.rows.size()) << what;
  double worst = 0;
  for (size_t i = 0; i < a.rows.size(); ++i) {
    double err = normalizedError(a.rows[i], b.rows[i]);
    worst = std::max(worst, err);
    EXPECT_LE(err, tol) << what << ", row " << i;
  }
  std::printf("[prefill==decode] %s: worst normalised error %.3g\n", what.c_str(), worst);
}

const std::vector<int32_t> kForced = {5, 77, 301, 42};

void checkLengths(DType weights, double tol, std::vector<int64_t> buckets,
                  std::vector<int64_t> lengths, bool alsoCpu, bool gemmInputs = false,
                  std::vector<std::string> enable = {}) {
  Plan prefill = demoPlan(weights, buckets, gemmInputs, std::move(enable)),
       decodeOnly = demoPlan(weights, {});
  for (int64_t n : lengths) {
    std::vector<int32_t> prompt = promptOf(n);
    Run a = generate(prefill, ExecOptions::Device::Cuda, prompt, kForced);
    Run b = generate(decodeOnly, ExecOptions::Device::Cuda, prompt, kForced);
    std::string what = std::string(dtypeName(weights)) + " prompt of " + std::to_string(n) +
                       " via " + describeChunks(planPromptChunks(prefillBuckets(prefill.graph()),
                                                                 0, n, kCtx));
    expectSameRows(a, b, tol, what);
    if (alsoCpu) {
      Run c = generate(decodeOnly, ExecOptions::Device::Cpu, prompt, kForced);
      expectSameRows(a, c, tol, what + " (cpu decode-only)");
    }
  }
}

void checkQuantisedLengths(std::vector<int64_t> lengths) {
  constexpr int64_t kLongCtx = 2304;
  auto plan = [&](std::vector<int64_t> buckets) {
    DecoderConfig c = demoConfig(kLongCtx, DType::F16);
    c.weightDType = DType::F16;
    quantiseMatrices(c, *QuantScheme::parse("q4_k"), DType::F16);
    auto g = buildDecoderGraph(c, decoderEntries(buckets));
    EXPECT_TRUE(bool(g)) << errString(g.takeError());
    auto p = compile(*g, CompileOptions{});
    EXPECT_TRUE(bool(p)) << errString(p.takeError());
    return std::move(*p);
  };
  Plan prefill = plan({64, 512}), decodeOnly = plan({});
  // The weights stayed quantised (the matrices, not a retyped f16 copy).
  int quantised = 0;
  for (const Argument &a : prefill.graph().lookup("decode")->arguments())
    quantised += isQuantized(prefill.graph().lookup("decode")->value(a.value).type.dtype);
  EXPECT_GE(quantised, 8) << "q4_K / q5_0 weights in the plan";
  for (int64_t n : lengths) {
    std::vector<int32_t> prompt = promptOf(n);
    Run a = generate(prefill, ExecOptions::Device::Cuda, prompt, kForced);
    Run b = generate(decodeOnly, ExecOptions::Device::Cuda, prompt, kForced);
    std::string what = "q4_K/q5_0 prompt of " + std::to_string(n) + " via " +
                       describeChunks(planPromptChunks(prefillBuckets(prefill.graph()), 0, n,
                                                       kLongCtx));
    expectSameRows(a, b, 1e-2, what);
    if (n == 65 || n == 511) {
      Run c = generate(decodeOnly, ExecOptions::Device::Cpu, prompt, kForced);
      expectSameRows(a, c, 1e-2, what + " (cpu decode-only)");
    }
  }
}

} // namespace

TEST(GpuPrefillThenDecode, F32WeightsEqualsDecodeOnly) {
  FG_REQUIRE_GPU();
  checkLengths(DType::F32, 1e-3, {64, 512}, {1, 63, 64, 65, 511}, false);
  checkLengths(DType::F32, 1e-3, {64, 512}, {63, 65}, true);
}

TEST(GpuPrefillThenDecode, F16WeightsEqualsDecodeOnly) {
  FG_REQUIRE_GPU();
  checkLengths(DType::F16, 1e-2, {64, 512}, {1, 63, 64, 65, 511}, false);
  checkLengths(DType::F16, 1e-2, {64, 512}, {65}, true);
}

/// Block-quantised weights (the default since the twelfth session: quantised
/// experts through the grouped GEMM, the dense prefill matmuls through the
/// f16 decode + cuBLAS, decode steps through the native GEMVs): the q4_k
/// workloads' scheme, q4_K for rows of whole 256-blocks (q, k, v, o, gate|up
/// experts, lm head, embedding) and llama.cpp's q5_0 fallback for the expert
/// down projection (K = 128), as in a real file; every prompt length of issue 15, 2047 and 2049 as chunks of 512
/// and a padded last one. GPU prefill-then-decode against GPU decode-only,
/// and short prompts against the CPU reference's decode-only run.
TEST(GpuPrefillThenDecode, QuantisedWeightsEqualsDecodeOnly) {
  FG_REQUIRE_GPU();
  checkQuantisedLengths({1, 63, 64, 65, 511, 2047, 2049});
}

/// Longer than the largest bucket: full chunks, then a padded one (or decode).
TEST(GpuPrefillThenDecode, ChunkedLongPrompts) {
  FG_REQUIRE_GPU();
  checkLengths(DType::F16, 1e-2, {64, 512}, {1025, 1100}, false);
  checkLengths(DType::F32, 1e-3, {64}, {200, 257}, false);
}

/// The opt-in `gemm-inputs` pass (x of each cuBLAS GEMM converted once, as an
/// op the GEMMs read in place): the same equality, on the GPU and against the
/// CPU reference's decode-only run.
TEST(GpuPrefillThenDecode, GemmInputConvertsEqualsDecodeOnly) {
  FG_REQUIRE_GPU();
  checkLengths(DType::F16, 1e-2, {64, 512}, {63, 65, 511}, false, true);
  checkLengths(DType::F16, 1e-2, {64}, {65}, true, true);
}

/// The opt-in gated_matmul_id_chunk (expert gate|up + GLU of prefill chunks
/// fused, on the grouped expert GEMM): the same equality with f16 experts.
TEST(GpuPrefillThenDecode, GatedExpertChunksEqualsDecodeOnly) {
  FG_REQUIRE_GPU();
  checkLengths(DType::F16, 1e-2, {64, 512}, {63, 65, 511}, false, false,
               {"gated_matmul_id_chunk"});
  checkLengths(DType::F16, 1e-2, {64}, {65}, true, false, {"gated_matmul_id_chunk"});
}

/// The opt-in rms_norm_mul_convert (a prefill chunk's attention norm stored in
/// the q/k/v GEMMs' f16 type; gemm-inputs then runs before fuse): the same
/// equality, on the GPU and against the CPU reference's decode-only run.
TEST(GpuPrefillThenDecode, NormConvertsEqualsDecodeOnly) {
  FG_REQUIRE_GPU();
  checkLengths(DType::F16, 1e-2, {64, 512}, {63, 65, 511}, false, true, {"rms_norm_mul_convert"});
  checkLengths(DType::F16, 1e-2, {64}, {65}, true, true, {"rms_norm_mul_convert"});
}
