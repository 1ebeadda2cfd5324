//===- llama.cpp - the llama family (Llama 2/3, SmolLM2, ...) -------------===//
//
//   GGUF          llama; rope_freqs.weight present: Llama-3 rope scaling
//   config.json   llama; rope_scaling.rope_type "llama3" (factor,
//                 low/high_freq_factor, original_max_position_embeddings);
//                 no biases
//   decoder       normal (interleaved) rope; rope_freqs frequency factors
//                 under Llama-3 scaling; tied embeddings when output is absent
//   HF weights    q/k rows permuted like convert_hf_to_gguf.py's permute(), so
//                 the canonical rope is GGUF's normal one; rope_freqs computed
//                 from rope_scaling (the one weight embedded as bytes)
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
  if (k.f.tensor("rope_freqs.weight"))
    hp.llama3Rope = Llama3RopeScaling{}; // the factors are in the file
  return llvm::Error::success();
}

llvm::Error hfLlama3Rope(const HfConfig &s, const HfConfig &c, ModelHParams &hp) {
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
  return llvm::Error::success();
}

void decoderOptions(const ModelHParams &hp, DecoderConfig &c) {
  c.rope.mode = RopeMode::Normal;
  c.ropeFreqFactors = hp.llama3Rope.has_value();
}

/// Llama-3 frequency factors [head_dim / 2] (as llama.cpp's converter computes
/// rope_freqs.weight, convert_hf_to_gguf.py's LlamaModel.generate_extra_tensors,
/// here in f64: ggml divides each rotation frequency by its factor).
std::vector<float> llama3RopeFactors(const Llama3RopeScaling &s, double theta, int64_t headDim) {
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

std::optional<HfComputedWeight> hfComputedWeight(llvm::StringRef name, const ModelHParams &hp) {
  if (name != "rope_freqs" || !hp.llama3Rope)
    return std::nullopt;
  return HfComputedWeight{llama3RopeFactors(*hp.llama3Rope, hp.ropeTheta, hp.headDim),
                          "computed from rope_scaling (llama3)"};
}

constexpr llvm::StringRef kArchs[] = {"llama"};

} // namespace

extern const ModelFamily kLlamaFamily = {
    .name = "llama",
    .ggufArchs = kArchs,
    .hfModelTypes = kArchs,
    .ggufHParams = ggufHParams,
    .hfRefusesBiases = true,
    .hfRopeScalingType = "llama3",
    .hfRopeScaling = hfLlama3Rope,
    .decoderOptions = decoderOptions,
    .hfPermuteQK = true,
    .hfComputedWeight = hfComputedWeight,
};

} // namespace fg
