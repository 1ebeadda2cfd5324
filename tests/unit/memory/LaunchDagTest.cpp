// The launch DAG: one launch per working node, RAW and WAR edges, reachability.
#include "passes/memory/LaunchDag.h"
#include "ScheduleSummary.h"

#include "ir/Builder.h"

#include <gtest/gtest.h>

namespace fg {
namespace {

TensorType f32(std::initializer_list<int64_t> s) { return {DType::F32, s}; }

/// Q, K and V projections of one input are three unordered launches.
TEST(LaunchDag, QkvProjectionsAreParallel) {
  Function fn("qkv");
  Builder b(fn);
  ValueId x = b.input("x", f32({1, 256}));
  ValueId q = b.matmul(x, b.weight("wq", {DType::F16, {64, 256}}), "q");
  ValueId k = b.matmul(x, b.weight("wk", {DType::F16, {64, 256}}), "k");
  ValueId v = b.matmul(x, b.weight("wv", {DType::F16, {64, 256}}), "v");
  ValueId s = b.add(b.add(q, k, "qk"), v, "s");
  b.result(s);
  ASSERT_FALSE(b.finish());
  auto dag = LaunchDag::build(fn);
  ASSERT_TRUE(static_cast<bool>(dag)) << llvm::toString(dag.takeError());
  ASSERT_EQ(dag->size(), 5u);
  LaunchId lq = dag->launchOf(0), lk = dag->launchOf(1), lv = dag->launchOf(2);
  EXPECT_FALSE(dag->ordered(lq, lk));
  EXPECT_FALSE(dag->ordered(lq, lv));
  EXPECT_FALSE(dag->ordered(lk, lv));
  EXPECT_TRUE(dag->happensBefore(lq, dag->launchOf(4)));
  EXPECT_TRUE(dag->happensBefore(lv, dag->launchOf(4)));
  EXPECT_FALSE(dag->happensBefore(dag->launchOf(4), lq));
  EXPECT_EQ(dag->numLevels(), 3u);
  EXPECT_EQ(dag->maxLevelWidth(), 3u);
  ScheduleSummary sum = summarizeSchedule(*dag);
  EXPECT_EQ(sum.parallelBranches, 2u); // three sources
  EXPECT_EQ(sum.edges, 4u);            // q->qk, k->qk, qk->s, v->s
}

/// A redundant edge (c reads a and b, b reads a) is removed; views launch nothing.
TEST(LaunchDag, TransitiveReductionAndViews) {
  Function fn("chain");
  Builder b(fn);
  ValueId x = b.input("x", f32({4, 8}));
  ValueId a = b.unary(OpKind::Silu, x, "a");
  ValueId r = b.reshape(a, {32}, "r");
  ValueId bb = b.unary(OpKind::Exp, r, "b");
  ValueId c = b.add(bb, r, "c");
  b.result(c);
  ASSERT_FALSE(b.finish());
  auto dag = LaunchDag::build(fn);
  ASSERT_TRUE(static_cast<bool>(dag)) << llvm::toString(dag.takeError());
  EXPECT_EQ(dag->size(), 3u);
  EXPECT_EQ(dag->launchOf(1), kNoLaunch); // the reshape
  EXPECT_EQ(dag->producer(r), dag->launchOf(0));
  EXPECT_EQ(dag->producer(x), kNoLaunch);
  const LaunchNode &lc = dag->launch(dag->launchOf(3));
  ASSERT_EQ(lc.preds.size(), 1u);
  EXPECT_EQ(lc.preds[0], dag->launchOf(2));
  EXPECT_TRUE(dag->happensBefore(dag->launchOf(0), dag->launchOf(3)));
  EXPECT_EQ(dag->numEdges(), 2u);
  ScheduleSummary sum = summarizeSchedule(*dag);
  EXPECT_EQ(sum.parallelBranches, 0u);
  EXPECT_EQ(sum.levels, 3u);
}

/// set_rows waits for every reader of the old version (also through views);
/// readers of the new version wait for set_rows.
TEST(LaunchDag, StateWriteAfterRead) {
  Function fn("state");
  Builder b(fn);
  ValueId pos = b.input("positions", {DType::I32, {1}});
  ValueId x = b.input("x", f32({1, 2, 8}));
  ValueId kc = b.state("k_cache", {DType::F16, {16, 2, 8}});
  ValueId flat = b.reshape(kc, {16, 16}, "flat");
  ValueId old = b.getRows(flat, pos, "old"); // reads the old version
  ValueId k = b.unary(OpKind::Silu, x, "k"); // independent of the cache
  ValueId kc1 = b.setRows(kc, k, pos, "k_cache.1");
  ValueId att = b.attention(x, kc1, kc1, pos, {0.5, 0, 0}, std::nullopt, "att");
  b.result(old);
  b.result(att);
  ASSERT_FALSE(b.finish());
  auto dag = LaunchDag::build(fn);
  ASSERT_TRUE(static_cast<bool>(dag)) << llvm::toString(dag.takeError());
  LaunchId lOld = dag->launchOf(1), lK = dag->launchOf(2), lSet = dag->launchOf(3),
           lAtt = dag->launchOf(4);
  EXPECT_TRUE(dag->happensBefore(lOld, lSet));
  EXPECT_TRUE(dag->happensBefore(lK, lSet));
  EXPECT_TRUE(dag->happensBefore(lSet, lAtt));
  EXPECT_FALSE(dag->ordered(lOld, lK));
  EXPECT_EQ(dag->producer(kc1), lSet);
}

/// Reading a version after its update is refused with a reason.
TEST(LaunchDag, ReadAfterUpdateIsAnError) {
  Function fn("bad");
  Builder b(fn);
  ValueId pos = b.input("positions", {DType::I32, {1}});
  ValueId kc = b.state("k_cache", {DType::F32, {16, 8}});
  ValueId src = b.input("src", f32({1, 8}));
  ValueId kc1 = b.setRows(kc, src, pos, "k_cache.1");
  ValueId late = b.getRows(kc, pos, "late");
  b.result(kc1);
  b.result(late);
  ASSERT_FALSE(b.finish());
  auto dag = LaunchDag::build(fn);
  ASSERT_FALSE(static_cast<bool>(dag));
  std::string msg = llvm::toString(dag.takeError());
  EXPECT_NE(msg.find("reads %k_cache after its in-place update by '%k_cache.1'"), std::string::npos)
      << msg;
}

/// Levels are topological: every pred is on an earlier level.
TEST(LaunchDag, LevelsAreTopological) {
  Function fn("diamond");
  Builder b(fn);
  ValueId x = b.input("x", f32({2, 8}));
  ValueId a = b.unary(OpKind::Silu, x, "a");
  ValueId l = b.unary(OpKind::Exp, a, "l");
  ValueId r1 = b.unary(OpKind::Tanh, a, "r1");
  ValueId r2 = b.unary(OpKind::Sqr, r1, "r2");
  b.result(b.add(l, r2, "d"));
  ASSERT_FALSE(b.finish());
  auto dag = LaunchDag::build(fn);
  ASSERT_TRUE(static_cast<bool>(dag));
  for (LaunchId id = 0; id < dag->size(); ++id)
    for (LaunchId p : dag->launch(id).preds)
      EXPECT_LT(dag->launch(p).level, dag->launch(id).level);
  EXPECT_EQ(dag->launch(dag->launchOf(1)).level, 1u);             // l
  EXPECT_EQ(dag->launch(dag->launchOf(2)).level, 1u);             // r1
  EXPECT_EQ(dag->launch(dag->launchOf(3)).level, 2u);             // r2
  EXPECT_EQ(dag->launch(dag->launchOf(4)).level, 3u);             // d
  EXPECT_FALSE(dag->ordered(dag->launchOf(1), dag->launchOf(3))); // l ∥ r2
}

} // namespace
} // namespace fg

namespace fg {
namespace {

/// Reachability as a brute-force closure over operand producers (no views or state).
std::vector<std::vector<bool>> closure(const Function &fn) {
  size_t n = fn.numNodes();
  std::vector<std::vector<bool>> before(n, std::vector<bool>(n, false));
  for (NodeId i = 0; i < n; ++i)
    for (ValueId op : fn.node(i).operands)
      if (!fn.value(op).isArgument()) {
        NodeId p = fn.value(op).def;
        before[p][i] = true;
        for (NodeId a = 0; a < p; ++a)
          if (before[a][p])
            before[a][i] = true;
      }
  return before;
}

/// Three interleaved chains with occasional joins: ancestor intervals fragment
/// (every third id), so most launches keep bitsets; both forms answer exactly,
/// and on a plain chain every earlier launch is settled.
TEST(LaunchDag, FragmentedAncestorsStayExact) {
  Function fn("interleaved");
  Builder b(fn);
  ValueId heads[3];
  for (int c = 0; c < 3; ++c)
    heads[c] = b.input("x" + std::to_string(c), f32({4}));
  for (int i = 0; i < 300; ++i) {
    int c = i % 3;
    heads[c] = i % 17 == 16 ? b.add(heads[c], heads[(c + 1) % 3]) : b.unary(OpKind::Exp, heads[c]);
  }
  for (int c = 0; c < 3; ++c)
    b.result(heads[c]);
  ASSERT_FALSE(b.finish());
  auto dag = LaunchDag::build(fn);
  ASSERT_TRUE(static_cast<bool>(dag)) << llvm::toString(dag.takeError());
  std::vector<std::vector<bool>> before = closure(fn);
  for (NodeId a = 0; a < fn.numNodes(); ++a)
    for (NodeId c = 0; c < fn.numNodes(); ++c)
      ASSERT_EQ(dag->happensBefore(dag->launchOf(a), dag->launchOf(c)), before[a][c])
          << a << " -> " << c;
  for (NodeId c = 0; c < fn.numNodes(); ++c) {
    LaunchId settled = 0;
    while (settled < c && before[settled][c])
      ++settled;
    ASSERT_EQ(dag->settledPrefix(dag->launchOf(c)), settled) << c;
  }

  Function chain("chain");
  Builder cb(chain);
  ValueId x = cb.input("x", f32({4}));
  for (int i = 0; i < 1000; ++i)
    x = cb.unary(OpKind::Exp, x);
  cb.result(x);
  ASSERT_FALSE(cb.finish());
  auto cdag = LaunchDag::build(chain);
  ASSERT_TRUE(static_cast<bool>(cdag)) << llvm::toString(cdag.takeError());
  for (LaunchId l = 0; l < cdag->size(); ++l) {
    ASSERT_EQ(cdag->settledPrefix(l), l);
    ASSERT_TRUE(l == 0 || cdag->happensBefore(0, l));
  }
}

} // namespace
} // namespace fg
