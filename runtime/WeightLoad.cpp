//===- WeightLoad.cpp - the bytes of a weight slot ------------------------===//
#include "runtime/WeightLoad.h"

#include "ir/Checked.h"
#include "ir/Diag.h"
#include "ir/Numeric.h"
#include "ir/ReadFile.h"
#include "runtime/HostMemory.h"

#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"

#include <cstring>

namespace fg {

/// No slot is larger than this (2^48 elements of 8 bytes, the parser's cap).
constexpr int64_t kMaxSlotBytes = int64_t(1) << 51;

std::vector<uint8_t> convertWeightBytes(DType from, DType to, const uint8_t *src, int64_t n,
                                        int64_t rowLength) {
  assert(rowLength > 0 && n % rowLength == 0 && "whole rows");
  int64_t rows = n / rowLength;
  TensorType inRow{from, {rowLength}}, outRow{to, {rowLength}};
  uint64_t inBytes = static_cast<uint64_t>(inRow.bytes());
  uint64_t outBytes = static_cast<uint64_t>(outRow.bytes());
  std::vector<uint8_t> out(static_cast<size_t>(outBytes * rows));
  std::vector<float> f(static_cast<size_t>(rowLength));
  for (int64_t r = 0; r < rows; ++r) {
    decodeRow(from, src + r * inBytes, f.data(), rowLength);
    bool ok = encodeRow(to, f.data(), out.data() + r * outBytes, rowLength);
    assert(ok && "the target dtype is encodable");
    (void)ok;
  }
  return out;
}

llvm::Error checkSlot(const TensorSlot &slot) {
  std::string what = "'" + slot.name + "' " + slot.type.str();
  if (llvm::any_of(slot.type.shape, [](int64_t d) { return d < 0; }))
    return makeError(what + ": a dimension is negative");
  std::optional<int64_t> bytes = checkedBytes(slot.type.dtype, slot.type.shape);
  if (!bytes || *bytes > kMaxSlotBytes)
    return makeError(what + ": its size overflows or its rows are not whole blocks");
  TensorType st = slot.storedType();
  std::optional<int64_t> storedBytes = checkedBytes(st.dtype, st.shape);
  if (slot.stored && *slot.stored != slot.type.dtype) {
    if (!isFloat(slot.type.dtype))
      return makeError(what + " is stored as " + std::string(dtypeName(*slot.stored)) +
                       ", which converts only to a float type");
    if (slot.type.rowLength() < 1 || !storedBytes || *storedBytes > kMaxSlotBytes)
      return makeError(what + " is stored as " + st.str() +
                       ", whose rows are empty or not whole blocks, or whose size overflows");
  }
  if (!slot.file.empty() && slot.bytes.empty()) {
    uint64_t end = 0;
    if (__builtin_add_overflow(slot.offset, static_cast<uint64_t>(*storedBytes), &end) ||
        (slot.fileSize && end > slot.fileSize))
      return makeError(what + ": bytes [" + llvm::Twine(slot.offset) + ", +" +
                       llvm::Twine(*storedBytes) + ") lie past the end of the " +
                       llvm::Twine(slot.fileSize) + "-byte model file");
  }
  return llvm::Error::success();
}

llvm::Expected<std::vector<uint8_t>> loadSlotBytes(const TensorSlot &slot) {
  if (llvm::Error e = checkSlot(slot))
    return makeError("weight " + llvm::toString(std::move(e)));
  TensorType st = slot.storedType();
  uint64_t need = static_cast<uint64_t>(st.bytes());
  std::string what = "weight '" + slot.name + "'" +
                     (slot.tensor.empty() ? std::string() : " (tensor '" + slot.tensor + "')");
  std::unique_ptr<llvm::MemoryBuffer> buf;
  const uint8_t *src = nullptr;
  if (!slot.bytes.empty()) {
    if (slot.bytes.size() != need)
      return makeError(what + " has " + llvm::Twine(slot.bytes.size()) +
                       " embedded bytes but " + st.str() + " needs " + llvm::Twine(need));
    src = slot.bytes.data();
  } else if (!slot.file.empty()) {
    llvm::Expected<uint64_t> fileSize = regularFileSize(slot.file);
    if (!fileSize)
      return makeError(slot.file, Loc{},
                       "cannot read the model file for " + what + ": " +
                           llvm::toString(fileSize.takeError()) +
                           " (the plan refers to its weights by path; put the file back or "
                           "recompile)");
    uint64_t size = *fileSize;
    if (slot.fileSize && size != slot.fileSize)
      return makeError(slot.file, Loc{},
                       "the model file changed since the plan was compiled (" +
                           llvm::Twine(slot.fileSize) + " bytes then, " + llvm::Twine(size) +
                           " now); " + what + " cannot be read from it; recompile the model");
    if (slot.offset > size || need > size - slot.offset)
      return makeError(slot.file, Loc{},
                       what + " needs bytes [" + llvm::Twine(slot.offset) + ", " +
                           llvm::Twine(slot.offset + need) + ") but the file has " +
                           llvm::Twine(size) + " bytes");
    auto mb = llvm::MemoryBuffer::getFileSlice(slot.file, need, slot.offset);
    if (!mb)
      return makeError(slot.file, Loc{},
                       "cannot read " + what + ": " + mb.getError().message());
    buf = std::move(*mb);
    if (buf->getBufferSize() != need)
      return makeError(slot.file, Loc{}, "short read of " + what);
    src = reinterpret_cast<const uint8_t *>(buf->getBufferStart());
  } else {
    return makeError(what + " has neither embedded bytes nor a model file");
  }
  if (llvm::Error e =
          checkHostAllocation(static_cast<uint64_t>(slot.type.bytes()), "loading " + what))
    return e;
  if (!slot.stored || *slot.stored == slot.type.dtype)
    return std::vector<uint8_t>(src, src + need);
  int64_t rowLength = slot.type.rank() ? slot.type.shape.back() : 1;
  return convertWeightBytes(*slot.stored, slot.type.dtype, src, slot.type.numElements(),
                            rowLength);
}

} // namespace fg
