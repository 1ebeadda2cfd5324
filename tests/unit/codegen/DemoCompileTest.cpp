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
#include "tests/unit/codegen/TestKernelCache.h"

#include "llvm/ADT/SmallString.h"
#include "llvm/Support/Path.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <set>

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
  co.kernelCacheDir = test::kernelCacheDir();
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
  // Program counters: each flash-decoding attention launch (one per layer of
  // decode) has its own range, [T · Hkv] unsigned, inside counterBytes,
  // overlapping no other; prefill_64's attention is the flash-attention
  // prefill kernel, which has none. Each entry's greedy-token launch (its
  // last, no node) has one too. The status words' device mirror is one more
  // range, which every input check (the first launch) and greedy token share.
  std::vector<std::pair<uint64_t, uint64_t>> counterRanges;
  std::set<uint64_t> mirrors, drawSettings;
  size_t attentionLaunches = 0;
  for (const CompiledEntry &e : prog->entries) {
    launches += e.launches.size();
    for (const LaunchRecord &l : e.launches) {
      if (l.kind == LaunchRecord::Kind::Kernel) {
        EXPECT_LT(l.module, prog->modules.size());
      }
      // (Decode attention writes its K and V rows: fused.rope_kv_attention.)
      const bool attention = l.op == OpKind::Attention || l.op == OpKind::FusedRopeKvAttention;
      attentionLaunches += attention;
      for (size_t a = 0; a < l.args.size(); ++a) {
        const BufferRef &r = l.args[a];
        if (r.space != BufferSpace::Counters)
          continue;
        const bool isCheck = &l == &e.launches.front(), isGreedy = &l == &e.launches.back();
        if (isCheck || (isGreedy && a == 3)) { // the mirror
          mirrors.insert(r.offset);
          continue;
        }
        if (isGreedy && a == 5) { // the program's draw settings, shared
          drawSettings.insert(r.offset);
          continue;
        }
        if (l.node == kNoNode) {
          EXPECT_TRUE(isGreedy) << l.what;
        } else {
          EXPECT_TRUE(attention) << l.what;
        }
        counterRanges.push_back({r.offset, r.offset});
      }
    }
  }
  EXPECT_GT(launches, 0u);
  EXPECT_EQ(attentionLaunches, 2u * 2u); // 2 layers x (decode, prefill)
  ASSERT_EQ(mirrors.size(), 1u);
  ASSERT_EQ(drawSettings.size(), 1u);
  counterRanges.push_back({*mirrors.begin(), *mirrors.begin()});
  counterRanges.push_back({*drawSettings.begin(), *drawSettings.begin()});
  // 2 layers of decode, 2 greedy launches, the mirror, the draw settings
  ASSERT_EQ(counterRanges.size(), 6u);
  std::sort(counterRanges.begin(), counterRanges.end());
  for (size_t i = 0; i + 1 < counterRanges.size(); ++i)
    EXPECT_LT(counterRanges[i].first, counterRanges[i + 1].first);
  EXPECT_GT(prog->counterBytes, counterRanges.back().first);
}

TEST(DemoCompile, UnfusedKernelsCompileForSm90) { compileDemo(false); }
TEST(DemoCompile, FusedKernelsCompileForSm90) { compileDemo(true); }

} // namespace
