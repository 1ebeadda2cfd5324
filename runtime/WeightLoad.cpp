//===- WeightLoad.cpp - the bytes of a weight slot ------------------------===//
#include "runtime/WeightLoad.h"

#include "ir/Checked.h"
#include "ir/Diag.h"
#include "ir/ReadFile.h"
#include "runtime/HostMemory.h"

#include "llvm/ADT/StringMap.h"
#include "llvm/Support/MemoryBuffer.h"

namespace fg {

/// No slot is larger than this (2^48 elements of 8 bytes, the parser's cap).
constexpr int64_t kMaxSlotBytes = int64_t(1) << 51;

llvm::Error checkSlot(const TensorSlot &slot) {
  std::string what = "'" + slot.name + "' " + slot.type.str();
  if (llvm::any_of(slot.type.shape, [](int64_t d) { return d < 0; }))
    return makeError(what + ": a dimension is negative");
  std::optional<int64_t> bytes = checkedBytes(slot.type.dtype, slot.type.shape);
  if (!bytes || *bytes > kMaxSlotBytes)
    return makeError(what + ": its size overflows or its rows are not whole blocks");
  if (!slot.bytes.empty() && !slot.recipe.empty())
    return makeError(what + " has both embedded bytes and a recipe");
  if (slot.recipe.empty())
    return llvm::Error::success();
  llvm::Expected<TensorType> result = slot.recipe.resultType();
  if (!result)
    return makeError(what + ": recipe: " + llvm::toString(result.takeError()));
  if (*result != slot.type)
    return makeError(what + ": its recipe (" + slot.recipe.str() + ") gives " + result->str());
  return llvm::Error::success();
}

llvm::Expected<std::vector<uint8_t>> loadSlotBytes(const TensorSlot &slot) {
  if (llvm::Error e = checkSlot(slot))
    return makeError("weight " + llvm::toString(std::move(e)));
  uint64_t need = static_cast<uint64_t>(slot.type.bytes());
  if (slot.recipe.empty()) {
    if (slot.bytes.size() != need)
      return makeError("weight '" + slot.name + "' has " + llvm::Twine(slot.bytes.size()) +
                       " embedded bytes but " + slot.type.str() + " needs " + llvm::Twine(need));
    return slot.bytes;
  }
  const WeightRecipe &r = slot.recipe;
  if (llvm::Error e =
          checkHostAllocation(need + r.sourceBytes(), "loading weight '" + slot.name + "'"))
    return e;
  // Each file is checked once (its size against the recorded one).
  llvm::StringMap<uint64_t> sizes;
  std::vector<std::unique_ptr<llvm::MemoryBuffer>> bufs;
  std::vector<llvm::ArrayRef<uint8_t>> parts;
  for (const RecipeSource &s : r.sources) {
    std::string what = "weight '" + slot.name + "'" +
                       (s.tensor.empty() ? std::string() : " (tensor '" + s.tensor + "')");
    auto it = sizes.find(s.file);
    if (it == sizes.end()) {
      llvm::Expected<uint64_t> fileSize = regularFileSize(s.file);
      if (!fileSize)
        return makeError(s.file, Loc{},
                         "cannot read the model file for " + what + ": " +
                             llvm::toString(fileSize.takeError()) +
                             " (the plan refers to its weights by path; put the file back or "
                             "recompile)");
      if (s.fileSize && *fileSize != s.fileSize)
        return makeError(s.file, Loc{},
                         "the model file changed since the plan was compiled (" +
                             llvm::Twine(s.fileSize) + " bytes then, " + llvm::Twine(*fileSize) +
                             " now); " + what + " cannot be read from it; recompile the model");
      it = sizes.insert({s.file, *fileSize}).first;
    }
    uint64_t size = it->second, len = static_cast<uint64_t>(s.type.bytes());
    if (s.offset > size || len > size - s.offset)
      return makeError(s.file, Loc{},
                       what + " needs bytes [" + llvm::Twine(s.offset) + ", " +
                           llvm::Twine(s.offset + len) + ") but the file has " + llvm::Twine(size) +
                           " bytes");
    auto mb = llvm::MemoryBuffer::getFileSlice(s.file, len, s.offset);
    if (!mb)
      return makeError(s.file, Loc{}, "cannot read " + what + ": " + mb.getError().message());
    if ((*mb)->getBufferSize() != len)
      return makeError(s.file, Loc{}, "short read of " + what);
    parts.push_back(
        {reinterpret_cast<const uint8_t *>((*mb)->getBufferStart()), static_cast<size_t>(len)});
    bufs.push_back(std::move(*mb));
  }
  llvm::Expected<std::vector<uint8_t>> out = applyRecipe(r, parts);
  if (!out)
    return makeError("weight '" + slot.name + "': " + llvm::toString(out.takeError()));
  assert(out->size() == need && "checkSlot checked the recipe gives the slot's type");
  return out;
}

} // namespace fg
