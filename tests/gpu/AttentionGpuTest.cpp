//===- AttentionGpuTest.cpp - decode/prefill attention vs the reference ----===//
//
// Live lengths {1, 1023, 1024, 4097, ctx} × head dims {64, 128, 256}, GQA
// 4:2, f16 caches; plus window 8, softcap and sinks, and a prefill chunk.
//
//===----------------------------------------------------------------------===//
#include "GpuTestUtil.h"

using namespace fg;
using namespace fg::gputest;

namespace {

constexpr int64_t kCtx = 8192;

struct AttnCase {
  int64_t live;     ///< rows visible to the last query (its position + 1)
  int64_t headDim;
  int64_t tokens = 1;
  int64_t window = 0;
  double softcap = 0;
  bool sinks = false;
};

void runCase(const AttnCase &c) {
  Graph g;
  Function &fn = g.addFunction("main");
  Builder b(fn);
  auto q = b.weight("q", {DType::F32, {c.tokens, 4, c.headDim}}, randn());
  auto k = b.weight("k", {DType::F16, {kCtx, 2, c.headDim}}, randn());
  auto v = b.weight("v", {DType::F16, {kCtx, 2, c.headDim}}, randn());
  auto pos = b.input("positions", {DType::I32, {c.tokens}});
  std::optional<ValueId> sinks;
  if (c.sinks)
    sinks = b.weight("sinks", {DType::F32, {4}}, randn());
  Builder::AttentionParams p;
  p.scale = 1.0 / std::sqrt(static_cast<double>(c.headDim));
  p.window = c.window;
  p.softcap = c.softcap;
  b.result(b.attention(q, k, v, pos, p, sinks, "out"));
  ASSERT_FALSE(bool(b.finish()));
  Inputs in;
  for (int64_t t = 0; t < c.tokens; ++t)
    in["positions"].push_back(static_cast<int32_t>(c.live - c.tokens + t));
  expectMatchesReference(g, in, 1e-5, "main", /*eager=*/false, kCtx);
}

class GpuAttention : public ::testing::TestWithParam<std::tuple<int64_t, int64_t>> {};

TEST_P(GpuAttention, LiveLengthByHeadDim) {
  FG_REQUIRE_GPU();
  auto [live, hd] = GetParam();
  runCase({live, hd});
}

INSTANTIATE_TEST_SUITE_P(Grid, GpuAttention,
                         ::testing::Combine(::testing::Values(1, 1023, 1024, 4097, kCtx),
                                            ::testing::Values(64, 128, 256)),
                         [](const auto &info) {
                           return "live" + std::to_string(std::get<0>(info.param)) + "_d" +
                                  std::to_string(std::get<1>(info.param));
                         });

TEST(GpuAttentionOptions, Window8) {
  FG_REQUIRE_GPU();
  runCase({1500, 128, 1, 8});
}

TEST(GpuAttentionOptions, Window8Prefill) {
  FG_REQUIRE_GPU();
  runCase({40, 64, 12, 8});
}

TEST(GpuAttentionOptions, SoftcapAndSinks) {
  FG_REQUIRE_GPU();
  runCase({777, 128, 1, 0, 30.0, true});
}

TEST(GpuAttentionOptions, PrefillChunkCausal) {
  FG_REQUIRE_GPU();
  runCase({100, 128, 64});
}

} // namespace
