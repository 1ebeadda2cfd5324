//===- Sampler.cpp - greedy, temperature, top-k, top-p, min-p, seeded -----===//
#include "runtime/Sampler.h"

#include "ir/Diag.h"

#include "llvm/Support/Format.h"
#include "llvm/Support/raw_ostream.h"

#include <algorithm>
#include <cmath>

using namespace llvm;

namespace fg {

namespace {

/// splitmix64's output mixer.
uint64_t mix64(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

/// More likely first; equal logits: the smaller token id first.
bool moreLikely(const TokenProb &a, const TokenProb &b) {
  return a.prob > b.prob || (a.prob == b.prob && a.token < b.token);
}

/// The index of the largest logit, the first one on ties.
int32_t argmax(ArrayRef<float> logits) {
  return static_cast<int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
}

Error checkLogits(ArrayRef<float> logits) {
  if (logits.empty())
    return makeError("cannot sample from an empty logits row");
  bool any = false;
  for (size_t i = 0; i < logits.size(); ++i) {
    float l = logits[i];
    if (std::isnan(l))
      return makeError("cannot sample: logit " + std::to_string(i) + " is NaN");
    if (std::isinf(l) && l > 0)
      return makeError("cannot sample: logit " + std::to_string(i) + " is +inf");
    any |= !std::isinf(l);
  }
  if (!any)
    return makeError("cannot sample: every logit is -inf");
  return Error::success();
}

/// Normalises `c`'s weights to sum to one.
void normalise(std::vector<TokenProb> &c) {
  double sum = 0;
  for (const TokenProb &t : c)
    sum += t.prob;
  for (TokenProb &t : c)
    t.prob /= sum;
}

std::string num(double v) {
  std::string s;
  raw_string_ostream(s) << format("%g", v);
  return s;
}

} // namespace

std::string SamplingOptions::str() const {
  if (greedy())
    return "greedy";
  std::string s;
  raw_string_ostream os(s);
  os << "temperature " << format("%g", temperature);
  if (topK > 0)
    os << ", top-k " << topK;
  if (topP < 1)
    os << ", top-p " << format("%g", topP);
  if (minP > 0)
    os << ", min-p " << format("%g", minP);
  os << ", seed " << seed;
  return os.str();
}

double samplerUniform(uint64_t seed, uint64_t draw) {
  // kernels/sample.cuh fgSampleUniform: the same operations.
  const uint64_t h = mix64(seed + 0x9e3779b97f4a7c15ULL);
  return static_cast<double>(
             mix64(h ^ (draw * 0xd1b54a32d192ed03ULL + 0x632be59bd9b4e019ULL)) >> 11) *
         0x1.0p-53;
}

Expected<TokenSampler> TokenSampler::create(const SamplingOptions &o) {
  if (!std::isfinite(o.temperature) || o.temperature < 0)
    return makeError("the temperature must be a finite number >= 0 (0: greedy), got " +
                     num(o.temperature));
  if (o.topK < 0)
    return makeError("top-k must be >= 0 (0: off), got " + std::to_string(o.topK));
  if (!(o.topP > 0 && o.topP <= 1))
    return makeError("top-p must be in (0, 1] (1: off), got " + num(o.topP));
  if (!(o.minP >= 0 && o.minP <= 1))
    return makeError("min-p must be in [0, 1] (0: off), got " + num(o.minP));
  return TokenSampler(o);
}

Expected<std::vector<TokenProb>> TokenSampler::distribution(ArrayRef<float> logits) const {
  Expected<std::vector<TokenProb>> c = candidates(logits);
  if (c)
    std::stable_sort(c->begin(), c->end(), moreLikely);
  return c;
}

Expected<std::vector<TokenProb>> TokenSampler::candidates(ArrayRef<float> logits) const {
  if (Error e = checkLogits(logits))
    return e;
  if (opts_.greedy())
    return std::vector<TokenProb>{{argmax(logits), 1.0}};
  const int64_t V = static_cast<int64_t>(logits.size());
  const double maxLogit = logits[argmax(logits)];
  // The model's distribution (temperature 1); -inf logits are never candidates.
  std::vector<TokenProb> c;
  c.reserve(V);
  for (int64_t i = 0; i < V; ++i)
    if (!std::isinf(logits[i]))
      c.push_back({static_cast<int32_t>(i), std::exp(double(logits[i]) - maxLogit)});
  normalise(c);
  // 1. top-k. 2. top-p: the smallest most-likely prefix whose mass reaches p;
  // sorted in growing prefixes, so a peaked row of a large vocabulary does not
  // sort it whole.
  int64_t keep = static_cast<int64_t>(c.size());
  if (opts_.topK > 0)
    keep = std::min<int64_t>(keep, opts_.topK);
  if (keep < static_cast<int64_t>(c.size()) || opts_.topP < 1) {
    // With top-k on, its k tokens are sorted at once (the top-p mass is over them).
    const bool topKCuts = keep < static_cast<int64_t>(c.size());
    int64_t sorted = opts_.topP < 1 && !topKCuts ? std::min<int64_t>(keep, 256) : keep;
    for (;;) {
      // Past half the row a whole sort (introsort) beats partial_sort's
      // heap: a flat row's top-p keeps most tokens (W-tiny's random weights
      // took 11 ms a step in growing heaps). moreLikely is a total order,
      // so both give the same prefix.
      if (sorted * 2 >= static_cast<int64_t>(c.size())) {
        std::sort(c.begin(), c.end(), moreLikely);
        sorted = keep;
      } else {
        std::partial_sort(c.begin(), c.begin() + sorted, c.end(), moreLikely);
      }
      if (opts_.topP >= 1)
        break;
      // Mass over the kept (top-k) tokens, as after renormalising them.
      double keptMass = 0;
      if (!topKCuts)
        keptMass = 1;
      else
        for (int64_t i = 0; i < keep; ++i)
          keptMass += c[i].prob; // sorted == keep here
      double cum = 0;
      int64_t n = 0;
      while (n < sorted && cum < opts_.topP * keptMass)
        cum += c[n++].prob;
      if (cum >= opts_.topP * keptMass || sorted == keep) {
        keep = std::max<int64_t>(n, 1);
        break;
      }
      sorted = std::min<int64_t>(keep, sorted * 4);
    }
    c.resize(keep);
  }
  // 3. min-p, relative to the most likely token.
  if (opts_.minP > 0) {
    double top = 0;
    for (const TokenProb &t : c)
      top = std::max(top, t.prob);
    double threshold = opts_.minP * top;
    c.erase(std::remove_if(c.begin(), c.end(),
                           [&](const TokenProb &t) { return t.prob < threshold; }),
            c.end());
  }
  // 4. temperature over the kept tokens.
  double keptMax = -INFINITY;
  for (const TokenProb &t : c)
    keptMax = std::max(keptMax, double(logits[t.token]));
  for (TokenProb &t : c)
    t.prob = std::exp((double(logits[t.token]) - keptMax) / opts_.temperature);
  normalise(c);
  return c;
}

Expected<int32_t> TokenSampler::sample(ArrayRef<float> logits, uint64_t draw) {
  if (opts_.greedy()) {
    if (Error e = checkLogits(logits))
      return e;
    return argmax(logits);
  }
  Expected<std::vector<TokenProb>> d = candidates(logits);
  if (!d)
    return d.takeError();
  double u = samplerUniform(opts_.seed, draw), cum = 0;
  for (const TokenProb &t : *d) {
    cum += t.prob;
    if (u < cum)
      return t.token;
  }
  return d->back().token; // u within rounding of 1
}

} // namespace fg
