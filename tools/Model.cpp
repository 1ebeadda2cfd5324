//===- Model.cpp - MODEL arguments: .fg, .gguf, HF folders, demo -----------===//
#include "tools/Commands.h"

#include "frontends/Frontend.h"
#include "ir/Diag.h"

using namespace llvm;

namespace fg::cli {

bool isPlanFile(StringRef path) { return path.endswith(".plan"); }

Expected<Graph> loadModelGraph(StringRef model, const ModelSettings &s) {
  ModelOptions mo;
  mo.ctx = s.ctx;
  mo.prefill = s.prefill;
  std::optional<DType> kv = parseDType(s.kvDtype);
  if (!kv)
    return makeError("unknown --kv-dtype '" + s.kvDtype + "' (f16, bf16 or f32)");
  mo.kvDType = *kv;
  mo.log = s.log;
  return loadModel(model, mo);
}

} // namespace fg::cli
