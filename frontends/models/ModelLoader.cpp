//===- ModelLoader.cpp - GGUF files and HF folders → Graph + weights -------===//
#include "frontends/models/ModelLoader.h"

#include "frontends/gguf/GgufFile.h"
#include "frontends/models/Canonical.h"
#include "frontends/safetensors/Safetensors.h"
#include "ir/Diag.h"

namespace fg {

namespace {

/// The hyperparameters against the tensors present, before any graph is
/// built: every layer has its tensors, and the embedding, the output and the
/// first layer's matrices have the shapes the hyperparameters give (which
/// bounds head_dim × heads, the FFN and the expert count by the file).
llvm::Error checkAgainstTensors(const DecoderConfig &c, const TensorSource &src,
                                llvm::StringRef where) {
  for (int64_t il = 0; il < c.nLayers; ++il) {
    std::string norm = "blk." + std::to_string(il) + ".attn_norm";
    if (!src.storedDType(norm))
      return makeError(where, Loc{},
                       "the hyperparameters give " + llvm::Twine(c.nLayers) +
                           " layers but the weights hold " + llvm::Twine(il) + " (no tensor for " +
                           norm + ")");
  }
  const int64_t d = c.resolvedHeadDim();
  const int64_t qDim = c.nHeads * d, kvDim = c.nKvHeads * d; // validated: no overflow
  std::vector<std::pair<std::string, Shape>> expect = {{"token_embd", {c.vocab, c.nEmbd}},
                                                       {"blk.0.attn_q", {qDim, c.nEmbd}},
                                                       {"blk.0.attn_k", {kvDim, c.nEmbd}},
                                                       {"blk.0.attn_v", {kvDim, c.nEmbd}},
                                                       {"blk.0.attn_output", {c.nEmbd, qDim}}};
  if (c.ffn == DecoderConfig::FfnKind::Dense) {
    expect.push_back({"blk.0.ffn_gate", {c.nFf, c.nEmbd}});
    expect.push_back({"blk.0.ffn_up", {c.nFf, c.nEmbd}});
    expect.push_back({"blk.0.ffn_down", {c.nEmbd, c.nFf}});
  } else {
    expect.push_back({"blk.0.ffn_gate_inp", {c.nExperts, c.nEmbd}});
  }
  if (!c.tieEmbeddings)
    expect.push_back({"output", {c.vocab, c.nEmbd}});
  for (const auto &[name, shape] : expect)
    if (llvm::Error e = src.checkShape(name, shape))
      return e;
  return llvm::Error::success();
}

} // namespace

llvm::Expected<LoadedModel> buildModel(const ModelHParams &hp, const TensorSource &source,
                                       const DecoderBuildOptions &opts, llvm::StringRef where) {
  auto config = decoderConfigFor(hp, opts.ctx, opts.kvDType);
  if (!config)
    return makeError(where, Loc{}, llvm::toString(config.takeError()));
  if (llvm::Error e = checkAgainstTensors(*config, source, where))
    return e;
  const DType matrixMark = config->weightDType;
  // Matrices (and the embedding) keep the dtype they are stored in; everything
  // else is f32 by the blocks' rule.
  config->weightDTypeOf = [&source, matrixMark](const DecoderConfig &, llvm::StringRef name, DType dflt,
                                                     llvm::ArrayRef<int64_t>) {
    if (dflt != matrixMark)
      return dflt;
    return source.storedDType(name).value_or(dflt);
  };
  auto graph = buildDecoderGraph(
      *config, decoderEntries(opts.prefill, opts.allLogits ? LogitRows::All : LogitRows::Last));
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
      a.init = w->recipe.isPlainRange() ? WeightInit::tensor(w->source().file, w->source().tensor)
                                        : WeightInit();
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
