//===- Bandwidth.cpp - measured device memory bandwidth --------------------===//
#include "codegen/cuda/Bandwidth.h"

#include "codegen/cuda/Nvrtc.h"
#include "ir/Diag.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <vector>

namespace fg::cuda {

namespace {

/// Every thread reads 16-byte words (4 per iteration in flight), folds them
/// into a sum, and one atomic per warp keeps the loads alive.
const char *kReadKernel = R"(
extern "C" __global__ void fg_bw_read(const uint4 *__restrict__ p, unsigned long long n,
                                      unsigned long long *out) {
  unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x;
  unsigned long long stride = (unsigned long long)gridDim.x * blockDim.x;
  unsigned acc = 0;
  for (; i + 3 * stride < n; i += 4 * stride) {
    uint4 a = __ldg(p + i), b = __ldg(p + i + stride), c = __ldg(p + i + 2 * stride),
          d = __ldg(p + i + 3 * stride);
    acc += a.x ^ a.y ^ a.z ^ a.w;
    acc += b.x ^ b.y ^ b.z ^ b.w;
    acc += c.x ^ c.y ^ c.z ^ c.w;
    acc += d.x ^ d.y ^ d.z ^ d.w;
  }
  for (; i < n; i += stride) {
    uint4 a = __ldg(p + i);
    acc += a.x ^ a.y ^ a.z ^ a.w;
  }
  for (int o = 16; o > 0; o >>= 1)
    acc += __shfl_xor_sync(0xffffffffu, acc, o);
  if ((threadIdx.x & 31) == 0)
    atomicAdd(out, (unsigned long long)acc);
}
)";

llvm::Error check(cudaError_t e, const char *what) {
  if (e == cudaSuccess)
    return llvm::Error::success();
  return makeError(std::string("CUDA error in ") + what + ": " + cudaGetErrorName(e) + " (" +
                   cudaGetErrorString(e) + ")");
}

double median(std::vector<float> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

/// Owns what one measurement allocates.
struct Resources {
  void *src = nullptr, *dst = nullptr, *sum = nullptr;
  cudaEvent_t start = nullptr, stop = nullptr;
  cudaStream_t stream = nullptr;
  cudaLibrary_t lib = nullptr;
  ~Resources() {
    cudaFree(src);
    cudaFree(dst);
    cudaFree(sum);
    if (start)
      cudaEventDestroy(start);
    if (stop)
      cudaEventDestroy(stop);
    if (stream)
      cudaStreamDestroy(stream);
    if (lib)
      cudaLibraryUnload(lib);
  }
};

} // namespace

llvm::Expected<Bandwidth> measureBandwidth(const BandwidthOptions &opts) {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0)
    return makeError("no CUDA device is available");
  int dev = 0;
  cudaDeviceProp prop{};
  if (auto e = check(cudaGetDevice(&dev), "cudaGetDevice"))
    return e;
  if (auto e = check(cudaGetDeviceProperties(&prop, dev), "cudaGetDeviceProperties"))
    return e;
  Bandwidth out;
  out.device = prop.name;
  out.bytes = opts.bytes / 16 * 16;
  int repeats = std::max(1, opts.repeats);

  NvrtcOptions no;
  no.cacheDir = opts.kernelCacheDir;
  std::string arch = "sm_" + std::to_string(prop.major) + std::to_string(prop.minor);
  auto mod = compileCuda(kReadKernel, "fg_bandwidth", arch, no);
  if (!mod)
    return mod.takeError();

  Resources r;
  if (auto e = check(cudaStreamCreateWithFlags(&r.stream, cudaStreamNonBlocking), "stream"))
    return e;
  if (auto e = check(cudaEventCreate(&r.start), "event"))
    return e;
  if (auto e = check(cudaEventCreate(&r.stop), "event"))
    return e;
  if (auto e = check(cudaMalloc(&r.src, out.bytes), "allocating the source buffer"))
    return e;
  if (auto e = check(cudaMalloc(&r.dst, out.bytes), "allocating the destination buffer"))
    return e;
  if (auto e = check(cudaMalloc(&r.sum, sizeof(unsigned long long)), "allocating the sum"))
    return e;
  if (auto e = check(cudaMemset(r.src, 1, out.bytes), "filling the source buffer"))
    return e;
  const void *code = mod->cubin.empty() ? static_cast<const void *>(mod->ptx.c_str())
                                        : static_cast<const void *>(mod->cubin.data());
  if (auto e = check(cudaLibraryLoadData(&r.lib, code, nullptr, nullptr, 0, nullptr, nullptr, 0),
                     "loading the bandwidth kernel"))
    return e;
  cudaKernel_t kernel = nullptr;
  if (auto e = check(cudaLibraryGetKernel(&kernel, r.lib, "fg_bw_read"), "looking up fg_bw_read"))
    return e;

  auto timeIt = [&](auto &&body, std::vector<float> &ms) -> llvm::Error {
    for (int i = 0; i < repeats + 2; ++i) { // two untimed warm-ups
      if (auto e = check(cudaEventRecord(r.start, r.stream), "event"))
        return e;
      if (auto e = body())
        return e;
      if (auto e = check(cudaEventRecord(r.stop, r.stream), "event"))
        return e;
      if (auto e = check(cudaEventSynchronize(r.stop), "bandwidth run"))
        return e;
      float t = 0;
      cudaEventElapsedTime(&t, r.start, r.stop);
      if (i >= 2)
        ms.push_back(t);
    }
    return llvm::Error::success();
  };

  std::vector<float> copyMs, readMs;
  if (auto e = timeIt(
          [&] {
            return check(cudaMemcpyAsync(r.dst, r.src, out.bytes, cudaMemcpyDeviceToDevice,
                                         r.stream),
                         "device-to-device copy");
          },
          copyMs))
    return e;
  unsigned long long n = out.bytes / 16;
  unsigned blocks = static_cast<unsigned>(std::max(1, prop.multiProcessorCount) * 8);
  const void *src = r.src;
  void *sum = r.sum;
  void *args[] = {&src, &n, &sum};
  if (auto e = timeIt(
          [&] {
            return check(cudaLaunchKernel(reinterpret_cast<void *>(kernel), dim3(blocks),
                                          dim3(256), args, 0, r.stream),
                         "launch of fg_bw_read");
          },
          readMs))
    return e;
  double copy = median(copyMs), read = median(readMs);
  out.copyGBs = copy > 0 ? 2.0 * static_cast<double>(out.bytes) / (copy * 1e-3) / 1e9 : 0;
  out.readGBs = read > 0 ? static_cast<double>(out.bytes) / (read * 1e-3) / 1e9 : 0;
  return out;
}

} // namespace fg::cuda
