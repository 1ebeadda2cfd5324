#include "ir/Parser.h"
#include "ir/OpViews.h"
#include "ir/Builder.h"
#include "ir/Printer.h"

#include <gtest/gtest.h>

#include <random>

using namespace fg;

namespace {

/// Every op of the table, every attribute kind, optional operands present and
/// absent, weight initialisers of every kind, negative / infinite / tiny floats.
const char *kAllOps = R"(graph @decode(
    input %tokens: i32[2],
    input %positions: i32[2],
    weight %token_embd: f16[64, 32] {init = normal(seed = 1, std = 0.02)},
    weight %blk.0.attn_norm: f32[32] {init = constant(value = 1.0)},
    weight %blk.0.attn_q: q8_0[64, 32] {init = uniform(seed = 18446744073709551615, min = -0.5, max = 0.5)},
    weight %blk.0.attn_k: f16[32, 32] {init = normal(seed = 3, std = 0.02, mean = -1.5)},
    weight %blk.0.attn_v: bf16[32, 32] {init = tensor(file = "dir/model \"x\".gguf", name = "blk.0.attn_v.weight")},
    weight %rope_freqs: f32[8],
    weight %sinks: f32[4],
    state %k_cache.0: f16[16, 2, 16],
    state %v_cache.0: f16[16, 2, 16]) {
  %x = get_rows(%token_embd, %tokens) : f32[2, 32]
  %0 = rms_norm(%x) {eps = 1e-06} : f32[2, 32]
  %1 = mul(%0, %blk.0.attn_norm) : f32[2, 32]
  %q = matmul(%1, %blk.0.attn_q) : f32[2, 64]
  %k = matmul(%1, %blk.0.attn_k) : f32[2, 32]
  %v = matmul(%1, %blk.0.attn_v) : f32[2, 32]
  %q3 = reshape(%q) {shape = [2, 4, 16]} : f32[2, 4, 16]
  %k3 = reshape(%k) {shape = [2, 2, 16]} : f32[2, 2, 16]
  %v3 = reshape(%v) {shape = [2, 2, 16]} : f32[2, 2, 16]
  %qr = rope(%q3, %positions, %rope_freqs) {mode = neox, n_dims = 16, theta = 5e+05, freq_scale = 0.25, ext_factor = 1.0, attn_factor = 1.5, beta_fast = 16.0, beta_slow = 2.0, n_ctx_orig = 4096} : f32[2, 4, 16]
  %kr = rope(%k3, %positions) {n_dims = 8} : f32[2, 2, 16]
  %k_cache.0.1 = set_rows(%k_cache.0, %kr, %positions) : f16[16, 2, 16]
  %v_cache.0.1 = set_rows(%v_cache.0, %v3, %positions) : f16[16, 2, 16]
  %attn = attention(%qr, %k_cache.0.1, %v_cache.0.1, %positions, %sinks) {scale = 0.25, window = 8, softcap = 50.0} : f32[2, 4, 16]
  %attn2 = attention(%qr, %k_cache.0.1, %v_cache.0.1, %positions) {scale = -1e+300} : f32[2, 4, 16]
  %a2 = reshape(%attn) {shape = [2, 64]} : f32[2, 64]
  return %a2, %attn2, %k_cache.0.1, %v_cache.0.1
}

graph @ops(
    input %h: f32[2, 8],
    input %ids: i32[2, 3],
    weight %blk.0.ffn_up_exps: f32[4, 6, 8],
    weight %bias: f32[4, 6],
    input %mask: f32[2, 1, 8]) {
  %h3 = reshape(%h) {shape = [2, 1, 8]} : f32[2, 1, 8]
  %e = matmul_id(%h3, %blk.0.ffn_up_exps, %ids) : f32[2, 3, 6]
  %eb = add_id(%e, %bias, %ids) : f32[2, 3, 6]
  %s = scale(%eb) {scale = -2.5, bias = 1e-06} : f32[2, 3, 6]
  %c = clamp(%s) {max = 6.0} : f32[2, 3, 6]
  %c2 = clamp(%c) {min = -0.0, max = nan} : f32[2, 3, 6]
  %c3 = clamp(%c2) {max = 5e-324} : f32[2, 3, 6]
  %u1 = sqrt(%c3) : f32[2, 3, 6]
  %u2 = sqr(%u1) : f32[2, 3, 6]
  %u3 = exp(%u2) : f32[2, 3, 6]
  %u4 = tanh(%u3) : f32[2, 3, 6]
  %u5 = sigmoid(%u4) : f32[2, 3, 6]
  %u6 = silu(%u5) : f32[2, 3, 6]
  %u7 = gelu(%u6) : f32[2, 3, 6]
  %u8 = relu(%u7) : f32[2, 3, 6]
  %u9 = softplus(%u8) : f32[2, 3, 6]
  %g = glu(%u9, %u1) {kind = swiglu_oai, alpha = 1.5, limit = inf} : f32[2, 3, 6]
  %g2 = glu(%g, %u2) : f32[2, 3, 6]
  %d = div(%g2, %u3) : f32[2, 3, 6]
  %sb = sub(%d, %u4) : f32[2, 3, 6]
  %ln = layer_norm(%sb) {eps = 0.001} : f32[2, 3, 6]
  %sm = softmax(%ln) {scale = 0.125, max_bias = 8.0} : f32[2, 3, 6]
  %sm2 = softmax(%h3, %mask) : f32[2, 1, 8]
  %as = argsort(%sm) {order = desc} : i32[2, 3, 6]
  %tk = top_k(%sm) {k = 2} : i32[2, 3, 2]
  %sr = sum_rows(%sm) : f32[2, 3, 1]
  %mn = mean(%sm) : f32[2, 3, 1]
  %cc = concat(%sr, %mn) {axis = 2} : f32[2, 3, 2]
  %rp = repeat(%cc) {shape = [4, 3, 2]} : f32[4, 3, 2]
  %vw = view(%rp) {shape = [3, 2], strides = [2, -1], offset = 1} : f32[3, 2]
  %vw2 = view(%rp) {shape = [], strides = []} : f32[]
  %pm = permute(%rp) {perm = [2, 0, 1]} : f32[2, 4, 3]
  %tr = transpose(%pm) : f32[2, 3, 4]
  %ct = cont(%tr) : f32[2, 3, 4]
  %cv = convert(%ct) {dtype = bf16} : bf16[2, 3, 4]
  %ad = add(%cv, %cv) : bf16[2, 3, 4]
  return %ad, %vw, %vw2, %as, %tk, %sm2
}

graph @two(input %a: f32[4], weight %w: f32[4] {init = constant(value = -inf)}) {
  %7 = mul(%a, %w) : f32[4]
  %3 = mul(%7, %7) : f32[4]
  return %3
}

graph @none() {
  return
}
)";

std::string parseAndPrint(llvm::StringRef text) {
  auto g = parseGraph(text, "t.fg");
  if (!g)
    return "ERROR: " + llvm::toString(g.takeError());
  return printToString(*g);
}

/// The error message of parsing `text` as t.fg, or "" when it parses.
std::string parseError(llvm::StringRef text) {
  auto g = parseGraph(text, "t.fg");
  if (g)
    return "";
  return llvm::toString(g.takeError());
}

/// Wraps statement lines in a one-entry graph with inputs %x: f32[4] and
/// %i: i32[4]; the statements start on line 2.
std::string body(llvm::StringRef stmts, llvm::StringRef ret = "%x") {
  return "graph @f(input %x: f32[4], input %i: i32[4]) {\n" + stmts.str() + "  return " +
         ret.str() + "\n}\n";
}

} // namespace

/// The canonical text of every op reads back and prints identically.
TEST(Parser, CanonicalRoundTrip) { EXPECT_EQ(parseAndPrint(kAllOps), kAllOps); }

/// Parsed values keep their names, numeric ones included, and the parsed
/// graph carries locations and attributes.
TEST(Parser, NamesLocationsAndAttributes) {
  auto g = parseGraph(kAllOps, "t.fg");
  ASSERT_TRUE(bool(g)) << llvm::toString(g.takeError());
  ASSERT_EQ(g->functions().size(), 4u);
  const Function &two = *g->lookup("two");
  ASSERT_EQ(two.numNodes(), 2u);
  EXPECT_EQ(two.value(two.node(0).result()).name, "7");
  EXPECT_EQ(two.node(1).loc.line, 79u);
  EXPECT_EQ(two.node(1).loc.col, 3u);
  EXPECT_EQ(two.arguments()[1].loc.line, 77u);
  EXPECT_EQ(two.arguments()[1].loc.col, 30u);
  EXPECT_EQ(two.arguments()[1].init,
            WeightInit::constant(-std::numeric_limits<double>::infinity()));
  const Function &decode = *g->lookup("decode");
  EXPECT_EQ(decode.arguments()[4].init.seed, 18446744073709551615ull);
  EXPECT_EQ(decode.arguments()[6].init.file, "dir/model \"x\".gguf");
  const Node &rope = decode.node(9);
  ASSERT_EQ(rope.kind, OpKind::Rope);
  EXPECT_EQ(op::Rope(rope).mode(), RopeMode::Neox);
  EXPECT_EQ(op::Rope(rope).nDims(), 16);
  EXPECT_EQ(op::Rope(rope).theta(), 500000.0);
  EXPECT_EQ(rope.operands.size(), 3u);
  EXPECT_EQ(op::RmsNorm(decode.node(1)).eps(), 1e-6);
}

/// A graph built in C++ survives print -> parse -> print unchanged.
TEST(Parser, BuiltGraphRoundTrip) {
  Graph g;
  for (int64_t t : {1, 8}) {
    Function &fn = g.addFunction(t == 1 ? "decode" : "prefill_8");
    Builder b(fn);
    auto tokens = b.input("tokens", {DType::I32, {t}});
    auto positions = b.input("positions", {DType::I32, {t}});
    auto emb = b.weight("token_embd", {DType::F16, {100, 16}}, WeightInit::normal(7, 0.02));
    auto kc = b.state("k_cache.0", {DType::F16, {32, 1, 16}});
    auto x = b.getRows(emb, tokens);
    auto n = b.rmsNorm(x, 1e-5);
    auto k = b.reshape(n, {t, 1, 16});
    Builder::RopeParams p;
    p.nDims = 16;
    p.mode = RopeMode::Neox;
    auto kr = b.rope(k, positions, p);
    auto kc1 = b.setRows(kc, kr, positions, "k_cache.0");
    auto a = b.attention(kr, kc1, kc1, positions, {0.25, 0, 0});
    b.result(b.matmul(b.reshape(a, {t, 16}), emb, "logits"));
    ASSERT_FALSE(bool(b.finish()));
  }
  std::string once = printToString(g);
  EXPECT_EQ(parseAndPrint(once), once);
  EXPECT_NE(once.find("%k_cache.0.1 = set_rows(%k_cache.0, %3, %positions)"), std::string::npos)
      << once;
}

/// Whitespace is free and `//` comments are ignored; output is canonical.
TEST(Parser, FlexibleWhitespaceAndComments) {
  const char *loose = "// a comment line\n"
                      "graph   @f (input %x:f32[ 4 ],weight %w : f32[4]{init=constant(value=2)})\n"
                      "{ %y=mul( %x ,%w ) // trailing comment\n"
                      " :f32[4]\n"
                      "  %z = rms_norm(%y) {eps = 0.00001} : f32[4] return %z }";
  EXPECT_EQ(parseAndPrint(loose),
            "graph @f(input %x: f32[4], weight %w: f32[4] {init = constant(value = 2.0)}) {\n"
            "  %y = mul(%x, %w) : f32[4]\n"
            "  %z = rms_norm(%y) {eps = 1e-05} : f32[4]\n"
            "  return %z\n"
            "}\n");
}

// --- malformed input: one test per class of error -----------------------------------

TEST(ParserErrors, TruncatedInput) {
  EXPECT_EQ(parseError("graph @f(input %x: f32[4]) {\n  %y = sqrt(%x) : f32[4]\n"),
            "t.fg:3:1: error: unexpected end of input, expected a statement or 'return'");
  EXPECT_EQ(parseError("graph @f(input %x: f32[4"),
            "t.fg:1:25: error: unexpected end of input, expected ',' or ']'");
  EXPECT_EQ(parseError(""), "t.fg:1:1: error: unexpected end of input, expected 'graph'");
  EXPECT_EQ(parseError("graph @f(weight %w: f32[4] {init = tensor(file = \"a.gg"),
            "t.fg:1:55: error: unexpected end of input, expected '\"'");
}

TEST(ParserErrors, UnknownOp) {
  EXPECT_EQ(parseError(body("  %y = frobnicate(%x) : f32[4]\n")),
            "t.fg:2:8: error: unknown op 'frobnicate'");
}

TEST(ParserErrors, WrongOperandCount) {
  EXPECT_EQ(parseError(body("  %y = add(%x) : f32[4]\n")),
            "t.fg:2:8: error: 'add' expects 2 operand(s), got 1");
  EXPECT_EQ(parseError(body("  %y = softmax(%x, %x, %x) : f32[4]\n")),
            "t.fg:2:8: error: 'softmax' expects 1 to 2 operand(s), got 3");
}

TEST(ParserErrors, ShapeMismatch) {
  EXPECT_EQ(parseError(body("  %y = sqrt(%x) : f32[1, 8]\n")),
            "t.fg:2:19: error: declared type f32[1, 8] does not match inferred f32[4]");
  EXPECT_EQ(parseError(body("  %y = matmul(%x, %x) : f32[4]\n")),
            "t.fg:2:8: error: 'matmul': weight must have rank 2, got f32[4]");
  EXPECT_EQ(parseError(body("  %y = sqrt(%i) : i32[4]\n")),
            "t.fg:2:8: error: 'sqrt': operand must be a real type, got i32[4]");
}

TEST(ParserErrors, UndefinedValue) {
  EXPECT_EQ(parseError(body("  %y = sqrt(%nope) : f32[4]\n")),
            "t.fg:2:13: error: use of undefined value '%nope'");
  EXPECT_EQ(parseError(body("", "%later")), "t.fg:2:10: error: use of undefined value '%later'");
}

TEST(ParserErrors, Redefinition) {
  EXPECT_EQ(parseError(body("  %x = sqrt(%x) : f32[4]\n")),
            "t.fg:2:3: error: redefinition of value '%x'");
  EXPECT_EQ(parseError("graph @f(input %x: f32[4], state %x: f32[4]) {\n  return\n}\n"),
            "t.fg:1:34: error: redefinition of value '%x'");
}

TEST(ParserErrors, UnknownAttribute) {
  EXPECT_EQ(parseError(body("  %y = rms_norm(%x) {eps = 1e-06, epsilon = 1.0} : f32[4]\n")),
            "t.fg:2:35: error: unknown attribute 'epsilon' for 'rms_norm'");
  EXPECT_EQ(parseError(body("  %y = rms_norm(%x) {eps = 1e-06, eps = 1.0} : f32[4]\n")),
            "t.fg:2:35: error: attribute 'eps' is given twice");
}

TEST(ParserErrors, MissingRequiredAttribute) {
  EXPECT_EQ(parseError(body("  %y = rms_norm(%x) : f32[4]\n")),
            "t.fg:2:8: error: 'rms_norm' requires attribute 'eps'");
}

TEST(ParserErrors, WrongAttributeKind) {
  EXPECT_EQ(parseError(body("  %y = rms_norm(%x) {eps = [1]} : f32[4]\n")),
            "t.fg:2:28: error: expected a float for attribute 'eps' of 'rms_norm', got '['");
  EXPECT_EQ(parseError(body("  %y = top_k(%x) {k = 2.5} : i32[2]\n")),
            "t.fg:2:23: error: expected an integer for attribute 'k' of 'top_k', got '2.5'");
  EXPECT_EQ(parseError(body("  %y = reshape(%x) {shape = 4} : f32[4]\n")),
            "t.fg:2:29: error: expected a list of integers for attribute 'shape' of 'reshape', "
            "got '4'");
}

TEST(ParserErrors, BadEnumWord) {
  EXPECT_EQ(parseError(body("  %y = argsort(%x) {order = up} : i32[4]\n")),
            "t.fg:2:29: error: bad value 'up' for attribute 'order' of 'argsort', expected one of "
            "asc, desc");
}

TEST(ParserErrors, BadDType) {
  EXPECT_EQ(parseError("graph @f(input %x: f33[4]) {\n  return\n}\n"),
            "t.fg:1:20: error: unknown dtype 'f33'");
  EXPECT_EQ(parseError(body("  %y = convert(%x) {dtype = f8} : f32[4]\n")),
            "t.fg:2:29: error: unknown dtype 'f8'");
}

TEST(ParserErrors, DuplicateGraphName) {
  EXPECT_EQ(parseError("graph @f() {\n  return\n}\n\ngraph @f() {\n  return\n}\n"),
            "t.fg:5:7: error: redefinition of graph '@f'");
}

TEST(ParserErrors, NumbersOutOfRange) {
  EXPECT_EQ(parseError("graph @f(input %x: f32[99999999999999999999]) {\n  return\n}\n"),
            "t.fg:1:24: error: integer 99999999999999999999 is out of range");
  EXPECT_EQ(parseError("graph @f(input %x: f32[0]) {\n  return\n}\n"),
            "t.fg:1:24: error: dimension must be positive, got 0");
  EXPECT_EQ(parseError("graph @f(input %x: f32[65536, 65536, 65536, 2]) {\n  return\n}\n"),
            "t.fg:1:45: error: tensor type has more than 2^48 elements");
  EXPECT_EQ(parseError(body("  %y = scale(%x) {scale = 1e999} : f32[4]\n")),
            "t.fg:2:27: error: float 1e999 is out of range");
  EXPECT_EQ(parseError("graph @f(weight %w: f32[4] {init = normal(seed = -1, std = 1.0)}) {\n"
                       "  return\n}\n"),
            "t.fg:1:50: error: integer -1 is out of range");
}

TEST(ParserErrors, MiscSyntax) {
  EXPECT_EQ(parseError(body("  %y = sqrt(%x) $ : f32[4]\n")),
            "t.fg:2:17: error: unexpected character '$'");
  EXPECT_EQ(parseError("graph @f(output %x: f32[4]) {\n  return\n}\n"),
            "t.fg:1:10: error: expected an argument role (input, weight or state), got 'output'");
  EXPECT_EQ(
      parseError("graph @f(input %x: f32[4] {init = constant(value = 1.0)}) {\n  return\n}\n"),
      "t.fg:1:27: error: only weights take an initialiser");
  EXPECT_EQ(parseError("graph @f(weight %x: f32[4] {init = zeros()}) {\n  return\n}\n"),
            "t.fg:1:36: error: unknown initialiser 'zeros', expected normal, uniform, constant or "
            "tensor");
  EXPECT_EQ(parseError("graph @f(weight %x: f32[4] {init = normal(seed = 1)}) {\n  return\n}\n"),
            "t.fg:1:51: error: normal() requires field 'std'");
  EXPECT_EQ(parseError(body("  %y, %z = sqrt(%x) : f32[4], f32[4]\n")),
            "t.fg:2:3: error: 'sqrt' has 1 result(s), got 2 name(s)");
  EXPECT_EQ(parseError(body("  %y = sqrt(%x)\n")), "t.fg:3:3: error: expected ':', got 'return'");
}

TEST(ParserErrors, FileThatCannotBeRead) {
  auto g = parseGraphFile("/nonexistent/dir/x.fg");
  ASSERT_FALSE(bool(g));
  std::string msg = llvm::toString(g.takeError());
  EXPECT_EQ(msg.rfind("cannot read '/nonexistent/dir/x.fg': ", 0), 0u) << msg;
}

/// Every prefix of a valid file is an error (or, when it ends at an entry's
/// closing brace, a valid graph) — never a crash.
TEST(ParserFuzz, EveryTruncation) {
  std::string text = kAllOps;
  for (size_t len = 0; len < text.size(); ++len) {
    llvm::StringRef prefix(text.data(), len);
    auto g = parseGraph(prefix, "t.fg");
    if (g)
      EXPECT_TRUE(prefix.rtrim().endswith("}")) << "prefix of " << len << " bytes parsed";
    else
      llvm::consumeError(g.takeError());
  }
}

/// Random byte edits of a valid file never crash the parser or verifier.
TEST(ParserFuzz, RandomEdits) {
  std::string text = kAllOps;
  const char alphabet[] = "%@(){}[],:=-0123456789.e \n\"/xfi_";
  std::mt19937 rng(1234);
  int failures = 0;
  for (int iter = 0; iter < 3000; ++iter) {
    std::string s = text;
    int edits = 1 + static_cast<int>(rng() % 3);
    for (int e = 0; e < edits; ++e) {
      size_t at = rng() % s.size();
      switch (rng() % 3) {
      case 0:
        s[at] = alphabet[rng() % (sizeof alphabet - 1)];
        break;
      case 1:
        s.erase(at, 1 + rng() % 8);
        break;
      default:
        s.insert(at, 1, static_cast<char>(rng() % 256));
        break;
      }
    }
    auto g = parseGraph(s, "t.fg");
    if (!g) {
      std::string msg = llvm::toString(g.takeError());
      EXPECT_EQ(msg.rfind("t.fg:", 0), 0u) << msg;
      EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;
      ++failures;
    } else {
      std::string printed = printToString(*g);
      EXPECT_EQ(parseAndPrint(printed), printed);
    }
  }
  EXPECT_GT(failures, 1000);
}
