//===- FunctionCopy.h - rebuild a function node by node ----------*- C++ -*-===//
//
// Passes that reorder nodes or insert new ones before existing ones build a
// fresh Function: the old arguments first, then nodes in the order the pass
// chooses (each operand mapped to its new value, results keeping their types,
// names — or a rename — attributes and locations), then the old results and
// contract. The pass may add nodes of its own to out() between copies.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "ir/Graph.h"

#include "llvm/ADT/DenseMap.h"

#include <string>
#include <vector>

namespace fg {

class FunctionCopy {
public:
  /// Starts the copy of `fn` with its arguments; values in `rename` take the
  /// new name there.
  explicit FunctionCopy(const Function &fn,
                        const llvm::DenseMap<ValueId, std::string> *rename = nullptr);
  Function &out() { return out_; }
  /// The new value of old value `v` (kNoValue before its producer is copied).
  ValueId map(ValueId v) const { return map_[v]; }
  /// Copies `node` with `operands` (new values; default: its own, mapped).
  void copy(const Node &node, llvm::ArrayRef<ValueId> operands = {});
  /// The old function's results (mapped) and contract: the finished copy.
  Function finish();

private:
  std::string nameOf(ValueId v) const;
  const Function &fn_;
  const llvm::DenseMap<ValueId, std::string> *rename_;
  Function out_;
  std::vector<ValueId> map_;
};

} // namespace fg
