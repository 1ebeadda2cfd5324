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

/// The activations fused.unary_mul takes, each with its op.
const std::pair<OpKind, UnaryMulAct> kActs[] = {{OpKind::Silu, UnaryMulAct::Silu},
                                                {OpKind::Sigmoid, UnaryMulAct::Sigmoid},
                                                {OpKind::Softplus, UnaryMulAct::Softplus}};

class UnaryMul : public TreePattern {
public:
  UnaryMul() {
    for (auto [kind, act] : kActs)
      addVariant(
          std::string(enumWord(act)),
          m::Mul(m::Op(kind, {m::Any(Cap::x)}).bind(Cap::act).singleUse(), m::Any(Cap::b))
              .commutative());
  }
  llvm::StringRef name() const override { return "unary_mul"; }

  Decision check(const Function &fn, const Match &m) const override {
    ValueId a = m.get(Cap::act), b = m.get(Cap::b), x = m.get(Cap::x);
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
    op::FusedUnaryMulArgs a{.x = m.get(Cap::x), .b = m.get(Cap::b)};
    OpKind kind = m.producer(fn, Cap::act)->kind;
    for (auto [k, act] : kActs)
      if (k == kind)
        a.act = act;
    return FusedOp::of(a);
  }
};

} // namespace

std::unique_ptr<FusionPattern> createUnaryMulPattern() { return std::make_unique<UnaryMul>(); }

} // namespace fg::fusion
