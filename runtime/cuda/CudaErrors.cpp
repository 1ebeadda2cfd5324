//===- CudaErrors.cpp - CUDA / cuBLAS status to llvm::Error -----------------===//
#include "runtime/cuda/CudaErrors.h"

#include "ir/Diag.h"

namespace fg {

llvm::Error cudaCheck(cudaError_t e, const llvm::Twine &what) {
  if (e == cudaSuccess)
    return llvm::Error::success();
  return makeError("CUDA error in " + what + ": " + cudaGetErrorName(e) + " (" +
                   cudaGetErrorString(e) + ")");
}

llvm::Error cublasCheck(cublasStatus_t s, const llvm::Twine &what) {
  if (s == CUBLAS_STATUS_SUCCESS)
    return llvm::Error::success();
  return makeError("cuBLAS error in " + what + ": status " + llvm::Twine(static_cast<int>(s)));
}

cudaDataType cudaTypeOf(DType t) {
  switch (t) {
  case DType::F16:
    return CUDA_R_16F;
  case DType::BF16:
    return CUDA_R_16BF;
  default:
    return CUDA_R_32F;
  }
}

} // namespace fg
