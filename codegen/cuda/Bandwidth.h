//===- Bandwidth.h - measured device memory bandwidth -------------*- C++ -*-===//
//
// The roofline beside every benchmark figure (DESIGN "Benchmarks"): a large
// device-to-device cudaMemcpy (bytes read + bytes written per copy) and a
// read-only reduction kernel (compiled by NVRTC, loaded and launched through
// the CUDA runtime API; the driver library is never linked). The read
// bandwidth is the one ideal times divide by: a decode step mostly reads.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "llvm/Support/Error.h"

#include <cstdint>
#include <string>

namespace fg::cuda {

struct BandwidthOptions {
  uint64_t bytes = 1ull << 31; ///< buffer size (2 GiB: far past any cache)
  int repeats = 20;            ///< timed repetitions; the median is reported
  std::string kernelCacheDir;  ///< NVRTC cache; empty: the default
};

struct Bandwidth {
  double copyGBs = 0; ///< D2D cudaMemcpy, (read + write) / time
  double readGBs = 0; ///< the read-only reduction, bytes read / time
  uint64_t bytes = 0;
  std::string device; ///< the device's name
};

/// Measures both on the current device. Errors: no device, NVRTC or CUDA failures.
llvm::Expected<Bandwidth> measureBandwidth(const BandwidthOptions &opts = {});

} // namespace fg::cuda
