//===- ActQuantPlanTest.cpp - a plan says which launches quantise x ------===//
//
// The DP4A GEMVs quantise x to int8 (ir/Quantize.h ActQuant); the plan's
// launch records say which do (LaunchRecord::actQuant), and the CPU executor
// with ExecOptions::cpuActQuant computes those nodes as they do, the others
// exactly. Compiled for sm_90 without a GPU.
//
//===----------------------------------------------------------------------===//
#include "codegen/cuda/Compile.h"
#include "ir/Builder.h"
#include "ir/Quantize.h"
#include "runtime/Compare.h"
#include "runtime/Executor.h"
#include "runtime/ProgramIO.h"
#include "runtime/reference/Interpreter.h"
#include "tests/unit/codegen/TestKernelCache.h"

#include <gtest/gtest.h>

#include <random>

using namespace fg;

namespace {

ExternalWeight quantisedWeight(const std::string &name, TensorType t, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> nd(0.0f, 0.05f);
  std::vector<float> v(static_cast<size_t>(t.numElements()));
  for (float &f : v)
    f = nd(rng);
  ExternalWeight w;
  w.name = name;
  w.type = t;
  w.bytes.resize(static_cast<size_t>(t.bytes()));
  EXPECT_TRUE(quantizeRow(t.dtype, v.data(), w.bytes.data(), t.numElements()));
  return w;
}

std::vector<float> runCpu(const Plan &plan, bool actQuant, llvm::StringRef out) {
  ExecOptions eo;
  eo.cpuActQuant = actQuant;
  auto ex = Executor::create(plan, eo);
  if (!ex) {
    ADD_FAILURE() << llvm::toString(ex.takeError());
    return {};
  }
  if (llvm::Error e = ex->run("main")) {
    ADD_FAILURE() << llvm::toString(std::move(e));
    return {};
  }
  auto y = ex->output(out);
  if (!y) {
    ADD_FAILURE() << llvm::toString(y.takeError());
    return {};
  }
  return y->toFloats();
}

} // namespace

/// x [1, 2048] against a 4.7 MB q4_K weight (above the DP4A rule's 4 MiB:
/// on DP4A) and a 36 KB one (below it: the tensor-core GEMV). The big
/// launch records Int8, the small one Exact; the CPU executor with
/// cpuActQuant gives the big result as evalNode with Int8 does (the same
/// bits), different from the exact one, and the small one exactly.
TEST(ActQuantPlan, Dp4aLaunchesAreRecordedAndReproduced) {
  Graph g;
  Function &fn = g.addFunction("main");
  Builder b(fn);
  const TensorType xt{DType::F32, {1, 2048}}, big{DType::Q4_K, {4096, 2048}},
      small{DType::Q4_K, {16, 2048}};
  const WeightInit xInit = WeightInit::normal(5, 1.0, 0.0);
  ValueId x = b.weight("x", xt, xInit);
  b.result(b.matmul(x, b.weight("w_big", big), "y_big"));
  b.result(b.matmul(x, b.weight("w_small", small), "y_small"));
  ASSERT_FALSE(bool(b.finish()));
  CompileOptions co;
  co.pipeline = "canonicalize,cse,dce";
  co.arch = "sm_90";
  co.kernelCacheDir = test::kernelCacheDir();
  co.weights = {quantisedWeight("w_big", big, 1), quantisedWeight("w_small", small, 2)};
  auto plan = compile(g, co);
  ASSERT_TRUE(bool(plan)) << llvm::toString(plan.takeError());

  const PlanSection *s = plan->section("program");
  ASSERT_NE(s, nullptr);
  auto prog = decodeProgram(s->bytes);
  ASSERT_TRUE(bool(prog)) << llvm::toString(prog.takeError());
  const Function *pf = plan->graph().lookup("main");
  ASSERT_NE(pf, nullptr);
  int int8 = 0, exact = 0;
  for (const LaunchRecord &l : prog->entries[0].launches) {
    if (l.op != OpKind::MatMul)
      continue;
    const std::string &name = pf->value(pf->node(l.node).result()).name;
    if (name == "y_big") {
      EXPECT_EQ(l.actQuant, ActQuant::Int8) << l.what;
      ++int8;
    } else {
      EXPECT_EQ(name, "y_small");
      EXPECT_EQ(l.actQuant, ActQuant::Exact) << l.what;
      ++exact;
    }
  }
  EXPECT_EQ(int8, 1);
  EXPECT_EQ(exact, 1);

  const std::vector<float> bigExact = runCpu(*plan, false, "y_big"),
                           bigInt8 = runCpu(*plan, true, "y_big");
  EXPECT_EQ(runCpu(*plan, true, "y_small"), runCpu(*plan, false, "y_small"));
  EXPECT_GT(normalizedError(bigInt8, bigExact), 1e-4) << "cpuActQuant changed nothing";
  EXPECT_LE(normalizedError(bigInt8, bigExact), 2e-2);

  // The same bits as the reference's Int8 matmul on the same operands.
  HostTensor xv;
  ASSERT_FALSE(bool(materializeInit(xInit, xt, xv)));
  HostTensor wv{big, co.weights[0].bytes};
  Graph one;
  Function &f1 = one.addFunction("main");
  Builder b1(f1);
  b1.result(b1.matmul(b1.input("x", xt), b1.input("w", big)));
  ASSERT_FALSE(bool(b1.finish()));
  llvm::SmallVector<HostTensor, 1> r;
  ASSERT_FALSE(bool(evalNode(f1.nodes().back(), {&xv, &wv}, r, ActQuant::Int8)));
  EXPECT_EQ(r[0].toFloats(), bigInt8);
}

/// The grouped expert GEMM over q4_K, q5_K, q6_K, q8_0 and q4_0 experts on integer tensor cores
/// (FG_DEBUG_MOE_INT8=2, kernels/moe_i8.cuh) at a prefill chunk of 40
/// tokens: its GEMM launch records Int8 (the routing launch, which also
/// quantises x, Exact), and the CPU executor with cpuActQuant computes the
/// expert matmul with int8 x — near the exact result but not equal; with
/// the option off (0) nothing records Int8 and cpuActQuant changes nothing.
TEST(ActQuantPlan, GroupedInt8ExpertsAreRecordedAndReproduced) {
  for (DType wt : {DType::Q4_K, DType::Q5_K, DType::Q6_K, DType::Q8_0, DType::Q4_0}) {
  SCOPED_TRACE(std::string(dtypeName(wt)));
  auto build = [wt] {
    Graph g;
    Function &fn = g.addFunction("main");
    Builder b(fn);
    ValueId x = b.weight("x", {DType::F32, {40, 1, 512}}, WeightInit::normal(3, 1.0, 0.0));
    ValueId ids = b.weight("ids", {DType::I32, {40, 2}}, WeightInit::uniform(4, 0.0, 7.0));
    ValueId w = b.weight("w", {wt, {8, 96, 512}}, WeightInit::normal(5, 0.05, 0.0));
    b.result(b.matmulId(x, w, ids, "y"));
    EXPECT_FALSE(bool(b.finish()));
    return g;
  };
  auto compileWith = [&](const char *int8) {
    if (int8)
      setenv("FG_DEBUG_MOE_INT8", int8, 1);
    else
      unsetenv("FG_DEBUG_MOE_INT8");
    CompileOptions co;
    co.pipeline = "canonicalize,cse,dce";
    co.arch = "sm_90";
    co.kernelCacheDir = test::kernelCacheDir();
    auto plan = compile(build(), co);
    unsetenv("FG_DEBUG_MOE_INT8");
    return plan;
  };
  auto plan = compileWith("2"); // every type, q6_K too
  ASSERT_TRUE(bool(plan)) << llvm::toString(plan.takeError());
  const PlanSection *s = plan->section("program");
  ASSERT_NE(s, nullptr);
  auto prog = decodeProgram(s->bytes);
  ASSERT_TRUE(bool(prog)) << llvm::toString(prog.takeError());
  std::vector<ActQuant> acts;
  for (const LaunchRecord &l : prog->entries[0].launches)
    if (l.op == OpKind::MatMulId)
      acts.push_back(l.actQuant);
  EXPECT_EQ(acts, (std::vector<ActQuant>{ActQuant::Exact, ActQuant::Int8})) << "route, GEMM";
  const std::vector<float> exact = runCpu(*plan, false, "y"), int8 = runCpu(*plan, true, "y");
  ASSERT_EQ(exact.size(), 40u * 2 * 96);
  EXPECT_GT(normalizedError(int8, exact), 1e-5) << "cpuActQuant changed nothing";
  EXPECT_LE(normalizedError(int8, exact), 2e-2);

  auto plain = compileWith("0");
  ASSERT_TRUE(bool(plain)) << llvm::toString(plain.takeError());
  auto plainProg = decodeProgram(plain->section("program")->bytes);
  ASSERT_TRUE(bool(plainProg));
  EXPECT_EQ(quantisedXLaunches(plainProg->entries[0]), 0u);
  EXPECT_EQ(runCpu(*plain, true, "y"), runCpu(*plain, false, "y"));
  }
}
