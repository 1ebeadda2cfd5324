//===- Run.cpp - `fusegraph run`: feed a prompt, decode -------------------===//
#include "tools/Commands.h"

#include "frontends/ModelChat.h"

#include "llvm/ADT/StringExtras.h"

#include <random>

using namespace llvm;

namespace fg::cli {

bool parseExecFlags(const Flags &f, ExecOptions &opts, int &exitCode,
                    llvm::StringRef defaultDevice, std::string *cpuNote) {
  std::string device = f.get("device", defaultDevice.str());
  if (device == "auto") {
    device = cudaDeviceAvailable() ? "cuda" : "cpu";
    if (device == "cpu" && cpuNote)
      *cpuNote = "no CUDA device: running on the CPU reference interpreter (slow; give "
                 "--device cpu to skip this note)";
  }
  if (device == "cpu")
    opts.device = ExecOptions::Device::Cpu;
  else if (device == "cuda")
    opts.device = ExecOptions::Device::Cuda;
  else {
    exitCode = f.usageError("--device must be cpu, cuda or auto, got '" + device + "'");
    return false;
  }
  // Before anything is compiled for it.
  if (opts.device == ExecOptions::Device::Cuda && !cudaDeviceAvailable()) {
    exitCode = reportError(makeError("--device cuda: no CUDA device is available; use --device "
                                     "cpu (the reference interpreter) or auto"));
    return false;
  }
  std::string mode = f.get("mode", "graph");
  if (mode == "graph")
    opts.mode = ExecOptions::Mode::Graph;
  else if (mode == "eager")
    opts.mode = ExecOptions::Mode::Eager;
  else {
    exitCode = f.usageError("--mode must be graph or eager, got '" + mode + "'");
    return false;
  }
  opts.debugSync = f.has("debug-sync");
  opts.log = stderrLog(f.has("verbose"));
  return true;
}

/// Token ids from `--NAME` (its last value): each item an integer in
/// [0, 2^31); an empty item is an error, not skipped.
static bool getTokenIds(const Flags &f, StringRef name, std::vector<int32_t> &out, int &code) {
  out.clear();
  if (!f.has(name))
    return true;
  std::string text = f.get(name);
  SmallVector<StringRef, 16> items;
  StringRef(text).split(items, ',', -1, /*KeepEmpty=*/true);
  for (size_t i = 0; i < items.size(); ++i) {
    StringRef item = items[i].trim();
    if (item.empty()) {
      code = f.usageError("--" + name + " '" + text + "': item " + Twine(i + 1) +
                          " is empty (token ids separated by single commas)");
      return false;
    }
    int64_t v;
    if (item.getAsInteger(10, v)) {
      code = f.usageError("--" + name + " expects token ids separated by commas, got '" + item +
                          "'");
      return false;
    }
    if (v < 0 || v > INT32_MAX) {
      code = f.usageError("--" + name + ": " + item + " is not a token id (ids are in [0, " +
                          Twine(int64_t(INT32_MAX) + 1) + "), and below the model's vocabulary)");
      return false;
    }
    out.push_back(static_cast<int32_t>(v));
  }
  return true;
}

/// --temperature, --top-k, --top-p, --min-p, --seed. The temperature defaults
/// to 0 (greedy), or to 1 when a filter (top-k/top-p/min-p) is given; the seed
/// to a random one (printed, so a run can be repeated).
static bool readSampling(const Flags &f, SamplingOptions &s, int &code) {
  auto getDouble = [&](StringRef name, double def, double &out) {
    out = def;
    if (!f.has(name))
      return true;
    std::string v = f.get(name);
    if (StringRef(v).getAsDouble(out)) {
      code = f.usageError("flag --" + name + " of 'run' expects a number, got '" + v + "'");
      return false;
    }
    return true;
  };
  const bool filtered = f.has("top-k") || f.has("top-p") || f.has("min-p");
  int64_t seed = 0;
  if (!getDouble("temperature", filtered ? 1.0 : 0.0, s.temperature) ||
      !f.getInt("top-k", 0, s.topK, code) || !getDouble("top-p", 1.0, s.topP) ||
      !getDouble("min-p", 0.0, s.minP) || !f.getInt("seed", 0, seed, code))
    return false;
  s.seed = f.has("seed") ? static_cast<uint64_t>(seed) : std::random_device{}();
  if (Expected<TokenSampler> t = TokenSampler::create(s); !t) {
    code = f.usageError(toString(t.takeError()));
    return false;
  }
  if (f.has("seed") && s.greedy())
    errs() << "fusegraph: warning: --seed has no effect with greedy decoding (give --temperature)\n";
  return true;
}

int runRun(ArrayRef<const char *> args) {
  Flags f("run", "run MODEL|X.plan --prompt-ids 1,2,3 [--steps N] [--device cpu|cuda|auto]",
          "Feeds the prompt (through prefill entries where they fit, else decode), then decodes\n"
          "(greedily unless --temperature or a filter is given) and prints the token ids and the\n"
          "time per step; generation stops at the model's end-of-sequence tokens. MODEL is\n"
          "compiled first.");
  f.option("prompt-ids", "1,2,3", "prompt token ids");
  f.option("steps", "N", "tokens to generate (at most)", "16");
  f.option("device", "D", "cuda, cpu (reference interpreter) or auto: cuda when a GPU is present",
           "auto");
  f.option("mode", "M", "graph (CUDA graph replay) or eager", "graph");
  f.option("temperature", "T", "sampling temperature; 0 is greedy (1 when a filter is given)", "0");
  f.option("top-k", "K", "sample from the K most likely tokens (0: off)", "0");
  f.option("top-p", "P", "sample from the most likely tokens whose mass reaches P (1: off)", "1");
  f.option("min-p", "P", "drop tokens less likely than P x the most likely (0: off)", "0");
  f.option("seed", "N", "seed of the sampler (default: random, printed)");
  f.flag("ignore-eos", "do not stop at the model's end-of-sequence tokens");
  f.flag("chat", "wrap --prompt in the model's chat template (needs --prompt)");
  f.flag("verify", "run the CPU reference beside the GPU and compare (CUDA only)");
  f.flag("debug-sync", "synchronise after every launch (CUDA only)");
  f.flag("verbose", "print what happens");
  f.option("dump-logits", "FILE", "write every logits row as f32 (.npy, else raw rows)");
  f.option("teacher-forced", "1,2,3",
           "feed these tokens at the decode steps instead of the sampled ones (--steps defaults "
           "to their count + 1)");
  addCompileFlags(f);
  int code;
  if (!f.parse(args, code))
    return code;
  if (f.positional().size() != 1)
    return f.usageError("'run' takes one MODEL or X.plan (see fusegraph run --help)");
  std::vector<int32_t> prompt, teacher;
  int64_t steps;
  ModelSettings ms;
  CompileOptions co;
  ExecOptions eo;
  GenerateExtras extras;
  if (!getTokenIds(f, "prompt-ids", prompt, code) ||
      !getTokenIds(f, "teacher-forced", teacher, code))
    return code;
  int64_t defaultSteps = teacher.empty() ? 16 : static_cast<int64_t>(teacher.size()) + 1;
  if (!f.getInt("steps", defaultSteps, steps, code) || !readCompileFlags(f, ms, co, code) ||
      !readSampling(f, extras.sampling, code) ||
      !parseExecFlags(f, eo, code, "auto", &extras.deviceNote))
    return code;
  // --chat wraps --prompt TEXT (the tokenizer's) when it exists:
  //   text = renderUserPrompt(readModelChatInfo(source), text, tokenizer adds BOS)
  // (frontends/ModelChat.h), then encode; the stop ids are read below.
  if (f.has("chat"))
    return f.usageError("--chat wraps --prompt TEXT in the model's chat template; it needs "
                        "--prompt (token ids are not wrapped)");
  if (prompt.empty())
    return f.usageError("'run' needs --prompt-ids 1,2,3");
  if (f.has("verify") && eo.device == ExecOptions::Device::Cpu)
    return f.usageError("--verify compares a GPU run with the CPU reference; use --device cuda");
  // Output paths are checked before anything is compiled or run.
  if (f.has("dump-logits"))
    if (Error e = checkOutputPath(f.get("dump-logits"), "--dump-logits"))
      return reportError(std::move(e));
  co.log = ms.log = stderrLog(f.has("verbose"));
  // CUDA code is generated only for a run that needs it (or --verify).
  co.cuda = eo.device == ExecOptions::Device::Cuda;
  // --dump-logits keeps a row per prompt token: prefill entries return every row.
  if (f.has("dump-logits"))
    ms.allLogits = true;

  StringRef model = f.positional()[0];
  Expected<Plan> plan = planFor(model, ms, co);
  if (!plan)
    return reportError(plan.takeError());
  if (isPlanFile(model) && !checkPlanCompileFlags(f, *plan, code))
    return code;
  // Token ids are checked against the vocabulary here, naming the flag.
  if (const Function *decode = plan->graph().lookup("decode")) {
    InputBinding b = decode->binding("tokens");
    if (b.kind == BindKind::Tokens && b.hasRange())
      for (auto [flag, ids] : {std::pair<StringRef, ArrayRef<int32_t>>{"--prompt-ids", prompt},
                               {"--teacher-forced", teacher}})
        for (int32_t t : ids)
          if (t < b.lo || t >= b.hi)
            return f.usageError(flag + ": token id " + Twine(t) +
                                " is outside the model's vocabulary of " + Twine(b.hi) +
                                " tokens [" + Twine(b.lo) + ", " + Twine(b.hi) + ")");
  }
  // Stop at the model's end-of-sequence tokens (read from the model file the
  // plan came from), unless teacher forcing or --ignore-eos.
  if (teacher.empty() && !f.has("ignore-eos")) {
    std::string source = isPlanFile(model) ? plan->options().source : model.str();
    Expected<ModelChatInfo> chat = readModelChatInfo(source);
    if (!chat)
      return reportError(chat.takeError());
    extras.stopTokens = chat->eosIds;
  }
  extras.teacherForced = std::move(teacher);
  extras.dumpLogits = f.get("dump-logits");
  return generate(*plan, eo, prompt, steps, f.has("verbose"), f.has("verify"), extras);
}

} // namespace fg::cli
