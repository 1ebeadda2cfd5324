//===- Run.cpp - `fusegraph run`: feed a prompt, decode greedily -----------===//
#include "tools/Commands.h"
#include "tools/Progress.h"

#include "frontends/ModelChat.h"
#include "text/Tokenizer.h"

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
  opts.progress = stderrProgress();
  return true;
}

int runRun(ArrayRef<const char *> args) {
  Flags f("run",
          "run MODEL|X.plan --prompt TEXT|--prompt-ids 1,2,3 [--steps N] [--device cpu|cuda|auto]",
          "Feeds the prompt (through prefill entries where they fit, else decode), then decodes\n"
          "(greedily unless --temperature or a filter is given) and prints the token ids (or, with\n"
          "--prompt, streams the text) and the time per step, stopping at the model's\n"
          "end-of-sequence tokens. MODEL is compiled first.");
  f.option("prompt-ids", "1,2,3", "prompt token ids");
  f.option("prompt", "TEXT",
           "prompt text, encoded with the model's tokenizer (GGUF metadata or the folder's "
           "tokenizer.json); the generated text streams to stdout, stopping at end of sequence");
  f.option("tokenizer", "PATH", "the tokenizer for --prompt: a .gguf, tokenizer.json or HF folder");
  f.flag("parse-special", "with --prompt: special tokens written in the text (<|im_start|>) "
                          "become their ids");
  f.option("steps", "N", "tokens to generate", "16");
  f.option("device", "D", "cuda, cpu (reference interpreter) or auto: cuda when a GPU is present",
           "auto");
  f.option("mode", "M", "graph (CUDA graph replay) or eager", "graph");
  f.flag("verify", "run the CPU reference beside the GPU and compare (CUDA only)");
  f.flag("debug-sync", "synchronise after every launch (CUDA only)");
  f.flag("verbose", "print what happens");
  f.flag("no-pipeline", "decode waits for each step's token before the next step (default, "
                        "greedy, or drawn on the device with top-k from 1 to 2048 or neither top-k "
                        "nor top-p: the next step is enqueued first, its token fed on the "
                        "device)");
  f.option("trace", "FILE",
           "after the run, trace one decode step (CUDA graph, CUPTI) into FILE as a "
           "Chrome/Perfetto trace (--device cuda)");
  f.option("dump-logits", "FILE", "write every logits row as f32 (.npy, else raw rows)");
  f.option("teacher-forced", "1,2,3",
           "feed these tokens at the decode steps instead of the greedy ones (--steps defaults "
           "to their count + 1)");
  addCompileFlags(f);
  addSamplingFlags(f);
  int code;
  if (!f.parse(args, code))
    return code;
  if (f.positional().size() != 1)
    return f.usageError("'run' takes one MODEL or X.plan (see fusegraph run --help)");
  std::vector<int32_t> ids, teacher;
  int64_t steps;
  ModelSettings ms;
  CompileOptions co;
  ExecOptions eo;
  GenerateExtras extras;
  if (!getTokenIds(f, "prompt-ids", ids, code) || !getTokenIds(f, "teacher-forced", teacher, code))
    return code;
  int64_t defaultSteps = teacher.empty() ? 16 : static_cast<int64_t>(teacher.size()) + 1;
  if (!f.getInt("steps", defaultSteps, steps, code) || !readCompileFlags(f, ms, co, code) ||
      !readSamplingFlags(f, extras.sampling, code) ||
      !parseExecFlags(f, eo, code, "auto", &extras.deviceNote))
    return code;
  if (f.has("prompt") && f.has("prompt-ids"))
    return f.usageError("give --prompt or --prompt-ids, not both");
  if (ids.empty() && !f.has("prompt"))
    return f.usageError("'run' needs --prompt TEXT or --prompt-ids 1,2,3");
  if (f.has("chat") && !f.has("prompt"))
    return f.usageError("--chat wraps --prompt TEXT in the model's chat template; it needs "
                        "--prompt (token ids are not wrapped)");
  if (f.has("verify") && eo.device == ExecOptions::Device::Cpu)
    return f.usageError("--verify compares a GPU run with the CPU reference; use --device cuda");
  // Output paths are checked before anything is compiled or run.
  if (f.has("dump-logits"))
    if (Error e = checkOutputPath(f.get("dump-logits"), "--dump-logits"))
      return reportError(std::move(e));
  if (f.has("trace") && eo.device != ExecOptions::Device::Cuda)
    return f.usageError("--trace records a CUDA graph replay; use --device cuda");
  co.log = ms.log = stderrLog(f.has("verbose"));
  // CUDA code is generated only for a run that needs it (or --verify).
  co.cuda = eo.device == ExecOptions::Device::Cuda;
  // --dump-logits keeps a row per prompt token: prefill entries return every row.
  if (f.has("dump-logits"))
    ms.allLogits = true;

  // --prompt: the tokenizer of the model (of the plan's source model), loaded
  // before compiling when the model is given.
  StringRef model = f.positional()[0];
  std::optional<text::Tokenizer> tok;
  auto loadTokenizer = [&](StringRef source) -> Error {
    Expected<text::Tokenizer> t = text::Tokenizer::forModel(f.get("tokenizer", source.str()));
    if (!t)
      return t.takeError();
    tok.emplace(std::move(*t));
    return Error::success();
  };
  if (f.has("prompt") && !isPlanFile(model))
    if (Error e = loadTokenizer(model))
      return reportError(std::move(e));
  Expected<Plan> plan = planFor(model, ms, co);
  if (!plan)
    return reportError(plan.takeError());
  if (!checkPlanCompileFlags(f, *plan, code) || !checkTokenIds(f, *plan, ids, teacher, code))
    return code;
  // Stop at the model's end-of-sequence ids, unless teacher-forced or --ignore-eos.
  if (teacher.empty() && !f.has("ignore-eos"))
    if (Error e = readStopTokens(f.positional()[0], *plan, extras.stopTokens))
      return reportError(std::move(e));
  if (f.has("prompt") && !tok)
    if (Error e = loadTokenizer(plan->options().source))
      return reportError(std::move(e));
  std::vector<int32_t> prompt(ids.begin(), ids.end());
  if (tok) {
    text::EncodeOptions eopts;
    eopts.parseSpecial = f.has("parse-special");
    std::string text = f.get("prompt");
    if (f.has("chat")) {
      // The template's markers (<|im_start|>, <start_of_turn>) are special
      // tokens: the rendered text is parsed for them.
      StringRef source = isPlanFile(model) ? StringRef(plan->options().source) : model;
      Expected<ModelChatInfo> info = readModelChatInfo(source);
      if (!info)
        return reportError(info.takeError());
      Expected<std::vector<int32_t>> empty = tok->encode("", {});
      bool addsBos = empty && !empty->empty() && empty->front() == tok->bos();
      if (!empty)
        consumeError(empty.takeError());
      Expected<std::string> rendered = renderUserPrompt(*info, text, addsBos);
      if (!rendered)
        return reportError(rendered.takeError());
      text = std::move(*rendered);
      eopts.parseSpecial = true;
    }
    Expected<std::vector<int32_t>> encoded = tok->encode(text, eopts);
    if (!encoded)
      return reportError(encoded.takeError());
    prompt = std::move(*encoded);
    if (prompt.empty())
      return reportError(makeError("--prompt encodes to no tokens (the text is empty and the "
                                   "tokenizer adds no BOS)"));
    if (f.has("verbose"))
      errs() << "fusegraph: tokenizer: " << tok->describe() << "\n";
  }
  extras.tokenizer = tok ? &*tok : nullptr;
  extras.teacherForced.assign(teacher.begin(), teacher.end());
  extras.dumpLogits = f.get("dump-logits");
  extras.pipeline = !f.has("no-pipeline");
  int rc = generate(*plan, eo, prompt, steps, f.has("verbose"), f.has("verify"), extras);
  if (rc == kOk && f.has("trace"))
    if (Error e = writeStepTrace(*plan, f.get("trace"), 0, stderrLog(true)))
      return reportError(std::move(e));
  return rc;
}

} // namespace fg::cli
