//===- Demo.cpp - `fusegraph demo`: the built-in decoder, end to end -------===//
#include "tools/Commands.h"

#include "ir/Printer.h"

#include "llvm/Support/raw_ostream.h"

using namespace llvm;

namespace fg::cli {

int runDemo(ArrayRef<const char *> args) {
  Flags f("demo", "demo [--steps N] [--print-ir] [--device cpu|cuda]",
          "Builds the built-in MoE demo decoder (deterministic random weights), compiles it,\n"
          "feeds a fixed prompt and decodes greedily.");
  f.option("steps", "N", "tokens to generate", "16");
  f.flag("print-ir", "print the compiled IR");
  f.option("device", "D", "cpu (reference interpreter) or cuda; default: cuda when a GPU is present",
           "auto");
  f.option("mode", "M", "graph (CUDA graph replay) or eager", "graph");
  f.option("ctx", "N", "KV cache rows", "4096");
  f.flag("verbose", "print what happens");
  int code;
  if (!f.parse(args, code))
    return code;
  if (!f.positional().empty())
    return f.usageError("'demo' takes no arguments (see fusegraph demo --help)");
  int64_t steps;
  ModelSettings ms;
  ExecOptions eo;
  if (!f.getInt("steps", 16, steps, code) || !f.getInt("ctx", 4096, ms.ctx, code) ||
      !parseExecFlags(f, eo, code, "auto"))
    return code;
  ms.log = stderrLog(f.has("verbose"));

  Expected<Graph> g = loadModelGraph("demo", ms);
  if (!g)
    return reportError(g.takeError());
  CompileOptions co;
  co.ctx = ms.ctx;
  co.source = "demo";
  co.log = ms.log;
  co.cuda = eo.device == ExecOptions::Device::Cuda;
  Expected<Plan> plan = compile(*g, co);
  if (!plan)
    return reportError(plan.takeError());
  if (f.has("print-ir"))
    printGraph(plan->graph(), outs());
  static const int32_t kPrompt[] = {1, 7, 42, 3, 99, 12, 5, 8};
  return generate(*plan, eo, kPrompt, steps, f.has("verbose"));
}

} // namespace fg::cli
