//===- WeightProgress.h - weight bytes loaded, for a progress line -*- C++ -*-===//
//
// The CPU and CUDA backends load a plan's weights one slot at a time (from
// model files by their recipes, or generated); this reports the bytes done so
// far to ExecOptions::progress as the task "loading weights" (ir/Diag.h).
//
//===----------------------------------------------------------------------===//
#pragma once

#include "ir/Diag.h"

#include <chrono>
#include <cstdint>

namespace fg {

class WeightProgress {
public:
  WeightProgress(const ProgressSink &sink, uint64_t totalBytes)
      : sink_(sink), total_(totalBytes), start_(std::chrono::steady_clock::now()) {}

  /// `bytes` more are loaded.
  void add(uint64_t bytes) {
    done_ += bytes;
    if (!sink_)
      return;
    Progress p;
    p.task = "loading weights";
    p.unit = "bytes";
    p.done = done_;
    p.total = total_;
    p.seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
    sink_(p);
  }

private:
  const ProgressSink &sink_;
  uint64_t total_, done_ = 0;
  std::chrono::steady_clock::time_point start_;
};

} // namespace fg
