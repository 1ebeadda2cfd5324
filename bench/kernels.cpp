//===- kernels.cpp - every kernel family at the workload shapes, cold weights ===//
//
// Issue 11, item 1: each kernel family (bench/KernelCases.h: dense GEMV, fused
// gated GEMV, expert GEMVs, decode attention, row kernels) at every W-dense /
// W-moe / W-tiny shape, T = 1, 2, 4, 8.
//
// A case is one node, emitted by cuda::emitKernel as the compiler would emit
// it (default EmitOptions, the device's arch), compiled by NVRTC (all cases
// up front, in parallel, through the kernel cache) and loaded with
// cudaLibraryLoadData. Its float operands rotate through copies that together
// touch >= 256 MiB (Rotation: L2 is 60 MB on the H200), so no launch finds
// its weights in L2; a CUDA graph of >= 64 back-to-back launches on one stream
// (launch i uses slot i % slots) is replayed: warm-up replays first, then one
// timed replay (CUDA events) per benchmark iteration. The figure is the mean
// per launch. Bytes = the op table's cost rule; % BW = achieved GB/s ÷ the
// read bandwidth measured in this run (codegen/cuda/Bandwidth.h).
//
// Beside every matmul family, cuBLAS on the same shape, dtypes and rotation,
// in a CUDA graph with the same launch count: cublasGemmEx as the compiler
// emits it above the GEMV limit (x converted to W's dtype once, outside the
// graph; the fused gated GEMV against one GEMM over gate|up stacked [2N, K]),
// and cublasGemmBatchedEx over the T·k selected experts for matmul_id.
//
//   fg_bench_kernels [--smoke] [--list] [--compile-only] [--json FILE] [--table FILE]
//                    [--reps N] [--no-cublas] [--pdl] [--gemv-tc-min N] [--gemv-rows N]
//                    [--gemv-warps N] [--gemv-unroll N] [--gemv-narrow-quant] [--gemv-wide-scaled] [--gemv-x-split] [--[no-]gemv-dp4a] [--gemv-dp4a-warp-load] [--gemv-dp4a-lanes] [--gemv-dp4a-q6k-lanes] [--gemv-narrow-iq4nl] [--gemv-narrow-q6k]
//                    [--pdl-prefetch-mb N] [--benchmark_filter=REGEX]
//
// Without a device it prints one skip line and exits 0.
//
//===----------------------------------------------------------------------===//
#include "runtime/cuda/CudaErrors.h"
#include "BenchCommon.h"
#include "KernelCases.h"

#include "codegen/cuda/Kernel.h"
#include "codegen/cuda/Nvrtc.h"

#include "llvm/Support/Regex.h"

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <atomic>
#include <cstdio>
#include <cstring>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <thread>

using namespace fg;
using namespace fg::bench;
using cuda::CublasGemmSpec;
using cuda::KernelSpec;
using cuda::Launch;
using cuda::Param;

namespace {

// --- settings ------------------------------------------------------------------------

struct Settings {
  bool smoke = false, list = false, compileOnly = false, cublas = true;
  /// Programmatic edges between the generated kernels' consecutive launches
  /// (--pdl), as a step's graph has them (CudaRunner::buildGraph): each
  /// launch's blocks become resident while the one before finishes, and its
  /// pre-wait prologue (weight loads) overlaps that tail. The cuBLAS
  /// figures keep full edges (their kernels do not wait programmatically).
  bool pdl = false;
  int reps = 10;  ///< timed replays (benchmark iterations)
  int warmup = 2; ///< untimed replays first
  std::string tablePath;
  RotationOptions rotation;
  cuda::EmitOptions emit; ///< the FG_DEBUG_* switches, then the --gemv-* overrides
};

Settings &settings() {
  static Settings s;
  return s;
}

// --- errors: runtime/cuda/CudaErrors.h ---------------------------------------------------

/// A device allocation, freed on destruction.
struct DevBuf {
  void *ptr = nullptr;
  uint64_t bytes = 0;
  DevBuf() = default;
  DevBuf(const DevBuf &) = delete;
  DevBuf &operator=(const DevBuf &) = delete;
  DevBuf(DevBuf &&o) noexcept : ptr(o.ptr), bytes(o.bytes) { o.ptr = nullptr; }
  DevBuf &operator=(DevBuf &&o) noexcept {
    std::swap(ptr, o.ptr);
    std::swap(bytes, o.bytes);
    return *this;
  }
  ~DevBuf() {
    if (ptr)
      cudaFree(ptr);
  }
  llvm::Error allocate(uint64_t n, const llvm::Twine &what) {
    bytes = std::max<uint64_t>(n, 256);
    return cudaCheck(cudaMalloc(&ptr, bytes),
                     "allocating " + what + " (" + llvm::Twine(bytes >> 20) + " MiB)");
  }
  char *at(uint64_t offset) const { return static_cast<char *>(ptr) + offset; }
};

// --- NVRTC: every source once, in parallel ------------------------------------------------

struct ModuleResult {
  std::optional<cuda::CompiledModule> module;
  std::string error;
};

std::map<std::string, ModuleResult> &modules() {
  static std::map<std::string, ModuleResult> m;
  return m;
}

/// Compiles every (name, source) not compiled yet, on all cores.
void compileAll(const std::vector<std::pair<std::string, std::string>> &sources,
                const std::string &arch) {
  std::vector<std::pair<std::string, std::string>> todo;
  for (const auto &s : sources)
    if (!modules().count(s.second) &&
        llvm::find_if(todo, [&](const auto &t) { return t.second == s.second; }) == todo.end())
      todo.push_back(s);
  std::vector<ModuleResult> results(todo.size());
  std::atomic<size_t> next{0};
  unsigned workers = std::max(1u, std::thread::hardware_concurrency());
  std::vector<std::thread> pool;
  for (unsigned w = 0; w < std::min<size_t>(workers, todo.size()); ++w)
    pool.emplace_back([&] {
      for (size_t i = next++; i < todo.size(); i = next++) {
        auto m = cuda::compileCuda(todo[i].second, todo[i].first, arch);
        if (m)
          results[i].module.emplace(std::move(*m));
        else
          results[i].error = llvm::toString(m.takeError());
      }
    });
  for (std::thread &t : pool)
    t.join();
  for (size_t i = 0; i < todo.size(); ++i)
    modules().emplace(todo[i].second, std::move(results[i]));
}

llvm::Expected<const cuda::CompiledModule *>
moduleFor(const std::string &name, const std::string &source, const std::string &arch) {
  if (!modules().count(source))
    compileAll({{name, source}}, arch);
  const ModuleResult &r = modules().at(source);
  if (!r.module)
    return makeError("kernel " + name + " failed to compile: " + firstLine(r.error));
  return &*r.module;
}

// --- the device: stream, events, cuBLAS, the fill kernels ------------------------------------

/// Fills buffers with uniform values in [-1, 1) (never zeros): splitmix64 of
/// (seed, index), rounded to the buffer's dtype.
constexpr const char *kFillSource = R"cuda(
typedef unsigned long long u64;
__device__ __forceinline__ float fg_rand(u64 seed, u64 i) {
  u64 z = seed + (i + 1) * 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  z ^= z >> 31;
  return (float)(z >> 40) * 0x1p-23f - 1.0f;
}
extern "C" __global__ void fg_kbench_fill_f32(float *out, u64 n, u64 seed) {
  for (u64 i = blockIdx.x * (u64)blockDim.x + threadIdx.x; i < n; i += (u64)gridDim.x * blockDim.x)
    out[i] = fg_rand(seed, i);
}
extern "C" __global__ void fg_kbench_fill_f16(unsigned short *out, u64 n, u64 seed) {
  for (u64 i = blockIdx.x * (u64)blockDim.x + threadIdx.x; i < n; i += (u64)gridDim.x * blockDim.x) {
    unsigned short h;
    asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(fg_rand(seed, i)));
    out[i] = h;
  }
}
extern "C" __global__ void fg_kbench_fill_bf16(unsigned short *out, u64 n, u64 seed) {
  for (u64 i = blockIdx.x * (u64)blockDim.x + threadIdx.x; i < n; i += (u64)gridDim.x * blockDim.x) {
    unsigned short h;
    asm("cvt.rn.bf16.f32 %0, %1;" : "=h"(h) : "f"(fg_rand(seed, i)));
    out[i] = h;
  }
}
)cuda";

struct Device {
  cudaDeviceProp prop{};
  std::string arch;
  cudaStream_t stream = nullptr;
  cudaEvent_t start = nullptr, stop = nullptr;
  cublasHandle_t cublas = nullptr;
  std::string cublasError; ///< why cuBLAS figures are missing, when they are
  DevBuf workspace;
  cudaLibrary_t fillLib = nullptr;
  cudaKernel_t fillF32 = nullptr, fillF16 = nullptr, fillBF16 = nullptr;

  Device() = default;
  Device(const Device &) = delete;
  Device &operator=(const Device &) = delete;
  ~Device() {
    if (fillLib)
      cudaLibraryUnload(fillLib);
    if (cublas)
      cublasDestroy(cublas);
    if (start)
      cudaEventDestroy(start);
    if (stop)
      cudaEventDestroy(stop);
    if (stream)
      cudaStreamDestroy(stream);
  }

  static llvm::Expected<std::unique_ptr<Device>> create() {
    auto d = std::make_unique<Device>();
    int dev = 0;
    if (auto e = cudaCheck(cudaGetDevice(&dev), "cudaGetDevice"))
      return e;
    if (auto e = cudaCheck(cudaGetDeviceProperties(&d->prop, dev), "cudaGetDeviceProperties"))
      return e;
    d->arch = "sm_" + std::to_string(d->prop.major) + std::to_string(d->prop.minor);
    if (auto e = cudaCheck(cudaStreamCreateWithFlags(&d->stream, cudaStreamNonBlocking), "stream"))
      return e;
    if (auto e = cudaCheck(cudaEventCreate(&d->start), "event"))
      return e;
    if (auto e = cudaCheck(cudaEventCreate(&d->stop), "event"))
      return e;
    // One handle, one workspace, set before any capture (without a user
    // workspace cuBLAS allocates inside the capture, which fails).
    if (settings().cublas) {
      llvm::Error e = cublasCheck(cublasCreate(&d->cublas), "cublasCreate");
      if (!e)
        e = cublasCheck(cublasSetStream(d->cublas, d->stream), "cublasSetStream");
      if (!e)
        e = d->workspace.allocate(32ull << 20, "the cuBLAS workspace");
      if (!e)
        e = cublasCheck(cublasSetWorkspace(d->cublas, d->workspace.ptr, d->workspace.bytes),
                        "cublasSetWorkspace");
      if (e) { // no cuBLAS figures; the kernels still run
        d->cublasError = firstLine(llvm::toString(std::move(e)));
        if (d->cublas)
          cublasDestroy(d->cublas);
        d->cublas = nullptr;
      }
    } else {
      d->cublasError = "--no-cublas";
    }
    auto mod = moduleFor("fg_kbench_fill", kFillSource, d->arch);
    if (!mod)
      return mod.takeError();
    const void *code = (*mod)->cubin.empty() ? static_cast<const void *>((*mod)->ptx.c_str())
                                             : static_cast<const void *>((*mod)->cubin.data());
    if (auto e = cudaCheck(
            cudaLibraryLoadData(&d->fillLib, code, nullptr, nullptr, 0, nullptr, nullptr, 0),
            "loading the fill kernels"))
      return e;
    for (auto [sym, k] : {std::pair{"fg_kbench_fill_f32", &d->fillF32},
                          std::pair{"fg_kbench_fill_f16", &d->fillF16},
                          std::pair{"fg_kbench_fill_bf16", &d->fillBF16}})
      if (auto e =
              cudaCheck(cudaLibraryGetKernel(k, d->fillLib, sym), "looking up " + llvm::Twine(sym)))
        return e;
    return d;
  }

  /// Random values in [-1, 1) of `dtype` over `elems` elements at `p`.
  llvm::Error fill(void *p, DType dtype, uint64_t elems, uint64_t seed) {
    cudaKernel_t k = dtype == DType::F16 ? fillF16 : dtype == DType::BF16 ? fillBF16 : fillF32;
    if (dtype != DType::F16 && dtype != DType::BF16 && dtype != DType::F32)
      return makeError("no fill kernel for " + std::string(dtypeName(dtype)));
    unsigned blocks = static_cast<unsigned>(std::clamp<uint64_t>(
        (elems + 255) / 256, 1, static_cast<uint64_t>(prop.multiProcessorCount) * 16));
    void *args[] = {&p, &elems, &seed};
    return cudaCheck(
        cudaLaunchKernel(reinterpret_cast<void *>(k), dim3(blocks), dim3(256), args, 0, stream),
        "launch of the fill kernel");
  }

  llvm::Error sync(const llvm::Twine &what) {
    if (auto e = cudaCheck(cudaStreamSynchronize(stream), what))
      return e;
    return cudaCheck(cudaGetLastError(), what);
  }
};

// --- one case's buffers: rotated operands, results, scratch ----------------------------------

uint64_t alignUp(uint64_t v, uint64_t a) { return (v + a - 1) / a * a; }
uint64_t bytesPerElem(DType t) { return static_cast<uint64_t>(storageBytes(t, 1)); }

struct NodeBuffers {
  struct Operand {
    DevBuf buf;
    uint64_t stride = 0; ///< bytes between copies
    int64_t copies = 1;
  };
  const KernelCase *c = nullptr;
  const Function *fn = nullptr;
  Rotation rot;
  std::vector<Operand> operands;
  std::vector<DevBuf> results;
  DevBuf scratch;
  uint64_t countersAt = 0; ///< the launches' program counters start here in `scratch`
  int idsOperand = -1;
  std::vector<std::vector<int32_t>> idsHost; ///< per slot (expert cases)

  void *operand(unsigned i, int64_t slot) const {
    const Operand &o = operands[i];
    int64_t copy = idsOperand == static_cast<int>(i) ? slot : rot.copyFor(*c, *fn, i, slot);
    return o.buf.at(static_cast<uint64_t>(copy) * o.stride);
  }
  void *param(const Param &p, int64_t slot) const {
    switch (p.kind) {
    case Param::Kind::Operand:
      return operand(p.index, slot);
    case Param::Kind::Result:
      return results[p.index].ptr;
    case Param::Kind::Scratch:
      return scratch.ptr;
    case Param::Kind::Counters: // after the scratch, zeroed once, left zero by the kernel
      return static_cast<char *>(scratch.ptr) + countersAt;
    }
    return nullptr;
  }
  static llvm::Expected<std::unique_ptr<NodeBuffers>> create(Device &dev, const KernelCase &c,
                                                             const Function &fn,
                                                             const Rotation &rot,
                                                             uint64_t scratchBytes) {
    auto b = std::make_unique<NodeBuffers>();
    b->c = &c;
    b->fn = &fn;
    b->rot = rot;
    const Node &node = fn.node(0);
    for (unsigned i = 0; i < node.operands.size(); ++i) {
      const TensorType &t = fn.type(node.operands[i]);
      const std::string &name = fn.value(node.operands[i]).name;
      Operand o;
      o.stride = alignUp(static_cast<uint64_t>(t.bytes()), 256);
      if (!isRotatedType(t.dtype)) {
        // Indices: ids (one set per slot) or positions (kvLen − T … kvLen − 1).
        std::vector<int32_t> host;
        if (c.isExpert()) {
          b->idsOperand = static_cast<int>(i);
          b->idsHost = expertIds(c, rot);
          o.copies = rot.slots;
          host.resize(static_cast<size_t>(o.stride / 4 * static_cast<uint64_t>(o.copies)));
          for (size_t s = 0; s < b->idsHost.size(); ++s)
            std::copy(b->idsHost[s].begin(), b->idsHost[s].end(),
                      host.begin() + static_cast<std::ptrdiff_t>(s * o.stride / 4));
        } else {
          host.resize(static_cast<size_t>(t.numElements()));
          for (size_t j = 0; j < host.size(); ++j)
            host[j] = static_cast<int32_t>(c.kvLen - c.T + static_cast<int64_t>(j));
        }
        if (t.dtype != DType::I32)
          return makeError("index operand " + name + " must be i32");
        if (auto e = o.buf.allocate(o.stride * static_cast<uint64_t>(o.copies), name))
          return e;
        if (auto e = cudaCheck(
                cudaMemcpy(o.buf.ptr, host.data(), host.size() * 4, cudaMemcpyHostToDevice),
                "uploading " + name))
          return e;
      } else {
        o.copies = rot.copiesOf(c, fn, i);
        if (auto e = o.buf.allocate(o.stride * static_cast<uint64_t>(o.copies), name))
          return e;
        // GGUF blocks are filled as f16 values: every 2-byte field of a block
        // (scales, mins, quants) is then a finite half, so the blocks are valid.
        DType fillType = isQuantized(t.dtype) ? DType::F16 : t.dtype;
        uint64_t elems = o.buf.bytes / static_cast<uint64_t>(bytesPerElem(fillType));
        if (auto e = dev.fill(o.buf.ptr, fillType, elems, 1000 + i))
          return e;
      }
      b->operands.push_back(std::move(o));
    }
    for (ValueId r : node.results) {
      DevBuf d;
      if (auto e = d.allocate(static_cast<uint64_t>(fn.type(r).bytes()), "the result"))
        return e;
      if (auto e = cudaCheck(cudaMemsetAsync(d.ptr, 0, d.bytes, dev.stream), "zeroing the result"))
        return e;
      b->results.push_back(std::move(d));
    }
    if (scratchBytes) {
      if (auto e = b->scratch.allocate(scratchBytes, "scratch"))
        return e;
      // Zeroed once: a kernel may keep counters there that reset themselves.
      if (auto e = cudaCheck(cudaMemsetAsync(b->scratch.ptr, 0, b->scratch.bytes, dev.stream),
                             "zeroing scratch"))
        return e;
    }
    if (auto e = dev.sync("filling the operands"))
      return e;
    return b;
  }
};

// --- a captured graph of back-to-back launches ----------------------------------------------

struct TimedGraph {
  cudaGraph_t graph = nullptr;
  cudaGraphExec_t exec = nullptr;
  int64_t launches = 0;
  TimedGraph() = default;
  TimedGraph(const TimedGraph &) = delete;
  TimedGraph &operator=(const TimedGraph &) = delete;
  ~TimedGraph() {
    if (exec)
      cudaGraphExecDestroy(exec);
    if (graph)
      cudaGraphDestroy(graph);
  }

  /// Makes every edge between two kernel nodes of `graph` programmatic (the
  /// dependent may start once every block of its predecessor has triggered,
  /// and waits in griddepcontrol.wait for it to finish).
  static llvm::Error makeProgrammatic(cudaGraph_t graph) {
    size_t n = 0;
    if (auto e = cudaCheck(cudaGraphGetEdges(graph, nullptr, nullptr, nullptr, &n),
                           "cudaGraphGetEdges"))
      return e;
    std::vector<cudaGraphNode_t> from(n), to(n);
    std::vector<cudaGraphEdgeData> data(n);
    if (auto e = cudaCheck(cudaGraphGetEdges(graph, from.data(), to.data(), data.data(), &n),
                           "cudaGraphGetEdges"))
      return e;
    for (size_t i = 0; i < n; ++i) {
      cudaGraphNodeType a{}, b{};
      if (auto e = cudaCheck(cudaGraphNodeGetType(from[i], &a), "cudaGraphNodeGetType"))
        return e;
      if (auto e = cudaCheck(cudaGraphNodeGetType(to[i], &b), "cudaGraphNodeGetType"))
        return e;
      if (a != cudaGraphNodeTypeKernel || b != cudaGraphNodeTypeKernel)
        continue;
      cudaGraphEdgeData pe{};
      pe.from_port = cudaGraphKernelNodePortProgrammatic;
      pe.type = cudaGraphDependencyTypeProgrammatic;
      if (auto e = cudaCheck(cudaGraphRemoveDependencies(graph, &from[i], &to[i], &data[i], 1),
                             "cudaGraphRemoveDependencies"))
        return e;
      if (auto e = cudaCheck(cudaGraphAddDependencies(graph, &from[i], &to[i], &pe, 1),
                             "cudaGraphAddDependencies (programmatic)"))
        return e;
    }
    return llvm::Error::success();
  }

  /// Captures `launches` calls of `launch(i)` on the device stream (serialised;
  /// with `programmatic`, kernel-to-kernel edges made programmatic).
  static llvm::Expected<std::unique_ptr<TimedGraph>>
  capture(Device &dev, int64_t launches, const std::function<llvm::Error(int64_t)> &launch,
          bool programmatic = false) {
    auto g = std::make_unique<TimedGraph>();
    g->launches = launches;
    if (auto e = cudaCheck(cudaStreamBeginCapture(dev.stream, cudaStreamCaptureModeThreadLocal),
                           "cudaStreamBeginCapture"))
      return e;
    llvm::Error err = llvm::Error::success();
    for (int64_t i = 0; i < launches && !err; ++i)
      err = launch(i);
    cudaError_t end = cudaStreamEndCapture(dev.stream, &g->graph);
    if (err)
      return err;
    if (auto e = cudaCheck(end, "cudaStreamEndCapture"))
      return e;
    if (programmatic)
      if (auto e = makeProgrammatic(g->graph))
        return e;
    if (auto e = cudaCheck(cudaGraphInstantiate(&g->exec, g->graph, 0), "cudaGraphInstantiate"))
      return e;
    return g;
  }

  /// One replay; milliseconds from CUDA events around it.
  llvm::Expected<double> replay(Device &dev) {
    if (auto e = cudaCheck(cudaEventRecord(dev.start, dev.stream), "cudaEventRecord"))
      return e;
    if (auto e = cudaCheck(cudaGraphLaunch(exec, dev.stream), "cudaGraphLaunch"))
      return e;
    if (auto e = cudaCheck(cudaEventRecord(dev.stop, dev.stream), "cudaEventRecord"))
      return e;
    if (auto e = cudaCheck(cudaEventSynchronize(dev.stop), "graph replay"))
      return e;
    float ms = 0;
    if (auto e = cudaCheck(cudaEventElapsedTime(&ms, dev.start, dev.stop), "cudaEventElapsedTime"))
      return e;
    return static_cast<double>(ms);
  }

  /// `n` replays; the mean per launch in microseconds.
  llvm::Expected<double> meanLaunchUs(Device &dev, int n) {
    double total = 0;
    for (int i = 0; i < n; ++i) {
      auto ms = replay(dev);
      if (!ms)
        return ms.takeError();
      total += *ms;
    }
    return total * 1e3 / (static_cast<double>(n) * static_cast<double>(launches));
  }
};

// --- one node's launch list over its buffers -------------------------------------------------

/// The loaded kernels of a launch list, launched against NodeBuffers.
struct LaunchList {
  std::vector<Launch> launches;
  std::vector<cudaLibrary_t> libs;
  std::vector<cudaKernel_t> kernels; ///< per launch, null for cuBLAS calls
  LaunchList() = default;
  LaunchList(const LaunchList &) = delete;
  LaunchList &operator=(const LaunchList &) = delete;
  ~LaunchList() {
    for (cudaLibrary_t l : libs)
      cudaLibraryUnload(l);
  }

  static llvm::Expected<std::unique_ptr<LaunchList>> load(Device &dev,
                                                          const std::vector<Launch> &ls) {
    auto out = std::make_unique<LaunchList>();
    out->launches = ls;
    for (const Launch &l : ls) {
      const auto *k = std::get_if<KernelSpec>(&l);
      if (!k) {
        out->kernels.push_back(nullptr);
        continue;
      }
      auto mod = moduleFor(k->name, k->source, dev.arch);
      if (!mod)
        return mod.takeError();
      const void *code = (*mod)->cubin.empty() ? static_cast<const void *>((*mod)->ptx.c_str())
                                               : static_cast<const void *>((*mod)->cubin.data());
      cudaLibrary_t lib = nullptr;
      if (auto e =
              cudaCheck(cudaLibraryLoadData(&lib, code, nullptr, nullptr, 0, nullptr, nullptr, 0),
                        "loading " + k->name))
        return e;
      out->libs.push_back(lib);
      cudaKernel_t kernel = nullptr;
      if (auto e = cudaCheck(cudaLibraryGetKernel(&kernel, lib, k->name.c_str()),
                             "looking up " + k->name))
        return e;
      // Static + dynamic above 48 KiB must be asked for: ask whenever there is
      // dynamic shared memory (the static part is the kernel's own).
      if (k->sharedBytes > 0)
        if (auto e = cudaCheck(cudaFuncSetAttribute(reinterpret_cast<const void *>(kernel),
                                                    cudaFuncAttributeMaxDynamicSharedMemorySize,
                                                    static_cast<int>(k->sharedBytes)),
                               "raising the shared memory of " + k->name))
          return e;
      out->kernels.push_back(kernel);
    }
    return out;
  }

  /// Scratch, then (256-byte aligned) the largest counters of a launch: the
  /// launches run one after another, so they may share them.
  static uint64_t scratchBytes(const std::vector<Launch> &ls) {
    uint64_t s = 0, c = 0;
    for (const Launch &l : ls) {
      s = std::max(s, std::visit([](const auto &x) { return x.scratchBytes; }, l));
      if (const auto *k = std::get_if<KernelSpec>(&l))
        c = std::max(c, k->counterBytes);
    }
    return c ? alignUp(s, 256) + c : s;
  }
  static uint64_t countersAt(const std::vector<Launch> &ls) {
    uint64_t s = 0;
    for (const Launch &l : ls)
      s = std::max(s, std::visit([](const auto &x) { return x.scratchBytes; }, l));
    return alignUp(s, 256);
  }

  llvm::Error launch(Device &dev, const NodeBuffers &b, size_t i, int64_t slot) const {
    const Launch &l = launches[i];
    if (const auto *k = std::get_if<KernelSpec>(&l)) {
      std::vector<void *> ptrs(k->params.size()), argv(k->params.size());
      for (size_t a = 0; a < ptrs.size(); ++a) {
        ptrs[a] = b.param(k->params[a], slot);
        argv[a] = &ptrs[a];
      }
      return cudaCheck(cudaLaunchKernel(reinterpret_cast<void *>(kernels[i]),
                                        dim3(k->grid[0], k->grid[1], k->grid[2]),
                                        dim3(k->block[0], k->block[1], k->block[2]), argv.data(),
                                        k->sharedBytes, dev.stream),
                       "launch of " + k->name);
    }
    const auto &g = std::get<CublasGemmSpec>(l);
    if (!dev.cublas)
      return makeError("no cuBLAS handle: " + dev.cublasError);
    // The cuBLASLt form (fused.matmul_add over prefill rows) is run by the
    // CudaRunner (runtime/cuda/CublasLt.h), not here: no kernel case emits it.
    if (g.lt)
      return makeError(g.name + ": the kernel benchmark does not run cuBLASLt GEMMs");
    auto at = [&](const cuda::GemmOperand &o) {
      return static_cast<char *>(b.param(o.param, slot)) + o.byteOffset;
    };
    return cublasCheck(cublasGemmEx(dev.cublas, g.transA ? CUBLAS_OP_T : CUBLAS_OP_N,
                                    g.transB ? CUBLAS_OP_T : CUBLAS_OP_N, static_cast<int>(g.m),
                                    static_cast<int>(g.n), static_cast<int>(g.k), &g.alpha, at(g.a),
                                    cudaTypeOf(g.aType), static_cast<int>(g.lda), at(g.b),
                                    cudaTypeOf(g.bType), static_cast<int>(g.ldb), &g.beta, at(g.c),
                                    cudaTypeOf(g.cType), static_cast<int>(g.ldc),
                                    CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
                       g.name);
  }

  /// Leading kernels before the first cuBLAS call (the conversion of x), which
  /// the cuBLAS figure runs once outside the graph.
  size_t prologue() const {
    auto gemm = llvm::find_if(
        launches, [](const Launch &l) { return std::holds_alternative<CublasGemmSpec>(l); });
    return gemm == launches.end() ? 0 : static_cast<size_t>(gemm - launches.begin());
  }

  /// Runs launches [0, from) once on slot 0, then captures the rest for every
  /// launch of the rotation.
  llvm::Expected<std::unique_ptr<TimedGraph>> captureGraph(Device &dev, const NodeBuffers &b,
                                                           size_t from,
                                                           bool programmatic = false) const {
    for (size_t i = 0; i < from; ++i)
      if (auto e = launch(dev, b, i, 0))
        return e;
    if (auto e = dev.sync("the prologue"))
      return e;
    return TimedGraph::capture(dev, b.rot.launches, [&](int64_t n) -> llvm::Error {
      int64_t slot = n % b.rot.slots;
      for (size_t i = from; i < launches.size(); ++i)
        if (auto e = launch(dev, b, i, slot))
          return e;
      return llvm::Error::success();
    }, programmatic);
  }
};

// --- the cases -------------------------------------------------------------------------------

bool selectedByFilter(const std::string &filter, const std::string &name);

/// A case, emitted: the node's launches, and the cuBLAS comparison's.
struct Prepared {
  KernelCase c;
  Function fn{"kernel"}, cublasFn{"cublas"};
  std::vector<Launch> launches, cublasLaunches;
  Rotation rot, cublasRot;
  double bytes = 0;
  std::string error; ///< the case cannot run (build or emit failed)
};

std::unique_ptr<Prepared> prepare(const KernelCase &c, const cuda::EmitOptions &eo) {
  auto p = std::make_unique<Prepared>();
  p->c = c;
  if (auto e = buildCaseFunction(c, p->fn)) {
    p->error = firstLine(llvm::toString(std::move(e)));
    return p;
  }
  p->bytes = caseBytes(p->fn);
  p->rot = planRotation(c, p->fn, settings().rotation);
  const Node &node = p->fn.node(0);
  auto ls = cuda::emitKernel(p->fn, node, cuda::contiguousLayouts(p->fn, node), eo);
  if (!ls) {
    p->error = firstLine(llvm::toString(ls.takeError()));
    return p;
  }
  p->launches = std::move(*ls);
  if (c.hasCublas() && !c.isExpert()) {
    if (auto e = buildCublasFunction(c, p->cublasFn)) {
      p->error = firstLine(llvm::toString(std::move(e)));
      return p;
    }
    p->cublasRot = planRotation(c, p->cublasFn, settings().rotation);
    cuda::EmitOptions co = eo;
    co.maxGemvTokens = 0; // always the cuBLAS path
    const Node &cn = p->cublasFn.node(0);
    auto cl = cuda::emitKernel(p->cublasFn, cn, cuda::contiguousLayouts(p->cublasFn, cn), co);
    if (!cl) {
      p->error = "cuBLAS node: " + firstLine(llvm::toString(cl.takeError()));
      return p;
    }
    p->cublasLaunches = std::move(*cl);
  }
  return p;
}

/// Emits `cases` into `out`; returns the distinct kernel sources of those the
/// benchmark filter selects (the others compile on demand, if they run).
std::vector<std::pair<std::string, std::string>>
prepareAll(const std::vector<KernelCase> &cases, const cuda::EmitOptions &eo,
           const std::string &filter, std::vector<std::unique_ptr<Prepared>> &out) {
  std::vector<std::pair<std::string, std::string>> sources;
  std::set<std::string> seen;
  for (const KernelCase &c : cases) {
    out.push_back(prepare(c, eo));
    if (!selectedByFilter(filter, c.name()))
      continue;
    for (const auto *ls : {&out.back()->launches, &out.back()->cublasLaunches})
      for (const Launch &l : *ls)
        if (const auto *k = std::get_if<KernelSpec>(&l); k && seen.insert(k->source).second)
          sources.emplace_back(k->name, k->source);
  }
  return sources;
}

/// One line of the final table.
struct Row {
  const Prepared *p = nullptr;
  double us = 0, gbs = 0, bwPct = 0, cublasUs = 0;
  std::string note;
};

std::vector<Row> &rows() {
  static std::vector<Row> r;
  return r;
}

Device *gDevice = nullptr;

/// cuBLAS for the dense families: the emitted cuBLAS node on its own buffers.
llvm::Expected<double> timeDenseCublas(Device &dev, const Prepared &p, int reps) {
  auto list = LaunchList::load(dev, p.cublasLaunches);
  if (!list)
    return list.takeError();
  auto bufs = NodeBuffers::create(dev, p.c, p.cublasFn, p.cublasRot,
                                  LaunchList::scratchBytes(p.cublasLaunches));
  if (!bufs)
    return bufs.takeError();
  auto g = (*list)->captureGraph(dev, **bufs, (*list)->prologue());
  if (!g)
    return g.takeError();
  if (auto w = (*g)->meanLaunchUs(dev, settings().warmup); !w)
    return w.takeError();
  return (*g)->meanLaunchUs(dev, reps);
}

/// cuBLAS for the expert families: cublasGemmBatchedEx over the T·k selected
/// experts (gate and up as separate batch entries for the fused op), on the
/// same rotated weights and ids as the kernel; x converted to W's dtype.
llvm::Expected<double> timeExpertCublas(Device &dev, const Prepared &p, const NodeBuffers &b,
                                        int reps) {
  const KernelCase &c = p.c;
  if (!dev.cublas)
    return makeError("no cuBLAS handle: " + dev.cublasError);
  bool gated = c.family == KernelFamily::GatedMatmulId;
  bool down = c.shape == "down";
  int64_t pairs = c.T * c.topK, batch = pairs * (gated ? 2 : 1);
  int64_t xRows = down ? pairs : c.T;
  uint64_t eb = static_cast<uint64_t>(bytesPerElem(c.dtype));
  DevBuf xh, y, ptrs;
  if (auto e = xh.allocate(static_cast<uint64_t>(xRows * c.k) * eb, "x for cuBLAS"))
    return e;
  if (auto e = dev.fill(xh.ptr, c.dtype, static_cast<uint64_t>(xRows * c.k), 7))
    return e;
  if (auto e = y.allocate(static_cast<uint64_t>(batch * c.n) * 4, "y for cuBLAS"))
    return e;
  // Per slot: A[batch], B[batch], C[batch].
  std::vector<const void *> host(static_cast<size_t>(b.rot.slots * batch * 3));
  uint64_t expertBytes = static_cast<uint64_t>(c.n * c.k) * eb;
  for (int64_t s = 0; s < b.rot.slots; ++s) {
    const void **A = host.data() + s * batch * 3, **B = A + batch, **C = B + batch;
    for (int64_t j = 0; j < batch; ++j) {
      int64_t pr = j % pairs;
      unsigned wOperand = gated && j >= pairs ? 2 : 1;
      uint64_t e =
          static_cast<uint64_t>(b.idsHost[static_cast<size_t>(s)][static_cast<size_t>(pr)]);
      A[j] = static_cast<char *>(b.operand(wOperand, s)) + e * expertBytes;
      B[j] = xh.at(static_cast<uint64_t>((down ? pr : pr / c.topK) * c.k) * eb);
      C[j] = y.at(static_cast<uint64_t>(j * c.n) * 4);
    }
  }
  if (auto e = ptrs.allocate(host.size() * sizeof(void *), "cuBLAS pointer arrays"))
    return e;
  if (auto e = cudaCheck(
          cudaMemcpy(ptrs.ptr, host.data(), host.size() * sizeof(void *), cudaMemcpyHostToDevice),
          "uploading cuBLAS pointer arrays"))
    return e;
  if (auto e = dev.sync("preparing cuBLAS"))
    return e;
  const float alpha = 1, beta = 0;
  auto g = TimedGraph::capture(dev, b.rot.launches, [&](int64_t n) -> llvm::Error {
    int64_t s = n % b.rot.slots;
    auto **A = reinterpret_cast<const void **>(
        ptrs.at(static_cast<uint64_t>(s * batch * 3) * sizeof(void *)));
    return cublasCheck(cublasGemmBatchedEx(dev.cublas, CUBLAS_OP_T, CUBLAS_OP_N,
                                           static_cast<int>(c.n), 1, static_cast<int>(c.k), &alpha,
                                           A, cudaTypeOf(c.dtype), static_cast<int>(c.k), A + batch,
                                           cudaTypeOf(c.dtype), static_cast<int>(c.k), &beta,
                                           const_cast<void **>(A + 2 * batch), CUDA_R_32F,
                                           static_cast<int>(c.n), static_cast<int>(batch),
                                           CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
                       "cublasGemmBatchedEx");
  });
  if (!g)
    return g.takeError();
  if (auto w = (*g)->meanLaunchUs(dev, settings().warmup); !w)
    return w.takeError();
  return (*g)->meanLaunchUs(dev, reps);
}

void kernelCase(benchmark::State &state, const Prepared *p, size_t rowIndex) {
  Row &row = rows()[rowIndex];
  auto skip = [&](const std::string &why) {
    row.note = why;
    state.SkipWithError(why.c_str());
  };
  if (!gDevice)
    return skip("no CUDA device");
  if (!p->error.empty())
    return skip("emit: " + p->error);
  Device &dev = *gDevice;
  const Rotation &rot = p->rot;

  double us = 0;
  double cublasUs = 0;
  std::string cublasNote;
  {
    auto list = LaunchList::load(dev, p->launches);
    if (!list)
      return skip(firstLine(llvm::toString(list.takeError())));
    auto bufs = NodeBuffers::create(dev, p->c, p->fn, rot, LaunchList::scratchBytes(p->launches));
    if (!bufs)
      return skip(firstLine(llvm::toString(bufs.takeError())));
    (*bufs)->countersAt = LaunchList::countersAt(p->launches);
    // (Programmatic edges only between generated kernels: a cuBLAS GEMM in
    // the list does not wait programmatically, as CudaRunner::buildGraph
    // keeps full edges in an entry with one.)
    const bool pdl = settings().pdl &&
                     std::none_of(p->launches.begin(), p->launches.end(), [](const Launch &l) {
                       return std::holds_alternative<CublasGemmSpec>(l);
                     });
    auto g = (*list)->captureGraph(dev, **bufs, 0, pdl);
    if (!g)
      return skip(firstLine(llvm::toString(g.takeError())));
    if (auto w = (*g)->meanLaunchUs(dev, settings().warmup); !w)
      return skip("warm-up: " + firstLine(llvm::toString(w.takeError())));
    double totalMs = 0;
    int64_t iters = 0;
    for (auto _ : state) {
      auto ms = (*g)->replay(dev);
      if (!ms) {
        skip(firstLine(llvm::toString(ms.takeError())));
        break;
      }
      totalMs += *ms;
      ++iters;
      state.SetIterationTime(*ms * 1e-3 / static_cast<double>(rot.launches));
    }
    if (!row.note.empty())
      return;
    us = iters ? totalMs * 1e3 / (static_cast<double>(iters) * static_cast<double>(rot.launches))
               : 0;
    // Expert cuBLAS shares the kernel's rotated weights and ids.
    if (p->c.hasCublas() && p->c.isExpert()) {
      auto cu = timeExpertCublas(dev, *p, **bufs, std::max<int>(1, static_cast<int>(iters)));
      if (cu)
        cublasUs = *cu;
      else
        cublasNote = "cuBLAS: " + firstLine(llvm::toString(cu.takeError()));
    }
  }
  if (p->c.hasCublas() && !p->c.isExpert()) {
    auto cu = timeDenseCublas(dev, *p, std::max<int>(1, settings().reps));
    if (cu)
      cublasUs = *cu;
    else
      cublasNote = "cuBLAS: " + firstLine(llvm::toString(cu.takeError()));
  }
  if (!cublasNote.empty()) // a failed cuBLAS call may leave the stream capturing or in error
    llvm::consumeError(dev.sync("after cuBLAS"));

  double readGBs = bandwidth() ? bandwidth()->readGBs : 0;
  row.us = us;
  row.gbs = us > 0 ? p->bytes / (us * 1e-6) / 1e9 : 0;
  row.bwPct = readGBs > 0 ? 100 * row.gbs / readGBs : 0;
  row.cublasUs = cublasUs;
  row.note = cublasNote;
  if (rot.footprintBytes() < settings().rotation.minBytes)
    row.note += (row.note.empty() ? "" : "; ") + std::string("rotation capped at ") +
                std::to_string(rot.slots) + " slots (" +
                std::to_string(static_cast<int64_t>(rot.footprintBytes() / (1 << 20))) + " MiB)";

  state.counters["us"] = us;
  state.counters["bytes"] = p->bytes;
  state.counters["GB/s"] = row.gbs;
  state.counters["bw_pct"] = row.bwPct;
  state.counters["read_GBs"] = readGBs;
  state.counters["launches"] = static_cast<double>(rot.launches);
  state.counters["slots"] = static_cast<double>(rot.slots);
  state.counters["rotation_MiB"] = rot.footprintBytes() / (1 << 20);
  state.counters["kernels_per_op"] = static_cast<double>(p->launches.size());
  if (cublasUs > 0) {
    state.counters["cublas_us"] = cublasUs;
    state.counters["fg_over_cublas"] = us / cublasUs;
  }
  if (!row.note.empty())
    state.SetLabel(row.note);
}

// --- the table ---------------------------------------------------------------------------

std::string fmt(const char *f, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, f, v);
  return buf;
}

std::string table() {
  std::string out;
  const cuda::Bandwidth *bw = bandwidth();
  if (gDevice)
    out += "\nKernel benchmark on " + std::string(gDevice->prop.name) + " (" + gDevice->arch +
           ", L2 " + std::to_string(gDevice->prop.l2CacheSize >> 20) + " MiB)";
  if (bw)
    out += "; read " + fmt("%.0f", bw->readGBs) + " GB/s, d2d copy " + fmt("%.0f", bw->copyGBs) +
           " GB/s";
  out += "\nMean µs per launch over CUDA graphs of back-to-back launches" +
         std::string(settings().pdl ? " with programmatic edges between the generated kernels "
                                      "(--pdl; cuBLAS with full edges)"
                                    : "") +
         ", weights rotated through >= " +
         std::to_string(static_cast<int64_t>(settings().rotation.minBytes / (1 << 20))) +
         " MiB; fg/cuBLAS < 1: the generated kernel is faster.\n\n";
  out += "| family | workload | shape | dims | dtype | T | µs | MB | GB/s | % BW | cuBLAS µs | "
         "fg/cuBLAS | note |\n";
  out += "|---|---|---|---|---|---|---|---|---|---|---|---|---|\n";
  for (const Row &r : rows()) {
    const KernelCase &c = r.p->c;
    bool ran = r.us > 0;
    out += "| " + std::string(familyName(c.family)) + " | " + c.workload + " | " + c.shape + " | " +
           c.dims() + " | " + std::string(dtypeName(c.dtype)) + " | " + std::to_string(c.T) +
           " | " + (ran ? fmt("%.2f", r.us) : "—") + " | " + fmt("%.2f", r.p->bytes / 1e6) + " | " +
           (ran ? fmt("%.0f", r.gbs) : "—") + " | " +
           (ran && r.bwPct > 0 ? fmt("%.1f%%", r.bwPct) : "—") + " | " +
           (r.cublasUs > 0 ? fmt("%.2f", r.cublasUs) : "—") + " | " +
           (ran && r.cublasUs > 0 ? fmt("%.2f", r.us / r.cublasUs) : "—") + " | " + r.note + " |\n";
  }
  return out;
}

void listCases(const std::vector<KernelCase> &cases) {
  std::printf("%-58s %-26s %10s %7s %8s %10s\n", "case", "dims", "MB", "slots", "launches",
              "rot MiB");
  for (const KernelCase &c : cases) {
    Function fn("kernel");
    if (auto e = buildCaseFunction(c, fn)) {
      std::printf("%-58s error: %s\n", c.name().c_str(),
                  firstLine(llvm::toString(std::move(e))).c_str());
      continue;
    }
    Rotation r = planRotation(c, fn, settings().rotation);
    std::printf("%-58s %-26s %10.3f %7lld %8lld %10.1f\n", c.name().c_str(), c.dims().c_str(),
                caseBytes(fn) / 1e6, static_cast<long long>(r.slots),
                static_cast<long long>(r.launches), r.footprintBytes() / (1 << 20));
  }
}

/// The --benchmark_filter regex, to compile only the selected cases up front.
bool selectedByFilter(const std::string &filter, const std::string &name) {
  if (filter.empty() || filter == "all" || filter == ".")
    return true;
  bool negate = filter[0] == '-';
  llvm::Regex re(negate ? filter.substr(1) : filter);
  std::string error;
  if (!re.isValid(error))
    return true; // compiled on demand then
  return re.match(name) != negate;
}

/// Prints the flags; returns `code` (0 for --help, 2 for a bad flag).
int usage(const char *argv0, int code = 2) {
  std::fprintf(
      code ? stderr : stdout,
      "usage: %s [--smoke] [--list] [--compile-only] [--json FILE] [--table FILE] [--reps N] "
      "[--no-cublas] [Google Benchmark flags]\n"
      "  --smoke       T 1 and 8, f16, one shape per family and workload (~20 s)\n"
      "  --list        print the cases (shapes, bytes, rotation) and exit; no GPU needed\n"
      "  --compile-only  emit and compile every selected case's kernels for sm_90; no "
      "GPU needed\n"
      "  --json FILE   Google Benchmark JSON with the counters (= --benchmark_out=FILE "
      "--benchmark_out_format=json)\n"
      "  --table FILE  also write the markdown table to FILE\n"
      "  --reps N      timed graph replays per case (default 10; smoke 3)\n"
      "  --no-cublas   skip the cuBLAS figures\n"
      "  --pdl         programmatic edges between the generated kernels' launches, as a\n"
      "                step's graph has them (each prologue overlaps the previous tail)\n"
      "  --gemv-tc-min N, --gemv-rows N, --gemv-warps N, --gemv-unroll N\n"
      "                GEMV variant overrides (EmitOptions::gemv*) for tuning\n"
      "  --gemv-narrow-quant  q4_K through the previous (narrow) decoder\n"
      "  --gemv-wide-scaled   q4_K through DecQ4_KS (scales after the mma; opt-in)\n"
      "  --gemv-x-split       quantised GEMVs take x as hi + lo f16 (the form before x as one f16)\n"
      "  --gemv-dp4a          every q4_K, q8_0, q4_0, q6_K GEMV at T = 1 on DP4A over x quantised\n"
      "                       to int8 (gemv_dp4a.cuh; by default the rule: experts and dense above 4 MiB)\n"
      "  --no-gemv-dp4a       none on DP4A: the tensor-core GEMV everywhere\n"
      "  --gemv-dp4a-share-x  a DP4A block quantises x once, shared by its row groups (default)\n"
      "  --no-gemv-dp4a-share-x  each row group of a DP4A block quantises all of x\n"
      "  --gemv-dp4a-unroll=N, --gemv-dp4a-warps=N   its rows a warp at once, warps per SM\n"
      "  --gemv-dp4a-combine=N  its K-warps' sums combined every N tiles (default 4)\n"
      "  --gemv-dp4a-l2-ahead=N  its blocks ask L2 for the N tiles after the next (default 0)\n"
      "  --gemv-dp4a-stages=N  its q4_K weights through a ring of N tiles in shared memory (default 0)\n"
      "  --gemv-dp4a-ahead=N  its tiles held in registers ahead of the arithmetic, 1..3 (default 2 for q4_K, 1 else)\n"
      "  --gemv-dp4a-warp-load  its q4_K, q8_0, q4_0 rows loaded by whole warps (Dp4aWarpOf), experts' too\n"
      "                       (default: dense launches by whole warps, expert-indexed ones lane by lane)\n"
      "  --gemv-dp4a-lanes    its q4_K, q8_0, q4_0 rows loaded lane by lane everywhere\n"
      "  --gemv-dp4a-q6k-lanes  its q6_K rows loaded lane by lane (DecQ6_KW; default: whole warps)\n"
      "  --gemv-narrow-iq4nl  iq4_nl through the narrow loop (the wide one is the default)\n"
      "  --gemv-narrow-q6k    q6_K through the narrow loop (the wide one is the default)\n"
      "  --gemv-wide-occupancy N  q4_K: launch bounds for N warps per SM (1: none)\n"
      "  --gemv-wide-prefetch N   q4_K: 1 no prefetch, 2 prefetch of the next chunk\n"
      "  --attn-stages N      decode attention: cp.async stages per warp (0: register loads)\n"
      "  --attn-steps N       decode attention: 8-key steps per tile (1-4)\n"
      "  --attn-blocks-per-sm N  decode attention: blocks per SM the split grid is sized for\n"
      "  --attn-min-tiles N   decode attention: tiles each warp takes at least in a split\n"
      "  --attn-reg-max-live N  decode attention: live rows up to which the staged form loads\n"
      "                       into registers (0: always staged)\n"
      "  --attn-cluster N     decode attention: splits merged in a cluster of N blocks (0: off)\n"
      "  --attn-cluster-warps N  decode attention: warps a block of the cluster form (4 or 8)\n"
      "  --attn-cluster-steps N  decode attention: 8-key steps a tile in the cluster form (1-4)\n"
      "  --attn-early 0|1     decode attention: first tile loaded before the PDL wait (default 1)\n"
      "  --attn-q-first 0|1   decode attention: q loaded before the position (default 1)\n"
      "  --attn-cluster-async 0|1  decode attention: partials by st.async into an mbarrier (default 1)\n"
      "  --pdl-prefetch-mb N  L2 bytes a GEMV or attention launch prefetches before its\n"
      "                       programmatic-launch wait (EmitOptions::pdlPrefetchBytes)\n",
      argv0);
  return code;
}

} // namespace

int main(int argc, char **argv) {
  Settings &s = settings();
  // The FG_DEBUG_* switches first (as compile() applies them), then the
  // flags below over them.
  cuda::applyDebugEnvironment(s.emit);
  std::vector<std::string> keep = {argv[0]};
  std::string filter;
  bool repsGiven = false;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto value = [&](const char *flag) -> std::optional<std::string> {
      std::string f = flag;
      if (a.rfind(f + "=", 0) == 0)
        return a.substr(f.size() + 1);
      if (a == f && i + 1 < argc)
        return std::string(argv[++i]);
      return std::nullopt;
    };
    if (a == "--smoke") {
      s.smoke = true;
    } else if (a == "--list") {
      s.list = true;
    } else if (a == "--compile-only") {
      s.compileOnly = true;
    } else if (a == "--no-cublas") {
      s.cublas = false;
    } else if (a == "--pdl") {
      s.pdl = true;
    } else if (a == "--help" || a == "-h") {
      return usage(argv[0], 0);
    } else if (a.rfind("--json", 0) == 0) {
      auto v = value("--json");
      if (!v)
        return usage(argv[0]);
      keep.push_back("--benchmark_out=" + *v);
      keep.push_back("--benchmark_out_format=json");
    } else if (a.rfind("--table", 0) == 0) {
      auto v = value("--table");
      if (!v)
        return usage(argv[0]);
      s.tablePath = *v;
    } else if (a.rfind("--reps", 0) == 0) {
      auto v = value("--reps");
      if (!v || std::atoi(v->c_str()) < 1)
        return usage(argv[0]);
      s.reps = std::atoi(v->c_str());
      repsGiven = true;
    } else if (a == "--gemv-narrow-quant") {
      s.emit.gemvNarrowQuant = true;
    } else if (a == "--gemv-wide-scaled") {
      s.emit.gemvWideScaled = true;
    } else if (a == "--gemv-narrow-iq4nl") {
      s.emit.gemvWideIq4nl = false;
    } else if (a == "--gemv-narrow-q6k") {
      s.emit.gemvWideQ6k = false;
    } else if (a == "--gemv-x-split") {
      s.emit.gemvQuantXHalf = false;
    } else if (a == "--gemv-dp4a") {
      s.emit.gemvDp4a = 2; // every eligible launch, whatever its size
    } else if (a == "--gemv-dp4a-share-x") {
      s.emit.gemvDp4aShareX = true;
    } else if (a == "--no-gemv-dp4a-share-x") {
      s.emit.gemvDp4aShareX = false; // x quantised by every row group (the default shares it)
    } else if (a == "--gemv-dp4a-warp-load") {
      s.emit.gemvDp4aWarpLoad = true; // q4_K, q8_0, q4_0 dense rows read by whole warps (the default)
      s.emit.gemvDp4aWarpLoadExperts = 1; // and experts' (default: q8_0's only)
    } else if (a == "--gemv-dp4a-lanes") {
      s.emit.gemvDp4aWarpLoad = false; // q4_K, q8_0, q4_0: each lane its own bytes everywhere
      s.emit.gemvDp4aWarpLoadExperts = 0;
    } else if (a == "--gemv-dp4a-q6k-lanes") {
      s.emit.gemvDp4aQ6kWarp = false; // q6_K: each lane its own bytes (the default: whole warps)
    } else if (a == "--no-gemv-dp4a") {
      s.emit.gemvDp4a = 0; // the tensor-core GEMV everywhere (the default: the rule, 1)
    } else if (a.rfind("--gemv-", 0) == 0) {
      // GEMV variant overrides (EmitOptions::gemv*), for tuning the rule.
      std::string f = a.substr(0, a.find('='));
      auto v = value(f.c_str());
      int n = v ? std::atoi(v->c_str()) : -1;
      if (n < 1)
        return usage(argv[0]);
      if (f == "--gemv-tc-min")
        s.emit.gemvTensorCoreMinRows = n;
      else if (f == "--gemv-rows")
        s.emit.gemvRows = n;
      else if (f == "--gemv-warps")
        s.emit.gemvWarps = n;
      else if (f == "--gemv-unroll")
        s.emit.gemvUnroll = n;
      else if (f == "--gemv-wide-occupancy")
        s.emit.gemvWideWarpsPerSm = n == 1 ? -1 : n;
      else if (f == "--gemv-wide-prefetch")
        s.emit.gemvWidePrefetch = n - 1;
      else if (f == "--gemv-dp4a-unroll")
        s.emit.gemvDp4aUnroll = n;
      else if (f == "--gemv-dp4a-warps")
        s.emit.gemvDp4aWarpTarget = n;
      else if (f == "--gemv-dp4a-combine")
        s.emit.gemvDp4aCombine = n;
      else if (f == "--gemv-dp4a-l2-ahead")
        s.emit.gemvDp4aL2Ahead = n;
      else if (f == "--gemv-dp4a-stages")
        s.emit.gemvDp4aStages = n;
      else if (f == "--gemv-dp4a-ahead")
        s.emit.gemvDp4aAhead = n;
      else
        return usage(argv[0]);
    } else if (a.rfind("--pdl-prefetch-mb", 0) == 0) {
      // The programmatic-launch prologues' L2 budget (EmitOptions::
      // pdlPrefetchBytes): this benchmark's graphs have no programmatic
      // edges, so it times the prologue's cost, not its overlap.
      auto v = value("--pdl-prefetch-mb");
      int n = v ? std::atoi(v->c_str()) : -1;
      if (n < 0 || n > 1024)
        return usage(argv[0]);
      s.emit.pdlPrefetchBytes = static_cast<int64_t>(n) << 20;
    } else if (a.rfind("--attn-", 0) == 0) {
      // Decode attention's staging overrides (EmitOptions::attention*).
      std::string f = a.substr(0, a.find('='));
      auto v = value(f.c_str());
      int n = v ? std::atoi(v->c_str()) : -1;
      if (f == "--attn-stages" && n >= 0 && n <= 8 && n != 1)
        s.emit.attentionStages = n;
      else if (f == "--attn-steps" && n >= 1 && n <= 4)
        s.emit.attentionSteps = n;
      else if (f == "--attn-blocks-per-sm" && n >= 1 && n <= 16)
        s.emit.attentionBlocksPerSm = n;
      else if (f == "--attn-min-tiles" && n >= 1 && n <= 64)
        s.emit.attentionMinTiles = n;
      else if (f == "--attn-reg-max-live" && v && n >= 0)
        s.emit.attentionRegMaxLive = n;
      else if (f == "--attn-cluster" && v && n >= 0 && n <= 8)
        s.emit.attentionCluster = n;
      else if (f == "--attn-cluster-warps" && (n == 4 || n == 8))
        s.emit.attentionClusterWarps = n;
      else if (f == "--attn-cluster-steps" && n >= 1 && n <= 4)
        s.emit.attentionClusterSteps = n;
      else if (f == "--attn-early" && v && (n == 0 || n == 1))
        s.emit.attentionEarlyLoads = n == 1;
      else if (f == "--attn-q-first" && v && (n == 0 || n == 1))
        s.emit.attentionQFirst = n == 1;
      else if (f == "--attn-cluster-async" && v && (n == 0 || n == 1))
        s.emit.attentionClusterAsync = n == 1;
      else
        return usage(argv[0]);
    } else if (a.rfind("--benchmark_", 0) != 0 && a.rfind("--v=", 0) != 0) {
      std::fprintf(stderr, "fg_bench_kernels: unknown flag '%s'\n", a.c_str());
      return usage(argv[0]);
    } else {
      if (a.rfind("--benchmark_filter=", 0) == 0)
        filter = a.substr(std::strlen("--benchmark_filter="));
      keep.push_back(a);
    }
  }
  if (s.smoke) {
    if (!repsGiven)
      s.reps = 3;
    s.warmup = 1;
  }

  auto all = kernelCases();
  if (!all) {
    std::fprintf(stderr, "fg_bench_kernels: %s\n", llvm::toString(all.takeError()).c_str());
    return 1;
  }
  std::vector<KernelCase> cases;
  for (const KernelCase &c : *all)
    if (!s.smoke || c.smoke)
      cases.push_back(c);
  if (s.list) {
    listCases(cases);
    return 0;
  }

  if (s.compileOnly) {
    // No device needed: every selected case emitted and compiled for sm_90.
    cuda::EmitOptions eo = s.emit;
    std::vector<std::unique_ptr<Prepared>> prepared;
    auto sources = prepareAll(cases, eo, filter, prepared);
    sources.emplace_back("fg_kbench_fill", kFillSource);
    compileAll(sources, eo.arch);
    int failures = 0;
    for (const auto &p : prepared)
      if (!p->error.empty()) {
        ++failures;
        std::printf("%s: %s\n", p->c.name().c_str(), p->error.c_str());
      }
    for (const auto &[name, source] : sources)
      if (const ModuleResult &m = modules().at(source); !m.module) {
        ++failures;
        std::printf("%s: %s\n", name.c_str(), m.error.c_str());
      }
    std::printf("fg_bench_kernels: %zu cases, %zu kernel sources compiled for %s, %d failures\n",
                prepared.size(), sources.size(), eo.arch.c_str(), failures);
    return failures ? 1 : 0;
  }

  int count = 0;
  cudaError_t probe = cudaGetDeviceCount(&count);
  if (probe != cudaSuccess || count == 0) {
    std::printf("fg_bench_kernels: no CUDA device (%s), skipping %zu kernel cases\n",
                probe != cudaSuccess ? cudaGetErrorName(probe) : "0 devices", cases.size());
    return 0;
  }
  auto dev = Device::create();
  if (!dev) {
    std::fprintf(stderr, "fg_bench_kernels: CUDA setup failed: %s\n",
                 llvm::toString(dev.takeError()).c_str());
    return 1;
  }
  gDevice = dev->get();
  std::string bwError;
  if (!bandwidth(&bwError))
    std::fprintf(stderr, "fg_bench_kernels: bandwidth not measured (%% BW left out): %s\n",
                 firstLine(bwError).c_str());

  // Emit every case as the compiler would (default options, this device's
  // arch), then compile the selected ones' kernels in parallel.
  cuda::EmitOptions eo = s.emit;
  eo.arch = gDevice->arch;
  std::vector<std::unique_ptr<Prepared>> prepared;
  auto sources = prepareAll(cases, eo, filter, prepared);
  std::fprintf(stderr, "fg_bench_kernels: compiling %zu kernel sources for %s\n", sources.size(),
               gDevice->arch.c_str());
  compileAll(sources, gDevice->arch);

  rows().resize(prepared.size());
  for (size_t i = 0; i < prepared.size(); ++i) {
    rows()[i].p = prepared[i].get();
    benchmark::RegisterBenchmark(prepared[i]->c.name().c_str(), kernelCase, prepared[i].get(), i)
        ->UseManualTime()
        ->Iterations(s.reps)
        ->Unit(benchmark::kMicrosecond);
  }
  std::vector<char *> args;
  for (std::string &a : keep)
    args.push_back(a.data());
  int gbArgc = static_cast<int>(args.size());
  benchmark::Initialize(&gbArgc, args.data());
  if (benchmark::ReportUnrecognizedArguments(gbArgc, args.data()))
    return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();

  // Rows of cases the filter left out have neither time nor note.
  std::vector<Row> ran;
  for (const Row &r : rows())
    if (r.us > 0 || !r.note.empty())
      ran.push_back(r);
  rows() = std::move(ran);
  std::string t = table();
  std::fputs(t.c_str(), stdout);
  if (!s.tablePath.empty()) {
    if (FILE *f = std::fopen(s.tablePath.c_str(), "w")) {
      std::fputs(t.c_str(), f);
      std::fclose(f);
    } else {
      std::fprintf(stderr, "fg_bench_kernels: cannot write %s\n", s.tablePath.c_str());
      return 1;
    }
  }
  gDevice = nullptr;
  return 0;
}
