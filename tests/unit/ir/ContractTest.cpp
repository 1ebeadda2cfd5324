//===- ContractTest.cpp - entry roles and input bindings in the IR ----------===//
//
// Roles (decode / prefill N) and input bindings (tokens / positions / other,
// range [lo, hi)) are data on each Function: printed and parsed as the
// function's attribute dictionary and the inputs' attributes, verified, and
// absent from old text without them (nothing is inferred from names).
//
//===----------------------------------------------------------------------===//
#include "ir/Parser.h"
#include "ir/Printer.h"
#include "ir/Verifier.h"

#include "llvm/Support/raw_ostream.h"

#include <gtest/gtest.h>

using namespace fg;

namespace {

std::string print(const Graph &g) {
  std::string s;
  llvm::raw_string_ostream os(s);
  printGraph(g, os);
  return os.str();
}

std::string parseError(llvm::StringRef text) {
  auto g = parseGraph(text, "t.fg");
  return g ? std::string("(no error)") : llvm::toString(g.takeError());
}

const char *kPrefill = R"(graph @prefill_4(
    input %tokens: i32[4] {bind = tokens, range = [0, 64)},
    input %positions: i32[4] {bind = positions, range = [0, 16)},
    weight %emb: f32[64, 8] {init = constant(value = 1.0)}) attributes {role = prefill, n = 4} {
  %x = get_rows(%emb, %tokens) : f32[4, 8]
  return %x
}

graph @decode(input %tokens: i32[1] {bind = tokens, range = [0, 64)}, weight %emb: f32[64, 8] {init = constant(value = 1.0)}) attributes {role = decode} {
  %x = get_rows(%emb, %tokens) : f32[1, 8]
  return %x
}

graph @other(input %ids: i32[3] {bind = other, range = [-2, 5)}, input %free: i32[3] {bind = positions}) {
  %y = add(%ids, %free) : i32[3]
  return %y
}
)";

} // namespace

/// The text form round-trips roles and bindings, and the parsed graph holds
/// them as data.
TEST(Contract, RolesAndBindingsRoundTrip) {
  auto g = parseGraph(kPrefill, "t.fg");
  ASSERT_TRUE(bool(g)) << llvm::toString(g.takeError());
  EXPECT_EQ(print(*g), kPrefill);
  const Function &pre = g->functions()[0], &dec = g->functions()[1], &other = g->functions()[2];
  EXPECT_EQ(pre.contract().role, EntryRole::Prefill);
  EXPECT_EQ(pre.contract().tokens, 4);
  EXPECT_EQ(dec.contract().role, EntryRole::Decode);
  EXPECT_EQ(dec.contract().tokens, 1);
  EXPECT_EQ(other.contract().role, EntryRole::Other);
  InputBinding pos = pre.binding("positions");
  EXPECT_EQ(pos.kind, BindKind::Positions);
  EXPECT_EQ(pos.lo, 0);
  EXPECT_EQ(pos.hi, 16);
  EXPECT_EQ(pre.binding("tokens").hi, 64);
  EXPECT_EQ(other.binding("ids").lo, -2);
  EXPECT_EQ(other.binding("ids").kind, BindKind::Other);
  EXPECT_FALSE(other.binding("free").hasRange());
  EXPECT_EQ(other.binding("free").kind, BindKind::Positions);
  EXPECT_EQ(pre.binding("emb").kind, BindKind::Other); // not an input
}

/// Text without roles or bindings (every .fg written before them) still
/// parses, and a `prefill_8` name alone makes no prefill role.
TEST(Contract, OldTextHasNoRolesAndNothingIsInferred) {
  const char *old = R"(graph @prefill_8(input %tokens: i32[8], input %positions: i32[8]) {
  %y = add(%tokens, %positions) : i32[8]
  return %y
}
)";
  auto g = parseGraph(old, "t.fg");
  ASSERT_TRUE(bool(g)) << llvm::toString(g.takeError());
  EXPECT_EQ(print(*g), old);
  const Function &fn = g->functions()[0];
  EXPECT_EQ(fn.contract().role, EntryRole::Other);
  EXPECT_EQ(fn.binding("positions").kind, BindKind::Other);
  EXPECT_FALSE(fn.binding("positions").hasRange());
}

/// Malformed roles and bindings are one-line errors at the offending token.
TEST(Contract, ParseErrors) {
  EXPECT_EQ(parseError("graph @f(input %x: i32[4] {bind = words}) {\n  return\n}\n"),
            "t.fg:1:35: error: expected an input kind (tokens, positions or other), got 'words'");
  EXPECT_EQ(parseError("graph @f(input %x: i32[4] {bind = tokens, range = [5, 5)}) {\n  return\n}\n"),
            "t.fg:1:55: error: empty range [5, 5)");
  EXPECT_EQ(parseError("graph @f(input %x: i32[4] {bind = tokens, range = [0, 5]}) {\n  return\n}\n"),
            "t.fg:1:56: error: expected ')' (ranges are [lo, hi)), got ']'");
  EXPECT_EQ(parseError("graph @f(input %x: i32[4] {range = [0, 5)}) {\n  return\n}\n"),
            "t.fg:1:28: error: unknown input attribute 'range', expected 'bind'");
  EXPECT_EQ(parseError("graph @f(input %x: i32[4]) attributes {role = prefill} {\n  return\n}\n"),
            "t.fg:1:54: error: expected ',' (prefill needs n = N), got '}'");
  EXPECT_EQ(parseError("graph @f(input %x: i32[4]) attributes {role = prefill, n = 0} {\n  return\n}\n"),
            "t.fg:1:60: error: prefill n must be positive, got 0");
  EXPECT_EQ(parseError("graph @f(input %x: i32[4]) attributes {role = sample} {\n  return\n}\n"),
            "t.fg:1:47: error: expected an entry role (decode, prefill or other), got 'sample'");
  EXPECT_EQ(parseError("graph @f(input %x: i32[4]) attributes {kind = decode} {\n  return\n}\n"),
            "t.fg:1:40: error: unknown graph attribute 'kind', expected 'role'");
}

/// The verifier: a binding on a float input, a role whose token count the
/// bound inputs do not have.
TEST(Contract, VerifierErrors) {
  EXPECT_EQ(parseError("graph @f(input %x: f32[4] {bind = tokens, range = [0, 9)}) {\n  return\n}\n"),
            "t.fg:1:10: error: input %x is bound to tokens but is f32[4], not an integer tensor");
  EXPECT_EQ(parseError("graph @f(input %x: i32[4] {bind = positions}) attributes {role = decode} {\n"
                       "  return\n}\n"),
            "t.fg:1:10: error: input %x (positions) is i32[4] but the decode entry runs 1 tokens");
  // A range wider than the table the input indexes would let a checked value
  // gather or write outside it.
  EXPECT_EQ(parseError("graph @f(input %t: i32[2] {bind = tokens, range = [0, 65)}, weight %e: "
                       "f32[64, 8]) {\n  %x = get_rows(%e, %t) : f32[2, 8]\n  return %x\n}\n"),
            "t.fg:1:10: error: input %t is bound to [0, 65) but indexes the 64 rows of %e");
  EXPECT_EQ(parseError("graph @f(input %p: i32[1] {bind = positions, range = [-1, 16)}, input %v: "
                       "f16[1, 4], state %c: f16[16, 4]) {\n  %c.1 = set_rows(%c, %v, %p) : "
                       "f16[16, 4]\n  return\n}\n"),
            "t.fg:1:10: error: input %p is bound to [-1, 16) but indexes the 16 rows of %c");
  // The fused cache writers index their states too: rope_set_rows' indices,
  // and rope_kv_attention's positions (both caches).
  EXPECT_EQ(parseError("graph @f(input %p: i32[1] {bind = positions, range = [0, 17)}, input %k: "
                       "f32[1, 1, 4], state %c: f16[16, 1, 4]) {\n  %c.1 = fused.rope_set_rows(%c, "
                       "%k, %p, %p) {n_dims = 4} : f16[16, 1, 4]\n  return\n}\n"),
            "t.fg:1:10: error: input %p is bound to [0, 17) but indexes the 16 rows of %c");
  EXPECT_EQ(parseError("graph @f(input %p: i32[1] {bind = positions, range = [0, 13)}, input %q: "
                       "f32[1, 1, 4], input %k: f32[1, 1, 4], input %v: f32[1, 1, 4], state %kc: "
                       "f16[12, 1, 4], state %vc: f16[12, 1, 4]) {\n  %kc.1, %vc.1, %y = "
                       "fused.rope_kv_attention(%kc, %vc, %q, %k, %v, %p) {scale = 0.5, n_dims = 4} "
                       ": f16[12, 1, 4], f16[12, 1, 4], f32[1, 1, 4]\n  return %y\n}\n"),
            "t.fg:1:10: error: input %p is bound to [0, 13) but indexes the 12 rows of %kc");
  // Attention reads the cache rows its positions name.
  EXPECT_EQ(parseError("graph @f(input %p: i32[1] {bind = positions, range = [0, 17)}, input %q: "
                       "f32[1, 2, 4], state %kc: f16[16, 1, 4], state %vc: f16[16, 1, 4]) {\n"
                       "  %y = attention(%q, %kc, %vc, %p) {scale = 0.5} : f32[1, 2, 4]\n"
                       "  return %y\n}\n"),
            "t.fg:1:10: error: input %p is bound to [0, 17) but indexes the 16 rows of %kc");
  // Built graphs: the role's token count is checked too.
  Graph g;
  Function &fn = g.addFunction("decode");
  fn.addArgument("tokens", TensorType(DType::I32, {1}), ArgRole::Input);
  fn.setContract({EntryRole::Decode, 2});
  EXPECT_EQ(llvm::toString(verifyGraph(g)),
            "graph @decode: role decode with 2 tokens (decode runs 1, prefill N >= 1, other 0)");
  fn.setContract({EntryRole::Decode, 1});
  fn.arguments()[0].bind = {BindKind::Tokens, 3, 2};
  EXPECT_EQ(llvm::toString(verifyGraph(g)), "graph @decode: input %tokens has an empty range [3, 2)");
}
