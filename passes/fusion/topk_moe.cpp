//===- topk_moe.cpp - MoE routing -> fused.topk_moe (ids, weights) ---------===//
//
//   %p = softmax(%logits) : f32[1, 8]              // or sigmoid, or sqrt(softplus)
//   %sel = add(%p, %bias) : f32[1, 8]              // optional: steers selection only
//   %ids = top_k(%sel) {k = 2} : i32[1, 2]
//   %w = get_rows(%p, %ids) : f32[1, 2]            // the unbiased probabilities
//   %s = sum_rows(%w) ; %c = clamp(%s) {min = m} ; %wn = div(%w, %c)   // optional
//   %ws = scale(%wn) {scale = 2.5}                 // optional
// becomes
//   %ids, %ws = fused.topk_moe(%logits, %bias) {k = 2, renorm = 1, scale = 2.5} : i32[1, 2], f32[1,
//   2]
//
// and the delayed form, top_k of the raw logits then softmax of the k chosen:
//   %ids = top_k(%logits) ; %w = get_rows(%logits, %ids) ; %ws = softmax(%w) [; scale]
//   -> fused.topk_moe(%logits) {gating = delayed_softmax, k = 2}
//
// Variants come from one factory (gating x bias x renorm x scale). Legality
// (FUSIONS.md F1/F2): f32 logits [T, E] (any E: how many experts the kernel
// takes is the target's answer, e.g. shared memory for CUDA), a f32
// bias [E], plain softmaxes (scale 1, no max_bias, no mask), a clamp with no
// upper bound, a scale with no bias.
//
//===----------------------------------------------------------------------===//
#include "passes/fusion/Pattern.h"

namespace fg::fusion {
namespace {

/// The variant name of a gating (ir/Attr.h): the gating attribute's word.
Pat gate(TopkGating g) {
  Pat logits = m::Any(Cap::logits);
  switch (g) {
  case TopkGating::Softmax:
    return m::Softmax(logits).bind(Cap::p);
  case TopkGating::Sigmoid:
    return m::Sigmoid(logits).bind(Cap::p);
  default:
    return m::Sqrt(m::Softplus(logits)).bind(Cap::p);
  }
}

/// The routing weights chain for one variant; ids are captured as "ids".
Pat routing(TopkGating g, bool bias, bool renorm, bool scale) {
  Pat w = g == TopkGating::DelayedSoftmax
              ? m::Softmax(m::GetRows(m::Any(Cap::logits),
                                      m::TopK(m::Any(Cap::logits)).bind(Cap::ids)))
                    .bind(Cap::delayed)
              : m::GetRows(
                    gate(g),
                    m::TopK(bias ? m::Add(gate(g), m::Any(Cap::bias)).commutative() : gate(g))
                        .bind(Cap::ids));
  if (renorm) {
    w.bind(Cap::unnormed);
    w = m::Div(w, m::Clamp(m::SumRows(w)).bind(Cap::clamp));
  }
  if (scale)
    w = m::Scale(w).bind(Cap::scale);
  return w;
}

class TopkMoe : public TreePattern {
public:
  TopkMoe() {
    for (TopkGating g : {TopkGating::Softmax, TopkGating::Sigmoid, TopkGating::SqrtSoftplus,
                         TopkGating::DelayedSoftmax})
      for (bool bias : {false, true})
        for (bool renorm : {false, true})
          for (bool scale : {false, true}) {
            if (g == TopkGating::DelayedSoftmax && (bias || renorm))
              continue; // the bias and renormalisation belong to early gating
            std::string name = std::string(enumWord(g)) + (bias ? "+bias" : "") +
                               (renorm ? "+renorm" : "") + (scale ? "+scale" : "");
            addVariant(name, routing(g, bias, renorm, scale), {Cap::ids, Cap::root});
          }
  }
  llvm::StringRef name() const override { return "topk_moe"; }


  static Decision plainSoftmax(const Function &fn, op::Softmax s) {
    if (s.scale() != 1 || s.maxBias() != 0)
      return Decision::no("softmax " + label(fn, s.result()) +
                          " has a scale or max_bias; the fused kernel takes a plain softmax");
    return Decision::yes();
  }

  Decision check(const Function &fn, const Match &m) const override {
    ValueId logits = m.get(Cap::logits);
    const TensorType &lt = fn.type(logits);
    if (Decision d = expectDType(fn, logits, {DType::F32}, "logits"); !d)
      return d;
    if (lt.rank() != 2)
      return Decision::no("logits " + label(fn, logits) + " " + lt.str() + " must be [T, E]");
    if (!isContiguous(fn, logits))
      return Decision::no("logits " + label(fn, logits) + " must be contiguous");
    if (auto p = m.op<op::Softmax>(fn, Cap::p))
      if (Decision d = plainSoftmax(fn, *p); !d)
        return d;
    if (auto delayed = m.op<op::Softmax>(fn, Cap::delayed))
      if (Decision d = plainSoftmax(fn, *delayed); !d)
        return d;
    if (m.has(Cap::bias)) {
      ValueId b = m.get(Cap::bias);
      if (Decision d = expectDType(fn, b, {DType::F32}, "selection bias"); !d)
        return d;
      if (fn.type(b).numElements() != lt.shape[1] || fn.type(b).rowLength() != lt.shape[1])
        return Decision::no("selection bias " + label(fn, b) + " " + fn.type(b).str() +
                            " must hold one value per expert");
    }
    if (auto clamp = m.op<op::Clamp>(fn, Cap::clamp);
        clamp && clamp->max() != std::numeric_limits<double>::infinity())
      return Decision::no("renormalisation clamp " + label(fn, m.get(Cap::clamp)) +
                          " has an upper bound");
    if (auto scale = m.op<op::Scale>(fn, Cap::scale); scale && scale->bias() != 0)
      return Decision::no("weights scale " + label(fn, m.get(Cap::scale)) + " has a bias");
    return Decision::yes();
  }

  FusedOp rewrite(const Function &fn, const Match &m) const override {
    op::FusedTopkMoeArgs a{.logits = m.get(Cap::logits),
                           .bias = m.get(Cap::bias),
                           .gating = TopkGating::DelayedSoftmax,
                           .k = m.op<op::TopK>(fn, Cap::ids)->k()};
    if (const Node *p = m.producer(fn, Cap::p))
      a.gating = p->kind == OpKind::Softmax   ? TopkGating::Softmax
                 : p->kind == OpKind::Sigmoid ? TopkGating::Sigmoid
                                              : TopkGating::SqrtSoftplus;
    if (auto clamp = m.op<op::Clamp>(fn, Cap::clamp)) {
      a.renorm = 1;
      a.clampMin = clamp->min();
    }
    if (auto scale = m.op<op::Scale>(fn, Cap::scale))
      a.scale = scale->scale();
    return FusedOp::of(a);
  }
};

} // namespace

std::unique_ptr<FusionPattern> createTopkMoePattern() { return std::make_unique<TopkMoe>(); }

} // namespace fg::fusion
