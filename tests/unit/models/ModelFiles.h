//===- ModelFiles.h - small model files for the frontend tests ---*- C++ -*-===//
//
// generatedModels() runs tests/models/gen_models.py once per content of the
// script (cached in the temp folder, written through an atomic rename, so
// parallel test processes share it) and returns the folder, or an empty
// string with `why` set when Python or its packages are missing (tests skip).
// FG_MODEL_DIR names a folder of files written elsewhere instead (the GPU
// machine lacks the `gguf` package: scripts/gpu-bundle.sh --models carries
// them, scripts/gpu-call-lib.sh points FG_MODEL_DIR at them).
//
//===----------------------------------------------------------------------===//
#pragma once

#include "frontends/ModelWeights.h"
#include "runtime/reference/Interpreter.h"

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

#include <cstdint>
#include <string>
#include <vector>

namespace fg::test {

std::string generatedModels(std::string &why);

/// Binds every weight of the table (the loop tools would run).
llvm::Error bindWeights(ReferenceInterpreter &interp, const ModelWeights &weights);

/// A little-endian byte buffer for hand-made files.
struct Bytes {
  std::vector<uint8_t> b;
  template <typename T> Bytes &put(T v) {
    const auto *p = reinterpret_cast<const uint8_t *>(&v);
    b.insert(b.end(), p, p + sizeof(T));
    return *this;
  }
  Bytes &str(llvm::StringRef s) {
    put<uint64_t>(s.size());
    b.insert(b.end(), s.begin(), s.end());
    return *this;
  }
  Bytes &raw(const void *p, size_t n) {
    b.insert(b.end(), static_cast<const uint8_t *>(p), static_cast<const uint8_t *>(p) + n);
    return *this;
  }
};

/// A fresh temporary file path ending in `suffix`.
std::string tempPath(llvm::StringRef suffix);
void writeFile(const std::string &path, const std::vector<uint8_t> &bytes);
std::vector<uint8_t> readFile(const std::string &path);

/// The fusegraph binary of this build (tests/ lies beside it), or "".
std::string fusegraphBinary();
/// Runs fusegraph with `args` (at most `seconds`); stdout then stderr, the exit
/// status in `rc`.
std::string runCli(llvm::ArrayRef<std::string> args, int &rc, unsigned seconds = 300);

} // namespace fg::test
