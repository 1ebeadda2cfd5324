//===- qwen2.cpp - the qwen2 family (Qwen2, Qwen2.5) ----------------------===//
//
//   GGUF          qwen2
//   config.json   qwen2
//   decoder       neox rope; q/k/v projections with biases
//   HF weights    the standard transformers names, used as stored
//
//===----------------------------------------------------------------------===//
#include "frontends/models/Family.h"

namespace fg {

namespace {

void decoderOptions(const ModelHParams &, DecoderConfig &c) { c.qkvBias = true; }

constexpr llvm::StringRef kArchs[] = {"qwen2"};

} // namespace

extern const ModelFamily kQwen2Family = {
    .name = "qwen2",
    .ggufArchs = kArchs,
    .hfModelTypes = kArchs,
    .decoderOptions = decoderOptions,
};

} // namespace fg
