//===- CompileCmd.cpp - `fusegraph compile`: MODEL -> X.plan ---------------===//
#include "tools/Commands.h"

#include "llvm/Support/raw_ostream.h"

using namespace llvm;

namespace fg::cli {

int runCompile(ArrayRef<const char *> args) {
  Flags f("compile", "compile MODEL -o X.plan [--ctx N] [--prefill N,...] [--arch sm_90]",
          "Loads MODEL, runs the pass pipeline and writes a plan (IR, options, pass records).");
  f.option("o", "X.plan", "the plan file to write (required)");
  f.flag("verbose", "print what happens");
  addCompileFlags(f);
  int code;
  if (!f.parse(args, code))
    return code;
  if (f.positional().size() != 1)
    return f.usageError("'compile' takes one MODEL (see fusegraph compile --help)");
  if (!f.has("o"))
    return f.usageError("'compile' needs -o X.plan");
  ModelSettings ms;
  CompileOptions co;
  if (!readCompileFlags(f, ms, co, code))
    return code;
  co.log = ms.log = stderrLog(f.has("verbose"));
  StringRef model = f.positional()[0];
  if (isPlanFile(model))
    return f.usageError("'" + model + "' is already a plan; compile takes a model");
  if (Error e = checkOutputPath(f.get("o"), "-o"))
    return reportError(std::move(e));
  Expected<Plan> plan = planFor(model, ms, co);
  if (!plan)
    return reportError(plan.takeError());
  std::string out = f.get("o");
  if (Error e = plan->save(out))
    return reportError(std::move(e));
  size_t ops = 0;
  for (const Function &fn : plan->graph().functions())
    ops += fn.numNodes();
  outs() << "wrote " << out << ": " << plan->entries().size() << " entries, " << ops << " ops, ctx "
         << plan->options().ctx << "\n";
  return kOk;
}

} // namespace fg::cli
