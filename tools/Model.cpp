//===- Model.cpp - MODEL arguments: .fg, .gguf, HF folders, demo -----------===//
#include "tools/Commands.h"

#include "frontends/Frontend.h"
#include "ir/Diag.h"

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
  mo.allLogits = s.allLogits;
  mo.log = s.log;
  if (!weights)
    return loadModel(model, mo);
  Expected<LoadedModel> m = loadModelWithWeights(model, mo);
  if (!m)
    return m.takeError();
  // Weights from the model files are recipes over their ranges (absolute
  // paths, the files' sizes recorded: a plan refuses a file that changed);
  // computed ones are copied.
  for (const WeightEntry &w : m->weights.entries()) {
    ExternalWeight x;
    x.name = w.name;
    x.type = w.type;
    x.recipe = w.recipe;
    x.bytes = w.data;
    weights->push_back(std::move(x));
  }
  return std::move(m->graph);
}

} // namespace fg::cli
