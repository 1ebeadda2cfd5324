//===- SampleKernelTest.cpp - the device's draw, run on host threads --------===//
//
// kernels/sample.cuh's sampleRow (the draw the greedy launch's last block
// makes when a Session samples on the device) run by BlockEmulation.h: 256
// host threads as one block, barriers for __syncthreads, a slot exchange for
// warp shuffles. Its token must be runtime/Sampler.cpp's for the same row and
// draw counter — the host's TokenSampler is the reference — for odd
// vocabularies, ties, -inf values, every filter and their combinations, and
// the candidate cap (returns 2 only where the settings may exceed it). And
// the whole token launch (kernels/greedy.cuh: every block's argmax, the
// ticket, the last block's draw, the status words and ring) over a grid run
// block after block. The GPU runs the same sources in fusegraph_gpu_tests
// (GpuSampling, GpuGreedyToken).
//
//===----------------------------------------------------------------------===//
#include "runtime/Program.h"
#include "runtime/Sampler.h"
#include "tests/unit/codegen/SamplingCases.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <limits>
#include <memory>
#include <random>
#include <set>
#include <string>

// Last: the emulation defines CUDA's names (threadIdx, __shared__, min, max).
#include "tests/unit/codegen/BlockEmulation.h"

#include "codegen/cuda/kernels/sample.cuh"
namespace fg { // kernels/common.cuh's (inline PTX elsewhere in it: not for the host)
constexpr unsigned kStatusSeq = 6, kStatusRing = 8;
static_assert(kStatusSeq == kStatusWordSeq && kStatusRing == kStatusWordRing);
} // namespace fg
#include "codegen/cuda/kernels/greedy.cuh"

namespace {

using namespace fg;

template <long long V_, int NT_ = 256> struct Cfg {
  static constexpr long long V = V_;
  static constexpr int NT = NT_;
  static constexpr int kCap = static_cast<int>(kDeviceSampleCandidates);
  static constexpr bool kHasPositions = true;
  static constexpr unsigned kDrawShared = sizeof(SampleShared<Cfg>);
};

/// A block's shared memory for a draw, holding garbage as it would.
template <class C> std::unique_ptr<SampleShared<C>> drawShared() {
  auto sh = std::make_unique_for_overwrite<SampleShared<C>>();
  std::memset(static_cast<void *>(sh.get()), 0xa5, sizeof(SampleShared<C>));
  return sh;
}

SampleParams paramsOf(const SamplingOptions &so, uint64_t epoch) {
  SampleParams p{};
  p.mode = 1;
  p.topK = static_cast<unsigned>(so.topK);
  p.temperature = so.temperature;
  p.topP = so.topP;
  p.minP = so.minP;
  p.seed = so.seed;
  p.epoch = epoch;
  return p;
}

/// The device's answers for `row` at each of `draws` (one block running
/// them in a row): (returned code, token) each.
template <long long V, int NT = 256>
std::vector<std::pair<unsigned, int32_t>> deviceDraws(const std::vector<float> &row,
                                                      const SampleParams &p,
                                                      const std::vector<uint64_t> &draws) {
  EXPECT_EQ(static_cast<long long>(row.size()), V);
  const float lmax = *std::max_element(row.begin(), row.end());
  const size_t n = draws.size();
  std::vector<unsigned> codes(n * NT), tokens(n * NT);
  auto sh = drawShared<Cfg<V, NT>>();
  emu::runBlock(NT, [&] {
    for (size_t i = 0; i < n; ++i) {
      unsigned t = 0;
      const unsigned c = sampleRow<Cfg<V, NT>>(row.data(), lmax, p, draws[i], &t, *sh);
      codes[i * NT + threadIdx.x] = c;
      tokens[i * NT + threadIdx.x] = t;
    }
  });
  std::vector<std::pair<unsigned, int32_t>> out;
  for (size_t i = 0; i < n; ++i) {
    const unsigned code = codes[i * NT], token = tokens[i * NT];
    for (unsigned t = 1; t < NT; ++t) {
      EXPECT_EQ(codes[i * NT + t], code) << "thread " << t; // every thread returns the same
      if (code == 1) {
        EXPECT_EQ(tokens[i * NT + t], token) << "thread " << t;
      }
    }
    out.push_back({code, static_cast<int32_t>(token)});
  }
  return out;
}

constexpr uint32_t kDrawsPerRow = 24;

/// Rows of a / b: small integers over small divisors (ties), three -inf
/// values, every other row a peak, one in four flat; each setting at 24
/// draw counters.
template <long long V, int NT = 256> void drawsMatchTheHost(int rows) {
  std::mt19937 rng(static_cast<uint32_t>(17 + V));
  std::uniform_int_distribution<int> num(-60, 60), den(1, 6);
  std::uniform_int_distribution<long long> pick(0, V - 1);
  int drawn = 0, left = 0, boundary = 0, tied = 0;
  for (int r = 0; r < rows; ++r) {
    std::vector<float> row(static_cast<size_t>(V));
    for (float &x : row)
      x = static_cast<float>(num(rng)) / static_cast<float>(den(rng));
    if (V > 4)
      for (int j = 0; j < 3; ++j)
        row[static_cast<size_t>(pick(rng))] = -std::numeric_limits<float>::infinity();
    if (r % 2)
      row[static_cast<size_t>(pick(rng))] = 400;
    if (r % 4 == 2) // a flat row: every distance set near the top holds many
      for (float &x : row)
        if (x != -std::numeric_limits<float>::infinity())
          x *= 0.01f;
    if (*std::max_element(row.begin(), row.end()) == -std::numeric_limits<float>::infinity())
      row[0] = 1; // (the kernel is called on rows with a finite maximum)
    const uint32_t pos = static_cast<uint32_t>(r * 37 + 5);
    for (const SamplingOptions &so : test::drawSettings()) {
      // Draws at two epochs and several positions (the counter's halves).
      const uint64_t epoch = static_cast<uint64_t>(r % 3);
      std::vector<uint64_t> draws;
      for (uint32_t k = 0; k < kDrawsPerRow; ++k)
        draws.push_back(((epoch + k % 2) << 32) | (pos + 1 + k));
      SampleParams p = paramsOf(so, 0);
      auto got = deviceDraws<V, NT>(row, p, draws);
      auto host = TokenSampler::create(so);
      ASSERT_TRUE(bool(host));
      for (size_t k = 0; k < draws.size(); ++k) {
        SCOPED_TRACE("vocab " + std::to_string(V) + ", row " + std::to_string(r) + ", " +
                     so.str() + ", draw " + std::to_string(draws[k]));
        auto want = host->sample(row, draws[k]);
        ASSERT_TRUE(bool(want)) << llvm::toString(want.takeError());
        auto [code, token] = got[k];
        if (code == 2) {
          EXPECT_TRUE(test::mayExceedTheCap(so)) << "left to the host";
          ++left;
          continue;
        }
        ASSERT_EQ(code, 1u);
        ++drawn;
        if (token != *want)
          ++(test::checkDifferentDraw(so, row, samplerUniform(so.seed, draws[k]), token, *want)
                 ? tied
                 : boundary);
      }
    }
  }
  std::printf("vocab %lld: %d drawn (%d at a boundary, %d past a tied top-p cut), %d left to "
              "the host\n",
              V, drawn, boundary, tied, left);
  EXPECT_GT(drawn, 0);
  EXPECT_LE(boundary, 2);
  if (V > 4000) {
    EXPECT_GT(left, 0) << "the flat rows' top-p should exceed the cap";
  } else {
    EXPECT_EQ(left, 0);
  }
}

TEST(SampleKernel, OneValue) { drawsMatchTheHost<1>(2); }
TEST(SampleKernel, SevenValues) { drawsMatchTheHost<7>(4); }
TEST(SampleKernel, OddVocabulary) { drawsMatchTheHost<509>(4); }
TEST(SampleKernel, PastTheCandidateCap) { drawsMatchTheHost<5003>(2); }
/// The draw at the token launch's default block of 1024 threads.
TEST(SampleKernel, OddVocabulary1024Threads) { drawsMatchTheHost<509, 1024>(4); }

/// The uniform is the host's, bit for bit.
TEST(SampleKernel, UniformIsTheHosts) {
  for (uint64_t seed : {uint64_t(0), uint64_t(7), uint64_t(2024), ~uint64_t(0)})
    for (uint64_t draw : {uint64_t(0), uint64_t(3), (uint64_t(1) << 32) | 5, ~uint64_t(0)})
      EXPECT_EQ(fgSampleUniform(seed, draw), samplerUniform(seed, draw)) << seed << " " << draw;
}

/// One token of a flat row is drawn with its probability: 2000 draws of a
/// row of four values at temperature 1 (chi-square, 3 degrees of freedom,
/// under the 0.1 % critical value 16.27).
TEST(SampleKernel, FrequenciesFollowTheDistribution) {
  const std::vector<float> row = {std::log(0.4f), std::log(0.3f), std::log(0.2f),
                                  std::log(0.1f)};
  SamplingOptions so;
  so.temperature = 1;
  so.seed = 9;
  std::vector<int> counts(4, 0);
  const int n = 2000;
  std::vector<uint64_t> draws;
  for (int i = 0; i < n; ++i)
    draws.push_back(static_cast<uint64_t>(i));
  for (auto [code, token] : deviceDraws<4>(row, paramsOf(so, 0), draws)) {
    ASSERT_EQ(code, 1u);
    ++counts[static_cast<size_t>(token)];
  }
  const double p[] = {0.4, 0.3, 0.2, 0.1};
  double chi = 0;
  for (int i = 0; i < 4; ++i)
    chi += (counts[size_t(i)] - n * p[i]) * (counts[size_t(i)] - n * p[i]) / (n * p[i]);
  EXPECT_LT(chi, 16.27);
}

/// Review findings, kept: a min-p decision within f32 rounding of the
/// threshold is the host's (made in f64), and a temperature whose inverse
/// overflows f32 still draws the argmax (as the host's exp(0 / T) = 1).
TEST(SampleKernel, MinPAtItsThresholdAndTinyTemperatures) {
  const std::vector<float> row = {3.14159012f, 0.145857871f};
  SamplingOptions so;
  so.temperature = 1, so.minP = 0.05, so.seed = 3;
  std::vector<uint64_t> draws;
  for (uint64_t d = 0; d < 200; ++d)
    draws.push_back(d);
  auto host = TokenSampler::create(so);
  ASSERT_TRUE(bool(host));
  auto got = deviceDraws<2>(row, paramsOf(so, 0), draws);
  int second = 0;
  for (size_t k = 0; k < draws.size(); ++k) {
    ASSERT_EQ(got[k].first, 1u);
    EXPECT_EQ(got[k].second, *host->sample(row, draws[k])) << "draw " << draws[k];
    second += got[k].second == 1;
  }
  EXPECT_GT(second, 0) << "token 1 is kept by min-p (the host's f64 decision)";
  std::vector<float> wide(1000);
  for (size_t i = 0; i < wide.size(); ++i)
    wide[i] = static_cast<float>(i % 17) * 0.25f;
  wide[123] = 9;
  SamplingOptions cold;
  cold.temperature = 1e-300, cold.seed = 1;
  for (auto [code, token] : deviceDraws<1000>(wide, paramsOf(cold, 0), {0, 1, 2})) {
    EXPECT_EQ(code, 1u);
    EXPECT_EQ(token, 123);
  }
}

/// A tied top-p cut (test::topPCutIsTied): 40 equal logits, top-k 40 and top-p
/// 0.9 put the cut at exactly 36 of 40. The device sums the unnormalised
/// weights exactly (1.0 each) and keeps 36, so every draw is one of the 36
/// smallest ids; the host keeps 36 or 37 by the rounding of its normalised
/// sums — where it keeps 37 the two may differ, both correct. A cut that is
/// not a tie (top-p 0.91: 36.4 of 40) is recognised as none.
TEST(SampleKernel, TiedTopPCut) {
  std::vector<float> row(100, 0.0f);
  for (int i = 0; i < 40; ++i)
    row[static_cast<size_t>(i) * 2 + 1] = 5.0f; // ids 1, 3, ..., 79
  SamplingOptions so;
  so.temperature = 1, so.topK = 40, so.topP = 0.9, so.minP = 0.02, so.seed = 1003;
  EXPECT_TRUE(test::topPCutIsTied(so, row));
  SamplingOptions notTied = so;
  notTied.topP = 0.91;
  EXPECT_FALSE(test::topPCutIsTied(notTied, row));
  SamplingOptions noTopP = so;
  noTopP.topP = 1;
  EXPECT_FALSE(test::topPCutIsTied(noTopP, row));
  std::vector<uint64_t> draws;
  for (uint64_t d = 0; d < 64; ++d)
    draws.push_back(d);
  std::set<int32_t> seen;
  for (auto [code, token] : deviceDraws<100>(row, paramsOf(so, 0), draws)) {
    ASSERT_EQ(code, 1u);
    EXPECT_EQ(token % 2, 1) << "a token of the top 40";
    EXPECT_LE(token, 71) << "the 36th of ids 1, 3, 5, ... is 71";
    seen.insert(token);
  }
  EXPECT_GT(seen.size(), 20u) << "draws spread over the kept 36";
  auto host = TokenSampler::create(so);
  ASSERT_TRUE(bool(host));
  auto d = host->distribution(row); // the tokens the host keeps
  ASSERT_TRUE(bool(d));
  EXPECT_TRUE(d->size() == 36u || d->size() == 37u) << d->size();
  // The other 60 logits change the host's normaliser and so its rounding:
  // find a row where it keeps 37 and see the two differ, the device's
  // token always the earlier.
  int differ = 0;
  for (int j = 1; j < 64 && differ == 0; ++j) {
    std::vector<float> r2 = row;
    for (size_t i = 0; i < r2.size(); ++i)
      if (r2[i] != 5.0f)
        r2[i] = -0.03125f * static_cast<float>(j);
    auto d2 = host->distribution(r2);
    ASSERT_TRUE(bool(d2));
    if (d2->size() != 37u)
      continue;
    EXPECT_TRUE(test::topPCutIsTied(so, r2));
    auto got = deviceDraws<100>(r2, paramsOf(so, 0), draws);
    for (size_t k = 0; k < draws.size(); ++k) {
      const int32_t want = *host->sample(r2, draws[k]);
      EXPECT_LE(got[k].second, 71);
      if (got[k].second != want) {
        ++differ;
        EXPECT_LT(got[k].second, want) << "draw " << draws[k];
      }
    }
  }
  EXPECT_GT(differ, 0) << "no row where the host keeps 37 of the 40";
  std::printf("tied top-p cut: %d of %zu draws differ where the host keeps 37, the device 36\n",
              differ, draws.size());
}

/// The token launch as lowering emits it (GreedyToken.cpp: blocks of NT
/// threads, 4 values each: 1024 by default), over rows that hold a NaN, a +inf, only -inf, or
/// plain values, greedy and drawn: the status words, the ring slot of the
/// step's parity in both copies, and the counters left zero for the replay.
template <long long V, int NT> void tokenLaunch() {
  using C = Cfg<V, NT>;
  const unsigned blocks = static_cast<unsigned>((V + 4 * NT - 1) / (4 * NT));
  std::mt19937 rng(static_cast<uint32_t>(V));
  std::uniform_real_distribution<float> val(-8, 8);
  std::uniform_int_distribution<long long> pick(0, V - 1);
  std::vector<unsigned long long> acc(3, 0);
  std::vector<unsigned> status(16, 0), mirror(16, 0);
  const float inf = std::numeric_limits<float>::infinity();
  SamplingOptions draw;
  draw.temperature = 0.9, draw.topK = 40, draw.seed = 5;
  for (int c = 0; c < 10; ++c) {
    std::vector<float> row(static_cast<size_t>(V));
    for (float &x : row)
      x = val(rng);
    std::string what = "plain";
    if (c == 2)
      row[size_t(pick(rng))] = std::nanf(""), what = "NaN";
    if (c == 3 || c == 6)
      row[size_t(pick(rng))] = inf, what = "+inf";
    if (c == 4)
      std::fill(row.begin(), row.end(), -inf), what = "all -inf";
    const bool drawn = c % 2 == 1;
    SCOPED_TRACE(what + (drawn ? ", drawn" : ", greedy") + ", vocab " + std::to_string(V));
    const SampleParams p = drawn ? paramsOf(draw, 2) : SampleParams{};
    const int pos = 40 + c;
    mirror[kStatusSeq] = static_cast<unsigned>(c + 1); // the input check's count
    auto sh = drawShared<C>();
    emu::runGrid(blocks, NT, [&] {
      greedyToken<C>(row.data(), acc.data(), status.data(), mirror.data(), &pos, &p,
                     reinterpret_cast<unsigned char *>(sh.get()));
    });
    EXPECT_EQ(acc, std::vector<unsigned long long>(3, 0)) << "the counters reset themselves";
    const unsigned r = static_cast<unsigned>(c + 1) & 1u;
    EXPECT_EQ(status[kStatusRing + 2 * r], status[4]);
    EXPECT_EQ(status[kStatusRing + 2 * r + 1], status[5]);
    EXPECT_EQ(mirror[kStatusRing + 2 * r], status[4]);
    EXPECT_EQ(mirror[kStatusRing + 2 * r + 1], status[5]);
    auto host = TokenSampler::create(drawn ? draw : SamplingOptions{});
    ASSERT_TRUE(bool(host));
    if (what == "NaN" || what == "all -inf" || what == "+inf") {
      EXPECT_EQ(status[5], 0u); // the host reads the row and says why, as its sampler does
      auto refused = host->sample(row, 0);
      EXPECT_FALSE(bool(refused));
      if (!refused)
        llvm::consumeError(refused.takeError());
      continue;
    }
    ASSERT_EQ(status[5], 1u);
    auto want = host->sample(row, (uint64_t(2) << 32) | uint64_t(pos + 1));
    ASSERT_TRUE(bool(want));
    EXPECT_EQ(static_cast<int32_t>(status[4]), *want);
  }
}

TEST(SampleKernel, TokenLaunchOneBlock) { tokenLaunch<509, 256>(); } // (the 256-thread form)
TEST(SampleKernel, TokenLaunchFiveBlocks) { tokenLaunch<4099, 256>(); }
/// The 1024-thread launch (the default since the thirty-seventh session).
TEST(SampleKernel, TokenLaunch1024Threads) { tokenLaunch<9001, 1024>(); }

} // namespace
