//===- qwen3.cpp - the qwen3 family (dense Qwen3) -------------------------===//
//
//   GGUF          qwen3
//   config.json   qwen3; no biases
//   decoder       neox rope; rms-norm of q and k per head before the rope
//                 (blk.N.attn_q_norm / attn_k_norm [head_dim])
//   HF weights    the standard transformers names, used as stored
//
//===----------------------------------------------------------------------===//
#include "frontends/models/Family.h"

namespace fg {

namespace {

void decoderOptions(const ModelHParams &, DecoderConfig &c) { c.qkNorm = true; }

constexpr llvm::StringRef kArchs[] = {"qwen3"};

} // namespace

extern const ModelFamily kQwen3Family = {
    .name = "qwen3",
    .ggufArchs = kArchs,
    .hfModelTypes = kArchs,
    .hfRefusesBiases = true,
    .decoderOptions = decoderOptions,
};

} // namespace fg
