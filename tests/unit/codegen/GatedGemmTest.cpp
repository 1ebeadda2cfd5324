//===- GatedGemmTest.cpp - fused.gated_gemm's launches, stacked or split ---===//
//
// A prefill chunk's gate|up with the GLU (the gated_gemm pattern, on by default),
// compiled for sm_90 on the CPU: where the gate weight fills whole 256-byte
// units and the up weight takes the next slot, the runner's placement
// (runtime/Program.h, weightOffsets) puts up on the byte after gate, so the
// program holds one GEMM of N = 2 x rows over both; where it does not, two
// GEMMs write the two halves of each scratch row (the second from row N on,
// after the first). Then the GLU kernel. The weight placement itself: table
// order, 256-byte aligned offsets.
//
//===----------------------------------------------------------------------===//
#include "codegen/cuda/Compile.h"
#include "codegen/cuda/Kernel.h"
#include "ir/Builder.h"
#include "runtime/ProgramIO.h"
#include "tests/unit/codegen/TestKernelCache.h"

#include <gtest/gtest.h>

using namespace fg;

namespace {

struct Compiled {
  CompiledProgram prog;
  std::vector<const LaunchRecord *> gemms; ///< the fused node's GEMM records
  unsigned kernels = 0;                    ///< and its kernel launches
};

/// y = convert(glu(x·W_gateᵀ, x·W_upᵀ)) over 16 rows of x, f16 weights [N, K].
Compiled compileGated(int64_t N, int64_t K) {
  Graph g;
  Function &fn = g.addFunction("prefill");
  Builder b(fn);
  ValueId x = b.input("x", {DType::F32, {16, K}});
  ValueId wg = b.weight("ffn_gate", {DType::F16, {N, K}}, WeightInit::normal(1, 0.1));
  ValueId wu = b.weight("ffn_up", {DType::F16, {N, K}}, WeightInit::normal(2, 0.1));
  // gemm-inputs converts x to f16 once for both GEMMs (before fuse).
  ValueId t = b.glu(b.matmul(x, wg, "g"), b.matmul(x, wu, "u"), GluKind::SwiGLU);
  b.result(b.convert(t, DType::F16, "y"));
  EXPECT_FALSE(bool(b.finish()));
  CompileOptions co;
  co.arch = "sm_90";
  co.kernelCacheDir = test::kernelCacheDir();
  co.enableFusion = {"gated_gemm"};
  Compiled out;
  auto plan = compile(g, co);
  EXPECT_TRUE(bool(plan)) << llvm::toString(plan.takeError());
  if (!plan)
    return out;
  const PlanSection *s = plan->section("program");
  auto prog = decodeProgram(s ? llvm::StringRef(s->bytes) : llvm::StringRef());
  EXPECT_TRUE(bool(prog)) << llvm::toString(prog.takeError());
  if (!prog)
    return out;
  out.prog = std::move(*prog);
  for (const CompiledEntry &e : out.prog.entries)
    for (const LaunchRecord &l : e.launches)
      if (l.op == OpKind::FusedGatedGemm) {
        if (l.kind == LaunchRecord::Kind::Gemm)
          out.gemms.push_back(&l);
        else
          ++out.kernels;
      }
  return out;
}

} // namespace

/// 96 x 40 f16 = 7680 bytes, 30 units: one GEMM over both weights.
TEST(GatedGemm, AdjoiningWeightsTakeOneStackedGemm) {
  Compiled c = compileGated(96, 40);
  ASSERT_EQ(c.gemms.size(), 1u);
  EXPECT_EQ(c.kernels, 1u); // the GLU
  const GemmDesc &g = c.gemms[0]->gemm;
  EXPECT_EQ(g.m, 192);
  EXPECT_EQ(g.n, 16);
  EXPECT_EQ(g.k, 40);
  EXPECT_EQ(g.lda, 40);
  EXPECT_EQ(g.ldc, 192);
  EXPECT_EQ(g.c.space, BufferSpace::Arena);
  ASSERT_EQ(g.a.space, BufferSpace::Weight);
  EXPECT_EQ(g.a.offset, 0u);
  EXPECT_EQ(c.prog.weights[g.a.index].name, "ffn_gate");
  ASSERT_LT(g.a.index + 1, c.prog.weights.size());
  EXPECT_EQ(c.prog.weights[g.a.index + 1].name, "ffn_up");
  EXPECT_TRUE(weightFollows(c.prog.weights, g.a.index, g.a.index + 1));
  EXPECT_NE(c.gemms[0]->what.find("[gate|up stacked]"), std::string::npos);
}

/// 50 x 40 f16 = 4000 bytes: up starts at 4096, not on the byte after gate,
/// so two GEMMs of 50 rows each, the second reading up and writing C from
/// row 50 (100 bytes on: C is f16, the result's type; the same leading
/// dimension), after the first.
TEST(GatedGemm, WeightsApartTakeTwoGemmsIntoTheHalves) {
  Compiled c = compileGated(50, 40);
  ASSERT_EQ(c.gemms.size(), 2u);
  EXPECT_EQ(c.kernels, 1u);
  const GemmDesc &a = c.gemms[0]->gemm, &b = c.gemms[1]->gemm;
  EXPECT_EQ(a.m, 50);
  EXPECT_EQ(b.m, 50);
  EXPECT_EQ(a.ldc, 100);
  EXPECT_EQ(b.ldc, 100);
  EXPECT_EQ(b.c.space, a.c.space);
  EXPECT_EQ(b.c.offset, a.c.offset + 100);
  EXPECT_EQ(b.b, a.b); // the same x
  ASSERT_EQ(a.a.space, BufferSpace::Weight);
  ASSERT_EQ(b.a.space, BufferSpace::Weight);
  EXPECT_EQ(c.prog.weights[a.a.index].name, "ffn_gate");
  EXPECT_EQ(c.prog.weights[b.a.index].name, "ffn_up");
  EXPECT_FALSE(weightFollows(c.prog.weights, a.a.index, b.a.index));
  // The second waits for the first (one node's launches run in order).
  const LaunchRecord *second = c.gemms[1];
  EXPECT_FALSE(second->deps.empty());
  EXPECT_EQ(c.gemms[0]->what.find("stacked"), std::string::npos);
}

/// The runner's placement: table order, each slot at a 256-byte multiple.
TEST(GatedGemm, WeightOffsetsAreTableOrderAligned) {
  std::vector<TensorSlot> w = {{"a", {DType::F16, {50, 40}}},
                               {"b", {DType::F16, {50, 40}}},
                               {"c", {DType::F32, {64}}},
                               {"d", {DType::F32, {1}}}};
  uint64_t total = 0;
  EXPECT_EQ(weightOffsets(w, &total), (std::vector<uint64_t>{0, 4096, 8192, 8448}));
  EXPECT_EQ(total, 8704u);
  EXPECT_FALSE(weightFollows(w, 0, 1)); // 4000 bytes: a gap of 96
  EXPECT_TRUE(weightFollows(w, 2, 3));  // 256 bytes exactly
  EXPECT_FALSE(weightFollows(w, 2, 2));
  EXPECT_FALSE(weightFollows(w, 3, 4)); // past the table
}

/// Refused by the emitter: 8 rows (the GEMV's), an f32 x over f16 weights,
/// f32 weights, an f32 x over quantised weights.
/// (What it emits: CudaEmit.GatedGemmStacksGateAndUp, EmitterTest.cpp.)
TEST(GatedGemm, EmitterRefusesGemvRowsAndTypesItCannotStack) {
  for (auto [x, w, rows, why] :
       {std::tuple<DType, DType, int64_t, const char *>{DType::F16, DType::F16, 8, "8 rows"},
        {DType::F32, DType::F16, 37, "x of dtype f32"},
        {DType::F32, DType::F32, 37, "dtype f32 (f16, bf16 or block-quantised only)"},
        {DType::F32, DType::Q4_K, 37, "x of dtype f32, not f16"}}) {
    Function f("f");
    Builder b(f);
    const int64_t K = isQuantized(w) ? 256 : 40;
    auto xv = b.input("x", {x, {rows, K}});
    auto wg = b.weight("wg", {w, {96, K}}, WeightInit::normal(1, 0.1));
    auto wu = b.weight("wu", {w, {96, K}}, WeightInit::normal(2, 0.1));
    b.result(b.create(OpKind::FusedGatedGemm, {xv, wg, wu},
                      {{"dtype", Attribute::ofDType(DType::F16)}}));
    ASSERT_FALSE(bool(b.finish()));
    auto e = cuda::emitKernel(f, f.node(0), cuda::contiguousLayouts(f, f.node(0)), {});
    ASSERT_FALSE(bool(e)) << why;
    std::string m = llvm::toString(e.takeError());
    EXPECT_NE(m.find(why), std::string::npos) << m;
  }
}
