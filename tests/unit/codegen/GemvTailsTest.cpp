//===- GemvTailsTest.cpp - one-token rows run by their GEMV, without a GPU ===//
//
// EmitOptions::gemvTails (codegen/cuda/GemvTails.h): the demo decoder's
// decode entry (q / k norm + rope rows, k's and v's cache writes after the
// q, k and v GEMVs) compiled with the tails off and on. On, each of those
// row launches is gone into the GEMV it waited for: that record's `what`
// names them, its arguments are the GEMV's, then each tail's (the row op's
// result and operands where the plan keeps them), then its own counters;
// the launches that waited for a tail wait for its GEMV; the merged kernels
// compile with NVRTC for sm_90 (compile() builds every module); the prefill
// entry (64 tokens) is unchanged.
//
//===----------------------------------------------------------------------===//
#include "frontends/Frontend.h"
#include "ir/Parser.h"
#include "tests/unit/codegen/SwitchedProgram.h"

#include "llvm/ADT/StringRef.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <set>

using namespace fg;
using fg::test::entryNamed;

namespace {

/// The demo is a MoE decoder: its routing heads (on by default) would also
/// name a merged launch in `what`, so the tails are compiled alone.
CompiledProgram programOf(const Graph &g, bool tails, const char *env = "FG_DEBUG_GEMV_TAILS") {
  ::setenv("FG_DEBUG_ROUTING_HEADS", "0", 1);
  // The store form (on by default) off, unless it is the switch.
  const bool store = llvm::StringRef(env) == "FG_DEBUG_GEMV_STORE_TAILS";
  if (!store)
    ::setenv("FG_DEBUG_GEMV_STORE_TAILS", "0", 1);
  CompiledProgram p = test::programWithSwitch(g, env, tails);
  ::unsetenv("FG_DEBUG_ROUTING_HEADS");
  if (!store)
    ::unsetenv("FG_DEBUG_GEMV_STORE_TAILS");
  return p;
}

bool isTailOp(OpKind k) {
  return k == OpKind::Rope || k == OpKind::SetRows || k == OpKind::FusedRopeSetRows ||
         k == OpKind::FusedRmsNormMulRope || k == OpKind::FusedRmsNormMulRopeSetRows;
}

} // namespace

TEST(GemvTails, DemoDecodeRowsRunInTheirGemvs) {
  ModelOptions mo;
  mo.ctx = 128;
  mo.prefill = {64};
  auto g = loadModel("demo", mo);
  ASSERT_TRUE(bool(g)) << llvm::toString(g.takeError());
  const CompiledProgram off = programOf(*g, false), on = programOf(*g, true);
  const CompiledEntry *d0 = entryNamed(off, "decode"), *d1 = entryNamed(on, "decode");
  ASSERT_TRUE(d0 && d1);

  // Off: the row launches that wait for one GEMV alone.
  std::multiset<std::string> tailsOff;
  for (const LaunchRecord &l : d0->launches)
    if (l.node != kNoNode && isTailOp(l.op)) {
      ASSERT_EQ(l.deps.size(), 1u) << l.what;
      const LaunchRecord &host = d0->launches[l.deps.front()];
      EXPECT_TRUE(host.op == OpKind::FusedRmsNormMatmul || host.op == OpKind::MatMul ||
                  host.op == OpKind::FusedRmsNormMatmulMulti || host.op == OpKind::FusedMatmulMulti)
          << host.what;
      tailsOff.insert(std::string(opInfo(l.op).mnemonic));
    }
  // The demo's two layers: q's norm + rope, k's norm + rope + cache write,
  // v's cache write.
  ASSERT_EQ(tailsOff.size(), 6u);

  // On: none of them is a launch; the GEMVs say which they run.
  EXPECT_EQ(d1->launches.size(), d0->launches.size() - tailsOff.size());
  std::multiset<std::string> tailsOn;
  unsigned hosts = 0;
  for (size_t i = 0; i < d1->launches.size(); ++i) {
    const LaunchRecord &l = d1->launches[i];
    SCOPED_TRACE(l.what);
    EXPECT_FALSE(l.node != kNoNode && isTailOp(l.op));
    for (uint32_t dep : l.deps)
      EXPECT_LT(dep, i);
    llvm::StringRef what(l.what);
    if (!what.contains(" + "))
      continue;
    ++hosts;
    llvm::SmallVector<llvm::StringRef, 4> parts;
    what.split(parts, " + ");
    for (size_t p = 1; p < parts.size(); ++p)
      tailsOn.insert(parts[p].str());
    // The GEMV's own launch in the program without tails: same node.
    const LaunchRecord *host = nullptr;
    for (const LaunchRecord &h : d0->launches)
      if (h.node == l.node && h.op == l.op)
        host = &h;
    ASSERT_NE(host, nullptr);
    EXPECT_NE(l.symbol, host->symbol);
    EXPECT_TRUE(llvm::StringRef(l.symbol).startswith(host->symbol + "_"));
    EXPECT_EQ(l.grid[0], host->grid[0]);
    EXPECT_EQ(l.block[0], host->block[0]);
    ASSERT_GT(l.args.size(), host->args.size() + 1);
    for (size_t a = 0; a < host->args.size(); ++a)
      EXPECT_EQ(l.args[a], host->args[a]);
    const BufferRef &ctr = l.args.back();
    EXPECT_EQ(ctr.space, BufferSpace::Counters);
    EXPECT_LE(ctr.offset + 8, on.counterBytes);
    // A tail writes a row result or a cache: state or arena, never a weight.
    EXPECT_NE(l.args[host->args.size()].space, BufferSpace::Weight);
  }
  EXPECT_EQ(tailsOn, tailsOff);
  EXPECT_GE(hosts, 2u); // one GEMV a layer at least

  // Counters of different launches do not overlap (but for the status
  // words' device mirror, the input check's second argument, which the
  // greedy token shares).
  std::set<uint64_t> counterAt;
  const BufferRef mirror = d1->launches.front().args[1];
  for (const LaunchRecord &l : d1->launches)
    for (const BufferRef &b : l.args) {
      if (b.space == BufferSpace::Counters && !(b == mirror)) {
        EXPECT_TRUE(counterAt.insert(b.offset).second) << l.what;
      }
    }

  // Prefill rows are not one token's: unchanged.
  const CompiledEntry *p0 = entryNamed(off, "prefill_64"), *p1 = entryNamed(on, "prefill_64");
  ASSERT_TRUE(p0 && p1);
  EXPECT_EQ(p1->launches.size(), p0->launches.size());
}

/// The local form (EmitOptions::gemvLocalTails) and its register form
/// (gemvStoreTails): two layers of W-tiny (normal rope, no q / k norm) lose
/// q's rope, k's rope + cache write and v's cache write as launches — each
/// GEMV block runs them on its own tile, so the merged launches take no
/// counters — and the demo (q / k norm rows: not local) loses only v's
/// cache write. The register form also on the merged q / k / v launch
/// (gemvMulti, one store tail a segment: both decoders' projections are
/// under CudaCostModel::mergedTensorCoreFreeBytes, so merged by default);
/// the local forms on separate GEMVs (FG_DEBUG_MERGED_TC_FREE_MB=-1). Every
/// merged kernel compiles with NVRTC (programOf).
TEST(GemvTails, LocalFormOnTinyLayersAndTheDemo) {
  for (const char *env : {"FG_DEBUG_GEMV_LOCAL_TAILS", "FG_DEBUG_GEMV_STORE_TAILS", "early",
                          "merged"}) {
    SCOPED_TRACE(env);
    // "early": the store form with its angles before the wait; "merged":
    // the store form on the merged projections (the others: separate).
    const bool early = llvm::StringRef(env) == "early",
               merged = llvm::StringRef(env) == "merged";
    if (early)
      ::setenv("FG_DEBUG_STORE_TAIL_EARLY", "1", 1);
    if (early || merged)
      env = "FG_DEBUG_GEMV_STORE_TAILS";
    if (!merged)
      ::setenv("FG_DEBUG_MERGED_TC_FREE_MB", "-1", 1);
    const Graph tiny = test::workloadLayers("w-tiny", 512, {});
    ModelOptions mo;
    mo.ctx = 128;
    mo.prefill = {64};
    auto demo = loadModel("demo", mo);
    ASSERT_TRUE(bool(demo)) << llvm::toString(demo.takeError());
    struct Case {
      const Graph *g;
      const char *name;
      std::multiset<std::string> tails; ///< the row ops that become local tails
    };
    for (const Case &c : {Case{&tiny,
                               "w-tiny",
                               {"rope", "rope", "fused.rope_set_rows", "fused.rope_set_rows",
                                "set_rows", "set_rows"}},
                          Case{&*demo, "demo", {"set_rows", "set_rows"}}}) {
      SCOPED_TRACE(c.name);
      const CompiledProgram off = programOf(*c.g, false, env), on = programOf(*c.g, true, env);
      const CompiledEntry *d0 = entryNamed(off, "decode"), *d1 = entryNamed(on, "decode");
      ASSERT_TRUE(d0 && d1);
      EXPECT_EQ(d1->launches.size(), d0->launches.size() - c.tails.size());
      std::multiset<std::string> seen;
      unsigned hosts = 0;
      for (const LaunchRecord &l : d1->launches) {
        SCOPED_TRACE(l.what);
        llvm::StringRef what(l.what);
        if (!what.contains(" + "))
          continue;
        ++hosts;
        llvm::SmallVector<llvm::StringRef, 4> parts;
        what.split(parts, " + ");
        for (size_t p = 1; p < parts.size(); ++p)
          seen.insert(parts[p].str());
        if (merged)
          EXPECT_TRUE(l.op == OpKind::FusedRmsNormMatmulMulti || l.op == OpKind::FusedMatmulMulti);
        else
          EXPECT_TRUE(l.op == OpKind::FusedRmsNormMatmul || l.op == OpKind::MatMul);
        for (const BufferRef &b : l.args)
          EXPECT_NE(b.space, BufferSpace::Counters);
        // The GEMV's own arguments first, unchanged.
        for (const LaunchRecord &h : d0->launches)
          if (h.node == l.node && h.op == l.op) {
            ASSERT_GT(l.args.size(), h.args.size());
            for (size_t a = 0; a < h.args.size(); ++a)
              EXPECT_EQ(l.args[a], h.args[a]);
            EXPECT_TRUE(llvm::StringRef(l.symbol).startswith(h.symbol + "_"));
          }
      }
      EXPECT_EQ(seen, c.tails);
      // Separate GEMVs: one host a tail; merged: one a layer (2 layers).
      EXPECT_EQ(hosts, merged ? 2u : c.tails.size());
      EXPECT_EQ(on.counterBytes, off.counterBytes);
    }
    ::unsetenv("FG_DEBUG_STORE_TAIL_EARLY");
    ::unsetenv("FG_DEBUG_MERGED_TC_FREE_MB");
  }
}

/// A store tail reads only its rows from the GEMV's registers; its other
/// operands come from memory while the GEMV's blocks still store, so none
/// may be a result of the GEMV. Here q's rope takes its frequency factors
/// from k, the other segment of the merged q / k launch: the rope stays a
/// launch of its own. Its twin, the factors a weight, runs in q's stores.
TEST(GemvTails, AnOperandFromAnotherSegmentKeepsTheTailALaunch) {
  auto ropes = [](const char *ff, const char *params) {
    const std::string text = std::string("graph @decode(input %x: f32[1, 64], input %pos: i32[1], "
                                         "weight %wq: f16[128, 64], weight %wk: f16[16, 64]") +
                             params +
                             ") {\n"
                             "  %q = matmul(%x, %wq) : f32[1, 128]\n"
                             "  %k = matmul(%x, %wk) : f32[1, 16]\n" +
                             ff +
                             "  %qr = reshape(%q) {shape = [1, 2, 64]} : f32[1, 2, 64]\n"
                             "  %r = rope(%qr, %pos, %ff) {n_dims = 32} : f32[1, 2, 64]\n"
                             "  return %r, %k\n}\n";
    llvm::Expected<Graph> g = parseGraph(text, "ff.fg");
    EXPECT_TRUE(bool(g)) << llvm::toString(g.takeError());
    if (!g)
      return -1;
    const CompiledProgram p = test::compiledProgram(*g);
    const CompiledEntry *e = entryNamed(p, "decode");
    EXPECT_NE(e, nullptr);
    if (!e)
      return -1;
    int multi = 0, rope = 0;
    for (const LaunchRecord &l : e->launches) {
      multi += l.op == OpKind::FusedMatmulMulti;
      rope += l.op == OpKind::Rope;
    }
    EXPECT_EQ(multi, 1); // q and k merged (4 MiB at most: CudaCostModel)
    return rope;
  };
  EXPECT_EQ(ropes("  %ff = reshape(%k) {shape = [16]} : f32[16]\n", ""), 1);
  EXPECT_EQ(ropes("", ", weight %ff: f32[16]"), 0);
}
