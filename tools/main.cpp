//===- main.cpp - the fusegraph command line: subcommand dispatch ----------===//
#include "tools/Commands.h"
#include "tools/Flags.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/raw_ostream.h"

using namespace llvm;
using namespace fg::cli;

namespace fg::cli {
int runBench(ArrayRef<const char *> args); // tools/Bench.cpp
} // namespace fg::cli

namespace {

struct Command {
  const char *name;
  int (*run)(ArrayRef<const char *>);
  const char *summary;
};

const Command kCommands[] = {
    {"compile", runCompile, "load a model, run the pipeline, write a plan"},
    {"run", runRun, "feed a prompt and decode greedily (MODEL or X.plan)"},
    {"opt", runOpt, "IR in, IR out: run passes over a .fg file"},
    {"inspect", runInspect, "entries, ops, weights, state and cost of a model or plan"},
    {"demo", runDemo, "build, compile and run the built-in demo decoder"},
    {"bench", runBench, "time decode steps: fused/unfused, eager/graph, vs the roofline"},
};

void printUsage(raw_ostream &os) {
  os << "usage: fusegraph <command> [flags]   (fusegraph <command> --help for its flags)\n\n"
        "commands:\n";
  for (const Command &c : kCommands) {
    os << "  " << c.name;
    os.indent(10 - StringRef(c.name).size()) << c.summary << "\n";
  }
  os << "\nMODEL is a .fg file, a .gguf file, a folder with config.json and *.safetensors, "
        "or 'demo'.\n";
}

} // namespace

int main(int argc, char **argv) {
  if (argc < 2) {
    printUsage(errs());
    return kUsage;
  }
  StringRef cmd = argv[1];
  if (cmd == "--help" || cmd == "-h" || (cmd == "help" && argc == 2)) {
    printUsage(outs());
    return kOk;
  }
  // `fusegraph help run` is `fusegraph run --help`.
  const char *helpArgs[] = {"--help"};
  bool help = cmd == "help";
  if (help)
    cmd = argv[2];
  for (const Command &c : kCommands)
    if (cmd == c.name)
      return help ? c.run(ArrayRef<const char *>(helpArgs)) : c.run(ArrayRef<const char *>(argv + 2, argv + argc));
  std::vector<std::string> names;
  for (const Command &c : kCommands)
    names.push_back(c.name);
  errs() << "fusegraph: error: unknown command '" << cmd << "'" << didYouMean(cmd, names)
         << " (commands: " << join(names, ", ") << ")\n";
  return kUsage;
}
