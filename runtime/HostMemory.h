//===- HostMemory.h - host allocations the machine can hold -----*- C++ -*-===//
//
// A tensor size read from a file or a flag can be far more than the machine
// has. Host buffers sized by input are checked here first, so such a size is
// an error naming what and how many bytes, never std::bad_alloc (an abort) or
// a machine driven into swap. The limit is the physical memory, lowered by
// RLIMIT_AS / RLIMIT_DATA when those are set.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "ir/Type.h"

#include "llvm/ADT/Twine.h"
#include "llvm/Support/Error.h"

#include <cstdint>

namespace fg {

/// The most bytes one process may hope to allocate on this machine.
uint64_t hostMemoryLimit();

/// An error when `bytes` (for `what`, e.g. "state 'k_cache.0' f16[...]") is
/// more than hostMemoryLimit(): "<what> needs N bytes but this machine can
/// hold at most M".
llvm::Error checkHostAllocation(uint64_t bytes, const llvm::Twine &what);

/// The bytes of a host tensor of type `t`, plus `extraPerElement` bytes per
/// element (a staging buffer), computed with overflow checks: an error naming
/// `what` and the type when the size overflows or the machine cannot hold it.
llvm::Expected<uint64_t> checkHostTensor(const TensorType &t, const llvm::Twine &what,
                                         int64_t extraPerElement = 0);

} // namespace fg
