//===- Model.cpp - MODEL arguments: .fg, .gguf, HF folders, demo -----------===//
#include "tools/Commands.h"

#include "frontends/Frontend.h"
#include "ir/Diag.h"

#include "llvm/ADT/SmallString.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/Support/FileSystem.h"

using namespace llvm;

namespace fg::cli {

bool isPlanFile(StringRef path) { return path.endswith(".plan"); }

Expected<Graph> loadModelGraph(StringRef model, const ModelSettings &s,
                               std::vector<ExternalWeight> *weights) {
  ModelOptions mo;
  mo.ctx = s.ctx;
  mo.prefill = s.prefill;
  std::optional<DType> kv = parseDType(s.kvDtype);
  if (!kv)
    return makeError("unknown --kv-dtype '" + s.kvDtype + "' (f16, bf16 or f32)");
  mo.kvDType = *kv;
  mo.log = s.log;
  if (!weights)
    return loadModel(model, mo);
  Expected<LoadedModel> m = loadModelWithWeights(model, mo);
  if (!m)
    return m.takeError();
  // Mapped weights are referenced by absolute path, offset and the file's
  // size now (a plan refuses a file that changed); embedded ones are copied.
  StringMap<uint64_t> sizes;
  for (const WeightEntry &w : m->weights.entries()) {
    ExternalWeight x;
    x.name = w.name;
    x.type = w.type;
    x.tensor = w.tensor;
    if (w.isEmbedded()) {
      x.bytes = w.data;
    } else {
      SmallString<256> path(w.file);
      if (std::error_code ec = sys::fs::make_absolute(path))
        return makeError(w.file, Loc{}, "cannot make the path absolute: " + ec.message());
      x.file = path.str().str();
      x.offset = w.offset;
      auto it = sizes.find(x.file);
      if (it == sizes.end()) {
        uint64_t size = 0;
        if (std::error_code ec = sys::fs::file_size(x.file, size))
          return makeError(x.file, Loc{}, "cannot read the model file: " + ec.message());
        it = sizes.insert({x.file, size}).first;
      }
      x.fileSize = it->second;
    }
    weights->push_back(std::move(x));
  }
  return std::move(m->graph);
}

} // namespace fg::cli
