//===- GatedMatmul.cpp - gated FFN patterns (dense and expert-indexed) -----===//
#include "passes/fusion/GatedMatmul.h"

namespace fg::fusion {
namespace {

/// One lane: matmul(x, w) [+ bias], or matmul_id(x, w, ids) [add_id(., b, ids)].
Pat lane(bool expertIndexed, bool withBias, const char *w, const char *b, const char *mm) {
  Pat product = expertIndexed
                    ? m::Op(OpKind::MatMulId, {m::Any("x"), m::Any(w), m::Any("ids")}).bind(mm)
                    : m::MatMul(m::Any("x"), m::Any(w)).bind(mm);
  if (!withBias)
    return product;
  if (expertIndexed)
    return m::Op(OpKind::AddId, {product, m::Any(b), m::Any("ids")});
  return m::Add(product, m::Any(b)).commutative();
}

Pat gatedMatmul(bool withBias, bool expertIndexed) {
  return m::Glu(lane(expertIndexed, withBias, "w_gate", "b_gate", "gate"),
                lane(expertIndexed, withBias, "w_up", "b_up", "up"))
      .bind("glu");
}

class GatedMatmul : public TreePattern {
public:
  explicit GatedMatmul(bool expertIndexed) : expertIndexed_(expertIndexed) {
    addVariant("no bias", gatedMatmul(false, expertIndexed));
    addVariant("bias", gatedMatmul(true, expertIndexed));
  }
  llvm::StringRef name() const override {
    return expertIndexed_ ? "gated_matmul_id" : "gated_matmul";
  }

  Decision check(const Function &fn, const Match &m) const override {
    ValueId x = m.get("x"), wg = m.get("w_gate"), wu = m.get("w_up");
    const TensorType &xt = fn.type(x);
    int64_t tokens = expertIndexed_ ? xt.shape[0] : xt.numRows();
    // The fused op is a GEMV epilogue: only as many tokens as the target's GEMV takes.
    int64_t maxTokens = target() ? target()->maxGemvTokens() : INT64_MAX;
    if (tokens < 1 || tokens > maxTokens)
      return Decision::no(label(fn, x) + " has " + llvm::Twine(tokens) +
                          " tokens; the fused GEMV takes 1 to " + llvm::Twine(maxTokens));
    if (Decision d = expectDType(fn, x, {DType::F32}, "input"); !d)
      return d;
    if (!isContiguous(fn, x))
      return Decision::no("input " + label(fn, x) + " must be contiguous");
    if (fn.type(wg) != fn.type(wu))
      return Decision::no("gate weights " + label(fn, wg) + " " + fn.type(wg).str() +
                          " and up weights " + label(fn, wu) + " " + fn.type(wu).str() + " differ");
    if (!isContiguous(fn, wg) || !isContiguous(fn, wu))
      return Decision::no("the gate and up weights must be contiguous");
    if (!m.has("b_gate"))
      return Decision::yes();
    int64_t cols = fn.type(m.get("gate")).rowLength();
    for (const char *b : {"b_gate", "b_up"}) {
      ValueId v = m.get(b);
      if (Decision d = expectDType(fn, v, {DType::F32}, "bias"); !d)
        return d;
      const TensorType &bt = fn.type(v);
      bool rowVector = expertIndexed_ ? bt.rank() == 2 && bt.shape[1] == cols
                                      : bt.numElements() == cols && bt.rowLength() == cols;
      if (!rowVector)
        return Decision::no("bias " + label(fn, v) + " " + bt.str() + " must hold one value per " +
                            (expertIndexed_ ? "expert and " : "") + "output column (" +
                            llvm::Twine(cols) + ")");
    }
    return Decision::yes();
  }

  FusedOp rewrite(const Function &fn, const Match &m) const override {
    OpKind k = expertIndexed_ ? OpKind::FusedGatedMatmulId : OpKind::FusedGatedMatmul;
    FusedOp op{k, {m.get("x"), m.get("w_gate"), m.get("w_up")}, copyAttrs(k, {&m.node(fn, "glu")})};
    if (expertIndexed_)
      op.operands.push_back(m.get("ids"));
    if (m.has("b_gate")) {
      op.operands.push_back(m.get("b_gate"));
      op.operands.push_back(m.get("b_up"));
    }
    return op;
  }

private:
  bool expertIndexed_;
};

} // namespace

std::unique_ptr<FusionPattern> createGatedPattern(bool expertIndexed) {
  return std::make_unique<GatedMatmul>(expertIndexed);
}

} // namespace fg::fusion
