//===- CublasLt.h - one cuBLASLt GEMM, prepared before capture ----*- C++ -*-===//
//
// The Lt form of a plan's GEMM (GemmShape::lt: D = alpha·op(A)·op(B) +
// beta·C with C and D two buffers; fused.matmul_add over prefill rows) as
// cublasLtMatmul. Its descriptors and algorithm (cublasLtMatmulAlgoGetHeuristic,
// given the workspace and the alignment of the actual pointers) are made once
// when the runner loads the plan, so graph capture records only the
// cublasLtMatmul call.
//
//   llvm::Expected<std::unique_ptr<LtGemm>> g =
//       LtGemm::prepare(lt, shape, {a, b, c, d}, workspaceBytes, "%y = ...");
//   (*g)->run(lt, {a, b, c, d}, workspace, workspaceBytes, stream, "%y = ...");
//
//===----------------------------------------------------------------------===//
#pragma once

#include "runtime/Program.h"

#include "llvm/ADT/Twine.h"
#include "llvm/Support/Error.h"

#include <cublasLt.h>
#include <cuda_runtime.h>

#include <memory>

namespace fg {

/// The four matrices of one call (device addresses, byte offsets applied).
struct LtPointers {
  const void *a = nullptr, *b = nullptr, *c = nullptr;
  void *d = nullptr;
};

class LtGemm {
public:
  ~LtGemm();
  LtGemm(const LtGemm &) = delete;
  LtGemm &operator=(const LtGemm &) = delete;

  /// Descriptors for `g` (f32 compute and scale; A and B of aType/bType, C
  /// and D of cType) and the heuristic's first algorithm for these pointers'
  /// alignment and at most `workspaceBytes` of workspace; an error naming
  /// `what` when cuBLASLt has none.
  static llvm::Expected<std::unique_ptr<LtGemm>> prepare(cublasLtHandle_t h, const GemmShape &g,
                                                        const LtPointers &p,
                                                        uint64_t workspaceBytes,
                                                        const llvm::Twine &what);

  /// Enqueues the call on `s` (capturable: no allocation, no host sync).
  /// The pointers must be at least as aligned as those given to prepare.
  llvm::Error run(cublasLtHandle_t h, const LtPointers &p, void *workspace,
                  uint64_t workspaceBytes, cudaStream_t s, const llvm::Twine &what) const;

private:
  LtGemm() = default;
  float alpha_ = 1, beta_ = 0;
  cublasLtMatmulDesc_t op_ = nullptr;
  cublasLtMatrixLayout_t a_ = nullptr, b_ = nullptr, c_ = nullptr, d_ = nullptr;
  cublasLtMatmulAlgo_t algo_{};
};

} // namespace fg
