//===- InputCheck.h - input values outside their binding's range --*- C++ -*-===//
//
// An entry's inputs carry a value range in the graph (ir/Graph.h
// InputBinding: token ids in [0, vocab), positions in [0, ctx)). A value
// outside it is an InputRangeError: the CPU executor finds it on the host
// before the step (checkInputRange), the CUDA program on the device (the
// entry's input check, runtime/Program.h kStatusBytes) and CudaRunner turns
// the status words into the same error after the step. Either way no state
// was written and the caller may continue with good inputs; the Executor
// adds the step number:
//   step 17: input 'positions'[0] = 5000 is outside [0, 4096)
//
//===----------------------------------------------------------------------===//
#pragma once

#include "ir/Graph.h"

#include "llvm/ADT/ArrayRef.h"
#include "llvm/Support/Error.h"

#include <cstdint>
#include <string>

namespace fg {

class InputRangeError : public llvm::ErrorInfo<InputRangeError> {
public:
  static char ID;
  InputRangeError(std::string input, int64_t index, int64_t value, int64_t lo, int64_t hi)
      : input_(std::move(input)), index_(index), value_(value), lo_(lo), hi_(hi) {}

  /// "input 'positions'[0] = 5000 is outside [0, 4096)"
  void log(llvm::raw_ostream &os) const override;
  std::error_code convertToErrorCode() const override { return llvm::inconvertibleErrorCode(); }

  const std::string &input() const { return input_; }
  int64_t index() const { return index_; }
  int64_t value() const { return value_; }

private:
  std::string input_;
  int64_t index_, value_, lo_, hi_;
};

/// An InputRangeError for the first of `values` outside `bind`'s range (none
/// without a range).
llvm::Error checkInputRange(llvm::StringRef input, const InputBinding &bind,
                            llvm::ArrayRef<int32_t> values);

} // namespace fg
