// The worked example of docs/ARCHITECTURE.md ("Adding an op"): `neg` was added
// by three lines in three files — its row in ir/Ops.def (FG_UNARY), its
// reference in runtime/reference/Ops.cpp (evalNeg) and its kernel line in
// codegen/cuda/kernels/elementwise.cuh (struct UnNeg). Everything below
// follows from those: the text form, the typed Builder path, the CPU
// reference, the elementwise emitter's policy and an NVRTC compile for sm_90
// (the GPU test, tests/gpu/OpsGpuTest.cpp, runs it through op::kUnaryOps).
#include "codegen/cuda/Kernel.h"
#include "codegen/cuda/Nvrtc.h"
#include "ir/Builder.h"
#include "ir/OpViews.h"
#include "ir/Parser.h"
#include "ir/Printer.h"
#include "runtime/reference/Interpreter.h"
#include "tests/unit/codegen/TestKernelCache.h"

#include "llvm/ADT/SmallString.h"
#include "llvm/Support/Path.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

using namespace fg;

namespace {

/// The row gives the op its mnemonic, traits, operand and place among the unary ops.
TEST(NewOpWorkedExample, TheRowDefinesTheOp) {
  ASSERT_EQ(lookupOp("neg"), OpKind::Neg);
  const OpInfo &info = opInfo(OpKind::Neg);
  EXPECT_TRUE(info.has(kElementwise));
  EXPECT_EQ(info.maxOperands(), 1u);
  EXPECT_EQ(info.operandNames[0], "x");
  EXPECT_TRUE(info.attrs.empty());
  EXPECT_NE(std::find(std::begin(op::kUnaryOps), std::end(op::kUnaryOps), OpKind::Neg),
            std::end(op::kUnaryOps));
}

/// Text in, text out; the typed Builder path builds the same node.
TEST(NewOpWorkedExample, TextAndBuilder) {
  const char *text = "graph @f(input %x: f16[2, 3]) {\n"
                     "  %y = neg(%x) : f16[2, 3]\n"
                     "  return %y\n"
                     "}\n";
  auto g = parseGraph(text, "neg.fg");
  ASSERT_TRUE(static_cast<bool>(g)) << llvm::toString(g.takeError());
  EXPECT_EQ(printToString(*g), text);

  Graph built;
  Function &fn = built.addFunction("f");
  Builder b(fn);
  ValueId x = b.input("x", {DType::F16, {2, 3}});
  b.result(b.create(op::NegArgs{.x = x}, "y"));
  ASSERT_FALSE(static_cast<bool>(b.finish()));
  EXPECT_EQ(printToString(built), text);
}

/// The CPU reference: -x, exactly, in f32 and f16 storage.
TEST(NewOpWorkedExample, CpuReference) {
  for (DType dt : {DType::F32, DType::F16}) {
    Graph g;
    Function &fn = g.addFunction("f");
    Builder b(fn);
    ValueId x = b.input("x", {dt, {5}});
    b.result(b.unary(OpKind::Neg, x, "y"));
    ASSERT_FALSE(static_cast<bool>(b.finish()));
    HostTensor in = HostTensor::fromFloats({dt, {5}}, {-2.5f, 0.0f, 1.0f, 3.25f, -0.5f});
    const Node &node = fn.nodes().front();
    llvm::SmallVector<HostTensor, 1> out;
    ASSERT_FALSE(static_cast<bool>(evalNode(node, {&in}, out)));
    ASSERT_EQ(out.size(), 1u);
    EXPECT_EQ(out[0].type, TensorType(dt, {5}));
    std::vector<float> y = out[0].toFloats();
    EXPECT_EQ(y, (std::vector<float>{2.5f, 0.0f, -1.0f, -3.25f, 0.5f}));
    EXPECT_TRUE(std::signbit(y[1])); // -0, not 0 - 0
  }
}

/// The emitter picks fg::UnNeg for it (no emitter code was written) and the
/// kernel compiles with NVRTC for sm_90.
TEST(NewOpWorkedExample, KernelCompiles) {
  Function fn("f");
  Builder b(fn);
  ValueId x = b.input("x", {DType::F32, {7, 33}});
  b.result(b.unary(OpKind::Neg, x, "y"));
  ASSERT_FALSE(static_cast<bool>(b.finish()));
  const Node &node = fn.nodes().front();
  auto launches = cuda::emitKernel(fn, node, cuda::contiguousLayouts(fn, node));
  ASSERT_TRUE(static_cast<bool>(launches)) << llvm::toString(launches.takeError());
  ASSERT_EQ(launches->size(), 1u);
  const auto &k = std::get<cuda::KernelSpec>(launches->front());
  EXPECT_NE(k.source.find("fg::EwUnary<fg::UnNeg>"), std::string::npos) << k.source;

  cuda::NvrtcOptions o;
  o.cacheDir = test::kernelCacheDir();
  auto m = cuda::compileCuda(k.source, k.name, "sm_90", o);
  ASSERT_TRUE(static_cast<bool>(m)) << llvm::toString(m.takeError()) << "\n" << k.source;
  EXPECT_FALSE(m->cubin.empty());
}

} // namespace
