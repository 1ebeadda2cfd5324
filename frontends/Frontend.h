//===- Frontend.h - load a model into a Graph --------------------*- C++ -*-===//
//
// The one entry point the CLI, benchmarks and tests use to get a Graph:
//   "demo"           the built-in demo decoder (frontends/models/Demo.h)
//   "w-dense", ...   a benchmark workload (frontends/models/Workloads.h)
//   *.fg             IR text (ir/Parser.h); its entries and ctx are its own
//   *.gguf           GGUF v2/v3 (frontends/gguf/), llama, qwen2, qwen3, qwen3moe, gemma3
//   a folder         Hugging Face: config.json + *.safetensors (frontends/safetensors/)
// Model files also give a weight table (frontends/ModelWeights.h): use
// loadModelWithWeights to get it; loadModel keeps only the graph (whose mapped
// weights carry WeightInit::tensor(file, name); transformed and computed ones
// have no init).
//
//===----------------------------------------------------------------------===//
#pragma once

#include "frontends/models/ModelLoader.h"
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
  /// Prefill entries return every row of logits (f32[N, vocab]) instead of the
  /// last one (f32[1, vocab]); `--all-logits`, needed by `--dump-logits`.
  bool allLogits = false;
  LogSink log; ///< optional; receives progress and verbose messages
};

/// The largest ctx a model is built for (2^24 rows, beyond every released
/// model's context): larger values are refused, never sized into caches.
constexpr int64_t kMaxCtx = int64_t(1) << 24;

/// Checks ctx in [1, kMaxCtx], every prefill size in [1, ctx] and listed once, and the KV dtype.
llvm::Error validateModelOptions(const ModelOptions &opts);

/// Loads `path` ("demo", a .fg file, a .gguf file or a Hugging Face folder) as a Graph.
llvm::Expected<Graph> loadModel(llvm::StringRef path, const ModelOptions &opts);

/// Like loadModel, with the weight table of a model file (empty for "demo"
/// and .fg, whose weights carry their own initialisers).
llvm::Expected<LoadedModel> loadModelWithWeights(llvm::StringRef path, const ModelOptions &opts);

} // namespace fg
