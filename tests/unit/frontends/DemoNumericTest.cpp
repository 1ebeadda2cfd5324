// The demo on the CPU reference: prefill then decode agrees with one longer
// prefill, logits are finite and informative, greedy decoding does not collapse.
#include "frontends/Frontend.h"
#include "frontends/models/Demo.h"
#include "runtime/reference/Interpreter.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <set>

using namespace fg;

namespace {

/// Runs `entry` with the given tokens at positions start, start+1, ...; returns
/// the logits as floats (rows of `vocab`).
std::vector<float> runEntry(ReferenceInterpreter &ri, llvm::StringRef entry,
                            llvm::ArrayRef<int64_t> tokens, int64_t start, int64_t vocab = 512) {
  int64_t t = static_cast<int64_t>(tokens.size());
  std::vector<int64_t> pos(t);
  for (int64_t i = 0; i < t; ++i)
    pos[i] = start + i;
  llvm::StringMap<HostTensor> inputs;
  inputs["tokens"] = HostTensor::fromInts({DType::I32, {t}}, tokens);
  inputs["positions"] = HostTensor::fromInts({DType::I32, {t}}, pos);
  std::vector<std::pair<std::string, HostTensor>> outputs;
  llvm::Error e = ri.run(entry, inputs, outputs);
  if (e) {
    ADD_FAILURE() << llvm::toString(std::move(e));
    return {};
  }
  if (outputs.size() != 1 || outputs[0].first != "logits") {
    ADD_FAILURE() << "expected one output named logits";
    return {};
  }
  int64_t rows = outputs[0].second.type.numRows();
  EXPECT_TRUE(rows == t || rows == 1) << rows;
  EXPECT_EQ(outputs[0].second.type, TensorType(DType::F32, {rows, vocab}));
  return outputs[0].second.toFloats();
}

int64_t argmax(llvm::ArrayRef<float> row) {
  return std::max_element(row.begin(), row.end()) - row.begin();
}

Graph demo(llvm::ArrayRef<int64_t> prefill, bool allLogits = true) {
  ModelOptions o;
  o.ctx = 64;
  o.allLogits = allLogits;
  o.prefill.assign(prefill.begin(), prefill.end());
  auto g = loadModel("demo", o);
  if (!g) {
    ADD_FAILURE() << llvm::toString(g.takeError());
    return Graph();
  }
  return std::move(*g);
}

} // namespace

/// prefill(5 tokens) then decode(6th) == prefill(6 tokens), row by row, within 1e-4.
TEST(DemoNumeric, PrefillThenDecodeMatchesLongerPrefill) {
  Graph g = demo({5, 6});
  ReferenceInterpreter ri(g);
  const std::vector<int64_t> prompt = {17, 301, 5, 444, 90, 123};

  std::vector<float> all = runEntry(ri, "prefill_6", prompt, 0);
  ASSERT_EQ(all.size(), 6u * 512);

  ri.resetState();
  std::vector<float> first = runEntry(ri, "prefill_5", llvm::ArrayRef(prompt).take_front(5), 0);
  ASSERT_EQ(first.size(), 5u * 512);
  std::vector<float> last = runEntry(ri, "decode", {prompt[5]}, 5);
  ASSERT_EQ(last.size(), 512u);

  float maxDiff = 0;
  for (size_t i = 0; i < first.size(); ++i)
    maxDiff = std::max(maxDiff, std::fabs(first[i] - all[i]));
  for (size_t i = 0; i < 512; ++i)
    maxDiff = std::max(maxDiff, std::fabs(last[i] - all[5 * 512 + i]));
  EXPECT_LT(maxDiff, 1e-4f);
  // The context matters: the last row differs from decoding token 6 alone at position 0.
  ri.resetState();
  std::vector<float> alone = runEntry(ri, "decode", {prompt[5]}, 0);
  float ctxDiff = 0;
  for (size_t i = 0; i < 512; ++i)
    ctxDiff = std::max(ctxDiff, std::fabs(alone[i] - last[i]));
  EXPECT_GT(ctxDiff, 1e-3f);
}

/// Decode logits are finite, not all equal, and greedy decoding does not
/// collapse to one repeated token.
TEST(DemoNumeric, DecodeLogitsAreInformative) {
  Graph g = demo({});
  ReferenceInterpreter ri(g);
  std::vector<float> logits = runEntry(ri, "decode", {1}, 0);
  ASSERT_EQ(logits.size(), 512u);
  for (float v : logits)
    ASSERT_TRUE(std::isfinite(v));
  auto [lo, hi] = std::minmax_element(logits.begin(), logits.end());
  EXPECT_GT(*hi - *lo, 0.1f);

  std::vector<int64_t> generated;
  int64_t token = argmax(logits);
  for (int64_t pos = 1; pos <= 12; ++pos) {
    generated.push_back(token);
    std::vector<float> l = runEntry(ri, "decode", {token}, pos);
    ASSERT_EQ(l.size(), 512u);
    token = argmax(l);
  }
  std::set<int64_t> distinct(generated.begin(), generated.end());
  std::string seq;
  for (int64_t t : generated)
    seq += std::to_string(t) + " ";
  EXPECT_GE(distinct.size(), 4u) << seq;
  EXPECT_FALSE(generated[0] == generated[1] && generated[1] == generated[2]) << seq;
  RecordProperty("greedy", seq);
}

/// The same consistency for a dense variant with q/k/v biases, rope freq factors,
/// sinks, a sliding window of 3 and a softcap: the window makes the 6th token
/// ignore rows 0-2, so prefill and decode must agree on which rows they read.
TEST(DemoNumeric, DenseWindowedVariantIsConsistent) {
  DecoderConfig c = demoDenseConfig(16);
  auto g = buildDecoderGraph(c, decoderEntries({5, 6}, LogitRows::All));
  ASSERT_TRUE(bool(g)) << llvm::toString(g.takeError());
  ReferenceInterpreter ri(*g);
  const std::vector<int64_t> prompt = {3, 60, 7, 41, 9, 22};
  std::vector<float> all = runEntry(ri, "prefill_6", prompt, 0, 64);
  ri.resetState();
  runEntry(ri, "prefill_5", llvm::ArrayRef(prompt).take_front(5), 0, 64);
  std::vector<float> last = runEntry(ri, "decode", {prompt[5]}, 5, 64);
  ASSERT_EQ(all.size(), 6u * 64);
  ASSERT_EQ(last.size(), 64u);
  float maxDiff = 0;
  for (size_t i = 0; i < 64; ++i)
    maxDiff = std::max(maxDiff, std::fabs(last[i] - all[5 * 64 + i]));
  EXPECT_LT(maxDiff, 1e-4f);
}

/// The default prefill entry (the last row of logits only: the final norm and
/// the lm head see a view of row N-1) gives row N-1 of the every-row entry, on
/// the CPU reference, within 1e-6 (both compute that row from the same values).
TEST(DemoNumeric, LastRowPrefillEqualsRowNMinus1OfAllRows) {
  const std::vector<int64_t> prompt = {17, 301, 5, 444, 90, 123};
  Graph gAll = demo({6}, /*allLogits=*/true), gLast = demo({6}, /*allLogits=*/false);
  ReferenceInterpreter all(gAll), last(gLast);
  std::vector<float> rows = runEntry(all, "prefill_6", prompt, 0);
  std::vector<float> one = runEntry(last, "prefill_6", prompt, 0);
  ASSERT_EQ(rows.size(), 6u * 512);
  ASSERT_EQ(one.size(), 512u);
  float maxDiff = 0;
  for (size_t i = 0; i < 512; ++i)
    maxDiff = std::max(maxDiff, std::fabs(one[i] - rows[5 * 512 + i]));
  EXPECT_LE(maxDiff, 1e-6f);
  // Not row 0's: the test can tell rows apart.
  float row0Diff = 0;
  for (size_t i = 0; i < 512; ++i)
    row0Diff = std::max(row0Diff, std::fabs(one[i] - rows[i]));
  EXPECT_GT(row0Diff, 1e-3f);
  // The lm head of the default entry is a one-row matmul.
  const Function &fn = *gLast.lookup("prefill_6");
  for (const Node &n : fn.nodes()) {
    if (n.kind != OpKind::MatMul || n.operands[1] != fn.lookup("output"))
      continue;
    EXPECT_EQ(fn.type(n.operands[0]).numRows(), 1);
  }
}
