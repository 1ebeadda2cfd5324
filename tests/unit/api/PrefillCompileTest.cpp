//===- PrefillCompileTest.cpp - prefill-chunk compilation on the CPU reference ===//
//
// 1. The opt-in pass (CompileOptions::gemmInputConverts) on the demo decoder with
// f16 weights and a 16-token prefill bucket (above the GEMV's 8 rows, so the
// projections are cuBLAS GEMMs): every such matmul reads an f16 x made by a
// `convert` that projections of one x share, the decode entry is untouched,
// the CUDA program compiles with fewer conversion launches, and the CPU
// reference gives the same teacher-forced logits as the plan without the
// pass within f16 rounding of x (1e-2).
// 2. With the opt-in gated_matmul_id_chunk, the expert gate|up + GLU of a
// 16-token chunk with 16-bit weights fuses (fused.gated_matmul_id, the
// grouped expert GEMM's two-stream form) and gives the unfused plan's logits.
// 3. By default the attention output projection and residual add of a
// 16-token chunk fuse (fused.matmul_add, the cuBLASLt GEMM with the residual
// as C), its x converted by gemm-inputs, with the logits of the plan without
// that pattern.
// 4. glu_convert, rms_norm_mul_convert and attention_convert (on by default):
// the GLU, the norms and the chunk's attention write the GEMMs' f16 inputs,
// gemm-inputs runs before fuse, and the logits are those of the plan without
// them.
// 5. With q4_K / q5_0 weights, the chunk's quantised expert gate|up + GLU
// fuses (the CUDA target groups quantised experts) and matches unfused.
//
//===----------------------------------------------------------------------===//
#include "codegen/cuda/Compile.h"
#include "frontends/DecoderBlocks.h"
#include "frontends/models/Demo.h"
#include "frontends/models/Workloads.h"
#include "ir/OpViews.h"
#include "runtime/Compare.h"
#include "runtime/ProgramIO.h"
#include "runtime/Session.h"

#include "llvm/Support/Error.h"

#include <gtest/gtest.h>


using namespace fg;

namespace {

Plan demoF16(bool gemmInputs, bool fusion = true, std::vector<std::string> enable = {},
             std::vector<std::string> disable = {}) {
  DecoderConfig c = demoConfig(64, DType::F16);
  c.weightDType = DType::F16;
  auto g = buildDecoderGraph(c, decoderEntries({16}));
  EXPECT_TRUE(bool(g)) << llvm::toString(g.takeError());
  CompileOptions co;
  co.gemmInputConverts = gemmInputs;
  co.fusion = fusion;
  co.enableFusion = std::move(enable);
  co.disableFusion = std::move(disable);
  auto plan = compile(*g, co);
  EXPECT_TRUE(bool(plan)) << llvm::toString(plan.takeError());
  return std::move(*plan);
}

std::vector<std::vector<float>> teacherForced(const Plan &plan) {
  std::vector<std::vector<float>> rows;
  ExecOptions eo;
  eo.device = ExecOptions::Device::Cpu;
  SessionOptions so;
  so.sample = [&](llvm::ArrayRef<float> l) -> llvm::Expected<int32_t> {
    rows.push_back(l.vec());
    return 0;
  };
  auto s = Session::create(plan, eo, so);
  EXPECT_TRUE(bool(s)) << llvm::toString(s.takeError());
  if (!s)
    return rows;
  std::vector<int32_t> prompt;
  for (int i = 0; i < 20; ++i) // a full 16-token chunk, then decode steps
    prompt.push_back((i * 37 + 11) % 512);
  const std::vector<int32_t> forced = {5, 77, 301};
  auto t = s->generate(prompt, static_cast<int64_t>(forced.size()) + 1, forced);
  EXPECT_TRUE(bool(t)) << llvm::toString(t.takeError());
  return rows;
}

/// Every logits row of `got` within `tol` (normalised error) of `want`'s.
void expectSameRows(const std::vector<std::vector<float>> &got,
                    const std::vector<std::vector<float>> &want, double tol) {
  ASSERT_EQ(got.size(), want.size());
  ASSERT_FALSE(got.empty());
  for (size_t r = 0; r < got.size(); ++r)
    EXPECT_LE(normalizedError(got[r], want[r]), tol) << "row " << r;
}

/// The demo with a dense FFN (its own FFN is a mixture of experts), f16
/// weights and a 16-token prefill bucket, compiled without the patterns
/// `disable`.
Plan denseF16(std::vector<std::string> disable, std::vector<std::string> enable = {}) {
  DecoderConfig c = demoConfig(64, DType::F16);
  c.weightDType = DType::F16;
  c.ffn = DecoderConfig::FfnKind::Dense;
  c.nFf = 384;
  auto g = buildDecoderGraph(c, decoderEntries({16}));
  EXPECT_TRUE(bool(g)) << llvm::toString(g.takeError());
  CompileOptions co;
  co.disableFusion = std::move(disable);
  co.enableFusion = std::move(enable);
  auto plan = compile(*g, co);
  EXPECT_TRUE(bool(plan)) << llvm::toString(plan.takeError());
  return std::move(*plan);
}

/// fused.rms_norm_mul nodes of `fn` that store a 16-bit type.
unsigned count16BitNorms(const Function &fn) {
  unsigned n = 0;
  for (const Node &node : fn.nodes())
    n += node.kind == OpKind::FusedRmsNormMul && op::FusedRmsNormMul(node).dtype() != DType::F32;
  return n;
}

std::vector<std::string> passOrder(const Plan &plan) {
  std::vector<std::string> order;
  for (const PlanPassRecord &r : plan.passes())
    order.push_back(r.name);
  return order;
}

unsigned count(const Function &fn, OpKind k) {
  unsigned n = 0;
  for (const Node &node : fn.nodes())
    n += node.kind == k;
  return n;
}

} // namespace

TEST(GemmInputs, SharedConvertsInThePrefillEntryOnly) {
  Plan off = demoF16(false), on = demoF16(true);
  const Function *pre = on.graph().lookup("prefill_16");
  const Function *dec = on.graph().lookup("decode");
  ASSERT_NE(pre, nullptr);
  ASSERT_NE(dec, nullptr);
  EXPECT_EQ(count(*dec, OpKind::Convert), count(*off.graph().lookup("decode"), OpKind::Convert));
  unsigned gemms = 0;
  for (const Node &n : pre->nodes()) {
    // The cuBLAS-bound ones with 16-bit weights (the router's stay f32).
    if (n.kind != OpKind::MatMul || pre->type(n.operands[0]).numRows() <= 8 ||
        pre->type(n.operands[1]).dtype != DType::F16)
      continue;
    ++gemms;
    // A convert of the pass, or one folded into the norm that produced x
    // (rms_norm_mul_convert, on by default).
    const Node *x = pre->producer(n.operands[0]);
    ASSERT_NE(x, nullptr);
    EXPECT_TRUE(x->kind == OpKind::Convert ||
                (x->kind == OpKind::FusedRmsNormMul && op::FusedRmsNormMul(*x).dtype() == DType::F16))
        << "a GEMM reads x not converted by the pass";
    EXPECT_EQ(pre->type(n.operands[0]).dtype, DType::F16);
  }
  unsigned converts = count(*pre, OpKind::Convert) + count16BitNorms(*pre) -
                      count(*off.graph().lookup("prefill_16"), OpKind::Convert);
  EXPECT_GT(gemms, 0u);
  EXPECT_GT(converts, 0u);
  EXPECT_LT(converts, gemms) << "q, k and v should share one converted x";
  bool ran = false;
  for (const PlanPassRecord &r : on.passes())
    ran |= r.name == "gemm-inputs" && r.changed;
  EXPECT_TRUE(ran);
}

TEST(GemmInputs, SameLogitsAsWithoutThePass) {
  expectSameRows(teacherForced(demoF16(true)), teacherForced(demoF16(false)), 1e-2);
}

/// glu_convert (on by default since the ninth session; it moves gemm-inputs
/// before fuse): the dense FFN's GLU of a prefill chunk writes the down
/// GEMM's f16 input itself — no convert of it is left — and the logits are
/// those of the plan without it (the same rounding, once) on the CPU
/// reference; --disable-fusion glu_convert (with the other converting
/// patterns, rms_norm_mul_convert and attention_convert) restores the old
/// pass order.
TEST(PrefillFusion, GluConvertWritesTheGemmInputAndMatches) {
  // gated_gemm (on by default) would take the GLU with its GEMMs: off here.
  Plan fused = denseF16({"rms_norm_mul_convert", "gated_gemm"}),
       plain = denseF16({"glu_convert", "rms_norm_mul_convert", "gated_gemm", "attention_convert"});
  const Function *pre = fused.graph().lookup("prefill_16");
  ASSERT_NE(pre, nullptr);
  EXPECT_GT(count(*pre, OpKind::FusedGluConvert), 0u);
  EXPECT_EQ(count(*plain.graph().lookup("prefill_16"), OpKind::FusedGluConvert), 0u);
  EXPECT_LT(count(*pre, OpKind::Convert), count(*plain.graph().lookup("prefill_16"), OpKind::Convert));
  EXPECT_EQ(passOrder(fused),
            (std::vector<std::string>{"canonicalize", "cse", "dce", "gemm-inputs", "fuse", "dce"}));
  EXPECT_EQ(passOrder(plain),
            (std::vector<std::string>{"canonicalize", "cse", "dce", "fuse", "gemm-inputs", "dce"}));
  expectSameRows(teacherForced(fused), teacherForced(plain), 1e-6);
}

/// gated_gemm (on by default since the twenty-ninth session): the dense FFN's gate and up GEMMs of a prefill
/// chunk and its GLU become one fused op (the decode entry keeps its gated
/// GEMV); in the CUDA program each is one cuBLAS GEMM over the gate weight
/// read on into the up weight (384 x 64 f16 = 192 units of 256 bytes, and up
/// takes the next slot), N = 768, then the GLU kernel; the logits on the CPU
/// reference are the default plan's bit for bit (the same GEMMs, the same
/// rounding).
TEST(PrefillFusion, GatedGemmStacksGateAndUpAndMatches) {
  Plan fused = denseF16({}), plain = denseF16({"gated_gemm"});
  const Function *pre = fused.graph().lookup("prefill_16");
  ASSERT_NE(pre, nullptr);
  const unsigned gated = count(*pre, OpKind::FusedGatedGemm);
  EXPECT_GT(gated, 0u);
  EXPECT_EQ(count(*pre, OpKind::FusedGluConvert), 0u);
  EXPECT_GT(count(*plain.graph().lookup("prefill_16"), OpKind::FusedGluConvert), 0u);
  EXPECT_EQ(count(*fused.graph().lookup("decode"), OpKind::FusedGatedGemm), 0u);
  const PlanSection *sec = fused.section("program");
  ASSERT_NE(sec, nullptr);
  auto prog = decodeProgram(sec->bytes);
  ASSERT_TRUE(bool(prog)) << llvm::toString(prog.takeError());
  unsigned stacked = 0, gluLaunches = 0;
  for (const CompiledEntry &e : prog->entries) {
    if (e.name != "prefill_16")
      continue;
    for (const LaunchRecord &l : e.launches) {
      if (l.op != OpKind::FusedGatedGemm)
        continue;
      if (l.kind == LaunchRecord::Kind::Gemm) {
        EXPECT_NE(l.what.find("[gate|up stacked]"), std::string::npos) << l.what;
        EXPECT_EQ(l.gemm.m, 768);
        EXPECT_EQ(l.gemm.ldc, 768);
        EXPECT_EQ(l.gemm.a.space, BufferSpace::Weight);
        EXPECT_TRUE(weightFollows(prog->weights, l.gemm.a.index, l.gemm.a.index + 1));
        ++stacked;
      } else {
        ++gluLaunches;
      }
    }
  }
  EXPECT_EQ(stacked, gated);
  EXPECT_EQ(gluLaunches, gated);
  expectSameRows(teacherForced(fused), teacherForced(plain), 1e-6);
}

/// rms_norm_mul_convert (on by default since the ninth session; it also
/// moves gemm-inputs before fuse): the attention and FFN norms of a prefill chunk write the q/k/v and
/// gate|up GEMMs' f16 input themselves — no convert of a norm is left, each
/// 16-bit norm replacing one — the decode entry keeps its f32 norms, and the
/// logits are those of the plan without it (the same rounding, once) on the
/// CPU reference. With the defaults (glu_convert's convert taken by gated_gemm) both
/// kinds of convert go.
TEST(PrefillFusion, RmsNormMulConvertWritesTheGemmInputsAndMatches) {
  Plan fused = denseF16({"glu_convert", "gated_gemm", "attention_convert"}),
       plain = denseF16({"glu_convert", "rms_norm_mul_convert", "gated_gemm", "attention_convert"});
  const Function *pre = fused.graph().lookup("prefill_16");
  const Function *plainPre = plain.graph().lookup("prefill_16");
  ASSERT_NE(pre, nullptr);
  ASSERT_NE(plainPre, nullptr);
  unsigned norms16 = count16BitNorms(*pre);
  // Two a layer (attention, FFN) at least.
  EXPECT_GE(norms16, 2 * static_cast<unsigned>(demoConfig(64, DType::F16).nLayers));
  EXPECT_EQ(count16BitNorms(*plainPre), 0u);
  EXPECT_EQ(count16BitNorms(*fused.graph().lookup("decode")), 0u);
  for (const Node &n : pre->nodes()) {
    if (n.kind != OpKind::Convert)
      continue;
    const Node *p = pre->producer(n.operands[0]);
    EXPECT_FALSE(p && p->kind == OpKind::FusedRmsNormMul) << "a norm's convert is left";
  }
  EXPECT_EQ(count(*pre, OpKind::Convert) + norms16, count(*plainPre, OpKind::Convert));
  EXPECT_EQ(passOrder(fused),
            (std::vector<std::string>{"canonicalize", "cse", "dce", "gemm-inputs", "fuse", "dce"}));
  EXPECT_EQ(passOrder(plain),
            (std::vector<std::string>{"canonicalize", "cse", "dce", "fuse", "gemm-inputs", "dce"}));
  auto want = teacherForced(plain);
  expectSameRows(teacherForced(fused), want, 1e-6);

  Plan both = denseF16({});
  const Function *bothPre = both.graph().lookup("prefill_16");
  ASSERT_NE(bothPre, nullptr);
  EXPECT_EQ(count16BitNorms(*bothPre), norms16);
  // The FFN's GLU convert went into fused.gated_gemm (on by default).
  EXPECT_GT(count(*bothPre, OpKind::FusedGatedGemm), 0u);
  // The attention's convert went into fused.attention_convert (on by default).
  EXPECT_GT(count(*bothPre, OpKind::FusedAttentionConvert), 0u);
  EXPECT_EQ(count(*bothPre, OpKind::Convert) + norms16 + count(*bothPre, OpKind::FusedGluConvert) +
                count(*bothPre, OpKind::FusedGatedGemm) +
                count(*bothPre, OpKind::FusedAttentionConvert),
            count(*plainPre, OpKind::Convert));
  expectSameRows(teacherForced(both), want, 1e-6);
}

/// attention_convert (on by default since the thirtieth session): each
/// layer's attention of a prefill chunk stores the o projection's f16 input
/// itself — no convert of an attention is left — while the decode entry
/// keeps attention and its f32 rows (the decode kernel writes f32; the
/// target refuses), and the logits are the plan's without it (the same
/// rounding, once) on the CPU reference.
TEST(PrefillFusion, AttentionConvertWritesTheGemmInputAndMatches) {
  Plan fused = denseF16({}), plain = denseF16({"attention_convert"});
  const Function *pre = fused.graph().lookup("prefill_16");
  const Function *plainPre = plain.graph().lookup("prefill_16");
  ASSERT_NE(pre, nullptr);
  ASSERT_NE(plainPre, nullptr);
  const unsigned layers = static_cast<unsigned>(demoConfig(64, DType::F16).nLayers);
  EXPECT_EQ(count(*pre, OpKind::FusedAttentionConvert), layers);
  EXPECT_EQ(count(*pre, OpKind::Attention), 0u);
  EXPECT_EQ(count(*plainPre, OpKind::FusedAttentionConvert), 0u);
  EXPECT_EQ(count(*plainPre, OpKind::Convert), count(*pre, OpKind::Convert) + layers);
  for (const Node &n : pre->nodes()) {
    if (n.kind == OpKind::FusedAttentionConvert) {
      EXPECT_EQ(pre->type(n.result()).dtype, DType::F16);
    }
  }
  EXPECT_EQ(count(*fused.graph().lookup("decode"), OpKind::FusedAttentionConvert), 0u);
  EXPECT_EQ(count(*fused.graph().lookup("decode"), OpKind::Attention), layers);
  expectSameRows(teacherForced(fused), teacherForced(plain), 1e-6);
}

TEST(PrefillFusion, GatedExpertsOfAChunkFuseAndMatchUnfused) {
  Plan fused = demoF16(false, true, {"gated_matmul_id_chunk"}),
       plain = demoF16(false, /*fusion=*/false);
  const Function *pre = fused.graph().lookup("prefill_16");
  ASSERT_NE(pre, nullptr);
  EXPECT_GT(count(*pre, OpKind::FusedGatedMatmulId), 0u);
  EXPECT_EQ(count(*plain.graph().lookup("prefill_16"), OpKind::FusedGatedMatmulId), 0u);
  // On by default (measured on the H200, eighth session).
  EXPECT_GT(count(*demoF16(false).graph().lookup("prefill_16"), OpKind::FusedGatedMatmulId), 0u);
  expectSameRows(teacherForced(fused), teacherForced(plain), 1e-4);
}

/// Block-quantised weights (the q4_k workloads' scheme: q4_K where rows are
/// whole 256-blocks, the q5_0 fallback for the expert down projection, K =
/// 128): the CUDA target groups quantised experts
/// (EmitOptions::groupedExpertQuant, on by default), so the chunk's gate|up +
/// GLU fuses over q4_K, the CUDA program compiles, and the CPU reference
/// gives the unfused plan's logits. (The same plan's GPU run:
/// GpuPrefillThenDecode.QuantisedWeightsEqualsDecodeOnly.)
TEST(PrefillFusion, QuantisedExpertsOfAChunkFuseAndMatchUnfused) {
  auto plan = [](bool fusion) {
    DecoderConfig c = demoConfig(64, DType::F16);
    c.weightDType = DType::F16;
    quantiseMatrices(c, *QuantScheme::parse("q4_k"), DType::F16);
    auto g = buildDecoderGraph(c, decoderEntries({16}));
    EXPECT_TRUE(bool(g)) << llvm::toString(g.takeError());
    CompileOptions co;
    co.fusion = fusion;
    auto p = compile(*g, co);
    EXPECT_TRUE(bool(p)) << llvm::toString(p.takeError());
    return std::move(*p);
  };
  Plan fused = plan(true), plain = plan(false);
  const Function *pre = fused.graph().lookup("prefill_16");
  ASSERT_NE(pre, nullptr);
  unsigned q4kGated = 0;
  for (const Node &node : pre->nodes())
    q4kGated += node.kind == OpKind::FusedGatedMatmulId &&
                pre->type(node.operands[1]).dtype == DType::Q4_K;
  EXPECT_EQ(q4kGated, 2u); // one a layer
  EXPECT_EQ(count(*plain.graph().lookup("prefill_16"), OpKind::FusedGatedMatmulId), 0u);
  expectSameRows(teacherForced(fused), teacherForced(plain), 1e-4);
}

TEST(PrefillFusion, ResidualAddOfAChunkFusesIntoTheGemmAndMatches) {
  Plan fused = demoF16(true), plain = demoF16(true, true, {}, {"matmul_add"});
  const Function *pre = fused.graph().lookup("prefill_16");
  ASSERT_NE(pre, nullptr);
  unsigned fusedAdds = 0;
  for (const Node &n : pre->nodes()) {
    if (n.kind != OpKind::FusedMatmulAdd)
      continue;
    ++fusedAdds;
    // The GEMM reads x in the weight's type, made by the gemm-inputs convert
    // — of the attention's rows, before their reshape, and taken by
    // fused.attention_convert (on by default) for the o projection.
    const Node *x = pre->producer(n.operands[0]);
    ASSERT_NE(x, nullptr);
    if (x->kind == OpKind::Reshape)
      x = pre->producer(x->operands[0]);
    ASSERT_NE(x, nullptr);
    EXPECT_TRUE(x->kind == OpKind::Convert || x->kind == OpKind::FusedAttentionConvert)
        << mnemonic(x->kind);
    EXPECT_EQ(pre->type(n.operands[0]).dtype, DType::F16);
  }
  EXPECT_GT(fusedAdds, 0u);
  EXPECT_EQ(count(*plain.graph().lookup("prefill_16"), OpKind::FusedMatmulAdd), 0u);
  expectSameRows(teacherForced(fused), teacherForced(plain), 1e-5);
}
