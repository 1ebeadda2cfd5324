//===- InterpreterTest.cpp - whole-graph runs, state, inputs, weight init -===//
#include "RefTestUtil.h"

#include "ir/Numeric.h"

using namespace fg;
using namespace fg::test;

namespace {

using Outputs = std::vector<std::pair<std::string, HostTensor>>;

bool contains(const std::string &s, const std::string &what) {
  return s.find(what) != std::string::npos;
}

/// decode(x f32[1, 2], pos i32[1], state cache f16[4, 2]):
///   cache.1 = set_rows(cache, x, pos); row = get_rows(cache.1, pos); return row
void buildWriteRead(Graph &g) {
  Function &fn = g.addFunction("decode");
  Builder b(fn);
  ValueId x = b.input("x", {DType::F32, {1, 2}});
  ValueId pos = b.input("pos", {DType::I32, {1}});
  ValueId cache = b.state("cache", {DType::F16, {4, 2}});
  ValueId c1 = b.setRows(cache, x, pos, "cache.1");
  b.result(b.getRows(c1, pos, "row"));
  ASSERT_FALSE(static_cast<bool>(b.finish()));
}

llvm::StringMap<HostTensor> writeInputs(std::vector<float> x, int64_t pos) {
  llvm::StringMap<HostTensor> in;
  in["x"] = f32({1, 2}, x);
  in["pos"] = i32({1}, {pos});
  return in;
}

std::string runError(ReferenceInterpreter &ri, llvm::StringRef entry,
                     const llvm::StringMap<HostTensor> &in) {
  Outputs out;
  llvm::Error e = ri.run(entry, in, out);
  return e ? llvm::toString(std::move(e)) : "";
}

TEST(RefInterpreter, StatePersistsAcrossRunsAndResets) {
  Graph g;
  buildWriteRead(g);
  ReferenceInterpreter ri(g);
  Outputs out;
  ASSERT_FALSE(static_cast<bool>(
      ri.run("decode", writeInputs({1.0f + std::ldexp(1.0f, -11), 0.1f}, 2), out)));
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].first, "row");
  // The value read back went through the f16 cache: it rounds.
  EXPECT_EQ(out[0].second.toFloats(), (std::vector<float>{1.0f, 0.0999755859375f}));

  ASSERT_FALSE(static_cast<bool>(ri.run("decode", writeInputs({3, -4}, 0), out)));
  EXPECT_EQ(out[0].second.toFloats(), (std::vector<float>{3, -4}));
  HostTensor *cache = ri.state("cache");
  ASSERT_NE(cache, nullptr);
  EXPECT_EQ(cache->type, TensorType(DType::F16, {4, 2}));
  EXPECT_EQ(cache->toFloats(), (std::vector<float>{3, -4, 0, 0, 1, 0.0999755859375f, 0, 0}));

  // An index past the cache fails, names the entry and leaves the state alone.
  std::string err = runError(ri, "decode", writeInputs({7, 7}, 4));
  EXPECT_TRUE(contains(err, "entry 'decode'")) << err;
  EXPECT_TRUE(contains(err, "indices[0] = 4 is out of range [0, 4)")) << err;
  EXPECT_EQ(ri.state("cache")->toFloats(),
            (std::vector<float>{3, -4, 0, 0, 1, 0.0999755859375f, 0, 0}));

  ri.resetState();
  EXPECT_EQ(ri.state("cache")->toFloats(), std::vector<float>(8, 0.0f));
  ASSERT_FALSE(static_cast<bool>(ri.run("decode", writeInputs({5, 6}, 1), out)));
  EXPECT_EQ(ri.state("cache")->toFloats(), (std::vector<float>{0, 0, 5, 6, 0, 0, 0, 0}));
}

/// Two entries share a KV cache: prefill_2 writes rows 0..1, decode row 2. With q = 0 every
/// visible row weighs the same, so attention returns the mean of the visible v rows.
void buildTinyDecoder(Graph &g) {
  for (int64_t t : {2, 1}) {
    Function &fn = g.addFunction(t == 2 ? "prefill_2" : "decode");
    Builder b(fn);
    ValueId q = b.input("q", {DType::F32, {t, 1, 2}});
    ValueId k = b.input("k", {DType::F32, {t, 1, 2}});
    ValueId v = b.input("v", {DType::F32, {t, 1, 2}});
    ValueId pos = b.input("positions", {DType::I32, {t}});
    ValueId kc = b.state("k_cache.0", {DType::F16, {4, 1, 2}});
    ValueId vc = b.state("v_cache.0", {DType::F16, {4, 1, 2}});
    ValueId kc1 = b.setRows(kc, k, pos, "k_cache.0.1");
    ValueId vc1 = b.setRows(vc, v, pos, "v_cache.0.1");
    Builder::AttentionParams p;
    p.scale = 1;
    b.result(b.attention(q, kc1, vc1, pos, p, std::nullopt, "out"));
    ASSERT_FALSE(static_cast<bool>(b.finish()));
  }
}

TEST(RefInterpreter, EntriesShareStateLikeADecoder) {
  Graph g;
  buildTinyDecoder(g);
  ReferenceInterpreter ri(g);
  llvm::StringMap<HostTensor> in;
  in["q"] = f32({2, 1, 2}, {0, 0, 0, 0});
  in["k"] = f32({2, 1, 2}, {1, -1, 2, 0.5});
  in["v"] = f32({2, 1, 2}, {1, 2, 3, 4});
  in["positions"] = i32({2}, {0, 1});
  Outputs out;
  ASSERT_FALSE(static_cast<bool>(ri.run("prefill_2", in, out)));
  expectNear(out[0].second, {1, 2, 2, 3}); // causal inside the chunk

  llvm::StringMap<HostTensor> step;
  step["q"] = f32({1, 1, 2}, {0, 0});
  step["k"] = f32({1, 1, 2}, {0.25, 0.25});
  step["v"] = f32({1, 1, 2}, {5, 9});
  step["positions"] = i32({1}, {2});
  ASSERT_FALSE(static_cast<bool>(ri.run("decode", step, out)));
  expectNear(out[0].second, {3, 5}); // mean of {1,2}, {3,4}, {5,9}
  EXPECT_EQ(ri.state("k_cache.0")->toFloats(),
            (std::vector<float>{1, -1, 2, 0.5, 0.25, 0.25, 0, 0}));

  step["positions"] = i32({1}, {4});
  std::string err = runError(ri, "decode", step);
  EXPECT_TRUE(contains(err, "out of range")) << err;
  EXPECT_EQ(ri.state("v_cache.0")->toFloats(), (std::vector<float>{1, 2, 3, 4, 5, 9, 0, 0}));
}

TEST(RefInterpreter, InputValidation) {
  Graph g;
  buildWriteRead(g);
  ReferenceInterpreter ri(g);

  llvm::StringMap<HostTensor> missing;
  missing["x"] = f32({1, 2}, {1, 2});
  std::string err = runError(ri, "decode", missing);
  EXPECT_TRUE(contains(err, "entry 'decode': missing input 'pos' (i32[1])")) << err;

  llvm::StringMap<HostTensor> wrongShape = writeInputs({1, 2}, 0);
  wrongShape["x"] = f32({1, 3}, {1, 2, 3});
  err = runError(ri, "decode", wrongShape);
  EXPECT_TRUE(contains(err, "entry 'decode': input 'x' is f32[1, 3] but f32[1, 2] is expected"))
      << err;

  llvm::StringMap<HostTensor> wrongType = writeInputs({1, 2}, 0);
  wrongType["pos"] = f32({1}, {0});
  err = runError(ri, "decode", wrongType);
  EXPECT_TRUE(contains(err, "input 'pos' is f32[1] but i32[1] is expected")) << err;

  llvm::StringMap<HostTensor> truncated = writeInputs({1, 2}, 0);
  truncated["x"].data.resize(4);
  err = runError(ri, "decode", truncated);
  EXPECT_TRUE(contains(err, "input 'x' holds 4 bytes but f32[1, 2] needs 8")) << err;

  llvm::StringMap<HostTensor> extra = writeInputs({1, 2}, 0);
  extra["tokens"] = i32({1}, {0});
  err = runError(ri, "decode", extra);
  EXPECT_TRUE(contains(err, "entry 'decode' has no input named 'tokens'")) << err;

  err = runError(ri, "prefill_64", writeInputs({1, 2}, 0));
  EXPECT_TRUE(contains(err, "no entry 'prefill_64' (entries: decode)")) << err;
}

/// y = matmul(x f32[1, K], w [N, K]) with w declared as given.
void buildMatmul(Graph &g, TensorType wType, WeightInit init) {
  Function &fn = g.addFunction("main");
  Builder b(fn);
  ValueId x = b.input("x", {DType::F32, {1, wType.shape[1]}});
  ValueId w = b.weight("w", std::move(wType), std::move(init));
  b.result(b.matmul(x, w, "y"));
  ASSERT_FALSE(static_cast<bool>(b.finish()));
}

llvm::StringMap<HostTensor> onesX(int64_t k = 32) {
  llvm::StringMap<HostTensor> in;
  in["x"] = f32({1, k}, std::vector<float>(static_cast<size_t>(k), 1.0f));
  return in;
}

TEST(RefInterpreter, WeightsWithoutBytesAreErrorsNamingTheWeight) {
  {
    Graph g;
    buildMatmul(g, {DType::F16, {2, 32}}, WeightInit());
    ReferenceInterpreter ri(g);
    std::string err = runError(ri, "main", onesX());
    EXPECT_TRUE(contains(err, "weight 'w'")) << err;
    EXPECT_TRUE(contains(err, "bindWeight")) << err;
  }
  {
    Graph g;
    buildMatmul(g, {DType::F16, {2, 32}}, WeightInit::tensor("m.gguf", "blk.0.attn_q.weight"));
    ReferenceInterpreter ri(g);
    std::string err = runError(ri, "main", onesX());
    EXPECT_TRUE(contains(err, "weight 'w'")) << err;
    EXPECT_TRUE(contains(err, "'blk.0.attn_q.weight' in 'm.gguf'")) << err;
  }
}

/// A block-quantised weight with an initialiser holds the formula's values
/// quantised (ir/Quantize.h): x · wᵀ with x = ones sums each dequantised row.
TEST(RefInterpreter, QuantisedWeightFromAnInitialiser) {
  Graph g;
  WeightInit init = WeightInit::normal(1, 0.02);
  buildMatmul(g, {DType::Q4_K, {2, 256}}, init);
  ReferenceInterpreter ri(g);
  Outputs out;
  llvm::Error e = ri.run("main", onesX(256), out);
  ASSERT_FALSE(bool(e)) << llvm::toString(std::move(e));
  HostTensor w, f;
  ASSERT_FALSE(bool(materializeInit(init, {DType::Q4_K, {2, 256}}, w)));
  ASSERT_FALSE(bool(materializeInit(init, {DType::F32, {2, 256}}, f)));
  std::vector<float> deq = w.toFloats(), x = f.toFloats(), y = out.at(0).second.toFloats();
  ASSERT_EQ(y.size(), 2u);
  for (int r = 0; r < 2; ++r) {
    double sum = 0, exact = 0;
    for (int k = 0; k < 256; ++k) {
      sum += deq[r * 256 + k];
      exact += x[r * 256 + k];
    }
    EXPECT_NEAR(y[r], sum, 1e-5) << r;
    EXPECT_NE(deq[r * 256], x[r * 256]) << "quantised, not f32";
    EXPECT_NEAR(sum, exact, 0.1) << "close to the unquantised values";
  }
}

TEST(RefInterpreter, BindWeight) {
  Graph g;
  buildMatmul(g, {DType::Q8_0, {2, 32}}, WeightInit());
  ReferenceInterpreter ri(g);
  llvm::Error e = ri.bindWeight("v", HostTensor::zeros({DType::Q8_0, {2, 32}}));
  EXPECT_TRUE(contains(llvm::toString(std::move(e)), "no weight named 'v'"));
  e = ri.bindWeight("w", HostTensor::zeros({DType::F32, {2, 32}}));
  EXPECT_TRUE(contains(llvm::toString(std::move(e)), "is f32[2, 32] but q8_0[2, 32] is expected"));

  // q8_0: row 0 d = 0.5, q = 2; row 1 d = 1, q = -1.
  HostTensor w = HostTensor::zeros({DType::Q8_0, {2, 32}});
  w.data[1] = 0x38;
  w.data[35] = 0x3C;
  for (int j = 0; j < 32; ++j) {
    w.data[2 + j] = 2;
    w.data[36 + j] = 0xFF;
  }
  ASSERT_FALSE(static_cast<bool>(ri.bindWeight("w", std::move(w))));
  Outputs out;
  ASSERT_FALSE(static_cast<bool>(ri.run("main", onesX(), out)));
  expectNear(out[0].second, {32, -32});
}

TEST(RefInterpreter, InitialisedWeightsAndRebinding) {
  Graph g;
  buildMatmul(g, {DType::F16, {2, 32}}, WeightInit::constant(0.5));
  ReferenceInterpreter ri(g);
  Outputs out;
  ASSERT_FALSE(static_cast<bool>(ri.run("main", onesX(), out)));
  expectNear(out[0].second, {16, 16});
  // A later bind overrides the initialiser.
  std::vector<float> w(64, 0.25f);
  ASSERT_FALSE(static_cast<bool>(ri.bindWeight("w", f16({2, 32}, w))));
  ASSERT_FALSE(static_cast<bool>(ri.run("main", onesX(), out)));
  expectNear(out[0].second, {8, 8});
}

TEST(RefInterpreter, DeterministicInitMatchesTheDocumentedFormula) {
  // Literals from an independent implementation of splitmix64 + Box–Muller
  // (see initValue in runtime/reference/Interpreter.h).
  HostTensor t;
  ASSERT_FALSE(
      static_cast<bool>(materializeInit(WeightInit::normal(7, 0.02), {DType::F32, {4}}, t)));
  expectNear(t, {-0.015914863278572805f, -0.007030130252513122f, 0.007713849659456692f,
                 0.034589626255273f});
  EXPECT_NEAR(initValue(WeightInit::normal(7, 0.02), 3), 0.034589626255273, 1e-15);
  ASSERT_FALSE(
      static_cast<bool>(materializeInit(WeightInit::normal(7, 0.02, 1.0), {DType::F32, {2}}, t)));
  expectNear(t, {0.9840851367214272f, 0.9929698697474869f});
  ASSERT_FALSE(
      static_cast<bool>(materializeInit(WeightInit::uniform(3, -1, 1), {DType::F32, {4}}, t)));
  expectNear(
      t, {-0.7730993158856909f, 0.49156351452540226f, -0.5610360742094649f, -0.1279391893018853f});
  // Stored in the weight's dtype: f16 rounds each value.
  ASSERT_FALSE(
      static_cast<bool>(materializeInit(WeightInit::normal(7, 0.02), {DType::F16, {2}}, t)));
  EXPECT_EQ(t.type.dtype, DType::F16);
  EXPECT_EQ(t.toFloats()[0], halfToFloat(floatToHalf(-0.015914863278572805f)));
  ASSERT_FALSE(
      static_cast<bool>(materializeInit(WeightInit::constant(0.1), {DType::BF16, {2}}, t)));
  EXPECT_EQ(t.toFloats(), (std::vector<float>{0.10009765625f, 0.10009765625f}));
}

TEST(RefInterpreter, NormalInitHasTheRequestedMoments) {
  HostTensor t;
  ASSERT_FALSE(static_cast<bool>(
      materializeInit(WeightInit::normal(42, 2.0, 1.0), {DType::F32, {20000}}, t)));
  double sum = 0, sq = 0;
  for (float v : t.toFloats()) {
    sum += v;
    sq += (v - 1.0) * (v - 1.0);
  }
  EXPECT_NEAR(sum / 20000, 1.0, 0.05);
  EXPECT_NEAR(std::sqrt(sq / 20000), 2.0, 0.05);
}

} // namespace
