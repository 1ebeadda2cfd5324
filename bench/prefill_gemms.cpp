//===- prefill_gemms.cpp - a prefill layer's GEMMs, one form against another ===//
//
// Issue 15, item 2 ("merged Q/K/V and gate|up GEMMs", "cuBLASLt heuristics"),
// measured before it is built: the GEMMs of one W-dense layer (Llama-3-8B:
// 4096 wide, 14336 FFN, 8 KV heads of 128) at T prompt rows, in the forms a
// plan could take, each as a CUDA graph of `--reps` back-to-back layers
// replayed after warm-up, timed with CUDA events; the figure is the mean per
// layer and TFLOP/s against one large cuBLAS GEMM measured in the same run
// (codegen/cuda/GemmPeak.h).
//
//   gemmex           cublasGemmEx, f16 operands, f32 result: what the plan
//                    calls today (q, k, v, gate and up one after another; o and
//                    down in every form as the Lt form with the residual,
//                    D = x·Wᵀ + r)
//   lt               the same GEMMs through cuBLASLt, the heuristic's first
//                    algorithm
//   branches[-gemmex] q, k and v on three graph branches, gate and up on two
//                    (what the plan's DAG gives them with three workspace
//                    slots; each branch its own handle and workspace)
//   merged[-gemmex]  q|k|v as one GEMM of N = 6144 and gate|up as one of
//                    N = 28672 (weights stacked: what a load-time placement
//                    would give); merged-qkv, merged-gu: one of the two
//   batched          q|k|v merged, gate and up as one cublasGemmBatchedEx of
//                    two (pointer arrays in device memory)
//   plan             q, then k|v as one strided batch, gate|up stacked: the
//                    plan's own GEMMs (GemmPairs, gated_gemm)
//   strided[-gu]     gate and up (and k and v) as one cublasGemmStridedBatchedEx
//                    of two, the weights where they are (A's stride their
//                    distance, x shared, the results one after the other):
//                    no repack, no pointer arrays
//
//   fg_bench_prefill_gemms [--tokens 512,2048] [--reps N] [--constant] [--benchmark_filter=REGEX]
//
// Operands hold random f16 values unless --constant (one value: tensor cores
// then draw less power and clock higher, which flatters every form).
//
// Without a device it prints one skip line and exits 0.
//
//===----------------------------------------------------------------------===//
#include "runtime/cuda/CublasLt.h"
#include "runtime/cuda/CudaErrors.h"

#include "codegen/cuda/GemmPeak.h"
#include "runtime/Executor.h"

#include "llvm/Support/FormatVariadic.h"

#include <benchmark/benchmark.h>
#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <cstdio>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <vector>

using namespace fg;

namespace {

constexpr int64_t kEmbd = 4096, kFfn = 14336, kKv = 1024;
constexpr int64_t kUpGap = 1 << 20; ///< bytes between gate|up and the strided forms' up
constexpr uint64_t kWorkspace = 32ull << 20;

struct Options {
  std::vector<int64_t> tokens = {512, 2048};
  int reps = 8;
  /// Operands filled with random f16 values (the default: what a model's
  /// weights and activations look like) or with one constant (--constant):
  /// tensor cores draw less power on constant data and clock higher — the
  /// twenty-ninth session found the constant-filled bench ~14 % faster than
  /// the plan's same GEMMs on random weights.
  bool constant = false;
};

Options &options() {
  static Options o;
  return o;
}

/// A device allocation, freed on destruction.
struct DevBuf {
  void *p = nullptr;
  size_t bytes = 0;
  DevBuf() = default;
  explicit DevBuf(size_t n) : bytes(n) {
    if (cudaMalloc(&p, n) != cudaSuccess)
      p = nullptr;
    else if (options().constant)
      cudaMemset(p, 0x2c, n); // 2^-4 in f16
    else if (llvm::Error e = cuda::fillRandom16(p, n)) // random f16 (GemmPeak.h)
      llvm::consumeError(std::move(e));                 // timed as filled
  }
  ~DevBuf() {
    if (p)
      cudaFree(p);
  }
  DevBuf(const DevBuf &) = delete;
  DevBuf &operator=(const DevBuf &) = delete;
  char *at(size_t off) const { return static_cast<char *>(p) + off; }
};

/// One layer's buffers at T rows: x (f16, the normed row), weights stacked
/// q|k|v and gate|up (so separate and merged forms read the same bytes), the
/// FFN input h (f16), outputs and the residual (f32).
struct Layer {
  int64_t t;
  DevBuf x, wqkv, wo, wgu, wdown, h, r, yqkv, ygu, yo, ydown;
  /// The strided forms' second weights: up 1 MiB past gate|up's end in the
  /// same allocation (as the runner's one weight allocation places them: a
  /// positive stride; across two cudaMallocs the stride may be negative, and
  /// cuBLAS then failed with status 13 in the twenty-ninth session's call).
  char *wup = nullptr;
  DevBuf ptrs; ///< the batched form's pointer arrays: A[2], B[2], C[2]
  Layer(int64_t tokens)
      : t(tokens), x(tokens * kEmbd * 2), wqkv((kEmbd + 2 * kKv) * kEmbd * 2),
        wo(kEmbd * kEmbd * 2), wgu(3 * kFfn * kEmbd * 2 + kUpGap), wdown(kEmbd * kFfn * 2),
        h(tokens * kFfn * 2), r(tokens * kEmbd * 4), yqkv(tokens * (kEmbd + 2 * kKv) * 4),
        ygu(tokens * 2 * kFfn * 4), yo(tokens * kEmbd * 4), ydown(tokens * kEmbd * 4),
        ptrs(6 * sizeof(void *)) {
    wup = wgu.p ? wgu.at(2 * kFfn * kEmbd * 2 + kUpGap) : nullptr;
    const void *host[6] = {wgu.at(0), wgu.at(kFfn * kEmbd * 2), x.p, x.p, ygu.at(0),
                           ygu.at(t * kFfn * 4)};
    cudaMemcpy(ptrs.p, host, sizeof(host), cudaMemcpyHostToDevice);
  }
  bool ok() const {
    for (const DevBuf *b :
         {&x, &wqkv, &wo, &wgu, &wdown, &h, &r, &yqkv, &ygu, &yo, &ydown, &ptrs})
      if (!b->p)
        return false;
    return true;
  }
};

/// y[T, N] = x[T, K]·W[N, K]ᵀ (+ r) in cuBLAS's column-major terms.
GemmShape shape(int64_t t, int64_t n, int64_t k, int64_t ldc, bool residual) {
  GemmShape g;
  g.transA = true;
  g.transB = false;
  g.m = n;
  g.n = t;
  g.k = k;
  g.aType = g.bType = DType::F16;
  g.cType = DType::F32;
  g.lda = k;
  g.ldb = k;
  g.ldc = ldc;
  g.ldd = ldc;
  g.beta = residual ? 1.f : 0.f;
  g.lt = true;
  return g;
}

/// What one case enqueues on a stream (captured once into a graph).
struct Ctx {
  cublasHandle_t blas[3] = {};
  cublasLtHandle_t lt = nullptr;
  DevBuf ws[3];
  cudaStream_t side[3] = {};
  std::vector<std::unique_ptr<LtGemm>> prepared;
  Ctx() : ws{DevBuf(kWorkspace), DevBuf(kWorkspace), DevBuf(kWorkspace)} {
    for (auto &b : blas)
      cublasCreate(&b);
    cublasLtCreate(&lt);
    for (auto &s : side)
      cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
  }
  ~Ctx() {
    for (auto &b : blas)
      cublasDestroy(b);
    cublasLtDestroy(lt);
    for (auto &s : side)
      cudaStreamDestroy(s);
  }
};

llvm::Error gemmEx(Ctx &c, int slot, cudaStream_t s, const GemmShape &g, const void *a,
                   const void *b, void *y) {
  if (auto e = cublasCheck(cublasSetStream(c.blas[slot], s), "cublasSetStream"))
    return e;
  if (auto e = cublasCheck(cublasSetWorkspace(c.blas[slot], c.ws[slot].p, kWorkspace),
                           "cublasSetWorkspace"))
    return e;
  return cublasCheck(cublasGemmEx(c.blas[slot], CUBLAS_OP_T, CUBLAS_OP_N, (int)g.m, (int)g.n,
                                  (int)g.k, &g.alpha, a, CUDA_R_16F, (int)g.lda, b, CUDA_R_16F,
                                  (int)g.ldb, &g.beta, y, CUDA_R_32F, (int)g.ldc,
                                  CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
                     "cublasGemmEx");
}

/// Prepares (outside capture, first call) and runs one Lt GEMM.
llvm::Error ltGemm(Ctx &c, int slot, cudaStream_t s, const GemmShape &g, LtPointers p,
                   size_t &next) {
  if (next == c.prepared.size()) {
    auto lt = LtGemm::prepare(c.lt, g, p, kWorkspace, "bench");
    if (!lt)
      return lt.takeError();
    c.prepared.push_back(std::move(*lt));
  }
  return c.prepared[next++]->run(c.lt, p, c.ws[slot].p, kWorkspace, s, "bench");
}

/// How a layer's q, k, v and gate, up GEMMs are issued (o and down are the
/// Lt form with the residual in every form, as the plan has them).
struct Form {
  enum class Qkv { Separate, Merged, KvStrided } qkv = Qkv::Separate;
  enum class Gu { Separate, Merged, PtrBatched, Strided } gu = Gu::Separate;
  bool lt = false;       ///< cuBLASLt (heuristic's first) instead of cublasGemmEx
  bool branches = false; ///< separate GEMMs of one group on parallel graph branches
  const char *name = "";
};

const std::vector<Form> &forms() {
  using Q = Form::Qkv;
  using G = Form::Gu;
  static const std::vector<Form> f = {
      {Q::Separate, G::Separate, false, false, "gemmex"},
      {Q::Separate, G::Separate, true, false, "lt"},
      {Q::Separate, G::Separate, false, true, "branches-gemmex"},
      {Q::Separate, G::Separate, true, true, "branches"},
      {Q::Merged, G::Merged, true, false, "merged"},
      {Q::Merged, G::Merged, false, false, "merged-gemmex"},
      {Q::Merged, G::Separate, true, false, "merged-qkv"},
      {Q::Separate, G::Merged, true, false, "merged-gu"},
      {Q::Merged, G::PtrBatched, true, false, "batched"},
      {Q::KvStrided, G::Strided, false, false, "strided"},
      {Q::Separate, G::Strided, false, false, "strided-gu"},
      // What the plan runs since the twenty-ninth session: q alone, k|v one
      // strided batch (GemmPairs), gate|up stacked (gated_gemm), all
      // cublasGemmEx; o and down with the residual as every form has them.
      {Q::KvStrided, G::Merged, false, false, "plan"},
  };
  return f;
}

/// One layer's GEMMs in form `f` on stream s. `next` walks c.prepared.
llvm::Error layerGemms(Ctx &c, Layer &L, const Form &f, cudaStream_t s, size_t &next) {
  int64_t t = L.t, nqkv = kEmbd + 2 * kKv;
  const char *wq = L.wqkv.at(0), *wk = L.wqkv.at(kEmbd * kEmbd * 2),
             *wv = L.wqkv.at((kEmbd + kKv) * kEmbd * 2);
  const char *wg = L.wgu.at(0), *wu = L.wgu.at(kFfn * kEmbd * 2);
  // Outputs of the separate forms: q, k, v each [T, N] contiguous inside yqkv.
  char *yq = L.yqkv.at(0), *yk = L.yqkv.at(t * kEmbd * 4), *yv = L.yqkv.at(t * (kEmbd + kKv) * 4);
  char *yg = L.ygu.at(0), *yu = L.ygu.at(t * kFfn * 4);
  auto lt = [&](int slot, cudaStream_t st, const GemmShape &g, const void *a, const void *b,
                const void *cc, void *d) {
    GemmShape h = g;
    if (h.beta == 0)
      cc = d;
    return ltGemm(c, slot, st, h, {a, b, cc, d}, next);
  };
  auto plain = [&](int slot, cudaStream_t st, int64_t n, const void *w, void *y) {
    GemmShape sh = shape(t, n, kEmbd, n, false);
    return f.lt ? lt(slot, st, sh, w, L.x.p, nullptr, y) : gemmEx(c, slot, st, sh, w, L.x.p, y);
  };
  auto bind = [&](int slot, cudaStream_t st) -> llvm::Error {
    if (auto e = cublasCheck(cublasSetStream(c.blas[slot], st), "cublasSetStream"))
      return e;
    return cublasCheck(cublasSetWorkspace(c.blas[slot], c.ws[slot].p, kWorkspace),
                       "cublasSetWorkspace");
  };
  // Two GEMMs of one shape as one strided batch: the weights where they are
  // (the stride is their distance, as a runner would compute it at load), x
  // shared (stride 0), the results one after the other.
  auto strided = [&](int64_t n, const char *w0, const char *w1, char *y0) -> llvm::Error {
    if (auto e = bind(0, s))
      return e;
    float one = 1, zero = 0;
    long long strideA = (w1 - w0) / 2;
    return cublasCheck(cublasGemmStridedBatchedEx(
                           c.blas[0], CUBLAS_OP_T, CUBLAS_OP_N, (int)n, (int)t, (int)kEmbd, &one,
                           w0, CUDA_R_16F, (int)kEmbd, strideA, L.x.p, CUDA_R_16F, (int)kEmbd, 0,
                           &zero, y0, CUDA_R_32F, (int)n, (long long)(t * n), 2,
                           CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
                       "cublasGemmStridedBatchedEx");
  };
  // fork: side streams wait for s; join: s waits for them.
  auto fork = [&](int n) {
    cudaEvent_t ev;
    cudaEventCreateWithFlags(&ev, cudaEventDisableTiming);
    cudaEventRecord(ev, s);
    for (int i = 0; i < n; ++i)
      cudaStreamWaitEvent(c.side[i], ev);
    cudaEventDestroy(ev);
  };
  auto join = [&](int n) {
    for (int i = 0; i < n; ++i) {
      cudaEvent_t ev;
      cudaEventCreateWithFlags(&ev, cudaEventDisableTiming);
      cudaEventRecord(ev, c.side[i]);
      cudaStreamWaitEvent(s, ev);
      cudaEventDestroy(ev);
    }
  };
  struct G { const void *w; int64_t n; void *y; };
  auto group = [&](llvm::ArrayRef<G> gs) -> llvm::Error {
    if (f.branches)
      fork(static_cast<int>(gs.size()));
    for (size_t i = 0; i < gs.size(); ++i) {
      int slot = f.branches ? static_cast<int>(i) : 0;
      if (auto e = plain(slot, f.branches ? c.side[i] : s, gs[i].n, gs[i].w, gs[i].y))
        return e;
    }
    if (f.branches)
      join(static_cast<int>(gs.size()));
    return llvm::Error::success();
  };

  switch (f.qkv) {
  case Form::Qkv::Separate:
    if (auto e = group({{wq, kEmbd, yq}, {wk, kKv, yk}, {wv, kKv, yv}}))
      return e;
    break;
  case Form::Qkv::Merged:
    if (auto e = plain(0, s, nqkv, L.wqkv.p, L.yqkv.p))
      return e;
    break;
  case Form::Qkv::KvStrided:
    if (auto e = plain(0, s, kEmbd, wq, yq))
      return e;
    if (auto e = strided(kKv, wk, wv, yk))
      return e;
    break;
  }
  switch (f.gu) {
  case Form::Gu::Separate:
    if (auto e = group({{wg, kFfn, yg}, {wu, kFfn, yu}}))
      return e;
    break;
  case Form::Gu::Merged:
    if (auto e = plain(0, s, 2 * kFfn, L.wgu.p, L.ygu.p))
      return e;
    break;
  case Form::Gu::Strided:
    // up apart from gate (not adjacent, so merged is impossible): the stride
    // is their distance.
    if (auto e = strided(kFfn, wg, L.wup, yg))
      return e;
    break;
  case Form::Gu::PtrBatched: {
    auto **p = static_cast<void **>(L.ptrs.p);
    if (auto e = bind(0, s))
      return e;
    float one = 1, zero = 0;
    if (auto e = cublasCheck(
            cublasGemmBatchedEx(c.blas[0], CUBLAS_OP_T, CUBLAS_OP_N, (int)kFfn, (int)t,
                                (int)kEmbd, &one, (const void *const *)p, CUDA_R_16F,
                                (int)kEmbd, (const void *const *)(p + 2), CUDA_R_16F, (int)kEmbd,
                                &zero, p + 4, CUDA_R_32F, (int)kFfn, 2, CUBLAS_COMPUTE_32F,
                                CUBLAS_GEMM_DEFAULT),
            "cublasGemmBatchedEx"))
      return e;
    break;
  }
  }
  // The Lt form with the residual: o and down in every form (what the plan does).
  if (auto e = lt(0, s, shape(t, kEmbd, kEmbd, kEmbd, true), L.wo.p, L.x.p, L.r.p, L.yo.p))
    return e;
  return lt(0, s, shape(t, kEmbd, kFfn, kEmbd, true), L.wdown.p, L.h.p, L.r.p, L.ydown.p);
}

double layerFlops(int64_t t) {
  double qkv = 2.0 * t * (kEmbd + 2 * kKv) * kEmbd, o = 2.0 * t * kEmbd * kEmbd;
  double ffn = 3 * 2.0 * t * kFfn * kEmbd;
  return qkv + o + ffn;
}

double peakTflops() {
  static double p = [] {
    auto g = cuda::measureGemmPeak();
    if (!g) {
      llvm::consumeError(g.takeError());
      return 0.0;
    }
    return g->tflops;
  }();
  return p;
}

void layerCase(benchmark::State &state, int64_t t, const Form &f) {
  if (!cudaDeviceAvailable()) {
    state.SkipWithError("no CUDA device");
    return;
  }
  double peak = peakTflops();
  Ctx c;
  Layer L(t);
  if (!L.ok()) {
    state.SkipWithError("cudaMalloc failed");
    return;
  }
  cudaStream_t s;
  cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
  // First pass eagerly (prepares the Lt algorithms, warms cuBLAS), then capture.
  size_t next = 0;
  if (auto e = layerGemms(c, L, f, s, next)) {
    state.SkipWithError(llvm::toString(std::move(e)).c_str());
    return;
  }
  cudaStreamSynchronize(s);
  cudaGraph_t graph = nullptr;
  cudaGraphExec_t exec = nullptr;
  cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal);
  llvm::Error err = llvm::Error::success();
  for (int i = 0; i < options().reps && !err; ++i) {
    next = 0;
    err = layerGemms(c, L, f, s, next);
  }
  cudaStreamEndCapture(s, &graph);
  if (err) {
    state.SkipWithError(llvm::toString(std::move(err)).c_str());
    return;
  }
  if (cudaGraphInstantiate(&exec, graph, 0) != cudaSuccess) {
    state.SkipWithError("cudaGraphInstantiate failed");
    return;
  }
  cudaEvent_t a, b;
  cudaEventCreate(&a);
  cudaEventCreate(&b);
  for (int w = 0; w < 2; ++w)
    cudaGraphLaunch(exec, s);
  double sumMs = 0;
  int n = 0;
  for (auto _ : state) {
    cudaEventRecord(a, s);
    cudaGraphLaunch(exec, s);
    cudaEventRecord(b, s);
    cudaEventSynchronize(b);
    float ms = 0;
    cudaEventElapsedTime(&ms, a, b);
    state.SetIterationTime(ms / 1e3 / options().reps);
    sumMs += ms / options().reps;
    ++n;
  }
  double layerMs = n ? sumMs / n : 0;
  double tflops = layerMs > 0 ? layerFlops(t) / (layerMs * 1e9) : 0;
  state.counters["us_layer"] = layerMs * 1e3;
  state.counters["TFLOPs"] = tflops;
  state.counters["pct_peak"] = peak > 0 ? 100 * tflops / peak : 0;
  std::printf("# T %lld %-8s %9.1f us a layer  %6.1f TFLOP/s  %5.1f %% of %.0f (GemmPeak)\n",
              (long long)t, f.name, layerMs * 1e3, tflops,
              peak > 0 ? 100 * tflops / peak : 0.0, peak);
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
  cudaEventDestroy(a);
  cudaEventDestroy(b);
  cudaStreamDestroy(s);
}

} // namespace

int main(int argc, char **argv) {
  std::vector<char *> rest = {argv[0]};
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--constant") {
      options().constant = true;
    } else if (a == "--reps" && i + 1 < argc) {
      options().reps = std::max(1, std::atoi(argv[++i]));
    } else if (a == "--tokens" && i + 1 < argc) {
      options().tokens.clear();
      std::string v = argv[++i];
      for (size_t p = 0; p < v.size();) {
        size_t q = v.find(',', p);
        options().tokens.push_back(std::atoll(v.substr(p, q - p).c_str()));
        p = q == std::string::npos ? v.size() : q + 1;
      }
    } else {
      rest.push_back(argv[i]);
    }
  }
  if (!cudaDeviceAvailable()) {
    std::printf("fg_bench_prefill_gemms: no CUDA device; skipped\n");
    return 0;
  }
  for (int64_t t : options().tokens)
    for (const Form &f : forms())
      benchmark::RegisterBenchmark(
          llvm::formatv("prefill_gemms/w-dense/T{0}/{1}", t, f.name).str().c_str(),
          [t, &f](benchmark::State &s) { layerCase(s, t, f); })
          ->UseManualTime()
          ->Iterations(10)
          ->Unit(benchmark::kMicrosecond);
  int n = static_cast<int>(rest.size());
  benchmark::Initialize(&n, rest.data());
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
