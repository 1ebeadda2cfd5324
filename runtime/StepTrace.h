//===- StepTrace.h - one traced step as a Chrome/Perfetto trace ---*- C++ -*-===//
//
// `fusegraph run|bench --trace out.json`: the kernels of one replayed CUDA
// graph step, as CUPTI recorded them (runtime/cuda/KernelTrace.h), written in
// the Chrome trace event format ({"traceEvents": [...]}, which Perfetto and
// chrome://tracing open). Each launch is a complete event ("ph": "X") named
// after its kernel, with its op, node, fused group, bytes and µs in "args".
// Kernels that overlap (parallel branches of the launch DAG; a programmatic
// dependent launch starting in its predecessor's tail) go on separate tracks,
// so the overlap is visible.
//
// Both halves are plain functions of data, testable without a GPU:
// matchKernelRecords maps CUPTI's records to the entry's launches (the
// CudaRunner uses it on each traced step), chromeTraceJson writes the file.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "ir/Graph.h"
#include "runtime/Executor.h"
#include "runtime/Program.h"
#include "runtime/cuda/KernelTrace.h"

#include "llvm/ADT/ArrayRef.h"
#include "llvm/Support/Error.h"

#include <cstdint>
#include <string>
#include <vector>

namespace fg {

/// What the records of one traced step say about one launch.
struct LaunchSpan {
  double ms = 0;               ///< charged device time (chargedTimes), ms
  uint64_t startNs = 0, endNs = 0; ///< first kernel's start, last kernel's end
  unsigned kernels = 0;        ///< records matched (a cuBLAS call may run several)
  bool byShape = false;        ///< matched by grid and block, not by name (below)
};

/// Matches the kernel records of one step of `entry` to its launches, in
/// launch order: a generated kernel by its symbol (the n-th record of a
/// symbol is its n-th launch), the other records (cuBLAS's kernels) to the
/// GEMM launches in order, a run of them up to the next generated kernel to
/// the same call. Records whose names no launch has then go, in start order,
/// to the earliest launch left without a record of the same grid and block
/// (LaunchSpan::byShape): one process that traced another plan before may
/// see CUPTI report a kernel under a name of the unloaded plan (the fifteenth
/// session's fused W-dense breakdown: 65 of 356). An error when a generated
/// kernel's launch is still without a record or a record without a launch.
llvm::Expected<std::vector<LaunchSpan>> matchKernelRecords(const CompiledEntry &entry,
                                                           std::vector<KernelRecord> records);

/// The Chrome trace of one step of `fn` (the plan's final function of the
/// entry the launches ran): one event per launch with a span (startNs <
/// endNs), time relative to the first start, µs. `kvRows` sizes the bytes
/// attention reads (nodeBytes).
std::string chromeTraceJson(const Function &fn, llvm::ArrayRef<Executor::LaunchTime> launches,
                            int64_t kvRows, llvm::StringRef title);

} // namespace fg
