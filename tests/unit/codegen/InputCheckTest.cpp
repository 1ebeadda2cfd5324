//===- InputCheckTest.cpp - the device-side input check, without a GPU -------===//
//
// Lowering puts one check kernel first in every entry whose inputs have a
// range (the demo's tokens and positions): its arguments are the status
// words, the checked inputs' arena slots and their pinned staging (it copies
// them in, so a step is one graph launch), every other launch waits for it,
// the kernel compiles with NVRTC for sm_90, and the bindings and staging
// references survive the plan section (a forged one is refused).
//
//===----------------------------------------------------------------------===//
#include "codegen/cuda/InputCheck.h"
#include "codegen/cuda/Compile.h"
#include "codegen/cuda/Nvrtc.h"
#include "frontends/Frontend.h"
#include "ir/Builder.h"
#include "runtime/ProgramIO.h"
#include "tests/unit/codegen/TestKernelCache.h"

#include "llvm/ADT/SmallString.h"
#include "llvm/Support/Path.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>

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

/// The check is the first launch of both entries, writes the status words,
/// copies the two bound inputs from their staging to where the entry keeps
/// them, and every launch that had no dependency now waits for it; no other
/// launch reads a staging.
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
    ASSERT_EQ(check.args.size(), 6u);
    EXPECT_EQ(check.args[0], (BufferRef{BufferSpace::Status, 0, 0}));
    // The status words' device mirror: one counters range for the program,
    // the greedy token's too (check.cuh: read there, not over the bus).
    EXPECT_EQ(check.args[1].space, BufferSpace::Counters);
    EXPECT_LE(check.args[1].offset + kStatusBytes, prog.counterBytes);
    EXPECT_EQ(check.args[1], prog.entries[0].launches[0].args[1]);
    EXPECT_EQ(check.args[1], e.launches.back().args[3]);
    EXPECT_EQ(check.args[2], e.inputs[0].where);
    EXPECT_EQ(check.args[3], e.inputs[1].where);
    EXPECT_EQ(check.args[4], (BufferRef{BufferSpace::Staging, 0, 0}));
    EXPECT_EQ(check.args[5], (BufferRef{BufferSpace::Staging, 1, 0}));
    EXPECT_LT(check.module, prog.modules.size());
    size_t waiting = 0;
    for (size_t i = 1; i < e.launches.size(); ++i) {
      // Only the greedy-token launch, the last, has no node either.
      if (i + 1 < e.launches.size()) {
        EXPECT_NE(e.launches[i].node, kNoNode);
      }
      for (const BufferRef &a : e.launches[i].args)
        EXPECT_NE(a.space, BufferSpace::Staging) << e.launches[i].what;
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
  e.inputs.push_back(
      {"ids", TensorType(DType::I64, {5}), {BufferSpace::Arena, 0, 256}, {BindKind::Other, -2, 7}});
  e.inputs.push_back({"positions",
                      TensorType(DType::I32, {5}),
                      {BufferSpace::Arena, 0, 512},
                      {BindKind::Positions, 0, 64}});
  auto k = cuda::inputCheckKernel(e);
  ASSERT_TRUE(k.has_value());
  EXPECT_NE(k->second.find("fg::CheckIn<long long, 5LL, -2LL, 7LL, false>"), std::string::npos)
      << k->second;
  EXPECT_NE(k->second.find("fg::CheckIn<int, 5LL, 0LL, 64LL, true>"), std::string::npos);
  // Token ids may be fed by the device (kFedToken): the demo's tokens say so.
  CompiledEntry d = demoProgram().entries[0];
  auto dk = cuda::inputCheckKernel(d);
  ASSERT_TRUE(dk.has_value());
  EXPECT_NE(dk->second.find("LL, 0LL, 512LL, false, true>"), std::string::npos)
      << dk->second;
  EXPECT_NE(k->second.find("unsigned *status, unsigned *mirror, void *in0, void *in1, "
                           "const void *src0, const void *src1)"),
            std::string::npos)
      << k->second;
  // The launch takes the staging of inputs 1 and 2 (the entry's indices).
  e.launches.push_back({});
  cuda::KernelSources sources;
  sources.sourceOfLaunch.emplace_back(1, 0);
  CompiledProgram owner;
  cuda::SlotTables tables(owner);
  cuda::addInputCheck(e, sources, tables);
  ASSERT_EQ(e.launches.size(), 2u);
  ASSERT_EQ(e.launches[0].args.size(), 6u);
  EXPECT_EQ(e.launches[0].args[1], (BufferRef{BufferSpace::Counters, 0, 0}));
  EXPECT_EQ(owner.counterBytes, kStatusBytes);
  EXPECT_EQ(e.launches[0].args[2], e.inputs[1].where);
  EXPECT_EQ(e.launches[0].args[3], e.inputs[2].where);
  EXPECT_EQ(e.launches[0].args[4], (BufferRef{BufferSpace::Staging, 1, 0}));
  EXPECT_EQ(e.launches[0].args[5], (BufferRef{BufferSpace::Staging, 2, 0}));
  EXPECT_EQ(e.launches[1].deps, std::vector<uint32_t>{0});
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
  for (size_t i = 0; i < prog.entries.size(); ++i)
    EXPECT_EQ(back->entries[i].launches[0].args, prog.entries[i].launches[0].args);
  prog.entries[0].inputs[0].bind.lo = 600; // lo > hi
  auto bad = decodeProgram(encodeProgram(prog).bytes);
  ASSERT_FALSE(bool(bad));
  EXPECT_NE(llvm::toString(bad.takeError()).find("bad input binding"), std::string::npos);
}

/// The runner indexes its tables with the references a plan holds: an index
/// past them is a corrupt file, named, not an access out of bounds at load.
TEST(InputCheck, ReferencesOutsideTheTablesAreRefused) {
  const CompiledProgram good = demoProgram();
  auto refused = [](const CompiledProgram &p) {
    auto r = decodeProgram(encodeProgram(p).bytes);
    return r ? std::string("accepted") : llvm::toString(r.takeError());
  };
  CompiledProgram p = good;
  p.entries[0].launches[0].args[4].index = 2; // the entry has two inputs
  EXPECT_NE(refused(p).find("staging of a missing input"), std::string::npos) << refused(p);
  p = good;
  p.entries[0].outputs[0].where = {BufferSpace::Staging, 0, 0};
  EXPECT_NE(refused(p).find("input staging outside a kernel's arguments"), std::string::npos)
      << refused(p);
  p = good;
  for (LaunchRecord &l : p.entries[1].launches)
    for (BufferRef &a : l.args)
      if (a.space == BufferSpace::Weight)
        a.index = static_cast<uint32_t>(p.weights.size());
  EXPECT_NE(refused(p).find("reference to a missing weight"), std::string::npos) << refused(p);
  p = good;
  for (LaunchRecord &l : p.entries[1].launches)
    for (BufferRef &a : l.args)
      if (a.space == BufferSpace::State)
        a.index = 1000;
  EXPECT_NE(refused(p).find("reference to a missing state buffer"), std::string::npos)
      << refused(p);
  EXPECT_EQ(refused(good), "accepted");
}

/// The embedding gather in the check's launch (FG_DEBUG_CHECK_GATHER,
/// EmitOptions::checkGathers): the demo's decode entry loses its get_rows
/// launch into the check — one launch fewer, the check's record naming it,
/// its arguments the check's then the gather's (output in the arena, the
/// table a weight, the ids the tokens input's slot), the gather's dependents
/// now waiting for the check — and the merged kernel compiles (compile()
/// builds every module with NVRTC). The prefill entry (4 tokens) keeps its
/// gather.
TEST(InputCheck, OneTokensGatherRunsInTheCheck) {
  const CompiledProgram off = demoProgram();
  ::setenv("FG_DEBUG_CHECK_GATHER", "1", 1);
  const CompiledProgram on = demoProgram();
  ::unsetenv("FG_DEBUG_CHECK_GATHER");
  ASSERT_EQ(on.entries.size(), off.entries.size());
  auto getRows = [](const CompiledEntry &e) {
    return std::count_if(e.launches.begin(), e.launches.end(), [](const LaunchRecord &l) {
      return l.node != kNoNode && l.op == OpKind::GetRows;
    });
  };
  for (size_t i = 0; i < on.entries.size(); ++i) {
    const CompiledEntry &a = off.entries[i], &b = on.entries[i];
    SCOPED_TRACE(a.name);
    const bool decode = a.name == "decode";
    ASSERT_EQ(getRows(a), 1);
    EXPECT_EQ(getRows(b), decode ? 0 : 1);
    ASSERT_EQ(b.launches.size(), a.launches.size() - (decode ? 1 : 0));
    const LaunchRecord &check = b.launches.front();
    EXPECT_EQ(check.node, kNoNode);
    EXPECT_TRUE(check.deps.empty());
    if (!decode) {
      EXPECT_EQ(check.symbol, a.launches.front().symbol);
      continue;
    }
    EXPECT_NE(check.symbol, a.launches.front().symbol);
    EXPECT_NE(check.what.find(" + "), std::string::npos) << check.what;
    // The check's own arguments, then the gather's three.
    const LaunchRecord &c0 = a.launches.front();
    const LaunchRecord *gather = nullptr;
    uint32_t gatherAt = 0;
    for (uint32_t j = 0; j < a.launches.size(); ++j)
      if (a.launches[j].op == OpKind::GetRows && a.launches[j].node != kNoNode)
        gather = &a.launches[j], gatherAt = j;
    ASSERT_NE(gather, nullptr);
    ASSERT_EQ(check.args.size(), c0.args.size() + 3);
    for (size_t k = 0; k < c0.args.size(); ++k)
      EXPECT_EQ(check.args[k], c0.args[k]);
    for (size_t k = 0; k < 3; ++k)
      EXPECT_EQ(check.args[c0.args.size() + k], gather->args[k]);
    EXPECT_EQ(gather->args[1].space, BufferSpace::Weight);
    EXPECT_EQ(gather->args[2], a.inputs[0].where); // the tokens input's slot
    // Whatever waited for the gather waits for the check; nothing else moved.
    for (uint32_t j = 1, k = 1; j < a.launches.size(); ++j) {
      if (j == gatherAt)
        continue;
      const LaunchRecord &x = a.launches[j], &y = b.launches[k++];
      EXPECT_EQ(x.symbol, y.symbol);
      std::vector<uint32_t> want;
      for (uint32_t d : x.deps)
        want.push_back(d == gatherAt ? 0 : d > gatherAt ? d - 1 : d);
      std::sort(want.begin(), want.end());
      want.erase(std::unique(want.begin(), want.end()), want.end());
      std::vector<uint32_t> got = y.deps;
      std::sort(got.begin(), got.end());
      EXPECT_EQ(got, want) << y.what;
    }
  }
}
