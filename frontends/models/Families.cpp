//===- Families.cpp - llama, qwen2, qwen3, qwen3moe, gemma3 ---------------===//
//
//   family    rope (canonical)  extras
//   llama     normal            rope_freqs (Llama 3 scaling), tied (SmolLM2)
//   qwen2     neox              q/k/v biases
//   qwen3     neox              q/k rms-norm before rope
//   qwen3moe  neox              q/k-norm, softmax top-k routing, stacked experts
//   gemma3    neox              √n_embd embedding scale, pre+post norms, q/k-norm,
//                               gelu-tanh gated FFN, sliding layers with a local
//                               rope base, scale 1/√query_pre_attn_scalar
//
// llama's canonical rope is GGUF's (normal, q/k rows permuted) so GGUF files
// are used as they are; Canonical.cpp permutes HF's rows to match.
//
//===----------------------------------------------------------------------===//
#include "frontends/models/Families.h"

#include "frontends/gguf/GgufFile.h"
#include "frontends/safetensors/Safetensors.h"
#include "ir/Diag.h"

#include <cmath>

namespace fg {

llvm::StringRef familyName(ModelFamily f) {
  switch (f) {
  case ModelFamily::Llama:
    return "llama";
  case ModelFamily::Qwen2:
    return "qwen2";
  case ModelFamily::Qwen3:
    return "qwen3";
  case ModelFamily::Qwen3Moe:
    return "qwen3moe";
  case ModelFamily::Gemma3:
    return "gemma3";
  }
  return "unknown";
}

std::optional<ModelFamily> familyFromGgufArch(llvm::StringRef arch) {
  for (ModelFamily f : {ModelFamily::Llama, ModelFamily::Qwen2, ModelFamily::Qwen3,
                        ModelFamily::Qwen3Moe, ModelFamily::Gemma3})
    if (arch == familyName(f))
      return f;
  return std::nullopt;
}

std::optional<ModelFamily> familyFromHfModelType(llvm::StringRef t) {
  if (t == "llama")
    return ModelFamily::Llama;
  if (t == "qwen2")
    return ModelFamily::Qwen2;
  if (t == "qwen3")
    return ModelFamily::Qwen3;
  if (t == "qwen3_moe")
    return ModelFamily::Qwen3Moe;
  if (t == "gemma3_text" || t == "gemma3")
    return ModelFamily::Gemma3;
  return std::nullopt;
}

std::vector<float> llama3RopeFactors(const Llama3RopeScaling &s, double theta, int64_t headDim) {
  // convert_hf_to_gguf.py (LlamaModel.generate_extra_tensors), in f64.
  const double pi = 3.14159265358979323846;
  double lowWavelen = s.originalContext / s.lowFreqFactor;
  double highWavelen = s.originalContext / s.highFreqFactor;
  std::vector<float> out;
  for (int64_t i = 0; i < headDim; i += 2) {
    double freq = 1.0 / std::pow(theta, static_cast<double>(i) / static_cast<double>(headDim));
    double wavelen = 2 * pi / freq;
    double f;
    if (wavelen < highWavelen)
      f = 1;
    else if (wavelen > lowWavelen)
      f = s.factor;
    else {
      double smooth =
          (s.originalContext / wavelen - s.lowFreqFactor) / (s.highFreqFactor - s.lowFreqFactor);
      f = 1 / ((1 - smooth) / s.factor + smooth);
    }
    out.push_back(static_cast<float>(f));
  }
  return out;
}

llvm::Expected<DecoderConfig> decoderConfigFor(const ModelHParams &hp, int64_t ctx, DType kvDType) {
  DecoderConfig c;
  c.nLayers = hp.nLayers;
  c.nEmbd = hp.nEmbd;
  c.nHeads = hp.nHeads;
  c.nKvHeads = hp.nKvHeads;
  c.headDim = hp.headDim;
  c.vocab = hp.vocab;
  c.nFf = hp.nFf;
  // GGUF stores these as f32 and the kernels use them in f32: round the
  // config.json doubles the same way, so both formats give the same graph.
  c.normEps = static_cast<float>(hp.normEps);
  c.rope.theta = static_cast<float>(hp.ropeTheta);
  c.rope.freqScale = 1 / static_cast<double>(static_cast<float>(hp.ropeLinearFactor));
  c.rope.mode = RopeMode::Neox;
  c.tieEmbeddings = hp.tieEmbeddings;
  c.ctx = ctx;
  c.kvDType = kvDType;
  // Matrices take the file's dtype (weightDTypeOf, set by the loader); this
  // marks them as "not f32 by rule".
  c.weightDType = DType::F16;
  c.glu = GluKind::SwiGLU;
  switch (hp.family) {
  case ModelFamily::Llama:
    c.rope.mode = RopeMode::Normal;
    c.ropeFreqFactors = hp.llama3Rope.has_value();
    break;
  case ModelFamily::Qwen2:
    c.qkvBias = true;
    break;
  case ModelFamily::Qwen3:
    c.qkNorm = true;
    break;
  case ModelFamily::Qwen3Moe:
    c.qkNorm = true;
    c.ffn = DecoderConfig::FfnKind::Moe;
    c.nExperts = hp.nExperts;
    c.nExpertsUsed = hp.nExpertsUsed;
    c.expertFf = hp.expertFf;
    c.gating = TopkGating::Softmax;
    c.renormalizeExperts = hp.normTopkProb;
    break;
  case ModelFamily::Gemma3: {
    c.qkNorm = true;
    c.postNorms = true;
    c.glu = GluKind::GeGLU;
    c.embdScale = std::sqrt(static_cast<double>(hp.nEmbd));
    double qpas = hp.queryPreAttnScalar > 0 ? hp.queryPreAttnScalar
                                            : static_cast<double>(c.resolvedHeadDim());
    c.attnScale = 1 / std::sqrt(qpas);
    c.attnSoftcap = hp.attnSoftcap;
    c.slidingWindow = hp.slidingWindow;
    c.slidingLayers = hp.slidingLayers;
    Builder::RopeParams local = c.rope;
    local.theta = static_cast<float>(hp.ropeLocalTheta);
    local.freqScale = 1;
    c.ropeSliding = local;
    break;
  }
  }
  if (auto e = validateDecoderConfig(c))
    return e;
  return c;
}

// --- GGUF metadata ------------------------------------------------------------------

namespace {

/// Reads `<arch>.<key>`; per-layer arrays are refused with a clear error.
struct GgufKeys {
  const GgufFile &f;
  std::string arch;

  std::string key(llvm::StringRef k) const { return arch + "." + k.str(); }
  llvm::Expected<int64_t> i(llvm::StringRef k) const { return f.getInt(key(k)); }
  llvm::Expected<int64_t> i(llvm::StringRef k, int64_t dflt) const {
    auto v = f.optInt(key(k));
    if (!v)
      return v.takeError();
    return v->value_or(dflt);
  }
  llvm::Expected<double> d(llvm::StringRef k, double dflt) const {
    auto v = f.optFloat(key(k));
    if (!v)
      return v.takeError();
    return v->value_or(dflt);
  }
};

#define FG_TRY(var, expr)                                                                          \
  auto var##OrErr = (expr);                                                                        \
  if (!var##OrErr)                                                                                 \
    return var##OrErr.takeError();                                                                 \
  auto var = std::move(*var##OrErr);

} // namespace

llvm::Expected<ModelHParams> hparamsFromGguf(const GgufFile &f) {
  FG_TRY(arch, f.getString("general.architecture"));
  std::optional<ModelFamily> fam = familyFromGgufArch(arch);
  if (!fam)
    return f.error("unknown architecture '" + arch +
                   "' in general.architecture (supported: llama, qwen2, qwen3, qwen3moe, gemma3)");
  ModelHParams hp;
  hp.family = *fam;
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
  if (hp.family == ModelFamily::Qwen3Moe) {
    FG_TRY(ne, k.i("expert_count"));
    FG_TRY(nu, k.i("expert_used_count"));
    FG_TRY(eff, k.i("expert_feed_forward_length"));
    hp.nExperts = ne;
    hp.nExpertsUsed = nu;
    hp.expertFf = eff;
    // llama.cpp's qwen3moe renormalises unless the file says otherwise.
    FG_TRY(norm, f.optInt(k.key("expert_weights_norm")));
    hp.normTopkProb = norm.value_or(1) != 0;
  } else {
    FG_TRY(ff, k.i("feed_forward_length"));
    hp.nFf = ff;
  }
  if (hp.family == ModelFamily::Gemma3) {
    FG_TRY(window, k.i("attention.sliding_window"));
    hp.slidingWindow = window;
    FG_TRY(localTheta, k.d("rope.freq_base_swa", 10000));
    hp.ropeLocalTheta = localTheta;
    int64_t period = 6; // llama.cpp's gemma3 pattern: every 6th layer is global
    hp.slidingLayers.clear();
    if (const GgufValue *p = f.meta(k.key("attention.sliding_window_pattern"))) {
      if (p->type == GgufType::Array) {
        if (static_cast<int64_t>(p->elems.size()) != hp.nLayers)
          return f.error("metadata key '" + k.key("attention.sliding_window_pattern") + "' has " +
                         llvm::Twine(p->elems.size()) + " entries for " + llvm::Twine(hp.nLayers) +
                         " layers");
        for (const GgufValue &e : p->elems)
          hp.slidingLayers.push_back(e.asInt().value_or(0) != 0);
      } else if (std::optional<int64_t> v = p->asInt(); v && *v > 0) {
        period = *v;
      } else {
        return f.error("metadata key '" + k.key("attention.sliding_window_pattern") +
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
    if (auto fs = f.optFloat(k.key("final_logit_softcapping")); !fs)
      return fs.takeError();
    else if (fs->value_or(0) != 0)
      return f.error("metadata key '" + k.key("final_logit_softcapping") +
                     "': final logit soft-capping is not supported");
  }
  const GgufTensorInfo *embd = f.tensor("token_embd.weight");
  if (!embd)
    return f.error("missing tensor 'token_embd.weight'");
  if (embd->shape.size() != 2)
    return f.error("tensor 'token_embd.weight' must be 2-D, got " + shapeStr(embd->shape));
  hp.vocab = embd->shape[0];
  hp.tieEmbeddings = f.tensor("output.weight") == nullptr;
  if (hp.family == ModelFamily::Llama && f.tensor("rope_freqs.weight"))
    hp.llama3Rope = Llama3RopeScaling{}; // the factors are in the file
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
  std::optional<ModelFamily> fam = familyFromHfModelType(modelType);
  if (!fam)
    return root.error("unknown architecture: model_type '" + modelType +
                      "' (supported: llama, qwen2, qwen3, qwen3_moe, gemma3_text)");
  // Multimodal gemma3 keeps the text model's settings in text_config.
  std::optional<HfConfig> text = root.sub("text_config");
  const HfConfig &c = (modelType == "gemma3" && text) ? *text : root;
  ModelHParams hp;
  hp.family = *fam;
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
  bool gemma = hp.family == ModelFamily::Gemma3;
  if (!activation.empty() && (gemma ? (activation != "gelu_pytorch_tanh") : (activation != "silu")))
    return c.error(llvm::Twine("key '") + (act2 ? "hidden_activation" : "hidden_act") + "': '" +
                   activation + "' is not supported for " + familyName(hp.family) + " (expected " +
                   (gemma ? "gelu_pytorch_tanh" : "silu") + ")");
  for (llvm::StringRef key : {"attention_bias", "mlp_bias"})
    if (hp.family == ModelFamily::Llama || hp.family == ModelFamily::Qwen3 ||
        hp.family == ModelFamily::Qwen3Moe) {
      FG_TRY(bias, c.optBool(key));
      if (bias.value_or(false))
        return c.error("key '" + key + "': biases are not supported for " + familyName(hp.family));
    }

  FG_TRY(tie, c.optBool("tie_word_embeddings"));
  FG_TRY(tieRoot, root.optBool("tie_word_embeddings"));
  // transformers' default is true for gemma3 and false for the others.
  hp.tieEmbeddings = tie ? *tie : tieRoot.value_or(gemma);

  if (hp.family == ModelFamily::Qwen3Moe) {
    // transformers 5 writes num_local_experts; earlier versions num_experts.
    FG_TRY(neOld, c.optInt("num_experts"));
    FG_TRY(neNew, c.optInt("num_local_experts"));
    if (!neOld && !neNew)
      return c.error("missing key 'num_experts' (or 'num_local_experts')");
    int64_t ne = neOld ? *neOld : *neNew;
    FG_TRY(nu, c.getInt("num_experts_per_tok"));
    FG_TRY(eff, c.getInt("moe_intermediate_size"));
    FG_TRY(norm, c.optBool("norm_topk_prob"));
    FG_TRY(step, c.optInt("decoder_sparse_step"));
    FG_TRY(mlpOnly, c.optInts("mlp_only_layers"));
    hp.nExperts = ne;
    hp.nExpertsUsed = nu;
    hp.expertFf = eff;
    hp.normTopkProb = norm.value_or(false);
    if (step.value_or(1) != 1)
      return c.error("key 'decoder_sparse_step' = " + llvm::Twine(*step) +
                     ": only 1 (every layer MoE) is supported");
    if (mlpOnly && !mlpOnly->empty())
      return c.error("key 'mlp_only_layers': dense layers inside a MoE model are not supported");
  } else {
    FG_TRY(ff, c.getInt("intermediate_size"));
    hp.nFf = ff;
  }

  FG_TRY(rope, hfRope(c, gemma ? "full_attention" : "", 10000));
  hp.ropeTheta = rope.theta;
  if (rope.type && *rope.type != "default") {
    const HfConfig &s = *rope.params;
    if (*rope.type == "llama3" && hp.family == ModelFamily::Llama) {
      Llama3RopeScaling l3;
      FG_TRY(factor, s.getFloat("factor"));
      FG_TRY(lo, s.optFloat("low_freq_factor"));
      FG_TRY(hi, s.optFloat("high_freq_factor"));
      FG_TRY(orig, s.optInt("original_max_position_embeddings"));
      l3.factor = factor;
      l3.lowFreqFactor = lo.value_or(1);
      l3.highFreqFactor = hi.value_or(4);
      l3.originalContext = orig.value_or(8192);
      if (!(l3.highFreqFactor > l3.lowFreqFactor) || l3.factor <= 0)
        return c.error("key 'rope_scaling': llama3 scaling needs factor > 0 and "
                       "high_freq_factor > low_freq_factor");
      hp.llama3Rope = l3;
    } else if (*rope.type == "linear") {
      FG_TRY(factor, s.getFloat("factor"));
      if (!(factor > 0))
        return c.error("key 'rope_scaling.factor' must be > 0");
      hp.ropeLinearFactor = factor;
    } else {
      return c.error("key 'rope_scaling': rope type '" + *rope.type + "' is not supported for " +
                     familyName(hp.family));
    }
  }

  if (gemma) {
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
  }
  return hp;
}

} // namespace fg
