//===- Cublas.h - a cuBLAS GEMM call, described as data ----------*- C++ -*-===//
//
// Matmuls above the GEMV token limit are not generated: the emitter returns
// this descriptor and the runtime calls
//
//   cublasGemmEx(h, transA ? T : N, transB ? T : N, m, n, k, &alpha,
//                A + a.byteOffset, cudaType(aType), lda,
//                B + b.byteOffset, cudaType(bType), ldb, &beta,
//                C + c.byteOffset, cudaType(cType), ldc,
//                CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT)
//
// in cuBLAS's column-major terms. For y[M, N] = x[M, K] · W[N, K]ᵀ (row-major)
// that is C(N×M) = op(A)·B with A = W (transA, lda = W's row stride),
// B = x (ldb = x's row stride), ldc = N. aType and bType are always equal
// (cublasGemmEx does not mix them): when x is not already in W's dtype and
// dense, a conversion kernel earlier in the same launch list writes it into
// the scratch buffer and `b` points there.
//
// fused.matmul_add over more rows than the GEMV takes is the Lt form (lt =
// true): the runtime calls cublasLtMatmul with C = the residual r (ldc = r's
// row stride), D = the result (ldd = N), alpha = beta = 1, C and D f32, so
//   y[M, N] = x[M, K] · W[N, K]ᵀ + r[M, N]
// is one GEMM. r and y are two buffers: cublasGemmEx's beta = 1 would need
// r copied into y first (the bytes the fusion saves, spent again) or y placed
// on r's bytes (an alias the memory plan and the overlap proof refuse).
//
//===----------------------------------------------------------------------===//
#pragma once

#include "ir/DType.h"
#include "runtime/Program.h"

#include <cstdint>
#include <string>

namespace fg::cuda {

/// A buffer a launch reads or writes: operand i, result i of the node, or the
/// node's scratch buffer (one per node, shared by all of its launches, at
/// least the largest scratchBytes of them; contents undefined on entry).
struct Param {
  /// Scratch: arena memory of the node, undefined on entry. Counters:
  /// program memory zeroed once at load that belongs to this launch alone;
  /// the kernel must leave it zero when it finishes (KernelSpec::counterBytes).
  enum class Kind : uint8_t { Operand, Result, Scratch, Counters };
  Kind kind = Kind::Operand;
  unsigned index = 0; ///< operand / result number; 0 for Scratch and Counters

  static Param operand(unsigned i) { return {Kind::Operand, i}; }
  static Param result(unsigned i) { return {Kind::Result, i}; }
  static Param scratch() { return {Kind::Scratch, 0}; }
  static Param counters() { return {Kind::Counters, 0}; }
  bool operator==(const Param &o) const { return kind == o.kind && index == o.index; }
};

struct GemmOperand {
  Param param;
  uint64_t byteOffset = 0; ///< added to the buffer's base address
};

/// A GEMM the emitter asks for: its shape (runtime/Program.h) and operands as
/// the node's parameters; the launch schedule resolves them to buffers.
struct CublasGemmSpec : GemmShape {
  std::string name; ///< for logs and --debug-sync
  GemmOperand a, b, c;
  GemmOperand d; ///< lt only: the result D (c is then the addend C, read only)
  uint64_t scratchBytes = 0; ///< scratch this launch list needs (converted B)
  /// A stacked over two weights (fused.gated_gemm): rows [0, stackRows) of
  /// op(A) are `a`, rows [stackRows, m) are `a2`. The launch schedule keeps
  /// it one GEMM where `a2` starts on the byte after `a` ends in device
  /// memory (weights placed one after another: runtime/Program.h,
  /// weightFollows), else issues two GEMMs, the second writing C from row
  /// stackRows on (C's leading dimension unchanged). 0: not stacked.
  int64_t stackRows = 0;
  GemmOperand a2;
};

} // namespace fg::cuda
