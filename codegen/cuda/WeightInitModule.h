//===- WeightInitModule.h - the device's weight initialiser module -*- C++ -*-===//
//
// Lowering, step 5 (when any weight has a normal/uniform/constant
// initialiser): one more NVRTC module, `fg_init_<dtype>(out, n, kind, seed,
// a, b)` per generated dtype (runtime/Program.h initKernelSymbol). Its source
// is the text of ir/InitFormula.h, embedded at build time, plus one grid-stride
// kernel per dtype: the device runs the very definition the CPU reference runs.
// Block-quantised weights add ir/QuantizeBlock.h and a kernel per block type
// the program initialises (only those: the quantiser makes the module ~14×
// slower to compile, 5.1 s against 0.36 with all twelve).
//
//===----------------------------------------------------------------------===//
#pragma once

#include "runtime/Program.h"

#include "llvm/ADT/ArrayRef.h"

#include <string>
#include <vector>

namespace fg::cuda {

/// Whether any weight of `prog` is generated from an initialiser.
bool needsInitModule(const CompiledProgram &prog);

/// The module's complete CUDA source, with kernels for the block types
/// `blockTypes` (the quantiser's text only when there are some).
std::string initModuleSource(llvm::ArrayRef<DType> blockTypes = {});

/// The block-quantised dtypes of `prog`'s initialised weights, each once.
std::vector<DType> initialisedBlockTypes(const CompiledProgram &prog);

} // namespace fg::cuda
