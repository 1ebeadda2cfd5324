//===- WeightInitModuleTest.cpp - the device init module is the shared formula ===//
#include "codegen/cuda/WeightInitModule.h"
#include "codegen/cuda/Nvrtc.h"

#include "llvm/Support/FileSystem.h"

#include <gtest/gtest.h>

using namespace fg;
using namespace fg::cuda;

namespace {

/// The module embeds ir/InitFormula.h (not a copy) and has one kernel per
/// generated dtype; it compiles with NVRTC (no GPU needed).
TEST(WeightInitModule, EmbedsTheSharedFormulaAndCompiles) {
  const std::string &src = initModuleSource();
  EXPECT_NE(src.find("namespace fg_init"), std::string::npos);
  EXPECT_NE(src.find("FG_INIT_FN double value("), std::string::npos);
  EXPECT_EQ(src.find("#pragma once"), std::string::npos);
  for (DType t : {DType::F32, DType::F16, DType::BF16, DType::I32, DType::I64}) {
    std::optional<std::string> symbol = initKernelSymbol(t);
    ASSERT_TRUE(symbol.has_value());
    EXPECT_NE(src.find("void " + *symbol + "("), std::string::npos) << *symbol;
  }
  EXPECT_FALSE(initKernelSymbol(DType::Q8_0).has_value());

  llvm::SmallString<128> dir;
  ASSERT_FALSE(llvm::sys::fs::createUniqueDirectory("fg-init-module", dir));
  NvrtcOptions o;
  o.cacheDir = std::string(dir);
  llvm::Expected<CompiledModule> m = compileCuda(src, "fg_init", "sm_90", o);
  ASSERT_TRUE(bool(m)) << llvm::toString(m.takeError());
  for (const char *k : {"fg_init_f32", "fg_init_f16", "fg_init_bf16", "fg_init_i32", "fg_init_i64"})
    EXPECT_NE(m->ptx.find(std::string(".entry ") + k), std::string::npos) << k;
}

/// A program with initialised weights carries the init module.
TEST(WeightInitModule, NeededOnlyForInitialisedWeights) {
  CompiledProgram p;
  EXPECT_FALSE(needsInitModule(p));
  p.weights.push_back({"w", {DType::I32, {4}}, WeightInit::uniform(1, 0, 9)});
  EXPECT_TRUE(needsInitModule(p));
  p.weights.back().init = WeightInit::tensor("m.gguf", "w");
  EXPECT_FALSE(needsInitModule(p));
}

} // namespace
