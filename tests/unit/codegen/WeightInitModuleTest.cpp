//===- WeightInitModuleTest.cpp - the device init module is the shared formula ===//
#include "codegen/cuda/WeightInitModule.h"
#include "codegen/cuda/Compile.h"
#include "codegen/cuda/Nvrtc.h"
#include "ir/Parser.h"
#include "runtime/ProgramIO.h"

#include "llvm/Support/FileSystem.h"

#include <gtest/gtest.h>

using namespace fg;
using namespace fg::cuda;

namespace {

/// Every dtype a weight can have: the float and integer ones and the
/// block-quantised ones.
std::vector<DType> everyDType() {
  std::vector<DType> out = {DType::F32, DType::F16, DType::BF16, DType::I32, DType::I64};
  for (DType q : {DType::Q8_0, DType::Q4_0, DType::Q4_1, DType::Q5_0, DType::Q5_1, DType::IQ4_NL,
                  DType::Q2_K, DType::Q3_K, DType::Q4_K, DType::Q5_K, DType::Q6_K, DType::IQ4_XS})
    out.push_back(q);
  return out;
}

/// The module embeds ir/InitFormula.h and, given block types, ir/QuantizeBlock.h
/// (not copies) and has one kernel per dtype, the block types asked for
/// included; it compiles with NVRTC (no GPU needed). Without block types the
/// quantiser's text stays out.
TEST(WeightInitModule, EmbedsTheSharedFormulaAndCompiles) {
  const std::string plain = initModuleSource();
  EXPECT_EQ(plain.find("namespace fg_quant"), std::string::npos);
  EXPECT_EQ(plain.find("fg_init_q"), std::string::npos);
  const std::vector<DType> all = everyDType();
  const std::vector<DType> blocks(all.begin() + 5, all.end());
  const std::string src = initModuleSource(blocks);
  EXPECT_NE(src.find("namespace fg_init"), std::string::npos);
  EXPECT_NE(src.find("FG_INIT_FN double value("), std::string::npos);
  EXPECT_NE(src.find("namespace fg_quant"), std::string::npos);
  EXPECT_NE(src.find("FG_Q_FN bool quantizeBlock("), std::string::npos);
  EXPECT_EQ(src.find("#pragma once"), std::string::npos);

  llvm::SmallString<128> dir;
  ASSERT_FALSE(llvm::sys::fs::createUniqueDirectory("fg-init-module", dir));
  NvrtcOptions o;
  o.cacheDir = std::string(dir);
  llvm::Expected<CompiledModule> m = compileCuda(src, "fg_init", "sm_90", o);
  ASSERT_TRUE(bool(m)) << llvm::toString(m.takeError());
  for (DType t : everyDType()) {
    std::optional<std::string> symbol = initKernelSymbol(t);
    ASSERT_TRUE(symbol.has_value()) << dtypeName(t);
    EXPECT_NE(m->ptx.find(".entry " + *symbol), std::string::npos) << *symbol;
  }
  // The quantiser's float arithmetic is one rounding an operation (no FMA
  // the host does not do): the q4_K kernel has no fma.rn.f32.
  size_t q4k = m->ptx.find(".entry fg_init_q4_k");
  ASSERT_NE(q4k, std::string::npos);
  size_t next = m->ptx.find(".entry", q4k + 1);
  std::string body = m->ptx.substr(q4k, next == std::string::npos ? std::string::npos : next - q4k);
  EXPECT_EQ(body.find("fma.rn.f32"), std::string::npos);
  EXPECT_NE(body.find("div.rn.f32"), std::string::npos);
}

/// A program with initialised weights carries the init module; its block
/// types are those of initialised block-quantised weights, each once.
TEST(WeightInitModule, NeededOnlyForInitialisedWeights) {
  CompiledProgram p;
  EXPECT_FALSE(needsInitModule(p));
  p.weights.push_back({"w", {DType::I32, {4}}, WeightInit::uniform(1, 0, 9)});
  EXPECT_TRUE(needsInitModule(p));
  EXPECT_TRUE(initialisedBlockTypes(p).empty());
  p.weights.back().init = WeightInit::tensor("m.gguf", "w");
  EXPECT_FALSE(needsInitModule(p));
  p.weights.push_back({"a", {DType::Q4_K, {2, 256}}, WeightInit::normal(1, 0.02)});
  p.weights.push_back({"b", {DType::Q6_K, {2, 256}}, WeightInit::normal(2, 0.02)});
  p.weights.push_back({"c", {DType::Q4_K, {4, 256}}, WeightInit::uniform(3, -1, 1)});
  p.weights.push_back({"d", {DType::Q8_0, {4, 32}}, WeightInit::tensor("m.gguf", "d")});
  EXPECT_EQ(initialisedBlockTypes(p), (std::vector<DType>{DType::Q4_K, DType::Q6_K}));
}

/// `text` parsed and compiled (with `pipeline`, or the default; a fresh
/// kernel cache) into its program; nothing, with a test failure, when a step
/// fails.
std::optional<CompiledProgram> compiledProgram(llvm::StringRef text, const char *pipeline = "") {
  auto g = parseGraph(text, "w.fg");
  if (!g) {
    ADD_FAILURE() << llvm::toString(g.takeError());
    return std::nullopt;
  }
  llvm::SmallString<128> dir;
  if (llvm::sys::fs::createUniqueDirectory("fg-init-module", dir)) {
    ADD_FAILURE() << "no cache directory";
    return std::nullopt;
  }
  CompileOptions co;
  if (*pipeline)
    co.pipeline = pipeline;
  co.kernelCacheDir = std::string(dir);
  auto plan = compile(*g, co);
  if (!plan) {
    ADD_FAILURE() << llvm::toString(plan.takeError());
    return std::nullopt;
  }
  auto prog = decodeProgram(plan->section("program")->bytes);
  if (!prog) {
    ADD_FAILURE() << llvm::toString(prog.takeError());
    return std::nullopt;
  }
  return std::move(*prog);
}

/// Weights of every generated dtype, copied out by conts (what the GPU test
/// GpuWeightInit.EveryGeneratedDtypeEqualsTheReference runs): the program
/// compiles and every weight has a device kernel in its init module.
TEST(WeightInitModule, ProgramOfEveryGeneratedDtypeCompiles) {
  // dce only: canonicalize would drop the conts of weights.
  std::optional<CompiledProgram> prog = compiledProgram(R"(graph @main(
    weight %uf32: f32[4099] {init = uniform(seed = 11, min = -3.0, max = 3.0)},
    weight %uf16: f16[4099] {init = uniform(seed = 12, min = -3.0, max = 3.0)},
    weight %ubf16: bf16[4099] {init = uniform(seed = 13, min = -3.0, max = 3.0)},
    weight %ui32: i32[4099] {init = uniform(seed = 14, min = -1000.0, max = 1000.0)},
    weight %ci64: i64[7] {init = constant(value = 2.5)}) {
  %a = cont(%uf32) : f32[4099]
  %b = cont(%uf16) : f16[4099]
  %c = cont(%ubf16) : bf16[4099]
  %d = cont(%ui32) : i32[4099]
  %e = cont(%ci64) : i64[7]
  return %a, %b, %c, %d, %e
}
)", "dce");
  ASSERT_TRUE(prog.has_value());
  ASSERT_GE(prog->initModule, 0);
  const KernelImage &init = prog->modules[prog->initModule];
  ASSERT_EQ(prog->weights.size(), 5u);
  for (const TensorSlot &w : prog->weights) {
    std::optional<std::string> symbol = initKernelSymbol(w.type.dtype);
    ASSERT_TRUE(symbol.has_value()) << w.name;
    EXPECT_NE(init.ptx.find(".entry " + *symbol), std::string::npos) << *symbol;
  }
  EXPECT_EQ(prog->entries[0].launches.size(), 5u);
}

/// A program with an initialised q4_K weight: its init module has the q4_K
/// kernel and no other block type's.
TEST(WeightInitModule, ProgramGetsItsBlockTypesKernels) {
  std::optional<CompiledProgram> prog = compiledProgram(R"(graph @main(input %ids: i32[3],
    weight %w: q4_k[5, 256] {init = normal(seed = 3, std = 0.02)}) {
  %y = get_rows(%w, %ids) : f32[3, 256]
  return %y
}
)");
  ASSERT_TRUE(prog.has_value());
  ASSERT_GE(prog->initModule, 0);
  const std::string &ptx = prog->modules[prog->initModule].ptx;
  EXPECT_NE(ptx.find(".entry fg_init_q4_k"), std::string::npos);
  EXPECT_EQ(ptx.find(".entry fg_init_q6_k"), std::string::npos);
  EXPECT_NE(ptx.find(".entry fg_init_f32"), std::string::npos);
}

} // namespace
