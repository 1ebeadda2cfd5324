//===- Eval.h - pieces of the reference shared inside runtime/reference ----===//
#pragma once

#include "runtime/reference/Interpreter.h"

namespace fg::ref {

/// dst[idx[n]] = src[n] (converted to dst's dtype), in place. An index outside
/// [0, rows of dst) is an error and leaves dst unchanged.
llvm::Error setRowsInPlace(HostTensor &dst, const HostTensor &src, const HostTensor &idx);

/// Evaluates a fused node (kFused) through its decomposition, step by step
/// with evalNode (runtime/reference/Decompose.cpp), its GEMVs reading x as
/// `act` says.
llvm::Error evalDecomposed(const Node &node, llvm::ArrayRef<const HostTensor *> operands,
                           llvm::SmallVectorImpl<HostTensor> &results, ActQuant act);

} // namespace fg::ref
