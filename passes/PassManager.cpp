//===- PassManager.cpp - named pipelines with IR dumps ------------------===//
//
// The registry (one line per pass), pipeline parsing, and the run loop:
// for each pass, for each entry of the graph: print-before, run, print-after;
// then verify the whole graph and write the numbered dump file. Everything a
// user sees goes to the sink; nothing is printed here.
//
//===----------------------------------------------------------------------===//
#include "passes/PassManager.h"

#include "ir/Printer.h"
#include "ir/Verifier.h"
#include "passes/Passes.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/SmallString.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/raw_ostream.h"

#include <algorithm>
#include <chrono>

namespace fg {

namespace {

using PassFactory = std::unique_ptr<Pass> (*)();

struct RegistryEntry {
  llvm::StringRef name;
  PassFactory create;
};

/// The registry: one line per pass. The name is the pass's `name()`.
const RegistryEntry kRegistry[] = {
    {"canonicalize", createCanonicalizePass},
    {"cse", createCSEPass},
    {"dce", createDCEPass},
    {"fuse", createFusePass},
    {"gemm-inputs", createGemmInputsPass},
};

std::string knownPassList() { return llvm::join(registeredPasses(), ", "); }

/// Runs inner passes until none of them changes the function.
class FixedPointPass : public Pass {
public:
  FixedPointPass(std::string name, std::vector<std::unique_ptr<Pass>> passes, unsigned maxIter)
      : name_(std::move(name)), passes_(std::move(passes)), maxIterations_(maxIter) {}

  llvm::StringRef name() const override { return name_; }

  llvm::Expected<bool> run(Function &fn, PassContext &ctx) override {
    bool changedAny = false;
    for (unsigned round = 0; round < maxIterations_; ++round) {
      bool changed = false;
      for (auto &p : passes_) {
        PassContext inner;
        inner.log = ctx.log;
        inner.fusionOptions = ctx.fusionOptions;
        inner.fusionReport = ctx.fusionReport;
        inner.target = ctx.target;
        llvm::Expected<bool> c = p->run(fn, inner);
        if (!c)
          return c.takeError();
        changed |= *c;
        for (const auto &kv : inner.stats())
          ctx.stat((p->name() + "." + kv.getKey()).str(), kv.getValue());
      }
      ctx.stat("rounds");
      if (!changed)
        return changedAny;
      changedAny = true;
    }
    return makeError("no fixed point after " + llvm::Twine(maxIterations_) + " rounds");
  }

private:
  std::string name_;
  std::vector<std::unique_ptr<Pass>> passes_;
  unsigned maxIterations_;
};

std::string header(llvm::StringRef when, llvm::StringRef pass, llvm::StringRef entry) {
  return ("// ----- IR " + when + " " + pass + " (" + entry + ") -----").str();
}

/// Printed IR ends with a newline; sink messages do not.
std::string printBlock(llvm::StringRef head, const Function &fn) {
  std::string text = printToString(fn);
  while (!text.empty() && text.back() == '\n')
    text.pop_back();
  return head.str() + "\n" + text;
}

llvm::Error writeDump(llvm::StringRef dir, unsigned index, llvm::StringRef pass, const Graph &g) {
  llvm::SmallString<128> path(dir);
  std::string file;
  llvm::raw_string_ostream(file) << llvm::format("%02u", index) << "-" << pass << ".fg";
  llvm::sys::path::append(path, file);
  std::error_code ec;
  llvm::raw_fd_ostream os(path, ec, llvm::sys::fs::OF_Text);
  if (ec)
    return makeError("cannot write dump file '" + path + "': " + ec.message());
  os << printToString(g);
  os.close();
  if (os.has_error())
    return makeError("cannot write dump file '" + path + "': " + os.error().message());
  return llvm::Error::success();
}

bool contains(const std::vector<std::string> &names, llvm::StringRef name) {
  return llvm::is_contained(names, name.str());
}

} // namespace

llvm::Expected<std::unique_ptr<Pass>> createPass(llvm::StringRef name) {
  for (const RegistryEntry &e : kRegistry)
    if (e.name == name)
      return e.create();
  return makeError("unknown pass '" + name + "'; known passes: " + knownPassList());
}

std::vector<std::string> registeredPasses() {
  std::vector<std::string> names;
  for (const RegistryEntry &e : kRegistry)
    names.push_back(e.name.str());
  std::sort(names.begin(), names.end());
  return names;
}

llvm::StringRef defaultPipeline() { return "canonicalize,cse,dce"; }

std::unique_ptr<Pass> createFixedPointPass(std::string name,
                                           std::vector<std::unique_ptr<Pass>> passes,
                                           unsigned maxIterations) {
  assert(maxIterations > 0 && "a fixed point needs at least one round");
  return std::make_unique<FixedPointPass>(std::move(name), std::move(passes), maxIterations);
}

llvm::Error PassManager::addPipeline(llvm::StringRef spec) {
  llvm::SmallVector<llvm::StringRef, 8> names;
  spec.split(names, ',', /*MaxSplit=*/-1, /*KeepEmpty=*/false);
  // Create them all first so a bad list adds nothing.
  std::vector<std::unique_ptr<Pass>> created;
  for (llvm::StringRef raw : names) {
    llvm::StringRef name = raw.trim();
    if (name.empty())
      continue;
    auto p = createPass(name);
    if (!p)
      return p.takeError();
    created.push_back(std::move(*p));
  }
  for (auto &p : created)
    passes_.push_back(std::move(p));
  return llvm::Error::success();
}

std::vector<std::string> PassManager::pipeline() const {
  std::vector<std::string> names;
  for (const auto &p : passes_)
    names.push_back(p->name().str());
  return names;
}

llvm::Error PassManager::run(Graph &g) {
  records_.clear();
  ctx_ = PassContext();
  ctx_.log = opts_.sink;
  statOrder_.clear();

  // A misspelt --print-ir-after would silently print nothing: refuse it.
  std::vector<std::string> known = registeredPasses();
  for (const auto &p : passes_)
    known.push_back(p->name().str());
  for (const auto *list : {&opts_.printIrAfter, &opts_.printIrBefore})
    for (const std::string &name : *list)
      if (!contains(known, name))
        return makeError("unknown pass '" + name + "' in --print-ir-" +
                         (list == &opts_.printIrAfter ? "after" : "before") +
                         "; known passes: " + knownPassList());

  auto emit = [&](const std::string &msg) {
    if (opts_.sink)
      opts_.sink(LogLevel::Info, msg);
  };

  if (opts_.verifyEach)
    if (llvm::Error e = verifyGraph(g))
      return makeError("input IR is invalid: " + llvm::toString(std::move(e)));

  unsigned dumpIndex = 0;
  if (!opts_.dumpDir.empty()) {
    if (std::error_code ec = llvm::sys::fs::create_directories(opts_.dumpDir))
      return makeError("cannot create dump directory '" + opts_.dumpDir + "': " + ec.message());
    if (llvm::Error e = writeDump(opts_.dumpDir, dumpIndex++, "input", g))
      return e;
  }

  for (auto &pass : passes_) {
    llvm::StringRef name = pass->name();
    bool printBefore = opts_.printIrBeforeAll || contains(opts_.printIrBefore, name);
    bool printAfter = opts_.printIrAfterAll || contains(opts_.printIrAfter, name);
    PassRecord record;
    record.name = name.str();

    for (Function &fn : g.functions()) {
      if (printBefore)
        emit(printBlock(header("before", name, fn.name()), fn));

      PassContext local;
      local.log = opts_.sink;
      local.fusionOptions = opts_.fusionOptions;
      local.fusionReport = opts_.fusionReport;
      local.target = opts_.target;
      auto start = std::chrono::steady_clock::now();
      llvm::Expected<bool> changed = pass->run(fn, local);
      record.seconds +=
          std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      if (!changed)
        return makeError("pass '" + name + "' on @" + fn.name() + ": " +
                         llvm::toString(changed.takeError()));
      record.changed |= *changed;

      // Counters become `<pass>.<counter>`, listed in pipeline order.
      std::vector<std::string> keys;
      for (const auto &kv : local.stats())
        keys.push_back(kv.getKey().str());
      std::sort(keys.begin(), keys.end());
      for (const std::string &k : keys) {
        std::string full = (name + "." + k).str();
        if (!ctx_.stats().count(full))
          statOrder_.push_back(full);
        ctx_.stat(full, local.stats().lookup(k));
      }

      if (printAfter)
        emit(printBlock(header("after", name, fn.name()), fn));
    }

    if (opts_.verifyEach)
      if (llvm::Error e = verifyGraph(g))
        return makeError("pass '" + name +
                         "' produced invalid IR: " + llvm::toString(std::move(e)));
    if (!opts_.dumpDir.empty())
      if (llvm::Error e = writeDump(opts_.dumpDir, dumpIndex++, name, g))
        return e;
    records_.push_back(std::move(record));
  }

  if (opts_.stats)
    for (const std::string &k : statOrder_)
      emit(k + " = " + std::to_string(ctx_.stats().lookup(k)));

  if (opts_.timing) {
    double total = 0;
    for (const PassRecord &r : records_)
      total += r.seconds;
    auto line = [](double ms, double pct, llvm::StringRef changed, llvm::StringRef pass) {
      std::string s;
      llvm::raw_string_ostream(s) << llvm::format("//  %10.3f  %6.1f  %7s  ", ms, pct,
                                                  changed.str().c_str())
                                  << pass;
      return s;
    };
    emit("// ----- pass timing -----");
    emit("//   wall (ms)       %  changed  pass");
    for (const PassRecord &r : records_)
      emit(line(r.seconds * 1e3, total > 0 ? 100 * r.seconds / total : 0, r.changed ? "yes" : "no",
                r.name));
    emit(line(total * 1e3, total > 0 ? 100.0 : 0, "", "total"));
  }
  return llvm::Error::success();
}

} // namespace fg
