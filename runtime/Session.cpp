//===- Session.cpp - prompt, prefill buckets, decode loop, sampling ---------===//
#include "runtime/Session.h"

#include "ir/Diag.h"
#include "runtime/Program.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringExtras.h"

#include <algorithm>
#include <chrono>

using namespace llvm;

namespace fg {

namespace {

using Clock = std::chrono::steady_clock;

double msSince(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

/// The type of `logits` in `fn`, or null when it has no f32 result of that name.
const TensorType *logitsType(const Function &fn) {
  ValueId v = fn.lookup("logits");
  if (v == kNoValue || !is_contained(fn.results(), v) || fn.type(v).dtype != DType::F32 ||
      fn.type(v).rank() != 2)
    return nullptr;
  return &fn.type(v);
}

std::string plural(int64_t n, StringRef what) {
  return std::to_string(n) + " " + what.str() + (n == 1 ? "" : "s");
}

} // namespace

std::vector<PrefillBucket> prefillBuckets(const Graph &g) {
  std::vector<PrefillBucket> out;
  for (const Function &fn : g.functions()) {
    const EntryContract &c = fn.contract();
    if (c.role == EntryRole::Prefill && c.tokens > 0)
      out.push_back({fn.name().str(), c.tokens});
  }
  llvm::sort(out,
             [](const PrefillBucket &a, const PrefillBucket &b) { return a.tokens < b.tokens; });
  return out;
}

std::vector<PromptChunk> planPromptChunks(ArrayRef<PrefillBucket> buckets, int64_t from,
                                          int64_t count, int64_t ctx) {
  std::vector<PromptChunk> out;
  const int64_t to = from + count;
  for (int64_t done = from; done < to;) {
    const int64_t left = to - done;
    const PrefillBucket *pick = nullptr;
    if (left >= 2) {
      // 1. The smallest bucket that holds the rest, padded, if the padding's
      //    positions stay under ctx.
      for (const PrefillBucket &b : buckets)
        if (b.tokens >= left) {
          if (done + b.tokens <= ctx)
            pick = &b;
          break;
        }
      // 2. Else the largest bucket that the rest fills.
      if (!pick)
        for (const PrefillBucket &b : llvm::reverse(buckets))
          if (b.tokens <= left) {
            pick = &b;
            break;
          }
    }
    PromptChunk c;
    c.entry = pick ? pick->entry : "decode";
    c.size = pick ? pick->tokens : 1;
    c.tokens = std::min(c.size, left);
    done += c.tokens;
    out.push_back(std::move(c));
  }
  return out;
}

std::string describeChunks(ArrayRef<PromptChunk> chunks) {
  std::string out;
  for (size_t i = 0; i < chunks.size();) {
    size_t j = i + 1; // a run of equal chunks
    while (j < chunks.size() && chunks[j].entry == chunks[i].entry &&
           chunks[j].tokens == chunks[i].tokens && chunks[j].size == chunks[i].size)
      ++j;
    if (!out.empty())
      out += ", ";
    out += chunks[i].entry;
    if (j - i > 1)
      out += " x" + std::to_string(j - i);
    if (int64_t pad = chunks[i].size - chunks[i].tokens)
      out += " (" + plural(pad, "padding row") + ")";
    i = j;
  }
  return out;
}

int32_t greedyToken(ArrayRef<float> logits) {
  return static_cast<int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
}

Expected<Session> Session::create(const Plan &plan, const ExecOptions &exec, SessionOptions opts) {
  Expected<Executor> e = Executor::create(plan, exec);
  if (!e)
    return e.takeError();
  return create(std::move(*e), std::move(opts));
}

Expected<Session> Session::create(Executor exec, SessionOptions opts) {
  const Function *decode = exec.entry("decode");
  if (!decode)
    return makeError("the plan has no 'decode' entry; its entries are: " +
                     join(exec.entries(), ", "));
  const TensorType *lt = logitsType(*decode);
  if (!lt)
    return makeError("entry 'decode' has no 'logits' result; a session drives decoder plans "
                     "(inputs tokens and positions, result logits: f32[T, vocab])");
  if (lt->shape[0] != 1 || lt->shape[1] < 1)
    return makeError("entry 'decode' returns logits " + lt->str() +
                     "; expected one row over a non-empty vocabulary");
  const int64_t vocab = lt->shape[1];
  for (int32_t t : opts.stopTokens)
    if (t < 0 || t >= vocab)
      return makeError("stop token " + std::to_string(t) + " is outside the vocabulary [0, " +
                       std::to_string(vocab) + ")");
  Expected<TokenSampler> sampler = TokenSampler::create(opts.sampling);
  if (!sampler)
    return sampler.takeError();
  exec.resetState(); // position 0: a new conversation
  Session s(std::move(exec), std::move(opts), std::move(*sampler));
  s.vocab_ = vocab;
  for (const PrefillBucket &b : prefillBuckets(s.exec_.graph())) {
    const TensorType *pt = logitsType(*s.exec_.entry(b.entry));
    if (!pt || pt->shape[1] != s.vocab_ || (pt->shape[0] != 1 && pt->shape[0] != b.tokens))
      return makeError("prefill entry '" + b.entry + "' returns " +
                       (pt ? "logits " + pt->str() : std::string("no f32 logits")) +
                       "; expected f32[" + std::to_string(b.tokens) + ", " +
                       std::to_string(s.vocab_) + "] (every row) or f32[1, " +
                       std::to_string(s.vocab_) + "] (the last row)");
    s.buckets_.push_back(b);
  }
  return s;
}

Error Session::runChunk(StringRef entry, ArrayRef<int32_t> tokens, ArrayRef<int32_t> positions,
                        int64_t newTokens) {
  if (Error e = exec_.setInput("tokens", tokens))
    return e;
  if (Error e = exec_.setInput("positions", positions))
    return e;
  deviceToken_.reset();
  logitsPending_ = false;
  rerunForLogits_ = false;
  lastLogits_.clear();
  if (Error e = exec_.run(entry))
    return e;
  // Without observers the device's pick is taken (no copy of the row; issue
  // 13: the host reads back only the token id).
  if (devicePicks_)
    deviceToken_ = exec_.greedyToken();
  if (deviceToken_) {
    logitsPending_ = true;
  } else if (Error e = fetchLogits()) {
    return e;
  }
  if (opts_.onRun) {
    Expected<ArrayRef<float>> logits = exec_.outputFloats("logits");
    if (!logits)
      return logits.takeError();
    int64_t rows = static_cast<int64_t>(logits->size()) / vocab_;
    SessionRun run{entry, tokens, positions, newTokens, *logits, rows};
    if (Error e = opts_.onRun(run, exec_))
      return e;
  }
  if (const LogSink &log = exec_.options().log) {
    int64_t first = positions[positions.size() - newTokens], last = positions.back();
    int64_t pad = static_cast<int64_t>(tokens.size()) - newTokens;
    log(LogLevel::Verbose,
        "session: " +
            (newTokens == 1
                 ? "token at position " + std::to_string(last)
                 : "tokens at positions " + std::to_string(first) + ".." + std::to_string(last)) +
            " through " + entry.str() + (pad ? " (" + plural(pad, "padding row") + ")" : ""));
  }
  return Error::success();
}

Error Session::feed(ArrayRef<int32_t> tokens) {
  if (tokens.empty())
    return makeError("nothing to feed: the token list is empty");
  const int64_t from = position(), to = from + static_cast<int64_t>(tokens.size());
  if (to > ctx())
    return makeError("feeding " + plural(static_cast<int64_t>(tokens.size()), "token") +
                     " at position " + std::to_string(from) + " needs " + std::to_string(to) +
                     " positions but the plan's ctx is " + std::to_string(ctx()));
  Clock::time_point t0 = Clock::now();
  std::vector<PromptChunk> chunks = planPromptChunks(buckets_, from, to - from, ctx());
  if (const LogSink &log = exec_.options().log) {
    std::string sizes;
    for (const PrefillBucket &b : buckets_)
      sizes += (sizes.empty() ? "" : ", ") + std::to_string(b.tokens);
    log(LogLevel::Verbose, "session: " + plural(to - from, "prompt token") + " at position " +
                               std::to_string(from) +
                               "; prefill buckets: " + (sizes.empty() ? "none" : sizes) +
                               "; chunks: " + describeChunks(chunks));
  }
  int64_t done = from;
  for (const PromptChunk &c : chunks) {
    const int64_t n = c.tokens;
    // Padding first, at the positions after the chunk's last token; then the
    // tokens, so the last row is the last token's.
    std::vector<int32_t> ids, positions;
    for (int64_t i = 0; i < c.size - n; ++i) {
      ids.push_back(tokens[done - from + n - 1]);
      positions.push_back(static_cast<int32_t>(done + n + i));
    }
    for (int64_t i = 0; i < n; ++i) {
      ids.push_back(tokens[done - from + i]);
      positions.push_back(static_cast<int32_t>(done + i));
    }
    if (Error e = runChunk(c.entry, ids, positions, n))
      return e;
    history_.insert(history_.end(), tokens.begin() + (done - from),
                    tokens.begin() + (done - from + n));
    done += n;
    ++stats_.promptRuns;
    if (const ProgressSink &progress = exec_.options().progress) {
      Progress p;
      p.task = "prefill";
      p.unit = "tokens";
      p.done = static_cast<uint64_t>(done - from);
      p.total = static_cast<uint64_t>(to - from);
      p.seconds = msSince(t0) / 1e3;
      progress(p);
    }
  }
  stats_.promptTokens += to - from;
  stats_.promptMs += msSince(t0);
  return Error::success();
}

Error Session::fetchLogits() {
  Expected<ArrayRef<float>> logits = exec_.outputFloats("logits");
  if (!logits)
    return logits.takeError();
  int64_t rows = static_cast<int64_t>(logits->size()) / vocab_;
  (void)rows;
  assert(rows >= 1 && rows * vocab_ == static_cast<int64_t>(logits->size()) &&
         "create() checked the logits' shape");
  lastLogits_.assign(logits->end() - vocab_, logits->end());
  logitsPending_ = false;
  return Error::success();
}

ArrayRef<float> Session::lastLogits() {
  if (rerunForLogits_) {
    // The last fed token again, at its position: the same KV row, bit for
    // bit (replays are deterministic), and its logits.
    rerunForLogits_ = false;
    const int32_t tok = history_.back(), pos = static_cast<int32_t>(position() - 1);
    Error e = exec_.setInput("tokens", ArrayRef<int32_t>(tok));
    if (!e)
      e = exec_.setInput("positions", ArrayRef<int32_t>(pos));
    if (!e)
      e = exec_.run("decode");
    if (e) {
      consumeError(std::move(e)); // a device error: empty, and the next run says so
      logitsPending_ = false;
      lastLogits_.clear();
      return lastLogits_;
    }
  }
  if (logitsPending_)
    consumeError(fetchLogits()); // a device error: empty, and the next run says so
  return lastLogits_;
}

Expected<int32_t> Session::sampleNext() {
  if (deviceToken_ && devicePicks_)
    return *deviceToken_;
  if (rerunForLogits_) // the last fed token's row (a pipelined step ran past it)
    (void)lastLogits();
  if (logitsPending_)
    if (Error e = fetchLogits())
      return e;
  if (lastLogits_.empty())
    return makeError("no logits to sample from: feed a token first");
  if (opts_.sample)
    return opts_.sample(lastLogits_);
  // The device's draw counter (kernels/sample.cuh): the token's position.
  epochUsed_ = true;
  return sampler_.sample(lastLogits_, (epoch_ << 32) | static_cast<uint32_t>(position()));
}

bool Session::isStop(int32_t token) const { return is_contained(opts_.stopTokens, token); }

Expected<std::vector<int32_t>> Session::generate(ArrayRef<int32_t> prompt, int64_t maxTokens,
                                                 ArrayRef<int32_t> forced) {
  if (prompt.empty())
    return makeError("the prompt is empty");
  if (maxTokens < 1)
    return makeError("asked for " + std::to_string(maxTokens) + " tokens; generate at least one");
  if (!forced.empty() && static_cast<int64_t>(forced.size()) < maxTokens - 1)
    return makeError("teacher forcing gives " +
                     plural(static_cast<int64_t>(forced.size()), "token") + " but " +
                     plural(maxTokens, "generated token") + " feed " +
                     std::to_string(maxTokens - 1) + "; give more tokens or generate fewer");
  // Positions used: the prompt's, then one decode per generated token but the last.
  const int64_t P = static_cast<int64_t>(prompt.size());
  const int64_t needed = position() + P + maxTokens - 1;
  if (needed > ctx())
    return makeError("the prompt (" + plural(P, "token") + ") plus " +
                     plural(maxTokens, "generated token") + " needs " + std::to_string(needed) +
                     " positions" +
                     (position() ? " from position " + std::to_string(position()) : "") +
                     " but the plan's ctx is " + std::to_string(ctx()) +
                     "; compile with a larger --ctx or generate fewer tokens");
  stats_ = {};
  // This call's draws (SessionOptions::sampling), on the device where it
  // draws them.
  if (epochUsed_) // a new epoch when this one has drawn or generated
    ++epoch_;
  epochUsed_ = true;
  devicePicks_ = false;
  if (!opts_.onRun && !opts_.sample) {
    devicePicks_ = opts_.sampling.greedy();
    Expected<bool> onDevice = exec_.setTokenPick(opts_.sampling, epoch_);
    if (!onDevice)
      return onDevice.takeError();
    devicePicks_ = devicePicks_ || *onDevice;
    if (*onDevice && !opts_.sampling.greedy())
      if (const LogSink &log = exec_.options().log)
        log(LogLevel::Verbose, "session: tokens drawn on the device (" + opts_.sampling.str() +
                                   ", epoch " + std::to_string(epoch_) + ")");
  }
  if (Error e = feed(prompt))
    return e;
  std::vector<int32_t> out;
  Clock::time_point t0 = Clock::now();
  // On a device that picks every token (greedy, or a draw that always fits)
  // and pipelines: step k + 1 is enqueued, its token fed on the device,
  // before the host has seen step k's token.
  const SamplingOptions &so = opts_.sampling;
  // (a top-k past the cap that cuts, or top-p without top-k, may leave a
  // row to the host: kernels/sample.cuh)
  const bool drawFits = so.greedy() || (so.topK >= 1 && so.topK <= kDeviceSampleCandidates) ||
                        (so.topK == 0 && so.topP >= 1);
  if (opts_.pipeline && forced.empty() && deviceToken_ && drawFits && exec_.pipelines()) {
    Error e = generatePipelined(maxTokens, out);
    stats_.decodeMs = msSince(t0);
    if (e)
      return e;
    return out;
  }
  for (int64_t i = 0; i < maxTokens; ++i) {
    Expected<int32_t> t = sampleNext();
    if (!t)
      return t.takeError();
    out.push_back(*t);
    if (opts_.onToken && !opts_.onToken(*t))
      break;
    if (isStop(*t)) {
      stats_.stopped = true;
      break;
    }
    if (i + 1 == maxTokens)
      break;
    int32_t next = forced.empty() ? *t : forced[i];
    int32_t pos = static_cast<int32_t>(position());
    if (Error e = runChunk("decode", next, pos, 1))
      return e;
    history_.push_back(next);
    ++stats_.decodeSteps;
    stats_.decodeGpuMs += exec_.lastGpuMs();
    stats_.decodeHostLaunchMs += exec_.lastHostLaunchMs();
  }
  stats_.decodeMs = msSince(t0);
  return out;
}

Error Session::generatePipelined(int64_t maxTokens, std::vector<int32_t> &out) {
  // Step i feeds out[i] at position p0 + i and yields out[i + 1]; out[0] is
  // the prompt's. At most two steps in flight.
  const int64_t p0 = position(), steps = maxTokens - 1;
  bool stopped = false;
  auto take = [&](int32_t t) { // streams a token; false: generation ends
    out.push_back(t);
    if (opts_.onToken && !opts_.onToken(t))
      return false;
    if (isStop(t)) {
      stats_.stopped = true;
      return false;
    }
    return true;
  };
  stopped = !take(*deviceToken_);
  int64_t launched = 0, done = 0;
  auto launch = [&](int64_t i) -> Error {
    const int32_t tok = i == 0 ? out[0] : kFedToken, pos = static_cast<int32_t>(p0 + i);
    if (Error e = exec_.setInput("tokens", ArrayRef<int32_t>(tok)))
      return e;
    if (Error e = exec_.setInput("positions", ArrayRef<int32_t>(pos)))
      return e;
    return exec_.enqueue("decode");
  };
  Error err = Error::success();
  while (!stopped && (done < launched || launched < steps)) {
    if (launched < steps && launched - done < 2) {
      if ((err = launch(launched)))
        break;
      ++launched;
      if (launched - done < 2 && launched < steps)
        continue; // the next one goes in before waiting
    }
    Expected<int32_t> t = exec_.awaitGreedyToken();
    if (!t) {
      err = t.takeError();
      ++done;
      break;
    }
    history_.push_back(out[static_cast<size_t>(done)]);
    ++done;
    ++stats_.decodeSteps;
    stats_.decodeGpuMs += exec_.lastGpuMs();
    stats_.decodeHostLaunchMs += exec_.lastHostLaunchMs();
    stopped = !take(*t);
  }
  // Steps still in flight fed tokens past the end (a stop token, or one the
  // caller refused): the history leaves them out, and the KV rows they wrote
  // lie past position(), where the next feed writes before anything reads.
  const bool past = done < launched;
  for (; done < launched; ++done)
    if (Expected<int32_t> t = exec_.awaitGreedyToken(); !t)
      consumeError(t.takeError());
  if (err)
    return err;
  deviceToken_ = out.back();
  // The executor's logits are the last step's: the last fed token's, unless
  // a step past the end ran after it (then lastLogits() runs it again).
  logitsPending_ = true;
  rerunForLogits_ = past;
  return Error::success();
}

Error Session::setSampling(const SamplingOptions &sampling, Sampler sample) {
  Expected<TokenSampler> t = TokenSampler::create(sampling);
  if (!t)
    return t.takeError();
  sampler_ = std::move(*t);
  opts_.sampling = sampling;
  opts_.sample = std::move(sample);
  // The device's pick is set again by the next generate(); until then the
  // host picks (the device may still hold the previous settings).
  devicePicks_ = false;
  deviceToken_.reset();
  return Error::success();
}

void Session::reset() {
  exec_.resetState();
  // New draws from here (SessionOptions::sampling), on the device too.
  if (epochUsed_) {
    ++epoch_;
    epochUsed_ = false;
    if (devicePicks_ && !opts_.sampling.greedy()) {
      Expected<bool> on = exec_.setTokenPick(opts_.sampling, epoch_);
      if (!on || !*on) { // a device error: the host draws (and the next run says so)
        consumeError(on.takeError());
        devicePicks_ = false;
      }
    }
  }
  history_.clear();
  lastLogits_.clear();
  deviceToken_.reset();
  logitsPending_ = false;
  rerunForLogits_ = false;
  stats_ = {};
}

} // namespace fg
