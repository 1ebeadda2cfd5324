//===- HostMemory.cpp - host allocations the machine can hold ------------===//
#include "runtime/HostMemory.h"

#include "ir/Checked.h"

#include <algorithm>
#include <cstdio>
#include <sys/resource.h>
#include <unistd.h>

namespace fg {

uint64_t hostMemoryLimit() {
  uint64_t limit = UINT64_MAX;
  long pages = sysconf(_SC_PHYS_PAGES), pageSize = sysconf(_SC_PAGESIZE);
  if (pages > 0 && pageSize > 0)
    limit = static_cast<uint64_t>(pages) * static_cast<uint64_t>(pageSize);
  for (int resource : {RLIMIT_AS, RLIMIT_DATA}) {
    struct rlimit rl;
    if (getrlimit(resource, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY)
      limit = std::min<uint64_t>(limit, rl.rlim_cur);
  }
  return limit;
}

llvm::Error checkHostAllocation(uint64_t bytes, const llvm::Twine &what) {
  uint64_t limit = hostMemoryLimit();
  if (bytes <= limit)
    return llvm::Error::success();
  auto gib = [](uint64_t b) {
    char buf[32];
    snprintf(buf, sizeof buf, "%.1f GiB", static_cast<double>(b) / (1ull << 30));
    return std::string(buf);
  };
  return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                 what + " needs " + llvm::Twine(bytes) +
                                     " bytes of host memory but this machine can hold at most " +
                                     llvm::Twine(limit) + " (" + gib(bytes) + " > " + gib(limit) +
                                     ")");
}

llvm::Expected<uint64_t> checkHostTensor(const TensorType &t, const llvm::Twine &what,
                                         int64_t extraPerElement) {
  std::optional<int64_t> bytes = checkedBytes(t.dtype, t.shape);
  std::optional<int64_t> elems = checkedElements(t.shape);
  std::optional<int64_t> extra = elems ? checkedMul(*elems, extraPerElement) : std::nullopt;
  std::optional<int64_t> total = bytes && extra ? checkedAdd(*bytes, *extra) : std::nullopt;
  if (!total)
    return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                   what + " " + t.str() + ": its size overflows");
  if (llvm::Error e = checkHostAllocation(static_cast<uint64_t>(*total), what + " " + t.str()))
    return e;
  return static_cast<uint64_t>(*total);
}

} // namespace fg
