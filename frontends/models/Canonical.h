//===- Canonical.h - one canonical weight layout for both formats -*- C++ -*-===//
//
// The canonical layout is GGUF's, as llama.cpp's converter writes it, so GGUF
// tensors are used as they are (mapped) and every transformation lives in the
// Hugging Face source, as load-time recipes over the files' ranges
// (ir/WeightRecipe.h), never as bytes. What the HF source does is shared; which
// of it applies is the family's record (Family.h, families/<family>.cpp):
//   names          the standard transformers layout (model.layers.N.self_attn.
//                  q_proj, mlp.gate_proj, ...), unless the family's
//                  hfLayerNames says otherwise (gemma3's FFN and post norms)
//   q/k            permute_heads(n) when hfPermuteQK (llama): HF rows are
//                  permuted like convert_hf_to_gguf.py's permute() so the
//                  canonical rope is the normal (interleaved) one
//   norms          add_scalar(1) when hfNormPlusOne (gemma3): HF's (1 + w)
//                  folded into the weight (in f32)
//   experts        concat: HF's per-expert matrices (mlp.experts.E.*) stacked
//                  into [E, out, in]
//   dtypes         convert(f32): norms, biases, the router and rope factors
//                  are f32 in the graph (matrices stay as stored)
//   computed       hfComputedWeight (llama's rope_freqs under Llama-3
//                  scaling: the one weight embedded as bytes; small)
// Names are GGUF's without ".weight" (`blk.3.attn_norm`; biases keep ".bias").
//
//===----------------------------------------------------------------------===//
#pragma once

#include "frontends/ModelWeights.h"
#include "frontends/models/Family.h"

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

#include <memory>
#include <optional>

namespace fg {

class GgufFile;
class HfCheckpoint;

class TensorSource {
public:
  virtual ~TensorSource();
  /// How canonical weight `name` is stored (for matrices, whose graph dtype is
  /// the file's), or nullopt when the file does not have it.
  virtual std::optional<DType> storedDType(llvm::StringRef name) const = 0;
  /// Adds canonical weight `name` of graph type `type` to `out`; an error
  /// naming the file and tensor when it is missing or mis-shaped.
  virtual llvm::Error provide(llvm::StringRef name, const TensorType &type,
                              ModelWeights &out) const = 0;
  /// Checks, before any graph is built, that canonical weight `name` is in
  /// the file with `shape`: the same errors as provide(). Weights assembled
  /// from several tensors (stacked experts) or computed pass unchecked.
  virtual llvm::Error checkShape(llvm::StringRef name, llvm::ArrayRef<int64_t> shape) const = 0;
};

std::unique_ptr<TensorSource> makeGgufSource(const GgufFile &f, const ModelHParams &hp);
std::unique_ptr<TensorSource> makeHfSource(const HfCheckpoint &ck, const ModelHParams &hp);

// permutedRowSource (the q/k row permutation) is in ir/WeightRecipe.h.

} // namespace fg
