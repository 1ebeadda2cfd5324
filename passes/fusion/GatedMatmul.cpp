//===- GatedMatmul.cpp - gated FFN patterns (dense and expert-indexed) -----===//
#include "passes/fusion/GatedMatmul.h"

namespace fg::fusion {
namespace {

/// One lane: matmul(x, w) [+ bias], or matmul_id(x, w, ids) [add_id(., b, ids)].
Pat lane(bool expertIndexed, bool withBias, Cap w, Cap b, Cap mm) {
  Pat product = expertIndexed ? m::MatMulId(m::Any(Cap::x), m::Any(w), m::Any(Cap::ids)).bind(mm)
                              : m::MatMul(m::Any(Cap::x), m::Any(w)).bind(mm);
  if (!withBias)
    return product;
  if (expertIndexed)
    return m::AddId(product, m::Any(b), m::Any(Cap::ids));
  return m::Add(product, m::Any(b)).commutative();
}

Pat gatedMatmul(bool withBias, bool expertIndexed) {
  return m::Glu(lane(expertIndexed, withBias, Cap::wGate, Cap::bGate, Cap::gate),
                lane(expertIndexed, withBias, Cap::wUp, Cap::bUp, Cap::up))
      .bind(Cap::glu);
}

class GatedMatmul : public TreePattern {
public:
  GatedMatmul(bool expertIndexed, bool chunks) : expertIndexed_(expertIndexed), chunks_(chunks) {
    addVariant("no bias", gatedMatmul(false, expertIndexed));
    addVariant("bias", gatedMatmul(true, expertIndexed));
  }
  llvm::StringRef name() const override {
    return chunks_ ? "gated_matmul_id_chunk" : expertIndexed_ ? "gated_matmul_id" : "gated_matmul";
  }

  Decision check(const Function &fn, const Match &m) const override {
    ValueId x = m.get(Cap::x), wg = m.get(Cap::wGate), wu = m.get(Cap::wUp);
    const TensorType &xt = fn.type(x);
    int64_t tokens = expertIndexed_ ? xt.shape[0] : xt.numRows();
    // The fused op is a GEMV epilogue: only as many tokens as the target's
    // GEMV takes. The chunk form (expert-indexed, opt-in) takes the prefill
    // chunks above that with 16-bit weights, where the grouped expert GEMM
    // runs gate|up in two streams with the GLU in its epilogue.
    int64_t maxTokens = target() ? target()->maxGemvTokens() : INT64_MAX;
    if (chunks_) {
      DType wt = fn.type(wg).dtype;
      // Block-quantised experts where the target groups them too
      // (EmitOptions::groupedExpertQuant, on by default).
      const bool quant = isQuantized(wt) && target() && target()->groupsQuantisedExperts();
      if (tokens <= maxTokens || (wt != DType::F16 && wt != DType::BF16 && !quant))
        return Decision::no(label(fn, x) + " has " + llvm::Twine(tokens) + " tokens over " +
                            std::string(dtypeName(wt)) + " weights; the chunk form takes more than " +
                            llvm::Twine(maxTokens) + " tokens over f16 or bf16 weights");
    } else if (tokens < 1 || tokens > maxTokens) {
      return Decision::no(label(fn, x) + " has " + llvm::Twine(tokens) +
                          " tokens; the fused GEMV takes 1 to " + llvm::Twine(maxTokens));
    }
    if (Decision d = expectDType(fn, x, {DType::F32}, "input"); !d)
      return d;
    if (!isContiguous(fn, x))
      return Decision::no("input " + label(fn, x) + " must be contiguous");
    if (fn.type(wg) != fn.type(wu))
      return Decision::no("gate weights " + label(fn, wg) + " " + fn.type(wg).str() +
                          " and up weights " + label(fn, wu) + " " + fn.type(wu).str() + " differ");
    if (!isContiguous(fn, wg) || !isContiguous(fn, wu))
      return Decision::no("the gate and up weights must be contiguous");
    if (!m.has(Cap::bGate))
      return Decision::yes();
    int64_t cols = fn.type(m.get(Cap::gate)).rowLength();
    for (Cap b : {Cap::bGate, Cap::bUp}) {
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
    // Both forms' rows declare the same biases and glu attributes.
    auto withGlu = [&](auto args) {
      auto glu = m.op<op::Glu>(fn, Cap::glu);
      args.bGate = m.get(Cap::bGate);
      args.bUp = m.get(Cap::bUp);
      args.kind = glu->kind();
      args.alpha = glu->alpha();
      args.limit = glu->limit();
      return FusedOp::of(args);
    };
    ValueId x = m.get(Cap::x), wg = m.get(Cap::wGate), wu = m.get(Cap::wUp);
    if (expertIndexed_)
      return withGlu(
          op::FusedGatedMatmulIdArgs{.x = x, .wGate = wg, .wUp = wu, .ids = m.get(Cap::ids)});
    return withGlu(op::FusedGatedMatmulArgs{.x = x, .wGate = wg, .wUp = wu});
  }

private:
  bool expertIndexed_, chunks_;
};

} // namespace

std::unique_ptr<FusionPattern> createGatedPattern(bool expertIndexed, bool chunks) {
  return std::make_unique<GatedMatmul>(expertIndexed, chunks);
}

} // namespace fg::fusion
