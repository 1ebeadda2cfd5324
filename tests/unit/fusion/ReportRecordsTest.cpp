//===- ReportRecordsTest.cpp - the fusion report as records -----------------===//
//
// The report names each applied fusion's root value (so a reader finds the
// fused node in the final graph), keeps refusals with their reasons, and
// round-trips through the plan's "fusion" section (FusionReport::serialize /
// parse); text from before the records is refused by parse.
//
//===----------------------------------------------------------------------===//
#include "codegen/cuda/CudaTarget.h"
#include "frontends/Frontend.h"
#include "ir/Parser.h"
#include "passes/fusion/Fusion.h"

#include "llvm/Support/raw_ostream.h"

#include <gtest/gtest.h>

#include <map>

using namespace fg;

/// Every root of an applied fusion names a fused node of the fused graph, of
/// the pattern's op; the count equals the number of roots.
TEST(FusionReportRecords, AppliedRootsNameTheFusedNodes) {
  ModelOptions mo;
  mo.ctx = 64;
  mo.prefill = {};
  auto g = loadModel("demo", mo);
  ASSERT_TRUE(bool(g)) << llvm::toString(g.takeError());
  FusionReport report;
  // Without matmul_add and moe_weighted_sum_add the residual adds meet
  // add_chain, which is refused (the sum has another consumer): a refusal to
  // check the records of.
  FusionOptions fo;
  fo.disabled = {"matmul_add", "moe_weighted_sum_add"};
  ASSERT_FALSE(static_cast<bool>(fuseWithOverlapProof(*g, fo, report)));
  const Function &fn = *g->lookup("decode");
  size_t roots = 0;
  for (const FusionReport::Applied &a : report.applied) {
    if (a.entry != "decode")
      continue;
    EXPECT_EQ(static_cast<int64_t>(a.roots.size()), a.count) << a.pattern;
    for (const std::string &r : a.roots) {
      ASSERT_EQ(r.front(), '%');
      ValueId v = fn.lookup(llvm::StringRef(r).drop_front());
      ASSERT_NE(v, kNoValue) << r;
      ASSERT_FALSE(fn.value(v).isArgument()) << r;
      EXPECT_EQ(mnemonic(fn.node(fn.value(v).def).kind), "fused." + a.pattern) << r;
      ++roots;
    }
  }
  EXPECT_EQ(static_cast<int64_t>(roots), report.total("decode"));
  ASSERT_FALSE(report.refused.empty());
  size_t addChains = 0;
  for (const FusionReport::Refusal &r : report.refused) {
    EXPECT_EQ(r.entry, "decode");
    EXPECT_EQ(r.root.front(), '%');
    // The norm prologue is refused too: structurally (the FFN norm also
    // feeds the experts) or, without a target, for want of a cost estimate.
    if (r.pattern == "rms_norm_matmul") {
      EXPECT_TRUE(r.reason.find("there is no target") != std::string::npos ||
                  r.reason.find("the norm launch would stay") != std::string::npos)
          << r.reason;
      continue;
    }
    EXPECT_EQ(r.pattern, "add_chain");
    EXPECT_NE(r.reason.find("has another consumer"), std::string::npos) << r.reason;
    ++addChains;
  }
  EXPECT_GT(addChains, 0u);
  // Fusion rebuilds the function; its role and input bindings stay.
  EXPECT_EQ(fn.contract().role, EntryRole::Decode);
  EXPECT_EQ(fn.binding("positions"), (InputBinding{BindKind::Positions, 0, 64}));
  EXPECT_EQ(fn.binding("tokens").kind, BindKind::Tokens);
}

/// serialize -> parse gives the same records (reasons with spaces, punctuation).
/// A later round that absorbs an earlier round's fused node takes its record
/// back: the gated GEMV that the norm prologue absorbs (fused.gated_matmul
/// into fused.rms_norm_gated_matmul, decided by the CUDA target's cost) and
/// the MoE sum that moe_weighted_sum_add absorbs count once, as the fusion
/// that remains, each root naming a node of the final graph.
TEST(FusionReportRecords, AbsorbedFusionsAreTakenBack) {
  auto g = parseGraph(R"(
graph @ffn(input %h: f32[1, 40], weight %g: f32[40], weight %wg: f16[48, 40],
           weight %wu: f16[48, 40], input %e: f32[1, 2, 8], input %w: f32[1, 2, 1],
           input %r: f32[1, 8]) {
  %n = rms_norm(%h) {eps = 1e-06} : f32[1, 40]
  %m = mul(%n, %g) : f32[1, 40]
  %a = matmul(%m, %wg) : f32[1, 48]
  %b = matmul(%m, %wu) : f32[1, 48]
  %y = glu(%a, %b) : f32[1, 48]
  %yw = mul(%e, %w) : f32[1, 2, 8]
  %s0 = view(%yw) {shape = [1, 8], strides = [16, 1]} : f32[1, 8]
  %s1 = view(%yw) {shape = [1, 8], strides = [16, 1], offset = 8} : f32[1, 8]
  %sum = add(%s0, %s1) : f32[1, 8]
  %out = add(%sum, %r) : f32[1, 8]
  return %y, %out
})",
                      "absorbed.fg");
  ASSERT_TRUE(bool(g)) << llvm::toString(g.takeError());
  cuda::CudaTarget target;
  FusionOptions fo;
  fo.target = &target;
  fo.optIn = {"moe_weighted_sum_add"};
  FusionReport report;
  ASSERT_FALSE(static_cast<bool>(fuseWithOverlapProof(*g, fo, report)));
  EXPECT_EQ(report.count("gated_matmul"), 0);
  EXPECT_EQ(report.count("moe_weighted_sum"), 0);
  EXPECT_EQ(report.count("rms_norm_matmul"), 1);
  EXPECT_EQ(report.count("rms_norm_mul"), 0); // recomputed by the prologue, then gone
  EXPECT_EQ(report.count("moe_weighted_sum_add"), 1);
  const Function &fn = *g->lookup("ffn");
  for (const FusionReport::Applied &a : report.applied) {
    EXPECT_EQ(static_cast<int64_t>(a.roots.size()), a.count) << a.pattern;
    for (const std::string &r : a.roots) {
      ValueId v = fn.lookup(llvm::StringRef(r).drop_front());
      ASSERT_NE(v, kNoValue) << r;
      EXPECT_TRUE(fn.node(fn.value(v).def).info().has(kFused)) << r;
    }
  }
  EXPECT_EQ(report.total(), 2);
}

/// A norm whose q GEMV is too large for a prologue (the CUDA target's cost)
/// keeps its launch, so k and v, which alone would pay off, are refused too,
/// and the report says why (Fuse.cpp, keepWholeRecomputations).
TEST(FusionReportRecords, ANormIsRecomputedByAllItsConsumersOrNone) {
  auto g = parseGraph(R"(
graph @qkv(input %h: f32[1, 2048], weight %g: f32[2048], weight %wq: f16[4096, 2048],
           weight %wk: f16[512, 2048], weight %wv: f16[512, 2048]) {
  %n = rms_norm(%h) {eps = 1e-06} : f32[1, 2048]
  %m = mul(%n, %g) : f32[1, 2048]
  %q = matmul(%m, %wq) : f32[1, 4096]
  %k = matmul(%m, %wk) : f32[1, 512]
  %v = matmul(%m, %wv) : f32[1, 512]
  return %q, %k, %v
})",
                      "qkv.fg");
  ASSERT_TRUE(bool(g)) << llvm::toString(g.takeError());
  cuda::CudaTarget target;
  FusionOptions fo;
  fo.target = &target;
  FusionReport report;
  ASSERT_FALSE(static_cast<bool>(fuseWithOverlapProof(*g, fo, report)));
  EXPECT_EQ(report.count("rms_norm_matmul"), 0);
  EXPECT_EQ(report.count("rms_norm_mul"), 1);
  std::map<std::string, std::string> why;
  for (const FusionReport::Refusal &r : report.refused)
    if (r.pattern == "rms_norm_matmul")
      why[r.root] = r.reason;
  ASSERT_EQ(why.size(), 3u);
  EXPECT_NE(why["%q"].find("the cuda target estimates the fused op"), std::string::npos) << why["%q"];
  for (const char *root : {"%k", "%v"})
    EXPECT_NE(why[root].find("%m keeps its launch: its consumer %q (matmul) is not fused with it"),
              std::string::npos)
        << why[root];
}

TEST(FusionReportRecords, SerializeParseRoundTrip) {
  FusionReport r;
  r.addApplied("decode", "rms_norm_mul", 1, "%a");
  r.addApplied("decode", "rms_norm_mul", 1, "%b.1");
  r.addApplied("prefill_4", "softcap", 1, "%c");
  r.addApplied("decode", "rms_norm_mul", -1, "%a"); // split back
  r.addRefusal({"decode", "add_chain", "%x", "intermediate %y has another consumer, %z (add)"});
  r.splitBack = 1;
  std::string text = r.serialize();
  EXPECT_EQ(text, "fusion-report 1\n"
                  "applied\tdecode\trms_norm_mul\t1\t%b.1\n"
                  "applied\tprefill_4\tsoftcap\t1\t%c\n"
                  "refused\tdecode\tadd_chain\t%x\tintermediate %y has another consumer, %z (add)\n"
                  "split_back\t1\n");
  auto back = FusionReport::parse(text);
  ASSERT_TRUE(bool(back)) << llvm::toString(back.takeError());
  EXPECT_EQ(back->serialize(), text);
  ASSERT_EQ(back->applied.size(), 2u);
  EXPECT_EQ(back->applied[0].roots, std::vector<std::string>{"%b.1"});
  ASSERT_EQ(back->refused.size(), 1u);
  EXPECT_EQ(back->refused[0].reason, "intermediate %y has another consumer, %z (add)");
  EXPECT_EQ(back->splitBack, 1);
}

/// The text form older plans stored, and damaged records, are errors.
TEST(FusionReportRecords, ParseRefusesOtherText) {
  auto old = FusionReport::parse("fusions applied:\n  @decode  topk_moe x2\n");
  ASSERT_FALSE(bool(old));
  EXPECT_EQ(llvm::toString(old.takeError()),
            "fusion section, line 1: not a structured fusion report (written by an older "
            "fusegraph?)");
  auto bad = FusionReport::parse("fusion-report 1\napplied\tdecode\tx\tmany\t\n");
  ASSERT_FALSE(bool(bad));
  EXPECT_EQ(llvm::toString(bad.takeError()), "fusion section, line 2: unknown record 'applied'");
}
