// The built-in demo: entries, the decoder ABI (argument names, roles, types,
// order), initialisers, and the shape of its MoE layers.
#include "frontends/models/Demo.h"
#include "ir/OpViews.h"
#include "frontends/Frontend.h"
#include "ir/Parser.h"
#include "ir/Printer.h"
#include "ir/Verifier.h"

#include "llvm/ADT/SmallString.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/raw_ostream.h"

#include <gtest/gtest.h>

#include <map>
#include <set>

using namespace fg;

namespace {

Graph loadDemo(const ModelOptions &opts = {}) {
  auto g = loadModel("demo", opts);
  if (!g) {
    ADD_FAILURE() << llvm::toString(g.takeError());
    return Graph();
  }
  return std::move(*g);
}

/// The demo's argument names in ABI order.
std::vector<std::string> expectedArgumentNames() {
  std::vector<std::string> names = {"tokens", "positions", "token_embd"};
  for (int l = 0; l < 2; ++l)
    for (const char *w :
         {"attn_norm", "attn_q", "attn_k", "attn_v", "attn_output", "attn_q_norm", "attn_k_norm",
          "ffn_norm", "ffn_gate_inp", "ffn_gate_exps", "ffn_up_exps", "ffn_down_exps"})
      names.push_back("blk." + std::to_string(l) + "." + w);
  names.push_back("output_norm");
  names.push_back("output");
  for (int l = 0; l < 2; ++l) {
    names.push_back("k_cache." + std::to_string(l));
    names.push_back("v_cache." + std::to_string(l));
  }
  return names;
}

} // namespace

/// Default options give `decode` and `prefill_64`, each returning one row of
/// logits f32[1, 512] (prefill: the last token's); allLogits gives f32[64, 512].
TEST(Demo, EntriesAndLogits) {
  Graph g = loadDemo();
  ASSERT_EQ(g.functions().size(), 2u);
  const Function *decode = g.lookup("decode");
  const Function *prefill = g.lookup("prefill_64");
  ASSERT_TRUE(decode && prefill);
  ASSERT_EQ(decode->results().size(), 1u);
  EXPECT_EQ(decode->value(decode->results()[0]).name, "logits");
  EXPECT_EQ(decode->type(decode->results()[0]), TensorType(DType::F32, {1, 512}));
  ASSERT_EQ(prefill->results().size(), 1u);
  EXPECT_EQ(prefill->type(prefill->results()[0]), TensorType(DType::F32, {1, 512}));
  ModelOptions all;
  all.allLogits = true;
  Graph ga = loadDemo(all);
  const Function *pa = ga.lookup("prefill_64");
  ASSERT_TRUE(pa);
  EXPECT_EQ(pa->type(pa->results()[0]), TensorType(DType::F32, {64, 512}));
  EXPECT_EQ(ga.lookup("decode")->type(ga.lookup("decode")->results()[0]),
            TensorType(DType::F32, {1, 512}));
}

/// Arguments follow the ABI: tokens, positions, weights..., state..., with the
/// documented types and roles, identical across entries except for T.
TEST(Demo, AbiArguments) {
  Graph g = loadDemo();
  std::vector<std::string> names = expectedArgumentNames();
  for (const Function &fn : g.functions()) {
    int64_t t = fn.name() == "decode" ? 1 : 64;
    ASSERT_EQ(fn.arguments().size(), names.size()) << fn.name().str();
    for (size_t i = 0; i < names.size(); ++i) {
      const Argument &a = fn.arguments()[i];
      const Value &v = fn.value(a.value);
      EXPECT_EQ(v.name, names[i]) << "argument " << i << " of " << fn.name().str();
      ArgRole role = i < 2                  ? ArgRole::Input
                     : i + 4 < names.size() ? ArgRole::Weight
                                            : ArgRole::State;
      EXPECT_EQ(a.role, role) << v.name;
    }
    EXPECT_EQ(fn.type(fn.lookup("tokens")), TensorType(DType::I32, {t}));
    EXPECT_EQ(fn.type(fn.lookup("positions")), TensorType(DType::I32, {t}));
    EXPECT_EQ(fn.type(fn.lookup("token_embd")), TensorType(DType::F32, {512, 256}));
    EXPECT_EQ(fn.type(fn.lookup("blk.1.attn_q")), TensorType(DType::F32, {256, 256}));
    EXPECT_EQ(fn.type(fn.lookup("blk.1.attn_k")), TensorType(DType::F32, {128, 256}));
    EXPECT_EQ(fn.type(fn.lookup("blk.1.attn_v")), TensorType(DType::F32, {128, 256}));
    EXPECT_EQ(fn.type(fn.lookup("blk.1.attn_output")), TensorType(DType::F32, {256, 256}));
    EXPECT_EQ(fn.type(fn.lookup("blk.1.attn_q_norm")), TensorType(DType::F32, {64}));
    EXPECT_EQ(fn.type(fn.lookup("blk.1.attn_norm")), TensorType(DType::F32, {256}));
    EXPECT_EQ(fn.type(fn.lookup("blk.1.ffn_gate_inp")), TensorType(DType::F32, {8, 256}));
    EXPECT_EQ(fn.type(fn.lookup("blk.1.ffn_gate_exps")), TensorType(DType::F32, {8, 128, 256}));
    EXPECT_EQ(fn.type(fn.lookup("blk.1.ffn_up_exps")), TensorType(DType::F32, {8, 128, 256}));
    EXPECT_EQ(fn.type(fn.lookup("blk.1.ffn_down_exps")), TensorType(DType::F32, {8, 256, 128}));
    EXPECT_EQ(fn.type(fn.lookup("output")), TensorType(DType::F32, {512, 256}));
    EXPECT_EQ(fn.type(fn.lookup("k_cache.1")), TensorType(DType::F16, {4096, 2, 64}));
    EXPECT_EQ(fn.type(fn.lookup("v_cache.0")), TensorType(DType::F16, {4096, 2, 64}));
  }
}

/// Options reach the graph: ctx sizes the caches, buckets name the entries, kv dtype.
TEST(Demo, OptionsShapeTheGraph) {
  ModelOptions o;
  o.ctx = 128;
  o.prefill = {4, 16};
  o.kvDType = DType::BF16;
  Graph g = loadDemo(o);
  ASSERT_EQ(g.functions().size(), 3u);
  EXPECT_EQ(g.functions()[0].name(), "decode");
  EXPECT_EQ(g.functions()[1].name(), "prefill_4");
  EXPECT_EQ(g.functions()[2].name(), "prefill_16");
  const Function &p4 = g.functions()[1];
  EXPECT_EQ(p4.type(p4.lookup("k_cache.0")), TensorType(DType::BF16, {128, 2, 64}));
  EXPECT_EQ(p4.type(p4.results()[0]), TensorType(DType::F32, {1, 512}));
}

/// Initialisers: normal(seed = index + 1, std 0.02) for matrices, mean 1 / std 0.1
/// for norms, std 0.05 for the embedding; every weight has one, every seed distinct.
TEST(Demo, WeightInitialisers) {
  Graph g = loadDemo();
  const Function &fn = *g.lookup("decode");
  const Argument *emb = fn.argumentOf(fn.lookup("token_embd"));
  EXPECT_EQ(emb->init, WeightInit::normal(1, 0.05));
  EXPECT_EQ(fn.argumentOf(fn.lookup("blk.0.attn_norm"))->init, WeightInit::normal(2, 0.1, 1.0));
  EXPECT_EQ(fn.argumentOf(fn.lookup("blk.0.attn_q"))->init, WeightInit::normal(3, 0.02));
  EXPECT_EQ(fn.argumentOf(fn.lookup("blk.0.attn_k_norm"))->init, WeightInit::normal(8, 0.1, 1.0));
  std::set<uint64_t> seeds;
  for (const Argument &a : fn.arguments()) {
    if (a.role != ArgRole::Weight)
      continue;
    EXPECT_EQ(a.init.kind, WeightInit::Kind::Normal) << fn.value(a.value).name;
    EXPECT_TRUE(seeds.insert(a.init.seed).second) << fn.value(a.value).name;
  }
  EXPECT_EQ(seeds.size(), 27u);
}

/// Each MoE layer routes with softmax → top_k(2) → get_rows → renorm, and
/// every layer has exactly two set_rows (k and v) into its own caches.
TEST(Demo, LayerStructure) {
  Graph g = loadDemo();
  const Function &fn = *g.lookup("decode");
  std::map<OpKind, int> counts;
  for (const Node &n : fn.nodes())
    ++counts[n.kind];
  EXPECT_EQ(counts[OpKind::SetRows], 4);
  EXPECT_EQ(counts[OpKind::Attention], 2);
  EXPECT_EQ(counts[OpKind::TopK], 2);
  EXPECT_EQ(counts[OpKind::Softmax], 2);
  EXPECT_EQ(counts[OpKind::MatMulId], 6);
  EXPECT_EQ(counts[OpKind::Glu], 2);
  EXPECT_EQ(counts[OpKind::View], 4); // k = 2 views per layer
  EXPECT_EQ(counts[OpKind::Rope], 4);
  EXPECT_EQ(counts[OpKind::RmsNorm], 9); // 2 × (attn, q, k, ffn) + output
  EXPECT_EQ(counts[OpKind::Clamp], 2);
  for (const Node &n : fn.nodes()) {
    if (n.kind == OpKind::TopK) {
      EXPECT_EQ(op::TopK(n).k(), 2);
    }
  }
}

/// The demo verifies (types, linear state versions, shared weights agree), and
/// a dense, biased, tied variant built by the same blocks verifies too.
TEST(Demo, Verifies) {
  Graph g = loadDemo();
  llvm::Error e = verifyGraph(g);
  EXPECT_FALSE(bool(e)) << llvm::toString(std::move(e));

  DecoderConfig c = demoConfig(64);
  c.ffn = DecoderConfig::FfnKind::Dense;
  c.nFf = 96;
  c.qkvBias = true;
  c.qkNorm = false;
  c.tieEmbeddings = true;
  c.ropeFreqFactors = true;
  c.attnSinks = true;
  c.slidingWindow = 8;
  auto dense = buildDecoderGraph(c, decoderEntries({8}));
  ASSERT_TRUE(bool(dense)) << llvm::toString(dense.takeError());
  llvm::Error e2 = verifyGraph(*dense);
  EXPECT_FALSE(bool(e2)) << llvm::toString(std::move(e2));
}

/// print(demo) parses back to a graph that prints the same, and loadModel of
/// that .fg text gives it back.
TEST(Demo, PrintParseRoundTrip) {
  ModelOptions o;
  o.ctx = 256;
  o.prefill = {8};
  Graph g = loadDemo(o);
  std::string text = printToString(g);
  auto parsed = parseGraph(text, "demo.fg");
  ASSERT_TRUE(bool(parsed)) << llvm::toString(parsed.takeError());
  EXPECT_EQ(printToString(*parsed), text);

  llvm::SmallString<128> path;
  int fd = -1;
  ASSERT_FALSE(llvm::sys::fs::createTemporaryFile("fg-demo", "fg", fd, path));
  {
    llvm::raw_fd_ostream os(fd, /*shouldClose=*/true);
    os << text;
  }
  auto loaded = loadModel(path, ModelOptions());
  llvm::sys::fs::remove(path);
  ASSERT_TRUE(bool(loaded)) << llvm::toString(loaded.takeError());
  EXPECT_EQ(printToString(*loaded), text);
}
