//===- MatmulAddPrefillTest.cpp - the prefill residual add in the GEMM ----===//
//
// fused.matmul_add over more rows than the GEMV takes (issue 15 item 2) is
// one cuBLASLt GEMM: D = x·Wᵀ + r with C = the residual and D = the result.
// On the CPU (NVRTC only, no GPU): the default compile of a prefill-sized
// projection + residual add fuses it, the entry's launches are the gemm-inputs
// conversion of x and one GEMM of the Lt form whose C is the residual's
// buffer and whose D is the result's — no add kernel —, the GEMM waits for
// the launch that wrote its x, and the program round-trips through the plan
// file (and a program of the previous format, without the Lt fields, still
// reads). The CPU reference of the fused plan equals the unfused plan's.
//
//===----------------------------------------------------------------------===//
#include "codegen/cuda/Compile.h"
#include "ir/Builder.h"
#include "runtime/Compare.h"
#include "runtime/Executor.h"
#include "runtime/ProgramIO.h"
#include "tests/unit/codegen/TestKernelCache.h"

#include "llvm/ADT/SmallString.h"
#include "llvm/Support/Path.h"

#include <gtest/gtest.h>

#include <cstring>

using namespace fg;

namespace {

/// y = x · woᵀ + r over `rows` rows (the attention output projection and the
/// residual add of a prefill chunk), compiled for sm_90. x and r are inputs
/// (arena buffers, as in a model), or initialised weights where the CPU
/// reference runs it (the executor sets only integer inputs).
Plan prefillPlan(int64_t rows, DType wt, bool fusion, bool initialised = false) {
  Graph g;
  Function &fn = g.addFunction("prefill");
  Builder b(fn);
  TensorType xt{DType::F32, {rows, 96}}, rt{DType::F32, {rows, 80}};
  ValueId x = initialised ? b.weight("x", xt, WeightInit::normal(1, 1.0)) : b.input("x", xt);
  ValueId r =
      initialised ? b.weight("residual", rt, WeightInit::normal(2, 1.0)) : b.input("residual", rt);
  ValueId w = b.weight("attn_output", {wt, {80, 96}}, WeightInit::normal(3, 0.1));
  b.result(b.add(b.matmul(x, w), r, "y"));
  EXPECT_FALSE(bool(b.finish()));
  CompileOptions co;
  co.fusion = fusion;
  co.arch = "sm_90";
  co.kernelCacheDir = test::kernelCacheDir();
  auto plan = compile(g, co);
  EXPECT_TRUE(bool(plan)) << llvm::toString(plan.takeError());
  return std::move(*plan);
}

CompiledProgram programOf(const Plan &plan) {
  const PlanSection *s = plan.section("program");
  EXPECT_NE(s, nullptr);
  auto prog = decodeProgram(s ? llvm::StringRef(s->bytes) : llvm::StringRef());
  EXPECT_TRUE(bool(prog)) << llvm::toString(prog.takeError());
  return prog ? std::move(*prog) : CompiledProgram{};
}

const IoBinding *binding(const std::vector<IoBinding> &list, llvm::StringRef name) {
  for (const IoBinding &b : list)
    if (b.name == name)
      return &b;
  return nullptr;
}

} // namespace

/// 9 (one past the GEMV), 64 and 100 rows, f16 and bf16 weights: one fused
/// node; the launches are x's conversion and one Lt GEMM reading the residual
/// input's buffer as C and writing the output's as D; no add launch.
TEST(MatmulAddPrefill, OneLtGemmWithTheResidualAsC) {
  for (DType wt : {DType::F16, DType::BF16})
    for (int64_t rows : {int64_t(9), int64_t(64), int64_t(100)}) {
      SCOPED_TRACE(std::string(dtypeName(wt)) + " rows " + std::to_string(rows));
      Plan plan = prefillPlan(rows, wt, /*fusion=*/true);
      const Function *fn = plan.graph().lookup("prefill");
      ASSERT_NE(fn, nullptr);
      unsigned fused = 0, adds = 0;
      for (const Node &n : fn->nodes()) {
        fused += n.kind == OpKind::FusedMatmulAdd;
        adds += n.kind == OpKind::Add;
      }
      EXPECT_EQ(fused, 1u);
      EXPECT_EQ(adds, 0u);
      CompiledProgram prog = programOf(plan);
      ASSERT_EQ(prog.entries.size(), 1u);
      const CompiledEntry &e = prog.entries[0];
      const IoBinding *r = binding(e.inputs, "residual"), *y = binding(e.outputs, "y");
      ASSERT_NE(r, nullptr);
      ASSERT_NE(y, nullptr);
      unsigned gemms = 0;
      for (size_t i = 0; i < e.launches.size(); ++i) {
        const LaunchRecord &l = e.launches[i];
        EXPECT_NE(l.op, OpKind::Add) << l.what;
        if (l.kind != LaunchRecord::Kind::Gemm)
          continue;
        ++gemms;
        const GemmDesc &g = l.gemm;
        EXPECT_EQ(l.op, OpKind::FusedMatmulAdd);
        EXPECT_TRUE(g.lt);
        EXPECT_EQ(g.c, r->where) << "C is the residual";
        EXPECT_EQ(g.d, y->where) << "D is the result";
        EXPECT_FALSE(g.c == g.d);
        EXPECT_EQ(g.alpha, 1.0f);
        EXPECT_EQ(g.beta, 1.0f);
        EXPECT_EQ(g.aType, wt);
        EXPECT_EQ(g.bType, wt); // x converted by gemm-inputs, read in place
        EXPECT_EQ(g.cType, DType::F32);
        EXPECT_EQ(g.m, 80);
        EXPECT_EQ(g.n, rows);
        EXPECT_EQ(g.ldc, 80);
        EXPECT_EQ(g.ldd, 80);
        // After the launch that converted x (the gemm-inputs convert).
        ASSERT_EQ(l.deps.size(), 1u);
        EXPECT_EQ(e.launches[l.deps[0]].op, OpKind::Convert);
      }
      EXPECT_EQ(gemms, 1u);
      EXPECT_EQ(e.launches.size(), 2u + (e.launches.front().node == kNoNode)); // (input check)
    }
}

/// Without fusion the same graph keeps a plain GEMM (lt false) and an add.
TEST(MatmulAddPrefill, UnfusedKeepsThePlainGemmAndTheAdd) {
  CompiledProgram prog = programOf(prefillPlan(64, DType::F16, /*fusion=*/false));
  ASSERT_EQ(prog.entries.size(), 1u);
  unsigned adds = 0, gemms = 0;
  for (const LaunchRecord &l : prog.entries[0].launches) {
    adds += l.op == OpKind::Add;
    if (l.kind == LaunchRecord::Kind::Gemm) {
      ++gemms;
      EXPECT_FALSE(l.gemm.lt);
    }
  }
  EXPECT_EQ(adds, 1u);
  EXPECT_EQ(gemms, 1u);
}

/// The fused plan's CPU reference equals the unfused plan's (the fused op's
/// reference is its decomposition over 64 rows, with x rounded to f16 by the
/// same gemm-inputs convert in both).
TEST(MatmulAddPrefill, ReferenceEqualsUnfused) {
  Plan fused = prefillPlan(64, DType::F16, true, /*initialised=*/true),
       plain = prefillPlan(64, DType::F16, false, /*initialised=*/true);
  EXPECT_NE(fused.graph().lookup("prefill")->nodes().size(), 0u);
  unsigned fusedNodes = 0;
  for (const Node &n : fused.graph().lookup("prefill")->nodes())
    fusedNodes += n.kind == OpKind::FusedMatmulAdd;
  EXPECT_EQ(fusedNodes, 1u);
  std::vector<std::vector<float>> ys;
  for (const Plan *p : {&fused, &plain}) {
    ExecOptions eo;
    eo.device = ExecOptions::Device::Cpu;
    auto ex = Executor::create(*p, eo);
    ASSERT_TRUE(bool(ex)) << llvm::toString(ex.takeError());
    ASSERT_FALSE(bool(ex->run("prefill")));
    auto y = ex->output("y");
    ASSERT_TRUE(bool(y)) << llvm::toString(y.takeError());
    ys.push_back(y->toFloats());
  }
  EXPECT_LE(normalizedError(ys[0], ys[1]), 1e-6);
}

/// The Lt fields (lt, ldd, d) and a launch's ActQuant survive the plan
/// file; a program tagged FGPZ (before the staging space) or FGQA (before
/// stacked GEMMs over two weight slots) reads as it is,
/// one of the format before the ActQuant byte (tag FGPY)
/// with every launch exact, and one of the format before the Lt fields (tag
/// FGPW, GEMM records without them) with its GEMMs plain.
TEST(MatmulAddPrefill, PlanRoundTripsAndThePreviousFormatReads) {
  Plan plan = prefillPlan(64, DType::BF16, true);
  auto back = Plan::deserialize(plan.serialize(), "matmul-add.plan");
  ASSERT_TRUE(bool(back)) << llvm::toString(back.takeError());
  CompiledProgram a = programOf(plan), b = programOf(*back);
  ASSERT_EQ(a.entries.size(), 1u);
  ASSERT_EQ(b.entries.size(), 1u);
  ASSERT_EQ(a.entries[0].launches.size(), b.entries[0].launches.size());
  bool sawLt = false;
  for (size_t i = 0; i < a.entries[0].launches.size(); ++i) {
    const GemmDesc &ga = a.entries[0].launches[i].gemm, &gb = b.entries[0].launches[i].gemm;
    EXPECT_EQ(ga.lt, gb.lt);
    EXPECT_EQ(ga.ldd, gb.ldd);
    EXPECT_EQ(ga.d, gb.d);
    EXPECT_EQ(ga.c, gb.c);
    sawLt |= gb.lt;
  }
  EXPECT_TRUE(sawLt);

  // A hand-made program with one plain GEMM whose Lt fields hold a marker;
  // cutting those 22 bytes (lt u8, ldd i64, d: space u8, index u32, offset
  // u64) and writing the old tag gives the previous format.
  CompiledProgram p;
  p.arch = "sm_90";
  CompiledEntry e;
  e.name = "main";
  LaunchRecord l;
  l.kind = LaunchRecord::Kind::Gemm;
  l.gemm.m = 8;
  l.gemm.n = 16;
  l.gemm.k = 32;
  l.gemm.lda = l.gemm.ldb = 32;
  l.gemm.ldc = 8;
  l.gemm.c = {BufferSpace::Arena, 0, 4096};
  l.gemm.ldd = 0x0123456789abcdefLL;
  l.gemm.d = {BufferSpace::Arena, 0, 0x0fedcba987654321ULL};
  l.what = "%y = matmul";
  l.actQuant = ActQuant::Int8NormDeferred;
  e.launches.push_back(l);
  // A (f32, 8 x 32 transposed) at 0, B (32 x 16) at 0, C (8 x 16) at 4096:
  // C ends at byte 4608.
  e.arenaBytes = 4608;
  p.entries.push_back(e);
  {
    // One byte less of arena and C reaches past it: a corrupt plan, not a
    // write past the arena on the device. So does a leading dimension
    // shorter than the rows.
    CompiledProgram small = p;
    small.entries[0].arenaBytes = 4607;
    auto r = decodeProgram(encodeProgram(small).bytes);
    ASSERT_FALSE(bool(r));
    EXPECT_NE(llvm::toString(r.takeError()).find("gemm reaches past its buffer"),
              std::string::npos);
    CompiledProgram shortLd = p;
    shortLd.entries[0].launches[0].gemm.ldc = 4;
    auto s = decodeProgram(encodeProgram(shortLd).bytes);
    ASSERT_FALSE(bool(s));
    EXPECT_NE(llvm::toString(s.takeError()).find("gemm leading dimension below its rows"),
              std::string::npos);
  }
  std::string bytes = encodeProgram(p).bytes;
  // The Lt fields (lt, ldd, d) as written, to find the records' layout.
  std::string marker(22, '\0');
  marker[0] = 0; // lt
  int64_t ldd = l.gemm.ldd;
  std::memcpy(&marker[1], &ldd, 8);
  marker[9] = static_cast<char>(BufferSpace::Arena);
  uint32_t index = 0;
  std::memcpy(&marker[10], &index, 4);
  uint64_t off = l.gemm.d.offset;
  std::memcpy(&marker[14], &off, 8);
  {
    auto now = decodeProgram(bytes);
    ASSERT_TRUE(bool(now)) << llvm::toString(now.takeError());
    EXPECT_EQ(now->entries[0].launches[0].gemm.ldd, 0x0123456789abcdefLL);
    EXPECT_EQ(now->entries[0].launches[0].actQuant, ActQuant::Int8NormDeferred);
    EXPECT_EQ(now->entries[0].launches[0].gemm.batch, 1);
    uint32_t tag = 0;
    std::memcpy(&tag, bytes.data(), 4);
    EXPECT_EQ(tag, 0x46475143u); // "FGQC": written now
  }
  // FGQC's GEMM records end the Lt fields with the strided batch (count,
  // then A, B and C strides): 28 bytes the older layouts lack.
  const size_t markerAt = bytes.find(marker);
  ASSERT_NE(markerAt, std::string::npos);
  const size_t batchAt = markerAt + marker.size();
  int32_t batch = 0;
  std::memcpy(&batch, &bytes[batchAt], 4);
  ASSERT_EQ(batch, 1);
  {
    // A batch of three, or a negative stride, is a corrupt record.
    std::string bad = bytes;
    int32_t three = 3;
    std::memcpy(&bad[batchAt], &three, 4);
    auto r = decodeProgram(bad);
    ASSERT_FALSE(bool(r));
    EXPECT_NE(llvm::toString(r.takeError()).find("bad gemm batch"), std::string::npos);
    bad = bytes;
    int64_t negative = -4;
    std::memcpy(&bad[batchAt + 4], &negative, 8);
    ASSERT_FALSE(bool(decodeProgram(bad)));
  }
  bytes.erase(batchAt, 28);
  {
    // FGPZ (the input check without staging arguments), FGQA (weights in
    // any placement: no stacked GEMM) and FGQB (no batches) have the same
    // layout.
    for (uint32_t old : {0x4647505Au /* "FGPZ" */, 0x46475141u /* "FGQA" */,
                         0x46475142u /* "FGQB" */}) {
      std::string z = bytes;
      std::memcpy(&z[0], &old, 4);
      auto r = decodeProgram(z);
      ASSERT_TRUE(bool(r)) << llvm::toString(r.takeError());
      EXPECT_EQ(r->entries[0].launches[0].actQuant, ActQuant::Int8NormDeferred);
      EXPECT_EQ(r->entries[0].launches[0].gemm.batch, 1);
    }
    // Tagged FGQB from here on (the older layouts' tests below).
    uint32_t fgqb = 0x46475142u;
    std::memcpy(&bytes[0], &fgqb, 4);
  }
  // The ActQuant byte follows `what`; a bad one is a corrupt section.
  const size_t whatAt = bytes.find("%y = matmul");
  ASSERT_NE(whatAt, std::string::npos);
  const size_t actAt = whatAt + std::strlen("%y = matmul");
  ASSERT_EQ(bytes[actAt], static_cast<char>(ActQuant::Int8NormDeferred));
  {
    std::string bad = bytes;
    bad[actAt] = 7;
    auto r = decodeProgram(bad);
    ASSERT_FALSE(bool(r));
    EXPECT_NE(llvm::toString(r.takeError()).find("bad activation quantisation"), std::string::npos);
  }
  bytes.erase(actAt, 1);
  {
    uint32_t v8 = 0x46475059; // "FGPY": no ActQuant byte
    std::string y = bytes;
    std::memcpy(&y[0], &v8, 4);
    auto r = decodeProgram(y);
    ASSERT_TRUE(bool(r)) << llvm::toString(r.takeError());
    EXPECT_EQ(r->entries[0].launches[0].actQuant, ActQuant::Exact);
    EXPECT_EQ(r->entries[0].launches[0].gemm.ldd, 0x0123456789abcdefLL);
  }
  size_t at = bytes.find(marker);
  ASSERT_NE(at, std::string::npos);
  bytes.erase(at, marker.size());
  uint32_t oldTag = 0x46475057; // "FGPW"
  std::memcpy(&bytes[0], &oldTag, 4);
  auto old = decodeProgram(bytes);
  ASSERT_TRUE(bool(old)) << llvm::toString(old.takeError());
  const GemmDesc &g = old->entries[0].launches[0].gemm;
  EXPECT_FALSE(g.lt);
  EXPECT_EQ(g.ldd, 0);
  EXPECT_EQ(g.m, 8);
  EXPECT_EQ(g.ldc, 8);
  EXPECT_EQ(g.c.offset, 4096u);
  EXPECT_EQ(old->entries[0].launches[0].what, "%y = matmul");
}
