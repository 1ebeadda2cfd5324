//===- CSE.cpp - common subexpression elimination (`cse`) ----------------===//
//
// A node with the same op, the same operands (in either order for commutative
// ops) and the same attributes as an earlier node computes the same values:
// its uses are redirected to the earlier node and it is removed. State
// updaters are never merged (two set_rows are two writes), and a value that
// the function returns is never replaced (its name is part of the entry's
// interface).
//
//   graph @f(input %x: f32[4], input %y: f32[4]) {
//     %a = add(%x, %y) : f32[4]
//     %b = add(%y, %x) : f32[4]        // same as %a: add commutes
//     %c = mul(%a, %b) : f32[4]
//     return %c
//   }
// becomes
//   graph @f(input %x: f32[4], input %y: f32[4]) {
//     %a = add(%x, %y) : f32[4]
//     %c = mul(%a, %a) : f32[4]
//     return %c
//   }
//
//===----------------------------------------------------------------------===//
#include "passes/Passes.h"

#include "llvm/ADT/DenseSet.h"

#include <string>
#include <unordered_map>

namespace fg {
namespace {

class CSEPass : public Pass {
public:
  llvm::StringRef name() const override { return "cse"; }

  llvm::Expected<bool> run(Function &fn, PassContext &ctx) override {
    ctx.stat("merged", 0);
    llvm::DenseSet<ValueId> returned(fn.results().begin(), fn.results().end());
    // replacement[v]: the value that now stands for v (v itself when kept).
    std::vector<ValueId> replacement(fn.numValues());
    for (ValueId v = 0; v < replacement.size(); ++v)
      replacement[v] = v;
    std::unordered_map<std::string, NodeId> seen;
    llvm::SmallVector<bool, 64> dead(fn.numNodes(), false);
    int64_t merged = 0;

    for (NodeId id = 0; id < fn.numNodes(); ++id) {
      Node &n = fn.node(id);
      for (ValueId &o : n.operands)
        o = replacement[o];
      if (n.info().has(kUpdatesState))
        continue;
      auto [it, inserted] = seen.try_emplace(key(n), id);
      if (inserted)
        continue;
      const Node &earlier = fn.node(it->second);
      if (!canReplace(n, earlier, fn, returned))
        continue;
      for (size_t r = 0; r < n.results.size(); ++r)
        replacement[n.results[r]] = earlier.results[r];
      dead[id] = true;
      ++merged;
    }
    if (!merged)
      return false;
    fn.eraseNodes(dead);
    ctx.stat("merged", merged);
    return true;
  }

private:
  /// Op, operands and attributes in canonical text; commutative operands sorted.
  static std::string key(const Node &n) {
    const OpInfo &info = n.info();
    std::string k = std::to_string(static_cast<unsigned>(n.kind)) + "(";
    llvm::SmallVector<ValueId, 4> ops(n.operands.begin(), n.operands.end());
    if (info.has(kCommutative) && ops.size() >= 2 && ops[1] < ops[0])
      std::swap(ops[0], ops[1]);
    for (ValueId o : ops)
      k += std::to_string(o) + ",";
    k += "){";
    for (size_t a = 0; a < n.attrs.size(); ++a)
      k += printAttr(n.attrs[a], info.attrs[a]) + ";";
    return k + "}";
  }

  /// Same result types (always true for equal inputs, but cheap to be sure),
  /// and no returned value would lose its name.
  static bool canReplace(const Node &n, const Node &earlier, const Function &fn,
                         const llvm::DenseSet<ValueId> &returned) {
    if (n.results.size() != earlier.results.size())
      return false;
    for (size_t r = 0; r < n.results.size(); ++r) {
      if (returned.count(n.results[r]))
        return false;
      if (fn.type(n.results[r]) != fn.type(earlier.results[r]))
        return false;
    }
    return true;
  }
};

} // namespace

std::unique_ptr<Pass> createCSEPass() { return std::make_unique<CSEPass>(); }

} // namespace fg
