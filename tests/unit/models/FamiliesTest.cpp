//===- FamiliesTest.cpp - every family, both formats, same graph and logits ===//
//
// gen_models.py writes each family as a Hugging Face folder and as a GGUF file
// laid out like llama.cpp's converter (with the same weights), plus logits of
// an independent float64 numpy forward pass with Hugging Face semantics. Both
// files must load to the same graph, the same weight bytes (the canonical
// layout), and logits matching the numpy ones over a 7-token prefill and one
// decode step.
//
//===----------------------------------------------------------------------===//
#include "ModelFiles.h"

#include "runtime/Compare.h"

#include "frontends/Frontend.h"
#include "ir/Printer.h"
#include "ir/Verifier.h"

#include <gtest/gtest.h>

#include <cmath>

namespace fg {
namespace {

using test::generatedModels;

/// The graph's text without weight initialisers (they name different files).
std::string structure(const Graph &g) {
  Graph copy = g;
  for (Function &fn : copy.functions())
    for (Argument &a : fn.arguments())
      a.init = WeightInit();
  return printToString(copy);
}

std::vector<float> readFloats(const std::string &path) {
  std::vector<uint8_t> b = test::readFile(path);
  std::vector<float> f(b.size() / 4);
  std::memcpy(f.data(), b.data(), f.size() * 4);
  return f;
}

const std::vector<int64_t> kPrompt = {3, 17, 42, 5, 77, 9, 31, 60};

/// Logits [8, vocab]: prefill_7 over the first 7 tokens, then decode of the 8th.
std::vector<float> runModel(const LoadedModel &m) {
  ReferenceInterpreter interp(m.graph);
  if (auto e = test::bindWeights(interp, m.weights)) {
    ADD_FAILURE() << llvm::toString(std::move(e));
    return {};
  }
  std::vector<float> all;
  auto step = [&](llvm::StringRef entry, llvm::ArrayRef<int64_t> toks, int64_t pos0) {
    llvm::StringMap<HostTensor> in;
    std::vector<int64_t> pos;
    for (size_t i = 0; i < toks.size(); ++i)
      pos.push_back(pos0 + static_cast<int64_t>(i));
    int64_t t = static_cast<int64_t>(toks.size());
    in["tokens"] = HostTensor::fromInts({DType::I32, {t}}, toks);
    in["positions"] = HostTensor::fromInts({DType::I32, {t}}, pos);
    std::vector<std::pair<std::string, HostTensor>> out;
    if (auto e = interp.run(entry, in, out)) {
      ADD_FAILURE() << llvm::toString(std::move(e));
      return;
    }
    std::vector<float> f = out.at(0).second.toFloats();
    all.insert(all.end(), f.begin(), f.end());
  };
  step("prefill_7", llvm::ArrayRef<int64_t>(kPrompt).take_front(7), 0);
  step("decode", llvm::ArrayRef<int64_t>(kPrompt).slice(7, 1), 7);
  return all;
}

class FamilyTest : public ::testing::TestWithParam<const char *> {};

TEST_P(FamilyTest, BothFormatsGiveTheSameGraphWeightsAndLogits) {
  std::string why, dir = generatedModels(why);
  if (dir.empty())
    GTEST_SKIP() << "model files not generated: " << why;
  std::string name = GetParam();
  ModelOptions opts;
  opts.ctx = 16;
  opts.prefill = {7};
  opts.kvDType = DType::F32;
  opts.allLogits = true; // every prompt row is compared with numpy's
  auto gg = loadModelWithWeights(dir + "/" + name + ".gguf", opts);
  ASSERT_TRUE(bool(gg)) << llvm::toString(gg.takeError());
  auto hf = loadModelWithWeights(dir + "/" + name + "-hf", opts);
  ASSERT_TRUE(bool(hf)) << llvm::toString(hf.takeError());
  if (llvm::Error e = verifyGraph(gg->graph))
    FAIL() << llvm::toString(std::move(e));
  EXPECT_EQ(gg->family, hf->family);
  std::string sg = structure(gg->graph), sh = structure(hf->graph);
  if (sg != sh) {
    // Report the first differing line, not two whole graphs.
    llvm::SmallVector<llvm::StringRef> lg, lh;
    llvm::StringRef(sg).split(lg, '\n');
    llvm::StringRef(sh).split(lh, '\n');
    for (size_t i = 0; i < std::min(lg.size(), lh.size()); ++i)
      if (lg[i] != lh[i]) {
        ADD_FAILURE() << "graphs differ at line " << i + 1 << ":\n  gguf: " << lg[i].str()
                      << "\n  hf:   " << lh[i].str();
        break;
      }
  }

  // The canonical layout is GGUF's: its weights are all mapped, and HF's
  // transformed ones match them byte for byte.
  ASSERT_EQ(gg->weights.size(), hf->weights.size());
  for (const WeightEntry &w : gg->weights.entries()) {
    EXPECT_TRUE(w.recipe.isPlainRange()) << w.name << " should be used as stored in the GGUF file";
    const WeightEntry *h = hf->weights.lookup(w.name);
    ASSERT_NE(h, nullptr) << w.name;
    EXPECT_EQ(h->type, w.type) << w.name;
    if (w.name == "rope_freqs") {
      // Computed from config.json in f64 here, in f32 by the converter.
      ASSERT_EQ(w.bytes().size(), h->bytes().size());
      for (size_t i = 0; i < w.bytes().size(); i += 4) {
        float x, y;
        std::memcpy(&x, w.bytes().data() + i, 4);
        std::memcpy(&y, h->bytes().data() + i, 4);
        EXPECT_NEAR(x, y, 1e-5 * std::fabs(x)) << "rope factor " << i / 4;
      }
      continue;
    }
    EXPECT_TRUE(w.bytes() == h->bytes()) << w.name << " differs between the formats";
  }

  std::vector<float> want = readFloats(dir + "/" + name + ".logits.bin");
  std::vector<float> a = runModel(*gg), b = runModel(*hf);
  ASSERT_EQ(a.size(), want.size());
  ASSERT_EQ(b.size(), want.size());
  // The same bytes give the same logits (up to rope_freqs' last bits).
  EXPECT_LT(normalizedError(a, b), 1e-6) << "the formats disagree";
  EXPECT_LT(normalizedError(a, want), 1e-4) << "vs the numpy forward pass (HF semantics)";
  // Per row too, so the decode step is checked on its own.
  size_t vocab = want.size() / kPrompt.size();
  llvm::ArrayRef<float> lastA(a.data() + 7 * vocab, vocab), lastW(want.data() + 7 * vocab, vocab);
  EXPECT_LT(normalizedError(lastA, lastW), 1e-4) << "decode step";
}

INSTANTIATE_TEST_SUITE_P(Models, FamilyTest,
                         ::testing::Values("llama3", "smollm2", "qwen2", "qwen3", "qwen3moe",
                                           "gemma3"));

TEST(Families, HfTransformsAreRecordedAsRecipes) {
  std::string why, dir = generatedModels(why);
  if (dir.empty())
    GTEST_SKIP() << "model files not generated: " << why;
  ModelOptions opts;
  opts.ctx = 16;
  opts.prefill = {7};
  auto llama = loadModelWithWeights(dir + "/llama3-hf", opts);
  ASSERT_TRUE(bool(llama)) << llvm::toString(llama.takeError());
  const WeightEntry *q = llama->weights.lookup("blk.0.attn_q");
  ASSERT_NE(q, nullptr);
  EXPECT_TRUE(q->isTransformed());
  EXPECT_EQ(q->recipe.steps, std::vector<RecipeStep>{RecipeStep::permuteHeads(4)})
      << q->recipe.str();
  EXPECT_EQ(q->recipe.str().substr(q->recipe.str().find(" f32")),
            " f32[64, 64] | permute_heads(4)");
  const WeightEntry *v = llama->weights.lookup("blk.0.attn_v");
  ASSERT_NE(v, nullptr);
  EXPECT_FALSE(v->isTransformed()) << "v is used as stored";
  EXPECT_EQ(v->source().tensor, "model.layers.0.self_attn.v_proj.weight");
  // The graph records it: mapped weights carry tensor(file, name).
  const Function &fn = llama->graph.functions().front();
  for (const Argument &a : fn.arguments()) {
    if (fn.value(a.value).name == "blk.0.attn_v") {
      EXPECT_EQ(a.init.kind, WeightInit::Kind::Tensor);
    }
    if (fn.value(a.value).name == "blk.0.attn_q") {
      EXPECT_EQ(a.init.kind, WeightInit::Kind::None);
    }
  }
  EXPECT_NE(llama->weights.lookup("rope_freqs"), nullptr);

  auto gemma = loadModelWithWeights(dir + "/gemma3-hf", opts);
  ASSERT_TRUE(bool(gemma)) << llvm::toString(gemma.takeError());
  const WeightEntry *n = gemma->weights.lookup("blk.0.attn_norm");
  ASSERT_NE(n, nullptr);
  EXPECT_EQ(n->recipe.steps, std::vector<RecipeStep>{RecipeStep::addScalar(1.0)})
      << n->recipe.str();
  EXPECT_NE(n->recipe.str().find("| add_scalar(1)"), std::string::npos) << n->recipe.str();
  EXPECT_EQ(gemma->config.slidingLayers,
            std::vector<bool>({true, true, true, true, true, false, true}));

  auto moe = loadModelWithWeights(dir + "/qwen3moe-hf", opts);
  ASSERT_TRUE(bool(moe)) << llvm::toString(moe.takeError());
  const WeightEntry *e = moe->weights.lookup("blk.1.ffn_down_exps");
  ASSERT_NE(e, nullptr);
  EXPECT_EQ(e->type.shape, Shape({4, 64, 32}));
  EXPECT_TRUE(e->isTransformed());
  EXPECT_EQ(e->recipe.sources.size(), 4u);
  EXPECT_EQ(e->recipe.steps, std::vector<RecipeStep>{RecipeStep::concat()}) << e->recipe.str();
  EXPECT_EQ(e->recipe.sources[3].tensor, "model.layers.1.mlp.experts.3.down_proj.weight");
}

TEST(Families, LoadModelKeepsItsSignatureForModelFiles) {
  std::string why, dir = generatedModels(why);
  if (dir.empty())
    GTEST_SKIP() << "model files not generated: " << why;
  ModelOptions opts;
  opts.ctx = 32;
  opts.prefill = {4, 8};
  auto g = loadModel(dir + "/qwen3.gguf", opts);
  ASSERT_TRUE(bool(g)) << llvm::toString(g.takeError());
  ASSERT_NE(g->lookup("decode"), nullptr);
  ASSERT_NE(g->lookup("prefill_8"), nullptr);
  const Function &fn = *g->lookup("decode");
  ValueId k = fn.lookup("k_cache.1");
  ASSERT_NE(k, kNoValue);
  EXPECT_EQ(fn.type(k), TensorType(DType::F16, {32, 2, 32}));
  ValueId logits = fn.results().front();
  EXPECT_EQ(fn.type(logits), TensorType(DType::F32, {1, 96}));
}

} // namespace
} // namespace fg
