//===- OpsGpuTest.cpp - every op on the GPU against the CPU reference ------===//
//
// Each case builds a one-op graph (operands are random weights drawn fresh per
// process, indices are inputs), compiles it with CUDA code generation, runs it
// on the GPU and on the CPU reference, and compares: ‖out−ref‖/‖ref‖ ≤ 1e-5
// for f32 operands, ≤ 1e-2 for f16/bf16; integer results exactly.
//
//===----------------------------------------------------------------------===//
#include "GpuTestUtil.h"

#include "ir/OpTable.h"
#include "ir/OpViews.h"

#include <functional>
#include <set>

using namespace fg;
using namespace fg::gputest;

namespace {

struct OpCase {
  std::string name;
  OpKind op;
  /// Builds the graph body; fills inputs; returns the tolerance.
  std::function<double(Builder &, Inputs &)> build;
};

std::vector<int32_t> randomIds(size_t n, int32_t bound) {
  std::mt19937 rng(static_cast<uint32_t>(baseSeed() + n * 31 + bound));
  std::vector<int32_t> v(n);
  for (auto &x : v)
    x = static_cast<int32_t>(rng() % bound);
  return v;
}

std::vector<OpCase> &cases() {
  static std::vector<OpCase> all;
  return all;
}

void add(std::string name, OpKind op, std::function<double(Builder &, Inputs &)> build) {
  cases().push_back({std::move(name), op, std::move(build)});
}

void registerCases() {
  // --- unary elementwise, f32 and f16, incl. > 65535 rows and odd sizes.
  for (OpKind k : op::kUnaryOps) // every FG_UNARY row of ir/Ops.def
    for (DType dt : {DType::F32, DType::F16})
      for (auto shape : {Shape{7, 33}, Shape{70001, 3}}) {
        std::string name = std::string(mnemonic(k)) + "_" + std::string(dtypeName(dt)) + "_" +
                           std::to_string(shape[0]) + "x" + std::to_string(shape[1]);
        add(name, k, [=](Builder &b, Inputs &) {
          auto x = b.weight("x", {dt, shape}, k == OpKind::Sqrt ? randu(0.1, 4) : randn(2.0));
          b.result(b.unary(k, x, "y"));
          return tolFor(dt);
        });
      }
  // --- binary with broadcasting.
  for (OpKind k : {OpKind::Add, OpKind::Sub, OpKind::Mul, OpKind::Div}) {
    std::string m(mnemonic(k));
    add(m + "_row_broadcast", k, [=](Builder &b, Inputs &) {
      auto a = b.weight("a", {DType::F32, {5, 37}}, randn());
      auto c = b.weight("c", {DType::F32, {37}}, k == OpKind::Div ? randu(0.5, 2) : randn());
      b.result(b.create(k, {a, c}, {}, "y"));
      return 1e-5;
    });
    add(m + "_both_broadcast_f16", k, [=](Builder &b, Inputs &) {
      auto a = b.weight("a", {DType::F16, {3, 1, 40}}, randn());
      auto c = b.weight("c", {DType::F16, {1, 6, 40}}, k == OpKind::Div ? randu(0.5, 2) : randn());
      b.result(b.create(k, {a, c}, {}, "y"));
      return 1e-2;
    });
    add(m + "_many_rows", k, [=](Builder &b, Inputs &) {
      auto a = b.weight("a", {DType::F32, {66000, 5}}, randn());
      auto c = b.weight("c", {DType::F32, {66000, 1}}, k == OpKind::Div ? randu(0.5, 2) : randn());
      b.result(b.create(k, {a, c}, {}, "y"));
      return 1e-5;
    });
  }
  add("scale", OpKind::Scale, [](Builder &b, Inputs &) {
    b.result(b.scale(b.weight("x", {DType::F32, {9, 51}}, randn()), 0.37, -1.5, "y"));
    return 1e-5;
  });
  add("clamp", OpKind::Clamp, [](Builder &b, Inputs &) {
    b.result(b.clamp(b.weight("x", {DType::F32, {9, 51}}, randn()), -0.5, 0.75, "y"));
    return 1e-5;
  });
  const std::pair<GluKind, const char *> glus[] = {{GluKind::SwiGLU, "swiglu"},
                                                   {GluKind::GeGLU, "geglu"},
                                                   {GluKind::SwiGLUOAI, "swiglu_oai"},
                                                   {GluKind::SwiGLUClamp, "swiglu_clamp"}};
  for (auto [kind, name] : glus)
    for (DType dt : {DType::F32, DType::BF16})
      add(std::string("glu_") + name + "_" + std::string(dtypeName(dt)), OpKind::Glu,
          [=](Builder &b, Inputs &) {
            auto g = b.weight("g", {dt, {3, 130}}, randn(4.0));
            auto u = b.weight("u", {dt, {3, 130}}, randn(4.0));
            b.result(b.glu(g, u, kind, 1.5, 3.0, "y"));
            return tolFor(dt);
          });
  for (auto [from, to] : {std::pair{DType::F32, DType::F16}, std::pair{DType::F16, DType::F32},
                          std::pair{DType::F32, DType::BF16}, std::pair{DType::BF16, DType::F32}})
    add(std::string("convert_") + std::string(dtypeName(from)) + "_" + std::string(dtypeName(to)),
        OpKind::Convert, [=](Builder &b, Inputs &) {
          auto x = b.weight("x", {from, {17, 29}}, randn(3.0));
          b.result(b.convert(b.convert(x, to), DType::F32, "y"));
          return 1e-2;
        });

  // --- row-wise.
  // Few long rows take several blocks per row (row.cuh): 1 x 4096, 1 x 5000,
  // 3 x 4097 (odd: scalar loads); many short rows one warp each (66000 x 64).
  for (auto shape : {Shape{3, 4097}, Shape{66000, 64}, Shape{1, 256}, Shape{1, 4096},
                     Shape{1, 5000}}) {
    std::string sz = std::to_string(shape[0]) + "x" + std::to_string(shape[1]);
    add("rms_norm_" + sz, OpKind::RmsNorm, [=](Builder &b, Inputs &) {
      b.result(b.rmsNorm(b.weight("x", {DType::F32, shape}, randn()), 1e-6, "y"));
      return 1e-5;
    });
    add("layer_norm_" + sz, OpKind::LayerNorm, [=](Builder &b, Inputs &) {
      b.result(b.layerNorm(b.weight("x", {DType::F32, shape}, randn(1.0, 0.5)), 1e-5, "y"));
      return 1e-5;
    });
  }
  struct RopeCase {
    const char *name;
    RopeMode mode;
    int64_t nDims;
    bool freqFactors;
    double freqScale, ext;
  };
  const RopeCase ropes[] = {{"normal", RopeMode::Normal, 64, false, 1, 0},
                            {"neox", RopeMode::Neox, 64, false, 1, 0},
                            {"neox_partial", RopeMode::Neox, 32, false, 1, 0},
                            {"normal_freq_factors", RopeMode::Normal, 64, true, 1, 0},
                            {"neox_yarn", RopeMode::Neox, 64, false, 0.25, 1.0}};
  // One rope case: x [positions, heads, 64] of random values.
  auto ropeCase = [](RopeCase rc, int64_t heads, std::vector<int32_t> positions) {
    return [=](Builder &b, Inputs &in) {
      auto tokens = static_cast<int64_t>(positions.size());
      auto x = b.weight("x", {DType::F32, {tokens, heads, 64}}, randn());
      auto pos = b.input("positions", {DType::I32, {tokens}});
      in["positions"] = positions;
      Builder::RopeParams p;
      p.mode = rc.mode;
      p.nDims = rc.nDims;
      p.theta = 10000;
      p.freqScale = rc.freqScale;
      p.extFactor = rc.ext;
      p.nCtxOrig = rc.ext != 0 ? 4096 : 0;
      std::optional<ValueId> ff;
      if (rc.freqFactors)
        ff = b.weight("ff", {DType::F32, {rc.nDims / 2}}, randu(1.0, 8.0));
      b.result(b.rope(x, pos, p, ff, "y"));
      return 1e-5;
    };
  };
  std::vector<int32_t> prefillPositions;
  for (int t = 0; t < 37; ++t)
    prefillPositions.push_back(t * 97 % 4096);
  for (const RopeCase &rc : ropes) {
    add(std::string("rope_") + rc.name, OpKind::Rope, ropeCase(rc, 4, {0, 1, 17, 1000, 4095}));
    // Prefill-sized ropes (more than 8 tokens): the heads of a token taken 4
    // (12 heads), 2 (6 heads) or 1 (5 heads) at a time, the angles computed
    // once for them (MapRope::runHeads).
    for (int64_t heads : {12, 6, 5})
      add(std::string("rope_prefill_") + rc.name + "_h" + std::to_string(heads), OpKind::Rope,
          ropeCase(rc, heads, prefillPositions));
  }
  add("softmax_mask_scale_alibi", OpKind::Softmax, [](Builder &b, Inputs &) {
    auto x = b.weight("x", {DType::F32, {4, 3, 37}}, randn());
    auto mask = b.weight("mask", {DType::F32, {3, 37}}, randn());
    b.result(b.softmax(x, mask, 0.7, 8.0, "y"));
    return 1e-5;
  });
  add("softmax_wide", OpKind::Softmax, [](Builder &b, Inputs &) {
    b.result(b.softmax(b.weight("x", {DType::F32, {2, 5000}}, randn(3.0)), std::nullopt, 1, 0, "y"));
    return 1e-5;
  });
  for (auto shape : {Shape{1, 4096}, Shape{1, 5000}, Shape{3, 4097}, Shape{66000, 64}})
    add("softmax_" + std::to_string(shape[0]) + "x" + std::to_string(shape[1]), OpKind::Softmax,
        [=](Builder &b, Inputs &) {
          b.result(b.softmax(b.weight("x", {DType::F32, shape}, randn(3.0)), std::nullopt, 0.5, 0,
                             "y"));
          return 1e-5;
        });
  add("softmax_mask_alibi_long_rows", OpKind::Softmax, [](Builder &b, Inputs &) {
    auto x = b.weight("x", {DType::F32, {2, 1, 4100}}, randn());
    auto mask = b.weight("mask", {DType::F16, {1, 4100}}, randn());
    b.result(b.softmax(x, mask, 0.7, 8.0, "y"));
    return 1e-5;
  });
  add("rms_norm_f16_1x4096", OpKind::RmsNorm, [](Builder &b, Inputs &) {
    b.result(b.rmsNorm(b.weight("x", {DType::F16, {1, 4096}}, randn()), 1e-6, "y"));
    return 1e-2;
  });
  for (SortOrder o : {SortOrder::Asc, SortOrder::Desc})
    add(std::string("argsort_") + (o == SortOrder::Asc ? "asc" : "desc"), OpKind::Argsort,
        [=](Builder &b, Inputs &) {
          b.result(b.argsort(b.weight("x", {DType::F32, {3, 100}}, randn()), o, "y"));
          return 0.0;
        });
  for (int64_t k : {1, 2, 8})
    add("top_k_" + std::to_string(k), OpKind::TopK, [=](Builder &b, Inputs &) {
      b.result(b.topK(b.weight("x", {DType::F32, {5, 128}}, randn()), k, "y"));
      return 0.0;
    });
  add("sum_rows", OpKind::SumRows, [](Builder &b, Inputs &) {
    b.result(b.sumRows(b.weight("x", {DType::F32, {7, 1000}}, randn()), "y"));
    return 1e-5;
  });
  add("sum_rows_1x5000", OpKind::SumRows, [](Builder &b, Inputs &) {
    b.result(b.sumRows(b.weight("x", {DType::F32, {1, 5000}}, randn()), "y"));
    return 1e-5;
  });
  add("mean_3x4097", OpKind::Mean, [](Builder &b, Inputs &) {
    b.result(b.mean(b.weight("x", {DType::F32, {3, 4097}}, randn()), "y"));
    return 1e-5;
  });
  add("mean", OpKind::Mean, [](Builder &b, Inputs &) {
    b.result(b.mean(b.weight("x", {DType::F32, {70000, 3}}, randn()), "y"));
    return 1e-5;
  });

  // --- data movement.
  for (int64_t axis : {0, 1})
    add("concat_axis" + std::to_string(axis), OpKind::Concat, [=](Builder &b, Inputs &) {
      auto x = b.weight("x", {DType::F32, {3, 10}}, randn());
      auto y = b.weight("y", {DType::F32, {3, 10}}, randn());
      b.result(b.concat(x, y, axis, "z"));
      return 1e-5;
    });
  add("repeat", OpKind::Repeat, [](Builder &b, Inputs &) {
    b.result(b.repeat(b.weight("x", {DType::F32, {2, 1, 5}}, randn()), {4, 3, 10}, "y"));
    return 1e-5;
  });
  add("cont_of_offset_view", OpKind::Cont, [](Builder &b, Inputs &) {
    auto x = b.weight("x", {DType::F32, {6, 20}}, randn());
    b.result(b.cont(b.view(x, {3, 20}, {20, 1}, 40), "y"));
    return 1e-5;
  });
  add("cont_of_permute", OpKind::Permute, [](Builder &b, Inputs &) {
    auto x = b.weight("x", {DType::F32, {3, 5, 7}}, randn());
    b.result(b.cont(b.permute(x, {2, 0, 1}), "y"));
    return 1e-5;
  });
  add("cont_of_transpose", OpKind::Transpose, [](Builder &b, Inputs &) {
    auto x = b.weight("x", {DType::F16, {33, 65}}, randn());
    b.result(b.cont(b.transpose(x), "y"));
    return 1e-2;
  });
  add("strided_view_add", OpKind::View, [](Builder &b, Inputs &) {
    auto x = b.weight("x", {DType::F32, {6, 40}}, randn());
    auto v = b.view(x, {3, 20}, {80, 2}, 1);
    b.result(b.add(v, v, "y"));
    return 1e-5;
  });
  add("reshape_mul", OpKind::Reshape, [](Builder &b, Inputs &) {
    auto x = b.weight("x", {DType::F32, {6, 40}}, randn());
    auto w = b.weight("w", {DType::F32, {4, 60}}, randn());
    b.result(b.mul(b.reshape(x, {4, 60}), w, "y"));
    return 1e-5;
  });
  for (DType dt : {DType::F32, DType::F16, DType::BF16})
    add("get_rows_" + std::string(dtypeName(dt)), OpKind::GetRows, [=](Builder &b, Inputs &in) {
      auto t = b.weight("t", {dt, {100, 37}}, randn());
      auto idx = b.input("idx", {DType::I32, {5}});
      in["idx"] = randomIds(5, 100);
      b.result(b.getRows(t, idx, "y"));
      return 1e-6;
    });
  add("get_rows_batched", OpKind::GetRows, [](Builder &b, Inputs &in) {
    auto probs = b.weight("probs", {DType::F32, {4, 16}}, randn());
    auto ids = b.input("ids", {DType::I32, {4, 3}});
    in["ids"] = randomIds(12, 16);
    b.result(b.getRows(probs, ids, "y"));
    return 1e-6;
  });
  add("set_rows_f16_state", OpKind::SetRows, [](Builder &b, Inputs &in) {
    auto cache = b.state("cache", {DType::F16, {64, 2, 8}});
    auto src = b.weight("src", {DType::F32, {3, 2, 8}}, randn());
    auto idx = b.input("positions", {DType::I32, {3}});
    in["positions"] = {5, 63, 0};
    b.result(b.cont(b.setRows(cache, src, idx), "y"));
    return 1e-6;
  });

  // --- matmuls: GEMV (1-8 tokens) and cuBLAS (above).
  for (DType dt : {DType::F32, DType::F16, DType::BF16})
    for (int64_t t : {1, 3, 8, 20})
      add("matmul_" + std::string(dtypeName(dt)) + "_t" + std::to_string(t), OpKind::MatMul,
          [=](Builder &b, Inputs &) {
            auto x = b.weight("x", {DType::F32, {t, 300}}, randn());
            auto w = b.weight("w", {dt, {77, 300}}, randn(0.05));
            b.result(b.matmul(x, w, "y"));
            // cuBLAS converts x to W's dtype first: f16/bf16 rounding of x too.
            return dt == DType::F32 ? 1e-5 : 1e-2;
          });
  for (int64_t x1 : {1, 3})
    for (DType dt : {DType::F32, DType::F16})
      add("matmul_id_x" + std::to_string(x1) + "_" + std::string(dtypeName(dt)), OpKind::MatMulId,
          [=](Builder &b, Inputs &in) {
            auto x = b.weight("x", {DType::F32, {2, x1, 96}}, randn());
            auto w = b.weight("w", {dt, {8, 40, 96}}, randn(0.1));
            auto ids = b.input("ids", {DType::I32, {2, 3}});
            in["ids"] = randomIds(6, 8);
            b.result(b.matmulId(x, w, ids, "y"));
            return tolFor(dt);
          });
  add("add_id", OpKind::AddId, [](Builder &b, Inputs &in) {
    auto a = b.weight("a", {DType::F32, {2, 3, 40}}, randn());
    auto bias = b.weight("bias", {DType::F32, {8, 40}}, randn());
    auto ids = b.input("ids", {DType::I32, {2, 3}});
    in["ids"] = randomIds(6, 8);
    b.result(b.addId(a, bias, ids, "y"));
    return 1e-5;
  });
}

/// Builds case c's one-op graph and compares the GPU with the reference.
void runOpCase(const OpCase &c) {
  Graph g;
  Function &fn = g.addFunction("main");
  Builder b(fn);
  Inputs inputs;
  double tol = c.build(b, inputs);
  ASSERT_FALSE(bool(b.finish()));
  expectMatchesReference(g, inputs, tol);
}

class GpuOp : public ::testing::TestWithParam<size_t> {};

TEST_P(GpuOp, MatchesReference) {
  FG_REQUIRE_GPU();
  runOpCase(cases()[GetParam()]);
}

std::vector<size_t> caseIndices() {
  registerCases();
  std::vector<size_t> idx(cases().size());
  for (size_t i = 0; i < idx.size(); ++i)
    idx[i] = i;
  return idx;
}

INSTANTIATE_TEST_SUITE_P(Ops, GpuOp, ::testing::ValuesIn(caseIndices()),
                         [](const auto &info) { return cases()[info.param].name; });

/// The other forms of the elementwise maps — one element a thread
/// (FG_DEBUG_EW_VEC=0: the form before the ninth session) and prefetching
/// (FG_DEBUG_EW_ILP=4 with the vector form off: four elements a thread,
/// their operands prefetched first) — on every elementwise case above, which
/// the default vector form (four elements a thread by one vector load per
/// operand where every operand is read at the output's flat index) runs in
/// GpuOp: odd sizes (the vector form's scalar tail), > 65535 rows,
/// broadcasts, gathers, f16 / i32 / i64.
void elementwiseCasesMatch(const char *ilp) {
  ScopedEnv vec("FG_DEBUG_EW_VEC", "0"), prefetch("FG_DEBUG_EW_ILP", ilp);
  std::set<OpKind> elementwise = {OpKind::Add,     OpKind::Sub,    OpKind::Mul,    OpKind::Div,
                                  OpKind::Glu,     OpKind::Convert, OpKind::Cont,  OpKind::Repeat,
                                  OpKind::Concat,  OpKind::GetRows, OpKind::AddId, OpKind::Scale,
                                  OpKind::Clamp};
  for (OpKind k : op::kUnaryOps)
    elementwise.insert(k);
  size_t ran = 0;
  for (const OpCase &c : cases()) {
    if (!elementwise.count(c.op))
      continue;
    SCOPED_TRACE(c.name);
    runOpCase(c);
    ++ran;
  }
  EXPECT_GT(ran, 20u);
}

TEST(GpuOpScalar, ElementwiseCasesMatch) {
  FG_REQUIRE_GPU();
  elementwiseCasesMatch("1");
}

TEST(GpuOpPrefetch, ElementwiseCasesMatch) {
  FG_REQUIRE_GPU();
  elementwiseCasesMatch("4");
}

/// Every op of the table (except attention, tested on its own) has a case.
TEST(GpuOpCoverage, EveryOpHasACase) {
  std::set<OpKind> covered;
  for (const OpCase &c : cases())
    covered.insert(c.op);
  for (const OpInfo &row : allOps()) {
    if (row.kind == OpKind::Attention || row.has(kFused))
      continue;
    EXPECT_TRUE(covered.count(row.kind)) << "no GPU case for " << row.mnemonic;
  }
}

} // namespace
