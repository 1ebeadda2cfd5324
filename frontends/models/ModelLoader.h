//===- ModelLoader.h - GGUF files and HF folders → Graph + weights -*- C++ -*-===//
#pragma once

#include "frontends/DecoderBlocks.h"
#include "frontends/ModelWeights.h"
#include "frontends/models/Family.h"

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

namespace fg {

class TensorSource;

/// A decoder graph with its weight table.
struct LoadedModel {
  Graph graph;
  ModelWeights weights;
  const ModelFamily *family = nullptr; ///< the registry's record (Family.h)
  DecoderConfig config;
};

struct DecoderBuildOptions {
  int64_t ctx = 4096;
  std::vector<int64_t> prefill = {64};
  DType kvDType = DType::F16;
  bool allLogits = false; ///< prefill returns every logits row, not the last
};

/// Builds the family's decoder from `hp`, declaring matrices with the dtype the
/// source stores them in, then asks the source for every weight: mapped ones get
/// WeightInit::tensor(file, tensor) in every entry, transformed (recipes with
/// steps) and computed ones no initialiser.
/// `where` (the file or folder) prefixes configuration errors.
llvm::Expected<LoadedModel> buildModel(const ModelHParams &hp, const TensorSource &source,
                                       const DecoderBuildOptions &opts, llvm::StringRef where);

llvm::Expected<LoadedModel> loadGgufModel(llvm::StringRef path, const DecoderBuildOptions &opts);
llvm::Expected<LoadedModel> loadHfModel(llvm::StringRef folder, const DecoderBuildOptions &opts);

} // namespace fg
