//===- Nvrtc.h - CUDA C++ -> cubin (+PTX) through NVRTC, with a disk cache -*- C++ -*-===//
//
// compileCuda() turns one kernel source into a cubin for a real architecture
// (`sm_90`) plus the PTX of the same compilation. Results are cached on disk
// under a key that hashes the source, the options, the architecture and the
// NVRTC version, so a rebuild with another toolkit never reuses stale code.
// Cache files are written to a temporary name and renamed atomically (tests
// and compiles run in parallel); an unreadable or corrupt entry is ignored and
// rebuilt. Never links the driver library.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

#include <cstdint>
#include <string>
#include <vector>

namespace fg::cuda {

struct CompiledModule {
  std::string name;          ///< the program name given to NVRTC (`<name>.cu`)
  std::vector<char> cubin;   ///< SASS for the requested sm_XX
  std::string ptx;           ///< PTX of the same compilation (for JIT on newer GPUs)
  std::string log;           ///< NVRTC's log (warnings), empty when none
  bool cacheHit = false;     ///< true when cubin/ptx came from the disk cache
};

struct NvrtcOptions {
  /// Extra NVRTC flags (part of the cache key). `--gpu-architecture` and
  /// `-std=c++17` are always added.
  std::vector<std::string> flags;
  /// Cache directory; empty: $FG_KERNEL_CACHE, else ~/.cache/fusegraph/kernels.
  std::string cacheDir;
  bool useCache = true;
};

/// A kernel source that uses instructions only the arch-specific target has
/// (wgmma: sm_90a) starts with this line; compileCuda then compiles it for
/// `arch` + "a" (the cubin runs on that compute capability only, which is
/// the one the plan was compiled for).
inline constexpr llvm::StringLiteral kArchSpecificMarker = "#define FG_ARCH_SPECIFIC 1\n";
/// The architecture compileCuda uses for `source`: `arch`, or its
/// arch-specific form ("sm_90" -> "sm_90a") where the source starts with
/// kArchSpecificMarker and `arch` has no suffix yet.
std::string architectureFor(llvm::StringRef source, llvm::StringRef arch);

/// Compiles `source` for `arch` (`sm_90`, `sm_100`, ...; see architectureFor).
/// A compile error returns an llvm::Error whose message contains NVRTC's log.
llvm::Expected<CompiledModule> compileCuda(llvm::StringRef source, llvm::StringRef name,
                                           llvm::StringRef arch = "sm_90",
                                           const NvrtcOptions &options = {});

/// An architecture NVRTC can be asked for: `sm_NN` or `compute_NN` (with an
/// optional letter suffix, `sm_90a`); else an error naming it, before any
/// kernel is compiled.
llvm::Error checkArch(llvm::StringRef arch);
/// The compute capability of an architecture name as a number ("sm_90a" ->
/// 90, "compute_89" -> 89); 0 for a name checkArch refuses.
int archNumber(llvm::StringRef arch);

/// NVRTC's version as major * 1000 + minor * 10 (12040 for 12.4); 0 when unknown.
uint32_t nvrtcVersionNumber();

/// Process-wide cache counters (atomics; all compileCuda calls so far).
struct NvrtcCacheStats {
  uint64_t hits = 0, misses = 0, rejected = 0; ///< rejected: corrupt entries rebuilt
};
NvrtcCacheStats nvrtcCacheStats();

/// The cache directory `options` resolves to (see NvrtcOptions::cacheDir).
std::string resolveCacheDir(const NvrtcOptions &options);
/// The cache file a compilation would use (for tests and `inspect`).
std::string cachePath(llvm::StringRef source, llvm::StringRef arch, const NvrtcOptions &options);

} // namespace fg::cuda
