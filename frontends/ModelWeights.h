//===- ModelWeights.h - where a model's weight bytes come from ---*- C++ -*-===//
//
// A frontend that reads a model file returns, beside the Graph, a table from
// weight value name to where its bytes come from:
//   recipe    ranges of the model file(s) and the steps that make the graph's
//             bytes from them (ir/WeightRecipe.h): a plain mapped weight is one
//             source and no step (the graph's weight carries
//             WeightInit::tensor(file, tensor name)); a transformed one (row
//             permutation, stacked experts, gemma's +1, a dtype conversion)
//             has steps. Sources name absolute paths and the files' sizes; the
//             table keeps the files' mappings alive for direct use;
//   embedded  computed by the frontend (Llama-3 rope factors): the bytes are
//             owned by the table and the graph's weight has no initialiser.
// A plan stores recipes, applied at load time, and only embedded bytes
// (DESIGN.md, "Plan file"), so it stays small.
//
// Binding into the CPU reference (runtime may not be included from here):
//   for (const WeightEntry &w : weights.entries())
//     interp.bindWeight(w.name, HostTensor{w.type, w.bytes()});
//
//===----------------------------------------------------------------------===//
#pragma once

#include "ir/Type.h"
#include "ir/WeightRecipe.h"

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"
#include "llvm/Support/MemoryBuffer.h"

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace fg {

struct WeightEntry {
  std::string name; ///< the graph's weight value name (`blk.0.attn_q`)
  TensorType type;  ///< as declared in the graph
  /// From model files: how the bytes are made; empty when embedded.
  WeightRecipe recipe;
  /// One mapping per recipe source (the file's), kept alive for bytes().
  std::vector<std::shared_ptr<const llvm::MemoryBuffer>> mappings;
  /// Embedded (computed) weights: the bytes.
  std::vector<uint8_t> data;
  /// Why the bytes were computed, for --verbose; empty for recipes (their
  /// str() says what they do).
  std::string transform;

  bool isEmbedded() const { return recipe.empty(); }
  /// A recipe with steps or several sources (not the file's bytes as they are).
  bool isTransformed() const { return !recipe.empty() && !recipe.isPlainRange(); }
  /// The first (for a plain weight, only) source of the recipe.
  const RecipeSource &source() const { return recipe.sources.front(); }
  /// The weight's bytes: embedded ones, or the recipe applied to the mapped
  /// files (checked when the entry was added, so this cannot fail).
  std::vector<uint8_t> bytes() const;
};

class ModelWeights {
public:
  /// A weight made by `recipe` from ranges of mapped files (one mapping per
  /// source, the whole file). Paths are made absolute and sizes recorded; an
  /// error naming the weight when the recipe does not give `type`.
  llvm::Error addRecipe(std::string name, TensorType type, WeightRecipe recipe,
                        std::vector<std::shared_ptr<const llvm::MemoryBuffer>> mappings);
  /// A weight whose bytes the frontend computed (type.bytes() of them).
  void addEmbedded(std::string name, TensorType type, std::vector<uint8_t> data,
                   std::string transform);

  const WeightEntry *lookup(llvm::StringRef name) const;
  llvm::ArrayRef<WeightEntry> entries() const { return entries_; }
  size_t size() const { return entries_.size(); }
  /// Total bytes of embedded weights.
  uint64_t embeddedBytes() const;

private:
  std::vector<WeightEntry> entries_;
  llvm::StringMap<size_t> index_;
};

} // namespace fg
