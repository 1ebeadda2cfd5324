//===- PlanWeightsTest.cpp - model weights in plans, the CLI on model files ===//
//
// A plan compiled from a model file refers to mapped weights by file, offset
// and size and stores embedded ones; the CPU executor binds both. The CLI
// (`fusegraph run MODEL`) must give the tokens and logits of the model loaded
// directly; a model file that changed size is refused with a clear error;
// quantised weights the GPU sees as f16 are dequantised at load time.
//
//===----------------------------------------------------------------------===//
#include "ModelFiles.h"

#include "codegen/cuda/Compile.h"
#include "frontends/Frontend.h"
#include "ir/Numeric.h"
#include "runtime/Executor.h"
#include "runtime/ProgramIO.h"
#include "runtime/WeightLoad.h"

#include "llvm/ADT/SmallString.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/Program.h"

#include <gtest/gtest.h>

#include <cstring>
#include <fstream>

namespace fg {
namespace {

using test::fusegraphBinary;
using test::runCli;

using test::generatedModels;

const std::vector<int32_t> kPrompt = {3, 17, 42, 5, 77, 9, 31};

/// What tools/Model.cpp hands to compile (recipes over absolute paths, file sizes recorded).
std::vector<ExternalWeight> externalWeights(const ModelWeights &weights) {
  std::vector<ExternalWeight> out;
  for (const WeightEntry &w : weights.entries()) {
    ExternalWeight x;
    x.name = w.name;
    x.type = w.type;
    x.recipe = w.recipe;
    x.bytes = w.data;
    out.push_back(std::move(x));
  }
  return out;
}

llvm::Expected<Plan> compileModel(const std::string &path, bool cuda = false) {
  ModelOptions mo;
  mo.ctx = 32;
  mo.prefill = {7};
  mo.kvDType = DType::F32;
  mo.allLogits = true; // Decoded keeps every prompt row
  auto m = loadModelWithWeights(path, mo);
  if (!m)
    return m.takeError();
  CompileOptions co;
  co.cuda = cuda;
  co.kvDType = DType::F32;
  co.weights = externalWeights(m->weights);
  return compile(m->graph, co);
}

/// Greedy tokens and every logits row of `steps` tokens after kPrompt, run
/// through an executor (prefill_7, then decode).
struct Decoded {
  std::vector<int32_t> tokens;
  std::vector<float> logits;
};

Decoded decode(Executor &exec, int steps) {
  Decoded d;
  auto runOne = [&](llvm::StringRef entry, llvm::ArrayRef<int32_t> toks, int32_t pos0) {
    std::vector<int32_t> pos;
    for (size_t i = 0; i < toks.size(); ++i)
      pos.push_back(pos0 + static_cast<int32_t>(i));
    EXPECT_FALSE(bool(exec.setInput("tokens", toks)));
    EXPECT_FALSE(bool(exec.setInput("positions", pos)));
    if (llvm::Error e = exec.run(entry)) {
      ADD_FAILURE() << llvm::toString(std::move(e));
      return;
    }
    auto l = exec.outputFloats("logits");
    ASSERT_TRUE(bool(l)) << llvm::toString(l.takeError());
    d.logits.insert(d.logits.end(), l->begin(), l->end());
    int64_t vocab = static_cast<int64_t>(l->size()) / static_cast<int64_t>(toks.size());
    llvm::ArrayRef<float> last = l->take_back(vocab);
    d.tokens.push_back(
        static_cast<int32_t>(std::max_element(last.begin(), last.end()) - last.begin()));
  };
  runOne("prefill_7", kPrompt, 0);
  for (int s = 1; s < steps; ++s)
    runOne("decode", d.tokens.back(), static_cast<int32_t>(kPrompt.size()) + s - 1);
  return d;
}

/// The same through the reference interpreter with the frontend's weight table.
Decoded decodeDirect(const std::string &path, int steps) {
  ModelOptions mo;
  mo.ctx = 32;
  mo.prefill = {7};
  mo.kvDType = DType::F32;
  mo.allLogits = true; // Decoded keeps every prompt row
  auto m = loadModelWithWeights(path, mo);
  EXPECT_TRUE(bool(m)) << llvm::toString(m.takeError());
  ReferenceInterpreter interp(m->graph);
  EXPECT_FALSE(bool(test::bindWeights(interp, m->weights)));
  Decoded d;
  std::vector<int32_t> toks = kPrompt;
  int32_t pos0 = 0;
  for (int s = 0; s < steps; ++s) {
    llvm::StringRef entry = s == 0 ? "prefill_7" : "decode";
    std::vector<int64_t> t(toks.begin(), toks.end()), pos;
    for (size_t i = 0; i < toks.size(); ++i)
      pos.push_back(pos0 + static_cast<int64_t>(i));
    llvm::StringMap<HostTensor> in;
    int64_t n = static_cast<int64_t>(t.size());
    in["tokens"] = HostTensor::fromInts({DType::I32, {n}}, t);
    in["positions"] = HostTensor::fromInts({DType::I32, {n}}, pos);
    std::vector<std::pair<std::string, HostTensor>> out;
    if (llvm::Error e = interp.run(entry, in, out)) {
      ADD_FAILURE() << llvm::toString(std::move(e));
      return d;
    }
    std::vector<float> f = out.at(0).second.toFloats();
    d.logits.insert(d.logits.end(), f.begin(), f.end());
    int64_t vocab = static_cast<int64_t>(f.size()) / n;
    auto last = llvm::ArrayRef<float>(f).take_back(vocab);
    d.tokens.push_back(
        static_cast<int32_t>(std::max_element(last.begin(), last.end()) - last.begin()));
    pos0 += static_cast<int32_t>(n);
    toks = {d.tokens.back()};
  }
  return d;
}

TEST(PlanWeights, RecipesAndEmbeddedWeightsRoundTripThroughAPlanFile) {
  std::string why, dir = generatedModels(why);
  if (dir.empty())
    GTEST_SKIP() << "model files not generated: " << why;
  // HF llama: q/k rows are permuted (recipes with a step) and rope_freqs
  // computed (embedded); the rest is used as stored (one plain range).
  std::string model = dir + "/llama3-hf";
  auto plan = compileModel(model);
  ASSERT_TRUE(bool(plan)) << llvm::toString(plan.takeError());
  const PlanSection *ws = plan->section("weights");
  ASSERT_NE(ws, nullptr);
  EXPECT_LT(ws->checked, ws->bytes.size()) << "embedded bytes are bulk, outside the checksum";
  auto slots = decodeWeightTable(ws->bytes);
  ASSERT_TRUE(bool(slots)) << llvm::toString(slots.takeError());
  size_t mapped = 0, transformed = 0, embedded = 0;
  for (const TensorSlot &s : *slots) {
    if (s.recipe.empty()) {
      ++embedded;
      EXPECT_EQ(static_cast<int64_t>(s.bytes.size()), s.type.bytes()) << s.name;
      continue;
    }
    EXPECT_TRUE(s.bytes.empty()) << s.name;
    for (const RecipeSource &src : s.recipe.sources) {
      EXPECT_TRUE(llvm::sys::path::is_absolute(src.file)) << src.file;
      EXPECT_GT(src.fileSize, src.offset);
    }
    ++(s.recipe.isPlainRange() ? mapped : transformed);
  }
  EXPECT_EQ(embedded, 1u) << "rope_freqs (computed)";
  EXPECT_EQ(transformed, 4u) << "4 permuted q/k matrices";
  EXPECT_EQ(mapped, slots->size() - 5);

  std::string path = test::tempPath(".plan");
  ASSERT_FALSE(bool(plan->save(path)));
  auto loaded = Plan::load(path);
  ASSERT_TRUE(bool(loaded)) << llvm::toString(loaded.takeError());
  auto exec = Executor::create(*loaded, {});
  ASSERT_TRUE(bool(exec)) << llvm::toString(exec.takeError());
  Decoded viaPlan = decode(*exec, 3);
  Decoded direct = decodeDirect(model, 3);
  EXPECT_EQ(viaPlan.tokens, direct.tokens);
  EXPECT_EQ(viaPlan.logits, direct.logits) << "the same bytes give bit-identical logits";
  llvm::sys::fs::remove(path);
}

TEST(PlanWeights, ProgramWeightSlotsRoundTrip) {
  CompiledProgram p;
  p.arch = "sm_90";
  TensorSlot mapped("w.mapped", TensorType{DType::F16, {4, 32}});
  mapped.recipe.sources.push_back(
      {"/models/m.gguf", 1 << 20, 4096, TensorType{DType::Q8_0, {4, 32}}, "blk.0.attn_q.weight"});
  mapped.recipe.steps.push_back(RecipeStep::convert(DType::F16));
  TensorSlot experts("w.experts", TensorType{DType::F32, {2, 8, 4}});
  for (int e = 0; e < 2; ++e)
    experts.recipe.sources.push_back({e ? "/models/b.safetensors" : "/models/a.safetensors",
                                      uint64_t(1000 + e), uint64_t(8 + 128 * e),
                                      TensorType{DType::F16, {8, 4}},
                                      "experts." + std::to_string(e) + ".up_proj.weight"});
  experts.recipe.steps = {RecipeStep::concat(), RecipeStep::convert(DType::F32),
                          RecipeStep::addScalar(1.0)};
  TensorSlot embedded("w.embedded", TensorType{DType::F32, {3}}, WeightInit(),
                      {0, 0, 128, 63, 0, 0, 0, 64, 0, 0, 64, 64});
  p.weights = {mapped, experts, embedded};
  EncodedProgram enc = encodeProgram(p);
  EXPECT_EQ(enc.bytes.size() - enc.bulkOffset, 12u);
  auto back = decodeProgram(enc.bytes);
  ASSERT_TRUE(bool(back)) << llvm::toString(back.takeError());
  ASSERT_EQ(back->weights.size(), 3u);
  EXPECT_EQ(back->weights[0].recipe, mapped.recipe);
  EXPECT_EQ(back->weights[1].recipe, experts.recipe);
  EXPECT_TRUE(back->weights[0].bytes.empty());
  EXPECT_EQ(back->weights[2].bytes, embedded.bytes);
  EXPECT_TRUE(back->weights[2].recipe.empty());
  EXPECT_EQ(back->weightBytes(), 4u * 32 * 2 + 2 * 8 * 4 * 4 + 3 * 4);
  // The weight table section alone (plans without a CUDA program).
  EncodedProgram table = encodeWeightTable(p.weights);
  auto slots = decodeWeightTable(table.bytes);
  ASSERT_TRUE(bool(slots)) << llvm::toString(slots.takeError());
  EXPECT_EQ((*slots)[0].recipe, mapped.recipe);
  EXPECT_EQ((*slots)[1].recipe, experts.recipe);
  EXPECT_EQ((*slots)[2].bytes, embedded.bytes);
  // Truncated anywhere: an error, never a read past the end.
  for (size_t n = 0; n < table.bytes.size(); ++n)
    EXPECT_FALSE(bool(decodeWeightTable(llvm::StringRef(table.bytes).take_front(n))))
        << "length " << n;
  llvm::consumeError(decodeWeightTable("").takeError());
}

TEST(PlanWeights, QuantisedWeightsAreDequantisedToF16AtLoadTime) {
  // One q8_0 block (f16 scale 0.5, then 32 int8) per row, two rows, after 7 bytes.
  std::vector<uint8_t> q(7, 0xee);
  for (int r = 0; r < 2; ++r) {
    uint16_t scale = floatToHalf(r ? 0.25f : 0.5f);
    q.push_back(static_cast<uint8_t>(scale & 0xff));
    q.push_back(static_cast<uint8_t>(scale >> 8));
    for (int i = 0; i < 32; ++i)
      q.push_back(static_cast<uint8_t>(static_cast<int8_t>(i - 16 + r)));
  }
  std::string file = test::tempPath(".gguf");
  test::writeFile(file, q);
  TensorSlot s("w", TensorType{DType::F16, {2, 32}});
  s.recipe.sources.push_back({file, q.size(), 7, TensorType{DType::Q8_0, {2, 32}}, "w.weight"});
  s.recipe.steps.push_back(RecipeStep::convert(DType::F16));
  EXPECT_EQ(s.recipe.str(),
            llvm::sys::path::filename(file).str() + " @ 0x7 q8_0[2, 32] | convert(f16)");
  auto bytes = loadSlotBytes(s);
  llvm::sys::fs::remove(file);
  ASSERT_TRUE(bool(bytes)) << llvm::toString(bytes.takeError());
  ASSERT_EQ(bytes->size(), 2u * 32 * 2);
  for (int r = 0; r < 2; ++r)
    for (int i = 0; i < 32; ++i) {
      uint16_t h;
      std::memcpy(&h, bytes->data() + 2 * (r * 32 + i), 2);
      EXPECT_EQ(halfToFloat(h), (r ? 0.25f : 0.5f) * static_cast<float>(i - 16 + r))
          << r << "," << i;
    }
}

TEST(PlanWeights, AModelFileThatChangedSizeIsAClearError) {
  std::string why, dir = generatedModels(why);
  if (dir.empty())
    GTEST_SKIP() << "model files not generated: " << why;
  std::string copy = test::tempPath(".gguf");
  test::writeFile(copy, test::readFile(dir + "/qwen3.gguf"));
  auto plan = compileModel(copy);
  ASSERT_TRUE(bool(plan)) << llvm::toString(plan.takeError());
  {
    auto ok = Executor::create(*plan, {});
    ASSERT_TRUE(bool(ok)) << llvm::toString(ok.takeError());
  }
  std::vector<uint8_t> grown = test::readFile(copy);
  grown.push_back(0);
  test::writeFile(copy, grown);
  auto exec = Executor::create(*plan, {});
  ASSERT_FALSE(bool(exec));
  std::string msg = llvm::toString(exec.takeError());
  EXPECT_NE(msg.find(copy), std::string::npos) << msg;
  EXPECT_NE(msg.find("changed since the plan was compiled"), std::string::npos) << msg;
  EXPECT_NE(msg.find("token_embd"), std::string::npos) << msg;
  llvm::sys::fs::remove(copy);
  auto gone = Executor::create(*plan, {});
  ASSERT_FALSE(bool(gone));
  msg = llvm::toString(gone.takeError());
  EXPECT_NE(msg.find("cannot read the model file"), std::string::npos) << msg;
}

// --- the CLI -----------------------------------------------------------------------------

class CliRun : public ::testing::TestWithParam<const char *> {};

TEST_P(CliRun, GivesTheTokensAndLogitsOfTheModelLoadedDirectly) {
  if (fusegraphBinary().empty())
    GTEST_SKIP() << "no fusegraph binary beside the tests";
  std::string why, dir = generatedModels(why);
  if (dir.empty())
    GTEST_SKIP() << "model files not generated: " << why;
  std::string model = dir + "/" + GetParam();
  const int steps = 4;
  Decoded direct = decodeDirect(model, steps);
  for (const char *ext : {".npy", ".bin"}) {
    std::string dump = test::tempPath(ext);
    int rc = -1;
    std::string out = runCli({"run", model, "--device", "cpu", "--ctx", "32", "--prefill", "7",
                              "--kv-dtype", "f32", "--prompt-ids", "3,17,42,5,77,9,31", "--steps",
                              std::to_string(steps), "--dump-logits", dump},
                             rc);
    ASSERT_EQ(rc, 0) << out;
    std::string want = "tokens: ";
    for (size_t i = 0; i < direct.tokens.size(); ++i)
      want += (i ? " " : "") + std::to_string(direct.tokens[i]);
    EXPECT_NE(out.find(want + "\n"), std::string::npos) << "expected '" << want << "' in\n" << out;

    std::vector<uint8_t> b = test::readFile(dump);
    size_t rows = kPrompt.size() + steps - 1;
    size_t vocab = direct.logits.size() / rows;
    size_t header = 0;
    if (llvm::StringRef(ext) == ".npy") {
      ASSERT_GT(b.size(), 10u);
      EXPECT_EQ(std::string(b.begin(), b.begin() + 6), "\x93NUMPY");
      EXPECT_EQ(b[6], 1);
      header = 10 + (b[8] | (b[9] << 8));
      EXPECT_EQ(header % 64, 0u);
      std::string dict(b.begin() + 10, b.begin() + header);
      EXPECT_NE(dict.find("'descr': '<f4'"), std::string::npos) << dict;
      EXPECT_NE(dict.find("'shape': (" + std::to_string(rows) + ", " + std::to_string(vocab) +
                          ")"),
                std::string::npos)
          << dict;
      EXPECT_EQ(dict.back(), '\n');
    }
    ASSERT_EQ(b.size() - header, rows * vocab * 4);
    std::vector<float> got(rows * vocab);
    std::memcpy(got.data(), b.data() + header, got.size() * 4);
    EXPECT_EQ(got, direct.logits) << "rows: the prompt's, then one per decode step";
    llvm::sys::fs::remove(dump);
  }

  // Teacher forcing feeds the given tokens: the logits rows are those of the
  // direct run when the teacher tokens are its greedy ones.
  std::string forced = llvm::join(llvm::map_range(llvm::ArrayRef<int32_t>(direct.tokens).drop_back(),
                                                  [](int32_t t) { return std::to_string(t); }),
                                  ",");
  std::string dump = test::tempPath(".npy");
  int rc = -1;
  std::string out = runCli({"run", model, "--device", "cpu", "--ctx", "32", "--prefill", "7",
                            "--kv-dtype", "f32",
                            "--prompt-ids", "3,17,42,5,77,9,31", "--teacher-forced", forced,
                            "--dump-logits", dump},
                           rc);
  ASSERT_EQ(rc, 0) << out;
  EXPECT_NE(out.find("logits: " + std::to_string(kPrompt.size() + steps - 1) + " rows"),
            std::string::npos)
      << out;
  std::vector<uint8_t> b = test::readFile(dump);
  size_t header = b.size() > 10 ? 10 + (b[8] | (b[9] << 8)) : 0;
  ASSERT_EQ(b.size() - header, direct.logits.size() * 4);
  std::vector<float> got(direct.logits.size());
  std::memcpy(got.data(), b.data() + header, got.size() * 4);
  EXPECT_EQ(got, direct.logits);
  llvm::sys::fs::remove(dump);
  // Too few teacher tokens for --steps is a usage error, not a crash.
  out = runCli({"run", model, "--device", "cpu", "--ctx", "32", "--prefill", "7", "--prompt-ids", "3,17",
                "--teacher-forced", "1,2",
                "--steps", "5"},
               rc);
  EXPECT_EQ(rc, 1) << out;
  EXPECT_NE(out.find("--teacher-forced gives 2 tokens but 5 steps feed 4"), std::string::npos)
      << out;
}

/// `run X.plan` (a plan compiled from the model file with --all-logits, with a
/// CUDA program whose weights are recipes) gives the logits of `run MODEL` on
/// the CPU; a plan whose prefill returns only the last row cannot dump every
/// prompt row and says how to get one that can.
TEST_P(CliRun, APlanFileGivesTheLogitsOfTheModelFile) {
  if (fusegraphBinary().empty())
    GTEST_SKIP() << "no fusegraph binary beside the tests";
  std::string why, dir = generatedModels(why);
  if (dir.empty())
    GTEST_SKIP() << "model files not generated: " << why;
  std::string model = dir + "/" + GetParam();
  std::string plan = test::tempPath(".plan");
  int rc = -1;
  std::string out = runCli({"compile", model, "-o", plan, "--ctx", "32", "--prefill", "7",
                            "--kv-dtype", "f32", "--all-logits"},
                           rc);
  ASSERT_EQ(rc, 0) << out;
  std::vector<std::vector<uint8_t>> dumps;
  for (const std::string &what : {model, plan}) {
    std::string dump = test::tempPath(".bin");
    out =
        runCli({"run", what, "--device", "cpu", "--ctx", "32", "--prefill", "7", "--kv-dtype",
                "f32", "--prompt-ids", "3,17,42,5,77,9,31", "--steps", "4", "--dump-logits", dump},
               rc);
    ASSERT_EQ(rc, 0) << what << ": " << out;
    dumps.push_back(test::readFile(dump));
    llvm::sys::fs::remove(dump);
  }
  ASSERT_FALSE(dumps[0].empty());
  EXPECT_TRUE(dumps[0] == dumps[1]) << "run MODEL and run X.plan give different logits";

  // The default plan: prefill_7 returns one row; its tokens are the same.
  out = runCli({"compile", model, "-o", plan, "--ctx", "32", "--prefill", "7", "--kv-dtype", "f32"},
               rc);
  ASSERT_EQ(rc, 0) << out;
  std::string dump = test::tempPath(".bin");
  out = runCli({"run", plan, "--device", "cpu", "--prompt-ids", "3,17,42,5,77,9,31", "--steps", "4",
                "--dump-logits", dump},
               rc);
  EXPECT_EQ(rc, 1) << out;
  EXPECT_NE(out.find("--dump-logits needs the logits of every prompt token, but entry "
                     "'prefill_7' returns only the last row; compile the plan with --all-logits"),
            std::string::npos)
      << out;
  llvm::sys::fs::remove(dump);
  llvm::sys::fs::remove(plan);
}

/// `inspect` shows each weight's recipe on one line: file @ offset, type, steps.
TEST(CliInspect, ShowsEachWeightsRecipeOnOneLine) {
  if (fusegraphBinary().empty())
    GTEST_SKIP() << "no fusegraph binary beside the tests";
  std::string why, dir = generatedModels(why);
  if (dir.empty())
    GTEST_SKIP() << "model files not generated: " << why;
  int rc = -1;
  std::string out = runCli({"inspect", dir + "/llama3-hf", "--ctx", "32", "--prefill", "7"}, rc);
  ASSERT_EQ(rc, 0) << out;
  EXPECT_NE(out.find("from the model: 17 mapped, 4 made by load-time recipes"), std::string::npos)
      << out;
  EXPECT_NE(out.find("    blk.0.attn_v: model.safetensors @ 0x"), std::string::npos) << out;
  size_t q = out.find("    blk.0.attn_q: model.safetensors @ 0x");
  ASSERT_NE(q, std::string::npos) << out;
  std::string line = out.substr(q, out.find('\n', q) - q);
  EXPECT_NE(line.find(" f32[64, 64] | permute_heads(4)"), std::string::npos) << line;
  EXPECT_NE(out.find("    rope_freqs: embedded f32[8] (32 B)"), std::string::npos) << out;
  out = runCli({"inspect", dir + "/qwen3moe-hf", "--ctx", "32", "--prefill", "7"}, rc);
  ASSERT_EQ(rc, 0) << out;
  EXPECT_NE(out.find("blk.1.ffn_down_exps: model-0000"), std::string::npos) << out;
  EXPECT_NE(out.find(" +3 sources f32[64, 32] | concat\n"), std::string::npos) << out;
}

INSTANTIATE_TEST_SUITE_P(Models, CliRun, ::testing::Values("qwen3.gguf", "llama3-hf"),
                         [](const auto &info) {
                           std::string n = info.param;
                           for (char &c : n)
                             if (!isalnum(static_cast<unsigned char>(c)))
                               c = '_';
                           return n;
                         });

} // namespace
} // namespace fg
