//===- KernelCasesTest.cpp - fg_bench_kernels' shapes, bytes and rotation ---===//
//
// What the kernel benchmark times can be checked without a GPU: the shape
// table against the workload definitions, the bytes per case, how operands
// rotate through more than L2, the expert ids, and that every case emits.
//
//===----------------------------------------------------------------------===//
#include "bench/KernelCases.h"
#include "codegen/cuda/Kernel.h"

#include <gtest/gtest.h>

#include <map>
#include <set>

using namespace fg;
using namespace fg::bench;

namespace {

std::vector<KernelCase> allCases() {
  auto cs = kernelCases();
  EXPECT_TRUE(static_cast<bool>(cs)) << (cs ? "" : llvm::toString(cs.takeError()));
  return cs ? std::move(*cs) : std::vector<KernelCase>{};
}

/// "shape NxK" of every dense matmul case of `workload` (f16 or f32 only, T = 1).
std::map<std::string, std::pair<int64_t, int64_t>> matmulShapes(llvm::StringRef workload) {
  std::map<std::string, std::pair<int64_t, int64_t>> out;
  for (const KernelCase &c : allCases())
    if (c.family == KernelFamily::Matmul && c.workload == workload && c.T == 1 &&
        c.dtype != DType::BF16)
      out[c.shape] = {c.n, c.k};
  return out;
}

Function build(const KernelCase &c) {
  Function fn("kernel");
  llvm::Error e = buildCaseFunction(c, fn);
  EXPECT_FALSE(static_cast<bool>(e)) << c.name() << ": " << llvm::toString(std::move(e));
  return fn;
}

const KernelCase &find(const std::vector<KernelCase> &cs, llvm::StringRef name) {
  for (const KernelCase &c : cs)
    if (c.name() == name)
      return c;
  ADD_FAILURE() << "no case " << name.str();
  static KernelCase none;
  return none;
}

} // namespace

/// Llama-3-8B's projections, merged where shapes agree.
TEST(KernelCases, DenseShapesFromTheWorkload) {
  using P = std::pair<int64_t, int64_t>;
  EXPECT_EQ(matmulShapes("w-dense"), (std::map<std::string, P>{{"q+o", {4096, 4096}},
                                                               {"kv", {1024, 4096}},
                                                               {"gate_up", {14336, 4096}},
                                                               {"down", {4096, 14336}},
                                                               {"lm_head", {128256, 4096}}}));
  EXPECT_EQ(matmulShapes("w-moe"), (std::map<std::string, P>{{"q", {4096, 2048}},
                                                             {"kv", {512, 2048}},
                                                             {"o", {2048, 4096}},
                                                             {"router", {128, 2048}},
                                                             {"lm_head", {151936, 2048}}}));
  EXPECT_EQ(matmulShapes("w-tiny"), (std::map<std::string, P>{{"q+kv+o", {512, 512}},
                                                              {"gate_up", {1408, 512}},
                                                              {"down", {512, 1408}},
                                                              {"lm_head", {32000, 512}}}));
}

/// Every family at T = 1, 2, 4, 8; names unique; the router stays f32; the
/// smoke subset is T 1 and 8 in f16 (f32 for rows), one shape per family.
TEST(KernelCases, FamiliesTokensAndSmokeSubset) {
  std::vector<KernelCase> cs = allCases();
  std::set<std::string> names;
  std::map<KernelFamily, int> perFamily;
  size_t smoke = 0;
  for (const KernelCase &c : cs) {
    EXPECT_TRUE(names.insert(c.name()).second) << c.name();
    ++perFamily[c.family];
    if (c.shape == "router") {
      EXPECT_EQ(c.dtype, DType::F32);
    }
    if (c.smoke) {
      ++smoke;
      EXPECT_TRUE(c.T == 1 || c.T == 8) << c.name();
      EXPECT_NE(c.dtype, DType::BF16) << c.name();
    }
  }
  // matmul: (5 + 4 + 4 shapes) x f16/bf16 + the f32 router, x 4 T, and the
  // three untuned f16 shapes x 4 T; then the quantised cases: 12 types x 3 T
  // over w-dense's 5 and w-moe's 4 shapes, gate|up, and the expert shapes.
  constexpr int kQ = 12 * 3;
  EXPECT_EQ(perFamily[KernelFamily::Matmul], (13 * 2 + 1) * 4 + 3 * 4 + (5 + 4) * kQ);
  // w-dense, w-tiny; w-dense's 16-bit T = 4 and 8 are not cases (the emitter
  // refuses the fused GEMV there: cuBLAS is faster).
  EXPECT_EQ(perFamily[KernelFamily::GatedMatmul], 2 * 2 * 4 - 2 * 2 + kQ);
  // The expert families add a 512-token prefill chunk per prefill type (the
  // grouped GEMM): down for matmul_id, gate|up for the fused one.
  // (block types twice: x in f32 and in f16).
  constexpr int kP = static_cast<int>(std::size(kPrefillExpertTypes)) * 2 - 1;
  EXPECT_EQ(perFamily[KernelFamily::MatmulId], 2 * 2 * 4 + 2 * kQ + kP); // gate_up, down
  EXPECT_EQ(perFamily[KernelFamily::GatedMatmulId], 1 * 2 * 4 + kQ + kP);
  // w-dense, w-moe x 3 KV x 4 T, and a prefill chunk of 512 and of 2048 each.
  EXPECT_EQ(perFamily[KernelFamily::Attention], 2 * 3 * 4 + 2 * 2);
  EXPECT_EQ(perFamily[KernelFamily::RmsNorm], 3 * 4);
  EXPECT_EQ(perFamily[KernelFamily::RmsNormMul], 3 * 4);
  EXPECT_EQ(smoke, 29u);
  const KernelCase &a = find(cs, "attention/w-moe/kv32768/f16/T8");
  EXPECT_EQ(a.heads, 32);
  EXPECT_EQ(a.kvHeads, 4);
  EXPECT_EQ(a.headDim, 128);
  const KernelCase &p = find(cs, "attention/w-dense/prefill/f16/T2048");
  EXPECT_EQ(p.kvLen, 2048); // positions 0 .. 2047: causal over the whole chunk
  EXPECT_EQ(p.heads, 32);
  EXPECT_EQ(p.kvHeads, 8);
  EXPECT_FALSE(p.smoke);
  const KernelCase &e = find(cs, "fused.gated_matmul_id/w-moe/gate_up/bf16/T4");
  EXPECT_EQ(e.experts, 128);
  EXPECT_EQ(e.topK, 8);
  EXPECT_EQ(e.n, 768);
  EXPECT_EQ(e.k, 2048);
}

/// Bytes come from the op table's cost rule: weights, activations and results.
TEST(KernelCases, BytesByHand) {
  std::vector<KernelCase> cs = allCases();
  // lm head, f16, T = 1: W + x (f32) + y (f32).
  EXPECT_DOUBLE_EQ(caseBytes(build(find(cs, "matmul/w-dense/lm_head/f16/T1"))),
                   128256.0 * 4096 * 2 + 4096 * 4 + 128256 * 4);
  // gate|up, bf16, T = 2: both weights, x once (the op table's byte model
  // counts a fused op's operands, not its decomposition's) and the glu result.
  EXPECT_DOUBLE_EQ(caseBytes(build(find(cs, "fused.gated_matmul/w-dense/gate_up/bf16/T2"))),
                   2 * 14336.0 * 4096 * 2 + 2 * 4096 * 4.0 + 2 * 14336 * 4.0);
  // Expert down, T = 2: only the 2·8 selected experts' rows, x, the ids
  // (2·8 i32) and y.
  EXPECT_DOUBLE_EQ(caseBytes(build(find(cs, "matmul_id/w-moe/down/f16/T2"))),
                   16 * 2048.0 * 768 * 2 + 2 * 8 * 768 * 4.0 + 2 * 8 * 4.0 + 2 * 8 * 2048 * 4.0);
  // Attention over exactly kvLen rows: K + V + q + positions + out.
  EXPECT_DOUBLE_EQ(caseBytes(build(find(cs, "attention/w-dense/kv8192/f16/T1"))),
                   2 * 8192.0 * 8 * 128 * 2 + 32 * 128 * 4 + 4 + 32 * 128 * 4);
  EXPECT_DOUBLE_EQ(caseBytes(build(find(cs, "fused.rms_norm_mul/w-moe/h2048/f32/T4"))),
                   4 * 2048 * 4.0 + 2048 * 4 + 4 * 2048 * 4.0);
}

/// Quantised cases count the GGUF bytes of their weights (the % of roofline
/// the issue asks for), rotate them through > 60 MB like f16 weights, have
/// no cuBLAS figure, and emit the GEMV with the type's decoder.
TEST(KernelCases, QuantisedCasesCountGgufBytes) {
  std::vector<KernelCase> cs = allCases();
  // q4_k gate_up, T = 1: 14336 x 4096 in 256-element blocks of 144 bytes.
  const KernelCase &g = find(cs, "matmul/w-dense/gate_up/q4_k/T1");
  EXPECT_FALSE(g.hasCublas());
  EXPECT_DOUBLE_EQ(caseBytes(build(g)), 14336.0 * 4096 / 256 * 144 + 4096 * 4 + 14336 * 4);
  // q8_0 expert down, T = 2: the 16 selected experts' blocks of 34 bytes.
  const KernelCase &d = find(cs, "matmul_id/w-moe/down/q8_0/T2");
  EXPECT_DOUBLE_EQ(caseBytes(build(d)),
                   16 * 2048.0 * 768 / 32 * 34 + 2 * 8 * 768 * 4.0 + 2 * 8 * 4.0 +
                       2 * 8 * 2048 * 4.0);
  for (const char *name : {"matmul/w-dense/gate_up/q4_k/T1", "matmul_id/w-moe/down/q8_0/T2",
                               "fused.gated_matmul/w-dense/gate_up/q6_k/T8"}) {
    const KernelCase &c = find(cs, name);
    Function fn = build(c);
    Rotation r = planRotation(c, fn);
    EXPECT_GE(r.footprintBytes(), 60e6) << name;
    EXPECT_GT(r.copiesOf(c, fn, 1), 1) << name;
    auto ls = cuda::emitKernel(fn, fn.node(0), cuda::contiguousLayouts(fn, fn.node(0)));
    ASSERT_TRUE(static_cast<bool>(ls)) << llvm::toString(ls.takeError());
    const auto &k = std::get<cuda::KernelSpec>(ls->front());
    std::string dec = std::string("fg::Dec") + (c.dtype == DType::Q4_K   ? "Q4_K"
                                                : c.dtype == DType::Q8_0 ? "Q8_0"
                                                                         : "Q6_K");
    EXPECT_NE(k.source.find("using Dec0 = " + dec), std::string::npos) << name;
  }
}

/// Each rotation touches >= 256 MiB unless capped; graphs hold >= 20 launches,
/// a whole number of rotations.
TEST(KernelCases, RotationBeyondL2) {
  RotationOptions o;
  for (const KernelCase &c : allCases()) {
    Function fn = build(c);
    Rotation r = planRotation(c, fn, o);
    SCOPED_TRACE(c.name());
    EXPECT_GE(r.slots, 2);
    EXPECT_LE(r.slots, o.maxSlots);
    EXPECT_TRUE(r.footprintBytes() >= o.minBytes || r.slots == o.maxSlots);
    EXPECT_GE(r.launches, 20);
    EXPECT_EQ(r.launches % r.slots, 0);
    if (c.family == KernelFamily::Matmul) { // W (GGUF bytes for block types) and x
      EXPECT_DOUBLE_EQ(r.touchedBytes,
                       static_cast<double>(TensorType(c.dtype, {c.n, c.k}).bytes()) +
                           4.0 * static_cast<double>(c.T * c.k));
    }
  }
  // 1 GB lm head: two copies; expert gate|up at T = 1: 16 disjoint sets of 8
  // experts per copy of the weights.
  std::vector<KernelCase> cs = allCases();
  const KernelCase &lm = find(cs, "matmul/w-dense/lm_head/f16/T1");
  Function lmFn = build(lm);
  EXPECT_EQ(planRotation(lm, lmFn).slots, 2);
  const KernelCase &e = find(cs, "fused.gated_matmul_id/w-moe/gate_up/f16/T1");
  Function eFn = build(e);
  Rotation er = planRotation(e, eFn);
  EXPECT_EQ(er.setsPerCopy, 16);
  EXPECT_DOUBLE_EQ(er.touchedBytes, 2 * 8 * 768.0 * 2048 * 2 + 2048 * 4);
  EXPECT_EQ(er.copiesOf(e, eFn, 1), (er.slots + 15) / 16);
  EXPECT_EQ(er.copiesOf(e, eFn, 0), er.slots); // x
  EXPECT_EQ(er.copiesOf(e, eFn, 3), 1);        // ids: one buffer, a set per slot
}

/// Expert ids: T·k distinct experts per slot, disjoint within a weight copy.
TEST(KernelCases, ExpertIdsDistinctAndDisjoint) {
  std::vector<KernelCase> cs = allCases();
  for (int64_t T : {1, 8}) {
    const KernelCase &c = find(cs, "matmul_id/w-moe/gate_up/f16/T" + std::to_string(T));
    Function fn = build(c);
    Rotation r = planRotation(c, fn);
    auto ids = expertIds(c, r);
    ASSERT_EQ(static_cast<int64_t>(ids.size()), r.slots);
    std::map<int64_t, std::set<int32_t>> perCopy;
    for (int64_t s = 0; s < r.slots; ++s) {
      const auto &v = ids[static_cast<size_t>(s)];
      ASSERT_EQ(static_cast<int64_t>(v.size()), T * 8);
      std::set<int32_t> uniq(v.begin(), v.end());
      EXPECT_EQ(uniq.size(), v.size());
      for (int32_t e : v) {
        EXPECT_GE(e, 0);
        EXPECT_LT(e, 128);
        EXPECT_TRUE(perCopy[s / r.setsPerCopy].insert(e).second) << "slot " << s;
      }
    }
  }
}

/// Every case gets launches from the CUDA emitters as the compiler would
/// emit them (no NVRTC here), and the dense families a cuBLAS GEMM. (The
/// fused gated GEMV over 3+ rows of W-dense's 16-bit weights, which the
/// emitter refuses, is not a case.)
TEST(KernelCases, EveryCaseEmits) {
  bool gatedDenseT8 = false;
  for (const KernelCase &c : allCases()) {
    SCOPED_TRACE(c.name());
    gatedDenseT8 |= c.family == KernelFamily::GatedMatmul && c.workload == "w-dense" && c.T == 8 &&
                    (c.dtype == DType::F16 || c.dtype == DType::BF16);
    Function fn = build(c);
    const Node &n = fn.node(0);
    auto ls = cuda::emitKernel(fn, n, cuda::contiguousLayouts(fn, n));
    ASSERT_TRUE(static_cast<bool>(ls)) << llvm::toString(ls.takeError());
    EXPECT_FALSE(ls->empty());
    if (!c.hasCublas() || c.isExpert())
      continue;
    Function cf("cublas");
    ASSERT_FALSE(static_cast<bool>(buildCublasFunction(c, cf)));
    cuda::EmitOptions eo;
    eo.maxGemvTokens = 0;
    auto cl = cuda::emitKernel(cf, cf.node(0), cuda::contiguousLayouts(cf, cf.node(0)), eo);
    ASSERT_TRUE(static_cast<bool>(cl)) << llvm::toString(cl.takeError());
    ASSERT_FALSE(cl->empty());
    EXPECT_TRUE(std::holds_alternative<cuda::CublasGemmSpec>(cl->back()));
  }
  EXPECT_FALSE(gatedDenseT8) << "the emitter refuses the fused gated GEMV there";
}
