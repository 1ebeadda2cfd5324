//===- moe_weighted_sum.cpp - Σ_j experts[:, j] · w[:, j] -> fused op ------===//
//
//   %y = mul(%experts, %w3) : f32[1, 2, 256]       // w3: f32[1, 2, 1]; either order
//   %s0 = view(%y) {shape = [1, 256], strides = [512, 1]} : f32[1, 256]
//   %s1 = view(%y) {shape = [1, 256], strides = [512, 1], offset = 256} : f32[1, 256]
//   %sum = add(%s0, %s1) : f32[1, 256]             // then add(%sum, %s2), ... for any k
// becomes
//   %sum = fused.moe_weighted_sum(%experts, %w3) : f32[1, 256]
// optionally with an expert scale first: mul(mul(%experts, %scale), %w3)
//   -> fused.moe_weighted_sum(%experts, %w3, %scale)
//
// The adds must sum the slots in order (0 + 1, + 2, ...), which is what the
// fused op computes. Legality (FUSIONS.md S1): f32 operands, contiguous
// experts, each slot view exactly one slot of the product.
//
//===----------------------------------------------------------------------===//
#include "passes/fusion/Pattern.h"

namespace fg::fusion {
namespace {

/// The slot index `v` views of `weighted` [T, k, N], or -1.
int64_t slotOf(const Function &fn, ValueId v, ValueId &weighted) {
  const Node *n = fn.producer(v);
  if (!n || n->kind != OpKind::View)
    return -1;
  ValueId w = n->operands[0];
  if (weighted != kNoValue && w != weighted)
    return -1;
  const TensorType &wt = fn.type(w);
  if (wt.rank() != 3)
    return -1;
  int64_t t = wt.shape[0], k = wt.shape[1], cols = wt.shape[2];
  op::View view(*n);
  if (view.shape() != llvm::ArrayRef<int64_t>{t, cols} ||
      view.strides() != llvm::ArrayRef<int64_t>{k * cols, 1} || view.offset() % cols)
    return -1;
  weighted = w;
  return view.offset() / cols;
}

class MoeWeightedSum : public FusionPattern {
public:
  llvm::StringRef name() const override { return "moe_weighted_sum"; }

  void match(const Function &fn, NodeId root, llvm::SmallVectorImpl<Match> &out) const override {
    const Node &r = fn.node(root);
    if (r.kind != OpKind::Add && r.kind != OpKind::View)
      return;
    Match m;
    m.root = root;
    ValueId weighted = kNoValue;
    // Walk the sum down to its first slot, collecting slots from the last.
    llvm::SmallVector<int64_t, 8> slots;
    ValueId cur = r.result();
    while (true) {
      const Node *n = fn.producer(cur);
      if (n && n->kind == OpKind::Add) {
        m.nodes.push_back(fn.value(cur).def);
        ValueId a = n->operands[0], b = n->operands[1];
        const Node *pa = fn.producer(a);
        // The running sum is the operand that is an add (or, at the first add, slot 0).
        if (pa && pa->kind == OpKind::Add)
          std::swap(a, b);
        int64_t s = slotOf(fn, a, weighted);
        if (s < 0)
          return;
        slots.push_back(s);
        m.nodes.push_back(fn.value(a).def);
        cur = b;
        continue;
      }
      int64_t s = slotOf(fn, cur, weighted);
      if (s < 0)
        return;
      slots.push_back(s);
      m.nodes.push_back(fn.value(cur).def);
      break;
    }
    // Slots in summation order must be 0, 1, ..., k-1 (adds commute, so the
    // first add may hold 0 and 1 either way round).
    std::reverse(slots.begin(), slots.end());
    if (slots.size() >= 2 && slots[0] == 1 && slots[1] == 0)
      std::swap(slots[0], slots[1]);
    int64_t k = fn.type(weighted).shape[1];
    if (static_cast<int64_t>(slots.size()) != k)
      return;
    for (int64_t j = 0; j < k; ++j)
      if (slots[j] != j)
        return;
    // weighted = mul(e, w3) with w3 [T, k, 1]; e = mul(experts, scale) optionally.
    const Node *mul = fn.producer(weighted);
    if (!mul || mul->kind != OpKind::Mul)
      return;
    m.nodes.push_back(fn.value(weighted).def);
    m.outputs.push_back(r.result());
    for (bool swap : {false, true}) {
      ValueId e = mul->operands[swap ? 1 : 0], w = mul->operands[swap ? 0 : 1];
      if (!isSlotVector(fn, w, weighted) || fn.type(e).shape != fn.type(weighted).shape)
        continue;
      Match plain = m;
      plain.bind(Cap::experts, e);
      plain.bind(Cap::weights, w);
      plain.bind(Cap::weighted, weighted);
      plain.benefit = static_cast<unsigned>(plain.nodes.size());
      plain.variant = "k = " + std::to_string(k);
      const Node *inner = fn.producer(e);
      if (inner && inner->kind == OpKind::Mul)
        for (bool swap2 : {false, true}) {
          ValueId e2 = inner->operands[swap2 ? 1 : 0], s = inner->operands[swap2 ? 0 : 1];
          if (!isSlotVector(fn, s, weighted) || fn.type(e2).shape != fn.type(weighted).shape)
            continue;
          Match scaled = plain;
          scaled.nodes.push_back(fn.value(e).def);
          scaled.set(Cap::experts, e2);
          scaled.set(Cap::expertScale, s);
          scaled.benefit = static_cast<unsigned>(scaled.nodes.size());
          scaled.variant += " + expert scale";
          out.push_back(std::move(scaled));
          break;
        }
      out.push_back(std::move(plain));
      break;
    }
  }

  /// A [T, k, 1] per-slot factor for `weighted` [T, k, N].
  static bool isSlotVector(const Function &fn, ValueId v, ValueId weighted) {
    const TensorType &t = fn.type(v), &w = fn.type(weighted);
    return t.rank() == 3 && t.shape[0] == w.shape[0] && t.shape[1] == w.shape[1] && t.shape[2] == 1;
  }

  Decision check(const Function &fn, const Match &m) const override {
    for (auto [c, what] : {std::pair<Cap, const char *>{Cap::experts, "experts"},
                           {Cap::weights, "weights"},
                           {Cap::expertScale, "expert_scale"},
                           {Cap::weighted, "weighted"}}) {
      if (!m.has(c))
        continue;
      if (Decision d = expectDType(fn, m.get(c), {DType::F32}, what); !d)
        return d;
    }
    if (!isContiguous(fn, m.get(Cap::experts)) || !isContiguous(fn, m.get(Cap::weights)))
      return Decision::no("experts " + label(fn, m.get(Cap::experts)) + " and weights " +
                          label(fn, m.get(Cap::weights)) + " must be contiguous");
    return Decision::yes();
  }

  FusedOp rewrite(const Function &, const Match &m) const override {
    return FusedOp::of(op::FusedMoeWeightedSumArgs{.experts = m.get(Cap::experts),
                                                   .weights = m.get(Cap::weights),
                                                   .expertScale = m.get(Cap::expertScale)});
  }
};

} // namespace

std::unique_ptr<FusionPattern> createMoeWeightedSumPattern() {
  return std::make_unique<MoeWeightedSum>();
}

} // namespace fg::fusion
