//===- Seeds.cpp - write the seed corpora of the fuzz targets -------------===//
//
//   fg_fuzz_seeds OUT
//
// Writes OUT/fg/ (every .fg file of tests/ir, the demo decoder and the w-tiny
// workload printed) and OUT/plan/ (plans: the demo and a .fg model for the
// CPU only, a .fg model with a CUDA program compiled through NVRTC, and a
// CPU plan of each model fuzz/gen_seeds.py left in OUT/gguf and OUT/models,
// whose weight tables refer to files or embed transformed bytes). Run by
// ctest (the fuzz-seeds fixture) after gen_seeds.py; .ci/run's fuzz step
// starts from these.
//
//===----------------------------------------------------------------------===//
#include "codegen/cuda/Compile.h"
#include "frontends/Frontend.h"
#include "ir/Parser.h"
#include "ir/Printer.h"

#include "llvm/ADT/SmallString.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/raw_ostream.h"

#include <algorithm>
#include <cstdio>
#include <string>

using namespace fg;
namespace fs = llvm::sys::fs;
namespace path = llvm::sys::path;

namespace {

int failures = 0;

void report(const std::string &what, llvm::Error e) {
  if (!e)
    return;
  std::fprintf(stderr, "fg_fuzz_seeds: %s: %s\n", what.c_str(),
               llvm::toString(std::move(e)).c_str());
  ++failures;
}

void writeText(const std::string &file, llvm::StringRef text) {
  std::error_code ec;
  llvm::raw_fd_ostream os(file, ec);
  if (ec) {
    report(file, llvm::createStringError(ec, "cannot write"));
    return;
  }
  os << text;
}

/// Every .fg file under tests/ir, named by its path (cli_plan.fg).
void copyIrTests(const std::string &out) {
  std::string root = std::string(FG_SOURCE_DIR) + "/tests/ir";
  std::error_code ec;
  for (fs::recursive_directory_iterator it(root, ec), end; it != end && !ec; it.increment(ec)) {
    if (path::extension(it->path()) != ".fg")
      continue;
    std::string rel = llvm::StringRef(it->path()).drop_front(root.size() + 1).str();
    std::replace(rel.begin(), rel.end(), '/', '_');
    auto buf = llvm::MemoryBuffer::getFile(it->path());
    if (!buf) {
      report(it->path(), llvm::errorCodeToError(buf.getError()));
      continue;
    }
    writeText(out + "/" + rel, (*buf)->getBuffer());
  }
}

void printModel(const std::string &model, const std::string &file) {
  ModelOptions mo;
  mo.ctx = 64;
  mo.prefill = {4};
  llvm::Expected<Graph> g = loadModel(model, mo);
  if (!g)
    return report(model, g.takeError());
  writeText(file, printToString(*g));
}

/// Compiles `model` (CPU only unless `cuda`) with its weight table and saves the plan.
void writePlan(const std::string &model, const std::string &file, bool cuda,
               const std::string &kernelCache) {
  ModelOptions mo;
  mo.ctx = 64;
  mo.prefill = {4};
  llvm::Expected<LoadedModel> m = loadModelWithWeights(model, mo);
  if (!m)
    return report(model, m.takeError());
  CompileOptions co;
  co.cuda = cuda;
  co.source = path::filename(model).str();
  co.kernelCacheDir = kernelCache;
  // As the CLI does (tools/Model.cpp): recipes over the files' ranges, and the
  // computed weights' bytes.
  for (const WeightEntry &w : m->weights.entries()) {
    ExternalWeight x;
    x.name = w.name;
    x.type = w.type;
    x.recipe = w.recipe;
    x.bytes = w.data;
    co.weights.push_back(std::move(x));
  }
  llvm::Expected<Plan> plan = compile(m->graph, co);
  if (!plan)
    return report(model, plan.takeError());
  report(file, plan->save(file));
}

} // namespace

int main(int argc, char **argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: fg_fuzz_seeds OUT\n");
    return 2;
  }
  std::string out = argv[1];
  std::string fgDir = out + "/fg", planDir = out + "/plan";
  std::string kernelCache = out + ".kernel-cache"; // beside OUT, not in a corpus
  for (const std::string &d : {fgDir, planDir})
    if (std::error_code ec = fs::create_directories(d))
      report(d, llvm::errorCodeToError(ec));

  copyIrTests(fgDir);
  printModel("demo", fgDir + "/demo.fg");
  printModel("w-tiny", fgDir + "/w-tiny.fg");

  std::string runFg = std::string(FG_SOURCE_DIR) + "/tests/ir/cli/run-fg.fg";
  writePlan("demo", planDir + "/demo-cpu.plan", /*cuda=*/false, kernelCache);
  writePlan(runFg, planDir + "/run-fg-cpu.plan", /*cuda=*/false, kernelCache);
  writePlan(runFg, planDir + "/run-fg-cuda.plan", /*cuda=*/true, kernelCache);

  // Models gen_seeds.py wrote (absent when its Python packages are missing).
  std::error_code ec;
  for (const std::string &d : {out + "/gguf", out + "/models"}) {
    if (!fs::is_directory(d))
      continue;
    for (fs::directory_iterator it(d, ec), end; it != end && !ec; it.increment(ec)) {
      llvm::StringRef name = path::filename(it->path());
      if (name.startswith("quants"))
        continue; // not a model
      writePlan(it->path(), planDir + "/" + path::stem(name).str() + "-cpu.plan",
                /*cuda=*/false, kernelCache);
    }
  }
  if (failures)
    std::fprintf(stderr, "fg_fuzz_seeds: %d failures\n", failures);
  return failures ? 1 : 0;
}
