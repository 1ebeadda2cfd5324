//===- ModelWeights.h - where a model's weight bytes come from ---*- C++ -*-===//
//
// A frontend that reads a model file returns, beside the Graph, a table from
// weight value name to its bytes:
//   mapped    the bytes lie in a model file as they are (same dtype, layout and
//             values): {file, tensor name, absolute offset}; the graph's weight
//             carries WeightInit::tensor(file, tensor name); the bytes are read
//             through a shared memory mapping that the table keeps alive;
//   embedded  the frontend transformed them (row permutation, stacked experts,
//             gemma's +1, a dtype conversion, computed rope factors): the bytes
//             are owned by the table and the graph's weight has no initialiser.
// A plan may reference mapped weights by file + offset; embedded ones must be
// stored (DESIGN.md, "Plan file").
//
// Binding into the CPU reference (runtime may not be included from here):
//   for (const WeightEntry &w : weights.entries())
//     interp.bindWeight(w.name, HostTensor{w.type, std::vector<uint8_t>(w.bytes().begin(),
//                                                                      w.bytes().end())});
//
//===----------------------------------------------------------------------===//
#pragma once

#include "ir/Type.h"

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/MemoryBuffer.h"

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace fg {

struct WeightEntry {
  std::string name; ///< the graph's weight value name (`blk.0.attn_q`)
  TensorType type;  ///< as declared in the graph
  // Mapped weights:
  std::string file;    ///< the model file holding the bytes; empty when embedded
  std::string tensor;  ///< the tensor's name in that file
  uint64_t offset = 0; ///< absolute byte offset of the data in `file`
  std::shared_ptr<const llvm::MemoryBuffer> mapping; ///< keeps the bytes alive
  // Embedded weights:
  std::vector<uint8_t> data;
  /// Why the bytes were transformed (for --verbose and inspect), e.g. "q/k rows
  /// un-permuted"; empty when mapped.
  std::string transform;

  bool isEmbedded() const { return file.empty(); }
  llvm::ArrayRef<uint8_t> bytes() const;
};

class ModelWeights {
public:
  /// A weight whose bytes are used as they are in `file` at `offset`.
  void addMapped(std::string name, TensorType type, std::string file, std::string tensor,
                 uint64_t offset, std::shared_ptr<const llvm::MemoryBuffer> mapping);
  /// A weight whose bytes the frontend produced (type.bytes() of them).
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
