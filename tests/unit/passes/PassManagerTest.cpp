// Unit tests of the PassManager: registry and pipeline parsing, changed flags
// and records, verification after each pass, IR printing, dump files,
// statistics, timing and the fixed-point helper.
#include "passes/PassManager.h"
#include "ir/Builder.h"
#include "ir/Printer.h"
#include "passes/Passes.h"

#include "llvm/ADT/SmallString.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"

#include <gtest/gtest.h>

#include <algorithm>

using namespace fg;

namespace {

/// One entry with work for every cleanup pass:
///   canonicalize drops the same-shape reshape (and leaves %x unused),
///   cse merges the second exp, dce removes the dead sqr.
void buildEntry(Function &fn) {
  Builder b(fn);
  auto x = b.input("x", {DType::F32, {2, 4}});
  auto r = b.reshape(x, {2, 4}, "r");
  auto e1 = b.unary(OpKind::Exp, r, "e1");
  auto e2 = b.unary(OpKind::Exp, x, "e2");
  b.unary(OpKind::Sqr, x, "dead");
  b.result(b.add(e1, e2, "y"));
  ASSERT_FALSE(bool(b.finish()));
}

Graph makeGraph(std::initializer_list<const char *> entries = {"main"}) {
  Graph g;
  for (const char *name : entries)
    buildEntry(g.addFunction(name));
  return g;
}

struct Captured {
  std::vector<std::string> lines;
  LogSink sink() {
    return [this](LogLevel, llvm::StringRef msg) { lines.push_back(msg.str()); };
  }
  size_t countPrefix(llvm::StringRef prefix) const {
    return std::count_if(lines.begin(), lines.end(), [&](const std::string &l) {
      return llvm::StringRef(l).startswith(prefix);
    });
  }
};

std::string errorText(llvm::Error e) { return e ? llvm::toString(std::move(e)) : ""; }

size_t count(const Function &fn, OpKind kind) {
  return std::count_if(fn.nodes().begin(), fn.nodes().end(),
                       [&](const Node &n) { return n.kind == kind; });
}

std::string readFile(const llvm::Twine &path) {
  auto buf = llvm::MemoryBuffer::getFile(path);
  if (!buf)
    return "<missing: " + path.str() + ">";
  return (*buf)->getBuffer().str();
}

std::string chomp(std::string s) {
  while (!s.empty() && s.back() == '\n')
    s.pop_back();
  return s;
}

} // namespace

// --- registry and pipelines --------------------------------------------------------

/// Every registered name creates a pass of that name; unknown names list the known ones.
TEST(PassRegistry, CreatesByName) {
  std::vector<std::string> names = registeredPasses();
  EXPECT_EQ(names, (std::vector<std::string>{"canonicalize", "cse", "dce", "fuse", "gemm-inputs"}));
  for (const std::string &n : names) {
    auto p = createPass(n);
    ASSERT_TRUE(bool(p)) << n;
    EXPECT_EQ((*p)->name(), n);
  }
  auto bad = createPass("dse");
  ASSERT_FALSE(bool(bad));
  EXPECT_EQ(llvm::toString(bad.takeError()),
            "unknown pass 'dse'; known passes: canonicalize, cse, dce, fuse, gemm-inputs");
}

/// A list parses in order; a bad list adds nothing.
TEST(PassManager, AddPipeline) {
  PassManager pm;
  ASSERT_FALSE(bool(pm.addPipeline("dce, cse,canonicalize")));
  EXPECT_EQ(pm.pipeline(), (std::vector<std::string>{"dce", "cse", "canonicalize"}));
  EXPECT_EQ(errorText(pm.addPipeline("dce,fusion")),
            "unknown pass 'fusion'; known passes: canonicalize, cse, dce, fuse, gemm-inputs");
  EXPECT_EQ(pm.pipeline().size(), 3u);

  PassManager def;
  ASSERT_FALSE(bool(def.addPipeline(defaultPipeline())));
  EXPECT_EQ(def.pipeline(), (std::vector<std::string>{"canonicalize", "cse", "dce"}));
}

/// The default pipeline cleans the entry: one exp, one add, nothing else;
/// records say which pass changed what.
TEST(PassManager, RunsPipelineAndRecords) {
  Graph g = makeGraph();
  PassManager pm;
  ASSERT_FALSE(bool(pm.addPipeline("canonicalize,cse,dce,cse")));
  ASSERT_EQ(errorText(pm.run(g)), "");
  const Function &fn = g.functions().front();
  EXPECT_EQ(fn.numNodes(), 2u);
  EXPECT_EQ(count(fn, OpKind::Exp), 1u);
  EXPECT_EQ(count(fn, OpKind::Add), 1u);
  ASSERT_EQ(pm.records().size(), 4u);
  EXPECT_EQ(pm.records()[0].name, "canonicalize");
  EXPECT_TRUE(pm.records()[0].changed);
  EXPECT_TRUE(pm.records()[1].changed);
  EXPECT_TRUE(pm.records()[2].changed);
  EXPECT_EQ(pm.records()[3].name, "cse");
  EXPECT_FALSE(pm.records()[3].changed);
  // Counters are `<pass>.<counter>`, summed over repeated passes.
  EXPECT_EQ(pm.context().stats().lookup("canonicalize.reshapes_dropped"), 1);
  EXPECT_EQ(pm.context().stats().lookup("cse.merged"), 1);
  EXPECT_EQ(pm.context().stats().lookup("dce.removed"), 1);
}

// --- verification -------------------------------------------------------------------

namespace {
/// Makes the first node read the last node's result: use before definition.
class BreakerPass : public Pass {
public:
  llvm::StringRef name() const override { return "breaker"; }
  llvm::Expected<bool> run(Function &fn, PassContext &) override {
    fn.node(0).operands[0] = fn.node(static_cast<NodeId>(fn.numNodes() - 1)).result();
    return true;
  }
};

/// Fails on purpose.
class FailingPass : public Pass {
public:
  llvm::StringRef name() const override { return "failing"; }
  llvm::Expected<bool> run(Function &, PassContext &) override {
    return llvm::createStringError(llvm::inconvertibleErrorCode(), "no can do");
  }
};
} // namespace

/// A pass that breaks the IR is named in the error.
TEST(PassManager, VerifiesAfterEachPass) {
  Graph g = makeGraph();
  PassManager pm;
  pm.addPass(std::make_unique<BreakerPass>());
  std::string err = errorText(pm.run(g));
  EXPECT_TRUE(llvm::StringRef(err).startswith("pass 'breaker' produced invalid IR: ")) << err;
}

/// A pass error names the pass and the entry.
TEST(PassManager, PassErrorsNamePassAndEntry) {
  Graph g = makeGraph({"decode"});
  PassManager pm;
  pm.addPass(std::make_unique<FailingPass>());
  EXPECT_EQ(errorText(pm.run(g)), "pass 'failing' on @decode: no can do");
}

// --- printing -----------------------------------------------------------------------

/// --print-ir-after-all: one header per pass and entry, followed by that entry's IR.
TEST(PassManager, PrintIrAfterAll) {
  Graph g = makeGraph({"decode", "prefill_4"});
  Captured out;
  PassOptions opts;
  opts.printIrAfterAll = true;
  opts.sink = out.sink();
  PassManager pm(opts);
  ASSERT_FALSE(bool(pm.addPipeline("canonicalize,cse,dce")));
  ASSERT_EQ(errorText(pm.run(g)), "");
  ASSERT_EQ(out.lines.size(), 6u);
  EXPECT_EQ(out.countPrefix("// ----- IR after "), 6u);
  EXPECT_EQ(out.countPrefix("// ----- IR before "), 0u);
  const char *expected[] = {"canonicalize (decode)", "canonicalize (prefill_4)",
                            "cse (decode)",          "cse (prefill_4)",
                            "dce (decode)",          "dce (prefill_4)"};
  for (size_t i = 0; i < 6; ++i) {
    llvm::StringRef line(out.lines[i]);
    EXPECT_EQ(line.split('\n').first, "// ----- IR after " + std::string(expected[i]) + " -----");
  }
  // The last block of each entry is its final IR.
  EXPECT_EQ(llvm::StringRef(out.lines[4]).split('\n').second,
            chomp(printToString(g.functions()[0])));
  EXPECT_EQ(llvm::StringRef(out.lines[5]).split('\n').second,
            chomp(printToString(g.functions()[1])));
}

/// --print-ir-before=cse prints once, before cse, the IR canonicalize left.
TEST(PassManager, PrintIrBeforeOnePass) {
  Graph g = makeGraph();
  Captured out;
  PassOptions opts;
  opts.printIrBefore = {"cse"};
  opts.printIrAfter = {"dce"};
  opts.sink = out.sink();
  PassManager pm(opts);
  ASSERT_FALSE(bool(pm.addPipeline("canonicalize,cse,dce")));

  Graph afterCanon = makeGraph();
  PassContext scratch;
  auto canonChanged = createCanonicalizePass()->run(afterCanon.functions()[0], scratch);
  ASSERT_TRUE(canonChanged && *canonChanged);

  ASSERT_EQ(errorText(pm.run(g)), "");
  ASSERT_EQ(out.lines.size(), 2u);
  EXPECT_EQ(out.lines[0], "// ----- IR before cse (main) -----\n" +
                              chomp(printToString(afterCanon.functions()[0])));
  EXPECT_EQ(llvm::StringRef(out.lines[1]).split('\n').first, "// ----- IR after dce (main) -----");
}

/// A misspelt pass name in a print flag is an error, not silence.
TEST(PassManager, UnknownPrintPassIsAnError) {
  Graph g = makeGraph();
  PassOptions opts;
  opts.printIrAfter = {"cse2"};
  PassManager pm(opts);
  ASSERT_FALSE(bool(pm.addPipeline("cse")));
  EXPECT_EQ(errorText(pm.run(g)),
            "unknown pass 'cse2' in --print-ir-after; known passes: canonicalize, cse, dce, fuse, gemm-inputs");
}

// --- dumps, stats, timing ---------------------------------------------------------------

/// --dump-dir: 00-input.fg, then one numbered file per pass with the whole graph.
TEST(PassManager, DumpDirWritesNumberedFiles) {
  llvm::SmallString<128> dir;
  ASSERT_FALSE(llvm::sys::fs::createUniqueDirectory("fg-passes-dump", dir));
  llvm::SmallString<128> sub(dir);
  llvm::sys::path::append(sub, "nested");

  Graph g = makeGraph({"decode", "prefill_4"});
  std::string input = printToString(g);
  PassOptions opts;
  opts.dumpDir = std::string(sub);
  PassManager pm(opts);
  ASSERT_FALSE(bool(pm.addPipeline("canonicalize,cse,dce")));
  ASSERT_EQ(errorText(pm.run(g)), "");

  std::vector<std::string> files;
  std::error_code ec;
  for (llvm::sys::fs::directory_iterator it(sub, ec), end; it != end && !ec; it.increment(ec))
    files.push_back(llvm::sys::path::filename(it->path()).str());
  std::sort(files.begin(), files.end());
  EXPECT_EQ(files, (std::vector<std::string>{"00-input.fg", "01-canonicalize.fg", "02-cse.fg",
                                             "03-dce.fg"}));
  auto path = [&](const char *f) { return (sub + "/" + f).str(); };
  EXPECT_EQ(readFile(path("00-input.fg")), input);
  EXPECT_EQ(readFile(path("03-dce.fg")), printToString(g));
  // After canonicalize the same-shape reshape is gone but the duplicate exp is not.
  std::string canon = readFile(path("01-canonicalize.fg"));
  EXPECT_EQ(llvm::StringRef(canon).count("reshape("), 0u);
  EXPECT_EQ(llvm::StringRef(canon).count("exp("), 4u);
  EXPECT_EQ(llvm::StringRef(readFile(path("02-cse.fg"))).count("exp("), 2u);
  EXPECT_EQ(llvm::StringRef(readFile(path("02-cse.fg"))).count("sqr("), 2u);
  EXPECT_EQ(llvm::StringRef(readFile(path("03-dce.fg"))).count("sqr("), 0u);
  llvm::sys::fs::remove_directories(dir);
}

/// --stats: one `<pass>.<counter> = N` line per counter, in pipeline order.
TEST(PassManager, StatsLines) {
  Graph g = makeGraph({"decode", "prefill_4"});
  Captured out;
  PassOptions opts;
  opts.stats = true;
  opts.sink = out.sink();
  PassManager pm(opts);
  ASSERT_FALSE(bool(pm.addPipeline("cse,dce")));
  ASSERT_EQ(errorText(pm.run(g)), "");
  EXPECT_EQ(out.lines, (std::vector<std::string>{"cse.merged = 0", "dce.removed = 2"}));
}

/// --timing: a header, one row per pass with its changed flag, and a total.
TEST(PassManager, TimingTable) {
  Graph g = makeGraph();
  Captured out;
  PassOptions opts;
  opts.timing = true;
  opts.sink = out.sink();
  PassManager pm(opts);
  ASSERT_FALSE(bool(pm.addPipeline("dce,cse")));
  ASSERT_EQ(errorText(pm.run(g)), "");
  ASSERT_EQ(out.lines.size(), 5u);
  EXPECT_EQ(out.lines[0], "// ----- pass timing -----");
  EXPECT_TRUE(llvm::StringRef(out.lines[2]).endswith("  yes  dce")) << out.lines[2];
  EXPECT_TRUE(llvm::StringRef(out.lines[3]).endswith("   no  cse")) << out.lines[3];
  EXPECT_TRUE(llvm::StringRef(out.lines[4]).endswith("total")) << out.lines[4];
  EXPECT_GE(pm.records()[0].seconds, 0.0);
}

// --- fixed point ------------------------------------------------------------------------

/// Runs cse, dce until nothing changes: the second round changes nothing.
TEST(FixedPoint, RunsUntilNoChange) {
  Graph g = makeGraph();
  std::vector<std::unique_ptr<Pass>> inner;
  inner.push_back(createCanonicalizePass());
  inner.push_back(createCSEPass());
  inner.push_back(createDCEPass());
  PassManager pm;
  pm.addPass(createFixedPointPass("cleanup", std::move(inner)));
  ASSERT_EQ(errorText(pm.run(g)), "");
  EXPECT_EQ(g.functions()[0].numNodes(), 2u);
  EXPECT_TRUE(pm.records()[0].changed);
  EXPECT_EQ(pm.context().stats().lookup("cleanup.rounds"), 2);
  EXPECT_EQ(pm.context().stats().lookup("cleanup.cse.merged"), 1);
}

namespace {
/// Always says it changed something.
class LiarPass : public Pass {
public:
  llvm::StringRef name() const override { return "liar"; }
  llvm::Expected<bool> run(Function &, PassContext &) override { return true; }
};
} // namespace

/// A pass that never settles is reported, not looped on forever.
TEST(FixedPoint, ReportsNoConvergence) {
  Graph g = makeGraph();
  std::vector<std::unique_ptr<Pass>> inner;
  inner.push_back(std::make_unique<LiarPass>());
  PassManager pm;
  pm.addPass(createFixedPointPass("loop", std::move(inner), 3));
  EXPECT_EQ(errorText(pm.run(g)), "pass 'loop' on @main: no fixed point after 3 rounds");
}
