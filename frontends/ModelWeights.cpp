//===- ModelWeights.cpp - where a model's weight bytes come from ----------===//
#include "frontends/ModelWeights.h"

#include <cassert>

namespace fg {

llvm::ArrayRef<uint8_t> WeightEntry::bytes() const {
  if (isEmbedded())
    return data;
  assert(mapping && "a mapped weight keeps its mapping");
  const auto *base = reinterpret_cast<const uint8_t *>(mapping->getBufferStart());
  return {base + offset, static_cast<size_t>(type.bytes())};
}

void ModelWeights::addMapped(std::string name, TensorType type, std::string file,
                             std::string tensor, uint64_t offset,
                             std::shared_ptr<const llvm::MemoryBuffer> mapping) {
  assert(mapping && offset + type.bytes() <= mapping->getBufferSize() &&
         "the reader checked the tensor lies inside the mapping");
  WeightEntry e;
  e.name = std::move(name);
  e.type = std::move(type);
  e.file = std::move(file);
  e.tensor = std::move(tensor);
  e.offset = offset;
  e.mapping = std::move(mapping);
  index_[e.name] = entries_.size();
  entries_.push_back(std::move(e));
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
