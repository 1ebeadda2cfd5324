//===- SamplerTest.cpp - greedy, temperature, top-k, top-p, min-p, seeds --===//
#include "runtime/Sampler.h"
#include "runtime/Session.h"

#include "codegen/cuda/Compile.h"
#include "frontends/Frontend.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <random>
#include <set>

using namespace fg;
using namespace llvm;

namespace {

template <typename T> std::string errorText(Expected<T> &v) {
  return v ? std::string("(no error)") : toString(v.takeError());
}
template <typename T> std::string errorText(Expected<T> &&v) { return errorText(v); }

/// Logits whose softmax is `probs` (up to a constant shift).
std::vector<float> logitsOf(ArrayRef<double> probs) {
  std::vector<float> l;
  for (double p : probs)
    l.push_back(p > 0 ? static_cast<float>(std::log(p)) : -INFINITY);
  return l;
}

TokenSampler sampler(SamplingOptions o) {
  Expected<TokenSampler> s = TokenSampler::create(o);
  EXPECT_TRUE(bool(s)) << errorText(s);
  return std::move(*s);
}

/// token -> probability of a distribution() answer.
std::map<int32_t, double> asMap(Expected<std::vector<TokenProb>> d) {
  EXPECT_TRUE(bool(d)) << errorText(d);
  std::map<int32_t, double> m;
  if (d)
    for (const TokenProb &t : *d)
      m[t.token] = t.prob;
  return m;
}

std::vector<float> randomLogits(std::mt19937 &rng, int n) {
  std::normal_distribution<float> nd(0.f, 3.f);
  std::vector<float> l(n);
  for (float &x : l)
    x = nd(rng);
  return l;
}

int32_t argmax(ArrayRef<float> l) {
  return static_cast<int32_t>(std::max_element(l.begin(), l.end()) - l.begin());
}

/// Pearson's chi-square of `counts` against `probs` over `n` draws.
double chiSquare(const std::vector<int64_t> &counts, ArrayRef<double> probs, int64_t n) {
  double chi = 0;
  for (size_t i = 0; i < probs.size(); ++i) {
    double expect = probs[i] * n;
    chi += (counts[i] - expect) * (counts[i] - expect) / expect;
  }
  return chi;
}

/// The default (temperature 0) and top-k 1 are the first argmax, whatever the
/// other settings, and draw nothing.
TEST(Sampler, GreedyAndTopK1AreTheArgmax) {
  std::mt19937 rng(3);
  SamplingOptions topk1;
  topk1.temperature = 1.5;
  topk1.topK = 1;
  topk1.topP = 0.3;
  topk1.seed = 11;
  TokenSampler a = sampler({}), b = sampler(topk1);
  EXPECT_EQ(SamplingOptions{}.str(), "greedy");
  for (int i = 0; i < 200; ++i) {
    std::vector<float> l = randomLogits(rng, 97);
    EXPECT_EQ(*a.sample(l), argmax(l));
    EXPECT_EQ(*b.sample(l), argmax(l));
    EXPECT_EQ(*a.sample(l), greedyToken(l));
  }
  // Ties: the first.
  std::vector<float> tie = {0.f, 2.f, 1.f, 2.f};
  EXPECT_EQ(*a.sample(tie), 1);
}

/// As the temperature goes to 0 the draw concentrates on the argmax: the
/// argmax's probability is 1 / (1 + sum exp(-gap_i / T)).
TEST(Sampler, TemperatureToZeroIsGreedy) {
  std::vector<float> l = {1.0f, 3.0f, 2.5f, -1.0f}; // gaps 2, 0.5, 4
  for (double t : {1.0, 0.5, 0.1, 0.02}) {
    SamplingOptions o;
    o.temperature = t;
    std::map<int32_t, double> d = asMap(sampler(o).distribution(l));
    double expect = 1 / (1 + std::exp(-2 / t) + std::exp(-0.5 / t) + std::exp(-4 / t));
    EXPECT_NEAR(d[1], expect, 1e-9) << "T = " << t;
  }
  SamplingOptions cold;
  cold.temperature = 0.01;
  cold.seed = 5;
  TokenSampler s = sampler(cold);
  for (int i = 0; i < 1000; ++i)
    ASSERT_EQ(*s.sample(l), 1);
}

/// top-p keeps the smallest most-likely prefix whose mass reaches p (token ids
/// not in probability order), renormalised; the first token is always kept.
TEST(Sampler, TopPKeepsTheSmallestPrefixReachingP) {
  // id:             0     1     2     3     4
  std::vector<double> p = {0.15, 0.05, 0.5, 0.1, 0.2}; // order: 2, 4, 0, 3, 1
  std::vector<float> l = logitsOf(p);
  auto kept = [&](double topP) {
    SamplingOptions o;
    o.temperature = 1;
    o.topP = topP;
    return asMap(sampler(o).distribution(l));
  };
  std::map<int32_t, double> d = kept(0.65);
  ASSERT_EQ(d.size(), 2u);
  EXPECT_NEAR(d[2], 0.5 / 0.7, 1e-6);
  EXPECT_NEAR(d[4], 0.2 / 0.7, 1e-6);
  EXPECT_EQ(kept(0.72).size(), 3u);    // 0.5 + 0.2 < 0.72 <= 0.85
  EXPECT_EQ(kept(0.86).size(), 4u);    // 0.85 < 0.86 <= 0.95
  EXPECT_EQ(kept(0.4).size(), 1u);     // the top token alone reaches it
  EXPECT_EQ(kept(1.0).size(), 5u);     // off
  EXPECT_EQ(kept(1e-6).count(2), 1u);  // never empty
}

/// top-p over a large, flat vocabulary (the mass needs more than the first
/// prefix sorted) agrees with a brute-force full sort.
TEST(Sampler, TopPLargeVocabularyMatchesFullSort) {
  std::mt19937 rng(9);
  std::uniform_real_distribution<float> ud(0.f, 0.5f);
  std::vector<float> l(50000);
  for (float &x : l)
    x = ud(rng);
  SamplingOptions o;
  o.temperature = 1;
  o.topP = 0.3;
  Expected<std::vector<TokenProb>> d = sampler(o).distribution(l);
  ASSERT_TRUE(bool(d)) << errorText(d);
  // Brute force.
  std::vector<std::pair<double, int32_t>> all;
  double sum = 0;
  for (size_t i = 0; i < l.size(); ++i)
    sum += std::exp(double(l[i]));
  for (size_t i = 0; i < l.size(); ++i)
    all.push_back({std::exp(double(l[i])) / sum, static_cast<int32_t>(i)});
  std::sort(all.begin(), all.end(),
            [](auto &a, auto &b) { return a.first > b.first || (a.first == b.first && a.second < b.second); });
  size_t n = 0;
  double cum = 0;
  while (cum < 0.3)
    cum += all[n++].first;
  ASSERT_GT(n, 256u) << "the test must need more than the first sorted prefix";
  ASSERT_EQ(d->size(), n);
  for (size_t i = 0; i < n; ++i)
    EXPECT_EQ((*d)[i].token, all[i].second) << i;
}

/// top-k keeps the k most likely, renormalised; top-p then works on them.
TEST(Sampler, TopKThenTopP) {
  std::vector<double> p = {0.1, 0.4, 0.05, 0.3, 0.15};
  std::vector<float> l = logitsOf(p);
  SamplingOptions o;
  o.temperature = 1;
  o.topK = 3; // 1, 3, 4: mass 0.85
  std::map<int32_t, double> d = asMap(sampler(o).distribution(l));
  ASSERT_EQ(d.size(), 3u);
  EXPECT_NEAR(d[1], 0.4 / 0.85, 1e-6);
  EXPECT_NEAR(d[4], 0.15 / 0.85, 1e-6);
  o.topP = 0.8; // of the renormalised three: 0.47 + 0.35 = 0.82 >= 0.8
  d = asMap(sampler(o).distribution(l));
  ASSERT_EQ(d.size(), 2u);
  EXPECT_NEAR(d[1], 0.4 / 0.7, 1e-6);
  EXPECT_NEAR(d[3], 0.3 / 0.7, 1e-6);
}

/// min-p keeps the tokens at least p × the most likely token's probability.
TEST(Sampler, MinPIsRelativeToTheMax) {
  std::vector<double> p = {0.1, 0.4, 0.2, 0.3}; // relative: 0.25, 1, 0.5, 0.75
  std::vector<float> l = logitsOf(p);
  auto kept = [&](double minP) {
    SamplingOptions o;
    o.temperature = 1;
    o.minP = minP;
    return asMap(sampler(o).distribution(l));
  };
  std::map<int32_t, double> d = kept(0.49);
  ASSERT_EQ(d.size(), 3u);
  EXPECT_EQ(d.count(0), 0u);
  EXPECT_NEAR(d[1], 0.4 / 0.9, 1e-6);
  EXPECT_EQ(kept(0.6).size(), 2u);
  EXPECT_EQ(kept(0.8).size(), 1u);
  EXPECT_EQ(kept(0.2).size(), 4u);
}

/// Draws with a fixed seed follow the distribution: chi-square (3 degrees of
/// freedom) under the 0.1 % critical value 16.27, at temperature 1 and 2
/// (p^(1/T), renormalised); -inf logits are never drawn.
TEST(Sampler, FrequenciesFollowTheDistribution) {
  std::vector<double> p = {0.4, 0.3, 0.2, 0.1, 0.0};
  std::vector<float> l = logitsOf(p);
  const int64_t n = 40000;
  for (double t : {1.0, 2.0}) {
    SamplingOptions o;
    o.temperature = t;
    o.seed = 1234;
    TokenSampler s = sampler(o);
    std::vector<int64_t> counts(5, 0);
    for (int64_t i = 0; i < n; ++i) {
      Expected<int32_t> tok = s.sample(l);
      ASSERT_TRUE(bool(tok)) << errorText(tok);
      ++counts[*tok];
    }
    EXPECT_EQ(counts[4], 0);
    std::vector<double> expect;
    double sum = 0;
    for (int i = 0; i < 4; ++i)
      sum += std::pow(p[i], 1 / t);
    for (int i = 0; i < 4; ++i)
      expect.push_back(std::pow(p[i], 1 / t) / sum);
    counts.pop_back();
    EXPECT_LT(chiSquare(counts, expect, n), 16.27) << "T = " << t;
    // And the sampler is not greedy: every token is drawn often.
    for (int i = 0; i < 4; ++i)
      EXPECT_GT(counts[i], n * expect[i] * 0.9) << i;
  }
}

/// Same seed, same tokens; another seed, other tokens.
TEST(Sampler, SeedsAreReproducible) {
  std::mt19937 rng(1);
  std::vector<std::vector<float>> rows;
  for (int i = 0; i < 64; ++i)
    rows.push_back(randomLogits(rng, 50));
  auto draw = [&](uint64_t seed) {
    SamplingOptions o;
    o.temperature = 1;
    o.topK = 20;
    o.topP = 0.95;
    o.seed = seed;
    TokenSampler s = sampler(o);
    std::vector<int32_t> out;
    for (const auto &r : rows)
      out.push_back(*s.sample(r));
    return out;
  };
  EXPECT_EQ(draw(7), draw(7));
  EXPECT_NE(draw(7), draw(8));
  double mean = 0;
  for (int i = 0; i < 10000; ++i) {
    double u = samplerUniform(0, static_cast<uint64_t>(i));
    ASSERT_GE(u, 0.0);
    ASSERT_LT(u, 1.0);
    mean += u / 10000;
  }
  EXPECT_NEAR(mean, 0.5, 0.02);
}

/// The draw is a function of (seed, counter): the bits the device's draw
/// computes too (kernels/sample.cuh), worked out independently in Python's
/// integers: u = (mix(mix(seed + G) ^ (draw * C + D)) >> 11) / 2^53 with
/// splitmix64's mixer.
TEST(Sampler, DrawsAreAFunctionOfTheirCounter) {
  EXPECT_EQ(samplerUniform(0, 0), 583408786249358.0 * 0x1.0p-53);
  EXPECT_EQ(samplerUniform(7, 3), 8644780762772331.0 * 0x1.0p-53);
  EXPECT_EQ(samplerUniform(2024, (uint64_t(1) << 32) | 5), 1814895265468888.0 * 0x1.0p-53);
  std::mt19937 rng(3);
  std::vector<float> row = randomLogits(rng, 300);
  SamplingOptions o;
  o.temperature = 1.3;
  o.topK = 50;
  o.seed = 11;
  TokenSampler counted = sampler(o), indexed = sampler(o);
  std::set<int32_t> seen;
  for (uint64_t d = 0; d < 40; ++d) {
    Expected<int32_t> a = counted.sample(row), b = indexed.sample(row, d);
    ASSERT_TRUE(a && b);
    EXPECT_EQ(*a, *b) << d; // the counter overload is draws 0, 1, 2, ...
    EXPECT_EQ(*indexed.sample(row, d), *b) << "the same draw again";
    seen.insert(*b);
  }
  EXPECT_GT(seen.size(), 5u); // and the draws differ
}

TEST(Sampler, Errors) {
  SamplingOptions o;
  o.temperature = -1;
  EXPECT_EQ(errorText(TokenSampler::create(o)),
            "the temperature must be a finite number >= 0 (0: greedy), got -1");
  o = {};
  o.topP = 0;
  EXPECT_EQ(errorText(TokenSampler::create(o)), "top-p must be in (0, 1] (1: off), got 0");
  o = {};
  o.minP = 1.5;
  EXPECT_EQ(errorText(TokenSampler::create(o)), "min-p must be in [0, 1] (0: off), got 1.5");
  o = {};
  o.topK = -2;
  EXPECT_EQ(errorText(TokenSampler::create(o)), "top-k must be >= 0 (0: off), got -2");
  TokenSampler s = sampler({});
  std::vector<float> nan = {0.f, NAN, 1.f};
  EXPECT_EQ(errorText(s.sample(nan)), "cannot sample: logit 1 is NaN");
  std::vector<float> ninf = {-INFINITY, -INFINITY};
  EXPECT_EQ(errorText(s.sample(ninf)), "cannot sample: every logit is -inf");
  EXPECT_EQ(errorText(s.sample({})), "cannot sample from an empty logits row");
  o = {};
  o.temperature = 0.8;
  o.topK = 40;
  o.minP = 0.05;
  o.seed = 3;
  EXPECT_EQ(o.str(), "temperature 0.8, top-k 40, min-p 0.05, seed 3");
}

Plan demoCpuPlan() {
  ModelOptions mo;
  mo.ctx = 64;
  mo.prefill = {8};
  Expected<Graph> g = loadModel("demo", mo);
  EXPECT_TRUE(bool(g)) << errorText(g);
  CompileOptions co;
  co.ctx = 64;
  co.cuda = false;
  Expected<Plan> p = compile(*g, co);
  EXPECT_TRUE(bool(p)) << errorText(p);
  return std::move(*p);
}

/// A Session stops after the first generated stop token (returned, handed to
/// onToken, not fed); a seeded Session repeats itself; a stop token outside
/// the vocabulary and bad sampling options are refused at create.
TEST(SessionSampling, StopTokensAndSeeds) {
  Plan plan = demoCpuPlan();
  const std::vector<int32_t> prompt = {1, 7, 42, 3};
  Expected<Session> greedy = Session::create(plan, {});
  ASSERT_TRUE(bool(greedy)) << errorText(greedy);
  Expected<std::vector<int32_t>> all = greedy->generate(prompt, 8);
  ASSERT_TRUE(bool(all)) << errorText(all);
  EXPECT_FALSE(greedy->stats().stopped);
  // The first token of the run that did not appear before it.
  size_t k = 2;
  while (k < all->size() && std::find(all->begin(), all->begin() + k, (*all)[k]) != all->begin() + k)
    ++k;
  ASSERT_LT(k, all->size()) << "the greedy run repeats one token";
  SessionOptions so;
  so.stopTokens = {(*all)[k]};
  std::vector<int32_t> streamed;
  so.onToken = [&](int32_t t) {
    streamed.push_back(t);
    return true;
  };
  Expected<Session> stopping = Session::create(plan, {}, so);
  ASSERT_TRUE(bool(stopping)) << errorText(stopping);
  Expected<std::vector<int32_t>> cut = stopping->generate(prompt, 8);
  ASSERT_TRUE(bool(cut)) << errorText(cut);
  EXPECT_EQ(*cut, std::vector<int32_t>(all->begin(), all->begin() + k + 1));
  EXPECT_EQ(streamed, *cut);
  EXPECT_TRUE(stopping->stats().stopped);
  EXPECT_EQ(stopping->position(), static_cast<int64_t>(prompt.size() + k)); // stop token not fed

  auto sampled = [&](uint64_t seed) {
    SessionOptions o;
    o.sampling.temperature = 1.5;
    o.sampling.seed = seed;
    Expected<Session> s = Session::create(plan, {}, o);
    EXPECT_TRUE(bool(s)) << errorText(s);
    Expected<std::vector<int32_t>> t = s->generate(prompt, 12);
    EXPECT_TRUE(bool(t)) << errorText(t);
    return t ? *t : std::vector<int32_t>{};
  };
  std::vector<int32_t> a = sampled(42);
  EXPECT_EQ(a, sampled(42));
  EXPECT_NE(a, sampled(43));
  greedy->reset();
  EXPECT_NE(a, *greedy->generate(prompt, 12)) << "temperature 1.5 should leave the greedy path";

  SessionOptions bad;
  bad.stopTokens = {static_cast<int32_t>(greedy->vocab())};
  EXPECT_EQ(errorText(Session::create(plan, {}, bad)),
            "stop token " + std::to_string(greedy->vocab()) +
                " is outside the vocabulary [0, " + std::to_string(greedy->vocab()) + ")");
  bad = {};
  bad.sampling.topP = 2;
  EXPECT_EQ(errorText(Session::create(plan, {}, bad)),
            "top-p must be in (0, 1] (1: off), got 2");
}

} // namespace

namespace {

/// A Session's draw is TokenSampler's at counter (epoch << 32) | position,
/// the epoch moving on at a generate() or reset() after draws: each generated token
/// equals the host sampler's draw on the row it came from (observed through
/// onRun), a reset's next generate uses a new epoch (not a repeat), and
/// sampleNext asked twice at one position gives the same token.
TEST(SessionSampling, DrawsAreCountedByPositionAndCall) {
  Plan plan = demoCpuPlan();
  SessionOptions o;
  o.sampling.temperature = 1.5;
  o.sampling.topK = 50;
  o.sampling.seed = 9;
  std::vector<std::vector<float>> rows;
  o.onRun = [&](const SessionRun &r, Executor &) {
    rows.emplace_back(r.logits.end() - (r.logits.size() / r.logitRows), r.logits.end());
    return Error::success();
  };
  Expected<Session> s = Session::create(plan, {}, o);
  ASSERT_TRUE(bool(s)) << errorText(s);
  const std::vector<int32_t> prompt = {3, 1, 4, 1, 5};
  auto ref = TokenSampler::create(o.sampling);
  ASSERT_TRUE(bool(ref));
  std::vector<std::vector<int32_t>> calls;
  for (uint64_t epoch : {uint64_t(0), uint64_t(1)}) { // generate 0, reset 1, generate in 1
    rows.clear();
    Expected<std::vector<int32_t>> t = s->generate(prompt, 10);
    ASSERT_TRUE(bool(t)) << errorText(t);
    ASSERT_EQ(t->size(), 10u);
    // The last 10 rows gave the 10 tokens (the prompt's chunks came first).
    ASSERT_GE(rows.size(), 10u);
    for (size_t i = 0; i < 10; ++i) {
      const uint64_t draw = (epoch << 32) | (prompt.size() + i);
      Expected<int32_t> want = ref->sample(rows[rows.size() - 10 + i], draw);
      ASSERT_TRUE(bool(want));
      EXPECT_EQ((*t)[i], *want) << "epoch " << epoch << ", token " << i;
    }
    calls.push_back(*t);
    s->reset();
  }
  EXPECT_NE(calls[0], calls[1]) << "a reset's generate draws anew";
  // A new Session with the same seed repeats the first call.
  Expected<Session> again = Session::create(plan, {}, o);
  ASSERT_TRUE(bool(again)) << errorText(again);
  Expected<std::vector<int32_t>> first = again->generate(prompt, 10);
  ASSERT_TRUE(bool(first));
  EXPECT_EQ(*first, calls[0]);
  // A reset before anything was drawn starts no new epoch (what Python's
  // generate(reset=True) does first).
  Expected<Session> fresh = Session::create(plan, {}, o);
  ASSERT_TRUE(bool(fresh));
  fresh->reset();
  Expected<std::vector<int32_t>> afterReset = fresh->generate(prompt, 10);
  ASSERT_TRUE(bool(afterReset));
  EXPECT_EQ(*afterReset, calls[0]);
  // sampleNext is the position's draw: twice, the same token.
  Expected<int32_t> a = again->sampleNext(), b = again->sampleNext();
  ASSERT_TRUE(a && b);
  EXPECT_EQ(*a, *b);
}

} // namespace

namespace {

/// setSampling replaces the settings (and the custom sampler) from the next
/// generate on; refused settings leave the Session as it was.
TEST(SessionSampling, SetSamplingBetweenGenerates) {
  Plan plan = demoCpuPlan();
  Expected<Session> s = Session::create(plan, {}, SessionOptions{});
  ASSERT_TRUE(bool(s)) << errorText(s);
  const std::vector<int32_t> prompt = {2, 7, 1, 8};
  Expected<std::vector<int32_t>> greedy = s->generate(prompt, 6);
  ASSERT_TRUE(bool(greedy)) << errorText(greedy);
  SamplingOptions hot;
  hot.temperature = 1.5;
  hot.seed = 4;
  ASSERT_FALSE(bool(s->setSampling(hot)));
  s->reset();
  Expected<std::vector<int32_t>> drawn = s->generate(prompt, 6);
  ASSERT_TRUE(bool(drawn));
  // What a Session created with these settings draws in its epoch 1 (generate
  // 0, reset: 1, generate in 1), as this one did.
  SessionOptions o;
  o.sampling = hot;
  Expected<Session> t = Session::create(plan, {}, o);
  ASSERT_TRUE(bool(t));
  ASSERT_TRUE(bool(t->generate(prompt, 6)));
  t->reset();
  Expected<std::vector<int32_t>> same = t->generate(prompt, 6);
  ASSERT_TRUE(bool(same));
  EXPECT_EQ(*drawn, *same);
  EXPECT_NE(*drawn, *greedy);
  SamplingOptions bad;
  bad.topP = 0;
  EXPECT_EQ(llvm::toString(s->setSampling(bad)), "top-p must be in (0, 1] (1: off), got 0");
  // A custom sampler instead: always token 3.
  ASSERT_FALSE(bool(s->setSampling(SamplingOptions{}, [](ArrayRef<float>) -> Expected<int32_t> {
    return 3;
  })));
  s->reset();
  Expected<std::vector<int32_t>> threes = s->generate(prompt, 4);
  ASSERT_TRUE(bool(threes));
  EXPECT_EQ(*threes, std::vector<int32_t>(4, 3));
}

} // namespace
