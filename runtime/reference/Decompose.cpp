//===- Decompose.cpp - the reference of every fused op ---------------------===//
//
// A fused op (kFused) computes exactly its decomposition (ir/Decomposition.h):
// the row's program is walked once, and each step runs through the unfused
// evalNode on host tensors. No fused op has a hand-written reference, so a
// fused kernel is always checked against the same ops the unfused graph runs.
//
// With int8 activations (ActQuant, ir/Quantize.h) every GEMV step reads x as
// the DP4A kernels do; with the deferred norm prologue (Int8NormDeferred) a
// GEMV fed by rms_norm(x)·norm_w reads x·norm_w, quantised, and multiplies
// each sum by the row's rstd, as the kernel does (gemv_dp4a.cuh fg_dp4a_run):
// each such handle carries that un-normalised row beside its value.
//
//===----------------------------------------------------------------------===//
#include "runtime/reference/Eval.h"

#include "ir/Decomposition.h"
#include "ir/OpViews.h"

#include <cmath>
#include <deque>
#include <map>

namespace fg::ref {

namespace {

/// A step's value as the deferred norm prologue reads it: rows of x·norm_w
/// (f32, never rounded to the step's dtype: the kernel holds it in
/// registers) and each row's rstd.
struct Unnormalised {
  std::vector<float> rows;
  std::vector<float> rstd;
  int64_t k = 0;
};

/// rms_norm's rstd of each row of `x` (f64, as evalRmsNorm): the kernel's f32
/// figure differs in its last bits only, which moves a sum by as little.
Unnormalised unnormalised(const HostTensor &x, double eps) {
  Unnormalised u;
  u.rows = x.toFloats();
  u.k = x.type.shape.empty() ? 1 : x.type.shape.back();
  for (size_t r = 0; u.k && r < u.rows.size() / u.k; ++r) {
    double ss = 0;
    for (int64_t i = 0; i < u.k; ++i)
      ss += static_cast<double>(u.rows[r * u.k + i]) * u.rows[r * u.k + i];
    u.rstd.push_back(static_cast<float>(1.0 / std::sqrt(ss / static_cast<double>(u.k) + eps)));
  }
  return u;
}

} // namespace

llvm::Error evalDecomposed(const Node &node, llvm::ArrayRef<const HostTensor *> operands,
                           llvm::SmallVectorImpl<HostTensor> &results, ActQuant act) {
  // Handles: the operands, then each step's results (a deque keeps pointers stable).
  std::vector<const HostTensor *> values(operands.begin(), operands.end());
  std::deque<HostTensor> owned;
  llvm::SmallVector<TensorType, 6> types;
  for (const HostTensor *t : operands)
    types.push_back(t->type);
  std::map<unsigned, Unnormalised> pending; // handle -> its un-normalised rows
  auto step = [&](OpKind kind, llvm::ArrayRef<unsigned> ops, llvm::ArrayRef<Attribute> attrs,
                  llvm::ArrayRef<TensorType> resultTypes) -> llvm::Error {
    Node piece;
    piece.kind = kind;
    piece.attrs.assign(attrs.begin(), attrs.end());
    llvm::SmallVector<const HostTensor *, 6> in;
    for (unsigned h : ops)
      in.push_back(values[h]);
    const unsigned first = static_cast<unsigned>(values.size());
    const bool deferred = act == ActQuant::Int8NormDeferred;
    auto from = deferred && !ops.empty() ? pending.find(ops[0]) : pending.end();
    llvm::SmallVector<HostTensor, 2> out;
    if (kind == OpKind::MatMul && from != pending.end() && quantizesActivations(in[1]->type.dtype)) {
      // The GEMV of x·norm_w, each row's sums times its rstd at the store.
      const Unnormalised &u = from->second;
      HostTensor x = HostTensor::fromFloats(TensorType{DType::F32, in[0]->type.shape}, u.rows);
      llvm::SmallVector<HostTensor, 1> y;
      if (llvm::Error e = evalNode(piece, {&x, in[1]}, y, ActQuant::Int8))
        return e;
      std::vector<float> v = y[0].toFloats();
      const size_t n = u.rstd.empty() ? 0 : v.size() / u.rstd.size();
      for (size_t i = 0; i < v.size(); ++i)
        v[i] = v[i] * u.rstd[i / n];
      out.push_back(HostTensor::fromFloats(resultTypes[0], v));
    } else {
      if (llvm::Error e = evalNode(piece, in, out, act))
        return e;
      if (deferred && kind == OpKind::RmsNorm) {
        pending[first] = unnormalised(*in[0], op::RmsNorm(piece).eps());
      } else if (kind == OpKind::Mul && from != pending.end() && ops.size() == 2 &&
                 in[1]->type.shape.size() == 1 && in[1]->type.shape[0] == from->second.k) {
        Unnormalised u = from->second; // · norm_w, in f32 as the kernel's (x · 1) · w
        const std::vector<float> w = in[1]->toFloats();
        for (size_t i = 0; i < u.rows.size(); ++i)
          u.rows[i] = u.rows[i] * 1.0f * w[i % w.size()];
        pending[first] = std::move(u);
      }
    }
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
