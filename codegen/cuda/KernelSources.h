//===- KernelSources.h - the kernel sources embedded at build time -*- C++ -*-===//
//
// Kernels are CUDA sources: codegen/cuda/kernels/*.cuh, turned into string
// literals at build time (cmake/EmbedKernels.cmake). An emitter picks a
// kernel template and its policies, writes a small parameter struct and an
// `extern "C"` entry that instantiates the template, and NVRTC compiles
// common.cuh + the template's file + that instantiation.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/StringRef.h"

namespace fg::cuda {

struct KernelSourceFile {
  const char *name; ///< file name under codegen/cuda/kernels/, e.g. "gemv.cuh"
  const char *text;
};

/// Every embedded file, sorted by name (generated).
llvm::ArrayRef<KernelSourceFile> kernelSourceFiles();

/// The text of one embedded file; asserts that it exists (a missing kernel
/// file is a build error of ours, not a user error).
llvm::StringRef kernelSource(llvm::StringRef name);

} // namespace fg::cuda
