//===- ModelLoader.cpp - GGUF files and HF folders → Graph + weights -------===//
#include "frontends/models/ModelLoader.h"

#include "frontends/gguf/GgufFile.h"
#include "frontends/models/Canonical.h"
#include "frontends/safetensors/Safetensors.h"
#include "ir/Diag.h"

namespace fg {

llvm::Expected<LoadedModel> buildModel(const ModelHParams &hp, const TensorSource &source,
                                       const DecoderBuildOptions &opts, llvm::StringRef where) {
  auto config = decoderConfigFor(hp, opts.ctx, opts.kvDType);
  if (!config)
    return makeError(where, Loc{}, llvm::toString(config.takeError()));
  const DType matrixMark = config->weightDType;
  // Matrices (and the embedding) keep the dtype they are stored in; everything
  // else is f32 by the blocks' rule.
  config->weightDTypeOf = [&source, matrixMark](llvm::StringRef name, DType dflt) {
    if (dflt != matrixMark)
      return dflt;
    return source.storedDType(name).value_or(dflt);
  };
  auto graph = buildDecoderGraph(*config, decoderEntries(opts.prefill));
  if (!graph)
    return makeError(where, Loc{}, llvm::toString(graph.takeError()));
  config->weightDTypeOf = nullptr; // it captured `source`

  LoadedModel m;
  m.family = hp.family;
  m.config = *config;
  m.graph = std::move(*graph);
  const Function &first = m.graph.functions().front();
  for (const Argument &a : first.arguments()) {
    if (a.role != ArgRole::Weight)
      continue;
    const Value &v = first.value(a.value);
    if (auto e = source.provide(v.name, v.type, m.weights))
      return e;
  }
  for (Function &fn : m.graph.functions())
    for (Argument &a : fn.arguments()) {
      if (a.role != ArgRole::Weight)
        continue;
      const WeightEntry *w = m.weights.lookup(fn.value(a.value).name);
      assert(w && "every weight was provided");
      a.init = w->isEmbedded() ? WeightInit() : WeightInit::tensor(w->file, w->tensor);
    }
  return m;
}

llvm::Expected<LoadedModel> loadGgufModel(llvm::StringRef path, const DecoderBuildOptions &opts) {
  auto f = GgufFile::open(path);
  if (!f)
    return f.takeError();
  auto hp = hparamsFromGguf(**f);
  if (!hp)
    return hp.takeError();
  std::unique_ptr<TensorSource> src = makeGgufSource(**f, *hp);
  // The weights keep the mapping alive; the parsed file can go.
  return buildModel(*hp, *src, opts, path);
}

llvm::Expected<LoadedModel> loadHfModel(llvm::StringRef folder, const DecoderBuildOptions &opts) {
  auto ck = HfCheckpoint::open(folder);
  if (!ck)
    return ck.takeError();
  auto hp = hparamsFromHf(*ck);
  if (!hp)
    return hp.takeError();
  std::unique_ptr<TensorSource> src = makeHfSource(*ck, *hp);
  return buildModel(*hp, *src, opts, folder);
}

} // namespace fg
