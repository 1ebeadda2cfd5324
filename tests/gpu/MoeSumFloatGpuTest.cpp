//===- MoeSumFloatGpuTest.cpp - the expert down projection with the sum, float experts ===//
//
// fused.matmul_id_sum_add of one token with f16, bf16 and f32 experts
// (EmitOptions::moeSumFloat, FG_DEBUG_MOE_SUM_FLOAT=1: kernels/moe_sum.cuh,
// a warp a row over the k slots' rows end to end, each unit's dot scaled by
// its slot's weight): W-moe's shape (128 experts of 2048 x 768, 8 slots),
// odd ones (N = 203 and 130, not multiples of the block's 8 rows; K = 264;
// one and three slots; more rows than two blocks an SM cover, so warps loop)
// and an expert chosen twice in one row, against the CPU reference within
// 1e-5 (both compute in f32 from the same weights: only the order of the sums
// differs), as a CUDA graph and eagerly; two replays of the graph give the
// same bits (no atomics).
//
//===----------------------------------------------------------------------===//
#include "GpuTestUtil.h"

using namespace fg;
using namespace fg::gputest;

TEST(GpuMoeSumFloat, MatchesReferenceOnOddShapes) {
  FG_REQUIRE_GPU();
  ScopedEnv on("FG_DEBUG_MOE_SUM_FLOAT", "1");
  struct Shape {
    DType w;
    int64_t E, N, K, k;
  };
  const Shape shapes[] = {{DType::F16, 128, 2048, 768, 8}, {DType::BF16, 5, 203, 264, 3},
                          {DType::F32, 8, 256, 128, 2},    {DType::F16, 4, 130, 64, 1},
                          {DType::F16, 6, 40000, 64, 3}};
  for (const Shape &sh : shapes) {
    SCOPED_TRACE(std::string(dtypeName(sh.w)) + " N " + std::to_string(sh.N) + " K " +
                 std::to_string(sh.K) + " k " + std::to_string(sh.k));
    Graph g;
    Function &fn = g.addFunction("main");
    Builder b(fn);
    b.result(b.create(op::FusedMatmulIdSumAddArgs{
        .x = b.weight("h", {DType::F32, {1, sh.k, sh.K}}, randn()),
        .w = b.weight("w", {sh.w, {sh.E, sh.N, sh.K}}, randn(0.05)),
        .ids = b.input("ids", {DType::I32, {1, sh.k}}),
        .weights = b.weight("sw", {DType::F32, {1, sh.k, 1}}, randu(0, 1)),
        .residual = b.weight("r", {DType::F32, {1, sh.N}}, randn())},
                       "y"));
    ASSERT_FALSE(bool(b.finish()));
    std::vector<int32_t> ids;
    for (int64_t j = 0; j < sh.k; ++j)
      ids.push_back(static_cast<int32_t>((j * 37 + 11) % sh.E));
    if (sh.k == 8)
      ids[5] = ids[2]; // an expert twice in one row
    const Inputs in{{"ids", ids}};
    expectMatchesReference(g, in, 1e-5);
    expectMatchesReference(g, in, 1e-5, "main", /*eager=*/true);
    // Replays give the same bits. (With the option off the plan would not
    // compile: only the DP4A form takes quantised experts.)
    std::optional<Executor> gpu = gpuGraphExecutor(g);
    ASSERT_TRUE(gpu.has_value());
    const std::vector<uint8_t> first = runBytes(*gpu, in, "main", "y"),
                               second = runBytes(*gpu, in, "main", "y");
    EXPECT_EQ(first, second);
  }
}
