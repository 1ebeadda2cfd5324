//===- FamilyConfigTest.cpp - the families' other config.json spellings ---===//
//
// gen_models.py writes each family's config.json one way; the families also
// read the spellings real checkpoints use: a multimodal gemma3 checkpoint
// (model_type gemma3, the text model's settings under text_config),
// transformers 5's rope_parameters (per layer kind for gemma3, with
// layer_types), and num_local_experts for qwen3moe. Each test copies a
// generated folder with its config.json rewritten and checks that both
// spellings load to the same graph and the same weight bytes.
//
//===----------------------------------------------------------------------===//
#include "ModelFiles.h"

#include "frontends/Frontend.h"
#include "frontends/models/Family.h"
#include "ir/Printer.h"

#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"

#include <nlohmann/json.hpp>

#include <gtest/gtest.h>

#include <functional>

namespace fg {
namespace {

using Json = nlohmann::json;

/// A copy of gen_models.py's `<model>-hf` folder whose config.json is
/// `edit(config)`; "" (and a failure) when it cannot be written.
std::string copyWithConfig(const std::string &dir, const std::string &model,
                           const std::function<Json(Json)> &edit) {
  std::string from = dir + "/" + model + "-hf";
  llvm::SmallString<256> to;
  if (llvm::sys::fs::createUniqueDirectory("fg-family-config", to)) {
    ADD_FAILURE() << "cannot create a temporary folder";
    return "";
  }
  std::error_code ec;
  for (llvm::sys::fs::directory_iterator it(from, ec), end; it != end && !ec; it.increment(ec)) {
    llvm::StringRef name = llvm::sys::path::filename(it->path());
    if (name == "config.json")
      continue;
    if (llvm::sys::fs::copy_file(it->path(), to + "/" + name)) {
      ADD_FAILURE() << "cannot copy " << it->path();
      return "";
    }
  }
  std::vector<uint8_t> text = test::readFile(from + "/config.json");
  Json config = Json::parse(text.begin(), text.end(), nullptr, /*allow_exceptions=*/false);
  if (config.is_discarded()) {
    ADD_FAILURE() << from << "/config.json is not JSON";
    return "";
  }
  std::string out = edit(std::move(config)).dump(2);
  test::writeFile((to + "/config.json").str(), std::vector<uint8_t>(out.begin(), out.end()));
  return to.str().str();
}

/// The graph's text without weight initialisers (they name the folders).
std::string structure(const Graph &g) {
  Graph copy = g;
  for (Function &fn : copy.functions())
    for (Argument &a : fn.arguments())
      a.init = WeightInit();
  return printToString(copy);
}

LoadedModel load(const std::string &path) {
  ModelOptions opts;
  opts.ctx = 16;
  opts.prefill = {4};
  auto m = loadModelWithWeights(path, opts);
  if (!m) {
    ADD_FAILURE() << path << ": " << llvm::toString(m.takeError());
    return LoadedModel();
  }
  return std::move(*m);
}

/// Both folders give one family, one graph and the same weight bytes.
void expectSameModel(const std::string &a, const std::string &b) {
  LoadedModel ma = load(a), mb = load(b);
  ASSERT_NE(ma.family, nullptr);
  EXPECT_EQ(ma.family, mb.family);
  EXPECT_EQ(structure(ma.graph), structure(mb.graph)) << a << " vs " << b;
  ASSERT_EQ(ma.weights.size(), mb.weights.size());
  for (const WeightEntry &w : ma.weights.entries()) {
    const WeightEntry *o = mb.weights.lookup(w.name);
    ASSERT_NE(o, nullptr) << w.name;
    EXPECT_EQ(o->type, w.type) << w.name;
    EXPECT_TRUE(o->bytes() == w.bytes()) << w.name;
  }
}

class FamilyConfig : public ::testing::Test {
protected:
  void SetUp() override {
    std::string why;
    dir_ = test::generatedModels(why);
    if (dir_.empty())
      GTEST_SKIP() << "model files not generated: " << why;
  }
  void TearDown() override {
    for (const std::string &d : made_)
      llvm::sys::fs::remove_directories(d);
  }
  std::string rewritten(const std::string &model, const std::function<Json(Json)> &edit) {
    std::string d = copyWithConfig(dir_, model, edit);
    if (!d.empty())
      made_.push_back(d);
    return d;
  }
  std::string dir_;
  std::vector<std::string> made_;
};

TEST_F(FamilyConfig, Gemma3MultimodalReadsTextConfig) {
  std::string mm = rewritten("gemma3", [](Json c) {
    Json root = Json::object();
    root["model_type"] = "gemma3";
    root["text_config"] = std::move(c);
    root["vision_config"] = Json::object({{"hidden_size", 1152}}); // not read
    root["num_hidden_layers"] = 99; // a multimodal root's own keys are not the text model's
    return root;
  });
  ASSERT_FALSE(mm.empty());
  expectSameModel(dir_ + "/gemma3-hf", mm);
  EXPECT_EQ(load(mm).config.nLayers, 7);
}

TEST_F(FamilyConfig, Gemma3RopeParametersPerLayerKind) {
  // The legacy spelling, with a local rope base other than the default (so a
  // reader that missed the sliding layers' theta would differ).
  std::string legacy = rewritten("gemma3", [](Json c) {
    c["rope_local_base_freq"] = 20000.0;
    return c;
  });
  // transformers 5: rope_parameters per layer kind, layer_types per layer.
  std::string v5 = rewritten("gemma3", [](Json c) {
    c.erase("rope_theta");
    c.erase("rope_scaling");
    c.erase("rope_local_base_freq");
    c.erase("sliding_window_pattern");
    c["rope_parameters"] = {
        {"full_attention", {{"rope_type", "linear"}, {"factor", 8.0}, {"rope_theta", 1e6}}},
        {"sliding_attention", {{"rope_type", "default"}, {"rope_theta", 20000.0}}}};
    std::vector<std::string> types(7, "sliding_attention");
    types[5] = "full_attention"; // every 6th layer is global
    c["layer_types"] = types;
    return c;
  });
  ASSERT_FALSE(legacy.empty());
  ASSERT_FALSE(v5.empty());
  expectSameModel(legacy, v5);
  LoadedModel m = load(v5);
  ASSERT_TRUE(m.config.ropeSliding.has_value());
  EXPECT_FLOAT_EQ(m.config.ropeSliding->theta, 20000.0f);
  EXPECT_FLOAT_EQ(m.config.rope.theta, 1e6f);
  EXPECT_DOUBLE_EQ(m.config.rope.freqScale, 1.0 / 8);
  EXPECT_NE(structure(m.graph), structure(load(dir_ + "/gemma3-hf").graph))
      << "the sliding layers' rope base reaches the graph";
}

TEST_F(FamilyConfig, Llama3RopeParameters) {
  std::string v5 = rewritten("llama3", [](Json c) {
    Json rp = c["rope_scaling"];
    rp["rope_theta"] = c["rope_theta"];
    c.erase("rope_scaling");
    c.erase("rope_theta");
    c["rope_parameters"] = rp;
    return c;
  });
  ASSERT_FALSE(v5.empty());
  expectSameModel(dir_ + "/llama3-hf", v5);
  auto model = load(v5); // keep it alive: lookup points into its weights
  const WeightEntry *f = model.weights.lookup("rope_freqs");
  ASSERT_NE(f, nullptr) << "Llama-3 scaling read from rope_parameters";
  EXPECT_TRUE(f->isEmbedded());
}

TEST_F(FamilyConfig, Qwen3MoeNumLocalExperts) {
  std::string v5 = rewritten("qwen3moe", [](Json c) {
    c["num_local_experts"] = c["num_experts"];
    c.erase("num_experts");
    return c;
  });
  ASSERT_FALSE(v5.empty());
  expectSameModel(dir_ + "/qwen3moe-hf", v5);
  EXPECT_EQ(load(v5).config.nExperts, 4);
}

} // namespace
} // namespace fg
