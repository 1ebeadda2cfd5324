//===- BenchLoopTest.cpp - the timed step loop's positions -----------------===//
//
// `fusegraph bench --prefill N` times the same prompt chunk at positions
// 0 .. N-1 every step (StepLoopOptions::advance = false). Before, the loop
// advanced the positions as it does for decode, so three of four 512-token
// steps of W-dense ran attention over 1-2 K keys instead of 512 (the thirtieth
// session found it: 4.46 M instructions a launch alone, 10.9 M in the replay).
// These run on the CPU executor: the last step's logits say which positions it
// was fed.
//
//===----------------------------------------------------------------------===//
#include "codegen/cuda/Compile.h"
#include "frontends/Frontend.h"
#include "runtime/BenchLoop.h"
#include "runtime/Executor.h"
#include "tests/unit/api/DemoPlan.h"

#include <gtest/gtest.h>

using namespace fg;
using namespace llvm;

namespace {

using fg::apitest::demoPlan;

/// The logits of `entry` after `steps` timed steps from position 0.
std::vector<float> logitsAfter(int64_t steps, bool advance) {
  Expected<Executor> e = Executor::create(demoPlan(), {});
  if (!e) {
    ADD_FAILURE() << toString(e.takeError());
    return {};
  }
  StepLoopOptions lo;
  lo.entry = "prefill_4";
  lo.warmup = 0;
  lo.steps = steps;
  lo.startPosition = 0;
  lo.advance = advance;
  Expected<std::vector<StepSample>> s = timeSteps(*e, lo);
  if (!s) {
    ADD_FAILURE() << toString(s.takeError());
    return {};
  }
  EXPECT_EQ(s->size(), static_cast<size_t>(steps));
  Expected<ArrayRef<float>> l = e->outputFloats("logits");
  if (!l) {
    ADD_FAILURE() << toString(l.takeError());
    return {};
  }
  return std::vector<float>(l->begin(), l->end());
}

} // namespace

/// Without advancing, every step is the first chunk again: the third step's
/// logits are the first step's, bit for bit (the cache rows it rewrites are
/// the ones it reads).
TEST(BenchLoop, PrefillStepsRepeatTheFirstChunk) {
  std::vector<float> once = logitsAfter(1, false), thrice = logitsAfter(3, false);
  ASSERT_FALSE(once.empty());
  EXPECT_EQ(once, thrice);
}

/// Advancing (decode's loop), the third step is the chunk at positions 8..11
/// with other tokens and eight cached rows before it: other logits.
TEST(BenchLoop, AdvancingStepsFeedLaterPositions) {
  std::vector<float> once = logitsAfter(1, true), thrice = logitsAfter(3, true);
  ASSERT_FALSE(once.empty());
  ASSERT_EQ(once.size(), thrice.size());
  EXPECT_NE(once, thrice);
}
