// Every FileCheck input of tests/ir/fusion, fused and unfused, gives the same
// reference results bit for bit on pseudo-random inputs (fused ops evaluate
// through their decompositions), and fused ops round-trip through text.
#include "ir/Decomposition.h"
#include "ir/OpViews.h"
#include "ir/Parser.h"
#include "ir/Printer.h"
#include "ir/Quantize.h"
#include "codegen/cuda/CudaTarget.h"
#include "passes/fusion/Fusion.h"
#include "runtime/reference/Interpreter.h"

#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"

#include <gtest/gtest.h>

#include <algorithm>

using namespace fg;

namespace {

std::vector<std::string> fusionTestFiles() {
  std::vector<std::string> out;
  std::error_code ec;
  std::string dir = std::string(FG_SOURCE_DIR) + "/tests/ir/fusion";
  for (llvm::sys::fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec))
    if (llvm::sys::path::extension(it->path()) == ".fg")
      out.push_back(it->path());
  std::sort(out.begin(), out.end());
  return out;
}

/// Deterministic values: floats in [-1, 1), integers in {0, 1}.
HostTensor pseudoRandom(const TensorType &t, uint64_t seed) {
  if (isInteger(t.dtype)) {
    std::vector<int64_t> v(t.numElements());
    for (size_t i = 0; i < v.size(); ++i)
      v[i] = static_cast<int64_t>((i * 7 + seed) % 2);
    return HostTensor::fromInts(t, v);
  }
  std::vector<float> v(t.numElements());
  uint64_t s = seed * 0x9E3779B97F4A7C15ull + 1;
  for (float &f : v) {
    s = s * 6364136223846793005ull + 1442695040888963407ull;
    f = static_cast<float>((s >> 40) % 2000) / 1000.0f - 1.0f;
  }
  if (isQuantized(t.dtype)) { // block-quantised weights: the same values, quantised
    HostTensor q = HostTensor::zeros(t);
    EXPECT_TRUE(quantizeRow(t.dtype, v.data(), q.data.data(), t.numElements())) << t.str();
    return q;
  }
  return HostTensor::fromFloats(t, v);
}

struct RunResult {
  std::vector<std::pair<std::string, HostTensor>> outputs;
  std::vector<std::vector<uint8_t>> state;
};

RunResult runEntry(const Graph &g, const Function &fn) {
  ReferenceInterpreter ri(g);
  RunResult r;
  llvm::StringMap<HostTensor> inputs;
  uint64_t seed = 1;
  for (const Argument &a : fn.arguments())
    if (a.role == ArgRole::Input)
      inputs[fn.value(a.value).name] = pseudoRandom(fn.type(a.value), seed++);
  // Every entry's weights (the interpreter prepares them all), seeded by name.
  for (const Function &other : g.functions())
    for (const Argument &a : other.arguments())
      if (a.role == ArgRole::Weight) {
        const Value &v = other.value(a.value);
        uint64_t s = std::hash<std::string>()(v.name) % 1000;
        llvm::consumeError(ri.bindWeight(v.name, pseudoRandom(v.type, s)));
      }
  if (llvm::Error e = ri.run(fn.name(), inputs, r.outputs))
    ADD_FAILURE() << fn.name().str() << ": " << llvm::toString(std::move(e));
  for (const Argument &a : fn.arguments())
    if (a.role == ArgRole::State)
      r.state.push_back(ri.state(fn.value(a.value).name)->data);
  return r;
}

/// Fuses every test graph (whose file name contains `only`) with `opts` and
/// checks the reference results against the unfused graph's; returns how
/// many entries fused something.
int fusedEqualsUnfused(const FusionOptions &opts, llvm::StringRef only = "") {
  std::vector<std::string> files = fusionTestFiles();
  EXPECT_GE(files.size(), 14u);
  int fusedEntries = 0;
  for (const std::string &path : files) {
    if (!llvm::sys::path::filename(path).contains(only))
      continue;
    auto buf = llvm::MemoryBuffer::getFile(path);
    EXPECT_TRUE(static_cast<bool>(buf)) << path;
    if (!buf)
      continue;
    auto g = parseGraph((*buf)->getBuffer(), path);
    EXPECT_TRUE(static_cast<bool>(g)) << llvm::toString(g.takeError());
    if (!g)
      continue;
    Graph fused = *g;
    FusionReport report;
    if (llvm::Error e = fuseWithOverlapProof(fused, opts, report)) {
      ADD_FAILURE() << path << ": " << llvm::toString(std::move(e));
      continue;
    }
    // Fused ops print and parse back to the same text.
    std::string text = printToString(fused);
    auto again = parseGraph(text, "fused");
    EXPECT_TRUE(static_cast<bool>(again)) << llvm::toString(again.takeError());
    if (again) {
      EXPECT_EQ(printToString(*again), text);
    }
    for (const Function &fn : g->functions()) {
      const Function &ff = *fused.lookup(fn.name());
      fusedEntries += report.total(fn.name()) > 0;
      RunResult a = runEntry(*g, fn), b = runEntry(fused, ff);
      EXPECT_EQ(a.outputs.size(), b.outputs.size()) << path << " @" << fn.name().str();
      for (size_t i = 0; i < std::min(a.outputs.size(), b.outputs.size()); ++i) {
        EXPECT_EQ(a.outputs[i].first, b.outputs[i].first);
        EXPECT_EQ(a.outputs[i].second.data, b.outputs[i].second.data)
            << path << " @" << fn.name().str() << " result " << a.outputs[i].first;
      }
      EXPECT_EQ(a.state, b.state) << path << " @" << fn.name().str();
    }
  }
  return fusedEntries;
}

} // namespace

TEST(FusionReference, FusedEqualsUnfusedOnEveryTestGraph) { EXPECT_GE(fusedEqualsUnfused({}), 25); }

/// With the patterns that fold the gemm-inputs pass's converts (glu_convert,
/// rms_norm_mul_convert; on by default since the ninth session), their test
/// graphs fuse more than with both turned off, and still give the unfused
/// results bit for bit: a 16-bit norm or GLU is the f32 one rounded once.
TEST(FusionReference, FusedEqualsUnfusedWithTheConvertPatterns) {
  FusionOptions off;
  off.disabled = {"glu_convert", "rms_norm_mul_convert"};
  // glu_convert.fg's GLUs fuse only so.
  EXPECT_GT(fusedEqualsUnfused({}, "_convert"), fusedEqualsUnfused(off, "_convert"));
}

/// moe_weighted_sum_add (the MoE sum and its residual add, fused in a second
/// round over the first round's fused.moe_weighted_sum; on by default since
/// the eleventh session): its test graphs give the unfused results bit for
/// bit, scale or not.
TEST(FusionReference, FusedEqualsUnfusedWithMoeWeightedSumAdd) {
  FusionOptions on;
  on.optIn = {"moe_weighted_sum_add"};
  EXPECT_EQ(fusedEqualsUnfused(on, "moe_weighted_sum_add"), 4);
}

/// The opt-in rope_attention: its decomposition (rope, then attention) gives
/// the unfused results bit for bit: @fires and, without the CUDA target that
/// refuses it, the 16-token @prefill.
TEST(FusionReference, FusedEqualsUnfusedWithRopeAttention) {
  FusionOptions on;
  on.optIn = {"rope_attention"};
  EXPECT_EQ(fusedEqualsUnfused(on, "rope_attention"), 2);
}

/// The opt-in rope_kv_attention: its decomposition (both ropes, both cache
/// writes, then attention; two states updated in place) gives the unfused
/// results and final caches bit for bit: @fires and, without the CUDA target
/// that refuses it, the two-token @two_tokens; four refusals' graphs fuse
/// k's rope_set_rows instead (@different_ropes, @rows_elsewhere, @sinks,
/// @read_between_the_writes).
TEST(FusionReference, FusedEqualsUnfusedWithRopeKvAttention) {
  FusionOptions on;
  on.optIn = {"rope_kv_attention"};
  EXPECT_EQ(fusedEqualsUnfused(on, "rope_kv_attention"), 6);
}

/// The opt-in rms_norm_mul_matmul (decided by the target's cost: the CUDA
/// target here): its decomposition (the norm, its row a result, then the
/// matmul) gives the unfused results bit for bit: @fires with it, the other
/// three graphs with the norm alone fused.
TEST(FusionReference, FusedEqualsUnfusedWithTheStoredNormRow) {
  cuda::CudaTarget target;
  FusionOptions on;
  on.optIn = {"rms_norm_mul_matmul"};
  on.target = &target;
  EXPECT_EQ(fusedEqualsUnfused(on, "rms_norm_mul_matmul"), 4);
}

/// fused.rms_norm_mul's `dtype` guards the last step of its decomposition:
/// f16 expands to rms_norm, mul and a convert, the default f32 to the first two.
TEST(FusionReference, ExpandRmsNormMulByDType) {
  for (auto [dtype, want] :
       {std::pair<const char *, std::vector<OpKind>>{
            "f16", {OpKind::FusedRmsNormMul, OpKind::RmsNorm, OpKind::Mul, OpKind::Convert}},
        {"f32", {OpKind::FusedRmsNormMul, OpKind::RmsNorm, OpKind::Mul}}}) {
    SCOPED_TRACE(dtype);
    std::string text = std::string("graph @f(input %x: f32[3, 8], weight %w: f32[8]) {\n"
                                   "  %y = fused.rms_norm_mul(%x, %w) {eps = 1e-05, dtype = ") +
                       dtype + "} : " + dtype + "[3, 8]\n  return %y\n}\n";
    auto g = parseGraph(text, "t");
    ASSERT_TRUE(static_cast<bool>(g)) << llvm::toString(g.takeError());
    Function &fn = g->functions().front();
    llvm::SmallVector<ValueId, 1> repl;
    ASSERT_FALSE(static_cast<bool>(expandFusedNode(fn, 0, repl)));
    std::vector<OpKind> kinds;
    for (const Node &n : fn.nodes())
      kinds.push_back(n.kind);
    EXPECT_EQ(kinds, want);
    ASSERT_EQ(repl.size(), 1u);
    EXPECT_EQ(fn.type(repl[0]).dtype, std::string(dtype) == "f16" ? DType::F16 : DType::F32);
  }
  // The default prints nowhere: an f32 norm's text is what it was before.
  auto g = parseGraph("graph @f(input %x: f32[3, 8], weight %w: f32[8]) {\n"
                      "  %y = fused.rms_norm_mul(%x, %w) {eps = 1e-05, dtype = f32} : f32[3, 8]\n"
                      "  return %y\n}\n",
                      "t");
  ASSERT_TRUE(static_cast<bool>(g)) << llvm::toString(g.takeError());
  EXPECT_EQ(printToString(*g).find("dtype"), std::string::npos) << printToString(*g);
}

/// The decomposition is data: expanding a fused node gives back the ops (and
/// the type rule of the fused row is the decomposition's).
TEST(FusionReference, ExpandTopkMoe) {
  auto g = parseGraph(R"(graph @f(input %l: f32[2, 8], weight %b: f32[8]) {
  %ids, %w = fused.topk_moe(%l, %b) {gating = sigmoid, k = 2, renorm = 1, scale = 2.0} : i32[2, 2], f32[2, 2]
  return %ids, %w
})",
                      "t");
  ASSERT_TRUE(static_cast<bool>(g)) << llvm::toString(g.takeError());
  Function &fn = g->functions().front();
  llvm::SmallVector<ValueId, 2> repl;
  ASSERT_FALSE(static_cast<bool>(expandFusedNode(fn, 0, repl)));
  std::vector<OpKind> kinds;
  for (const Node &n : fn.nodes())
    kinds.push_back(n.kind);
  std::vector<OpKind> want = {OpKind::FusedTopkMoe, OpKind::Sigmoid, OpKind::Add,
                              OpKind::TopK,         OpKind::GetRows, OpKind::SumRows,
                              OpKind::Clamp,        OpKind::Div,     OpKind::Scale};
  EXPECT_EQ(kinds, want);
  ASSERT_EQ(repl.size(), 2u);
  EXPECT_EQ(fn.type(repl[0]), TensorType(DType::I32, {2, 2}));
  EXPECT_EQ(fn.node(fn.value(repl[1]).def).kind, OpKind::Scale);
  EXPECT_EQ(op::Scale(fn.node(fn.value(repl[1]).def)).scale(), 2.0);
}
