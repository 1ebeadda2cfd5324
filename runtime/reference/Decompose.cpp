//===- Decompose.cpp - the reference of every fused op ---------------------===//
//
// A fused op (kFused) computes exactly its decomposition (ir/Decomposition.h):
// the row's program is walked once, and each step runs through the unfused
// evalNode on host tensors. No fused op has a hand-written reference, so a
// fused kernel is always checked against the same ops the unfused graph runs.
//
//===----------------------------------------------------------------------===//
#include "runtime/reference/Eval.h"

#include "ir/Decomposition.h"

#include <deque>

namespace fg::ref {

llvm::Error evalDecomposed(const Node &node, llvm::ArrayRef<const HostTensor *> operands,
                           llvm::SmallVectorImpl<HostTensor> &results) {
  // Handles: the operands, then each step's results (a deque keeps pointers stable).
  std::vector<const HostTensor *> values(operands.begin(), operands.end());
  std::deque<HostTensor> owned;
  llvm::SmallVector<TensorType, 6> types;
  for (const HostTensor *t : operands)
    types.push_back(t->type);
  auto step = [&](OpKind kind, llvm::ArrayRef<unsigned> ops, llvm::ArrayRef<Attribute> attrs,
                  llvm::ArrayRef<TensorType>) -> llvm::Error {
    Node piece;
    piece.kind = kind;
    piece.attrs.assign(attrs.begin(), attrs.end());
    llvm::SmallVector<const HostTensor *, 6> in;
    for (unsigned h : ops)
      in.push_back(values[h]);
    llvm::SmallVector<HostTensor, 2> out;
    if (llvm::Error e = evalNode(piece, in, out))
      return e;
    for (HostTensor &t : out) {
      owned.push_back(std::move(t));
      values.push_back(&owned.back());
    }
    return llvm::Error::success();
  };
  llvm::SmallVector<unsigned, 2> handles;
  if (llvm::Error e = walkDecomposition(node.kind, types, node.attrs, step, handles))
    return e;
  for (unsigned h : handles)
    results.push_back(*values[h]);
  return llvm::Error::success();
}

} // namespace fg::ref
