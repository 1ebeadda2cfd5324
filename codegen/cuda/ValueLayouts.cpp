//===- ValueLayouts.cpp - where every value's elements lie ----------------===//
#include "codegen/cuda/ValueLayouts.h"

#include "codegen/cuda/LowerError.h"

namespace fg::cuda {

llvm::Expected<std::vector<Layout>> computeLayouts(const Function &fn) {
  std::vector<Layout> layout(fn.numValues());
  for (const Argument &a : fn.arguments())
    layout[a.value] = Layout::contiguous(fn.type(a.value).shape);
  for (const Node &n : fn.nodes()) {
    if (n.info().has(kViewLike)) {
      std::optional<Layout> l = viewLayout(n, layout[n.operands[0]]);
      if (!l)
        return nodeError(fn, n,
                         "this view of a non-contiguous value cannot be expressed with "
                         "strides; insert a cont before it");
      layout[n.result()] = *l;
      continue;
    }
    for (ValueId r : n.results)
      layout[r] = Layout::contiguous(fn.type(r).shape);
  }
  return layout;
}

} // namespace fg::cuda
