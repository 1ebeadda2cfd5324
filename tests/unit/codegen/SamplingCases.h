//===- SamplingCases.h - the draw settings the device sampler is checked on -===//
//
// Shared by SampleKernelTest (kernels/sample.cuh on host threads) and
// tests/gpu/SamplingGpuTest.cpp (the same source on the GPU): every filter
// alone and together, the candidate cap's edges, and the checks' helpers.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "runtime/Program.h"
#include "runtime/Sampler.h"

#include "llvm/ADT/ArrayRef.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <vector>

namespace fg::test {

inline std::vector<SamplingOptions> drawSettings() {
  std::vector<SamplingOptions> out;
  auto add = [&](double t, int64_t k, double p, double m) {
    SamplingOptions so;
    so.temperature = t, so.topK = k, so.topP = p, so.minP = m;
    so.seed = 1000 + out.size();
    out.push_back(so);
  };
  add(0.7, 0, 1, 0);       // index order
  add(1.3, 0, 1, 0.05);    // index order, min-p
  add(0.9, 40, 1, 0);      // top-k: the radix select
  add(1.0, 40, 0.9, 0.02); // every filter
  add(0.8, 0, 0.95, 0);    // top-p alone: the candidates within 40 of the max
  add(1.5, 2048, 1, 0);    // top-k at the cap
  add(1.0, 2049, 0.5, 0);  // top-k past the cap: the host's when it cuts
  add(0.6, 7, 0.3, 0.2);
  add(2.5, 3, 1, 0); // a hot top-3: a wrong candidate set shows
  return out;
}

/// Whether `so` may leave a row to the host (more sorted candidates than the
/// device holds).
inline bool mayExceedTheCap(const SamplingOptions &so) {
  return so.topK > int64_t(kDeviceSampleCandidates) || (so.topK == 0 && so.topP < 1);
}

/// Whether top-p's cut over `row` is a tie: the mass of the kept top-k
/// tokens' prefix equals p times their mass to within rounding at the cut
/// (rows of repeated values: 40 equal logits and p = 0.9 put the cut at
/// exactly 36 of 40). The host sums normalised probabilities in order, the
/// device unnormalised weights by a block scan, so each may keep one token
/// more than the other there — both correct; a different token follows for
/// about half the draws (thirty-seventh session: the "every filter" setting
/// on the flat rows, device tokens earlier than the host's).
inline bool topPCutIsTied(const SamplingOptions &so, llvm::ArrayRef<float> row) {
  if (!(so.topP < 1))
    return false;
  std::vector<std::pair<float, size_t>> v;
  float lmax = -INFINITY;
  for (size_t i = 0; i < row.size(); ++i)
    if (row[i] != -INFINITY) {
      v.push_back({row[i], i});
      lmax = std::max(lmax, row[i]);
    }
  std::sort(v.begin(), v.end(), [](const auto &a, const auto &b) {
    return a.first != b.first ? a.first > b.first : a.second < b.second;
  });
  if (so.topK > 0 && static_cast<size_t>(so.topK) < v.size())
    v.resize(static_cast<size_t>(so.topK));
  std::vector<double> e;
  double kept = 0;
  for (const auto &x : v)
    kept += e.emplace_back(std::exp(static_cast<double>(x.first) - static_cast<double>(lmax)));
  const double target = so.topP * kept;
  double cum = 0;
  for (double w : e) {
    cum += w;
    if (std::abs(cum - target) <= 1e-9 * kept)
      return true;
    if (cum > target)
      return false;
  }
  return false;
}

/// Whether `token` is one the host could keep past a tied top-p cut: in its
/// kept set with p raised just past the tie (the cut and the token after it).
inline bool keptPastTiedCut(const SamplingOptions &so, llvm::ArrayRef<float> row,
                            int32_t token) {
  SamplingOptions wider = so;
  wider.topP = std::min(1.0, so.topP + 1e-6);
  auto ts = TokenSampler::create(wider);
  if (!ts) {
    llvm::consumeError(ts.takeError());
    return false;
  }
  auto d = ts->distribution(row);
  if (!d) {
    llvm::consumeError(d.takeError());
    return false;
  }
  return std::any_of(d->begin(), d->end(), [&](const TokenProb &t) { return t.token == token; });
}

/// The distance from u to the nearest boundary of the host's cumulative
/// distribution of `row` (in its walking order): where a different token is
/// still a correct draw.
inline double nearestBoundary(const SamplingOptions &so, llvm::ArrayRef<float> row, double u) {
  auto ts = TokenSampler::create(so);
  if (!ts) {
    llvm::consumeError(ts.takeError());
    return 0;
  }
  auto d = ts->distribution(row);
  if (!d) {
    llvm::consumeError(d.takeError());
    return 0;
  }
  double cum = 0, nearest = 1;
  for (const TokenProb &t : *d) {
    cum += t.prob;
    nearest = std::min(nearest, std::abs(cum - u));
  }
  return nearest;
}

/// Checks a device token that differs from the host's `want` for the same
/// row and draw: past a tied top-p cut it must be one the host could keep
/// (returns true: a tie), else u must lie within 1e-5 of a boundary of the
/// host's cumulative distribution (returns false: a boundary).
inline bool checkDifferentDraw(const SamplingOptions &so, llvm::ArrayRef<float> row, double u,
                               int32_t device, int32_t want) {
  if (topPCutIsTied(so, row)) {
    EXPECT_TRUE(keptPastTiedCut(so, row, device)) << "device " << device << ", host " << want;
    return true;
  }
  EXPECT_LT(nearestBoundary(so, row, u), 1e-5) << "device " << device << ", host " << want;
  return false;
}

} // namespace fg::test
