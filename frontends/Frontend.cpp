//===- Frontend.cpp - load a model into a Graph ---------------------------===//
#include "frontends/Frontend.h"

#include "frontends/models/Demo.h"
#include "frontends/models/Workloads.h"
#include "ir/Parser.h"

#include "llvm/ADT/SmallSet.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"

#include <string>

namespace fg {

namespace {

void log(const ModelOptions &opts, LogLevel level, const llvm::Twine &msg) {
  if (opts.log)
    opts.log(level, msg.str());
}

} // namespace

llvm::Error validateModelOptions(const ModelOptions &opts) {
  if (opts.ctx < 1)
    return makeError("invalid option: ctx must be >= 1, got " + std::to_string(opts.ctx));
  if (opts.ctx > kMaxCtx)
    return makeError("invalid option: ctx " + std::to_string(opts.ctx) + " is more than " +
                     std::to_string(kMaxCtx) + " rows, the most a KV cache may have");
  llvm::SmallSet<int64_t, 8> seen;
  for (int64_t n : opts.prefill) {
    if (n < 1 || n > opts.ctx)
      return makeError("invalid option: prefill size " + std::to_string(n) +
                       " must be in [1, ctx = " + std::to_string(opts.ctx) + "]");
    if (!seen.insert(n).second)
      return makeError("invalid option: prefill size " + std::to_string(n) + " is listed twice");
  }
  if (opts.kvDType != DType::F16 && opts.kvDType != DType::BF16 && opts.kvDType != DType::F32)
    return makeError("invalid option: kv cache dtype must be f16, bf16 or f32, got " +
                     std::string(dtypeName(opts.kvDType)));
  return llvm::Error::success();
}

llvm::Expected<LoadedModel> loadModelWithWeights(llvm::StringRef path, const ModelOptions &opts) {
  if (auto e = validateModelOptions(opts))
    return e;
  auto wrap = [](llvm::Expected<Graph> g) -> llvm::Expected<LoadedModel> {
    if (!g)
      return g.takeError();
    LoadedModel m;
    m.graph = std::move(*g);
    return m;
  };
  if (path == "demo") {
    log(opts, LogLevel::Verbose, "building the built-in demo decoder");
    return wrap(buildDemoGraph(opts.ctx, opts.prefill, opts.kvDType,
                               opts.allLogits ? LogitRows::All : LogitRows::Last));
  }
  if (isWorkloadName(path)) { // benchmark shapes, random weights made on the device
    log(opts, LogLevel::Verbose, "building benchmark workload " + path);
    WorkloadOptions wo;
    wo.ctx = opts.ctx;
    wo.prefill = opts.prefill;
    wo.kvDType = opts.kvDType;
    wo.allLogits = opts.allLogits;
    return wrap(buildWorkload(path, wo));
  }
  if (path.empty())
    return makeError("no model given: expected a .fg file, a .gguf file, a folder with "
                     "config.json, or 'demo'");
  if (!llvm::sys::fs::exists(path))
    return makeError("model '" + path + "' does not exist");
  DecoderBuildOptions bo;
  bo.ctx = opts.ctx;
  bo.prefill = opts.prefill;
  bo.kvDType = opts.kvDType;
  bo.allLogits = opts.allLogits;
  auto report = [&](llvm::Expected<LoadedModel> m) -> llvm::Expected<LoadedModel> {
    if (!m)
      return m.takeError();
    size_t embedded = 0, transformed = 0;
    for (const WeightEntry &w : m->weights.entries()) {
      embedded += w.isEmbedded();
      transformed += w.isTransformed();
    }
    log(opts, LogLevel::Verbose,
        "loaded a " + m->family->name + " decoder from " + path + ": " +
            llvm::Twine(m->weights.size()) + " weights, " + llvm::Twine(transformed) +
            " transformed at load time (recipes), " + llvm::Twine(embedded) +
            " computed and embedded (" + llvm::Twine(m->weights.embeddedBytes()) + " bytes)");
    return m;
  };
  if (llvm::sys::fs::is_directory(path)) {
    llvm::SmallString<256> config(path);
    llvm::sys::path::append(config, "config.json");
    if (llvm::sys::fs::exists(config))
      return report(loadHfModel(path, bo));
    return makeError("'" + path +
                     "' is a folder without config.json; expected a .fg file, "
                     "a .gguf file, a folder with config.json, or 'demo'");
  }
  llvm::StringRef ext = llvm::sys::path::extension(path);
  if (ext.equals_insensitive(".gguf"))
    return report(loadGgufModel(path, bo));
  if (ext == ".fg") {
    log(opts, LogLevel::Verbose,
        "parsing " + path +
            " (its entries and cache sizes are its own; ctx, prefill and "
            "kv dtype options do not apply)");
    return wrap(parseGraphFile(path));
  }
  return makeError("'" + path +
                   "': unknown model format (expected a .fg file, a .gguf file, a "
                   "folder with config.json, or 'demo')");
}

llvm::Expected<Graph> loadModel(llvm::StringRef path, const ModelOptions &opts) {
  auto m = loadModelWithWeights(path, opts);
  if (!m)
    return m.takeError();
  return std::move(m->graph);
}

} // namespace fg
