//===- RecipeTest.cpp - weights by reference: load-time recipes in plans ---===//
//
// A transformed weight (rows permuted, experts stacked, +1 folded in, a dtype
// converted, dequantised) is a recipe over model-file ranges, not bytes in the
// plan (ir/WeightRecipe.h):
//   - a plan of a ~26 MB model (GGUF or Hugging Face) is under 1 % of it;
//   - the bytes a plan's recipes give are, bit for bit, those of the model
//     loaded directly, and (for Hugging Face folders) those llama.cpp's layout
//     stores in the GGUF twin, written by gen_models.py without fusegraph;
//   - the device weight bytes a CUDA program reports are what the recipes say;
//   - forged recipes are one-line errors naming the weight.
//
//===----------------------------------------------------------------------===//
#include "ModelFiles.h"

#include "codegen/cuda/Compile.h"
#include "frontends/Frontend.h"
#include "ir/Numeric.h"
#include "ir/Parser.h"
#include "runtime/Executor.h"
#include "runtime/ProgramIO.h"
#include "runtime/WeightLoad.h"

#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <cstring>

namespace fg {
namespace {

using test::generatedModels;

llvm::Expected<LoadedModel> loadWithWeights(const std::string &path) {
  ModelOptions mo;
  mo.ctx = 32;
  mo.prefill = {7};
  mo.kvDType = DType::F32;
  return loadModelWithWeights(path, mo);
}

/// What tools/Model.cpp hands to compile.
std::vector<ExternalWeight> externalWeights(const ModelWeights &weights) {
  std::vector<ExternalWeight> out;
  for (const WeightEntry &w : weights.entries())
    out.push_back({w.name, w.type, w.recipe, w.data});
  return out;
}

llvm::Expected<Plan> compileLoaded(const LoadedModel &m, bool cuda) {
  CompileOptions co;
  co.cuda = cuda;
  co.ctx = 32;
  co.kvDType = DType::F32;
  co.weights = externalWeights(m.weights);
  return compile(m.graph, co);
}

/// Bytes of a model: the .gguf file, or every file of the Hugging Face folder.
uint64_t modelFileBytes(const std::string &path) {
  uint64_t total = 0;
  if (!llvm::sys::fs::is_directory(path)) {
    EXPECT_FALSE(llvm::sys::fs::file_size(path, total));
    return total;
  }
  std::error_code ec;
  for (llvm::sys::fs::directory_iterator it(path, ec), end; it != end && !ec; it.increment(ec)) {
    uint64_t size = 0;
    if (!llvm::sys::fs::file_size(it->path(), size))
      total += size;
  }
  return total;
}

/// The weight slots of a plan (its "weights" section, else its program's).
std::vector<TensorSlot> planSlots(const Plan &plan) {
  if (const PlanSection *w = plan.section("weights")) {
    auto t = decodeWeightTable(w->bytes);
    EXPECT_TRUE(bool(t)) << llvm::toString(t.takeError());
    return t ? std::move(*t) : std::vector<TensorSlot>();
  }
  const PlanSection *p = plan.section("program");
  EXPECT_NE(p, nullptr);
  if (!p)
    return {};
  auto prog = decodeProgram(p->bytes);
  EXPECT_TRUE(bool(prog)) << llvm::toString(prog.takeError());
  return prog ? std::move(prog->weights) : std::vector<TensorSlot>();
}

// --- (1) plan size ----------------------------------------------------------------------

class PlanSize : public ::testing::TestWithParam<const char *> {};

/// The plan of a 26 MB model refers to its weights by recipe: under 1 % of
/// the model. Before recipes, the Hugging Face plan embedded the permuted q/k
/// matrices (3 MB, 11 % of the model).
TEST_P(PlanSize, APlanIsUnderOnePercentOfTheModelFile) {
  std::string why, dir = generatedModels(why);
  if (dir.empty())
    GTEST_SKIP() << "model files not generated: " << why;
  std::string model = dir + "/" + GetParam();
  uint64_t modelBytes = modelFileBytes(model);
  ASSERT_GE(modelBytes, 8u << 20) << "a model large enough for 1 % to mean something";
  auto m = loadWithWeights(model);
  ASSERT_TRUE(bool(m)) << llvm::toString(m.takeError());

  // The CPU plan (IR + weight table): the whole file.
  auto plan = compileLoaded(*m, /*cuda=*/false);
  ASSERT_TRUE(bool(plan)) << llvm::toString(plan.takeError());
  uint64_t planBytes = plan->serialize().size();
  EXPECT_LT(planBytes * 100, modelBytes)
      << planBytes << " plan bytes for a " << modelBytes << "-byte model";
  uint64_t embedded = 0;
  for (const TensorSlot &s : planSlots(*plan))
    embedded += s.bytes.size();
  EXPECT_LE(embedded, 1024u) << "only computed weights (rope factors) are embedded";
  std::printf("[ plan size ] %s: model %llu bytes, CPU plan %llu bytes (%.3f %%)\n", GetParam(),
              static_cast<unsigned long long>(modelBytes),
              static_cast<unsigned long long>(planBytes), 100.0 * planBytes / modelBytes);

  // With a CUDA program: everything but the kernel images (whose size does not
  // depend on the weights) stays under 1 % too.
  auto cudaPlan = compileLoaded(*m, /*cuda=*/true);
  ASSERT_TRUE(bool(cudaPlan)) << llvm::toString(cudaPlan.takeError());
  const PlanSection *ps = cudaPlan->section("program");
  ASSERT_NE(ps, nullptr);
  auto prog = decodeProgram(ps->bytes);
  ASSERT_TRUE(bool(prog)) << llvm::toString(prog.takeError());
  uint64_t kernels = 0;
  for (const KernelImage &k : prog->modules)
    kernels += k.cubin.size() + k.ptx.size();
  uint64_t cudaBytes = cudaPlan->serialize().size();
  EXPECT_LT((cudaBytes - kernels) * 100, modelBytes)
      << cudaBytes << " plan bytes, " << kernels << " of them kernel images";
  std::printf("[ plan size ] %s: CUDA plan %llu bytes, %llu without kernel images (%.3f %%)\n",
              GetParam(), static_cast<unsigned long long>(cudaBytes),
              static_cast<unsigned long long>(cudaBytes - kernels),
              100.0 * (cudaBytes - kernels) / modelBytes);
}

INSTANTIATE_TEST_SUITE_P(Models, PlanSize, ::testing::Values("llama3big.gguf", "llama3big-hf"),
                         [](const auto &info) {
                           std::string n = info.param;
                           for (char &c : n)
                             if (!isalnum(static_cast<unsigned char>(c)))
                               c = '_';
                           return n;
                         });

// --- (2) the bytes ----------------------------------------------------------------------

class PlanBytes : public ::testing::TestWithParam<const char *> {};

/// Every weight the CPU reference binds from a plan (saved and loaded) is, bit
/// for bit, the weight of the model loaded directly; for Hugging Face folders
/// also the GGUF twin's bytes (gen_models.py's own permute / +1 / stack), so
/// the recipes are checked against a layout written without fusegraph. The
/// device weight bytes of the CUDA program are the sum the recipes give.
TEST_P(PlanBytes, RecipesGiveTheBytesOfTheDirectLoad) {
  std::string why, dir = generatedModels(why);
  if (dir.empty())
    GTEST_SKIP() << "model files not generated: " << why;
  std::string family = GetParam();
  auto gguf = loadWithWeights(dir + "/" + family + ".gguf");
  ASSERT_TRUE(bool(gguf)) << llvm::toString(gguf.takeError());
  for (const std::string &model : {dir + "/" + family + ".gguf", dir + "/" + family + "-hf"}) {
    SCOPED_TRACE(model);
    auto m = loadWithWeights(model);
    ASSERT_TRUE(bool(m)) << llvm::toString(m.takeError());
    auto plan = compileLoaded(*m, /*cuda=*/false);
    ASSERT_TRUE(bool(plan)) << llvm::toString(plan.takeError());
    std::string path = test::tempPath(".plan");
    ASSERT_FALSE(bool(plan->save(path)));
    auto loaded = Plan::load(path);
    llvm::sys::fs::remove(path);
    ASSERT_TRUE(bool(loaded)) << llvm::toString(loaded.takeError());
    std::vector<TensorSlot> slots = planSlots(*loaded);
    ASSERT_EQ(slots.size(), m->weights.size());
    uint64_t recipeBytes = 0, loadedBytes = 0;
    for (const TensorSlot &s : slots) {
      const WeightEntry *direct = m->weights.lookup(s.name);
      ASSERT_NE(direct, nullptr) << s.name;
      EXPECT_EQ(s.recipe, direct->recipe) << s.name;
      auto bytes = loadSlotBytes(s);
      ASSERT_TRUE(bool(bytes)) << llvm::toString(bytes.takeError());
      EXPECT_TRUE(*bytes == direct->bytes()) << s.name << " differs from the direct load";
      loadedBytes += bytes->size();
      if (!s.recipe.empty()) {
        auto t = s.recipe.resultType();
        ASSERT_TRUE(bool(t)) << llvm::toString(t.takeError());
        recipeBytes += static_cast<uint64_t>(t->bytes());
      } else {
        recipeBytes += s.bytes.size();
      }
      if (s.name == "rope_freqs")
        continue; // computed from config.json in f64 here, in f32 by the converter
      const WeightEntry *twin = gguf->weights.lookup(s.name);
      ASSERT_NE(twin, nullptr) << s.name;
      EXPECT_TRUE(*bytes == twin->bytes()) << s.name << " differs from llama.cpp's layout";
    }
    EXPECT_EQ(loadedBytes, recipeBytes);

    // The device weight bytes of the CUDA program are the sum the recipes give.
    auto cudaPlan = compileLoaded(*m, /*cuda=*/true);
    ASSERT_TRUE(bool(cudaPlan)) << llvm::toString(cudaPlan.takeError());
    auto prog = decodeProgram(cudaPlan->section("program")->bytes);
    ASSERT_TRUE(bool(prog)) << llvm::toString(prog.takeError());
    EXPECT_EQ(prog->weightBytes(), recipeBytes);
    for (const TensorSlot &s : prog->weights) {
      if (s.recipe.empty())
        continue;
      auto t = s.recipe.resultType();
      ASSERT_TRUE(bool(t)) << llvm::toString(t.takeError());
      EXPECT_EQ(*t, s.type) << s.name;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Models, PlanBytes,
                         ::testing::Values("llama3", "smollm2", "qwen2", "qwen3", "qwen3moe",
                                           "gemma3"));

/// A GGUF model's quantised matrices are used as stored on both devices: the
/// GPU's GEMVs (and prefill's dequantise-then-cuBLAS) read the q8_0 blocks,
/// so each slot is the file's range with no step, and the device holds the
/// file's bytes (the f16 fallback, a convert(f16) step, is only for readers
/// without a native kernel: QuantWeights.* in fg_codegen_tests).
TEST(Recipe, QuantisedMatricesStayQuantisedOnTheGpu) {
  std::string why, dir = generatedModels(why);
  if (dir.empty())
    GTEST_SKIP() << "model files not generated: " << why;
  auto m = loadWithWeights(dir + "/qwen3-q8_0.gguf");
  ASSERT_TRUE(bool(m)) << llvm::toString(m.takeError());
  auto cpuPlan = compileLoaded(*m, /*cuda=*/false);
  ASSERT_TRUE(bool(cpuPlan)) << llvm::toString(cpuPlan.takeError());
  for (const TensorSlot &s : planSlots(*cpuPlan))
    EXPECT_TRUE(s.recipe.isPlainRange()) << s.name << ": " << s.recipe.str();
  auto cudaPlan = compileLoaded(*m, /*cuda=*/true);
  ASSERT_TRUE(bool(cudaPlan)) << llvm::toString(cudaPlan.takeError());
  std::vector<TensorSlot> slots = planSlots(*cudaPlan);
  size_t quantised = 0;
  uint64_t recipeBytes = 0, fileBytes = 0;
  for (const TensorSlot &s : slots) {
    const WeightEntry *direct = m->weights.lookup(s.name);
    ASSERT_NE(direct, nullptr) << s.name;
    auto bytes = loadSlotBytes(s);
    ASSERT_TRUE(bool(bytes)) << llvm::toString(bytes.takeError());
    recipeBytes += static_cast<uint64_t>(s.recipe.resultType()->bytes());
    fileBytes += static_cast<uint64_t>(direct->type.bytes());
    EXPECT_TRUE(s.recipe.isPlainRange()) << s.name << ": " << s.recipe.str();
    EXPECT_TRUE(*bytes == direct->bytes()) << s.name;
    EXPECT_EQ(s.type, direct->type) << s.name;
    quantised += isQuantized(direct->type.dtype);
  }
  EXPECT_EQ(quantised, 14u) << "7 matrices in each of 2 layers";
  auto prog = decodeProgram(cudaPlan->section("program")->bytes);
  ASSERT_TRUE(bool(prog)) << llvm::toString(prog.takeError());
  EXPECT_EQ(prog->weightBytes(), recipeBytes);
  EXPECT_EQ(prog->weightBytes(), fileBytes) << "device weight bytes = the file's tensor bytes";
}

/// Each step on a small tensor, against values worked out by hand.
TEST(Recipe, StepsOnAHandMadeTensor) {
  // Two f32 sources [4, 1]: 0..3 and 10..13.
  std::vector<float> a = {0, 1, 2, 3}, b = {10, 11, 12, 13};
  auto bytesOf = [](const std::vector<float> &v) {
    return llvm::ArrayRef<uint8_t>(reinterpret_cast<const uint8_t *>(v.data()), v.size() * 4);
  };
  WeightRecipe r;
  r.sources = {{"/a", 0, 0, TensorType{DType::F32, {4, 1}}, "a"},
               {"/b", 0, 0, TensorType{DType::F32, {4, 1}}, "b"}};
  r.steps = {RecipeStep::concat()};
  auto t = r.resultType();
  ASSERT_TRUE(bool(t)) << llvm::toString(t.takeError());
  EXPECT_EQ(*t, (TensorType{DType::F32, {2, 4, 1}}));
  // One source: permute_heads(1) on 4 rows is rows 0, 2, 1, 3; +1; to f16.
  WeightRecipe p;
  p.sources = {r.sources[0]};
  p.steps = {RecipeStep::permuteHeads(1), RecipeStep::addScalar(1.0),
             RecipeStep::convert(DType::F16)};
  EXPECT_EQ(p.str(), "a @ 0x0 f32[4, 1] | permute_heads(1) | add_scalar(1) | convert(f16)");
  auto out = applyRecipe(p, {bytesOf(a)});
  ASSERT_TRUE(bool(out)) << llvm::toString(out.takeError());
  ASSERT_EQ(out->size(), 8u);
  std::vector<float> got;
  for (int i = 0; i < 4; ++i) {
    uint16_t h;
    std::memcpy(&h, out->data() + 2 * i, 2);
    got.push_back(halfToFloat(h));
  }
  EXPECT_EQ(got, (std::vector<float>{1, 3, 2, 4}));
  auto stacked = applyRecipe(r, {bytesOf(a), bytesOf(b)});
  ASSERT_TRUE(bool(stacked)) << llvm::toString(stacked.takeError());
  std::vector<float> s(8);
  std::memcpy(s.data(), stacked->data(), 32);
  EXPECT_EQ(s, (std::vector<float>{0, 1, 2, 3, 10, 11, 12, 13}));
}

// --- (3) forged recipes -----------------------------------------------------------------

/// A plan whose weights section holds `slot` (a valid checksum: forged by
/// someone who knows the format), for a graph with weight %w of its type.
llvm::Expected<Plan> planWithSlot(const TensorSlot &slot) {
  auto g = parseGraph("graph @decode(input %x: f32[1], weight %w: " + slot.type.str() +
                          ") {\n  return %x\n}\n",
                      "slot.fg");
  if (!g)
    return g.takeError();
  EncodedProgram table = encodeWeightTable({slot});
  PlanOptions po;
  po.ctx = 16;
  Plan p(std::move(*g), po, {}, 0, 0, {{"weights", table.bytes, table.bulkOffset}});
  return Plan::deserialize(p.serialize(), "forged.plan");
}

/// Slot 'w' f32[4, 32] read from a real 1024-byte file at `offset`.
TensorSlot fileSlot(const std::string &file, uint64_t offset = 0) {
  TensorSlot s("w", TensorType{DType::F32, {4, 32}});
  s.recipe.sources.push_back({file, 1024, offset, TensorType{DType::F32, {4, 32}}, "w.weight"});
  return s;
}

/// The error of creating a CPU executor over a plan holding `slot`: one line,
/// naming the weight.
std::string loadError(const TensorSlot &slot) {
  auto plan = planWithSlot(slot);
  if (!plan)
    return llvm::toString(plan.takeError());
  auto exec = Executor::create(*plan, {});
  if (exec)
    return "(no error)";
  return llvm::toString(exec.takeError());
}

TEST(Recipe, ForgedRecipesAreOneLineErrorsNamingTheWeight) {
  std::string file = test::tempPath(".gguf");
  test::writeFile(file, std::vector<uint8_t>(1024, 0));
  struct Case {
    const char *what;
    TensorSlot slot;
    std::string want;
  };
  std::vector<Case> cases;
  cases.push_back({"offset past the recorded file size", fileSlot(file, 600),
                   "bytes [600, +512) lie past the end of the 1024-byte file " + file});
  {
    TensorSlot s = fileSlot(file, ~uint64_t(0) - 100);
    cases.push_back({"offset that overflows", s, "lie past the end"});
  }
  {
    // The recorded size forged to fit: the file itself is then too short.
    TensorSlot s = fileSlot(file, 2048);
    s.recipe.sources[0].fileSize = 0;
    cases.push_back({"offset past the file on disk", s,
                     "weight 'w' (tensor 'w.weight') needs bytes [2048, 2560) but the file has "
                     "1024 bytes"});
  }
  {
    TensorSlot s = fileSlot(file);
    s.type = TensorType{DType::F32, {4, 16}};
    cases.push_back({"shape mismatch", s,
                     "its recipe (" + llvm::sys::path::filename(file).str() +
                         " @ 0x0 f32[4, 32]) gives f32[4, 32]"});
  }
  {
    TensorSlot s = fileSlot(file);
    s.recipe.steps.push_back(RecipeStep{static_cast<RecipeOp>(9), 0, DType::F32, 0});
    cases.push_back({"unknown step", s, "unknown recipe step 9"});
  }
  {
    TensorSlot s = fileSlot(file);
    s.recipe.steps.push_back(RecipeStep::permuteHeads(3));
    cases.push_back({"heads that do not divide the rows", s,
                     "step 'permute_heads(3)' on f32[4, 32]: 4 rows do not split into 3 heads"});
  }
  {
    TensorSlot s = fileSlot(file);
    s.type = TensorType{DType::F32, {2, 4, 32}};
    s.recipe.sources.push_back({file, 1024, 512, TensorType{DType::F32, {2, 32}}, "other.weight"});
    s.recipe.steps.push_back(RecipeStep::concat());
    cases.push_back({"concat of different shapes", s,
                     "step 'concat': source 'other.weight' is f32[2, 32] but the first is "
                     "f32[4, 32]"});
  }
  {
    TensorSlot s = fileSlot(file);
    s.recipe.sources.push_back(s.recipe.sources[0]);
    s.type = TensorType{DType::F32, {2, 4, 32}};
    cases.push_back({"two sources, no concat", s, "2 sources but no concat first"});
  }
  {
    TensorSlot s = fileSlot(file);
    s.recipe.steps.push_back(RecipeStep::convert(DType::I32));
    cases.push_back({"convert to an integer type", s, "converts only between real dtypes"});
  }
  for (const Case &c : cases) {
    std::string msg = loadError(c.slot);
    EXPECT_NE(msg.find(c.want), std::string::npos) << c.what << ": " << msg;
    EXPECT_NE(msg.find("'w'"), std::string::npos) << c.what << ": names the weight: " << msg;
    EXPECT_EQ(msg.find('\n'), std::string::npos) << c.what << ": one line: " << msg;
  }
  // The valid slot loads.
  EXPECT_EQ(loadError(fileSlot(file)), "(no error)");
  llvm::sys::fs::remove(file);
}

/// Plans written before recipes are refused with "recompile".
TEST(Recipe, OlderWeightTablesAskForARecompile) {
  for (uint32_t tag : {0x46475754u /* FGWT */}) {
    std::string bytes(reinterpret_cast<const char *>(&tag), 4);
    bytes.append(16, '\0');
    auto t = decodeWeightTable(bytes);
    ASSERT_FALSE(bool(t));
    std::string msg = llvm::toString(t.takeError());
    EXPECT_NE(msg.find("recompile"), std::string::npos) << msg;
  }
  uint32_t tag = 0x46475054u; // FGPT
  std::string bytes(reinterpret_cast<const char *>(&tag), 4);
  bytes.append(16, '\0');
  auto p = decodeProgram(bytes);
  ASSERT_FALSE(bool(p));
  std::string msg = llvm::toString(p.takeError());
  EXPECT_NE(msg.find("recompile"), std::string::npos) << msg;
}

} // namespace
} // namespace fg
