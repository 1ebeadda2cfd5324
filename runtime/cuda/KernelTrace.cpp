//===- KernelTrace.cpp - CUPTI kernel records through dlopen ---------------===//
//
// CUPTI's headers are not part of the toolkit on the build machines, so the
// few declarations used are written here. The record layout is the prefix of
// CUpti_ActivityKernel4 .. CUpti_ActivityKernel9 (and later), which has not
// changed since CUDA 9: packed, 8-byte aligned, `start` at byte 16, grid and
// block at 52..75, `name` (a pointer) at 104.
//
//===----------------------------------------------------------------------===//
#include "runtime/cuda/KernelTrace.h"

#include "llvm/Support/Process.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <dlfcn.h>
#include <mutex>
#include <numeric>

namespace fg {
namespace {

constexpr uint32_t kKindConcurrentKernel = 10; // CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL
constexpr uint32_t kFlushForced = 1;           // CUPTI_ACTIVITY_FLAG_FLUSH_FORCED
constexpr int kSuccess = 0;                    // CUPTI_SUCCESS
constexpr size_t kBufferBytes = 8 << 20;

#pragma pack(push, 1)
struct KernelPrefix {
  uint32_t kind;
  uint8_t cacheConfig, sharedMemoryConfig;
  uint16_t registersPerThread;
  uint32_t cacheRequested, cacheExecuted;
  uint64_t start, end, completed;
  uint32_t deviceId, contextId, streamId;
  int32_t grid[3], block[3];
  int32_t staticShared, dynamicShared;
  uint32_t localPerThread, localTotal, correlationId;
  int64_t gridId;
  const char *name;
};
#pragma pack(pop)
static_assert(offsetof(KernelPrefix, start) == 16 && offsetof(KernelPrefix, grid) == 52 &&
                  offsetof(KernelPrefix, name) == 104,
              "CUpti_ActivityKernel layout");

using RequestFn = void (*)(uint8_t **, size_t *, size_t *);
using CompleteFn = void (*)(void *, uint32_t, uint8_t *, size_t, size_t);

struct Cupti {
  void *lib = nullptr;
  int (*enable)(uint32_t) = nullptr;
  int (*disable)(uint32_t) = nullptr;
  int (*registerCallbacks)(RequestFn, CompleteFn) = nullptr;
  int (*flushAll)(uint32_t) = nullptr;
  int (*nextRecord)(uint8_t *, size_t, void **) = nullptr;
  int (*errorString)(int, const char **) = nullptr;
  bool registered = false;
};

std::mutex gMutex;
Cupti gCupti;
std::vector<KernelRecord> gRecords;

void requestBuffer(uint8_t **buffer, size_t *size, size_t *maxRecords) {
  *buffer = static_cast<uint8_t *>(std::aligned_alloc(8, kBufferBytes));
  *size = *buffer ? kBufferBytes : 0;
  *maxRecords = 0;
}

void completeBuffer(void *, uint32_t, uint8_t *buffer, size_t, size_t valid) {
  std::lock_guard<std::mutex> lock(gMutex);
  void *rec = nullptr;
  while (buffer && gCupti.nextRecord(buffer, valid, &rec) == kSuccess) {
    KernelPrefix k;
    std::memcpy(&k, rec, sizeof k);
    if (k.kind != kKindConcurrentKernel)
      continue;
    KernelRecord r;
    r.start = k.start;
    r.end = k.end;
    for (int d = 0; d < 3; ++d) {
      r.grid[d] = static_cast<unsigned>(k.grid[d]);
      r.block[d] = static_cast<unsigned>(k.block[d]);
    }
    if (k.name)
      r.name = k.name;
    gRecords.push_back(std::move(r));
  }
  std::free(buffer);
}

llvm::Error cuptiError(const char *what, int code) {
  const char *msg = nullptr;
  if (gCupti.errorString)
    gCupti.errorString(code, &msg);
  return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                 std::string("CUPTI ") + what + " failed: " +
                                     (msg ? msg : "error " + std::to_string(code)));
}

llvm::Error load() {
  if (gCupti.lib)
    return llvm::Error::success();
  std::vector<std::string> names = {"libcupti.so.13", "libcupti.so"};
  for (const char *var : {"CUDA_HOME", "CUDA_PATH"})
    if (auto root = llvm::sys::Process::GetEnv(var))
      names.push_back(*root + "/extras/CUPTI/lib64/libcupti.so");
  names.push_back("/usr/local/cuda/extras/CUPTI/lib64/libcupti.so");
  names.push_back("/usr/local/cuda/lib64/libcupti.so");
  for (const std::string &n : names)
    if ((gCupti.lib = dlopen(n.c_str(), RTLD_NOW | RTLD_LOCAL)))
      break;
  if (!gCupti.lib)
    return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                   "kernel trace: libcupti not found (tried libcupti.so.13, "
                                   "libcupti.so, $CUDA_HOME/extras/CUPTI/lib64)");
  auto sym = [](auto &fn, const char *name) {
    fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(dlsym(gCupti.lib, name));
    return fn != nullptr;
  };
  if (!sym(gCupti.enable, "cuptiActivityEnable") || !sym(gCupti.disable, "cuptiActivityDisable") ||
      !sym(gCupti.registerCallbacks, "cuptiActivityRegisterCallbacks") ||
      !sym(gCupti.flushAll, "cuptiActivityFlushAll") ||
      !sym(gCupti.nextRecord, "cuptiActivityGetNextRecord")) {
    dlclose(gCupti.lib);
    gCupti = Cupti{};
    return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                   "kernel trace: libcupti lacks the activity API");
  }
  sym(gCupti.errorString, "cuptiGetResultString");
  return llvm::Error::success();
}

} // namespace

llvm::Error KernelTrace::start() {
  if (auto e = load())
    return e;
  if (!gCupti.registered) {
    if (int rc = gCupti.registerCallbacks(requestBuffer, completeBuffer); rc != kSuccess)
      return cuptiError("cuptiActivityRegisterCallbacks", rc);
    gCupti.registered = true;
  }
  if (int rc = gCupti.enable(kKindConcurrentKernel); rc != kSuccess)
    return cuptiError("cuptiActivityEnable", rc);
  return llvm::Error::success();
}

llvm::Expected<std::vector<KernelRecord>> KernelTrace::take() {
  if (!gCupti.lib)
    return llvm::createStringError(llvm::inconvertibleErrorCode(), "kernel trace not started");
  if (int rc = gCupti.flushAll(kFlushForced); rc != kSuccess)
    return cuptiError("cuptiActivityFlushAll", rc);
  std::lock_guard<std::mutex> lock(gMutex);
  std::vector<KernelRecord> out;
  out.swap(gRecords);
  return out;
}

void KernelTrace::stop() {
  if (gCupti.lib) {
    gCupti.disable(kKindConcurrentKernel);
    gCupti.flushAll(kFlushForced);
    std::lock_guard<std::mutex> lock(gMutex);
    gRecords.clear();
  }
}

std::vector<uint64_t> chargedTimes(llvm::ArrayRef<KernelRecord> records) {
  std::vector<size_t> order(records.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return records[a].start < records[b].start; });
  std::vector<uint64_t> charged(records.size(), 0);
  uint64_t covered = 0; // the union of the intervals seen so far ends here
  for (size_t i : order) {
    const KernelRecord &r = records[i];
    uint64_t from = std::max(r.start, covered);
    charged[i] = r.end > from ? r.end - from : 0;
    covered = std::max(covered, r.end);
  }
  return charged;
}

} // namespace fg
