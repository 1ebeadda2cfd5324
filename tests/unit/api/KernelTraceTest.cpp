// chargedTimes: how a traced replay's kernel records become per-launch times
// (the GPU side of KernelTrace runs in `fusegraph bench --breakdown`).
#include "runtime/cuda/KernelTrace.h"

#include <gtest/gtest.h>

using namespace fg;

namespace {
KernelRecord rec(uint64_t start, uint64_t end) {
  KernelRecord r;
  r.start = start;
  r.end = end;
  return r;
}
} // namespace

TEST(KernelTrace, ChainWithGapsChargesEachItsOwnInterval) {
  std::vector<KernelRecord> r = {rec(100, 110), rec(115, 130), rec(130, 131)};
  EXPECT_EQ(chargedTimes(r), (std::vector<uint64_t>{10, 15, 1}));
}

TEST(KernelTrace, EarlyLaunchedDependentIsChargedFromItsPredecessorsEnd) {
  // Programmatic launch: the second kernel starts at 105 and waits until 120.
  std::vector<KernelRecord> r = {rec(100, 120), rec(105, 150)};
  EXPECT_EQ(chargedTimes(r), (std::vector<uint64_t>{20, 30}));
}

TEST(KernelTrace, ParallelBranchesSumToTheUnion) {
  // Given out of start order; a branch fully inside another is charged 0.
  std::vector<KernelRecord> r = {rec(110, 140), rec(100, 150), rec(160, 170), rec(145, 165)};
  std::vector<uint64_t> c = chargedTimes(r);
  EXPECT_EQ(c, (std::vector<uint64_t>{0, 50, 5, 15}));
  uint64_t sum = 0;
  for (uint64_t v : c)
    sum += v;
  EXPECT_EQ(sum, 70u); // [100, 170)
}

TEST(KernelTrace, NoRecordsNoCharges) { EXPECT_TRUE(chargedTimes({}).empty()); }
