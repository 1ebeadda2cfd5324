//===- HParams.cpp - the hyperparameters every family shares --------------===//
//
// Both readers look the family up in the table (Family.h), read the keys
// every family has, and call the family's hook for the rest:
//
//   GGUF          <arch>.block_count, embedding_length, attention.head_count[_kv],
//                 key/value_length, layer_norm_rms_epsilon, rope.freq_base,
//                 rope.scaling.{type,factor}, feed_forward_length (dense),
//                 then ggufHParams; vocab and ties from token_embd / output
//   config.json   num_hidden_layers, hidden_size, num_attention_heads,
//                 num_key_value_heads, head_dim, vocab_size, rms_norm_eps,
//                 hidden_act(ivation), attention_bias / mlp_bias,
//                 tie_word_embeddings, intermediate_size (dense), then
//                 hfHParams, then rope_theta / rope_scaling / rope_parameters
//
//===----------------------------------------------------------------------===//
#include "frontends/models/Family.h"
#include "frontends/models/Try.h"

#include "frontends/gguf/GgufFile.h"
#include "frontends/safetensors/Safetensors.h"
#include "ir/Diag.h"

namespace fg {

// --- GGUF metadata ------------------------------------------------------------------

llvm::Expected<ModelHParams> hparamsFromGguf(const GgufFile &f) {
  FG_TRY(arch, f.getString("general.architecture"));
  const ModelFamily *fam = familyForGgufArch(arch);
  if (!fam)
    return f.error("unknown architecture '" + arch +
                   "' in general.architecture (supported: " + supportedGgufArchs() + ")");
  ModelHParams hp;
  hp.family = fam;
  GgufKeys k{f, arch};
  for (llvm::StringRef key :
       {"attention.head_count", "attention.head_count_kv", "feed_forward_length"})
    if (const GgufValue *v = f.meta(k.key(key)); v && v->type == GgufType::Array)
      return f.error("metadata key '" + k.key(key) +
                     "' holds per-layer values, which are not supported");
  FG_TRY(nLayers, k.i("block_count"));
  FG_TRY(nEmbd, k.i("embedding_length"));
  FG_TRY(nHeads, k.i("attention.head_count"));
  FG_TRY(nKv, k.i("attention.head_count_kv", nHeads));
  // Every layer has tensors: a layer count above the tensor count is corrupt
  // metadata (checked before anything loops over the layers).
  if (nLayers > static_cast<int64_t>(f.tensors().size()))
    return f.error("metadata key '" + k.key("block_count") + "' gives " + llvm::Twine(nLayers) +
                   " layers but the file holds only " + llvm::Twine(f.tensors().size()) +
                   " tensors");
  hp.nLayers = nLayers;
  hp.nEmbd = nEmbd;
  hp.nHeads = nHeads;
  hp.nKvHeads = nKv;
  FG_TRY(headDim, k.i("attention.key_length", nHeads > 0 ? nEmbd / nHeads : 0));
  if (f.meta(k.key("attention.key_length")) && headDim < 1)
    return f.error("metadata key '" + k.key("attention.key_length") + "' must be >= 1, got " +
                   llvm::Twine(headDim));
  FG_TRY(headDimV, k.i("attention.value_length", headDim));
  if (headDimV != headDim)
    return f.error("metadata key '" + k.key("attention.value_length") + "' (" +
                   llvm::Twine(headDimV) + ") differs from the key length " + llvm::Twine(headDim) +
                   "; not supported");
  hp.headDim = headDim;
  FG_TRY(eps, k.d("attention.layer_norm_rms_epsilon", 1e-5));
  hp.normEps = eps;
  FG_TRY(theta, k.d("rope.freq_base", 10000));
  hp.ropeTheta = theta;
  if (const GgufValue *st = f.meta(k.key("rope.scaling.type"))) {
    if (st->type != GgufType::String)
      return f.error("metadata key '" + k.key("rope.scaling.type") + "' must be a string");
    if (st->s == "linear") {
      FG_TRY(factor, k.d("rope.scaling.factor", 1));
      if (!(factor > 0))
        return f.error("metadata key '" + k.key("rope.scaling.factor") + "' must be > 0");
      hp.ropeLinearFactor = factor;
    } else if (st->s != "none") {
      return f.error("metadata key '" + k.key("rope.scaling.type") + "': rope scaling '" + st->s +
                     "' is not supported (none, linear)");
    }
  }
  if (!fam->moe) {
    FG_TRY(ff, k.i("feed_forward_length"));
    hp.nFf = ff;
  }
  if (fam->ggufHParams)
    if (llvm::Error e = fam->ggufHParams(k, hp))
      return e;
  const GgufTensorInfo *embd = f.tensor("token_embd.weight");
  if (!embd)
    return f.error("missing tensor 'token_embd.weight'");
  if (embd->shape.size() != 2)
    return f.error("tensor 'token_embd.weight' must be 2-D, got " + shapeStr(embd->shape));
  hp.vocab = embd->shape[0];
  hp.tieEmbeddings = f.tensor("output.weight") == nullptr;
  return hp;
}

// --- config.json ----------------------------------------------------------------------

namespace {

/// Rope settings of one attention kind: {theta, scaling object} from legacy
/// keys (rope_theta, rope_scaling) or transformers 5's rope_parameters.
struct HfRope {
  double theta = 10000;
  std::optional<std::string> type;
  std::optional<HfConfig> params; ///< the object holding factor, low_freq_factor, ...
};

llvm::Expected<HfRope> hfRope(const HfConfig &c, llvm::StringRef layerKind, double dfltTheta) {
  HfRope r;
  r.theta = dfltTheta;
  std::optional<HfConfig> rp = c.sub("rope_parameters");
  if (rp && !layerKind.empty())
    if (std::optional<HfConfig> perKind = rp->sub(layerKind))
      rp = std::move(perKind);
  FG_TRY(theta, c.optFloat("rope_theta"));
  if (theta)
    r.theta = *theta;
  if (rp) {
    FG_TRY(t2, rp->optFloat("rope_theta"));
    if (t2)
      r.theta = *t2;
  }
  std::optional<HfConfig> scaling = c.sub("rope_scaling");
  if (!scaling && rp)
    scaling = std::move(rp);
  if (scaling) {
    FG_TRY(t, scaling->optString("rope_type"));
    FG_TRY(t2, scaling->optString("type"));
    r.type = t ? t : t2;
    r.params = std::move(scaling);
  }
  return r;
}

} // namespace

llvm::Expected<ModelHParams> hparamsFromHf(const HfCheckpoint &ck) {
  const HfConfig &root = ck.config();
  FG_TRY(modelType, root.getString("model_type"));
  const ModelFamily *fam = familyForHfModelType(modelType);
  if (!fam)
    return root.error("unknown architecture: model_type '" + modelType +
                      "' (supported: " + supportedHfModelTypes() + ")");
  // A multimodal checkpoint (gemma3) keeps the text model's settings in text_config.
  std::optional<HfConfig> text = root.sub("text_config");
  const HfConfig &c =
      (!fam->hfMultimodalModelType.empty() && modelType == fam->hfMultimodalModelType && text)
          ? *text
          : root;
  ModelHParams hp;
  hp.family = fam;
  FG_TRY(nLayers, c.getInt("num_hidden_layers"));
  FG_TRY(nEmbd, c.getInt("hidden_size"));
  FG_TRY(nHeads, c.getInt("num_attention_heads"));
  FG_TRY(nKv, c.optInt("num_key_value_heads"));
  FG_TRY(headDim, c.optInt("head_dim"));
  FG_TRY(vocab, c.getInt("vocab_size"));
  FG_TRY(eps, c.optFloat("rms_norm_eps"));
  // Every layer has tensors: more layers than tensors is a corrupt config
  // (checked before anything loops over the layers).
  if (size_t tensors = ck.tensorCount(); nLayers > static_cast<int64_t>(tensors))
    return c.error("key 'num_hidden_layers' gives " + llvm::Twine(nLayers) +
                   " layers but the checkpoint holds only " + llvm::Twine(tensors) + " tensors");
  if (headDim && *headDim < 1)
    return c.error("key 'head_dim' must be >= 1, got " + llvm::Twine(*headDim));
  hp.nLayers = nLayers;
  hp.nEmbd = nEmbd;
  hp.nHeads = nHeads;
  hp.nKvHeads = nKv.value_or(nHeads);
  hp.headDim = headDim.value_or(nHeads > 0 ? nEmbd / nHeads : 0);
  hp.vocab = vocab;
  hp.normEps = eps.value_or(1e-6);

  FG_TRY(act, c.optString("hidden_act"));
  FG_TRY(act2, c.optString("hidden_activation"));
  std::string activation = act2 ? *act2 : act.value_or("");
  if (!activation.empty() && activation != fam->hfActivation)
    return c.error(llvm::Twine("key '") + (act2 ? "hidden_activation" : "hidden_act") + "': '" +
                   activation + "' is not supported for " + fam->name + " (expected " +
                   fam->hfActivation + ")");
  for (llvm::StringRef key : {"attention_bias", "mlp_bias"})
    if (fam->hfRefusesBiases) {
      FG_TRY(bias, c.optBool(key));
      if (bias.value_or(false))
        return c.error("key '" + key + "': biases are not supported for " + fam->name);
    }

  FG_TRY(tie, c.optBool("tie_word_embeddings"));
  FG_TRY(tieRoot, root.optBool("tie_word_embeddings"));
  hp.tieEmbeddings = tie ? *tie : tieRoot.value_or(fam->hfTiesByDefault);

  if (!fam->moe) {
    FG_TRY(ff, c.getInt("intermediate_size"));
    hp.nFf = ff;
  }
  if (fam->hfHParams)
    if (llvm::Error e = fam->hfHParams(c, hp))
      return e;

  FG_TRY(rope, hfRope(c, fam->hfRopeLayerKind, 10000));
  hp.ropeTheta = rope.theta;
  if (rope.type && *rope.type != "default") {
    const HfConfig &s = *rope.params;
    if (!fam->hfRopeScalingType.empty() && *rope.type == fam->hfRopeScalingType) {
      if (llvm::Error e = fam->hfRopeScaling(s, c, hp))
        return e;
    } else if (*rope.type == "linear") {
      FG_TRY(factor, s.getFloat("factor"));
      if (!(factor > 0))
        return c.error("key 'rope_scaling.factor' must be > 0");
      hp.ropeLinearFactor = factor;
    } else {
      return c.error("key 'rope_scaling': rope type '" + *rope.type + "' is not supported for " +
                     fam->name);
    }
  }
  return hp;
}

} // namespace fg
