//===- ProgramIO.h - CompiledProgram <-> bytes --------------------*- C++ -*-===//
//
// The binary encoding of a CompiledProgram inside a plan file (section
// "program"). Little-endian, length-prefixed; every read is bounds-checked so
// a truncated or corrupt section is an error, never a read past the end.
// Embedded weight bytes are written last, so the plan's checksum can skip
// them (bulkOffset tells where they start).
//
//===----------------------------------------------------------------------===//
#pragma once

#include "runtime/Program.h"

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

#include <string>
#include <vector>

namespace fg {

struct EncodedProgram {
  std::string bytes;
  size_t bulkOffset = 0; ///< start of embedded weight bytes (end of checksummed part)
};

EncodedProgram encodeProgram(const CompiledProgram &p);
llvm::Expected<CompiledProgram> decodeProgram(llvm::StringRef bytes);

/// The weight table of a plan without a CUDA program (section "weights"):
/// the CPU reference binds these (model-file references and embedded bytes).
EncodedProgram encodeWeightTable(const std::vector<TensorSlot> &weights);
llvm::Expected<std::vector<TensorSlot>> decodeWeightTable(llvm::StringRef bytes);

} // namespace fg
