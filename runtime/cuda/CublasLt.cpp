//===- CublasLt.cpp - one cuBLASLt GEMM, prepared before capture ----------===//
#include "runtime/cuda/CublasLt.h"
#include "runtime/cuda/CudaErrors.h"

#include "ir/Diag.h"

#include "llvm/Support/FormatVariadic.h"

#include <cstdint>

namespace fg {

namespace {

/// The largest power of two (at most 256) dividing the address: what the
/// heuristic is told about each pointer (its default assumes 256).
uint32_t alignmentOf(const void *p) {
  auto v = reinterpret_cast<uintptr_t>(p);
  uint32_t a = 256;
  while (a > 1 && v % a != 0)
    a /= 2;
  return a;
}

} // namespace

LtGemm::~LtGemm() {
  for (cublasLtMatrixLayout_t l : {a_, b_, c_, d_})
    if (l)
      cublasLtMatrixLayoutDestroy(l);
  if (op_)
    cublasLtMatmulDescDestroy(op_);
}

llvm::Expected<std::unique_ptr<LtGemm>> LtGemm::prepare(cublasLtHandle_t h, const GemmShape &g,
                                                       const LtPointers &p,
                                                       uint64_t workspaceBytes,
                                                       const llvm::Twine &what) {
  std::unique_ptr<LtGemm> out(new LtGemm());
  out->alpha_ = g.alpha;
  out->beta_ = g.beta;
  auto check = [&](cublasStatus_t s, const char *call) {
    return cublasCheck(s, llvm::Twine(call) + " for " + what);
  };
  if (auto e = check(cublasLtMatmulDescCreate(&out->op_, CUBLAS_COMPUTE_32F, CUDA_R_32F),
                     "cublasLtMatmulDescCreate"))
    return e;
  cublasOperation_t ta = g.transA ? CUBLAS_OP_T : CUBLAS_OP_N;
  cublasOperation_t tb = g.transB ? CUBLAS_OP_T : CUBLAS_OP_N;
  if (auto e = check(cublasLtMatmulDescSetAttribute(out->op_, CUBLASLT_MATMUL_DESC_TRANSA, &ta,
                                                    sizeof(ta)),
                     "CUBLASLT_MATMUL_DESC_TRANSA"))
    return e;
  if (auto e = check(cublasLtMatmulDescSetAttribute(out->op_, CUBLASLT_MATMUL_DESC_TRANSB, &tb,
                                                    sizeof(tb)),
                     "CUBLASLT_MATMUL_DESC_TRANSB"))
    return e;
  // Layouts describe the matrices as stored (column-major), before op():
  // op(A) is m×k, op(B) k×n, C and D m×n.
  auto layout = [&](cublasLtMatrixLayout_t *l, DType t, int64_t rows, int64_t cols,
                    int64_t ld) {
    return check(cublasLtMatrixLayoutCreate(l, cudaTypeOf(t), static_cast<uint64_t>(rows),
                                            static_cast<uint64_t>(cols), ld),
                 "cublasLtMatrixLayoutCreate");
  };
  if (auto e = layout(&out->a_, g.aType, g.transA ? g.k : g.m, g.transA ? g.m : g.k, g.lda))
    return e;
  if (auto e = layout(&out->b_, g.bType, g.transB ? g.n : g.k, g.transB ? g.k : g.n, g.ldb))
    return e;
  if (auto e = layout(&out->c_, g.cType, g.m, g.n, g.ldc))
    return e;
  if (auto e = layout(&out->d_, g.cType, g.m, g.n, g.ldd))
    return e;

  cublasLtMatmulPreference_t pref = nullptr;
  if (auto e = check(cublasLtMatmulPreferenceCreate(&pref), "cublasLtMatmulPreferenceCreate"))
    return e;
  struct PrefGuard {
    cublasLtMatmulPreference_t p;
    ~PrefGuard() { cublasLtMatmulPreferenceDestroy(p); }
  } guard{pref};
  size_t ws = static_cast<size_t>(workspaceBytes);
  if (auto e = check(cublasLtMatmulPreferenceSetAttribute(
                         pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof(ws)),
                     "CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES"))
    return e;
  const std::pair<cublasLtMatmulPreferenceAttributes_t, const void *> aligned[] = {
      {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, p.a},
      {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, p.b},
      {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, p.c},
      {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, p.d}};
  for (auto [attr, ptr] : aligned) {
    uint32_t a = alignmentOf(ptr);
    if (auto e = check(cublasLtMatmulPreferenceSetAttribute(pref, attr, &a, sizeof(a)),
                       "CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT"))
      return e;
  }
  cublasLtMatmulHeuristicResult_t result{};
  int found = 0;
  if (auto e = check(cublasLtMatmulAlgoGetHeuristic(h, out->op_, out->a_, out->b_, out->c_,
                                                    out->d_, pref, 1, &result, &found),
                     "cublasLtMatmulAlgoGetHeuristic"))
    return e;
  if (found < 1 || result.state != CUBLAS_STATUS_SUCCESS)
    return makeError("cuBLASLt has no algorithm for " + what +
                     llvm::formatv(" (m {0}, n {1}, k {2}, lda {3}, ldb {4}, ldc {5}, ldd {6}, "
                                   "{7} workspace bytes)",
                                   g.m, g.n, g.k, g.lda, g.ldb, g.ldc, g.ldd, workspaceBytes)
                         .str());
  out->algo_ = result.algo;
  return out;
}

llvm::Error LtGemm::run(cublasLtHandle_t h, const LtPointers &p, void *workspace,
                        uint64_t workspaceBytes, cudaStream_t s, const llvm::Twine &what) const {
  return cublasCheck(cublasLtMatmul(h, op_, &alpha_, p.a, a_, p.b, b_, &beta_, p.c, c_, p.d, d_,
                                    &algo_, workspace, static_cast<size_t>(workspaceBytes), s),
                     what);
}

} // namespace fg
