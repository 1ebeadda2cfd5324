// Typed views, Builder argument structs and the enums of ir/Enums.def, all
// generated from the op rows of ir/Ops.def (ir/OpViews.h).
#include "ir/OpViews.h"
#include "ir/Builder.h"
#include "ir/OpTable.h"
#include "ir/Parser.h"
#include "ir/Printer.h"
#include "passes/fusion/Pattern.h"

#include <gtest/gtest.h>

#include <cmath>

using namespace fg;

namespace {

// --- a misspelt name does not compile ----------------------------------------------------
// (tests/compile_fail/ also compiles the misspelling itself and checks the
// compiler's error.)

template <typename V>
concept HasEps = requires(V v) {
  v.eps();
};
template <typename V>
concept HasEpsilon = requires(V v) {
  v.epsilon();
};
static_assert(HasEps<op::RmsNorm> && !HasEpsilon<op::RmsNorm>,
              "a view has exactly the accessors of its row");
template <typename A>
concept TakesEps = requires {
  A{.x = 0u, .eps = 1e-6};
};
template <typename A>
concept TakesEpsilon = requires {
  A{.x = 0u, .epsilon = 1e-6};
};
template <typename A>
concept OmitsEps = requires {
  A{.x = 0u};
};
static_assert(TakesEps<op::RmsNormArgs> && !TakesEpsilon<op::RmsNormArgs>,
              "a misspelt argument field does not compile");
static_assert(!OmitsEps<op::RmsNormArgs>, "a required attribute cannot be left out");
template <typename A>
concept OmitsNothing = requires {
  A{.x = 0u, .positions = 1u, .nDims = 2};
};
static_assert(OmitsNothing<op::RopeArgs>,
              "optional operands and defaulted attributes may be left out");
template <typename C>
concept HasNorm = requires {
  C::norm;
};
template <typename C>
concept HasNrom = requires {
  C::nrom;
};
static_assert(HasNorm<fusion::Cap> && !HasNrom<fusion::Cap>, "a misspelt capture does not compile");

// --- the generated indices and counts ------------------------------------------------------
static_assert(op::Rope::modeIndex == 0 && op::Rope::nDimsIndex == 1 &&
              op::Rope::nCtxOrigIndex == 8);
static_assert(op::View::offsetIndex == 2);
static_assert(op::Rope::kMaxOperands == 3 && op::Attention::kMaxOperands == 5);
static_assert(op::FusedAddChain::kMaxOperands == 9);
static_assert(enumCount<TopkGating>() == 4 &&
              enumWord(TopkGating::SqrtSoftplus) == "sqrt_softplus");
static_assert(enumWord(GluKind::SwiGLUOAI) == "swiglu_oai" &&
              enumWord(UnaryMulAct::Softplus) == "softplus");

/// Every attribute line of ir/Ops.def: the view's index names the row's
/// attribute of that name and kind, and the default agrees.
TEST(OpViews, IndicesMatchTheRows) {
  unsigned checked = 0;
  auto check = [&](OpKind k, unsigned index, std::string_view name, AttrKind kind, bool required) {
    const OpInfo &info = opInfo(k);
    ASSERT_LT(index, info.attrs.size()) << info.mnemonic << " " << name;
    EXPECT_EQ(info.attrs[index].name, name) << info.mnemonic;
    EXPECT_EQ(info.attrs[index].kind, kind) << info.mnemonic << " " << name;
    EXPECT_EQ(info.attrs[index].required, required) << info.mnemonic << " " << name;
    ++checked;
  };
#define FG_ATTR(Kind, accessor, name, Type, dflt)                                                  \
  check(OpKind::Kind, op::Kind::accessor##Index, name, AttrTraits<Type>::kKind, false);
#define FG_ATTR_REQ(Kind, accessor, name, Type)                                                    \
  check(OpKind::Kind, op::Kind::accessor##Index, name, AttrTraits<Type>::kKind, true);
#include "ir/Ops.def"
  unsigned total = 0;
  for (const OpInfo &info : allOps())
    total += static_cast<unsigned>(info.attrs.size());
  EXPECT_EQ(checked, total);
  EXPECT_GT(total, 60u);
}

/// Operand counts of the views agree with the rows.
TEST(OpViews, OperandCountsMatchTheRows) {
  for (const OpInfo &info : allOps())
    EXPECT_EQ(op::maxOperands(info.kind), info.maxOperands()) << info.mnemonic;
}

const char *kGraph = R"(graph @f(
    input %x: f32[2, 4, 8],
    input %pos: i32[2],
    input %ff: f32[3]) {
  %n = rms_norm(%x) {eps = 0.125} : f32[2, 4, 8]
  %r = rope(%n, %pos, %ff) {mode = neox, n_dims = 6, theta = 500000.0, n_ctx_orig = 4096} : f32[2, 4, 8]
  %v = view(%r) {shape = [2, 32], strides = [32, 1], offset = 0} : f32[2, 32]
  %p = permute(%r) {perm = [1, 0, 2]} : f32[4, 2, 8]
  %h = convert(%p) {dtype = f16} : f16[4, 2, 8]
  %g = glu(%v, %v) {kind = swiglu_clamp, limit = 3.5} : f32[2, 32]
  %s = argsort(%g) {order = desc} : i32[2, 32]
  %k = top_k(%g) {k = 3} : i32[2, 3]
  %u = fused.unary_mul(%g, %g) {act = softplus} : f32[2, 32]
  return %h, %s, %k, %u
}
)";

const Node &nodeOf(const Function &fn, llvm::StringRef name) {
  return *fn.producer(fn.lookup(name));
}

/// Views read every attribute kind from parsed text: float, int, int list,
/// dtype and enums, and operands by name (absent optional: kNoValue).
TEST(OpViews, ReadEveryAttributeKind) {
  auto g = parseGraph(kGraph, "views.fg");
  ASSERT_TRUE(static_cast<bool>(g)) << llvm::toString(g.takeError());
  const Function &fn = g->functions().front();

  op::RmsNorm norm(nodeOf(fn, "n"));
  EXPECT_EQ(norm.eps(), 0.125);
  EXPECT_EQ(norm.x(), fn.lookup("x"));

  op::Rope rope(nodeOf(fn, "r"));
  EXPECT_EQ(rope.mode(), RopeMode::Neox);
  EXPECT_EQ(rope.nDims(), 6);
  EXPECT_EQ(rope.theta(), 500000.0);
  EXPECT_EQ(rope.freqScale(), 1.0); // the row's default
  EXPECT_EQ(rope.betaFast(), 32.0);
  EXPECT_EQ(rope.nCtxOrig(), 4096);
  EXPECT_EQ(rope.positions(), fn.lookup("pos"));
  EXPECT_EQ(rope.freqFactors(), fn.lookup("ff"));

  op::View view(nodeOf(fn, "v"));
  EXPECT_EQ(view.shape(), llvm::ArrayRef<int64_t>({2, 32}));
  EXPECT_EQ(view.strides(), llvm::ArrayRef<int64_t>({32, 1}));
  EXPECT_EQ(view.offset(), 0);
  EXPECT_EQ(op::Permute(nodeOf(fn, "p")).perm(), llvm::ArrayRef<int64_t>({1, 0, 2}));
  EXPECT_EQ(op::Convert(nodeOf(fn, "h")).dtype(), DType::F16);

  op::Glu glu(nodeOf(fn, "g"));
  EXPECT_EQ(glu.kind(), GluKind::SwiGLUClamp);
  EXPECT_EQ(glu.alpha(), 1.702);
  EXPECT_EQ(glu.limit(), 3.5);
  EXPECT_EQ(op::Argsort(nodeOf(fn, "s")).order(), SortOrder::Desc);
  EXPECT_EQ(op::TopK(nodeOf(fn, "k")).k(), 3);
  EXPECT_EQ(op::FusedUnaryMul(nodeOf(fn, "u")).act(), UnaryMulAct::Softplus);

  EXPECT_TRUE(op::Rope::classof(nodeOf(fn, "r")));
  EXPECT_FALSE(op::Rope::classof(nodeOf(fn, "n")));
}

/// An absent optional operand reads as kNoValue.
TEST(OpViews, AbsentOptionalOperand) {
  Function fn;
  Builder b(fn);
  ValueId x = b.input("x", {DType::F32, {1, 2, 8}});
  ValueId pos = b.input("pos", {DType::I32, {1}});
  ValueId r = b.create(op::RopeArgs{.x = x, .positions = pos, .nDims = 8});
  ASSERT_FALSE(b.failed());
  op::Rope rope(*fn.producer(r));
  EXPECT_EQ(rope.freqFactors(), kNoValue);
  EXPECT_EQ(fn.producer(r)->operands.size(), 2u);
}

/// Argument structs carry the row's defaults and print like the text form;
/// every enum round-trips through the printer and parser by its word.
TEST(OpViews, ArgsBuildWhatTheTextSays) {
  Function fn("f");
  Builder b(fn);
  ValueId logits = b.input("logits", {DType::F32, {2, 8}});
  ValueId ids = b.create(
      op::FusedTopkMoeArgs{
          .logits = logits, .gating = TopkGating::SqrtSoftplus, .k = 2, .renorm = 1, .scale = 2.5},
      "ids");
  ASSERT_FALSE(b.failed());
  const Node &n = *fn.producer(ids);
  op::FusedTopkMoe topk(n);
  EXPECT_EQ(topk.gating(), TopkGating::SqrtSoftplus);
  EXPECT_EQ(topk.k(), 2);
  EXPECT_EQ(topk.renorm(), 1);
  EXPECT_EQ(topk.clampMin(), 6.103515625e-05); // default
  EXPECT_EQ(topk.scale(), 2.5);
  EXPECT_EQ(topk.bias(), kNoValue);
  b.result(ids);
  std::string text;
  llvm::raw_string_ostream os(text);
  printFunction(fn, os);
  os.flush();
  EXPECT_NE(text.find("fused.topk_moe(%logits) {gating = sqrt_softplus, k = 2, renorm = 1, "
                      "scale = 2.5}"),
            std::string::npos)
      << text;

  // Every word of every enum attribute reads back as its enumerator.
  for (GluKind kind : {GluKind::SwiGLU, GluKind::GeGLU, GluKind::SwiGLUOAI, GluKind::SwiGLUClamp}) {
    std::string src =
        "graph @g(input %a: f32[4], input %b: f32[4]) {\n  %y = glu(%a, %b) {kind = " +
        std::string(enumWord(kind)) + "} : f32[4]\n  return %y\n}\n";
    auto g = parseGraph(src, "glu.fg");
    ASSERT_TRUE(static_cast<bool>(g)) << llvm::toString(g.takeError());
    const Function &gf = g->functions().front();
    EXPECT_EQ(op::Glu(gf.nodes().front()).kind(), kind);
  }
}

/// A required operand given as kNoValue, or an unknown attribute name given
/// at run time, is the builder's error (never an assert).
TEST(OpViews, DataDrivenMistakesAreErrors) {
  {
    Function fn;
    Builder b(fn);
    b.create(op::RmsNormArgs{.x = kNoValue, .eps = 1e-6});
    llvm::Error e = b.finish();
    ASSERT_TRUE(static_cast<bool>(e));
    EXPECT_NE(llvm::toString(std::move(e)).find("invalid operand"), std::string::npos);
  }
  {
    Function fn;
    Builder b(fn);
    ValueId x = b.input("x", {DType::F32, {4}});
    b.create(OpKind::RmsNorm, {x}, {{"epsilon", Attribute::ofFloat(1e-6)}});
    llvm::Error e = b.finish();
    ASSERT_TRUE(static_cast<bool>(e));
    EXPECT_NE(llvm::toString(std::move(e)).find("unknown attribute 'epsilon'"), std::string::npos);
  }
  EXPECT_FALSE(opInfo(OpKind::RmsNorm).findAttr("epsilon").has_value());
}

/// A capture no variant bound reads as kNoValue (has() false); binding a
/// capture twice to different values fails, to the same value succeeds.
TEST(OpViews, CapturesAreTyped) {
  fusion::Match m;
  EXPECT_FALSE(m.has(fusion::Cap::x));
  EXPECT_EQ(m.get(fusion::Cap::x), kNoValue);
  EXPECT_TRUE(m.bind(fusion::Cap::x, 3));
  EXPECT_TRUE(m.bind(fusion::Cap::x, 3));
  EXPECT_FALSE(m.bind(fusion::Cap::x, 4));
  EXPECT_EQ(m.get(fusion::Cap::x), 3u);
  EXPECT_TRUE(m.bind(fusion::Cap::freqFactors, kNoValue)); // an absent optional operand
  EXPECT_FALSE(m.has(fusion::Cap::freqFactors));
  EXPECT_EQ(fusion::capName(fusion::Cap::expertScale), "expertScale");
  EXPECT_EQ(fusion::chainCap(3), fusion::Cap::b3);
}

} // namespace
