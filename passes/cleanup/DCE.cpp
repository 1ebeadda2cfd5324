//===- DCE.cpp - dead code elimination (`dce`) ---------------------------===//
//
// Removes every node none of whose results is used by another node or
// returned. State updaters are side effects and always stay, even when their
// new version is unused: the cache row they write is read by the next step.
// Nodes are visited in reverse program order, so a whole dead chain goes in
// one run.
//
//   graph @f(input %x: f32[4], state %c: f32[8, 4], input %i: i32[1]) {
//     %a = exp(%x) : f32[4]
//     %b = sqr(%a) : f32[4]                           // unused: removed, then %a
//     %r = reshape(%x) {shape = [1, 4]} : f32[1, 4]
//     %c.1 = set_rows(%c, %r, %i) : f32[8, 4]         // unused but updates state: kept
//     return %x
//   }
// becomes
//   graph @f(input %x: f32[4], state %c: f32[8, 4], input %i: i32[1]) {
//     %r = reshape(%x) {shape = [1, 4]} : f32[1, 4]
//     %c.1 = set_rows(%c, %r, %i) : f32[8, 4]
//     return %x
//   }
//
//===----------------------------------------------------------------------===//
#include "passes/Passes.h"

namespace fg {
namespace {

class DCEPass : public Pass {
public:
  llvm::StringRef name() const override { return "dce"; }

  llvm::Expected<bool> run(Function &fn, PassContext &ctx) override {
    ctx.stat("removed", 0);
    std::vector<unsigned> uses = fn.useCounts();
    llvm::SmallVector<bool, 64> dead(fn.numNodes(), false);
    int64_t removed = 0;
    for (size_t i = fn.numNodes(); i-- > 0;) {
      const Node &n = fn.node(static_cast<NodeId>(i));
      if (!isTriviallyDead(n, uses))
        continue;
      dead[i] = true;
      ++removed;
      for (ValueId o : n.operands)
        --uses[o];
    }
    if (!removed)
      return false;
    fn.eraseNodes(dead);
    ctx.stat("removed", removed);
    return true;
  }

private:
  /// No result used, and no effect beyond its results.
  static bool isTriviallyDead(const Node &n, const std::vector<unsigned> &uses) {
    if (n.info().has(kUpdatesState))
      return false;
    for (ValueId r : n.results)
      if (uses[r] != 0)
        return false;
    return true;
  }
};

} // namespace

std::unique_ptr<Pass> createDCEPass() { return std::make_unique<DCEPass>(); }

} // namespace fg
