//===- gemma3.cpp - the gemma3 family (Gemma 3 text models) ---------------===//
//
//   GGUF          gemma3: attention.sliding_window, rope.freq_base_swa,
//                 attention.sliding_window_pattern (a period or a per-layer
//                 bool array; default: every 6th layer global),
//                 attention.scale, attn_logit_softcapping
//   config.json   gemma3_text (or gemma3, multimodal: text_config):
//                 sliding_window, query_pre_attn_scalar, rope_local_base_freq,
//                 layer_types or sliding_window_pattern,
//                 attn_logit_softcapping; hidden_activation gelu_pytorch_tanh;
//                 tie_word_embeddings defaults to true; the global layers' rope
//                 is rope_parameters.full_attention (transformers 5)
//   decoder       neox rope; √n_embd embedding scale; pre+post norms around
//                 attention and FFN; q/k-norm; gelu-tanh gated FFN (GeGLU);
//                 sliding layers with a local rope base (no linear scaling);
//                 attention scale 1/√query_pre_attn_scalar; final logit
//                 soft-capping refused
//   HF weights    norms stored as w for (1 + w): +1 folded in (add_scalar
//                 recipes); pre_feedforward_layernorm is the FFN norm,
//                 post_attention_layernorm / post_feedforward_layernorm the
//                 post norms
//
//===----------------------------------------------------------------------===//
#include "frontends/models/Family.h"
#include "frontends/models/Try.h"

#include "frontends/gguf/GgufFile.h"
#include "frontends/safetensors/Safetensors.h"

#include <cmath>

namespace fg {

namespace {

llvm::Error ggufHParams(const GgufKeys &k, ModelHParams &hp) {
  FG_TRY(window, k.i("attention.sliding_window"));
  hp.slidingWindow = window;
  FG_TRY(localTheta, k.d("rope.freq_base_swa", 10000));
  hp.ropeLocalTheta = localTheta;
  int64_t period = 6; // llama.cpp's gemma3 pattern: every 6th layer is global
  hp.slidingLayers.clear();
  if (const GgufValue *p = k.f.meta(k.key("attention.sliding_window_pattern"))) {
    if (p->type == GgufType::Array) {
      if (static_cast<int64_t>(p->elems.size()) != hp.nLayers)
        return k.f.error("metadata key '" + k.key("attention.sliding_window_pattern") + "' has " +
                         llvm::Twine(p->elems.size()) + " entries for " + llvm::Twine(hp.nLayers) +
                         " layers");
      for (const GgufValue &e : p->elems)
        hp.slidingLayers.push_back(e.asInt().value_or(0) != 0);
    } else if (std::optional<int64_t> v = p->asInt(); v && *v > 0) {
      period = *v;
    } else {
      return k.f.error("metadata key '" + k.key("attention.sliding_window_pattern") +
                       "' must be a positive period or a per-layer bool array");
    }
  }
  if (hp.slidingLayers.empty())
    for (int64_t il = 0; il < hp.nLayers; ++il)
      hp.slidingLayers.push_back((il + 1) % period != 0);
  // llama.cpp: 1/√(n_embd / n_head) for the 27B model (62 layers), else 1/√head_dim;
  // GGUF files do not store query_pre_attn_scalar.
  hp.queryPreAttnScalar = hp.nLayers == 62 && hp.nHeads > 0
                              ? static_cast<double>(hp.nEmbd / hp.nHeads)
                              : static_cast<double>(hp.headDim);
  FG_TRY(scale, k.d("attention.scale", 0)); // written by newer converters
  if (scale > 0)
    hp.queryPreAttnScalar = 1 / (scale * scale);
  FG_TRY(softcap, k.d("attn_logit_softcapping", 0));
  hp.attnSoftcap = softcap;
  if (auto fs = k.f.optFloat(k.key("final_logit_softcapping")); !fs)
    return fs.takeError();
  else if (fs->value_or(0) != 0)
    return k.f.error("metadata key '" + k.key("final_logit_softcapping") +
                     "': final logit soft-capping is not supported");
  return llvm::Error::success();
}

llvm::Error hfHParams(const HfConfig &c, ModelHParams &hp) {
  FG_TRY(window, c.getInt("sliding_window"));
  hp.slidingWindow = window;
  FG_TRY(qpas, c.optFloat("query_pre_attn_scalar"));
  hp.queryPreAttnScalar = qpas.value_or(static_cast<double>(hp.headDim));
  FG_TRY(softcap, c.optFloat("attn_logit_softcapping"));
  hp.attnSoftcap = softcap.value_or(0);
  FG_TRY(finalCap, c.optFloat("final_logit_softcapping"));
  if (finalCap.value_or(0) != 0)
    return c.error("key 'final_logit_softcapping': final logit soft-capping is not supported");
  FG_TRY(localBase, c.optFloat("rope_local_base_freq"));
  FG_TRY(localParams, c.optFloat("rope_parameters.sliding_attention.rope_theta"));
  hp.ropeLocalTheta = localBase ? *localBase : localParams.value_or(10000);
  FG_TRY(types, c.optStrings("layer_types"));
  if (types) {
    if (static_cast<int64_t>(types->size()) != hp.nLayers)
      return c.error("key 'layer_types' lists " + llvm::Twine(types->size()) + " layers but " +
                     "num_hidden_layers is " + llvm::Twine(hp.nLayers));
    for (const std::string &t : *types) {
      if (t != "sliding_attention" && t != "full_attention")
        return c.error("key 'layer_types': unknown layer type '" + t + "'");
      hp.slidingLayers.push_back(t == "sliding_attention");
    }
  } else {
    FG_TRY(period, c.optInt("sliding_window_pattern"));
    int64_t p = period.value_or(6);
    if (p < 1)
      return c.error("key 'sliding_window_pattern' must be >= 1");
    for (int64_t il = 0; il < hp.nLayers; ++il)
      hp.slidingLayers.push_back((il + 1) % p != 0);
  }
  return llvm::Error::success();
}

void decoderOptions(const ModelHParams &hp, DecoderConfig &c) {
  c.qkNorm = true;
  c.postNorms = true;
  c.glu = GluKind::GeGLU;
  c.embdScale = std::sqrt(static_cast<double>(hp.nEmbd));
  double qpas =
      hp.queryPreAttnScalar > 0 ? hp.queryPreAttnScalar : static_cast<double>(c.resolvedHeadDim());
  c.attnScale = 1 / std::sqrt(qpas);
  c.attnSoftcap = hp.attnSoftcap;
  c.slidingWindow = hp.slidingWindow;
  c.slidingLayers = hp.slidingLayers;
  Builder::RopeParams local = c.rope;
  local.theta = static_cast<float>(hp.ropeLocalTheta);
  local.freqScale = 1;
  c.ropeSliding = local;
}

constexpr llvm::StringRef kGgufArchs[] = {"gemma3"};
constexpr llvm::StringRef kHfModelTypes[] = {"gemma3_text", "gemma3"};
constexpr HfTensorName kHfNames[] = {
    {"ffn_norm", "pre_feedforward_layernorm.weight"},
    {"post_attention_norm", "post_attention_layernorm.weight"},
    {"post_ffw_norm", "post_feedforward_layernorm.weight"},
};

} // namespace

extern const ModelFamily kGemma3Family = {
    .name = "gemma3",
    .ggufArchs = kGgufArchs,
    .hfModelTypes = kHfModelTypes,
    .hfMultimodalModelType = "gemma3",
    .ggufHParams = ggufHParams,
    .hfHParams = hfHParams,
    .hfActivation = "gelu_pytorch_tanh",
    .hfTiesByDefault = true,
    .hfRopeLayerKind = "full_attention",
    .decoderOptions = decoderOptions,
    .hfNormPlusOne = true,
    .hfLayerNames = kHfNames,
};

} // namespace fg
