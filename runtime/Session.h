//===- Session.h - a conversation with a decoder plan ------------*- C++ -*-===//
//
//   auto s = fg::Session::create(plan, {});           // ExecOptions: device, mode
//   auto tokens = s->generate(promptIds, /*maxTokens=*/16);
//
// A Session drives a decoder plan (the ABI of DESIGN.md: entries `decode`
// and prefill buckets, inputs `tokens` and `positions`, result `logits`) on an
// Executor it owns: it feeds prompt tokens through the prefill buckets, then
// decodes one token per step, picking each next token with a sampler (greedy
// by default; SessionOptions::sampling for temperature, top-k, top-p, min-p and
// a seed: runtime/Sampler.h) and handing it to a per-token callback
// (streaming); a token of the stop set (the model's end-of-sequence ids) ends
// the generation. It keeps the
// conversation (every token fed, the next position), so feed() and generate()
// may be called again to continue it; reset() starts a new one.
//
// How tokens are fed (feed): while at least two tokens are left, a prefill
// bucket runs when one fits —
//   1. the smallest bucket N >= the n tokens left, padded with N - n rows
//      when the padding's positions stay under ctx;
//   2. else the largest bucket N <= the tokens left (no padding);
// and otherwise (one token left, or no bucket fits) `decode` takes one token.
// Padding goes FIRST in a chunk, at the positions after its last token (the
// pad rows repeat the last token): positions need not increase inside a
// chunk, since attention is causal by position, and KV rows past the last
// token are never read before a later step overwrites them. So row N-1 is
// always the last token's: prefill entries that return only the last row of
// logits (the default) and every-row entries (`--all-logits`) both work.
//
// Errors are llvm::Error; a Session never prints. Verbose progress goes to
// ExecOptions::log. Not thread-safe (one per Executor).
//
//===----------------------------------------------------------------------===//
#pragma once

#include "ir/Graph.h"
#include "runtime/Executor.h"
#include "runtime/Plan.h"
#include "runtime/Sampler.h"

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace fg {

/// A prefill entry: its name and the tokens it takes.
struct PrefillBucket {
  std::string entry; ///< `prefill_64`
  int64_t tokens = 0;
};

/// The prefill entries of a decoder graph, smallest first. The one place that
/// decides which entry is a prefill bucket of which size: every function whose
/// entry role is prefill, N from the role (`attributes {role = prefill, n = N}`),
/// whatever its name. Entries without a role (old .fg files) are no buckets.
std::vector<PrefillBucket> prefillBuckets(const Graph &g);

/// One run of a prompt: `entry` takes `size` rows, of which the last `tokens`
/// are prompt tokens (the first size - tokens rows are padding).
struct PromptChunk {
  std::string entry; ///< `prefill_512` or `decode`
  int64_t size = 1, tokens = 1;
};

/// How `count` prompt tokens starting at position `from` are fed through
/// `buckets` (smallest first) with `ctx` positions: while two or more tokens
/// are left, the smallest bucket that holds them, padded, when the padding's
/// positions stay under ctx, else the largest bucket they fill (a long prompt
/// runs as a sequence of full chunks, then a padded or smaller one); one token
/// left, or no bucket that fits, goes through `decode`.
std::vector<PromptChunk> planPromptChunks(llvm::ArrayRef<PrefillBucket> buckets, int64_t from,
                                          int64_t count, int64_t ctx);

/// `prefill_512 x3, prefill_64 (12 padding rows), decode` (for --verbose).
std::string describeChunks(llvm::ArrayRef<PromptChunk> chunks);

/// The index of the largest logit (the first one on ties): greedy decoding.
int32_t greedyToken(llvm::ArrayRef<float> logits);

/// Picks the next token from the logits row of the last token fed.
using Sampler = std::function<llvm::Expected<int32_t>(llvm::ArrayRef<float> logits)>;

/// One run of the executor inside a Session (a prefill chunk or a decode
/// step), for observers: `--dump-logits` keeps the rows, `--verify` runs a
/// second executor with the same inputs.
struct SessionRun {
  llvm::StringRef entry;             ///< `decode`, `prefill_64`
  llvm::ArrayRef<int32_t> tokens;    ///< the entry's `tokens` input
  llvm::ArrayRef<int32_t> positions; ///< the entry's `positions` input
  /// The tokens fed: the last `newTokens` rows of the chunk (the rows before
  /// them, if any, are padding).
  int64_t newTokens = 0;
  /// The `logits` result: one row per token, or only the last token's row.
  llvm::ArrayRef<float> logits;
  int64_t logitRows = 0;
};

struct SessionOptions {
  /// How the next token is picked when `sample` is null: greedy by default
  /// (runtime/Sampler.h). A seeded draw is counted by the position the token
  /// takes and an epoch (draw (epoch << 32) | position) that moves on at
  /// each generate() or reset() after the current epoch generated or drew:
  /// a new Session with the same seed and calls gives the same tokens (a
  /// reset before the first generate changes nothing), and a reset() does
  /// not repeat earlier draws.
  /// Without observers (`onRun`) the CUDA backend draws on the device, at
  /// the end of the step (Executor::setTokenPick), and copies no row.
  SamplingOptions sampling;
  Sampler sample; ///< a custom sampler; null: `sampling`
  /// generate() on a device that picks the token (the CUDA backend: greedy,
  /// or a draw whose sorted candidates always fit the device's
  /// kDeviceSampleCandidates — top-k from 1 to that, or neither top-k nor
  /// top-p) enqueues
  /// step k + 1, its token fed on the device, before it reads step k's token
  /// (Executor::enqueue). Off: every step waits for its token.
  bool pipeline = true;
  /// Stop tokens (the model's end-of-sequence ids): generate() ends after
  /// generating one of them (it is returned and handed to onToken, but not
  /// fed). Each must be in [0, vocab).
  std::vector<int32_t> stopTokens;
  /// Called with each generated token as soon as it is picked (streaming);
  /// returning false stops generation after that token.
  std::function<bool(int32_t token)> onToken;
  /// Called after every executor run with what it ran; an error stops the
  /// session and is returned by feed/generate.
  std::function<llvm::Error(const SessionRun &run, Executor &exec)> onRun;
};

/// What the last generate() did (feed() alone adds to the prompt figures).
struct SessionStats {
  int64_t promptTokens = 0, promptRuns = 0;
  double promptMs = 0;     ///< wall time feeding the prompt
  int64_t decodeSteps = 0; ///< decode runs after the prompt
  double decodeMs = 0;
  /// The decode runs' device time (Executor::lastGpuMs: CUDA events around
  /// each step; 0 on the CPU) and host launch time, summed: decodeMs less
  /// these is what the session and its caller spend around the steps.
  double decodeGpuMs = 0, decodeHostLaunchMs = 0;
  bool stopped = false; ///< generation ended at a stop token
};

class Session {
public:
  /// A session over a new Executor for `plan`. Errors: what Executor::create
  /// refuses, a plan without a `decode` entry returning f32 `logits`
  /// [1, vocab], a prefill entry whose logits are neither [N, vocab] nor
  /// [1, vocab], sampling options out of range, a stop token outside the
  /// vocabulary.
  static llvm::Expected<Session> create(const Plan &plan, const ExecOptions &exec,
                                        SessionOptions opts = {});
  /// A session over `exec`; its state is reset (position 0).
  static llvm::Expected<Session> create(Executor exec, SessionOptions opts = {});

  /// Feeds `tokens` at the next positions (prefill buckets, then decode, as
  /// the header says). Errors: no tokens, past ctx (checked before anything
  /// runs), and what the executor refuses (a token id outside the vocabulary).
  llvm::Error feed(llvm::ArrayRef<int32_t> tokens);

  /// Feeds `prompt`, then generates up to `maxTokens` tokens: each is sampled
  /// from the logits of the last token fed, handed to onToken, and — but the
  /// last — fed through `decode`. With `forced` (teacher forcing) forced[i] is
  /// fed after the i-th generated token instead of it; it needs maxTokens - 1
  /// tokens. Returns the generated tokens. Positions past ctx are refused
  /// before anything runs.
  llvm::Expected<std::vector<int32_t>> generate(llvm::ArrayRef<int32_t> prompt, int64_t maxTokens,
                                                llvm::ArrayRef<int32_t> forced = {});

  /// The logits row of the last token fed (empty before any, and if the
  /// device's row cannot be read); valid until the next feed. A Session that
  /// samples greedily on a device that picks the token itself copies the row
  /// only when asked for it here.
  llvm::ArrayRef<float> lastLogits();
  /// Samples the next token from lastLogits() (the custom sampler, else
  /// `sampling`, whose draw is the position's: asked twice at one position,
  /// it gives the same token).
  llvm::Expected<int32_t> sampleNext();
  /// The next position: the number of tokens fed since the last reset.
  int64_t position() const { return static_cast<int64_t>(history_.size()); }
  /// Every token fed since the last reset, in position order.
  llvm::ArrayRef<int32_t> history() const { return history_; }
  /// Starts a new conversation: clears the KV cache and the history.
  void reset();
  /// Replaces how the next tokens are picked (SessionOptions::sampling and
  /// ::sample) from the next generate() on; the draw counters go on. Errors:
  /// what TokenSampler::create refuses (the Session keeps its settings).
  llvm::Error setSampling(const SamplingOptions &sampling, Sampler sample = nullptr);

  int64_t vocab() const { return vocab_; }
  int64_t ctx() const { return exec_.ctx(); }
  const std::vector<PrefillBucket> &buckets() const { return buckets_; }
  const SessionStats &stats() const { return stats_; }
  Executor &executor() { return exec_; }

private:
  Session(Executor exec, SessionOptions opts, TokenSampler sampler)
      : exec_(std::move(exec)), opts_(std::move(opts)), sampler_(std::move(sampler)),
        devicePicks_(!opts_.onRun && !opts_.sample && opts_.sampling.greedy()) {}
  bool isStop(int32_t token) const;
  /// Runs `entry` on `tokens` at `positions`; the last `newTokens` are fed
  /// (the rows before them are padding).
  llvm::Error runChunk(llvm::StringRef entry, llvm::ArrayRef<int32_t> tokens,
                       llvm::ArrayRef<int32_t> positions, int64_t newTokens);

  Executor exec_;
  SessionOptions opts_;
  TokenSampler sampler_;
  std::vector<PrefillBucket> buckets_;
  int64_t vocab_ = 0;
  std::vector<int32_t> history_;
  std::vector<float> lastLogits_; ///< a copy: the executor's rows go at its next run
  /// The last run's token, picked on the device (Executor::greedyToken),
  /// when devicePicks_: then its logits row is not copied until lastLogits()
  /// asks for it.
  std::optional<int32_t> deviceToken_;
  /// The device picks the token (greedy, or the draw set by
  /// Executor::setTokenPick at the start of generate()) and no observer or
  /// custom sampler needs the row.
  bool devicePicks_ = false;
  /// The draws' epoch (SessionOptions::sampling): it moves on at a
  /// generate() or reset() once the current one has generated or drawn.
  uint64_t epoch_ = 0;
  bool epochUsed_ = false;
  bool logitsPending_ = false; ///< lastLogits_ not yet copied from the last run
  /// A pipelined generate ran a step past the last fed token: lastLogits()
  /// runs that token again for its row.
  bool rerunForLogits_ = false;
  /// generate() on a pipelining device: steps enqueued ahead, tokens fed on
  /// the device (Executor::enqueue); out[0] is the prompt's greedy token.
  llvm::Error generatePipelined(int64_t maxTokens, std::vector<int32_t> &out);
  /// Copies the last run's last logits row into lastLogits_.
  llvm::Error fetchLogits();
  SessionStats stats_;
};

} // namespace fg
