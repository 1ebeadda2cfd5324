#include "ir/Verifier.h"
#include "ir/Builder.h"
#include "ir/Parser.h"
#include "ir/Printer.h"

#include <gtest/gtest.h>

using namespace fg;

namespace {

std::string parseError(llvm::StringRef text) {
  auto g = parseGraph(text, "v.fg");
  if (g)
    return "";
  return llvm::toString(g.takeError());
}

std::string verifyError(const Graph &g) {
  llvm::Error e = verifyGraph(g);
  return e ? llvm::toString(std::move(e)) : "";
}

/// A decode step's state handling; `stmts` starts on line 5.
std::string kvGraph(llvm::StringRef stmts, llvm::StringRef ret = "%k_cache.0.1") {
  return "graph @decode(\n"
         "    input %k: f32[1, 2, 4],\n"
         "    input %positions: i32[1],\n"
         "    state %k_cache.0: f16[8, 2, 4]) {\n" +
         stmts.str() + "  return " + ret.str() + "\n}\n";
}

} // namespace

/// Updating a version, then reading the new one, is linear and verifies.
TEST(Verifier, LinearStateIsAccepted) {
  auto g =
      parseGraph(kvGraph("  %k_cache.0.1 = set_rows(%k_cache.0, %k, %positions) : f16[8, 2, 4]\n"
                         "  %k_cache.0.2 = set_rows(%k_cache.0.1, %k, %positions) : f16[8, 2, 4]\n"
                         "  %a = attention(%k, %k_cache.0.2, %k_cache.0.2, %positions) "
                         "{scale = 0.5} : f32[1, 2, 4]\n",
                         "%a, %k_cache.0.2"),
                 "v.fg");
  ASSERT_TRUE(bool(g)) << llvm::toString(g.takeError());
  const Function &fn = g->functions().front();
  ValueId root = fn.lookup("k_cache.0");
  EXPECT_EQ(stateRoot(fn, fn.lookup("k_cache.0.2")), root);
  EXPECT_EQ(stateRoot(fn, root), root);
  EXPECT_EQ(stateRoot(fn, fn.lookup("a")), kNoValue);
  EXPECT_EQ(stateRoot(fn, fn.lookup("k")), kNoValue);
}

/// Reading the old version after set_rows updated it in place is an error.
TEST(Verifier, StateReadAfterUpdate) {
  EXPECT_EQ(
      parseError(kvGraph("  %k_cache.0.1 = set_rows(%k_cache.0, %k, %positions) : f16[8, 2, 4]\n"
                         "  %a = attention(%k, %k_cache.0, %k_cache.0.1, %positions) "
                         "{scale = 0.5} : f32[1, 2, 4]\n")),
      "v.fg:6:3: error: state %k_cache.0 is read after its update at line 5");
}

/// A view taken before the update aliases the old version: reading it after is an error.
TEST(Verifier, StateReadThroughViewAfterUpdate) {
  EXPECT_EQ(
      parseError(kvGraph("  %old = reshape(%k_cache.0) {shape = [8, 8]} : f16[8, 8]\n"
                         "  %t = transpose(%old) : f16[8, 8]\n"
                         "  %k_cache.0.1 = set_rows(%k_cache.0, %k, %positions) : f16[8, 2, 4]\n"
                         "  %c = cont(%t) : f16[8, 8]\n")),
      "v.fg:8:3: error: state %k_cache.0 is read after its update at line 7");
  // Returning the old version (or a view of it) reads it after the update too.
  EXPECT_EQ(
      parseError(kvGraph("  %k_cache.0.1 = set_rows(%k_cache.0, %k, %positions) : f16[8, 2, 4]\n",
                         "%k_cache.0")),
      "graph @decode: result %k_cache.0 reads state %k_cache.0 after its update at line 5");
}

/// Each version is updated at most once.
TEST(Verifier, DoubleUpdate) {
  EXPECT_EQ(
      parseError(kvGraph("  %k_cache.0.1 = set_rows(%k_cache.0, %k, %positions) : f16[8, 2, 4]\n"
                         "  %k_cache.0.2 = set_rows(%k_cache.0, %k, %positions) : f16[8, 2, 4]\n")),
      "v.fg:6:3: error: state %k_cache.0 is updated twice (first at line 5)");
}

/// Updaters only update state (or a version of it), never weights, inputs or temporaries.
TEST(Verifier, SetRowsIntoNonState) {
  EXPECT_EQ(parseError("graph @f(\n"
                       "    input %k: f32[1, 4],\n"
                       "    input %positions: i32[1],\n"
                       "    weight %w: f32[8, 4]) {\n"
                       "  %w.1 = set_rows(%w, %k, %positions) : f32[8, 4]\n"
                       "  return %w.1\n"
                       "}\n"),
            "v.fg:5:3: error: 'set_rows' can only update state, but %w is a weight");
  EXPECT_EQ(parseError("graph @f(input %k: f32[1, 4], input %positions: i32[1]) {\n"
                       "  %t = cont(%k) : f32[1, 4]\n"
                       "  %t.1 = set_rows(%t, %k, %positions) : f32[1, 4]\n"
                       "  return %t.1\n"
                       "}\n"),
            "v.fg:3:3: error: 'set_rows' operand 0 (%t) must be a state argument or a version of "
            "one");
  EXPECT_EQ(parseError(kvGraph("  %v = reshape(%k_cache.0) {shape = [8, 2, 4]} : f16[8, 2, 4]\n"
                               "  %k_cache.0.1 = set_rows(%v, %k, %positions) : f16[8, 2, 4]\n")),
            "v.fg:6:3: error: 'set_rows' operand 0 (%v) must be a state argument or a version of "
            "one");
}

/// Weights and state shared between entries agree on type, role and init.
TEST(Verifier, SharedArgumentsAgree) {
  const char *head =
      "graph @a(input %x: f32[4], weight %w: f32[4] {init = constant(value = 1.0)}) {\n"
      "  %y = mul(%x, %w) : f32[4]\n"
      "  return %y\n"
      "}\n\n";
  EXPECT_EQ(
      parseError(std::string(head) +
                 "graph @b(input %x: f32[8], weight %w: f32[8] {init = constant(value = 1.0)}) {\n"
                 "  %y = mul(%x, %w) : f32[8]\n"
                 "  return %y\n"
                 "}\n"),
      "v.fg:6:28: error: weight '%w' has type f32[8] here but f32[4] in @a");
  EXPECT_EQ(
      parseError(std::string(head) +
                 "graph @b(input %x: f32[4], weight %w: f32[4] {init = constant(value = 2.0)}) {\n"
                 "  %y = mul(%x, %w) : f32[4]\n"
                 "  return %y\n"
                 "}\n"),
      "v.fg:6:28: error: weight '%w' has init constant(value = 2.0) here but "
      "constant(value = 1.0) in @a");
  EXPECT_EQ(parseError(std::string(head) + "graph @b(input %x: f32[4], state %w: f32[4]) {\n"
                                           "  %y = mul(%x, %w) : f32[4]\n"
                                           "  return %y\n"
                                           "}\n"),
            "v.fg:6:28: error: '%w' is state here but weight in @a");
  // Inputs may differ per entry (decode vs prefill token counts).
  EXPECT_EQ(
      parseError(
          std::string(head) +
          "graph @b(input %x: f32[2, 4], weight %w: f32[4] {init = constant(value = 1.0)}) {\n"
          "  %y = mul(%x, %w) : f32[2, 4]\n"
          "  return %y\n"
          "}\n"),
      "");
}

/// Graphs built in C++ (no locations) get errors naming the entry and the value.
TEST(Verifier, BuiltGraphErrorsNameTheValue) {
  Graph g;
  Function &fn = g.addFunction("decode");
  Builder b(fn);
  auto k = b.input("k", {DType::F32, {1, 2, 4}});
  auto pos = b.input("positions", {DType::I32, {1}});
  auto kc = b.state("k_cache.0", {DType::F16, {8, 2, 4}});
  b.setRows(kc, k, pos, "k_cache.0");
  b.result(b.attention(k, kc, kc, pos, {0.5, 0, 0}, std::nullopt, "a"));
  ASSERT_FALSE(bool(b.finish()));
  EXPECT_EQ(verifyError(g),
            "graph @decode: state %k_cache.0 is read after its update by %k_cache.0.1");
}

/// Results must be defined values; declared types must match the type rule.
TEST(Verifier, ResultsAndTypes) {
  Graph g;
  Function &fn = g.addFunction("f");
  Builder b(fn);
  auto x = b.input("x", {DType::F32, {4}});
  auto y = b.unary(OpKind::Sqrt, x, "y");
  ASSERT_FALSE(bool(b.finish()));
  fn.addResult(kNoValue);
  EXPECT_EQ(verifyError(g), "graph @f: result 0 (<invalid value>) is not defined");
  fn.setResults({y});
  EXPECT_EQ(verifyError(g), "");
  fn.value(y).type = {DType::F32, {8}};
  EXPECT_EQ(verifyError(g), "graph @f: declared type f32[8] does not match inferred f32[4] (%y)");
  fn.value(y).type = {DType::F32, {4}};
  // A node using a value defined after it breaks program order.
  fn.addNode(OpKind::Add, {y, x}, {}, {TensorType(DType::F32, {4})}, {"z"});
  fn.node(0).operands[0] = fn.lookup("z");
  EXPECT_EQ(verifyError(g), "graph @f: 'sqrt' operand 0 (%z) is not defined before its use");
}

/// Two entries of one name are rejected; quantised weights need whole blocks.
TEST(Verifier, GraphLevelChecks) {
  Graph g;
  g.addFunction("f");
  g.addFunction("f");
  EXPECT_EQ(verifyError(g), "duplicate graph name '@f'");
  EXPECT_EQ(parseError("graph @f(weight %w: q4_0[4, 48]) {\n  return\n}\n"),
            "v.fg:1:10: error: rows of %w: q4_0[4, 48] are not whole blocks of 32");
}

/// A printed graph that violates linearity still prints, and parsing it reports the error.
TEST(Verifier, PrintedBadGraphFailsToParse) {
  Graph g;
  Function &fn = g.addFunction("decode");
  Builder b(fn);
  auto k = b.input("k", {DType::F32, {1, 2, 4}});
  auto pos = b.input("positions", {DType::I32, {1}});
  auto kc = b.state("k_cache.0", {DType::F16, {8, 2, 4}});
  b.setRows(kc, k, pos, "k_cache.0");
  b.setRows(kc, k, pos, "k_cache.0");
  ASSERT_FALSE(bool(b.finish()));
  EXPECT_EQ(parseError(printToString(g)),
            "v.fg:6:3: error: state %k_cache.0 is updated twice (first at line 5)");
}
