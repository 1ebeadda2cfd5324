//===- MoePrefillGpuTest.cpp - grouped expert GEMM vs the reference ---------===//
//
// Prefill chunks (9+ tokens) of matmul_id and fused.gated_matmul_id with
// 16-bit weights run the routing kernel and the grouped GEMM
// (codegen/cuda/kernels/moe.cuh). Against the CPU reference: experts with
// zero, one and many (token, slot) pairs, N and K that are not multiples of
// the tiles, one x row per slot (the down projection), the GLU epilogue with
// biases, the W-moe shapes at 512 tokens; and replays of one graph are
// bit-identical although the permutation's order inside an expert depends on
// atomics.
//
//===----------------------------------------------------------------------===//
#include "GpuTestUtil.h"

#include <algorithm>

using namespace fg;
using namespace fg::gputest;

namespace {

struct MoeCase {
  int64_t T, X, E, N, K, kk;
  DType w = DType::F16;
  bool gated = false, bias = false;
};

Graph buildGraph(const MoeCase &c) {
  Graph g;
  Function &fn = g.addFunction("main");
  Builder b(fn);
  auto x = b.weight("x", {DType::F32, {c.T, c.X, c.K}}, randn());
  auto ids = b.input("ids", {DType::I32, {c.T, c.kk}});
  double std = 1.0 / std::sqrt(static_cast<double>(c.K));
  auto w = b.weight("gate_exps", {c.w, {c.E, c.N, c.K}}, randn(std));
  if (!c.gated) {
    b.result(b.matmulId(x, w, ids, "out"));
  } else {
    std::vector<ValueId> ops{x, w, b.weight("up_exps", {c.w, {c.E, c.N, c.K}}, randn(std)), ids};
    if (c.bias) {
      ops.push_back(b.weight("b_gate", {DType::F32, {c.E, c.N}}, randn(0.1)));
      ops.push_back(b.weight("b_up", {DType::F32, {c.E, c.N}}, randn(0.1)));
    }
    b.result(b.create(OpKind::FusedGatedMatmulId, ops,
                      {{"kind", Attribute::ofEnum(0)},
                       {"alpha", Attribute::ofFloat(1.702)},
                       {"limit", Attribute::ofFloat(7.0)}},
                      "out"));
  }
  EXPECT_FALSE(bool(b.finish()));
  return g;
}

/// Expert 0 gets no pair, expert 1 exactly one, expert 2 many (slot 0 of
/// every token but the first), the other slots spread over experts 3.. .
Inputs zeroOneMany(const MoeCase &c) {
  Inputs in;
  std::vector<int32_t> &ids = in["ids"];
  for (int64_t t = 0; t < c.T; ++t)
    for (int64_t j = 0; j < c.kk; ++j) {
      int32_t e;
      if (j == 0)
        e = t == 0 ? 1 : 2;
      else
        e = static_cast<int32_t>(3 + (t * 7 + j * 3) % (c.E - 3));
      ids.push_back(e);
    }
  return in;
}

/// Distinct experts per token, drawn deterministically (a router's top-k).
Inputs spread(const MoeCase &c, uint32_t seed) {
  Inputs in;
  std::vector<int32_t> &ids = in["ids"];
  uint32_t s = seed;
  for (int64_t t = 0; t < c.T; ++t) {
    std::vector<int32_t> used;
    while (static_cast<int64_t>(used.size()) < c.kk) {
      s = s * 1664525u + 1013904223u;
      int32_t e = static_cast<int32_t>((s >> 8) % static_cast<uint32_t>(c.E));
      if (std::find(used.begin(), used.end(), e) == used.end())
        used.push_back(e);
    }
    ids.insert(ids.end(), used.begin(), used.end());
  }
  return in;
}

double tolerance(DType w) { return w == DType::BF16 ? 1e-3 : 1e-4; }

TEST(GpuGroupedExpert, ZeroOneAndManyPairsPerExpert) {
  FG_REQUIRE_GPU();
  for (DType w : {DType::F16, DType::BF16}) {
    MoeCase c{40, 1, 8, 100, 72, 2, w};
    expectMatchesReference(buildGraph(c), zeroOneMany(c), tolerance(w));
    c.gated = true;
    c.bias = true;
    expectMatchesReference(buildGraph(c), zeroOneMany(c), tolerance(w));
  }
}

TEST(GpuGroupedExpert, OneXRowPerSlot) {
  FG_REQUIRE_GPU();
  MoeCase c{65, 4, 16, 64, 96, 4};
  expectMatchesReference(buildGraph(c), spread(c, 3), tolerance(c.w));
}

/// Every pair on one expert: one partial tile (63 pairs) and several tiles
/// with a partial last one (130), one and two streams, under the rule (64
/// rows for one stream, 32 for two) and with 32- and 64-row tiles forced
/// (FG_DEBUG_MOE_ROWS).
TEST(GpuGroupedExpert, AllPairsOnOneExpert) {
  FG_REQUIRE_GPU();
  for (const char *rows : {"", "32", "64"}) {
    ScopedEnv env("FG_DEBUG_MOE_ROWS", rows);
    for (int64_t T : {63, 130})
      for (bool gated : {false, true}) {
        SCOPED_TRACE(std::string("rows '") + rows + "' T " + std::to_string(T) +
                     (gated ? " gated" : ""));
        MoeCase c{T, 1, 8, 70, 64, 1};
        c.gated = gated;
        Inputs in;
        in["ids"].assign(static_cast<size_t>(c.T), 5);
        expectMatchesReference(buildGraph(c), in, tolerance(c.w));
      }
  }
}

/// W-moe at 512 tokens: gate|up (+ GLU) and down, 128 experts, top-8.
TEST(GpuGroupedExpert, WMoeShapes) {
  FG_REQUIRE_GPU();
  MoeCase up{512, 1, 128, 768, 2048, 8, DType::BF16, true};
  expectMatchesReference(buildGraph(up), spread(up, 11), tolerance(up.w));
  MoeCase down{512, 8, 128, 2048, 768, 8, DType::F16};
  expectMatchesReference(buildGraph(down), spread(down, 12), tolerance(down.w));
}

/// The warps of m tiles past a tile's rows skipping their mmas
/// (EmitOptions::groupedExpertSkipRows, the default for block-quantised
/// experts; FG_DEBUG_MOE_SKIP_ROWS=0 computes them) must give the same bits
/// as computing them. q4_K, q8_0 and f16 experts,
/// one and two streams, 32- and 64-row tiles (n tiles a warp: 2 to 8), with
/// experts of 0, 1 and many pairs; one graph compiled each way (randn draws
/// new seeds per graph).
TEST(GpuGroupedExpert, SkippedRowsGiveTheSameBits) {
  FG_REQUIRE_GPU();
  for (DType w : {DType::Q4_K, DType::Q8_0, DType::F16})
    for (const char *rows : {"32", "64"})
      for (bool gated : {false, true}) {
        SCOPED_TRACE(std::string(dtypeName(w)) + " rows " + rows + (gated ? " gated" : ""));
        ScopedEnv tile("FG_DEBUG_MOE_ROWS", rows);
        MoeCase c{40, 1, 8, 100, 256, 2, w};
        c.gated = gated;
        const Graph g = buildGraph(c);
        auto bytes = [&](const char *name, const char *value) {
          ScopedEnv env(name, value);
          auto gpu = gpuGraphExecutor(g);
          EXPECT_TRUE(gpu.has_value());
          return gpu ? runBytes(*gpu, {{"ids", zeroOneMany(c)["ids"]}}) : std::vector<uint8_t>{};
        };
        std::vector<uint8_t> base = bytes("FG_DEBUG_MOE_SKIP_ROWS", "1");
        ASSERT_FALSE(base.empty());
        EXPECT_EQ(base, bytes("FG_DEBUG_MOE_SKIP_ROWS", "0")) << "without the skip";
      }
}

/// x converted to f16 once before the grouped GEMM over block-quantised
/// experts (FG_DEBUG_MOE_HALF_X=1, opt-in: the gemm-inputs pass's convert and
/// the kernel's 16-byte f16 loads, kXVec16) gives the bits of the default,
/// which rounds the same f32 x to f16 inside the GEMM. q4_K and q8_0, one and
/// two streams; the plan with the switch must hold the convert.
TEST(GpuGroupedExpert, HalfXGivesTheSameBits) {
  FG_REQUIRE_GPU();
  for (DType w : {DType::Q4_K, DType::Q8_0})
    for (bool gated : {false, true}) {
      SCOPED_TRACE(std::string(dtypeName(w)) + (gated ? " gated" : ""));
      MoeCase c{40, 1, 8, 100, 256, 2, w};
      c.gated = gated;
      const Graph g = buildGraph(c);
      auto bytes = [&](const char *halfX) -> std::vector<uint8_t> {
        ScopedEnv env("FG_DEBUG_MOE_HALF_X", halfX);
        CompileOptions co;
        co.pipeline = "canonicalize,cse,dce,gemm-inputs";
        auto plan = compile(g, co);
        if (!plan) {
          ADD_FAILURE() << errString(plan.takeError());
          return {};
        }
        size_t converts = 0;
        for (const Node &n : plan->graph().lookup("main")->nodes())
          converts += n.kind == OpKind::Convert;
        EXPECT_EQ(converts, std::string(halfX) == "1" ? 1u : 0u);
        auto gpu = gpuGraphExecutor(*plan);
        return gpu ? runBytes(*gpu, {{"ids", zeroOneMany(c)["ids"]}}) : std::vector<uint8_t>{};
      };
      std::vector<uint8_t> base = bytes("0");
      ASSERT_FALSE(base.empty());
      EXPECT_EQ(base, bytes("1"));
    }
}

TEST(GpuGroupedExpertReplay, BitIdentical) {
  FG_REQUIRE_GPU();
  MoeCase c{300, 1, 32, 128, 256, 4, DType::F16, true};
  auto gpu = gpuGraphExecutor(buildGraph(c));
  ASSERT_TRUE(gpu.has_value());
  auto step = [&](uint32_t seed) { return runBytes(*gpu, {{"ids", spread(c, seed)["ids"]}}); };
  std::vector<uint8_t> a = step(5), b = step(5), mid = step(6), d = step(5);
  ASSERT_FALSE(a.empty());
  EXPECT_EQ(a, b);
  EXPECT_EQ(a, d);
  EXPECT_NE(a, mid);
}

} // namespace
