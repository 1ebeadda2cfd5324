//===- Generate.cpp - run and demo: a Session, printed (and --verify) -----===//
#include "tools/Commands.h"

#include "runtime/Compare.h"
#include "runtime/ProgramIO.h"
#include "runtime/Session.h"
#include "text/Tokenizer.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/raw_ostream.h"

#include <algorithm>
#include <optional>

using namespace llvm;

namespace fg::cli {

/// The launches of the plan's CUDA program that quantise x to int8 (the
/// DP4A GEMVs: LaunchRecord::actQuant); 0 without a program.
size_t int8Launches(const Plan &plan) {
  const PlanSection *s = plan.section("program");
  if (!s)
    return 0;
  Expected<CompiledProgram> prog = decodeProgram(s->bytes);
  if (!prog) {
    consumeError(prog.takeError()); // the device refused such a plan already
    return 0;
  }
  size_t n = 0;
  for (const CompiledEntry &e : prog->entries)
    n += quantisedXLaunches(e);
  return n;
}

/// --verify's threshold: 1e-3 when every weight is f32, else 1e-2 (f16/bf16
/// and quantised operands), and 5e-2 when the GPU's DP4A GEMVs quantise x to
/// int8 (`int8` launches, 0 on the CPU): each x then carries up to 1/254 of its
/// block's largest value, which a quantised MoE's routing and depth amplify
/// to percents of the logits (QuantWorkloads.MoeInt8ActivationsMoveTheLogits:
/// 3.4 % on the CPU alone, two layers of W-moe-12 q4_K).
double verifyThreshold(const Plan &plan, size_t int8) {
  if (int8)
    return 5e-2;
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
                                 " tokens but " + Twine(steps) + " steps feed " + Twine(steps - 1) +
                                 "; give more tokens or fewer --steps"));
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
  // --dump-logits: every row, one per prompt token and decode step.
  const bool dump = !extras.dumpLogits.empty();
  std::vector<float> dumped;
  int64_t vocab = 0;
  bool lineOpen = false;

  SessionOptions so;
  so.sampling = extras.sampling;
  so.stopTokens = extras.stopTokens;
  so.pipeline = extras.pipeline;
  // Observers only where asked for (--dump-logits, --verify): without one a
  // greedy session takes the device's token and copies no logits.
  if (dump || oracle)
    so.onRun = [&](const SessionRun &run, Executor &exec) -> Error {
      vocab = static_cast<int64_t>(run.logits.size()) / run.logitRows;
      if (dump) {
        if (run.logitRows < run.newTokens)
          return makeError("--dump-logits needs the logits of every prompt token, but entry '" +
                           run.entry +
                           "' returns only the last row; compile the plan with "
                           "--all-logits");
        dumped.insert(dumped.end(), run.logits.end() - run.newTokens * vocab, run.logits.end());
      }
      if (!oracle)
        return Error::success();
      if (Error e = oracle->setInput("tokens", run.tokens))
        return e;
      if (Error e = oracle->setInput("positions", run.positions))
        return e;
      if (Error e = oracle->run(run.entry))
        return e;
      for (ValueId r : exec.entry(run.entry)->results()) {
        const std::string &name = exec.entry(run.entry)->value(r).name;
        Expected<HostTensor> a = exec.output(name), b = oracle->output(name);
        if (!a)
          return a.takeError();
        if (!b)
          return b.takeError();
        double err = normalizedError(a->toFloats(), b->toFloats());
        worst[name] = std::max(worst.lookup(name), err);
      }
      return Error::success();
    };
  // Tokens are printed as they come (the session's streaming callback); with
  // --verbose, whose lines go to stderr between the steps, once at the end.
  auto tokensLine = [&]() -> raw_ostream & {
    return outs() << (teacher.empty() ? "tokens: " : "tokens (greedy, teacher-forced inputs): ");
  };
  // --prompt: the text streams as it decodes and stops at end of generation.
  std::optional<text::TextStream> textOut;
  if (extras.tokenizer) {
    textOut.emplace(*extras.tokenizer, [](StringRef piece) {
      outs() << piece;
      outs().flush();
    });
    so.onToken = [&](int32_t t) {
      if (!lineOpen)
        outs() << "text: ";
      lineOpen = true;
      return textOut->push(t);
    };
  } else if (!verbose)
    so.onToken = [&](int32_t t) {
      if (!lineOpen)
        tokensLine();
      outs() << (lineOpen ? " " : "") << t;
      outs().flush();
      lineOpen = true;
      return true;
    };
  Expected<Session> session = Session::create(plan, opts, std::move(so));
  if (!session)
    return reportError(session.takeError());
  if (!extras.deviceNote.empty())
    errs() << "fusegraph: note: " << extras.deviceNote << "\n";

  outs() << "device: "
         << (opts.device == ExecOptions::Device::Cpu ? "cpu (reference interpreter)" : "cuda")
         << "\n";
  outs() << "prompt: "
         << join(llvm::map_range(prompt, [](int32_t t) { return std::to_string(t); }), ",") << "\n";
  if (!extras.sampling.greedy())
    outs() << "sampling: " << extras.sampling.str() << "\n";
  Expected<std::vector<int32_t>> tokens = session->generate(prompt, steps, teacher);
  if (textOut)
    textOut->flush();
  if (lineOpen)
    outs() << "\n";
  if (textOut && textOut->stoppedAt() >= 0)
    outs() << "stopped at end of sequence (token " << textOut->stoppedAt() << ")\n";
  if (!tokens)
    return reportError(tokens.takeError());
  if (session->stats().stopped)
    outs() << "stopped at end of sequence (token " << tokens->back() << ")\n";
  if (verbose)
    tokensLine() << join(llvm::map_range(*tokens, [](int32_t t) { return std::to_string(t); }), " ")
                 << "\n";

  if (dump) {
    int64_t rows = static_cast<int64_t>(dumped.size()) / vocab;
    if (Error e = writeLogits(extras.dumpLogits, dumped, rows, vocab))
      return reportError(std::move(e));
    outs() << "logits: " << rows << " rows x " << vocab << " f32 written to " << extras.dumpLogits
           << "\n";
  }
  const SessionStats &st = session->stats();
  outs() << "prefill: " << st.promptTokens << " tokens in " << st.promptRuns
         << (st.promptRuns == 1 ? " run, " : " runs, ") << format("%.2f", st.promptMs) << " ms\n";
  if (st.decodeSteps > 0)
    outs() << "decode: " << st.decodeSteps << " steps, "
           << format("%.2f", st.decodeMs / st.decodeSteps) << " ms/step ("
           << format("%.1f", st.decodeSteps * 1000.0 / st.decodeMs) << " tokens/s"
           << (st.decodeGpuMs > 0
                   ? llvm::formatv("; device {0:F3} ms/step, launch {1:F4} ms/step",
                                   st.decodeGpuMs / st.decodeSteps,
                                   st.decodeHostLaunchMs / st.decodeSteps)
                         .str()
                   : std::string())
           << ")\n";
  if (verify) {
    const size_t int8 = opts.device == ExecOptions::Device::Cuda ? int8Launches(plan) : 0;
    double threshold = verifyThreshold(plan, int8);
    if (int8)
      outs() << "verify: " << int8 << (int8 == 1 ? " launch quantises" : " launches quantise")
             << " x to int8 (DP4A GEMVs, int8 expert GEMMs); the threshold is " << format("%.0e", threshold) << "\n";
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
