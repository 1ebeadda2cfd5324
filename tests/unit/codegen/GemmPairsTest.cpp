//===- GemmPairsTest.cpp - sibling GEMMs of one x as one strided batch ----===//
//
// GemmPairs.h on the CPU: a prefill chunk's two projections of one x (k and
// v) compiled for sm_90 become one cuBLAS strided batch of two whose A
// stride is the distance between the weights in the runner's placement and
// whose C stride is the distance between the two results in the arena; with
// FG_DEBUG_GEMM_PAIRS=0 they stay two GEMMs. Then pairSiblingGemms on
// hand-made launch lists: the rules that keep a pair out (shapes, B, a
// dependency after the host, overlapping results, strides of two signs) and
// the batch order (from the lower pair on).
//
//===----------------------------------------------------------------------===//
#include "codegen/cuda/GemmPairs.h"
#include "ir/Builder.h"
#include "runtime/ProgramIO.h"
#include "tests/unit/codegen/SwitchedProgram.h"

#include <gtest/gtest.h>

#include <algorithm>

using namespace fg;
using namespace fg::cuda;

namespace {

/// k = x·W_kᵀ and v = x·W_vᵀ over 16 rows (more than the GEMV takes), both
/// results of the entry.
CompiledProgram compileSiblings(bool pairs) {
  Graph g;
  Function &fn = g.addFunction("prefill");
  Builder b(fn);
  ValueId x = b.input("x", {DType::F16, {16, 64}});
  ValueId wk = b.weight("attn_k", {DType::F16, {24, 64}}, WeightInit::normal(1, 0.1));
  ValueId wv = b.weight("attn_v", {DType::F16, {24, 64}}, WeightInit::normal(2, 0.1));
  b.result(b.matmul(x, wk, "k"));
  b.result(b.matmul(x, wv, "v"));
  EXPECT_FALSE(bool(b.finish()));
  return test::programWithSwitch(g, "FG_DEBUG_GEMM_PAIRS", pairs);
}

std::vector<const LaunchRecord *> gemms(const CompiledProgram &p) {
  std::vector<const LaunchRecord *> out;
  for (const CompiledEntry &e : p.entries)
    for (const LaunchRecord &l : e.launches)
      if (l.kind == LaunchRecord::Kind::Gemm)
        out.push_back(&l);
  return out;
}

/// A plain GEMM record: C[24 × 16] (f32) = W[24 × 64]ᵀ-form · x (f16), W in
/// weight slot `w`, x at arena 0, C at arena `c`.
LaunchRecord gemm(uint32_t w, uint64_t c, std::vector<uint32_t> deps = {}, int64_t m = 24) {
  LaunchRecord l;
  l.kind = LaunchRecord::Kind::Gemm;
  GemmDesc &g = l.gemm;
  g.transA = true;
  g.m = m, g.n = 16, g.k = 64;
  g.aType = g.bType = DType::F16;
  g.cType = DType::F32;
  g.lda = 64, g.ldb = 64, g.ldc = m;
  g.a = {BufferSpace::Weight, w, 0};
  g.b = {BufferSpace::Arena, 0, 0};
  g.c = {BufferSpace::Arena, 0, c};
  l.deps = std::move(deps);
  l.node = w + 10;
  l.what = "%y" + std::to_string(w);
  return l;
}

LaunchRecord kernel(std::vector<uint32_t> deps) {
  LaunchRecord l;
  l.kind = LaunchRecord::Kind::Kernel;
  l.symbol = "k";
  l.deps = std::move(deps);
  l.node = 99;
  return l;
}

struct Case {
  CompiledEntry entry;
  KernelSources sources;
  std::vector<TensorSlot> weights = {{"w0", {DType::F16, {24, 64}}},
                                     {"w1", {DType::F16, {24, 64}}},
                                     {"w2", {DType::F16, {32, 64}}}};
  explicit Case(std::vector<LaunchRecord> ls) {
    entry.launches = std::move(ls);
    sources.sourceOfLaunch.emplace_back();
    for (const LaunchRecord &l : entry.launches) {
      if (l.kind == LaunchRecord::Kind::Gemm) {
        sources.sourceOfLaunch.back().push_back(~size_t(0));
      } else {
        sources.sourceOfLaunch.back().push_back(sources.sources.size());
        sources.sources.emplace_back(l.symbol, "source");
      }
    }
  }
  unsigned run() { return pairSiblingGemms(entry, sources, weights); }
};

constexpr uint64_t kC = 24 * 16 * 4; // one result's bytes

} // namespace

TEST(GemmPairs, KAndVOfAChunkTakeOneStridedBatch) {
  CompiledProgram p = compileSiblings(true);
  std::vector<const LaunchRecord *> gs = gemms(p);
  ASSERT_EQ(gs.size(), 1u);
  const GemmDesc &g = gs[0]->gemm;
  EXPECT_EQ(g.batch, 2);
  EXPECT_EQ(g.m, 24);
  EXPECT_EQ(g.n, 16);
  EXPECT_EQ(g.strideB, 0);
  ASSERT_EQ(g.a.space, BufferSpace::Weight);
  EXPECT_EQ(p.weights[g.a.index].name, "attn_k");
  // 24 x 64 f16 = 3072 bytes = 12 units of 256: attn_v starts 3072 bytes on.
  const std::vector<uint64_t> at = weightOffsets(p.weights);
  ASSERT_LT(g.a.index + 1, at.size());
  EXPECT_EQ(g.strideA, static_cast<int64_t>((at[g.a.index + 1] - at[g.a.index]) / 2));
  EXPECT_EQ(g.strideA, 24 * 64);
  // The two results: the entry's outputs k and v, strideC f32 elements apart.
  const CompiledEntry &e = p.entries[0];
  ASSERT_EQ(e.outputs.size(), 2u);
  const uint64_t lo = std::min(e.outputs[0].where.offset, e.outputs[1].where.offset),
                 hi = std::max(e.outputs[0].where.offset, e.outputs[1].where.offset);
  EXPECT_EQ(g.c.offset, lo);
  EXPECT_EQ(static_cast<uint64_t>(g.strideC) * 4, hi - lo);
  EXPECT_NE(gs[0]->what.find("one strided batch"), std::string::npos);
}

TEST(GemmPairs, OffLeavesTwoGemms) {
  CompiledProgram p = compileSiblings(false);
  std::vector<const LaunchRecord *> gs = gemms(p);
  ASSERT_EQ(gs.size(), 2u);
  for (const LaunchRecord *l : gs)
    EXPECT_EQ(l->gemm.batch, 1);
}

TEST(GemmPairs, PairsAcrossALaunchBetweenAndRenumbers) {
  // gemm 0, a kernel reading its result, gemm 2 (deps before 0), a kernel
  // reading gemm 2's result: the pair runs at 0, the last kernel waits for it.
  Case c({gemm(0, 4096), kernel({0}), gemm(1, 4096 + kC, {}), kernel({2})});
  ASSERT_EQ(c.run(), 1u);
  ASSERT_EQ(c.entry.launches.size(), 3u);
  const GemmDesc &g = c.entry.launches[0].gemm;
  EXPECT_EQ(g.batch, 2);
  EXPECT_EQ(g.strideA, 24 * 64);
  EXPECT_EQ(g.strideC, 24 * 16);
  EXPECT_EQ(c.entry.launches[2].deps, std::vector<uint32_t>{0});
  EXPECT_EQ(c.sources.sources.size(), 2u); // the kernels' sources stay
}

TEST(GemmPairs, TheLowerPairFirst) {
  // Host's weight and result above the other's: the batch starts at the other's.
  Case c({gemm(1, 4096 + kC), gemm(0, 4096)});
  ASSERT_EQ(c.run(), 1u);
  const GemmDesc &g = c.entry.launches[0].gemm;
  EXPECT_EQ(g.a.index, 0u);
  EXPECT_EQ(g.c.offset, 4096u);
  EXPECT_EQ(g.strideA, 24 * 64);
  EXPECT_EQ(g.strideC, 24 * 16);
}

TEST(GemmPairs, RefusedPairs) {
  // Strides of two signs: weight 1 above, result below.
  EXPECT_EQ(Case({gemm(0, 4096 + kC), gemm(1, 4096)}).run(), 0u);
  // Overlapping results (the memory plan reused the bytes).
  EXPECT_EQ(Case({gemm(0, 4096), gemm(1, 4096 + kC / 2)}).run(), 0u);
  // The later result on the B both read (x moved to 20000 for both).
  LaunchRecord onB0 = gemm(0, 4096), onB1 = gemm(1, 20000);
  onB0.gemm.b.offset = onB1.gemm.b.offset = 20000;
  EXPECT_EQ(Case({onB0, onB1}).run(), 0u);
  // A dependency after the host.
  EXPECT_EQ(Case({gemm(0, 4096), kernel({}), gemm(1, 8192, {1})}).run(), 0u);
  // Another shape (32 rows), another B, the Lt form.
  LaunchRecord other = gemm(2, 8192);
  other.gemm.m = 32;
  other.gemm.ldc = 32;
  EXPECT_EQ(Case({gemm(0, 4096), other}).run(), 0u);
  LaunchRecord otherB = gemm(1, 8192);
  otherB.gemm.b.offset = 512;
  EXPECT_EQ(Case({gemm(0, 4096), otherB}).run(), 0u);
  LaunchRecord lt = gemm(1, 8192);
  lt.gemm.lt = true;
  EXPECT_EQ(Case({gemm(0, 4096), lt}).run(), 0u);
  // Three siblings: one pair, the third stays single.
  Case three({gemm(0, 4096), gemm(1, 8192), gemm(1, 16384)});
  EXPECT_EQ(three.run(), 1u);
  ASSERT_EQ(three.entry.launches.size(), 2u);
  EXPECT_EQ(three.entry.launches[0].gemm.batch, 2);
  EXPECT_EQ(three.entry.launches[1].gemm.batch, 1);
}

TEST(GemmPairs, StridesAreThePlacedDistances) {
  // 21 x 64 f16 weights (the GEMMs read their first 20 rows): 2688 bytes,
  // placed 2816 apart (whole 256-byte units), so strideA is 1408 elements,
  // not m·k = 1280 nor the slot's 1344; the results 512
  // bytes apart beyond their own 1280: strideC (1280 + 512) / 4 = 448, not
  // m·n = 320.
  constexpr uint64_t c20 = 20 * 16 * 4;
  Case c({gemm(0, 4096, {}, 20), gemm(1, 4096 + c20 + 512, {}, 20)});
  c.weights = {{"w0", {DType::F16, {21, 64}}}, {"w1", {DType::F16, {21, 64}}}};
  ASSERT_EQ(c.run(), 1u);
  const GemmDesc &g = c.entry.launches[0].gemm;
  EXPECT_EQ(g.strideA, 1408);
  EXPECT_EQ(g.strideC, 448);
}

TEST(GemmPairs, TheHostTakesBothDependencies) {
  // Launch 2 waits for 0, launch 3 for 1: the pair at 2 waits for both.
  Case c({kernel({}), kernel({}), gemm(0, 4096, {0}), gemm(1, 8192, {1})});
  ASSERT_EQ(c.run(), 1u);
  ASSERT_EQ(c.entry.launches.size(), 3u);
  EXPECT_EQ(c.entry.launches[2].deps, (std::vector<uint32_t>{0, 1}));
}

TEST(GemmPairs, ReaderRefusesOverlappingBatchResults) {
  // A batch of two whose C stride is shorter than one result: the two would
  // write the same bytes side by side. A corrupt plan.
  CompiledProgram p;
  p.arch = "sm_90";
  CompiledEntry e;
  e.name = "main";
  LaunchRecord l = gemm(0, 4096);
  l.gemm.a = {BufferSpace::Arena, 0, 0};
  l.gemm.batch = 2;
  l.gemm.strideA = 0;
  l.gemm.strideC = 24 * 16 - 1;
  e.launches.push_back(l);
  e.arenaBytes = 1 << 16;
  p.entries.push_back(e);
  auto r = decodeProgram(encodeProgram(p).bytes);
  ASSERT_FALSE(bool(r));
  EXPECT_NE(llvm::toString(r.takeError()).find("bad gemm batch"), std::string::npos);
  p.entries[0].launches[0].gemm.strideC = 24 * 16; // back to back: fine
  auto ok = decodeProgram(encodeProgram(p).bytes);
  EXPECT_TRUE(bool(ok)) << llvm::toString(ok.takeError());
}
