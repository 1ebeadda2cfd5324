//===- QuantWeightsTest.cpp - quantised weights stay quantised on the GPU -===//
//
// compile() keeps a block-quantised weight in its GGUF type when every
// reader decodes it: the GEMV forms (matmul, matmul_id, gated, matmul_add),
// a prefill matmul (decoded to f16 in scratch for cuBLAS) and get_rows of a
// [rows, K] table; the device weight table then holds the file's bytes. A
// weight with another reader falls back to the f16 dequantisation at load
// time, and --verbose names it with the reason; so does a weight read through
// a view whose rows are no longer whole contiguous blocks (a transpose).
// NVRTC only: no GPU needed.
//
//===----------------------------------------------------------------------===//
#include "codegen/cuda/Compile.h"
#include "codegen/cuda/QuantWeights.h"
#include "ir/Builder.h"
#include "runtime/ProgramIO.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

using namespace fg;

namespace {

ExternalWeight zeroBlocks(const std::string &name, TensorType t) {
  ExternalWeight w;
  w.name = name;
  w.type = t;
  w.bytes.assign(static_cast<size_t>(t.bytes()), 0);
  return w;
}

struct Compiled {
  DType graphType = DType::F32; ///< the weight's dtype in the plan's graph
  uint64_t deviceWeightBytes = 0;
  std::string log;
};

Compiled compileWith(int64_t rows, DType q) {
  Graph g;
  Function &fn = g.addFunction("main");
  Builder b(fn);
  TensorType wt(q, {40, 512});
  auto x = b.weight("x", {DType::F32, {rows, 512}}, WeightInit::normal(1, 1.0, 0.0));
  b.result(b.matmul(x, b.weight("w", wt), "y"));
  EXPECT_FALSE(bool(b.finish()));
  CompileOptions co;
  co.pipeline = "canonicalize,cse,dce";
  co.weights = {zeroBlocks("w", wt)};
  Compiled out;
  co.log = [&](LogLevel, llvm::StringRef m) { out.log += m.str() + "\n"; };
  auto plan = compile(g, co);
  if (!plan) {
    ADD_FAILURE() << llvm::toString(plan.takeError());
    return out;
  }
  const Function *f = plan->graph().lookup("main");
  for (const Argument &a : f->arguments())
    if (f->value(a.value).name == "w")
      out.graphType = f->value(a.value).type.dtype;
  const PlanSection *s = plan->section("program");
  EXPECT_NE(s, nullptr);
  if (!s)
    return out;
  auto prog = decodeProgram(s->bytes);
  EXPECT_TRUE(bool(prog)) << (prog ? "" : llvm::toString(prog.takeError()));
  if (prog)
    for (const TensorSlot &slot : prog->weights)
      if (slot.name == "w")
        out.deviceWeightBytes = static_cast<uint64_t>(slot.type.bytes());
  return out;
}

} // namespace

TEST(QuantWeights, DecodeSizedMatmulKeepsTheGgufBytes) {
  for (DType q : {DType::Q8_0, DType::Q4_0, DType::Q4_1, DType::Q4_K, DType::Q6_K}) {
    SCOPED_TRACE(dtypeName(q));
    Compiled c = compileWith(3, q);
    EXPECT_EQ(c.graphType, q);
    EXPECT_EQ(c.deviceWeightBytes, static_cast<uint64_t>(TensorType(q, {40, 512}).bytes()));
    EXPECT_EQ(c.log.find("dequantised to f16"), std::string::npos) << c.log;
  }
}

/// A prefill-sized matmul (16 rows) decodes the weight to f16 in scratch for
/// cuBLAS at each step: the weight itself stays quantised.
TEST(QuantWeights, PrefillSizedMatmulKeepsTheWeightQuantised) {
  Compiled c = compileWith(16, DType::Q4_K);
  EXPECT_EQ(c.graphType, DType::Q4_K);
  EXPECT_EQ(c.deviceWeightBytes, static_cast<uint64_t>(TensorType(DType::Q4_K, {40, 512}).bytes()));
  EXPECT_EQ(c.log.find("dequantised to f16"), std::string::npos) << c.log;
}

/// A reader without a native kernel (get_rows of a batched [B, R, K] table)
/// makes the weight the f16 fallback, named with the reason.
TEST(QuantWeights, BatchedGetRowsFallsBackToF16AndSaysWhy) {
  Graph g;
  Function &fn = g.addFunction("main");
  Builder b(fn);
  TensorType wt(DType::Q8_0, {2, 8, 64});
  auto ids = b.input("ids", {DType::I32, {2, 3}});
  b.result(b.getRows(b.weight("table", wt), ids, "y"));
  ASSERT_FALSE(bool(b.finish()));
  CompileOptions co;
  co.pipeline = "canonicalize,cse,dce";
  co.weights = {zeroBlocks("table", wt)};
  std::string log;
  co.log = [&](LogLevel, llvm::StringRef m) { log += m.str() + "\n"; };
  auto plan = compile(g, co);
  ASSERT_TRUE(bool(plan)) << llvm::toString(plan.takeError());
  const Function *f = plan->graph().lookup("main");
  EXPECT_EQ(f->value(f->arguments()[1].value).type.dtype, DType::F16);
  EXPECT_NE(log.find("table (get_rows of a quantised table other than [rows, K] by [T] ids)"),
            std::string::npos)
      << log;
}

TEST(QuantWeights, TheTargetAnswersPerOperand) {
  Function fn("t");
  Builder b(fn);
  auto x = b.input("x", {DType::F32, {2, 64}});
  auto w = b.weight("w", {DType::Q8_0, {8, 64}});
  auto y = b.matmul(x, w);
  b.result(y);
  b.result(b.getRows(w, b.input("ids", {DType::I32, {3}})));
  ASSERT_FALSE(bool(b.finish()));
  cuda::EmitOptions o;
  std::string why;
  EXPECT_TRUE(cuda::readsQuantizedNatively(fn, fn.node(0), 1, o, &why));
  EXPECT_FALSE(cuda::readsQuantizedNatively(fn, fn.node(0), 0, o, &why));
  EXPECT_NE(why.find("not a weight"), std::string::npos) << why;
  EXPECT_TRUE(cuda::readsQuantizedNatively(fn, fn.node(1), 0, o, &why));
}

/// A GEMV over a view of a quantised weight (the IR refuses `view` of block
/// types, so reshape and transpose): a reshape keeps rows of whole contiguous
/// blocks and the weight stays quantised; a transpose makes K strided, so the
/// weight becomes the f16 fallback, named with the reason, instead of a
/// compile error (the fourth session's "found broken").
TEST(QuantWeights, StridedViewsFallBackToF16) {
  for (bool transposed : {false, true}) {
    SCOPED_TRACE(transposed);
    Graph g;
    Function &fn = g.addFunction("main");
    Builder b(fn);
    TensorType wt(DType::Q8_0, {2, 32, 64});
    auto x = b.weight("x", {DType::F32, {1, 64}}, WeightInit::normal(1, 1.0, 0.0));
    auto w2 = b.reshape(b.weight("w", wt), {64, 64}, "w2");
    b.result(b.matmul(x, transposed ? b.transpose(w2, "wt") : w2, "y"));
    if (llvm::Error e = b.finish())
      FAIL() << llvm::toString(std::move(e));
    CompileOptions co;
    co.pipeline = "canonicalize,cse,dce";
    co.weights = {zeroBlocks("w", wt)};
    std::string log;
    co.log = [&](LogLevel, llvm::StringRef m) { log += m.str() + "\n"; };
    auto plan = compile(g, co);
    ASSERT_TRUE(bool(plan)) << llvm::toString(plan.takeError());
    const Function *f = plan->graph().lookup("main");
    DType got = DType::F32;
    for (const Argument &a : f->arguments())
      if (f->value(a.value).name == "w")
        got = f->value(a.value).type.dtype;
    if (!transposed) {
      EXPECT_EQ(got, DType::Q8_0) << log;
    } else {
      EXPECT_EQ(got, DType::F16);
      EXPECT_NE(log.find("w ('matmul' reads a view whose rows are not whole contiguous blocks)"),
                std::string::npos)
          << log;
    }
  }
}

/// FG_DEBUG_GEMV_WIDE_SCALED=1 and FG_DEBUG_GEMV_NARROW_QUANT=1 (read by
/// compile(), like the other FG_DEBUG_* switches) reach the emitter: each
/// gives the q4_K GEMV another kernel (its name hashes its source; which
/// decoder each option picks is CudaEmit.QuantisedGemvEveryForm's check).
TEST(QuantWeights, DebugSwitchesReachTheEmitter) {
  auto kernelsOf = [](const char *env) {
    if (env)
      ::setenv(env, "1", 1);
    Graph g;
    Function &fn = g.addFunction("main");
    Builder b(fn);
    TensorType wt(DType::Q4_K, {40, 512});
    auto x = b.weight("x", {DType::F32, {1, 512}}, WeightInit::normal(1, 1.0, 0.0));
    b.result(b.matmul(x, b.weight("w", wt), "y"));
    EXPECT_FALSE(bool(b.finish()));
    CompileOptions co;
    co.pipeline = "canonicalize,cse,dce";
    co.weights = {zeroBlocks("w", wt)};
    auto plan = compile(g, co);
    if (env)
      ::unsetenv(env);
    std::string names;
    if (!plan) {
      ADD_FAILURE() << llvm::toString(plan.takeError());
      return names;
    }
    auto prog = decodeProgram(plan->section("program")->bytes);
    EXPECT_TRUE(bool(prog));
    if (prog)
      for (const KernelImage &m : prog->modules)
        names += m.name + " ";
    return names;
  };
  std::string wide = kernelsOf(nullptr), scaled = kernelsOf("FG_DEBUG_GEMV_WIDE_SCALED"),
              narrow = kernelsOf("FG_DEBUG_GEMV_NARROW_QUANT");
  EXPECT_NE(wide.find("matmul"), std::string::npos) << wide;
  EXPECT_NE(wide, scaled);
  EXPECT_NE(wide, narrow);
  EXPECT_NE(scaled, narrow);
  EXPECT_EQ(wide, kernelsOf(nullptr)) << "the same source, the same kernel";
}

/// A quantised initialiser weight (a workload's, a .fg file's) is not
/// retyped to f16 (the copy would not hold the reference's values): a reader
/// that cannot decode it in place (a transposed view: K is strided, the rows
/// are no longer whole blocks) is one error naming the weight, why, and what
/// to do, before any kernel is emitted.
TEST(QuantWeights, InitialiserWeightWithoutAReaderIsRefusedWithAHint) {
  Graph g;
  Function &fn = g.addFunction("decode");
  Builder b(fn);
  auto x = b.weight("x", {DType::F32, {1, 64}}, WeightInit::normal(1, 1.0, 0.0));
  auto w = b.weight("w", {DType::Q5_0, {64, 64}}, WeightInit::normal(2, 0.02, 0.0));
  b.result(b.matmul(x, b.transpose(w, "wt"), "y"));
  if (llvm::Error e = b.finish())
    FAIL() << llvm::toString(std::move(e));
  CompileOptions co;
  co.pipeline = "canonicalize,cse,dce";
  auto plan = compile(g, co);
  ASSERT_FALSE(bool(plan));
  std::string msg = llvm::toString(plan.takeError());
  EXPECT_NE(msg.find("@decode: weight 'w' (q5_0[64, 64], an initialiser) has no CUDA reader: "
                     "'matmul' reads a view whose rows are not whole contiguous blocks"),
            std::string::npos)
      << msg;
  EXPECT_NE(msg.find("--device cpu"), std::string::npos) << msg;
}
