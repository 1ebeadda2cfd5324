// Unit tests of the cleanup passes: dce, cse, canonicalize. Each pass runs
// directly on a Function built with fg::Builder; the checks look at node
// counts, operands, attributes, counters and the changed flag.
#include "ir/Builder.h"
#include "ir/OpViews.h"
#include "passes/Passes.h"

#include <gtest/gtest.h>

using namespace fg;

namespace {

size_t count(const Function &fn, OpKind kind) {
  size_t n = 0;
  for (const Node &node : fn.nodes())
    n += node.kind == kind;
  return n;
}

/// Runs `pass` once; fails the test on an error.
bool runPass(Pass &pass, Function &fn, PassContext &ctx) {
  llvm::Expected<bool> changed = pass.run(fn, ctx);
  if (!changed) {
    ADD_FAILURE() << llvm::toString(changed.takeError());
    return false;
  }
  return *changed;
}

bool runPass(Pass &pass, Function &fn) {
  PassContext ctx;
  return runPass(pass, fn, ctx);
}

} // namespace

// --- dce ------------------------------------------------------------------------

/// A dead chain goes in one run; set_rows stays although its version is unused.
TEST(DCE, RemovesDeadChainKeepsSetRows) {
  Function fn("main");
  Builder b(fn);
  auto x = b.input("x", {DType::F32, {4}});
  auto c = b.state("c", {DType::F32, {8, 4}});
  auto i = b.input("i", {DType::I32, {1}});
  auto a = b.unary(OpKind::Exp, x, "a");
  b.unary(OpKind::Sqr, a, "b");
  auto r = b.reshape(x, {1, 4}, "r");
  b.setRows(c, r, i, "c.1");
  auto y = b.unary(OpKind::Relu, x, "y");
  b.result(y);
  ASSERT_FALSE(bool(b.finish()));
  ASSERT_EQ(fn.numNodes(), 5u);

  auto dce = createDCEPass();
  EXPECT_EQ(dce->name(), "dce");
  PassContext ctx;
  EXPECT_TRUE(runPass(*dce, fn, ctx));
  EXPECT_EQ(ctx.stats().lookup("removed"), 2);
  ASSERT_EQ(fn.numNodes(), 3u);
  EXPECT_EQ(fn.node(0).kind, OpKind::Reshape);
  EXPECT_EQ(fn.node(1).kind, OpKind::SetRows);
  EXPECT_EQ(fn.node(2).kind, OpKind::Relu);
  EXPECT_EQ(fn.lookup("a"), kNoValue);
  EXPECT_EQ(fn.node(1).operands[1], fn.lookup("r"));
  EXPECT_EQ(fn.results()[0], fn.lookup("y"));
  // Nothing left to remove.
  EXPECT_FALSE(runPass(*dce, fn));
  EXPECT_EQ(fn.numNodes(), 3u);
}

/// A value used only as a result is live, and so is what it reads.
TEST(DCE, ResultsAreLive) {
  Function fn("main");
  Builder b(fn);
  auto x = b.input("x", {DType::F32, {2, 3}});
  auto t = b.transpose(x, "t");
  b.result(b.cont(t, "y"));
  ASSERT_FALSE(bool(b.finish()));
  EXPECT_FALSE(runPass(*createDCEPass(), fn));
  EXPECT_EQ(fn.numNodes(), 2u);
}

// --- cse ------------------------------------------------------------------------

/// add commutes: add(x, y) and add(y, x) merge; their user reads the first twice.
TEST(CSE, MergesCommutedDuplicates) {
  Function fn("main");
  Builder b(fn);
  auto x = b.input("x", {DType::F32, {4}});
  auto y = b.input("y", {DType::F32, {4}});
  auto a = b.add(x, y, "a");
  auto a2 = b.add(y, x, "b");
  b.result(b.mul(a, a2, "c"));
  ASSERT_FALSE(bool(b.finish()));

  auto cse = createCSEPass();
  PassContext ctx;
  EXPECT_TRUE(runPass(*cse, fn, ctx));
  EXPECT_EQ(ctx.stats().lookup("merged"), 1);
  ASSERT_EQ(fn.numNodes(), 2u);
  EXPECT_EQ(count(fn, OpKind::Add), 1u);
  const Node &mul = fn.node(1);
  EXPECT_EQ(mul.operands[0], a);
  EXPECT_EQ(mul.operands[1], a);
  EXPECT_FALSE(runPass(*cse, fn));
}

/// sub does not commute: sub(x, y) and sub(y, x) both stay.
TEST(CSE, KeepsNonCommutedOperands) {
  Function fn("main");
  Builder b(fn);
  auto x = b.input("x", {DType::F32, {4}});
  auto y = b.input("y", {DType::F32, {4}});
  b.result(b.mul(b.sub(x, y), b.sub(y, x), "c"));
  ASSERT_FALSE(bool(b.finish()));
  EXPECT_FALSE(runPass(*createCSEPass(), fn));
  EXPECT_EQ(count(fn, OpKind::Sub), 2u);
}

/// Attributes are part of the identity; a merge cascades to users that become equal.
TEST(CSE, AttributesAndCascade) {
  Function fn("main");
  Builder b(fn);
  auto x = b.input("x", {DType::F32, {4}});
  auto s2 = b.scale(x, 2.0);
  auto s2b = b.scale(x, 2.0);
  auto s3 = b.scale(x, 3.0);
  auto e1 = b.unary(OpKind::Exp, s2);
  auto e2 = b.unary(OpKind::Exp, s2b); // equal to e1 once s2b is merged
  b.result(b.add(b.add(e1, e2), s3, "out"));
  ASSERT_FALSE(bool(b.finish()));

  PassContext ctx;
  EXPECT_TRUE(runPass(*createCSEPass(), fn, ctx));
  EXPECT_EQ(ctx.stats().lookup("merged"), 2);
  EXPECT_EQ(count(fn, OpKind::Scale), 2u);
  EXPECT_EQ(count(fn, OpKind::Exp), 1u);
  EXPECT_EQ(fn.numNodes(), 5u);
}

/// Two identical set_rows are two writes: never merged (IR invalid on
/// purpose, the pass runs without the verifier).
TEST(CSE, NeverMergesStateUpdaters) {
  Function fn("main");
  Builder b(fn);
  auto c = b.state("c", {DType::F32, {8, 4}});
  auto s = b.input("s", {DType::F32, {1, 4}});
  auto i = b.input("i", {DType::I32, {1}});
  auto v1 = b.setRows(c, s, i, "c.1");
  auto v2 = b.setRows(c, s, i, "c.2");
  b.result(v1);
  b.result(v2);
  ASSERT_FALSE(bool(b.finish()));
  EXPECT_FALSE(runPass(*createCSEPass(), fn));
  EXPECT_EQ(count(fn, OpKind::SetRows), 2u);
}

/// A returned duplicate keeps its node: its name is the entry's interface.
TEST(CSE, KeepsReturnedDuplicate) {
  Function fn("main");
  Builder b(fn);
  auto x = b.input("x", {DType::F32, {4}});
  auto a = b.unary(OpKind::Exp, x, "a");
  auto l = b.unary(OpKind::Exp, x, "logits");
  b.result(b.mul(a, a, "m"));
  b.result(l);
  ASSERT_FALSE(bool(b.finish()));
  EXPECT_FALSE(runPass(*createCSEPass(), fn));
  EXPECT_EQ(count(fn, OpKind::Exp), 2u);
  EXPECT_EQ(fn.results()[1], fn.lookup("logits"));
}

// --- canonicalize -----------------------------------------------------------------

/// reshape(reshape(x)) -> reshape(x) with the outer shape; the inner one goes.
TEST(Canonicalize, FoldsReshapeChain) {
  Function fn("main");
  Builder b(fn);
  auto x = b.input("x", {DType::F32, {2, 8}});
  auto r1 = b.reshape(x, {16}, "a");
  auto r2 = b.reshape(r1, {4, 4}, "b");
  b.result(b.unary(OpKind::Exp, r2, "y"));
  ASSERT_FALSE(bool(b.finish()));

  PassContext ctx;
  EXPECT_TRUE(runPass(*createCanonicalizePass(), fn, ctx));
  EXPECT_EQ(ctx.stats().lookup("reshapes_folded"), 1);
  EXPECT_EQ(ctx.stats().lookup("erased"), 1);
  ASSERT_EQ(fn.numNodes(), 2u);
  const Node &r = fn.node(0);
  EXPECT_EQ(r.kind, OpKind::Reshape);
  EXPECT_EQ(r.operands[0], x);
  EXPECT_EQ(op::Reshape(r).shape(), llvm::ArrayRef<int64_t>({4, 4}));
  EXPECT_EQ(fn.node(1).operands[0], r2);
  EXPECT_FALSE(runPass(*createCanonicalizePass(), fn));
}

/// A chain that ends at x's own shape disappears entirely; the inner reshape
/// stays while someone else reads it.
TEST(Canonicalize, ReshapeChainBackToSourceShape) {
  Function fn("main");
  Builder b(fn);
  auto x = b.input("x", {DType::F32, {2, 8}});
  auto flat = b.reshape(x, {16}, "flat");
  auto back = b.reshape(flat, {2, 8}, "back");
  b.result(b.unary(OpKind::Exp, back, "y"));
  b.result(b.unary(OpKind::Sqr, flat, "z"));
  ASSERT_FALSE(bool(b.finish()));

  PassContext ctx;
  EXPECT_TRUE(runPass(*createCanonicalizePass(), fn, ctx));
  EXPECT_EQ(ctx.stats().lookup("reshapes_folded"), 1);
  EXPECT_EQ(ctx.stats().lookup("reshapes_dropped"), 1);
  EXPECT_EQ(count(fn, OpKind::Reshape), 1u);
  EXPECT_EQ(fn.node(fn.value(fn.lookup("y")).def).operands[0], x);
  EXPECT_EQ(fn.node(fn.value(fn.lookup("z")).def).operands[0], flat);
}

/// A reshape to the same shape is dropped, unless it is returned.
TEST(Canonicalize, DropsSameShapeReshapeUnlessReturned) {
  Function fn("main");
  Builder b(fn);
  auto x = b.input("x", {DType::F32, {2, 8}});
  auto same = b.reshape(x, {2, 8}, "same");
  auto y = b.unary(OpKind::Exp, same, "y");
  b.result(y);
  b.result(b.reshape(y, {2, 8}, "out"));
  ASSERT_FALSE(bool(b.finish()));

  EXPECT_TRUE(runPass(*createCanonicalizePass(), fn));
  ASSERT_EQ(fn.numNodes(), 2u);
  EXPECT_EQ(fn.node(0).kind, OpKind::Exp);
  EXPECT_EQ(fn.node(0).operands[0], x);
  EXPECT_EQ(fn.node(1).kind, OpKind::Reshape);
  EXPECT_EQ(fn.results()[1], fn.lookup("out"));
}

/// view with x's shape, dense strides and offset 0 is x; an offset or other
/// strides make it a real view.
TEST(Canonicalize, NoOpViews) {
  Function fn("main");
  Builder b(fn);
  auto x = b.input("x", {DType::F32, {2, 3}});
  auto same = b.view(x, {2, 3}, {3, 1}, 0, "same");
  auto strided = b.view(x, {2, 3}, {1, 2}, 0, "strided");
  auto shifted = b.view(x, {1, 3}, {3, 1}, 3, "shifted");
  b.result(b.add(same, b.cont(strided), "y"));
  b.result(b.cont(shifted, "z"));
  ASSERT_FALSE(bool(b.finish()));

  PassContext ctx;
  EXPECT_TRUE(runPass(*createCanonicalizePass(), fn, ctx));
  EXPECT_EQ(ctx.stats().lookup("views_dropped"), 1);
  EXPECT_EQ(count(fn, OpKind::View), 2u);
  EXPECT_EQ(fn.lookup("same"), kNoValue);
  EXPECT_EQ(fn.node(fn.value(fn.lookup("y")).def).operands[0], x);
  // conts of real views stay.
  EXPECT_EQ(count(fn, OpKind::Cont), 2u);
}

/// Identity perms go; permute(permute(x)) composes, here to the identity.
TEST(Canonicalize, Permutes) {
  Function fn("main");
  Builder b(fn);
  auto x = b.input("x", {DType::F32, {2, 3, 4}});
  auto id = b.permute(x, {0, 1, 2}, "id");
  auto p1 = b.permute(x, {1, 2, 0}, "p1");  // [3, 4, 2]
  auto p2 = b.permute(p1, {2, 0, 1}, "p2"); // [2, 3, 4] = x
  auto q1 = b.permute(x, {1, 0, 2}, "q1");  // [3, 2, 4]
  auto q2 = b.permute(q1, {0, 2, 1}, "q2"); // [3, 4, 2]: x perm [1, 2, 0]
  b.result(b.add(id, p2, "y"));
  b.result(b.cont(q2, "z"));
  ASSERT_FALSE(bool(b.finish()));

  PassContext ctx;
  EXPECT_TRUE(runPass(*createCanonicalizePass(), fn, ctx));
  EXPECT_EQ(ctx.stats().lookup("permutes_folded"), 2);
  EXPECT_EQ(ctx.stats().lookup("permutes_dropped"), 2);
  const Node &add = fn.node(fn.value(fn.lookup("y")).def);
  EXPECT_EQ(add.operands[0], x);
  EXPECT_EQ(add.operands[1], x);
  ASSERT_EQ(count(fn, OpKind::Permute), 1u);
  const Node &q = fn.node(fn.value(q2).def);
  EXPECT_EQ(q.operands[0], x);
  EXPECT_EQ(op::Permute(q).perm(), llvm::ArrayRef<int64_t>({1, 2, 0}));
  EXPECT_EQ(fn.type(q2), TensorType(DType::F32, {3, 4, 2}));
}

/// transpose(transpose(x)) is x; one transpose is kept.
TEST(Canonicalize, TransposePairs) {
  Function fn("main");
  Builder b(fn);
  auto x = b.input("x", {DType::F32, {2, 3}});
  auto t1 = b.transpose(x, "t1");
  auto t2 = b.transpose(t1, "t2");
  b.result(b.unary(OpKind::Exp, t2, "y"));
  b.result(b.cont(b.transpose(x, "t3"), "z"));
  ASSERT_FALSE(bool(b.finish()));

  PassContext ctx;
  EXPECT_TRUE(runPass(*createCanonicalizePass(), fn, ctx));
  EXPECT_EQ(ctx.stats().lookup("transposes_folded"), 1);
  EXPECT_EQ(ctx.stats().lookup("erased"), 2);
  EXPECT_EQ(count(fn, OpKind::Transpose), 1u);
  EXPECT_EQ(fn.node(fn.value(fn.lookup("y")).def).operands[0], x);
  EXPECT_EQ(count(fn, OpKind::Cont), 1u);
}

/// cont of a computed value is a no-op copy; cont of a view or of state stays.
TEST(Canonicalize, Conts) {
  Function fn("main");
  Builder b(fn);
  auto x = b.input("x", {DType::F32, {2, 3}});
  auto c = b.state("c", {DType::F32, {2, 3}});
  auto e = b.unary(OpKind::Exp, x, "e");
  auto ce = b.cont(e, "ce");
  auto cce = b.cont(ce, "cce");
  auto cx = b.cont(x, "cx");
  auto cc = b.cont(c, "cc");
  auto ct = b.cont(b.transpose(x, "t"), "ct");
  b.result(b.add(cce, cx, "y"));
  b.result(b.add(cc, b.transpose(ct), "z"));
  ASSERT_FALSE(bool(b.finish()));

  PassContext ctx;
  EXPECT_TRUE(runPass(*createCanonicalizePass(), fn, ctx));
  EXPECT_EQ(ctx.stats().lookup("conts_dropped"), 3);
  EXPECT_EQ(count(fn, OpKind::Cont), 2u);
  const Node &y = fn.node(fn.value(fn.lookup("y")).def);
  EXPECT_EQ(y.operands[0], e);
  EXPECT_EQ(y.operands[1], x);
  EXPECT_EQ(fn.node(fn.value(fn.lookup("z")).def).operands[0], cc);
}

/// Nothing to do: no change, no nodes erased (dead code is dce's job).
TEST(Canonicalize, LeavesOtherDeadCodeAlone) {
  Function fn("main");
  Builder b(fn);
  auto x = b.input("x", {DType::F32, {2, 3}});
  b.unary(OpKind::Exp, x, "dead");
  b.result(b.transpose(x, "y"));
  ASSERT_FALSE(bool(b.finish()));
  EXPECT_FALSE(runPass(*createCanonicalizePass(), fn));
  EXPECT_EQ(fn.numNodes(), 2u);
}
