//===- Common.cpp - flags and steps shared by several subcommands ----------===//
#include "tools/Commands.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/raw_ostream.h"

using namespace llvm;

namespace fg::cli {

void addCompileFlags(Flags &f) {
  f.option("ctx", "N", "KV cache rows the model is built for", "4096");
  f.option("prefill", "N,...", "prefill buckets (entries prefill_N)", "64");
  f.option("kv-dtype", "T", "KV cache dtype: f16, bf16 or f32", "f16");
  f.option("arch", "SM", "GPU architecture to compile kernels for", "sm_90");
  f.flag("no-fusion", "turn every fusion pass off");
  f.option("disable-fusion", "a,b", "turn these fusion patterns off");
  f.option("debug-fusion", "NAME", "log every candidate of pattern NAME and its decision");
  f.flag("all-logits", "prefill entries return every row of logits, not only the last");
  f.flag("print-ir-after-all", "print the IR after every pass (stderr)");
  f.flag("print-ir-before-all", "print the IR before every pass (stderr)");
  f.option("print-ir-after", "P", "print the IR after pass P (stderr)");
  f.option("print-ir-before", "P", "print the IR before pass P (stderr)");
  f.option("dump-dir", "DIR", "write one numbered .fg file per pass into DIR");
  f.flag("stats", "print pass statistics (stderr)");
  f.flag("timing", "print per-pass wall time (stderr)");
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

  compile.ctx = model.ctx;
  compile.kvDType = model.kvDType;
  compile.arch = f.get("arch", "sm_90");
  compile.fusion = !f.has("no-fusion");
  compile.disableFusion = f.list("disable-fusion");
  compile.debugFusion = f.list("debug-fusion");
  PassOptions &po = compile.passOptions;
  po.printIrAfterAll = f.has("print-ir-after-all");
  po.printIrBeforeAll = f.has("print-ir-before-all");
  po.printIrAfter = f.list("print-ir-after");
  po.printIrBefore = f.list("print-ir-before");
  po.dumpDir = f.get("dump-dir");
  po.stats = f.has("stats");
  po.timing = f.has("timing");
  po.sink = printToStderr;
  return true;
}

LogSink stderrLog(bool verbose) {
  return [verbose](LogLevel level, StringRef msg) {
    if (level == LogLevel::Verbose && !verbose)
      return;
    errs() << "fusegraph: " << msg.rtrim('\n') << "\n";
  };
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
  std::string disabled = join(po.disableFusion, ",");
  if (f.has("disable-fusion") && f.list("disable-fusion") != po.disableFusion)
    return refuse("--disable-fusion " + join(f.list("disable-fusion"), ","),
                  "disable-fusion " + (disabled.empty() ? std::string("none") : disabled));
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
