//===- Family.h - one record per model family, and their table ---*- C++ -*-===//
//
// A model family (llama, qwen2, qwen3, qwen3moe, gemma3) is one file,
// frontends/models/families/<family>.cpp, defining one `ModelFamily` record:
// its names in both formats, the hyperparameters it reads beyond the shared
// ones (from GGUF metadata and from config.json, with their range checks), the
// Hugging Face weight conventions (tensor names that depart from the standard
// transformers layout, q/k row permutation, (1 + w) norms, computed weights)
// and the decoder options it sets on a DecoderConfig. One line of
// families/Families.def registers it; the loaders look families up here by
// GGUF general.architecture or config.json model_type.
//
// What every family shares (the common keys, the canonical weight layout,
// the TensorSources) stays in HParams.cpp and Canonical.cpp.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "frontends/DecoderBlocks.h"

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

#include <optional>
#include <string>
#include <vector>

namespace fg {

class GgufFile;
class HfCheckpoint;
class HfConfig;
struct ModelFamily;

/// Llama-3 rope scaling (rope_scaling.rope_type = "llama3").
struct Llama3RopeScaling {
  double factor = 8, lowFreqFactor = 1, highFreqFactor = 4;
  int64_t originalContext = 8192;
};

/// What both formats' readers fill, format-neutral.
struct ModelHParams {
  const ModelFamily *family = nullptr;
  int64_t nLayers = 0, nEmbd = 0, nHeads = 0, nKvHeads = 0, headDim = 0, vocab = 0;
  int64_t nFf = 0;                                      ///< dense
  int64_t nExperts = 0, nExpertsUsed = 0, expertFf = 0; ///< qwen3moe
  bool normTopkProb = true;
  double normEps = 1e-6;
  double ropeTheta = 10000;
  double ropeLinearFactor = 1;                 ///< linear scaling (gemma3's global layers)
  std::optional<Llama3RopeScaling> llama3Rope; ///< rope_freqs factors
  bool tieEmbeddings = false;
  // gemma3
  int64_t slidingWindow = 0;
  std::vector<bool> slidingLayers;
  double ropeLocalTheta = 10000;
  double queryPreAttnScalar = 0; ///< 0: head_dim
  double attnSoftcap = 0;
};

/// Reads `<arch>.<key>` from a GGUF file's metadata (what a family's
/// ggufHParams hook is given; `f` is there for anything else).
struct GgufKeys {
  const GgufFile &f;
  std::string arch;

  std::string key(llvm::StringRef k) const { return arch + "." + k.str(); }
  llvm::Expected<int64_t> i(llvm::StringRef k) const;
  llvm::Expected<int64_t> i(llvm::StringRef k, int64_t dflt) const;
  llvm::Expected<double> d(llvm::StringRef k, double dflt) const;
};

/// A canonical per-layer weight (`attn_norm`, GGUF's name without `blk.N.`
/// and `.weight`) that a family's Hugging Face checkpoints store under another
/// name than the standard transformers one (relative to `model.layers.N.`).
struct HfTensorName {
  llvm::StringRef canonical;
  llvm::StringRef hf;
};

/// A weight a family computes for Hugging Face checkpoints (f32 values).
struct HfComputedWeight {
  std::vector<float> values;
  std::string note; ///< where it comes from, for the weight table ("computed from ...")
};

/// One model family. Hooks may be null (nothing beyond the shared part).
struct ModelFamily {
  // --- names ---------------------------------------------------------------
  /// The family's name in messages and LoadedModel::family.
  llvm::StringRef name = {};
  /// GGUF general.architecture values; the first is the one listed in errors.
  llvm::ArrayRef<llvm::StringRef> ggufArchs = {};
  /// config.json model_type values (empty: no HF support); the first is the
  /// one listed in errors.
  llvm::ArrayRef<llvm::StringRef> hfModelTypes = {};
  /// The model_type of the family's multimodal checkpoints, whose text
  /// model's settings are under text_config ("": none).
  llvm::StringRef hfMultimodalModelType = {};

  // --- hyperparameters -------------------------------------------------------
  /// Experts instead of a dense FFN: the shared readers then skip the dense
  /// FFN size (feed_forward_length / intermediate_size) and the hooks read
  /// the expert keys.
  bool moe = false;
  /// GGUF keys beyond the shared ones, read after the FFN size (before the
  /// embedding's tensor is looked at).
  llvm::Error (*ggufHParams)(const GgufKeys &k, ModelHParams &hp) = nullptr;
  /// config.json keys beyond the shared ones, read after the FFN size and
  /// before the rope settings. `c` is text_config for a multimodal checkpoint.
  llvm::Error (*hfHParams)(const HfConfig &c, ModelHParams &hp) = nullptr;
  /// The only hidden_act / hidden_activation accepted.
  llvm::StringRef hfActivation = "silu";
  /// attention_bias / mlp_bias = true is an error (the family has none).
  bool hfRefusesBiases = false;
  /// transformers' default for tie_word_embeddings.
  bool hfTiesByDefault = false;
  /// rope_parameters may hold one object per layer kind (transformers 5);
  /// this one gives the global rope ("": rope_parameters itself).
  llvm::StringRef hfRopeLayerKind = {};
  /// A rope_scaling type of the family's own (llama: "llama3"), beside the
  /// shared "default" and "linear", read by hfRopeScaling from its object.
  llvm::StringRef hfRopeScalingType = {};
  llvm::Error (*hfRopeScaling)(const HfConfig &scaling, const HfConfig &c,
                               ModelHParams &hp) = nullptr;

  // --- decoder options --------------------------------------------------------
  /// Sets the family's options on `c`, which holds the shared ones (sizes,
  /// eps, rope base and linear scaling in neox mode, SwiGLU, ties, ctx).
  void (*decoderOptions)(const ModelHParams &hp, DecoderConfig &c) = nullptr;

  // --- Hugging Face weight conventions (GGUF's layout is the canonical one) ---
  /// q/k rows are permuted to GGUF's order (llama: the canonical rope is the
  /// normal one, as convert_hf_to_gguf.py writes it).
  bool hfPermuteQK = false;
  /// Norm weights are stored as w for (1 + w): +1 is folded in (gemma).
  bool hfNormPlusOne = false;
  /// Where the family departs from the standard transformers names.
  llvm::ArrayRef<HfTensorName> hfLayerNames = {};
  /// A weight computed from the hyperparameters rather than read (llama's
  /// rope_freqs under Llama-3 scaling); nullopt: not computed.
  std::optional<HfComputedWeight> (*hfComputedWeight)(llvm::StringRef canonical,
                                                      const ModelHParams &hp) = nullptr;
};

// --- the table ------------------------------------------------------------------

/// Every registered family, in families/Families.def's order.
llvm::ArrayRef<const ModelFamily *> modelFamilies();
const ModelFamily *familyForGgufArch(llvm::StringRef arch);
const ModelFamily *familyForHfModelType(llvm::StringRef modelType);
/// "llama, qwen2, ..." (each family's first GGUF arch / first model_type).
std::string supportedGgufArchs();
std::string supportedHfModelTypes();

// --- the shared readers ------------------------------------------------------------

/// Hyperparameters from GGUF metadata (`<arch>.block_count`, ...). `vocab`
/// and tied embeddings come from the tensors.
llvm::Expected<ModelHParams> hparamsFromGguf(const GgufFile &f);
/// Hyperparameters from config.json.
llvm::Expected<ModelHParams> hparamsFromHf(const HfCheckpoint &ck);

/// The family's decoder (weights left unbound; a TensorSource supplies them).
llvm::Expected<DecoderConfig> decoderConfigFor(const ModelHParams &hp, int64_t ctx, DType kvDType);

} // namespace fg
