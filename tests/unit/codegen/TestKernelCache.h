//===- TestKernelCache.h - where the codegen tests keep compiled kernels -*- C++ -*-===//
//
// The NVRTC kernel cache every CPU-only codegen test shares: a folder in the
// system's temporary directory, never the source tree, so repeated runs and
// the tests of one run reuse each other's compiles.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "llvm/ADT/SmallString.h"
#include "llvm/Support/Path.h"

#include <string>

namespace fg::test {

inline std::string kernelCacheDir() {
  llvm::SmallString<256> p;
  llvm::sys::path::system_temp_directory(/*ErasedOnReboot=*/true, p);
  llvm::sys::path::append(p, "fg-kernel-cache-tests");
  return std::string(p.str());
}

} // namespace fg::test
