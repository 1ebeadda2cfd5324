//===- Opt.cpp - `fusegraph opt`: IR in, IR out ----------------------------===//
#include "tools/Commands.h"
#include "tools/Flags.h"

#include "codegen/cuda/CudaTarget.h"
#include "ir/Diag.h"
#include "ir/Parser.h"
#include "ir/Printer.h"
#include "ir/ReadFile.h"
#include "passes/PassManager.h"
#include "passes/fusion/FusionReport.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/ToolOutputFile.h"
#include "llvm/Support/raw_ostream.h"

using namespace llvm;

namespace fg::cli {

/// Passes' dumps, statistics and timing go to stderr, never stdout.
static void printToStderr(LogLevel, StringRef text) {
  errs() << text;
  if (!text.endswith("\n"))
    errs() << "\n";
}

int runOpt(ArrayRef<const char *> args) {
  Flags f("opt", "opt FILE.fg [--passes=a,b,...] [-o OUT]",
          "Parses and verifies FILE.fg ('-' reads stdin), runs the passes in order and prints the\n"
          "resulting IR to stdout (or OUT). Dumps, statistics and timing go to stderr.\n"
          "Passes: " +
              join(registeredPasses(), ", "));
  f.option("passes", "a,b,...", "passes to run, in order");
  f.flag("print-ir-after-all", "print the IR after every pass");
  f.flag("print-ir-before-all", "print the IR before every pass");
  f.option("print-ir-after", "P", "print the IR after pass P (repeatable, or P1,P2)");
  f.option("print-ir-before", "P", "print the IR before pass P (repeatable, or P1,P2)");
  f.option("dump-dir", "DIR", "write one numbered .fg file per pass into DIR");
  f.flag("stats", "print pass statistics");
  f.flag("timing", "print per-pass wall time");
  f.option("disable-fusion", "a,b", "turn these fusion patterns off (pass `fuse`)");
  f.option("enable-fusion", "a,b", "turn these off-by-default fusion patterns on (pass `fuse`)");
  f.option("debug-fusion", "NAME", "log every candidate of pattern NAME and its decision (stderr)");
  f.option("o", "OUT", "write the IR to OUT instead of stdout");
  f.option("target", "T",
           "the code generator passes ask for kernel facts: cuda (default) or none");
  int code;
  if (!f.parse(args, code))
    return code;
  if (!checkFusionNames(f, code))
    return code;
  if (f.positional().size() != 1)
    return f.usageError("'opt' takes one input file, got " + Twine(f.positional().size()) +
                        " (see fusegraph opt --help)");
  std::string path = f.positional()[0];

  std::unique_ptr<MemoryBuffer> text;
  if (path == "-") {
    auto buf = MemoryBuffer::getSTDIN();
    if (!buf)
      return reportError(makeError("cannot read '-': " + buf.getError().message()));
    text = std::move(*buf);
  } else {
    ReadFileOptions ro;
    ro.requiresNullTerminator = true;
    auto buf = readRegularFile(path, ro);
    if (!buf)
      return reportError(makeError("cannot read '" + path + "': " + toString(buf.takeError())));
    text = std::move(*buf);
  }
  Expected<Graph> g = parseGraph(text->getBuffer(), path == "-" ? "<stdin>" : path);
  if (!g)
    return reportError(g.takeError());

  std::string targetName = f.get("target", "cuda");
  if (targetName != "cuda" && targetName != "none")
    return f.usageError("--target must be cuda or none, got '" + targetName + "'");
  // The FG_DEBUG_* kernel-form switches as compile() applies them, so `opt`
  // shows the graph compile would lower.
  cuda::EmitOptions emit;
  cuda::applyDebugEnvironment(emit);
  cuda::CudaTarget cudaTarget(emit, cuda::costModelFromEnv());
  PassOptions po;
  po.target = targetName == "cuda" ? &cudaTarget : nullptr;
  po.printIrAfterAll = f.has("print-ir-after-all");
  po.printIrBeforeAll = f.has("print-ir-before-all");
  po.printIrAfter = f.list("print-ir-after");
  po.printIrBefore = f.list("print-ir-before");
  po.dumpDir = f.get("dump-dir");
  po.stats = f.has("stats");
  po.timing = f.has("timing");
  po.sink = printToStderr;
  FusionOptions fusion;
  fusion.target = po.target;
  fusion.disabled = f.list("disable-fusion");
  fusion.optIn = f.list("enable-fusion");
  fusion.debug = f.list("debug-fusion");
  po.fusionOptions = &fusion;
  if (!po.dumpDir.empty())
    if (std::error_code ec = sys::fs::create_directories(po.dumpDir))
      return reportError(makeError("cannot create '" + po.dumpDir + "': " + ec.message()));
  PassManager pm(std::move(po));
  std::string passes = join(f.list("passes"), ",");
  if (!passes.empty())
    if (Error e = pm.addPipeline(passes))
      return reportError(std::move(e));
  if (Error e = pm.run(*g))
    return reportError(std::move(e));

  std::string out = f.get("o", "-");
  std::error_code ec;
  ToolOutputFile file(out, ec, sys::fs::OF_Text);
  if (ec)
    return reportError(makeError("cannot write '" + out + "': " + ec.message()));
  printGraph(*g, file.os());
  file.keep();
  return kOk;
}

} // namespace fg::cli
