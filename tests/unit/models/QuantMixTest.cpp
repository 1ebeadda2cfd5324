//===- QuantMixTest.cpp - a Q4_K_M-like GGUF file on the CPU reference ----===//
//
// gen_models.py writes qmix.gguf the way llama-quantize's Q4_K_M lays out a
// small llama with tied embeddings: q4_K matrices, q6_K for the embedding
// (the output, as it is tied) and for attn_v / ffn_down of layer 1, and the
// fallbacks q5_0 / q8_0 for ffn_down, whose rows (288) are not whole
// 256-blocks. qmix-f32.gguf holds the same tensors dequantised (by the gguf
// package) in f32. Both must load, and run on the CPU reference to the same
// logits: the quantised embedding is read row by row (get_rows) and as the
// lm head.
//
//===----------------------------------------------------------------------===//
#include "ModelFiles.h"

#include "codegen/cuda/Compile.h"
#include "frontends/Frontend.h"
#include "runtime/Executor.h"
#include "runtime/ProgramIO.h"

#include <gtest/gtest.h>

#include <cmath>
#include <map>

namespace fg {
namespace {

const std::vector<int64_t> kPrompt = {3, 17, 42, 5, 77, 9, 31, 60};

/// Logits [8, vocab]: prefill_7 over the first 7 tokens, then decode of the 8th.
std::vector<float> runPrompt(const LoadedModel &m) {
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

llvm::Expected<LoadedModel> load(const std::string &path) {
  ModelOptions opts;
  opts.ctx = 16;
  opts.prefill = {7};
  opts.kvDType = DType::F32;
  opts.allLogits = true;
  return loadModelWithWeights(path, opts);
}

TEST(QuantMix, LoadsWithTheTypesOfTheMix) {
  std::string why, dir = test::generatedModels(why);
  if (dir.empty())
    GTEST_SKIP() << "model files not generated: " << why;
  auto m = load(dir + "/qmix.gguf");
  ASSERT_TRUE(bool(m)) << llvm::toString(m.takeError());
  struct Want {
    const char *name;
    DType dtype;
  } wants[] = {{"token_embd", DType::Q6_K},        {"blk.0.attn_q", DType::Q4_K},
               {"blk.0.attn_v", DType::Q4_K},      {"blk.1.attn_v", DType::Q6_K},
               {"blk.0.ffn_down", DType::Q5_0},    {"blk.1.ffn_down", DType::Q8_0},
               {"blk.1.ffn_gate", DType::Q4_K},    {"blk.0.attn_norm", DType::F32}};
  for (const Want &w : wants) {
    const WeightEntry *e = m->weights.lookup(w.name);
    ASSERT_NE(e, nullptr) << w.name;
    EXPECT_EQ(e->type.dtype, w.dtype) << w.name;
    EXPECT_TRUE(e->recipe.isPlainRange()) << w.name << " is used as stored";
  }
  EXPECT_EQ(m->weights.lookup("output"), nullptr) << "tied: the lm head is token_embd";
  EXPECT_EQ(m->weights.lookup("blk.0.ffn_down")->type, (TensorType{DType::Q5_0, {256, 288}}));
}

TEST(QuantMix, RunsLikeItsDequantisedF32Twin) {
  std::string why, dir = test::generatedModels(why);
  if (dir.empty())
    GTEST_SKIP() << "model files not generated: " << why;
  auto q = load(dir + "/qmix.gguf");
  ASSERT_TRUE(bool(q)) << llvm::toString(q.takeError());
  auto f = load(dir + "/qmix-f32.gguf");
  ASSERT_TRUE(bool(f)) << llvm::toString(f.takeError());
  EXPECT_EQ(f->weights.lookup("token_embd")->type.dtype, DType::F32);
  std::vector<float> lq = runPrompt(*q), lf = runPrompt(*f);
  ASSERT_EQ(lq.size(), 8u * 96);
  ASSERT_EQ(lq.size(), lf.size());
  double num = 0, den = 0, maxAbs = 0;
  for (size_t i = 0; i < lq.size(); ++i) {
    ASSERT_TRUE(std::isfinite(lq[i])) << i;
    num += (double(lq[i]) - lf[i]) * (double(lq[i]) - lf[i]);
    den += double(lf[i]) * lf[i];
    maxAbs = std::max(maxAbs, std::fabs(double(lf[i])));
  }
  EXPECT_GT(maxAbs, 0.1) << "logits of a real model, not zeros";
  // The same f32 values either way: decoded from blocks here, stored there.
  EXPECT_LE(std::sqrt(num / den), 1e-6);
}

/// A CPU plan of the mix, saved and loaded again: its weight slots keep the
/// types added after q6_k (the plan stores dtypes by value), and the Executor
/// gives the logits of the reference run above.
TEST(QuantMix, APlanOfTheMixRoundTripsAndRuns) {
  std::string why, dir = test::generatedModels(why);
  if (dir.empty())
    GTEST_SKIP() << "model files not generated: " << why;
  auto m = load(dir + "/qmix.gguf");
  ASSERT_TRUE(bool(m)) << llvm::toString(m.takeError());
  CompileOptions co;
  co.cuda = false;
  co.kvDType = DType::F32;
  for (const WeightEntry &w : m->weights.entries())
    co.weights.push_back({w.name, w.type, w.recipe, w.data});
  auto plan = compile(m->graph, co);
  ASSERT_TRUE(bool(plan)) << llvm::toString(plan.takeError());
  std::string path = test::tempPath(".plan");
  ASSERT_FALSE(bool(plan->save(path)));
  auto again = Plan::load(path);
  ASSERT_TRUE(bool(again)) << llvm::toString(again.takeError());
  auto slots = decodeWeightTable(again->section("weights")->bytes);
  ASSERT_TRUE(bool(slots)) << llvm::toString(slots.takeError());
  std::map<std::string, DType> types;
  for (const TensorSlot &s : *slots)
    types[s.name] = s.type.dtype;
  EXPECT_EQ(types["blk.0.ffn_down"], DType::Q5_0);
  EXPECT_EQ(types["blk.1.ffn_down"], DType::Q8_0);
  EXPECT_EQ(types["token_embd"], DType::Q6_K);

  ExecOptions eo;
  eo.device = ExecOptions::Device::Cpu;
  auto exec = Executor::create(*again, eo);
  ASSERT_TRUE(bool(exec)) << llvm::toString(exec.takeError());
  std::vector<float> got;
  auto step = [&](llvm::StringRef entry, std::vector<int32_t> toks, int32_t pos0) {
    std::vector<int32_t> pos;
    for (size_t i = 0; i < toks.size(); ++i)
      pos.push_back(pos0 + static_cast<int32_t>(i));
    ASSERT_FALSE(bool(exec->setInput("tokens", toks)));
    ASSERT_FALSE(bool(exec->setInput("positions", pos)));
    llvm::Error e = exec->run(entry);
    ASSERT_FALSE(bool(e)) << llvm::toString(std::move(e));
    auto l = exec->outputFloats("logits");
    ASSERT_TRUE(bool(l)) << llvm::toString(l.takeError());
    got.insert(got.end(), l->begin(), l->end());
  };
  step("prefill_7", {3, 17, 42, 5, 77, 9, 31}, 0);
  step("decode", {60}, 7);
  std::vector<float> want = runPrompt(*m);
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i)
    ASSERT_EQ(got[i], want[i]) << i;
}

} // namespace
} // namespace fg
