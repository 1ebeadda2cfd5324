//===- WeightInitModule.h - the device's weight initialiser module -*- C++ -*-===//
//
// Lowering, step 5 (when any weight has a normal/uniform/constant
// initialiser): one more NVRTC module, `fg_init_<dtype>(out, n, kind, seed,
// a, b)` per generated dtype (runtime/Program.h initKernelSymbol). Its source
// is the text of ir/InitFormula.h, embedded at build time, plus one grid-stride
// kernel per dtype: the device runs the very definition the CPU reference runs.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "runtime/Program.h"

#include <string>

namespace fg::cuda {

/// Whether any weight of `prog` is generated from an initialiser.
bool needsInitModule(const CompiledProgram &prog);

/// The module's complete CUDA source.
const std::string &initModuleSource();

} // namespace fg::cuda
