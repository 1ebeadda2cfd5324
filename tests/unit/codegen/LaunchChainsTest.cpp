//===- LaunchChainsTest.cpp - launches per layer and in a row --------------===//
//
// runtime/LaunchChains.h on a hand-made entry (a layer of four launches,
// two of them parallel branches, then a second layer and a head) and on the
// compiled demo decoder, whose entries have parallel branches (their longest
// chain is shorter than their launch count). CPU only.
//
//===----------------------------------------------------------------------===//
#include "codegen/cuda/Compile.h"
#include "frontends/Frontend.h"
#include "ir/Builder.h"
#include "runtime/LaunchChains.h"
#include "runtime/ProgramIO.h"
#include "tests/unit/codegen/TestKernelCache.h"

#include "llvm/ADT/SmallString.h"
#include "llvm/Support/Path.h"

#include <gtest/gtest.h>

using namespace fg;

namespace {

LaunchRecord launch(uint32_t node, std::vector<uint32_t> deps) {
  LaunchRecord r;
  r.node = node;
  r.deps = std::move(deps);
  return r;
}

} // namespace

TEST(LaunchChains, LongestPathsOfTheEntryAndOfLayerZero) {
  Function fn("decode");
  Builder b(fn);
  ValueId x = b.input("x", {DType::F32, {1, 8}});
  ValueId a = b.unary(OpKind::Exp, x, "blk.0.a");       // node 0
  ValueId q = b.unary(OpKind::Exp, a, "blk.0.q");       // node 1
  ValueId k = b.unary(OpKind::Sqrt, a, "blk.0.k");      // node 2
  ValueId o = b.add(q, k, "blk.0.o");                   // node 3
  ValueId n = b.unary(OpKind::Exp, o, "blk.1.a");       // node 4
  ValueId kc = b.unary(OpKind::Exp, k, "k_cache.0.1");  // node 5: layer 0's cache write
  ValueId kc1 = b.unary(OpKind::Exp, k, "k_cache.10");  // node 6: layer 10's
  ValueId out = b.unary(OpKind::Exp, n, "out");         // node 7
  ValueId caches = b.add(kc, kc1);                      // node 8
  b.result(b.add(out, caches));                         // node 9
  ASSERT_FALSE(bool(b.finish()));
  CompiledEntry e;
  e.name = "decode";
  LaunchRecord check = launch(kNoNode, {});
  e.launches = {check,          launch(0, {0}), launch(1, {1}),    launch(2, {1}),
                launch(3, {2, 3}), launch(4, {4}), launch(5, {3}), launch(6, {3}),
                launch(7, {5}), launch(8, {6, 7}), launch(9, {8, 9})};
  LaunchChains c = launchChains(e, &fn);
  EXPECT_EQ(c.launches, 11u);
  EXPECT_EQ(c.longest, 7u); // check, a, q (or k), o, blk.1.a, out, the last add
  EXPECT_EQ(c.layer, "blk.0");
  EXPECT_EQ(c.layerLaunches, 5u); // a, q, k, o and the k_cache.0 write
  EXPECT_EQ(c.layerLongest, 3u);  // a, q | k, o | the cache write
  LaunchChains none = launchChains(e, nullptr);
  EXPECT_EQ(none.longest, 7u);
  EXPECT_TRUE(none.layer.empty());
  EXPECT_EQ(none.layerLaunches, 0u);
}

/// A decoder's layer as compiled (the demo decoder: `fusegraph demo`'s model).
TEST(LaunchChains, TheDemoDecodersLayer) {
  ModelOptions mo;
  mo.ctx = 256;
  auto g = loadModel("demo", mo);
  ASSERT_TRUE(bool(g)) << llvm::toString(g.takeError());
  CompileOptions co;
  co.arch = "sm_90";
  co.kernelCacheDir = test::kernelCacheDir();
  auto plan = compile(*g, co);
  ASSERT_TRUE(bool(plan)) << llvm::toString(plan.takeError());
  const PlanSection *s = plan->section("program");
  ASSERT_NE(s, nullptr);
  auto prog = decodeProgram(llvm::StringRef(s->bytes));
  ASSERT_TRUE(bool(prog)) << llvm::toString(prog.takeError());
  for (const CompiledEntry &e : prog->entries) {
    LaunchChains c = launchChains(e, plan->graph().lookup(e.name));
    SCOPED_TRACE(e.name);
    EXPECT_EQ(c.layer, "blk.0");
    EXPECT_GE(c.layerLaunches, 4u);
    EXPECT_LE(c.layerLongest, c.layerLaunches);
    EXPECT_LT(c.longest, c.launches); // parallel branches exist
  }
}
