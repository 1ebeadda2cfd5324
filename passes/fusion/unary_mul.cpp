//===- unary_mul.cpp - silu|sigmoid|softplus(x) * b -> fused.unary_mul -----===//
//
//   %a = silu(%x) : f32[1, 512]
//   %y = mul(%b, %a) : f32[1, 512]                 // either order
// becomes
//   %y = fused.unary_mul(%x, %b) : f32[1, 512]     // {act = sigmoid|softplus} otherwise
//
// Legality (FUSIONS.md F18): f32 or f16, b of exactly the activation's type
// and shape (no broadcast), packed rows.
//
//===----------------------------------------------------------------------===//
#include "passes/fusion/Pattern.h"

namespace fg::fusion {
namespace {

const std::pair<OpKind, const char *> kActs[] = {
    {OpKind::Silu, "silu"}, {OpKind::Sigmoid, "sigmoid"}, {OpKind::Softplus, "softplus"}};

class UnaryMul : public TreePattern {
public:
  UnaryMul() {
    for (auto [kind, act] : kActs)
      addVariant(
          act,
          m::Mul(m::Op(kind, {m::Any("x")}).bind("act").singleUse(), m::Any("b")).commutative());
  }
  llvm::StringRef name() const override { return "unary_mul"; }

  Decision check(const Function &fn, const Match &m) const override {
    ValueId a = m.get("act"), b = m.get("b"), x = m.get("x");
    if (Decision d = expectDType(fn, a, {DType::F32, DType::F16}, "activation"); !d)
      return d;
    if (fn.type(b) != fn.type(a) || fn.type(m.outputs[0]) != fn.type(a))
      return Decision::no("gate " + label(fn, b) + " " + fn.type(b).str() +
                          " must have exactly the type of " + label(fn, a) + " " +
                          fn.type(a).str());
    if (fn.type(x) != fn.type(a))
      return Decision::no("input " + label(fn, x) + " must have the activation's type");
    if (!hasContiguousRows(fn, x) || !hasContiguousRows(fn, b))
      return Decision::no("the rows of " + label(fn, x) + " and " + label(fn, b) +
                          " must be packed");
    return Decision::yes();
  }

  FusedOp rewrite(const Function &fn, const Match &m) const override {
    FusedOp op{
        OpKind::FusedUnaryMul, {m.get("x"), m.get("b")}, defaultAttrs(OpKind::FusedUnaryMul)};
    OpKind kind = m.node(fn, "act").kind;
    for (size_t i = 0; i < std::size(kActs); ++i)
      if (kActs[i].first == kind)
        setAttr(OpKind::FusedUnaryMul, op.attrs, "act", Attribute::ofEnum(int64_t(i)));
    return op;
  }
};

} // namespace

std::unique_ptr<FusionPattern> createUnaryMulPattern() { return std::make_unique<UnaryMul>(); }

} // namespace fg::fusion
