//===- GgufFuzz.cpp - fuzz the GGUF reader and the model frontend ---------===//
//
// Input: the bytes of a .gguf file. They are written to a temporary file and
// loaded the way `fusegraph compile x.gguf` does (loadModelWithWeights: the
// GGUF reader, hyper-parameters, the family's decoder graph, the weight
// table); every weight's bytes are then read, so a bounds check that lets a
// tensor past the end of the mapping shows up.
//
//===----------------------------------------------------------------------===//
#include "FuzzUtil.h"

using namespace fg;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  std::string path =
      fuzz::writeScratch("model.gguf", llvm::StringRef(reinterpret_cast<const char *>(data), size));
  fuzz::loadModelAndReadWeights(path);
  return 0;
}
