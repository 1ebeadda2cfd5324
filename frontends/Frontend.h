//===- Frontend.h - load a model into a Graph --------------------*- C++ -*-===//
//
// The one entry point the CLI, benchmarks and tests use to get a Graph:
//   "demo"           the built-in demo decoder (frontends/models/Demo.h)
//   *.fg             IR text (ir/Parser.h); its entries and ctx are its own
//   *.gguf, a folder with config.json: not supported yet (a clear error)
//
//===----------------------------------------------------------------------===//
#pragma once

#include "ir/DType.h"
#include "ir/Diag.h"
#include "ir/Graph.h"

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

#include <cstdint>
#include <vector>

namespace fg {

struct ModelOptions {
  int64_t ctx = 4096;                  ///< KV cache rows
  std::vector<int64_t> prefill = {64}; ///< prefill buckets (entries `prefill_N`)
  DType kvDType = DType::F16;
  LogSink log; ///< optional; receives progress and verbose messages
};

/// Checks ctx >= 1, every prefill size in [1, ctx] and listed once, and the KV dtype.
llvm::Error validateModelOptions(const ModelOptions &opts);

/// Loads `path` ("demo", a .fg file; GGUF and safetensors later) as a Graph.
llvm::Expected<Graph> loadModel(llvm::StringRef path, const ModelOptions &opts);

} // namespace fg
