//===- qwen3moe.cpp - the qwen3moe family (Qwen3-30B-A3B, ...) ------------===//
//
//   GGUF          qwen3moe: expert_count, expert_used_count,
//                 expert_feed_forward_length, expert_weights_norm (default 1)
//   config.json   qwen3_moe: num_experts (transformers 5: num_local_experts),
//                 num_experts_per_tok, moe_intermediate_size, norm_topk_prob
//                 (default false), decoder_sparse_step = 1 and no
//                 mlp_only_layers (every layer MoE); no biases
//   decoder       neox rope; q/k-norm; every FFN a MoE: softmax top-k routing
//                 [renormalised], stacked experts blk.N.ffn_{gate,up,down}_exps
//   HF weights    per-expert matrices mlp.experts.E.*_proj stacked into
//                 [E, out, in] (concat recipes; the standard names)
//
//===----------------------------------------------------------------------===//
#include "frontends/models/Family.h"
#include "frontends/models/Try.h"

#include "frontends/gguf/GgufFile.h"
#include "frontends/safetensors/Safetensors.h"

namespace fg {

namespace {

llvm::Error ggufHParams(const GgufKeys &k, ModelHParams &hp) {
  FG_TRY(ne, k.i("expert_count"));
  FG_TRY(nu, k.i("expert_used_count"));
  FG_TRY(eff, k.i("expert_feed_forward_length"));
  hp.nExperts = ne;
  hp.nExpertsUsed = nu;
  hp.expertFf = eff;
  // llama.cpp's qwen3moe renormalises unless the file says otherwise.
  FG_TRY(norm, k.f.optInt(k.key("expert_weights_norm")));
  hp.normTopkProb = norm.value_or(1) != 0;
  return llvm::Error::success();
}

llvm::Error hfHParams(const HfConfig &c, ModelHParams &hp) {
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
  return llvm::Error::success();
}

void decoderOptions(const ModelHParams &hp, DecoderConfig &c) {
  c.qkNorm = true;
  c.ffn = DecoderConfig::FfnKind::Moe;
  c.nExperts = hp.nExperts;
  c.nExpertsUsed = hp.nExpertsUsed;
  c.expertFf = hp.expertFf;
  c.gating = TopkGating::Softmax;
  c.renormalizeExperts = hp.normTopkProb;
}

constexpr llvm::StringRef kGgufArchs[] = {"qwen3moe"};
constexpr llvm::StringRef kHfModelTypes[] = {"qwen3_moe"};

} // namespace

extern const ModelFamily kQwen3MoeFamily = {
    .name = "qwen3moe",
    .ggufArchs = kGgufArchs,
    .hfModelTypes = kHfModelTypes,
    .moe = true,
    .ggufHParams = ggufHParams,
    .hfHParams = hfHParams,
    .hfRefusesBiases = true,
    .decoderOptions = decoderOptions,
};

} // namespace fg
