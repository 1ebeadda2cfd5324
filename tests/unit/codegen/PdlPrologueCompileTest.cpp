//===- PdlPrologueCompileTest.cpp - every form with its prefetch prologue --===//
//
// The programmatic-launch prologues (EmitOptions::pdlPrefetchBytes: dense
// GEMVs prefetch weight rows, decode attention KV rows, before
// griddepcontrol.wait) are off by default, so the emitter tests compile them
// for one form each. Here every GEMV path — lanes over K, tensor cores at 5
// rows of x, a quantised wide decoder, two streams (the gated GEMV),
// fused.matmul_multi with 2 and 3 segments, expert-indexed (no prologue) —
// and decode attention in its register and staged (hybrid) forms with i32
// and i64 positions is emitted with a budget and compiled by NVRTC for sm_90,
// also with FG_PDL_EARLY_TRIGGER; the prologue's call precedes the wait and
// the sizes it carries are non-zero where it applies. CPU only (NVRTC); these
// compiles are kept out of the emitter suite's count.
//
//===----------------------------------------------------------------------===//
#include "codegen/cuda/Kernel.h"
#include "codegen/cuda/Nvrtc.h"
#include "ir/Builder.h"
#include "tests/unit/codegen/TestKernelCache.h"

#include "llvm/ADT/SmallString.h"
#include "llvm/Support/Path.h"

#include <gtest/gtest.h>

#include <functional>

using namespace fg;
using namespace fg::cuda;

namespace {

/// The kernel of the last node `build` makes, emitted with an 8 MiB budget.
KernelSpec lastKernel(const std::function<void(Builder &)> &build) {
  Function fn("t");
  Builder b(fn);
  build(b);
  if (llvm::Error e = b.finish()) {
    ADD_FAILURE() << llvm::toString(std::move(e));
    return {};
  }
  EmitOptions o;
  o.pdlPrefetchBytes = 8 << 20;
  const Node &node = fn.node(static_cast<NodeId>(fn.numNodes() - 1));
  auto ls = emitKernel(fn, node, contiguousLayouts(fn, node), o);
  if (!ls) {
    ADD_FAILURE() << llvm::toString(ls.takeError());
    return {};
  }
  EXPECT_EQ(ls->size(), 1u);
  const KernelSpec *k = ls->empty() ? nullptr : std::get_if<KernelSpec>(&ls->back());
  EXPECT_NE(k, nullptr);
  return k ? *k : KernelSpec{};
}

/// Compiles `k` as emitted and with the early trigger; the prologue call
/// (`call`) comes before the wait.
void compiles(const KernelSpec &k, llvm::StringRef call) {
  SCOPED_TRACE(k.name);
  size_t pro = k.source.find(call.str()), wait = k.source.find("fg_pdl_begin();", pro);
  EXPECT_NE(pro, std::string::npos);
  EXPECT_NE(wait, std::string::npos);
  for (bool early : {false, true}) {
    NvrtcOptions o;
    o.cacheDir = test::kernelCacheDir();
    if (early)
      o.flags.push_back("-DFG_PDL_EARLY_TRIGGER");
    auto m = compileCuda(k.source, k.name, "sm_90", o);
    ASSERT_TRUE(bool(m)) << (early ? "early trigger: " : "") << llvm::toString(m.takeError());
    EXPECT_FALSE(m->cubin.empty());
  }
}

bool has(const KernelSpec &k, llvm::StringRef s) { return llvm::StringRef(k.source).contains(s); }

TensorType T(DType d, std::initializer_list<int64_t> s) { return TensorType(d, s); }

} // namespace

TEST(PdlPrologue, EveryGemvFormCompiles) {
  struct Case {
    const char *what;
    DType wt;
    int64_t M, K;
  };
  for (const Case &c : {Case{"lanes, f16", DType::F16, 1, 256}, Case{"tensor cores", DType::F16, 5, 256},
                        Case{"bf16", DType::BF16, 2, 264}, Case{"f32", DType::F32, 1, 100},
                        Case{"q4_K wide", DType::Q4_K, 1, 512}, Case{"q8_0", DType::Q8_0, 3, 288}}) {
    SCOPED_TRACE(c.what);
    KernelSpec k = lastKernel([&](Builder &b) {
      b.result(b.matmul(b.input("x", T(DType::F32, {c.M, c.K})), b.weight("w", T(c.wt, {77, c.K}))));
    });
    EXPECT_FALSE(has(k, "kPfBytes = 0LL"));
    compiles(k, "fg::gemvPrefetch<Cfg>(");
  }
  // Two streams: the gated GEMV prefetches gate and up rows.
  KernelSpec gated = lastKernel([](Builder &b) {
    b.result(b.create(OpKind::FusedGatedMatmul,
                      {b.input("x", T(DType::F32, {1, 128})), b.weight("wg", T(DType::F16, {90, 128})),
                       b.weight("wu", T(DType::F16, {90, 128}))},
                      {{"kind", Attribute::ofEnum(0)}}));
  });
  EXPECT_FALSE(has(gated, "kPfBytes = 0LL"));
  compiles(gated, "fg::gemvPrefetch<Cfg>(");
  // fused.matmul_multi, 2 and 3 segments.
  for (int segs : {2, 3}) {
    KernelSpec multi = lastKernel([&](Builder &b) {
      std::vector<ValueId> ops{b.input("x", T(DType::F32, {1, 128}))};
      const int64_t rows[] = {100, 36, 36};
      for (int s = 0; s < segs; ++s)
        ops.push_back(b.weight("w" + std::to_string(s), T(DType::F16, {rows[s], 128})));
      b.result(b.create(OpKind::FusedMatmulMulti, ops));
    });
    EXPECT_FALSE(has(multi, "kPfBytes = 0LL"));
    compiles(multi, "fg::gemvMultiPrefetch<Multi>(");
  }
  // Expert-indexed: the experts come from the previous kernels, so none.
  KernelSpec expert = lastKernel([](Builder &b) {
    b.result(b.matmulId(b.input("x", T(DType::F32, {2, 1, 64})), b.weight("w", T(DType::F16, {8, 45, 64})),
                        b.input("ids", T(DType::I32, {2, 3}))));
  });
  EXPECT_TRUE(has(expert, "kPfBlocks = 0LL, kPfBytes = 0LL"));
  compiles(expert, "fg::gemvPrefetch<Cfg>(");
}

TEST(PdlPrologue, EveryAttentionFormCompiles) {
  struct Case {
    int64_t ctx;
    DType pos, cache;
  };
  // 1000 rows: register loads; 8192: the staged (hybrid) form.
  for (const Case &c : {Case{1000, DType::I32, DType::F16}, Case{8192, DType::I32, DType::F16},
                        Case{8192, DType::I64, DType::BF16}, Case{1000, DType::I64, DType::F32}}) {
    SCOPED_TRACE("ctx " + std::to_string(c.ctx) + " " + std::string(dtypeName(c.pos)) + " " +
                 std::string(dtypeName(c.cache)));
    KernelSpec k = lastKernel([&](Builder &b) {
      auto q = b.input("q", T(DType::F32, {1, 8, 128}));
      auto kc = b.state("k_cache.0", TensorType(c.cache, {c.ctx, 2, 128}));
      auto vc = b.state("v_cache.0", TensorType(c.cache, {c.ctx, 2, 128}));
      b.result(b.attention(q, kc, vc, b.input("positions", T(c.pos, {1})), {0.1, 0, 0}));
    });
    EXPECT_FALSE(has(k, "kPfKeys = 0LL"));
    EXPECT_EQ(has(k, ", kStages = 0, kURegs"), c.ctx <= 4096);
    compiles(k, "fg::attentionPrefetch<Cfg>(");
  }
}
