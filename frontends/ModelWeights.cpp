//===- ModelWeights.cpp - where a model's weight bytes come from ----------===//
#include "frontends/ModelWeights.h"

#include "ir/Diag.h"

#include "llvm/ADT/SmallString.h"
#include "llvm/Support/FileSystem.h"

#include <cassert>

namespace fg {

std::vector<uint8_t> WeightEntry::bytes() const {
  if (isEmbedded())
    return data;
  std::vector<llvm::ArrayRef<uint8_t>> parts;
  for (size_t i = 0; i < recipe.sources.size(); ++i) {
    const RecipeSource &s = recipe.sources[i];
    const auto *base = reinterpret_cast<const uint8_t *>(mappings[i]->getBufferStart());
    parts.push_back({base + s.offset, static_cast<size_t>(s.type.bytes())});
  }
  llvm::Expected<std::vector<uint8_t>> out = applyRecipe(recipe, parts);
  if (!out) {
    assert(false && "addRecipe checked the recipe");
    llvm::consumeError(out.takeError());
    return {};
  }
  return std::move(*out);
}

llvm::Error
ModelWeights::addRecipe(std::string name, TensorType type, WeightRecipe recipe,
                        std::vector<std::shared_ptr<const llvm::MemoryBuffer>> mappings) {
  assert(mappings.size() == recipe.sources.size() && "one mapping per source");
  for (size_t i = 0; i < recipe.sources.size(); ++i) {
    RecipeSource &s = recipe.sources[i];
    assert(mappings[i] && "a source keeps its file's mapping");
    llvm::SmallString<256> path(s.file);
    if (std::error_code ec = llvm::sys::fs::make_absolute(path))
      return makeError(s.file, Loc{}, "cannot make the path absolute: " + ec.message());
    s.file = path.str().str();
    s.fileSize = mappings[i]->getBufferSize();
  }
  llvm::Expected<TensorType> result = recipe.resultType();
  if (!result)
    return makeError("weight '" + name + "': " + llvm::toString(result.takeError()));
  if (*result != type)
    return makeError("weight '" + name + "' is " + type.str() + " but its recipe (" + recipe.str() +
                     ") gives " + result->str());
  WeightEntry e;
  e.name = std::move(name);
  e.type = std::move(type);
  e.recipe = std::move(recipe);
  e.mappings = std::move(mappings);
  index_[e.name] = entries_.size();
  entries_.push_back(std::move(e));
  return llvm::Error::success();
}

void ModelWeights::addEmbedded(std::string name, TensorType type, std::vector<uint8_t> data,
                               std::string transform) {
  assert(static_cast<int64_t>(data.size()) == type.bytes() && "embedded bytes match the type");
  WeightEntry e;
  e.name = std::move(name);
  e.type = std::move(type);
  e.data = std::move(data);
  e.transform = std::move(transform);
  index_[e.name] = entries_.size();
  entries_.push_back(std::move(e));
}

const WeightEntry *ModelWeights::lookup(llvm::StringRef name) const {
  auto it = index_.find(name);
  return it == index_.end() ? nullptr : &entries_[it->second];
}

uint64_t ModelWeights::embeddedBytes() const {
  uint64_t n = 0;
  for (const WeightEntry &e : entries_)
    if (e.isEmbedded())
      n += e.data.size();
  return n;
}

} // namespace fg
