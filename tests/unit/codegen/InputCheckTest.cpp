//===- InputCheckTest.cpp - the device-side input check, without a GPU -------===//
//
// Lowering puts one check kernel first in every entry whose inputs have a
// range (the demo's tokens and positions): its arguments are the status
// words and the checked inputs, every other launch waits for it, the kernel
// compiles with NVRTC for sm_90, and the bindings survive the plan section.
//
//===----------------------------------------------------------------------===//
#include "codegen/cuda/Compile.h"
#include "codegen/cuda/InputCheck.h"
#include "codegen/cuda/Nvrtc.h"
#include "frontends/Frontend.h"
#include "ir/Builder.h"
#include "runtime/ProgramIO.h"
#include "tests/unit/codegen/TestKernelCache.h"

#include "llvm/ADT/SmallString.h"
#include "llvm/Support/Path.h"

#include <gtest/gtest.h>

using namespace fg;

namespace {

CompiledProgram demoProgram() {
  ModelOptions mo;
  mo.ctx = 128;
  mo.prefill = {4};
  auto g = loadModel("demo", mo);
  EXPECT_TRUE(bool(g)) << llvm::toString(g.takeError());
  CompileOptions co;
  co.kernelCacheDir = test::kernelCacheDir();
  auto plan = compile(*g, co);
  EXPECT_TRUE(bool(plan)) << llvm::toString(plan.takeError());
  auto prog = decodeProgram(plan->section("program")->bytes);
  EXPECT_TRUE(bool(prog)) << llvm::toString(prog.takeError());
  return std::move(*prog);
}

} // namespace

/// The check is the first launch of both entries, reads the status words and
/// the two bound inputs where the entry keeps them, and every launch that
/// had no dependency now waits for it.
TEST(InputCheck, FirstLaunchOfEveryEntryWithRanges) {
  CompiledProgram prog = demoProgram();
  ASSERT_EQ(prog.entries.size(), 2u);
  for (const CompiledEntry &e : prog.entries) {
    ASSERT_EQ(e.inputs.size(), 2u);
    EXPECT_EQ(e.inputs[0].bind, (InputBinding{BindKind::Tokens, 0, 512}));
    EXPECT_EQ(e.inputs[1].bind, (InputBinding{BindKind::Positions, 0, 128}));
    ASSERT_GT(e.launches.size(), 2u);
    const LaunchRecord &check = e.launches[0];
    EXPECT_EQ(check.node, kNoNode);
    EXPECT_EQ(check.kind, LaunchRecord::Kind::Kernel);
    EXPECT_TRUE(check.deps.empty());
    EXPECT_EQ(check.what, "the input check of @" + e.name);
    ASSERT_EQ(check.args.size(), 3u);
    EXPECT_EQ(check.args[0], (BufferRef{BufferSpace::Status, 0, 0}));
    EXPECT_EQ(check.args[1], e.inputs[0].where);
    EXPECT_EQ(check.args[2], e.inputs[1].where);
    EXPECT_LT(check.module, prog.modules.size());
    size_t waiting = 0;
    for (size_t i = 1; i < e.launches.size(); ++i) {
      EXPECT_NE(e.launches[i].node, kNoNode);
      EXPECT_FALSE(e.launches[i].deps.empty()) << e.launches[i].what;
      waiting += llvm::is_contained(e.launches[i].deps, 0u);
    }
    EXPECT_GE(waiting, 1u); // at least the token gather
  }
}

/// An entry without ranged inputs (a graph written without bindings) gets no
/// check; ranged inputs of kind other are checked but never overwritten.
TEST(InputCheck, OnlyRangedInputsAreChecked) {
  CompiledEntry e;
  e.name = "main";
  e.inputs.push_back({"free", TensorType(DType::I32, {3}), {BufferSpace::Arena, 0, 0}, {}});
  EXPECT_FALSE(cuda::inputCheckKernel(e).has_value());
  e.inputs.push_back({"ids", TensorType(DType::I64, {5}), {BufferSpace::Arena, 0, 256},
                      {BindKind::Other, -2, 7}});
  e.inputs.push_back({"positions", TensorType(DType::I32, {5}), {BufferSpace::Arena, 0, 512},
                      {BindKind::Positions, 0, 64}});
  auto k = cuda::inputCheckKernel(e);
  ASSERT_TRUE(k.has_value());
  EXPECT_NE(k->second.find("fg::CheckIn<long long, 5LL, -2LL, 7LL, false>"), std::string::npos)
      << k->second;
  EXPECT_NE(k->second.find("fg::CheckIn<int, 5LL, 0LL, 64LL, true>"), std::string::npos);
  EXPECT_NE(k->second.find("unsigned *status, void *in0, void *in1)"), std::string::npos);
  // It compiles for sm_90 (no GPU needed).
  cuda::NvrtcOptions o;
  o.cacheDir = test::kernelCacheDir();
  auto m = cuda::compileCuda(k->second, k->first, "sm_90", o);
  ASSERT_TRUE(bool(m)) << llvm::toString(m.takeError()) << "\n" << k->second;
  EXPECT_FALSE(m->cubin.empty());
}

/// The bindings travel in the program section; a forged kind is refused.
TEST(InputCheck, BindingsRoundTripThroughTheProgramSection) {
  CompiledProgram prog = demoProgram();
  EncodedProgram enc = encodeProgram(prog);
  auto back = decodeProgram(enc.bytes);
  ASSERT_TRUE(bool(back)) << llvm::toString(back.takeError());
  for (size_t i = 0; i < prog.entries.size(); ++i)
    for (size_t k = 0; k < prog.entries[i].inputs.size(); ++k)
      EXPECT_EQ(back->entries[i].inputs[k].bind, prog.entries[i].inputs[k].bind);
  prog.entries[0].inputs[0].bind.lo = 600; // lo > hi
  auto bad = decodeProgram(encodeProgram(prog).bytes);
  ASSERT_FALSE(bool(bad));
  EXPECT_NE(llvm::toString(bad.takeError()).find("bad input binding"), std::string::npos);
}
