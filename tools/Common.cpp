//===- Common.cpp - flags and steps shared by several subcommands ----------===//
#include "tools/Commands.h"

#include "passes/fusion/FusionReport.h"
#include "tools/Progress.h"

#include "llvm/ADT/StringExtras.h"
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

bool checkFusionNames(const Flags &f, int &exitCode) {
  std::vector<std::string> known = fusionPatternNames();
  for (const char *flag : {"disable-fusion", "debug-fusion"})
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

Expected<Plan> planFor(StringRef modelOrPlan, const ModelSettings &model,
                       const CompileOptions &compile) {
  if (isPlanFile(modelOrPlan))
    return Plan::load(modelOrPlan);
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
