//===- FunctionCopy.cpp - rebuild a function node by node ------------------===//
#include "passes/FunctionCopy.h"

namespace fg {

FunctionCopy::FunctionCopy(const Function &fn, const llvm::DenseMap<ValueId, std::string> *rename)
    : fn_(fn), rename_(rename), out_(fn.name().str()), map_(fn.numValues(), kNoValue) {
  for (const Argument &a : fn.arguments())
    map_[a.value] = out_.addArgument(nameOf(a.value), fn.type(a.value), a.role, a.init, a.loc);
}

std::string FunctionCopy::nameOf(ValueId v) const {
  if (rename_)
    if (auto it = rename_->find(v); it != rename_->end())
      return it->second;
  return fn_.value(v).name;
}

void FunctionCopy::copy(const Node &node, llvm::ArrayRef<ValueId> operands) {
  llvm::SmallVector<ValueId, 6> ops(operands.begin(), operands.end());
  if (ops.empty())
    for (ValueId o : node.operands)
      ops.push_back(map_[o]);
  llvm::SmallVector<TensorType, 2> types;
  llvm::SmallVector<std::string, 2> names;
  for (ValueId r : node.results) {
    types.push_back(fn_.type(r));
    names.push_back(nameOf(r));
  }
  NodeId id = out_.addNode(node.kind, ops, node.attrs, types, names, node.loc);
  for (size_t r = 0; r < node.results.size(); ++r)
    map_[node.results[r]] = out_.node(id).results[r];
}

Function FunctionCopy::finish() {
  llvm::SmallVector<ValueId, 4> results;
  for (ValueId r : fn_.results())
    results.push_back(map_[r]);
  out_.setResults(results);
  out_.copyContract(fn_);
  return std::move(out_);
}

} // namespace fg
