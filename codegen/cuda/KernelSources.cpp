//===- KernelSources.cpp - lookup of the embedded kernel sources ---------===//
#include "codegen/cuda/KernelSources.h"

#include <cassert>

namespace fg::cuda {

llvm::StringRef kernelSource(llvm::StringRef name) {
  for (const KernelSourceFile &f : kernelSourceFiles())
    if (name == f.name)
      return f.text;
  assert(false && "no such embedded kernel source (is it under codegen/cuda/kernels/?)");
  return {};
}

} // namespace fg::cuda
