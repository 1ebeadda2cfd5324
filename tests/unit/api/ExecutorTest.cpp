//===- ExecutorTest.cpp - running plans on the CPU reference --------------===//
#include "runtime/Executor.h"
#include "tests/unit/api/DemoPlan.h"
#include "ir/Builder.h"
#include "codegen/cuda/Compile.h"
#include "frontends/Frontend.h"
#include "runtime/reference/Interpreter.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

using namespace fg;
using namespace llvm;

namespace {

template <typename T> std::string errorText(Expected<T> &v) {
  return v ? std::string("(no error)") : toString(v.takeError());
}
std::string errorText(Error e) { return e ? toString(std::move(e)) : "(no error)"; }

using fg::apitest::demoPlan;

Executor makeExec() {
  Expected<Executor> e = Executor::create(demoPlan(), {});
  EXPECT_TRUE(bool(e)) << errorText(e);
  return std::move(*e);
}

int32_t argmax(ArrayRef<float> row) {
  return static_cast<int32_t>(std::max_element(row.begin(), row.end()) - row.begin());
}

} // namespace

/// An input name no entry has is refused, listing the inputs.
TEST(Executor, UnknownInput) {
  Executor e = makeExec();
  EXPECT_EQ(errorText(e.setInput("token", {1})),
            "no input named 'token'; the inputs are: tokens, positions");
}

/// A length no entry takes is refused, listing what the entries take.
TEST(Executor, WrongLength) {
  Executor e = makeExec();
  EXPECT_EQ(errorText(e.setInput("tokens", {1, 2})),
            "input 'tokens' has 2 elements; the entries take 1 (decode), 4 (prefill_4)");
  // A length some entry takes is accepted, and checked against the entry run.
  ASSERT_FALSE(bool(e.setInput("tokens", {1, 2, 3, 4})));
  ASSERT_FALSE(bool(e.setInput("positions", {0})));
  EXPECT_EQ(errorText(e.run("decode")),
            "input 'tokens' has 4 elements but entry 'decode' takes i32[1]");
}

/// The CPU executor runs every step to its end: no pipelined steps, no
/// greedy token of the device; both are refused with a reason, and the
/// executor runs on.
TEST(Executor, CpuHasNoPipelinedSteps) {
  Executor e = makeExec();
  EXPECT_FALSE(e.pipelines());
  EXPECT_FALSE(e.greedyToken().has_value());
  ASSERT_FALSE(bool(e.setInput("tokens", {5})));
  ASSERT_FALSE(bool(e.setInput("positions", {0})));
  EXPECT_EQ(errorText(e.enqueue("decode")),
            "this executor runs every step to its end (pipelines() is false)");
  auto t = e.awaitGreedyToken();
  ASSERT_FALSE(bool(t));
  EXPECT_EQ(toString(t.takeError()), "no step is in flight");
  ASSERT_FALSE(bool(e.run("decode")));
  EXPECT_FALSE(e.greedyToken().has_value()); // the host samples the CPU's rows
}

/// An unknown entry is refused, listing the entries.
TEST(Executor, UnknownEntry) {
  Executor e = makeExec();
  EXPECT_EQ(errorText(e.run("prefill_64")),
            "no entry named 'prefill_64'; the entries are: decode, prefill_4");
}

/// A missing input is named.
TEST(Executor, MissingInput) {
  Executor e = makeExec();
  ASSERT_FALSE(bool(e.setInput("tokens", {5})));
  EXPECT_EQ(errorText(e.run("decode")), "entry 'decode' needs input 'positions', which is not set");
}

/// Positions outside their binding's range [0, ctx) are refused before running
/// on the CPU, naming the input, index, value and range and the step (each run
/// counts); the state is left untouched and later steps run.
TEST(Executor, PositionPastCtx) {
  Executor e = makeExec();
  EXPECT_EQ(e.ctx(), 16);
  EXPECT_EQ(e.entry("decode")->binding("positions").kind, BindKind::Positions);
  ASSERT_FALSE(bool(e.setInput("tokens", {5})));
  ASSERT_FALSE(bool(e.setInput("positions", {16})));
  EXPECT_EQ(errorText(e.run("decode")), "step 0: input 'positions'[0] = 16 is outside [0, 16)");
  ASSERT_FALSE(bool(e.setInput("positions", {-1})));
  EXPECT_EQ(errorText(e.run("decode")), "step 1: input 'positions'[0] = -1 is outside [0, 16)");
  ASSERT_FALSE(bool(e.setInput("positions", {15})));
  EXPECT_FALSE(bool(e.run("decode")));
  EXPECT_EQ(errorText(e.output("nope").takeError()),
            "no output named 'nope'; the last run produced: logits");
  // A prefill chunk names the first bad element.
  ASSERT_FALSE(bool(e.setInput("tokens", {1, 2, 3, 4})));
  ASSERT_FALSE(bool(e.setInput("positions", {3, 4, 17, 99})));
  EXPECT_EQ(errorText(e.run("prefill_4")), "step 3: input 'positions'[2] = 17 is outside [0, 16)");
}

/// A token id outside [0, vocab) is refused before running, naming the input,
/// the index and the range (the gather would read outside the embedding).
TEST(Executor, TokenIdOutsideTheVocabulary) {
  Executor e = makeExec();
  const Function *fn = e.entry("decode");
  ASSERT_NE(fn, nullptr);
  int64_t vocab = fn->type(fn->lookup("token_embd")).shape[0];
  EXPECT_EQ(fn->binding("tokens").hi, vocab);
  std::string range = "[0, " + std::to_string(vocab) + ")";
  ASSERT_FALSE(bool(e.setInput("positions", {0})));
  ASSERT_FALSE(bool(e.setInput("tokens", {static_cast<int32_t>(vocab)})));
  EXPECT_EQ(errorText(e.run("decode")),
            "step 0: input 'tokens'[0] = " + std::to_string(vocab) + " is outside " + range);
  ASSERT_FALSE(bool(e.setInput("tokens", {-3})));
  EXPECT_EQ(errorText(e.run("decode")), "step 1: input 'tokens'[0] = -3 is outside " + range);
  ASSERT_FALSE(bool(e.setInput("tokens", {static_cast<int32_t>(vocab - 1)})));
  EXPECT_FALSE(bool(e.run("decode")));
}

/// A CPU step refused for a bad value leaves the state as it was: the next good
/// steps give the same logits as on an executor that never saw the bad one.
TEST(Executor, RefusedStepLeavesStateUntouched) {
  Executor a = makeExec(), b = makeExec();
  for (Executor *e : {&a, &b}) {
    ASSERT_FALSE(bool(e->setInput("tokens", {7})));
    ASSERT_FALSE(bool(e->setInput("positions", {0})));
    ASSERT_FALSE(bool(e->run("decode")));
  }
  ASSERT_FALSE(bool(a.setInput("positions", {16})));
  EXPECT_EQ(errorText(a.run("decode")), "step 1: input 'positions'[0] = 16 is outside [0, 16)");
  for (Executor *e : {&a, &b}) {
    ASSERT_FALSE(bool(e->setInput("tokens", {9})));
    ASSERT_FALSE(bool(e->setInput("positions", {1})));
    ASSERT_FALSE(bool(e->run("decode")));
  }
  Expected<ArrayRef<float>> la = a.outputFloats("logits"), lb = b.outputFloats("logits");
  ASSERT_TRUE(la && lb);
  EXPECT_EQ(std::vector<float>(la->begin(), la->end()), std::vector<float>(lb->begin(), lb->end()));
}

/// Batched gathers (probs [T, E] by ids [T, k]) check ids against E, the row
/// dimension of each batch, not against T.
TEST(Executor, BatchedGatherIdsAreCheckedAgainstTheirRows) {
  Graph g;
  Function &fn = g.addFunction("decode");
  ValueId probs = fn.addArgument("probs", TensorType(DType::F32, {2, 16}), ArgRole::Weight,
                                 WeightInit::normal(1, 1.0));
  ValueId ids = fn.addArgument("ids", TensorType(DType::I32, {2, 3}), ArgRole::Input);
  Builder b(fn);
  b.result(b.getRows(probs, ids, "y"));
  ASSERT_FALSE(bool(b.finish()));
  CompileOptions co;
  co.cuda = false;
  Expected<Plan> plan = compile(g, co);
  ASSERT_TRUE(bool(plan)) << errorText(plan);
  Expected<Executor> e = Executor::create(*plan, {});
  ASSERT_TRUE(bool(e)) << errorText(e);
  ASSERT_FALSE(bool(e->setInput("ids", {0, 5, 15, 1, 2, 3})));
  EXPECT_FALSE(bool(e->run("decode"))); // 5 and 15 are rows of 16, not of 2
  ASSERT_FALSE(bool(e->setInput("ids", {0, 5, 16, 1, 2, 3})));
  EXPECT_EQ(errorText(e->run("decode")),
            "step 1: input 'ids' [2] = 16 is not a row of 'probs' (0 .. 15)");
}

/// Outputs before any run, and the CUDA device, are clear errors.
TEST(Executor, NoOutputYetAndNoCuda) {
  Executor e = makeExec();
  EXPECT_EQ(errorText(e.output("logits").takeError()), "no output 'logits': nothing has run yet");
  ExecOptions cuda;
  cuda.device = ExecOptions::Device::Cuda;
  Expected<Executor> c = Executor::create(demoPlan(), cuda);
  // The plan was compiled without CUDA code generation (on any machine).
  EXPECT_NE(errorText(c).find("this plan has no CUDA program"), std::string::npos);
}

/// deviceOutput (DLPack views, python/) needs a device: before any run it
/// says so, on the CPU the result lives on the host, and a wrong name lists
/// the last run's results.
TEST(Executor, DeviceOutputIsRefusedOnTheCpu) {
  Executor e = makeExec();
  EXPECT_EQ(errorText(e.deviceOutput("logits").takeError()),
            "no output 'logits': nothing has run yet");
  ASSERT_FALSE(bool(e.setInput("tokens", {1})));
  ASSERT_FALSE(bool(e.setInput("positions", {0})));
  ASSERT_FALSE(bool(e.run("decode")));
  EXPECT_EQ(errorText(e.deviceOutput("logits").takeError()),
            "result 'logits' lives on the host (this device has no device memory)");
  EXPECT_EQ(errorText(e.deviceOutput("logit").takeError()),
            "no output named 'logit'; the last run produced: logits");
}

/// The executor computes what the reference interpreter computes.
TEST(Executor, MatchesReferenceInterpreter) {
  Executor e = makeExec();
  ASSERT_FALSE(bool(e.setInput("tokens", {7})));
  ASSERT_FALSE(bool(e.setInput("positions", {0})));
  ASSERT_FALSE(bool(e.run("decode")));
  Expected<ArrayRef<float>> got = e.outputFloats("logits");
  ASSERT_TRUE(bool(got)) << errorText(got);

  ReferenceInterpreter ref(demoPlan().graph());
  StringMap<HostTensor> in;
  in["tokens"] = HostTensor::fromInts(TensorType(DType::I32, {1}), {7});
  in["positions"] = HostTensor::fromInts(TensorType(DType::I32, {1}), {0});
  std::vector<std::pair<std::string, HostTensor>> out;
  ASSERT_FALSE(bool(ref.run("decode", in, out)));
  ASSERT_EQ(out.size(), 1u);
  std::vector<float> want = out[0].second.toFloats();
  ASSERT_EQ(got->size(), 512u);
  ASSERT_EQ(want.size(), 512u);
  for (size_t i = 0; i < want.size(); ++i)
    ASSERT_EQ((*got)[i], want[i]) << i;
  Expected<HostTensor> t = e.output("logits");
  ASSERT_TRUE(bool(t));
  EXPECT_EQ(t->type, TensorType(DType::F32, {1, 512}));
}

/// A prompt of 3 fed through prefill_4 padded with one row at position 3 —
/// put FIRST in the chunk, as Session does, so the entry's one row of logits
/// is the last token's — gives the same logits as feeding it token by token
/// through decode; then a decode at position 3 overwrites the padded KV row
/// and agrees too. State persists across runs and resetState() clears it.
TEST(Executor, PaddedPrefillEqualsDecode) {
  const int32_t prompt[] = {11, 22, 33};
  Executor a = makeExec();
  ASSERT_FALSE(bool(a.setInput("tokens", {33, 11, 22, 33})));
  ASSERT_FALSE(bool(a.setInput("positions", {3, 0, 1, 2})));
  ASSERT_FALSE(bool(a.run("prefill_4")));
  ASSERT_EQ(a.outputFloats("logits")->size(), 512u); // prefill returns the last row only
  std::vector<float> prefillRow2 = a.outputFloats("logits")->vec();

  Executor b = makeExec();
  std::vector<float> decodeLast;
  for (int32_t i = 0; i < 3; ++i) {
    ASSERT_FALSE(bool(b.setInput("tokens", {prompt[i]})));
    ASSERT_FALSE(bool(b.setInput("positions", {i})));
    ASSERT_FALSE(bool(b.run("decode")));
  }
  decodeLast = b.outputFloats("logits")->vec();
  double diff = 0, norm = 0;
  for (size_t i = 0; i < 512; ++i) {
    diff += (prefillRow2[i] - decodeLast[i]) * (prefillRow2[i] - decodeLast[i]);
    norm += decodeLast[i] * decodeLast[i];
  }
  EXPECT_LT(std::sqrt(diff / norm), 1e-4);
  int32_t next = argmax(decodeLast);
  EXPECT_EQ(argmax(prefillRow2), next);

  // Decode the next token at position 3 in both: the padded row is overwritten.
  for (Executor *e : {&a, &b}) {
    ASSERT_FALSE(bool(e->setInput("tokens", {next})));
    ASSERT_FALSE(bool(e->setInput("positions", {3})));
    ASSERT_FALSE(bool(e->run("decode")));
  }
  std::vector<float> la = a.outputFloats("logits")->vec(), lb = b.outputFloats("logits")->vec();
  diff = norm = 0;
  for (size_t i = 0; i < 512; ++i) {
    diff += (la[i] - lb[i]) * (la[i] - lb[i]);
    norm += lb[i] * lb[i];
  }
  EXPECT_LT(std::sqrt(diff / norm), 1e-4);

  // After resetState, the same decode at position 3 sees an empty cache and differs.
  b.resetState();
  ASSERT_FALSE(bool(b.run("decode")));
  std::vector<float> fresh = b.outputFloats("logits")->vec();
  EXPECT_NE(fresh, lb);
}
