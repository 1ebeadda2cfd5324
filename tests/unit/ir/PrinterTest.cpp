#include "ir/Printer.h"
#include "ir/Builder.h"

#include <gtest/gtest.h>

using namespace fg;

/// A built decode graph prints in the canonical form: arguments one per line
/// (more than two), unnamed values numbered, only non-default attributes.
TEST(Printer, CanonicalForm) {
  Graph g;
  Function &fn = g.addFunction("decode");
  Builder b(fn);
  auto tokens = b.input("tokens", {DType::I32, {1}});
  auto positions = b.input("positions", {DType::I32, {1}});
  auto emb = b.weight("token_embd", {DType::F16, {512, 256}}, WeightInit::normal(1, 0.02));
  auto kc = b.state("k_cache.0", {DType::F16, {4096, 2, 128}});
  auto x = b.getRows(emb, tokens, "x");
  auto n = b.rmsNorm(x, 1e-6);
  auto s = b.scale(n, 0.5);
  auto r = b.reshape(s, {1, 2, 128}, "k");
  auto kc1 = b.setRows(kc, r, positions, "k_cache.0.1");
  (void)kc1;
  b.result(s);
  ASSERT_FALSE(bool(b.finish()));
  EXPECT_EQ(printToString(g),
            "graph @decode(\n"
            "    input %tokens: i32[1],\n"
            "    input %positions: i32[1],\n"
            "    weight %token_embd: f16[512, 256] {init = normal(seed = 1, std = 0.02)},\n"
            "    state %k_cache.0: f16[4096, 2, 128]) {\n"
            "  %x = get_rows(%token_embd, %tokens) : f32[1, 256]\n"
            "  %0 = rms_norm(%x) {eps = 1e-06} : f32[1, 256]\n"
            "  %1 = scale(%0) {scale = 0.5} : f32[1, 256]\n"
            "  %k = reshape(%1) {shape = [1, 2, 128]} : f32[1, 2, 128]\n"
            "  %k_cache.0.1 = set_rows(%k_cache.0, %k, %positions) : f16[4096, 2, 128]\n"
            "  return %1\n"
            "}\n");
}

/// Two arguments stay on one line; entries are separated by a blank line;
/// numbers used as names are skipped when numbering unnamed values.
TEST(Printer, ShortArgumentsAndNumbering) {
  Graph g;
  for (const char *name : {"a", "b"}) {
    Function &fn = g.addFunction(name);
    Builder b(fn);
    auto x = b.input("0", {DType::F32, {4}});
    auto w = b.weight("w", {DType::F32, {4}});
    auto y = b.mul(x, w);
    b.result(b.unary(OpKind::Silu, y, "1"));
    b.result(y);
    ASSERT_FALSE(bool(b.finish()));
  }
  std::string one = "(input %0: f32[4], weight %w: f32[4]) {\n"
                    "  %2 = mul(%0, %w) : f32[4]\n"
                    "  %1 = silu(%2) : f32[4]\n"
                    "  return %1, %2\n"
                    "}\n";
  EXPECT_EQ(printToString(g), "graph @a" + one + "\ngraph @b" + one);
}
