//===- Chain.cpp - chains of adds or muls of one shape ---------------------===//
#include "passes/fusion/Chain.h"

namespace fg::fusion {
namespace {

constexpr size_t kMaxLinks = 8;

class Chain : public FusionPattern {
public:
  Chain(OpKind op, OpKind fused, llvm::StringRef name) : op_(op), fused_(fused), name_(name) {}
  llvm::StringRef name() const override { return name_; }

  /// The operand of `n` that continues the chain: produced by the same op
  /// with the root's type (operand 0 first, as ggml links).
  int linkOperand(const Function &fn, const Node &n, const TensorType &rootType) const {
    for (int i = 0; i < 2; ++i) {
      const Node *p = fn.producer(n.operands[i]);
      if (p && p->kind == op_ && fn.type(n.operands[i]) == rootType)
        return i;
    }
    return -1;
  }

  void prepare(const Function &fn) override {
    uses_ = fn.useCounts();
    usesOf_ = &fn;
    usesNodes_ = fn.numNodes();
  }

  void match(const Function &fn, NodeId root, llvm::SmallVectorImpl<Match> &out) const override {
    const Node &r = fn.node(root);
    if (r.kind != op_)
      return;
    const TensorType &rootType = fn.type(r.result());
    // links[0] is the root; each next one feeds the previous.
    llvm::SmallVector<NodeId, kMaxLinks> links{root};
    llvm::SmallVector<int, kMaxLinks> via; // operand slot of links[i] holding links[i + 1]
    bool stop = false;
    while (links.size() < kMaxLinks && !stop) {
      const Node &n = fn.node(links.back());
      int slot = linkOperand(fn, n, rootType);
      if (slot < 0)
        break;
      ValueId next = n.operands[slot];
      // A link with other users ends the chain here (it is still proposed,
      // so the refusal names it, beside the chain without it).
      stop = uses(fn, next) != 1;
      via.push_back(slot);
      links.push_back(fn.value(next).def);
    }
    for (size_t len = links.size(); len >= 2; --len) {
      out.push_back(build(fn, links, via, len));
      if (!stop || len != links.size())
        break;
    }
  }

  /// Uses of `v`: from prepare()'s counts when they are `fn`'s (the driver's
  /// case: linear per round), else counted.
  unsigned uses(const Function &fn, ValueId v) const {
    if (usesOf_ == &fn && usesNodes_ == fn.numNodes() && uses_.size() == fn.numValues())
      return uses_[v];
    return countUses(fn, v);
  }

  static unsigned countUses(const Function &fn, ValueId v) {
    unsigned n = 0;
    for (const Node &node : fn.nodes())
      n += static_cast<unsigned>(llvm::count(node.operands, v));
    return n + static_cast<unsigned>(llvm::count(fn.results(), v));
  }

  Match build(const Function &fn, llvm::ArrayRef<NodeId> links, llvm::ArrayRef<int> via,
              size_t len) const {
    Match m;
    m.root = links[0];
    m.nodes.assign(links.begin(), links.begin() + len);
    m.outputs.push_back(fn.node(links[0]).result());
    m.benefit = static_cast<unsigned>(len);
    m.variant = std::to_string(len) + " links";
    // The deepest link: x is operand 0, b0 operand 1.
    const Node &deepest = fn.node(links[len - 1]);
    m.bind(Cap::x, deepest.operands[0]);
    m.bind(Cap::b0, deepest.operands[1]);
    for (size_t i = len - 1; i-- > 0;) {
      const Node &n = fn.node(links[i]);
      m.bind(chainCap(static_cast<unsigned>(len - 1 - i)), n.operands[1 - via[i]]);
    }
    return m;
  }

  Decision check(const Function &fn, const Match &m) const override {
    const TensorType &rootType = fn.type(m.outputs[0]);
    ValueId x = m.get(Cap::x);
    if (fn.type(x).shape != rootType.shape)
      return Decision::no("chain input " + label(fn, x) + " " + fn.type(x).str() +
                          " must have the chain's shape " + rootType.str());
    for (ValueId v : {x, m.outputs[0]})
      if (Decision d = expectDType(fn, v, {DType::F32, DType::F16}, "chain value"); !d)
        return d;
    ValueId b0 = m.get(Cap::b0);
    for (unsigned i = 0; i < m.nodes.size(); ++i) {
      ValueId b = m.get(chainCap(i));
      if (Decision d = expectDType(fn, b, {DType::F32, DType::F16}, "operand"); !d)
        return d;
      if (fn.type(b) != fn.type(b0) || !isContiguous(fn, b))
        return Decision::no("operand " + label(fn, b) + " " + fn.type(b).str() +
                            " does not have the layout of " + label(fn, b0) + " " +
                            fn.type(b0).str() + " (the chain's operands share one layout)");
    }
    if (!isContiguous(fn, x))
      return Decision::no("chain input " + label(fn, x) + " must be contiguous");
    return Decision::yes();
  }

  FusedOp rewrite(const Function &, const Match &m) const override {
    // add_chain and mul_chain share one operand list (x, b0 .. b7) and no attributes.
    static_assert(op::FusedAddChain::kMaxOperands == 9 && op::FusedMulChain::kMaxOperands == 9);
    FusedOp fused{fused_, {m.get(Cap::x)}, defaultAttrs(fused_)};
    for (unsigned i = 0; i < m.nodes.size(); ++i)
      fused.operands.push_back(m.get(chainCap(i)));
    return fused;
  }

private:
  OpKind op_, fused_;
  std::string name_;
  std::vector<unsigned> uses_; ///< prepare()'s use counts of `usesOf_`
  const Function *usesOf_ = nullptr;
  size_t usesNodes_ = 0;
};

} // namespace

std::unique_ptr<FusionPattern> createChainPattern(OpKind op, OpKind fused, llvm::StringRef name) {
  return std::make_unique<Chain>(op, fused, name);
}

} // namespace fg::fusion
