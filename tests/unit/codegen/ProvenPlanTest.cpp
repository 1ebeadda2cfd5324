//===- ProvenPlanTest.cpp - the plan that ships is the plan proven --------===//
//
// Lowering plans memory over the final program with the emitters' scratch and
// proves that plan; an alias planted into it (through the test hook, after
// planning, before the proof) fails the compilation, naming both nodes.
// Launch records carry their node id and op kind as data.
//
//===----------------------------------------------------------------------===//
#include "codegen/cuda/Compile.h"
#include "ir/Parser.h"
#include "runtime/ProgramIO.h"

#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"

#include <gtest/gtest.h>

using namespace fg;

namespace {

constexpr const char *kChain = R"(graph @decode(input %x: f32[1, 1024]) {
  %a = silu(%x) : f32[1, 1024]
  %c = exp(%a) : f32[1, 1024]
  %d = tanh(%c) : f32[1, 1024]
  return %d
}
)";

std::string tempCache() {
  llvm::SmallString<128> dir;
  EXPECT_FALSE(llvm::sys::fs::createUniqueDirectory("fg-proven-plan", dir));
  return std::string(dir);
}

Graph parseOrDie(llvm::StringRef text) {
  llvm::Expected<Graph> g = parseGraph(text, "chain.fg");
  EXPECT_TRUE(bool(g)) << llvm::toString(g.takeError());
  return g ? std::move(*g) : Graph{};
}

/// Planted: %c's slice is moved onto %a's, which %c's own launch reads.
/// The compilation fails and the error names the writer (%c = exp, line 3)
/// and the node whose bytes it would clobber (%a = silu, line 2).
TEST(ProvenPlan, PlantedAliasFailsCompilationNamingBothNodes) {
  Graph g = parseOrDie(kChain);
  CompileOptions co;
  co.kernelCacheDir = tempCache();
  bool planted = false;
  co.testPlanHook = [&](const Function &fn, BufferPlan &plan) {
    ValueId a = fn.lookup("a"), c = fn.lookup("c");
    ASSERT_NE(a, kNoValue);
    ASSERT_NE(c, kNoValue);
    plan.values[c].offset = plan.values[a].offset;
    planted = true;
  };
  llvm::Expected<Plan> plan = compile(g, co);
  ASSERT_TRUE(planted);
  ASSERT_FALSE(bool(plan));
  std::string msg = llvm::toString(plan.takeError());
  EXPECT_NE(msg.find("the memory plan of @decode is not safe"), std::string::npos) << msg;
  EXPECT_NE(msg.find("%c = exp (line 3)"), std::string::npos) << msg;
  EXPECT_NE(msg.find("%a = silu (line 2)"), std::string::npos) << msg;
}

/// Planted between two values live at once where neither launch reads the
/// other (the result %d onto the input %x, both pinned for the whole run): the
/// planner's independent check (verifyNoOverlap) refuses it.
TEST(ProvenPlan, PlantedAliasOfLiveValuesIsRefused) {
  Graph g = parseOrDie(kChain);
  CompileOptions co;
  co.kernelCacheDir = tempCache();
  co.testPlanHook = [&](const Function &fn, BufferPlan &plan) {
    // %d (a result, pinned) onto the input %x (pinned): live at once.
    plan.values[fn.lookup("d")].offset = plan.values[fn.lookup("x")].offset;
  };
  llvm::Expected<Plan> plan = compile(g, co);
  ASSERT_FALSE(bool(plan));
  std::string msg = llvm::toString(plan.takeError());
  EXPECT_NE(msg.find("the memory plan of @decode is not safe"), std::string::npos) << msg;
}

/// Without a planted alias the same graph compiles, and each launch names its
/// node and op as data.
TEST(ProvenPlan, LaunchRecordsCarryNodeAndOp) {
  Graph g = parseOrDie(kChain);
  CompileOptions co;
  co.kernelCacheDir = tempCache();
  llvm::Expected<Plan> plan = compile(g, co);
  ASSERT_TRUE(bool(plan)) << llvm::toString(plan.takeError());
  auto prog = decodeProgram(plan->section("program")->bytes);
  ASSERT_TRUE(bool(prog)) << llvm::toString(prog.takeError());
  const Function &fn = *plan->graph().lookup("decode");
  ASSERT_EQ(prog->entries.size(), 1u);
  const auto &launches = prog->entries[0].launches;
  ASSERT_EQ(launches.size(), 3u);
  const OpKind ops[] = {OpKind::Silu, OpKind::Exp, OpKind::Tanh};
  for (size_t i = 0; i < launches.size(); ++i) {
    ASSERT_LT(launches[i].node, fn.numNodes());
    EXPECT_EQ(fn.node(launches[i].node).kind, ops[i]);
    EXPECT_EQ(launches[i].op, ops[i]);
  }
  EXPECT_EQ(launches[1].what, "%c = exp (line 3)");
}

} // namespace
