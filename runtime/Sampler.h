//===- Sampler.h - picking the next token from a logits row ------*- C++ -*-===//
//
//   SamplingOptions so;  so.temperature = 0.8;  so.topK = 40;  so.seed = 7;
//   Expected<TokenSampler> s = TokenSampler::create(so);
//   Expected<int32_t> t = s->sample(logits);      // same seed, same logits: same tokens
//
// The host-side sampler of a Session (runtime/Session.h): greedy by default,
// else a draw from the softmax of the logits after these steps, in this order
// (llama.cpp's chain; the filters see the model's own distribution, so the
// temperature never changes which tokens are kept):
//   1. top-k:  keep the k most likely tokens (0: off);
//   2. top-p:  keep the smallest set of most likely tokens whose probability
//              mass reaches p (1: off; the first token is always kept);
//   3. min-p:  keep the tokens whose probability is at least p × the largest
//              (0: off);
//   4. temperature: the kept logits divided by T, renormalised;
//   5. a draw: u in [0, 1) from a hash of (seed, draw counter)
//      (samplerUniform: splitmix64's mixer, 53 bits), walking the candidates
//      in index order when no filter sorted them, most likely first otherwise.
// The draw is a function of its counter, not of a stream: a Session counts
// draws by the position the token will take and its generate() calls
// ((epoch << 32) | position), so the CUDA backend can draw the same token on
// the device (kernels/sample.cuh, Executor::setTokenPick) without the host's
// state, and a seed gives the same tokens on every machine and both devices.
// Temperature 0 (or top-k 1) is greedy: the first argmax, no random number
// drawn. Ties in the ordering go to the smaller token id.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "llvm/ADT/ArrayRef.h"
#include "llvm/Support/Error.h"

#include <cstdint>
#include <string>
#include <vector>

namespace fg {

struct SamplingOptions {
  double temperature = 0; ///< 0: greedy
  int64_t topK = 0;       ///< 0: off
  double topP = 1;        ///< 1: off
  double minP = 0;        ///< 0: off
  uint64_t seed = 0;

  bool greedy() const { return temperature == 0 || topK == 1; }
  /// `greedy` or `temperature 0.8, top-k 40, top-p 0.95, min-p 0.05, seed 7`
  /// (only the steps that are on).
  std::string str() const;
};

/// The uniform in [0, 1) (53 bits) of draw `draw` under `seed`; the device's
/// draw (kernels/sample.cuh fgSampleUniform) computes the same bits.
double samplerUniform(uint64_t seed, uint64_t draw);

/// One candidate of the filtered distribution.
struct TokenProb {
  int32_t token;
  double prob;
};

class TokenSampler {
public:
  /// Errors: a negative or non-finite temperature, top-k < 0, top-p outside
  /// (0, 1], min-p outside [0, 1].
  static llvm::Expected<TokenSampler> create(const SamplingOptions &opts);

  /// The token of draw `draw` (samplerUniform(seed, draw)). Errors: an empty
  /// row, a NaN logit (`logit 17 is NaN`), a +inf one, every logit -inf.
  llvm::Expected<int32_t> sample(llvm::ArrayRef<float> logits, uint64_t draw);
  /// The next draw of this sampler's own counter (0, 1, 2, ...).
  llvm::Expected<int32_t> sample(llvm::ArrayRef<float> logits) {
    return sample(logits, draws_++);
  }

  /// The distribution a draw is made from (steps 1-4), most likely first,
  /// probabilities summing to 1. Greedy gives the one argmax with 1.
  llvm::Expected<std::vector<TokenProb>> distribution(llvm::ArrayRef<float> logits) const;

  const SamplingOptions &options() const { return opts_; }

private:
  explicit TokenSampler(const SamplingOptions &o) : opts_(o) {}
  /// distribution()'s candidates in a fixed order (sorted only when a filter
  /// needed it), which the draw walks.
  llvm::Expected<std::vector<TokenProb>> candidates(llvm::ArrayRef<float> logits) const;
  SamplingOptions opts_;
  uint64_t draws_ = 0;
};

} // namespace fg
