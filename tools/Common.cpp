//===- Common.cpp - flags and steps shared by several subcommands ----------===//
#include "tools/Commands.h"

#include "frontends/ModelChat.h"
#include "passes/fusion/FusionReport.h"
#include "tools/Progress.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/raw_ostream.h"

#include <random>

using namespace llvm;

namespace fg::cli {

void addCompileFlags(Flags &f) {
  f.option("ctx", "N", "KV cache rows the model is built for", "4096");
  f.option("prefill", "N,...", "prefill buckets (entries prefill_N)", "64");
  f.option("kv-dtype", "T", "KV cache dtype: f16, bf16 or f32", "f16");
  f.option("arch", "SM", "GPU architecture to compile kernels for", "sm_90");
  f.flag("no-fusion", "turn every fusion pass off");
  f.option("disable-fusion", "a,b", "turn these fusion patterns off");
  f.option("enable-fusion", "a,b", "turn these off-by-default fusion patterns on (" + llvm::join(optInFusionPatterns(), ", ") + ")");
  f.option("debug-fusion", "NAME", "log every candidate of pattern NAME and its decision");
  f.flag("all-logits", "prefill entries return every row of logits, not only the last");
  f.flag("gemm-x-once", "convert x of library GEMMs once per value, as an op (pass gemm-inputs; "
                        "the default)");
  f.flag("gemm-x-inside", "convert x inside each library GEMM launch instead (no gemm-inputs "
                          "pass: the form before it)");
  f.flag("print-ir-after-all", "print the IR after every pass (stderr)");
  f.flag("print-ir-before-all", "print the IR before every pass (stderr)");
  f.option("print-ir-after", "P", "print the IR after pass P (stderr)");
  f.option("print-ir-before", "P", "print the IR before pass P (stderr)");
  f.option("dump-dir", "DIR", "write one numbered .fg file per pass into DIR");
  f.flag("stats", "print pass statistics (stderr)");
  f.flag("timing", "print per-pass wall time (stderr)");
}

bool checkFusionNames(const Flags &f, int &exitCode) {
  std::vector<std::string> known = fusionPatternNames();
  for (const char *flag : {"disable-fusion", "enable-fusion", "debug-fusion"})
    for (const std::string &name : f.list(flag)) {
      if (is_contained(known, name))
        continue;
      std::string hint = didYouMean(name, known);
      exitCode = f.usageError("--" + Twine(flag) + ": unknown fusion pattern '" + name + "'" +
                              (hint.empty() ? " (patterns: " + join(known, ", ") + ")" : hint));
      return false;
    }
  return true;
}

static void printToStderr(LogLevel, StringRef text) {
  errs() << text;
  if (!text.endswith("\n"))
    errs() << "\n";
}

bool readCompileFlags(const Flags &f, ModelSettings &model, CompileOptions &compile,
                      int &exitCode) {
  if (!f.getInt("ctx", 4096, model.ctx, exitCode))
    return false;
  if (f.has("prefill") && !f.getInts("prefill", model.prefill, exitCode))
    return false;
  model.prefillGiven = f.has("prefill");
  std::string kv = f.get("kv-dtype", "f16");
  std::optional<DType> kvType = parseDType(kv);
  if (!kvType || (*kvType != DType::F16 && *kvType != DType::BF16 && *kvType != DType::F32)) {
    exitCode = f.usageError("unknown --kv-dtype '" + kv + "' (f16, bf16 or f32)");
    return false;
  }
  model.kvDType = *kvType;
  model.allLogits = f.has("all-logits");
  if (!checkFusionNames(f, exitCode))
    return false;

  compile.ctx = model.ctx;
  compile.kvDType = model.kvDType;
  compile.arch = f.get("arch", "sm_90");
  compile.fusion = !f.has("no-fusion");
  compile.disableFusion = f.list("disable-fusion");
  compile.enableFusion = f.list("enable-fusion");
  compile.debugFusion = f.list("debug-fusion");
  compile.gemmInputConverts = !f.has("gemm-x-inside");
  PassOptions &po = compile.passOptions;
  po.printIrAfterAll = f.has("print-ir-after-all");
  po.printIrBeforeAll = f.has("print-ir-before-all");
  po.printIrAfter = f.list("print-ir-after");
  po.printIrBefore = f.list("print-ir-before");
  po.dumpDir = f.get("dump-dir");
  po.stats = f.has("stats");
  po.timing = f.has("timing");
  po.sink = printToStderr;
  compile.progress = stderrProgress();
  return true;
}

LogSink stderrLog(bool verbose) {
  return [verbose](LogLevel level, StringRef msg) {
    if (level == LogLevel::Verbose && !verbose)
      return;
    clearProgressLine();
    errs() << "fusegraph: " << msg.rtrim('\n') << "\n";
  };
}

void addSamplingFlags(Flags &f) {
  f.option("temperature", "T", "sampling temperature; 0 is greedy (1 when a filter is given)", "0");
  f.option("top-k", "K", "sample from the K most likely tokens (0: off)", "0");
  f.option("top-p", "P", "sample from the most likely tokens whose mass reaches P (1: off)", "1");
  f.option("min-p", "P", "drop tokens less likely than P x the most likely (0: off)", "0");
  f.option("seed", "N", "seed of the sampler (default: random, printed)");
  f.flag("ignore-eos", "do not stop at the model's end-of-sequence tokens");
  f.flag("chat", "wrap --prompt in the model's chat template (needs --prompt)");
}

/// Token ids from `--NAME` (its last value): each item an integer in
/// [0, 2^31); an empty item is an error, not skipped.
bool getTokenIds(const Flags &f, StringRef name, std::vector<int32_t> &out, int &code) {
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
bool readSamplingFlags(const Flags &f, SamplingOptions &s, int &code) {
  auto getDouble = [&](StringRef name, double def, double &out) {
    out = def;
    if (!f.has(name))
      return true;
    std::string v = f.get(name);
    if (StringRef(v).getAsDouble(out)) {
      code = f.usageError("flag --" + name + " expects a number, got '" + v + "'");
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

bool checkTokenIds(const Flags &f, const Plan &plan, ArrayRef<int32_t> prompt,
                   ArrayRef<int32_t> teacher, int &exitCode) {
  const Function *decode = plan.graph().lookup("decode");
  if (!decode)
    return true;
  InputBinding b = decode->binding("tokens");
  if (b.kind != BindKind::Tokens || !b.hasRange())
    return true;
  for (auto [flag, ids] : {std::pair<StringRef, ArrayRef<int32_t>>{"--prompt-ids", prompt},
                           {"--teacher-forced", teacher}})
    for (int32_t t : ids)
      if (t < b.lo || t >= b.hi) {
        exitCode = f.usageError(flag + ": token id " + Twine(t) +
                                " is outside the model's vocabulary of " + Twine(b.hi) +
                                " tokens [" + Twine(b.lo) + ", " + Twine(b.hi) + ")");
        return false;
      }
  return true;
}

Error readStopTokens(StringRef modelOrPlan, const Plan &plan, std::vector<int32_t> &out) {
  std::string source = isPlanFile(modelOrPlan) ? plan.options().source : modelOrPlan.str();
  Expected<ModelChatInfo> chat = readModelChatInfo(source);
  if (!chat)
    return chat.takeError();
  // A stop id the plan's vocabulary cannot produce is dropped (the Session
  // refuses it), with a warning.
  InputBinding b;
  if (const Function *decode = plan.graph().lookup("decode"))
    b = decode->binding("tokens");
  out.clear();
  for (int32_t id : chat->eosIds) {
    if (b.kind == BindKind::Tokens && b.hasRange() && (id < b.lo || id >= b.hi)) {
      errs() << "fusegraph: warning: end-of-sequence id " << id << " of " << source
             << " is outside the vocabulary [" << b.lo << ", " << b.hi << "); not a stop token\n";
      continue;
    }
    out.push_back(id);
  }
  return Error::success();
}

Error checkOutputPath(StringRef path, StringRef flag) {
  if (path.empty())
    return makeError(flag + " needs a file name");
  if (path == "-")
    return Error::success();
  if (sys::fs::is_directory(path))
    return makeError(flag + " " + path + ": is a folder, not a file");
  SmallString<256> dir(path);
  sys::path::remove_filename(dir);
  if (dir.empty())
    dir = ".";
  if (!sys::fs::is_directory(dir))
    return makeError(flag + " " + path + ": the folder '" + dir + "' does not exist");
  if (sys::fs::access(dir, sys::fs::AccessMode::Write))
    return makeError(flag + " " + path + ": the folder '" + dir + "' is not writable");
  if (sys::fs::exists(path) && sys::fs::access(path, sys::fs::AccessMode::Write))
    return makeError(flag + " " + path + ": the file is not writable");
  return Error::success();
}

bool checkPlanCompileFlags(const Flags &f, const Plan &plan, int &exitCode) {
  if (f.positional().empty() || !isPlanFile(f.positional()[0]))
    return true;
  const PlanOptions &po = plan.options();
  std::string path = f.positional().empty() ? "the plan" : f.positional()[0];
  // `given` is the flag as written, `compiled` what the plan has.
  auto refuse = [&](const Twine &given, const Twine &compiled) {
    exitCode = f.usageError(given + " changes how a model is compiled, but " + path +
                            " is already compiled with " + compiled +
                            "; compile the model again with it (fusegraph compile) or drop it");
    return false;
  };
  auto ints = [](ArrayRef<int64_t> v) {
    return v.empty() ? std::string("none")
                     : join(map_range(v, [](int64_t x) { return std::to_string(x); }), ",");
  };
  int64_t ctx;
  if (f.has("ctx") && f.getInt("ctx", po.ctx, ctx, exitCode) && ctx != po.ctx)
    return refuse("--ctx " + Twine(ctx), "ctx " + Twine(po.ctx));
  std::vector<int64_t> prefill;
  if (f.has("prefill") && f.getInts("prefill", prefill, exitCode) && prefill != po.prefill)
    return refuse("--prefill " + ints(prefill), "prefill " + ints(po.prefill));
  std::string kv(dtypeName(po.kvDType));
  if (f.has("kv-dtype") && f.get("kv-dtype") != kv)
    return refuse("--kv-dtype " + f.get("kv-dtype"), "kv-dtype " + kv);
  if (f.has("arch") && f.get("arch") != po.arch)
    return refuse("--arch " + f.get("arch"), "arch " + po.arch);
  if (f.has("no-fusion") && po.fusion)
    return refuse("--no-fusion", "fusion on");
  bool xOnce =
      any_of(plan.passes(), [](const PlanPassRecord &r) { return r.name == "gemm-inputs"; });
  if (f.has("gemm-x-once") && !xOnce)
    return refuse("--gemm-x-once", "the conversions inside the GEMMs");
  if (f.has("gemm-x-inside") && xOnce)
    return refuse("--gemm-x-inside", "the GEMM inputs converted once (gemm-inputs)");
  for (auto [flag, planned] : {std::pair<const char *, const std::vector<std::string> *>{
                                  "disable-fusion", &po.disableFusion},
                              {"enable-fusion", &po.enableFusion}}) {
    std::string has = join(*planned, ",");
    if (f.has(flag) && f.list(flag) != *planned)
      return refuse("--" + Twine(flag) + " " + join(f.list(flag), ","),
                    Twine(flag) + " " + (has.empty() ? std::string("none") : has));
  }
  if (exitCode != kOk)
    return false;
  // Flags that only observe a compilation: nothing is compiled.
  for (StringRef flag : {"debug-fusion", "print-ir-after-all", "print-ir-before-all",
                         "print-ir-after", "print-ir-before", "dump-dir", "stats", "timing"})
    if (f.has(flag))
      errs() << "fusegraph: warning: --" << flag << " has no effect: " << path
             << " is already compiled\n";
  return true;
}

Expected<Plan> planFor(StringRef modelOrPlan, const ModelSettings &model,
                       const CompileOptions &compile) {
  if (isPlanFile(modelOrPlan))
    return Plan::load(modelOrPlan);
  // A prefill bucket larger than ctx: say which flag to change (the default
  // bucket is not something the user wrote).
  if (!modelOrPlan.endswith(".fg"))
    for (int64_t n : model.prefill)
      if (n > model.ctx)
        return makeError(model.prefillGiven
                             ? "--prefill " + std::to_string(n) + " is larger than --ctx " +
                                   std::to_string(model.ctx) +
                                   ": give prefill sizes <= ctx or a larger --ctx"
                             : "--ctx " + std::to_string(model.ctx) +
                                   " is smaller than the default prefill bucket (" +
                                   std::to_string(n) + " tokens): give --prefill N with N <= " +
                                   std::to_string(model.ctx) + ", or a larger --ctx");
  CompileOptions co = compile;
  Expected<Graph> g = loadModelGraph(modelOrPlan, model, &co.weights);
  if (!g)
    return g.takeError();
  co.source = modelOrPlan.str();
  // A .fg file brings its own ctx: take it from the graph.
  if (modelOrPlan.endswith(".fg"))
    co.ctx = 0;
  return fg::compile(*g, co);
}

} // namespace fg::cli
