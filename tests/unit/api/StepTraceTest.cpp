// runtime/StepTrace: CUPTI kernel records of one step matched to launches,
// and the Chrome trace written from them (the GPU path: tests/gpu/TraceGpuTest).
#include "runtime/StepTrace.h"

#include "ir/Parser.h"

#include <nlohmann/json.hpp>

#include <map>

#include <gtest/gtest.h>

using namespace fg;
using llvm::Expected;
using llvm::toString;

namespace {

KernelRecord rec(std::string name, uint64_t start, uint64_t end) {
  KernelRecord r;
  r.name = std::move(name);
  r.start = start;
  r.end = end;
  return r;
}

LaunchRecord kernel(std::string symbol, uint32_t node) {
  LaunchRecord l;
  l.symbol = std::move(symbol);
  l.node = node;
  return l;
}

/// `r` with grid (g, 1, 1) and block (t, 1, 1).
template <class R> R shaped(R r, unsigned g, unsigned t) {
  r.grid[0] = g, r.grid[1] = r.grid[2] = 1;
  r.block[0] = t, r.block[1] = r.block[2] = 1;
  return r;
}

LaunchRecord gemm(uint32_t node) {
  LaunchRecord l;
  l.kind = LaunchRecord::Kind::Gemm;
  l.node = node;
  return l;
}

TEST(StepTrace, RecordsMatchLaunchesBySymbolAndCublasRunsByOrder) {
  CompiledEntry e;
  e.name = "decode";
  e.launches = {kernel("norm", 0), gemm(1), kernel("norm", 2), kernel("add", 3)};
  // Given out of order; cuBLAS ran two kernels for its one call.
  std::vector<KernelRecord> r = {rec("norm", 300, 340), rec("add", 340, 350),
                                 rec("norm", 100, 120), rec("sgemm_a", 120, 200),
                                 rec("sgemm_b", 200, 290)};
  Expected<std::vector<LaunchSpan>> s = matchKernelRecords(e, r);
  ASSERT_TRUE(static_cast<bool>(s)) << toString(s.takeError());
  ASSERT_EQ(s->size(), 4u);
  EXPECT_EQ((*s)[0].startNs, 100u);
  EXPECT_EQ((*s)[0].endNs, 120u);
  EXPECT_EQ((*s)[1].startNs, 120u);
  EXPECT_EQ((*s)[1].endNs, 290u);
  EXPECT_EQ((*s)[1].kernels, 2u);
  EXPECT_DOUBLE_EQ((*s)[1].ms, 170e-6);
  EXPECT_EQ((*s)[2].startNs, 300u);
  EXPECT_EQ((*s)[3].endNs, 350u);
}

TEST(StepTrace, AMissingOrExtraRecordIsAnError) {
  CompiledEntry e;
  e.name = "decode";
  e.launches = {kernel("norm", 0), kernel("add", 1)};
  Expected<std::vector<LaunchSpan>> missing = matchKernelRecords(e, {rec("norm", 1, 2)});
  ASSERT_FALSE(static_cast<bool>(missing));
  EXPECT_EQ(toString(missing.takeError()),
            "kernel trace of entry 'decode': 1 kernel records for 2 launches (1 launches "
            "without a record, 0 records without a launch; without a record: add x1)");
  Expected<std::vector<LaunchSpan>> extra =
      matchKernelRecords(e, {rec("norm", 1, 2), rec("add", 2, 3), rec("other", 3, 4)});
  ASSERT_FALSE(static_cast<bool>(extra));
  EXPECT_EQ(toString(extra.takeError()),
            "kernel trace of entry 'decode': 3 kernel records for 2 launches (0 launches "
            "without a record, 1 records without a launch; without a launch: other x1)");
  // A record under a name no launch has, of another grid than the launch
  // left: both sides named, with counts.
  Expected<std::vector<LaunchSpan>> renamed =
      matchKernelRecords(e, {rec("norm", 1, 2), shaped(rec("add2", 2, 3), 4, 128)});
  ASSERT_FALSE(static_cast<bool>(renamed));
  EXPECT_EQ(toString(renamed.takeError()),
            "kernel trace of entry 'decode': 2 kernel records for 2 launches (1 launches "
            "without a record, 1 records without a launch; without a record: add x1; without a "
            "launch: add2 x1)");
}

/// CUPTI may report a kernel under a name of a plan unloaded before (one
/// process tracing the unfused plan, then the fused one): such records go to
/// the launches left without a record of the same grid and block, in order.
TEST(StepTrace, ARecordUnderAnotherNameMatchesByGridAndBlock) {
  CompiledEntry e;
  e.name = "decode";
  e.launches = {kernel("norm", 0), shaped(kernel("add", 1), 4, 128), shaped(kernel("mul", 2), 8, 64),
                shaped(kernel("add", 3), 4, 128)};
  Expected<std::vector<LaunchSpan>> s = matchKernelRecords(
      e, {rec("norm", 10, 20), shaped(rec("old_b", 20, 30), 4, 128), shaped(rec("old_c", 30, 45), 8, 64),
          shaped(rec("old_b", 45, 50), 4, 128)});
  ASSERT_TRUE(static_cast<bool>(s)) << toString(s.takeError());
  EXPECT_FALSE((*s)[0].byShape);
  for (size_t i = 1; i < 4; ++i) {
    EXPECT_TRUE((*s)[i].byShape) << i;
    EXPECT_EQ((*s)[i].kernels, 1u) << i;
  }
  EXPECT_EQ((*s)[1].startNs, 20u); // the first add record to the first add launch
  EXPECT_EQ((*s)[2].startNs, 30u);
  EXPECT_EQ((*s)[2].endNs, 45u);
  EXPECT_EQ((*s)[3].startNs, 45u);
}

TEST(StepTrace, ChromeTraceHasOneEventPerLaunchAndOverlapOnItsOwnTrack) {
  Expected<Graph> g = parseGraph(R"(graph @decode(input %x: f32[1, 64], weight %w: f32[64]) {
  %n = fused.rms_norm_mul(%x, %w) {eps = 1e-05} : f32[1, 64]
  %a = exp(%n) : f32[1, 64]
  %b = tanh(%n) : f32[1, 64]
  %c = add(%a, %b) : f32[1, 64]
  return %c
}
)");
  ASSERT_TRUE(static_cast<bool>(g)) << toString(g.takeError());
  const Function &fn = *g->lookup("decode");
  auto lt = [](std::string sym, NodeId node, uint64_t start, uint64_t end) {
    Executor::LaunchTime l;
    l.symbol = std::move(sym);
    l.node = node;
    l.startNs = start;
    l.endNs = end;
    l.ms = static_cast<float>(end - start) / 1e6f;
    return l;
  };
  // exp and tanh run in parallel; add starts (PDL) before tanh ends.
  std::vector<Executor::LaunchTime> launches = {
      lt("k_norm", 0, 1000, 3000), lt("k_exp", 1, 3000, 5000), lt("k_tanh", 2, 3500, 6000),
      lt("k_add", 3, 5800, 7000)};
  std::string text = chromeTraceJson(fn, launches, 1, "demo \"decode\"");
  // Parsed without exceptions (the project builds with them off).
  nlohmann::json v = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  ASSERT_FALSE(v.is_discarded()) << text;
  ASSERT_TRUE(v.contains("traceEvents") && v["traceEvents"].is_array()) << text;
  std::map<std::string, nlohmann::json> byName;
  int metadata = 0;
  for (const nlohmann::json &e : v["traceEvents"]) {
    if (e["ph"] == "M") {
      ++metadata;
      continue;
    }
    EXPECT_EQ(e["ph"], "X");
    byName[e["name"].get<std::string>()] = e;
  }
  ASSERT_EQ(byName.size(), 4u);
  EXPECT_EQ(metadata, 1 + 2); // the process and two tracks
  const nlohmann::json &norm = byName["k_norm"];
  EXPECT_DOUBLE_EQ(norm["ts"].get<double>(), 0.0);
  EXPECT_DOUBLE_EQ(norm["dur"].get<double>(), 2.0);
  const nlohmann::json &args = norm["args"];
  EXPECT_EQ(args["op"], "fused.rms_norm_mul");
  EXPECT_EQ(args["fused_group"], "fused.rms_norm_mul");
  EXPECT_EQ(args["node"], "%n");
  // Reads x (256 B) and w (256 B), writes n (256 B).
  EXPECT_DOUBLE_EQ(args["bytes"].get<double>(), 768.0);
  EXPECT_TRUE(byName["k_exp"]["args"]["fused_group"].is_null());
  // exp on track 1; tanh overlaps it: track 2; add overlaps tanh's tail: track 1.
  EXPECT_EQ(byName["k_exp"]["tid"], 1);
  EXPECT_EQ(byName["k_tanh"]["tid"], 2);
  EXPECT_EQ(byName["k_add"]["tid"], 1);
  EXPECT_DOUBLE_EQ(byName["k_add"]["ts"].get<double>(), 4.8);
  EXPECT_EQ(v["traceEvents"][0]["args"]["name"], "demo \"decode\"");
}

} // namespace
