//===- Canonicalize.cpp - layout no-ops and chains (`canonicalize`) ------===//
//
// Local rewrites on layout ops, so fusion patterns see one spelling:
//   reshape(reshape(x))                  -> reshape(x)       (outer shape)
//   reshape(x) to x's shape              -> x
//   view(x) with x's shape, dense strides, offset 0 -> x
//   permute(x) {perm = [0, 1, ..]}       -> x
//   permute(permute(x))                  -> permute(x)       (composed perm)
//   transpose(transpose(x))              -> x
//   cont(x), x not produced by a view-like op -> x
// A cont of a value derived from state stays: it is a snapshot, and the state
// may be updated in place after it. A returned value is never replaced (its
// name is part of the entry's interface). Nodes left unused by these rewrites
// are removed; other dead nodes are left to `dce`.
//
//   graph @f(input %x: f32[2, 8]) {
//     %a = reshape(%x) {shape = [16]} : f32[16]
//     %b = reshape(%a) {shape = [4, 4]} : f32[4, 4]
//     %c = transpose(%b) : f32[4, 4]
//     %d = transpose(%c) : f32[4, 4]
//     %e = cont(%x) : f32[2, 8]
//     %y = mul(%d, %d) : f32[4, 4]
//     %z = exp(%e) : f32[2, 8]
//     return %y, %z
//   }
// becomes
//   graph @f(input %x: f32[2, 8]) {
//     %b = reshape(%x) {shape = [4, 4]} : f32[4, 4]
//     %y = mul(%b, %b) : f32[4, 4]
//     %z = exp(%x) : f32[2, 8]
//     return %y, %z
//   }
//
//===----------------------------------------------------------------------===//
#include "passes/Passes.h"

#include "ir/OpViews.h"
#include "ir/Verifier.h"

#include "llvm/ADT/DenseSet.h"

namespace fg {
namespace {

class CanonicalizePass : public Pass {
public:
  llvm::StringRef name() const override { return "canonicalize"; }

  llvm::Expected<bool> run(Function &fn, PassContext &ctx) override {
    for (const char *c : {"reshapes_folded", "reshapes_dropped", "views_dropped", "permutes_folded",
                          "permutes_dropped", "transposes_folded", "conts_dropped", "erased"})
      ctx.stat(c, 0);
    returned_.clear();
    returned_.insert(fn.results().begin(), fn.results().end());
    replacement_.assign(fn.numValues(), kNoValue);
    for (ValueId v = 0; v < fn.numValues(); ++v)
      replacement_[v] = v;
    candidates_.clear();
    bool changed = false;

    // One sweep in program order reaches the fixed point: every operand is
    // already canonical when its user is visited.
    for (NodeId id = 0; id < fn.numNodes(); ++id) {
      Node &n = fn.node(id);
      for (ValueId &o : n.operands)
        o = replacement_[o];
      changed |= rewrite(fn, id, ctx);
    }
    int64_t erased = eraseUnused(fn);
    ctx.stat("erased", erased);
    return changed || erased > 0;
  }

private:
  bool rewrite(Function &fn, NodeId id, PassContext &ctx) {
    Node &n = fn.node(id);
    switch (n.kind) {
    case OpKind::Reshape:
      return rewriteReshape(fn, id, ctx);
    case OpKind::View:
      return isNoOpView(fn, n) && replaceWithOperand(fn, id, ctx, "views_dropped");
    case OpKind::Permute:
      return rewritePermute(fn, id, ctx);
    case OpKind::Transpose:
      return rewriteTranspose(fn, id, ctx);
    case OpKind::Cont:
      return isDroppableCont(fn, n) && replaceWithOperand(fn, id, ctx, "conts_dropped");
    default:
      return false;
    }
  }

  // reshape(reshape(x)) -> reshape(x); reshape(x) to x's shape -> x
  bool rewriteReshape(Function &fn, NodeId id, PassContext &ctx) {
    bool changed = false;
    Node &n = fn.node(id);
    if (const Node *inner = fn.producer(n.operands[0]); inner && inner->kind == OpKind::Reshape) {
      bypass(fn, n, inner->operands[0]);
      ctx.stat("reshapes_folded");
      changed = true;
    }
    if (fn.type(n.operands[0]).shape == fn.type(n.result()).shape)
      changed |= replaceWithOperand(fn, id, ctx, "reshapes_dropped");
    return changed;
  }

  // permute(permute(x)) -> permute(x); permute(x) {perm = [0, 1, ..]} -> x
  bool rewritePermute(Function &fn, NodeId id, PassContext &ctx) {
    bool changed = false;
    Node &n = fn.node(id);
    if (const Node *inner = fn.producer(n.operands[0]); inner && inner->kind == OpKind::Permute) {
      // result dim i = inner dim outer[i] = x dim inner[outer[i]]
      llvm::SmallVector<int64_t, 4> composed;
      for (int64_t p : op::Permute(n).perm())
        composed.push_back(op::Permute(*inner).perm()[p]);
      ValueId x = inner->operands[0];
      n.attrs[op::Permute::permIndex].ints.assign(composed.begin(), composed.end());
      bypass(fn, n, x);
      ctx.stat("permutes_folded");
      changed = true;
    }
    if (isIdentity(op::Permute(n).perm()))
      changed |= replaceWithOperand(fn, id, ctx, "permutes_dropped");
    return changed;
  }

  // transpose(transpose(x)) -> x
  bool rewriteTranspose(Function &fn, NodeId id, PassContext &ctx) {
    const Node &n = fn.node(id);
    const Node *inner = fn.producer(n.operands[0]);
    if (!inner || inner->kind != OpKind::Transpose || returned_.count(n.result()))
      return false;
    replace(n.result(), inner->operands[0]);
    candidates_.insert(id);
    candidates_.insert(fn.value(n.operands[0]).def);
    ctx.stat("transposes_folded");
    return true;
  }

  static bool isIdentity(llvm::ArrayRef<int64_t> perm) {
    for (size_t i = 0; i < perm.size(); ++i)
      if (perm[i] != static_cast<int64_t>(i))
        return false;
    return true;
  }

  static bool isNoOpView(const Function &fn, const Node &n) {
    const TensorType &x = fn.type(n.operands[0]);
    op::View view(n);
    return view.offset() == 0 && llvm::ArrayRef<int64_t>(x.shape) == view.shape() &&
           llvm::ArrayRef<int64_t>(contiguousStrides(x.shape)) == view.strides();
  }

  /// cont copies; values are logically dense, so only a view makes it matter
  /// (and a snapshot of state, which may be updated in place later).
  static bool isDroppableCont(const Function &fn, const Node &n) {
    ValueId x = n.operands[0];
    if (const Node *p = fn.producer(x); p && p->info().has(kViewLike))
      return false;
    return stateRoot(fn, x) == kNoValue;
  }

  /// Points `n` at `x` instead of its producer-chain operand.
  void bypass(Function &fn, Node &n, ValueId x) {
    candidates_.insert(fn.value(n.operands[0]).def);
    n.operands[0] = x;
  }

  /// Uses of the node's result now use its operand 0.
  bool replaceWithOperand(Function &fn, NodeId id, PassContext &ctx, llvm::StringRef stat) {
    const Node &n = fn.node(id);
    if (returned_.count(n.result()))
      return false;
    replace(n.result(), n.operands[0]);
    candidates_.insert(id);
    ctx.stat(stat);
    return true;
  }

  void replace(ValueId from, ValueId to) { replacement_[from] = replacement_[to]; }

  /// Removes candidate nodes left without uses, cascading to candidates that
  /// fed only them.
  int64_t eraseUnused(Function &fn) {
    if (candidates_.empty())
      return 0;
    std::vector<unsigned> uses = fn.useCounts();
    llvm::SmallVector<bool, 64> dead(fn.numNodes(), false);
    int64_t erased = 0;
    for (size_t i = fn.numNodes(); i-- > 0;) {
      const Node &n = fn.node(static_cast<NodeId>(i));
      if (!candidates_.count(static_cast<NodeId>(i)) || n.info().has(kUpdatesState))
        continue;
      if (llvm::any_of(n.results, [&](ValueId r) { return uses[r] != 0; }))
        continue;
      dead[i] = true;
      ++erased;
      for (ValueId o : n.operands)
        --uses[o];
    }
    if (erased)
      fn.eraseNodes(dead);
    return erased;
  }

  llvm::DenseSet<ValueId> returned_;
  std::vector<ValueId> replacement_;
  llvm::DenseSet<NodeId> candidates_;
};

} // namespace

std::unique_ptr<Pass> createCanonicalizePass() { return std::make_unique<CanonicalizePass>(); }

} // namespace fg
