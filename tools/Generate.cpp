//===- Generate.cpp - prompt feeding and greedy decoding (run, demo) -------===//
#include "tools/Commands.h"

#include "runtime/Compare.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/raw_ostream.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <optional>

using namespace llvm;

namespace fg::cli {

namespace {

using Clock = std::chrono::steady_clock;

double msSince(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

/// Index of the largest value in row `row` of logits [T, vocab] (first on ties).
Expected<int32_t> argmaxRow(Executor &exec, const Function &entry, int64_t row) {
  Expected<ArrayRef<float>> logits = exec.outputFloats("logits");
  if (!logits)
    return logits.takeError();
  ValueId v = entry.lookup("logits");
  if (v == kNoValue || entry.type(v).rank() < 1)
    return makeError("entry '" + entry.name() + "' has no logits result");
  int64_t vocab = entry.type(v).rowLength();
  int64_t rows = vocab ? static_cast<int64_t>(logits->size()) / vocab : 0;
  if (row >= rows)
    row = rows - 1; // --last-logits-only: the one row is the last
  ArrayRef<float> r = logits->slice(row * vocab, vocab);
  return static_cast<int32_t>(std::max_element(r.begin(), r.end()) - r.begin());
}

/// Rows of logits an entry returns (T, or 1 with --last-logits-only).
int64_t logitRows(const Function &fn) {
  ValueId v = fn.lookup("logits");
  return v == kNoValue ? 0 : fn.type(v).numRows();
}

struct Bucket {
  int64_t size;
  std::string entry;
};

} // namespace

/// --verify's threshold: 1e-3 when every weight is f32, else 1e-2 (f16/bf16
/// and quantised operands).
double verifyThreshold(const Plan &plan) {
  for (const Function &fn : plan.graph().functions())
    for (const Argument &a : fn.arguments())
      if (a.role == ArgRole::Weight && fn.type(a.value).dtype != DType::F32)
        return 1e-2;
  return 1e-3;
}

Error writeLogits(StringRef path, ArrayRef<float> values, int64_t rows, int64_t vocab) {
  assert(static_cast<int64_t>(values.size()) == rows * vocab && "rows x vocab values");
  std::error_code ec;
  raw_fd_ostream os(path, ec, sys::fs::OF_None);
  if (ec)
    return makeError(path, Loc{}, "cannot write the logits: " + ec.message());
  if (path.endswith(".npy")) {
    // NPY 1.0: magic, version, u16 header length, a dict padded to 64 bytes.
    std::string dict = "{'descr': '<f4', 'fortran_order': False, 'shape': (" +
                       std::to_string(rows) + ", " + std::to_string(vocab) + "), }";
    size_t total = 10 + dict.size() + 1;
    dict.append((64 - total % 64) % 64, ' ');
    dict += '\n';
    os << "\x93NUMPY" << '\x01' << '\x00';
    uint16_t len = static_cast<uint16_t>(dict.size());
    os << static_cast<char>(len & 0xff) << static_cast<char>(len >> 8) << dict;
  }
  os.write(reinterpret_cast<const char *>(values.data()), values.size() * sizeof(float));
  os.close();
  if (os.has_error())
    return makeError(path, Loc{}, "cannot write the logits: " + os.error().message());
  return Error::success();
}

int generate(const Plan &plan, const ExecOptions &opts, ArrayRef<int32_t> prompt, int64_t steps,
             bool verbose, bool verify, const GenerateExtras &extras) {
  if (prompt.empty())
    return reportError(makeError("the prompt is empty (give --prompt-ids 1,2,3)"));
  if (steps < 1)
    return reportError(makeError("--steps must be at least 1, got " + Twine(steps)));
  const std::vector<int32_t> &teacher = extras.teacherForced;
  if (!teacher.empty() && static_cast<int64_t>(teacher.size()) < steps - 1)
    return reportError(makeError("--teacher-forced gives " + Twine(teacher.size()) +
                                 " tokens but " + Twine(steps) + " steps feed " +
                                 Twine(steps - 1) + "; give more tokens or fewer --steps"));
  int64_t ctx = plan.options().ctx;
  int64_t P = static_cast<int64_t>(prompt.size());
  // Positions used: the prompt's 0..P-1, then one decode per generated token
  // but the last, P..P+steps-2.
  int64_t lastPos = P + steps - 2;
  if (lastPos >= ctx)
    return reportError(makeError("the prompt (" + Twine(P) + (P == 1 ? " token" : " tokens") +
                                 ") plus " + Twine(steps) + " steps needs " + Twine(lastPos + 1) +
                                 " positions but the plan's ctx is " + Twine(ctx) +
                                 "; compile with a larger --ctx or use fewer --steps"));

  Expected<Executor> exec = Executor::create(plan, opts);
  if (!exec)
    return reportError(exec.takeError());
  // --verify: the CPU reference runs every chunk beside the device, with the
  // same inputs; the largest normalised error per output is reported.
  std::optional<Executor> oracle;
  StringMap<double> worst;
  if (verify) {
    ExecOptions cpu;
    cpu.device = ExecOptions::Device::Cpu;
    Expected<Executor> o = Executor::create(plan, cpu);
    if (!o)
      return reportError(o.takeError());
    oracle.emplace(std::move(*o));
  }
  const Function *decode = exec->entry("decode");
  if (!decode)
    return reportError(makeError("the plan has no 'decode' entry; its entries are: " +
                                 join(exec->entries(), ", ")));
  if (logitRows(*decode) == 0)
    return reportError(makeError("entry 'decode' has no 'logits' result; run drives decoder plans "
                                 "(inputs tokens and positions, result logits)"));
  // --dump-logits: every row, one per prompt token and decode step.
  const bool dump = !extras.dumpLogits.empty();
  const int64_t vocab = decode->type(decode->lookup("logits")).rowLength();
  std::vector<float> dumped;
  auto keepRows = [&](int64_t n) -> Error {
    if (!dump)
      return Error::success();
    Expected<ArrayRef<float>> logits = exec->outputFloats("logits");
    if (!logits)
      return logits.takeError();
    if (static_cast<int64_t>(logits->size()) < n * vocab)
      return makeError("--dump-logits needs the logits of every prompt row, but this plan's "
                       "prefill returns only the last (compiled with --last-logits-only)");
    dumped.insert(dumped.end(), logits->begin(), logits->begin() + n * vocab);
    return Error::success();
  };
  std::vector<Bucket> buckets;
  for (const std::string &name : exec->entries()) {
    const EntryContract &c = exec->entry(name)->contract();
    if (c.role == EntryRole::Prefill)
      buckets.push_back({c.tokens, name});
  }
  llvm::sort(buckets, [](const Bucket &a, const Bucket &b) { return a.size < b.size; });

  outs() << "device: "
         << (opts.device == ExecOptions::Device::Cpu ? "cpu (reference interpreter)" : "cuda")
         << "\n";
  outs() << "prompt: "
         << join(llvm::map_range(prompt, [](int32_t t) { return std::to_string(t); }), ",") << "\n";

  // --- the prompt --------------------------------------------------------------
  auto runChunk = [&](const std::string &entry, ArrayRef<int32_t> toks,
                      ArrayRef<int32_t> pos) -> Error {
    if (Error e = exec->setInput("tokens", toks))
      return e;
    if (Error e = exec->setInput("positions", pos))
      return e;
    if (Error e = exec->run(entry))
      return e;
    if (!oracle)
      return Error::success();
    if (Error e = oracle->setInput("tokens", toks))
      return e;
    if (Error e = oracle->setInput("positions", pos))
      return e;
    if (Error e = oracle->run(entry))
      return e;
    for (ValueId r : exec->entry(entry)->results()) {
      const std::string &name = exec->entry(entry)->value(r).name;
      Expected<HostTensor> a = exec->output(name), b = oracle->output(name);
      if (!a)
        return a.takeError();
      if (!b)
        return b.takeError();
      double err = normalizedError(a->toFloats(), b->toFloats());
      worst[name] = std::max(worst.lookup(name), err);
    }
    return Error::success();
  };
  Clock::time_point t0 = Clock::now();
  int64_t done = 0, chunks = 0;
  int32_t next = 0;
  while (done < P) {
    int64_t left = P - done;
    // The smallest bucket that takes the rest in one chunk, else the largest.
    const Bucket *pick = buckets.empty() ? nullptr : &buckets.back();
    for (const Bucket &b : buckets)
      if (b.size >= left) {
        pick = &b;
        break;
      }
    bool fits = pick && done + pick->size <= ctx;
    if (fits && (pick->size > left || dump) &&
        logitRows(*exec->entry(pick->entry)) != pick->size)
      fits = false; // a padded chunk (or --dump-logits) needs rows before the end
    if (!fits) {
      // Decode one token at a time.
      if (Error e = runChunk("decode", prompt[done], static_cast<int32_t>(done)))
        return reportError(std::move(e));
      if (Error e = keepRows(1))
        return reportError(std::move(e));
      if (verbose)
        errs() << "fusegraph: prompt token " << done << " through decode\n";
      ++done;
      ++chunks;
      if (done == P) {
        Expected<int32_t> t = argmaxRow(*exec, *decode, 0);
        if (!t)
          return reportError(t.takeError());
        next = *t;
      }
      continue;
    }
    int64_t n = std::min(left, pick->size);
    std::vector<int32_t> toks(pick->size, 0), pos(pick->size);
    for (int64_t i = 0; i < pick->size; ++i) {
      // Padding continues the positions past the prompt: rows past a query's
      // position are never read, and decode overwrites them later.
      toks[i] = i < n ? prompt[done + i] : prompt[P - 1];
      pos[i] = static_cast<int32_t>(done + i);
    }
    if (Error e = runChunk(pick->entry, toks, pos))
      return reportError(std::move(e));
    if (Error e = keepRows(n))
      return reportError(std::move(e));
    if (verbose)
      errs() << "fusegraph: prompt tokens " << done << ".." << done + n - 1 << " through "
             << pick->entry << (n < pick->size ? " (padded)" : "") << "\n";
    done += n;
    ++chunks;
    if (done == P) {
      Expected<int32_t> t = argmaxRow(*exec, *exec->entry(pick->entry), n - 1);
      if (!t)
        return reportError(t.takeError());
      next = *t;
    }
  }
  double promptMs = msSince(t0);

  // --- greedy decoding -------------------------------------------------------
  std::vector<int32_t> tokens = {next};
  t0 = Clock::now();
  for (int64_t s = 1; s < steps; ++s) {
    int32_t pos = static_cast<int32_t>(P + s - 1);
    int32_t feed = teacher.empty() ? tokens.back() : teacher[s - 1];
    if (Error e = runChunk("decode", feed, pos))
      return reportError(std::move(e));
    if (Error e = keepRows(1))
      return reportError(std::move(e));
    Expected<int32_t> t = argmaxRow(*exec, *decode, 0);
    if (!t)
      return reportError(t.takeError());
    tokens.push_back(*t);
  }
  double decodeMs = msSince(t0);

  outs() << (teacher.empty() ? "tokens: " : "tokens (greedy, teacher-forced inputs): ")
         << join(llvm::map_range(tokens, [](int32_t t) { return std::to_string(t); }), " ") << "\n";
  if (dump) {
    int64_t rows = static_cast<int64_t>(dumped.size()) / vocab;
    if (Error e = writeLogits(extras.dumpLogits, dumped, rows, vocab))
      return reportError(std::move(e));
    outs() << "logits: " << rows << " rows x " << vocab << " f32 written to " << extras.dumpLogits
           << "\n";
  }
  outs() << "prefill: " << P << " tokens in " << chunks << (chunks == 1 ? " run, " : " runs, ")
         << format("%.2f", promptMs) << " ms\n";
  if (steps > 1)
    outs() << "decode: " << steps - 1 << " steps, " << format("%.2f", decodeMs / (steps - 1))
           << " ms/step (" << format("%.1f", (steps - 1) * 1000.0 / decodeMs) << " tokens/s)\n";
  if (verify) {
    double threshold = verifyThreshold(plan);
    bool ok = true;
    for (const auto &kv : worst) {
      bool pass = kv.getValue() <= threshold;
      ok &= pass;
      outs() << "verify: " << kv.getKey() << " largest normalised error "
             << format("%.3g", kv.getValue()) << (pass ? " <= " : " > ")
             << format("%.0e", threshold) << (pass ? " ok" : " FAILED") << "\n";
    }
    if (!ok)
      return 1;
  }
  return kOk;
}

} // namespace fg::cli
