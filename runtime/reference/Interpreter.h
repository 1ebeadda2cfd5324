//===- Interpreter.h - the CPU reference (the oracle) ------------*- C++ -*-===//
//
// Executes any Graph on the host, computing in f32 (f64 accumulation for
// reductions and dot products) and storing every value in its own dtype (an
// f16 KV cache rounds on write, like the GPU). Weights come from their
// initialisers or are bound by the caller; state persists across runs.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "ir/Graph.h"
#include "ir/Quantize.h"

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/Support/Error.h"

#include <cstdint>
#include <vector>

namespace fg {

/// A dense host tensor: a type and its bytes in that dtype's storage format.
struct HostTensor {
  TensorType type;
  std::vector<uint8_t> data;

  static HostTensor zeros(TensorType t);
  /// Encodes `values` (one per element) into `t.dtype`.
  static HostTensor fromFloats(TensorType t, llvm::ArrayRef<float> values);
  static HostTensor fromInts(TensorType t, llvm::ArrayRef<int64_t> values);

  int64_t numElements() const { return type.numElements(); }
  /// Every element as f32 (dequantising block types).
  std::vector<float> toFloats() const;
  /// Every element as an integer (integer dtypes only).
  std::vector<int64_t> toInts() const;
};

/// Fills `out` (sized for `type`) from a weight initialiser, deterministically:
/// element i of normal(seed, std) depends only on (seed, i), so the GPU runtime
/// can generate the same bytes. Tensor and None initialisers are an error here.
llvm::Error materializeInit(const WeightInit &init, const TensorType &type, HostTensor &out);

/// Element `i` of a Normal, Uniform or Constant initialiser, before rounding to
/// the weight's dtype (f32 first, then the dtype): fg_init::value of
/// ir/InitFormula.h, the one definition the device's init module runs too.
double initValue(const WeightInit &init, uint64_t i);

/// An initialiser as the formula's arguments (the device kernels take the
/// same): kind (fg_init::Kind; None for Tensor and None initialisers), seed,
/// a and b (normal: mean, std; uniform: min, max; constant: value, 0).
struct InitFormulaArgs {
  int kind;
  uint64_t seed;
  double a, b;
};
InitFormulaArgs initFormulaArgs(const WeightInit &init);

class ReferenceInterpreter {
public:
  /// `g` must outlive the interpreter.
  explicit ReferenceInterpreter(const Graph &g);

  /// Supplies a weight's bytes (overrides its initialiser).
  llvm::Error bindWeight(llvm::StringRef name, HostTensor t);
  /// Materialises unbound weights from their initialisers and zeroes state.
  /// Called by run() when needed.
  llvm::Error prepare();
  /// Zeroes every state tensor.
  void resetState();
  HostTensor *state(llvm::StringRef name);

  /// Node i of entry `entry`'s function computes its GEMVs with x as act[i]
  /// says (ir/Quantize.h; nodes past its end: exactly): the numerics of the
  /// CUDA program's launches (LaunchRecord::actQuant), so the reference
  /// computes what the GPU computes (ExecOptions::cpuActQuant).
  void setActQuant(llvm::StringRef entry, std::vector<ActQuant> act);

  /// Runs entry `entry` with the given inputs (by argument name) and returns
  /// its results by value name, in the entry's result order.
  llvm::Error run(llvm::StringRef entry, const llvm::StringMap<HostTensor> &inputs,
                  std::vector<std::pair<std::string, HostTensor>> &outputs);

private:
  const Graph &graph_;
  bool prepared_ = false;
  llvm::StringMap<HostTensor> weights_;
  llvm::StringMap<HostTensor> state_;
  llvm::StringMap<std::vector<ActQuant>> actQuant_;
};

/// Evaluates one node on host tensors (the building block of run(); tests use
/// it directly). `operands` are in the node's operand order. For ops that
/// update state, results[0] is written and the caller stores it back.
/// `act`: how the node's GEMVs read x (ActQuant; fused nodes: every GEMV of
/// their decomposition).
llvm::Error evalNode(const Node &node, llvm::ArrayRef<const HostTensor *> operands,
                     llvm::SmallVectorImpl<HostTensor> &results,
                     ActQuant act = ActQuant::Exact);

} // namespace fg
