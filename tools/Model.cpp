//===- Model.cpp - MODEL arguments: .fg, .gguf, HF folders, demo -----------===//
#include "tools/Commands.h"

#include "ir/Diag.h"
#include "ir/Parser.h"

#if __has_include("frontends/Frontend.h")
#include "frontends/Frontend.h"
#define FG_HAVE_FRONTENDS 1
#endif

using namespace llvm;

namespace fg::cli {

bool isPlanFile(StringRef path) { return path.endswith(".plan"); }

Expected<Graph> loadModelGraph(StringRef model, const ModelSettings &s) {
#ifdef FG_HAVE_FRONTENDS
  ModelOptions mo;
  mo.ctx = s.ctx;
  mo.prefill = s.prefill;
  std::optional<DType> kv = parseDType(s.kvDtype);
  if (!kv)
    return makeError("unknown --kv-dtype '" + s.kvDtype + "' (f16, bf16 or f32)");
  mo.kvDType = *kv;
  mo.log = s.log;
  return loadModel(model, mo);
#else
  (void)s;
  if (model.endswith(".fg"))
    return parseGraphFile(model);
  return makeError("cannot load '" + model +
                   "': model frontends are not built yet (only .fg files load)");
#endif
}

} // namespace fg::cli
