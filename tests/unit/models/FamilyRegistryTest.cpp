//===- FamilyRegistryTest.cpp - every registered family, from the table ---===//
//
// The table (frontends/models/Family.h) is the list of supported families:
// these tests iterate it, so a family added to families/Families.def without
// its tests fails here. Each family must
//   - have unique names the loaders find it by (GGUF arch, HF model_type),
//     listed in the unknown-architecture errors;
//   - produce the decoder options written down below from hand-made
//     hyperparameters (a new family adds its row);
//   - load from at least one model gen_models.py writes, in both formats, to
//     its own record, and decode token by token (the decode entry only, over a
//     growing KV cache) to the logits of gen_models.py's numpy forward pass.
//
//===----------------------------------------------------------------------===//
#include "ModelFiles.h"

#include "frontends/Frontend.h"
#include "frontends/models/Family.h"
#include "runtime/Compare.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <map>
#include <set>

namespace fg {
namespace {

TEST(FamilyRegistry, NamesAreUniqueAndFindTheirFamily) {
  llvm::ArrayRef<const ModelFamily *> all = modelFamilies();
  ASSERT_EQ(all.size(), 5u);
  std::set<std::string> names, archs, types;
  for (const ModelFamily *f : all) {
    ASSERT_NE(f, nullptr);
    EXPECT_FALSE(f->name.empty());
    EXPECT_TRUE(names.insert(f->name.str()).second) << "family name " << f->name.str();
    EXPECT_FALSE(f->ggufArchs.empty()) << f->name.str();
    for (llvm::StringRef a : f->ggufArchs) {
      EXPECT_TRUE(archs.insert(a.str()).second) << "GGUF arch " << a.str() << " registered twice";
      EXPECT_EQ(familyForGgufArch(a), f) << a.str();
    }
    for (llvm::StringRef t : f->hfModelTypes) {
      EXPECT_TRUE(types.insert(t.str()).second) << "model_type " << t.str() << " registered twice";
      EXPECT_EQ(familyForHfModelType(t), f) << t.str();
    }
    EXPECT_FALSE(f->hfModelTypes.empty() && f->hfHParams) << f->name.str() << ": HF hook, no HF";
    EXPECT_EQ(f->hfRopeScalingType.empty(), f->hfRopeScaling == nullptr)
        << f->name.str() << ": a rope type of its own needs its reader, and the reader a type";
    EXPECT_TRUE(f->hfMultimodalModelType.empty() ||
                llvm::is_contained(f->hfModelTypes, f->hfMultimodalModelType))
        << f->name.str() << ": the multimodal model_type must be one of its model_types";
    EXPECT_EQ(f->moe, f->name == "qwen3moe") << f->name.str();
  }
  EXPECT_EQ(familyForGgufArch("gpt2"), nullptr);
  EXPECT_EQ(familyForHfModelType("qwen3moe"), nullptr) << "HF spells it qwen3_moe";
  EXPECT_EQ(familyForGgufArch("qwen3_moe"), nullptr) << "GGUF spells it qwen3moe";
  EXPECT_EQ(familyForHfModelType("gemma3"), familyForHfModelType("gemma3_text"));
  EXPECT_EQ(familyForHfModelType("gemma3")->hfMultimodalModelType, "gemma3");
  // The lists the unknown-architecture errors give (BadInputTest checks the
  // whole messages): each family's first name, in the table's order.
  EXPECT_EQ(supportedGgufArchs(), "llama, qwen2, qwen3, qwen3moe, gemma3");
  EXPECT_EQ(supportedHfModelTypes(), "llama, qwen2, qwen3, qwen3_moe, gemma3_text");
}

/// What each family's decoderOptions must set on top of the shared part.
struct Want {
  RopeMode rope = RopeMode::Neox;
  bool qkvBias = false, qkNorm = false, postNorms = false, moe = false, freqFactors = false;
  GluKind glu = GluKind::SwiGLU;
  bool sliding = false;
};

const std::map<std::string, Want> &expectations() {
  static const std::map<std::string, Want> m = {
      {"llama", {.rope = RopeMode::Normal, .freqFactors = true}},
      {"qwen2", {.qkvBias = true}},
      {"qwen3", {.qkNorm = true}},
      {"qwen3moe", {.qkNorm = true, .moe = true}},
      {"gemma3", {.qkNorm = true, .postNorms = true, .glu = GluKind::GeGLU, .sliding = true}},
  };
  return m;
}

/// Hand-made hyperparameters every family accepts (gemma3 reads the sliding
/// fields, qwen3moe the expert ones, llama the Llama-3 rope).
ModelHParams handMade(const ModelFamily *f) {
  ModelHParams hp;
  hp.family = f;
  hp.nLayers = 3;
  hp.nEmbd = 64;
  hp.nHeads = 4;
  hp.nKvHeads = 2;
  hp.headDim = 32;
  hp.vocab = 50;
  hp.nFf = f->moe ? 0 : 96;
  hp.nExperts = f->moe ? 4 : 0;
  hp.nExpertsUsed = f->moe ? 2 : 0;
  hp.expertFf = f->moe ? 48 : 0;
  hp.normEps = 1e-5;
  hp.ropeTheta = 500000;
  hp.llama3Rope = Llama3RopeScaling{};
  hp.slidingWindow = 8;
  hp.slidingLayers = {true, false, true};
  hp.ropeLocalTheta = 10000;
  hp.queryPreAttnScalar = 16;
  return hp;
}

class FamilyRecord : public ::testing::TestWithParam<const ModelFamily *> {};

TEST_P(FamilyRecord, SetsItsDecoderOptions) {
  const ModelFamily *f = GetParam();
  auto it = expectations().find(f->name.str());
  ASSERT_NE(it, expectations().end())
      << "family '" << f->name.str() << "' has no row in this test's expectations()";
  const Want &want = it->second;
  auto c = decoderConfigFor(handMade(f), 32, DType::F32);
  ASSERT_TRUE(bool(c)) << llvm::toString(c.takeError());
  // The shared part.
  EXPECT_EQ(c->nLayers, 3);
  EXPECT_EQ(c->nEmbd, 64);
  EXPECT_EQ(c->resolvedHeadDim(), 32);
  EXPECT_EQ(c->ctx, 32);
  EXPECT_EQ(c->kvDType, DType::F32);
  EXPECT_FLOAT_EQ(c->rope.theta, 500000.0f);
  EXPECT_FLOAT_EQ(static_cast<float>(c->normEps), 1e-5f);
  // The family's.
  EXPECT_EQ(c->rope.mode, want.rope);
  EXPECT_EQ(c->qkvBias, want.qkvBias);
  EXPECT_EQ(c->qkNorm, want.qkNorm);
  EXPECT_EQ(c->postNorms, want.postNorms);
  EXPECT_EQ(c->ropeFreqFactors, want.freqFactors);
  EXPECT_EQ(c->glu, want.glu);
  EXPECT_EQ(c->ffn == DecoderConfig::FfnKind::Moe, want.moe);
  if (want.moe) {
    EXPECT_EQ(c->nExperts, 4);
    EXPECT_EQ(c->nExpertsUsed, 2);
    EXPECT_EQ(c->expertFf, 48);
    EXPECT_EQ(c->gating, TopkGating::Softmax);
  } else {
    EXPECT_EQ(c->nFf, 96);
  }
  if (want.sliding) {
    EXPECT_EQ(c->slidingWindow, 8);
    EXPECT_TRUE(c->isSlidingLayer(0));
    EXPECT_FALSE(c->isSlidingLayer(1));
    ASSERT_TRUE(c->ropeSliding.has_value());
    EXPECT_FLOAT_EQ(c->ropeSliding->theta, 10000.0f);
    EXPECT_DOUBLE_EQ(c->attnScale, 0.25) << "1/sqrt(query_pre_attn_scalar = 16)";
    EXPECT_DOUBLE_EQ(c->embdScale, 8.0) << "sqrt(n_embd = 64)";
  } else {
    EXPECT_EQ(c->slidingWindow, 0);
    EXPECT_FALSE(c->ropeSliding.has_value());
    EXPECT_DOUBLE_EQ(c->attnScale, 0.0);
    EXPECT_DOUBLE_EQ(c->embdScale, 1.0);
  }
}

std::vector<float> readFloats(const std::string &path) {
  std::vector<uint8_t> b = test::readFile(path);
  std::vector<float> f(b.size() / 4);
  if (!f.empty())
    std::memcpy(f.data(), b.data(), f.size() * 4);
  return f;
}

/// Logits [tokens, vocab] from the decode entry alone, one token at a time.
std::vector<float> decodeTokenByToken(const LoadedModel &m, llvm::ArrayRef<int64_t> tokens) {
  ReferenceInterpreter interp(m.graph);
  if (auto e = test::bindWeights(interp, m.weights)) {
    ADD_FAILURE() << llvm::toString(std::move(e));
    return {};
  }
  std::vector<float> all;
  for (size_t i = 0; i < tokens.size(); ++i) {
    llvm::StringMap<HostTensor> in;
    in["tokens"] = HostTensor::fromInts({DType::I32, {1}}, {tokens[i]});
    in["positions"] = HostTensor::fromInts({DType::I32, {1}}, {static_cast<int64_t>(i)});
    std::vector<std::pair<std::string, HostTensor>> out;
    if (auto e = interp.run("decode", in, out)) {
      ADD_FAILURE() << "step " << i << ": " << llvm::toString(std::move(e));
      return {};
    }
    std::vector<float> f = out.at(0).second.toFloats();
    all.insert(all.end(), f.begin(), f.end());
  }
  return all;
}

/// gen_models.py's models with reference logits (stem → family record, by
/// loading the GGUF file).
std::vector<std::pair<std::string, const ModelFamily *>>
generatedWithLogits(const std::string &dir, const ModelOptions &o) {
  std::vector<std::pair<std::string, const ModelFamily *>> out;
  std::error_code ec;
  for (llvm::sys::fs::directory_iterator it(dir, ec), end; it != end && !ec; it.increment(ec)) {
    llvm::StringRef file = llvm::sys::path::filename(it->path());
    if (!file.consume_back(".logits.bin"))
      continue;
    auto m = loadModelWithWeights(dir + "/" + file.str() + ".gguf", o);
    if (!m) {
      ADD_FAILURE() << file.str() << ": " << llvm::toString(m.takeError());
      continue;
    }
    out.push_back({file.str(), m->family});
  }
  std::sort(out.begin(), out.end());
  return out;
}

TEST_P(FamilyRecord, DecodesGeneratedModelsInBothFormats) {
  std::string why, dir = test::generatedModels(why);
  if (dir.empty())
    GTEST_SKIP() << "model files not generated: " << why;
  const ModelFamily *f = GetParam();
  ModelOptions opts;
  opts.ctx = 16;
  opts.prefill = {4};
  opts.kvDType = DType::F32;
  std::vector<int64_t> prompt = {3, 17, 42, 5, 77, 9, 31, 60}; // gen_models.py's PROMPT
  int models = 0;
  for (const auto &[stem, family] : generatedWithLogits(dir, opts)) {
    if (family != f)
      continue;
    ++models;
    std::vector<float> want = readFloats(dir + "/" + stem + ".logits.bin");
    ASSERT_EQ(want.size() % prompt.size(), 0u) << stem;
    std::vector<float> logits[2];
    int i = 0;
    for (const std::string &path : {dir + "/" + stem + ".gguf", dir + "/" + stem + "-hf"}) {
      auto m = loadModelWithWeights(path, opts);
      ASSERT_TRUE(bool(m)) << llvm::toString(m.takeError());
      EXPECT_EQ(m->family, f) << path;
      logits[i] = decodeTokenByToken(*m, prompt);
      ASSERT_EQ(logits[i].size(), want.size()) << path;
      // Every step on its own: the KV cache grows by one row per step.
      size_t vocab = want.size() / prompt.size();
      for (size_t t = 0; t < prompt.size(); ++t)
        EXPECT_LT(normalizedError(llvm::ArrayRef<float>(logits[i]).slice(t * vocab, vocab),
                                  llvm::ArrayRef<float>(want).slice(t * vocab, vocab)),
                  1e-4)
            << path << " step " << t << " vs the numpy forward pass";
      ++i;
    }
    EXPECT_LT(normalizedError(logits[0], logits[1]), 1e-6) << stem << ": the formats disagree";
  }
  EXPECT_GE(models, 1) << "gen_models.py writes no model of family '" << f->name.str()
                       << "': add one (tests/models/gen_models.py FAMILIES)";
}

INSTANTIATE_TEST_SUITE_P(Registered, FamilyRecord,
                         ::testing::ValuesIn(modelFamilies().begin(), modelFamilies().end()),
                         [](const auto &info) { return info.param->name.str(); });

} // namespace
} // namespace fg
