//===- HfFuzz.cpp - fuzz the safetensors reader and config.json ------------===//
//
// Input: config.json text, one NUL byte, then the bytes of model.safetensors
// (no NUL: the whole input is config.json and the safetensors file is empty).
// Splitting at a separator rather than a length prefix keeps the split valid
// when the fuzzer inserts or removes bytes in the JSON. Both are written into
// a temporary Hugging Face folder and loaded as `fusegraph compile FOLDER`
// does; every weight's bytes are then read.
//
//===----------------------------------------------------------------------===//
#include "FuzzUtil.h"

using namespace fg;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  llvm::StringRef all(reinterpret_cast<const char *>(data), size);
  size_t nul = all.find('\0');
  llvm::StringRef config = all.substr(0, nul);
  llvm::StringRef tensors = nul == llvm::StringRef::npos ? "" : all.substr(nul + 1);
  fuzz::writeScratch("config.json", config);
  fuzz::writeScratch("model.safetensors", tensors);
  fuzz::loadModelAndReadWeights(fuzz::scratchDir());
  return 0;
}
