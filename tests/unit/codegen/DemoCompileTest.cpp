//===- DemoCompileTest.cpp - the demo's kernels compile for sm_90 in CI ----===//
//
// Every kernel the emitters produce for the demo graph (both entries, fused
// and unfused) compiles with NVRTC for sm_90, and the program round-trips
// through its plan section — no GPU needed.
//
//===----------------------------------------------------------------------===//
#include "codegen/cuda/Compile.h"
#include "frontends/Frontend.h"
#include "runtime/ProgramIO.h"

#include "llvm/ADT/SmallString.h"
#include "llvm/Support/Path.h"

#include <gtest/gtest.h>

using namespace fg;

namespace {

void compileDemo(bool fusion) {
  ModelOptions mo;
  mo.ctx = 256;
  auto g = loadModel("demo", mo);
  ASSERT_TRUE(bool(g)) << llvm::toString(g.takeError());
  CompileOptions co;
  co.fusion = fusion;
  co.arch = "sm_90";
  llvm::SmallString<256> cache;
  llvm::sys::path::system_temp_directory(/*ErasedOnReboot=*/true, cache);
  llvm::sys::path::append(cache, "fg-kernel-cache-tests"); // never the source tree
  co.kernelCacheDir = std::string(cache);
  auto plan = compile(*g, co);
  ASSERT_TRUE(bool(plan)) << llvm::toString(plan.takeError());
  const PlanSection *section = plan->section("program");
  ASSERT_NE(section, nullptr);
  auto prog = decodeProgram(section->bytes);
  ASSERT_TRUE(bool(prog)) << llvm::toString(prog.takeError());
  EXPECT_EQ(prog->arch, "sm_90");
  ASSERT_EQ(prog->entries.size(), 2u);
  for (const KernelImage &m : prog->modules) {
    EXPECT_GT(m.cubin.size(), 4u) << m.name;
    EXPECT_EQ(std::string(m.cubin.begin(), m.cubin.begin() + 4), "\x7f" "ELF") << m.name;
    EXPECT_NE(m.ptx.find(".target sm_90"), std::string::npos) << m.name;
  }
  size_t launches = 0;
  for (const CompiledEntry &e : prog->entries) {
    launches += e.launches.size();
    for (const LaunchRecord &l : e.launches) {
      if (l.kind == LaunchRecord::Kind::Kernel) {
        EXPECT_LT(l.module, prog->modules.size());
      }
    }
  }
  EXPECT_GT(launches, 0u);
}

TEST(DemoCompile, UnfusedKernelsCompileForSm90) { compileDemo(false); }
TEST(DemoCompile, FusedKernelsCompileForSm90) { compileDemo(true); }

} // namespace
