//===- KernelTrace.h - kernel start/end times of graph replays (CUPTI) -*- C++ -*-===//
//
// Per-kernel device times of CUDA graph replays, from CUPTI's activity
// records (CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL), with libcupti loaded by
// dlopen so that nothing links it: a machine without CUPTI gets an error
// from start(), not a binary that does not load. Unlike eager launches with
// events around each, the traced step is the real one: one graph launch, the
// same edges (programmatic ones included) and the same overlap.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "llvm/ADT/ArrayRef.h"
#include "llvm/Support/Error.h"

#include <cstdint>
#include <string>
#include <vector>

namespace fg {

/// One kernel execution as CUPTI saw it (ns on the device's clock).
struct KernelRecord {
  uint64_t start = 0, end = 0;
  unsigned grid[3] = {0, 0, 0}, block[3] = {0, 0, 0};
  std::string name;
};

/// While a KernelTrace is alive and started, every kernel the process runs
/// is recorded; take() flushes and returns what was recorded since the last
/// take(). One trace at a time in a process.
class KernelTrace {
public:
  /// Loads libcupti (libcupti.so.13, libcupti.so, or $CUDA_HOME/extras/CUPTI)
  /// and enables kernel records.
  static llvm::Error start();
  /// Flushes (call after the work has been synchronised) and returns the
  /// records since the previous take(), in completion-buffer order.
  static llvm::Expected<std::vector<KernelRecord>> take();
  /// Disables kernel records (start() may be called again).
  static void stop();
};

/// Time charged to each record: the part of [start, end) not already covered
/// by an earlier-starting record, so the charges of a step sum to the length
/// of the union of its kernels' intervals (the device-busy span) and a kernel
/// that waits on its predecessor (programmatic launch) is charged only from
/// that predecessor's end. Same order as `records`; ns.
std::vector<uint64_t> chargedTimes(llvm::ArrayRef<KernelRecord> records);

} // namespace fg
