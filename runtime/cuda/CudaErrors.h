//===- CudaErrors.h - CUDA / cuBLAS status to llvm::Error, dtype to cudaDataType -*- C++ -*-===//
//
// Shared by the runner and the kernel benchmark: every CUDA call's status
// becomes an error naming what was being done.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "ir/DType.h"

#include "llvm/ADT/Twine.h"
#include "llvm/Support/Error.h"

#include <cublas_v2.h>
#include <cuda_runtime.h>

namespace fg {

/// "CUDA error in <what>: <name> (<string>)", or success.
llvm::Error cudaCheck(cudaError_t e, const llvm::Twine &what);
/// "cuBLAS error in <what>: status <n>", or success.
llvm::Error cublasCheck(cublasStatus_t s, const llvm::Twine &what);
/// The cuBLAS data type of a GEMM operand dtype (f16, bf16, else f32).
cudaDataType cudaTypeOf(DType t);

} // namespace fg
