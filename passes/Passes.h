//===- Passes.h - factories of every registered pass -------------*- C++ -*-===//
//
// Each pass lives in its own file, in an anonymous namespace, and exposes only
// its factory here. The registry in passes/PassManager.cpp maps names to these
// factories, one line per pass.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "passes/PassManager.h"

#include <memory>

namespace fg {

// --- cleanup -------------------------------------------------------------------
/// `dce`: removes nodes whose results are unused and not results; keeps
/// state updaters (set_rows) even when their new version is unused.
std::unique_ptr<Pass> createDCEPass();
/// `cse`: reuses an earlier node with the same kind, operands and attributes;
/// never merges state updaters.
std::unique_ptr<Pass> createCSEPass();
/// `canonicalize`: folds reshape chains and transpose pairs, drops no-op
/// reshapes, views, permutes and conts.
std::unique_ptr<Pass> createCanonicalizePass();

// --- fusion ----------------------------------------------------------------------
/// `fuse`: rewrites op chains into fused ops (passes/fusion/), larger
/// patterns first, then plans memory and splits back any fused node the
/// overlap proof refuses. Options and report come through the PassContext.
std::unique_ptr<Pass> createFusePass();

// --- lowering ------------------------------------------------------------------------
/// `gemm-inputs`: x of each matmul the target runs as a library GEMM is
/// converted to the GEMM's input dtype once, as a `convert` op shared by every
/// such matmul reading it (passes/lowering/GemmInputs.cpp); needs a target.
std::unique_ptr<Pass> createGemmInputsPass();

/// The cleanup pipeline run before fusion: "canonicalize,cse,dce".
llvm::StringRef defaultPipeline();

} // namespace fg
