//===- Families.h - llama, qwen2, qwen3, qwen3moe, gemma3 ---------*- C++ -*-===//
//
// One builder per family, shared by both file formats: the GGUF and the
// Hugging Face readers each fill a format-neutral ModelHParams (from GGUF
// metadata or config.json), and decoderConfigFor turns it into the
// DecoderConfig that frontends/DecoderBlocks.h builds. Weight bytes come from a
// TensorSource (models/Canonical.h), which is where the formats' layouts are
// reconciled.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "frontends/DecoderBlocks.h"

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

#include <optional>
#include <string>
#include <vector>

namespace fg {

class GgufFile;
class HfCheckpoint;

enum class ModelFamily { Llama, Qwen2, Qwen3, Qwen3Moe, Gemma3 };
/// GGUF's architecture name: llama, qwen2, qwen3, qwen3moe, gemma3.
llvm::StringRef familyName(ModelFamily f);
std::optional<ModelFamily> familyFromGgufArch(llvm::StringRef arch);
/// config.json model_type: llama, qwen2, qwen3, qwen3_moe, gemma3_text (gemma3).
std::optional<ModelFamily> familyFromHfModelType(llvm::StringRef modelType);

/// Llama-3 rope scaling (rope_scaling.rope_type = "llama3").
struct Llama3RopeScaling {
  double factor = 8, lowFreqFactor = 1, highFreqFactor = 4;
  int64_t originalContext = 8192;
};

struct ModelHParams {
  ModelFamily family = ModelFamily::Llama;
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

/// The family's decoder (weights left unbound; a TensorSource supplies them).
llvm::Expected<DecoderConfig> decoderConfigFor(const ModelHParams &hp, int64_t ctx, DType kvDType);

/// Llama-3 frequency factors [head_dim / 2] (as llama.cpp's converter computes
/// rope_freqs.weight: ggml divides each rotation frequency by its factor).
std::vector<float> llama3RopeFactors(const Llama3RopeScaling &s, double theta, int64_t headDim);

/// Hyperparameters from GGUF metadata (`<arch>.block_count`, ...). `vocab`
/// and tied embeddings come from the tensors.
llvm::Expected<ModelHParams> hparamsFromGguf(const GgufFile &f);
/// Hyperparameters from config.json.
llvm::Expected<ModelHParams> hparamsFromHf(const HfCheckpoint &ck);

} // namespace fg
