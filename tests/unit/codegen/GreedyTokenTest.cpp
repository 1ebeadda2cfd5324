//===- GreedyTokenTest.cpp - the greedy-token launch, without a GPU ---------===//
//
// Lowering ends every entry with an f32 `logits` [rows, vocab] result with one
// launch that takes the first argmax of the last row on the device
// (codegen/cuda/GreedyToken.h): it reads that row where the entry keeps it,
// its own counters, the status words and their mirror, the last position
// (a draw's counter) and the program's draw settings (kernels/sample.cuh),
// waits for every launch that had no successor, has no node, compiles with
// NVRTC for sm_90 (with and without positions), and survives the plan section.
// An entry without logits gets none.
//
//===----------------------------------------------------------------------===//
#include "codegen/cuda/GreedyToken.h"
#include "codegen/cuda/Compile.h"
#include "codegen/cuda/Nvrtc.h"
#include "frontends/Frontend.h"
#include "ir/Builder.h"
#include "runtime/ProgramIO.h"
#include "tests/unit/codegen/SwitchedProgram.h"

#include <gtest/gtest.h>

using namespace fg;
using test::compiledProgram;

TEST(GreedyToken, LastLaunchOfTheDemosEntries) {
  ModelOptions mo;
  mo.ctx = 128;
  mo.prefill = {4};
  auto g = loadModel("demo", mo);
  ASSERT_TRUE(bool(g)) << llvm::toString(g.takeError());
  CompiledProgram prog = compiledProgram(*g);
  ASSERT_EQ(prog.entries.size(), 2u);
  for (const CompiledEntry &e : prog.entries) {
    const IoBinding *logits = nullptr;
    for (const IoBinding &o : e.outputs)
      if (o.name == "logits")
        logits = &o;
    ASSERT_NE(logits, nullptr);
    const int64_t rows = logits->type.shape[0], vocab = logits->type.shape[1];
    ASSERT_EQ(vocab, 512);
    ASSERT_GE(e.launches.size(), 3u);
    const LaunchRecord &l = e.launches.back();
    EXPECT_EQ(l.node, kNoNode);
    EXPECT_EQ(l.what, "the greedy token of @" + e.name);
    EXPECT_EQ(l.grid[0], 1u); // 512 values: one block of 1024 threads (EmitOptions::greedyThreads)
    EXPECT_EQ(l.block[0], 1024u);
    // A draw's shared memory (the runner gives it only while drawing).
    EXPECT_EQ(l.sharedBytes, kDeviceSampleCandidates * 16 + 2048);
    ASSERT_EQ(l.args.size(), 6u);
    BufferRef lastRow = logits->where;
    lastRow.offset += static_cast<uint64_t>((rows - 1) * vocab * 4);
    EXPECT_EQ(l.args[0], lastRow) << e.name << ": rows " << rows;
    EXPECT_EQ(l.args[1].space, BufferSpace::Counters);
    EXPECT_LE(l.args[1].offset + 24, prog.counterBytes);
    EXPECT_EQ(l.args[2], (BufferRef{BufferSpace::Status, 0, 0}));
    // The status words' device mirror, the input checks' (InputCheckTest).
    EXPECT_EQ(l.args[3], e.launches.front().args[1]);
    // The draw's counter: the last element of the `positions` input.
    const IoBinding *positions = nullptr;
    for (const IoBinding &in : e.inputs)
      if (in.name == "positions")
        positions = &in;
    ASSERT_NE(positions, nullptr);
    BufferRef lastPos = positions->where;
    lastPos.offset += static_cast<uint64_t>((positions->type.shape[0] - 1) * 4);
    EXPECT_EQ(l.args[4], lastPos) << e.name;
    // The draw settings: one counters range (48 bytes) for the program.
    EXPECT_EQ(l.args[5].space, BufferSpace::Counters);
    EXPECT_LE(l.args[5].offset + sizeof(DeviceSampleParams), prog.counterBytes);
    EXPECT_EQ(l.args[5], prog.entries[0].launches.back().args[5]);
    EXPECT_NE(l.args[5], l.args[1]);
    EXPECT_NE(l.args[5], l.args[3]);
    // It waits for every other sink: no launch but it is left without a
    // successor.
    std::vector<bool> waited(e.launches.size(), false);
    for (const LaunchRecord &x : e.launches)
      for (uint32_t d : x.deps)
        waited[d] = true;
    for (size_t i = 0; i + 1 < e.launches.size(); ++i)
      EXPECT_TRUE(waited[i]) << e.launches[i].what;
    EXPECT_FALSE(l.deps.empty());
  }
  // Counters of different launches do not overlap (the attention's and the
  // greedy launch's of each entry).
  std::vector<std::pair<uint64_t, uint64_t>> ranges;
  for (const CompiledEntry &e : prog.entries)
    ranges.push_back({e.launches.back().args[1].offset, e.launches.back().args[1].offset + 24});
  EXPECT_NE(ranges[0].first, ranges[1].first);
}

TEST(GreedyToken, GridSpansALargeVocabularyAndCompiles) {
  cuda::GreedyKernel k = cuda::greedyTokenKernel(128256);
  EXPECT_EQ(k.blocks, 32u); // ceil(128256 / 4096): 1024 threads, 4 values each
  EXPECT_EQ(k.threads, 1024u);
  EXPECT_EQ(cuda::greedyTokenKernel(128256, true, 256).blocks, 126u); // ceil(128256 / 1024)
  EXPECT_NE(k.source.find("static constexpr long long V = 128256LL;"), std::string::npos)
      << k.source;
  EXPECT_NE(k.source.find("static constexpr bool kHasPositions = true;"), std::string::npos);
  EXPECT_NE(k.source.find("static constexpr int kCap = 2048;"), std::string::npos);
  EXPECT_EQ(cuda::greedyTokenKernel(1).blocks, 1u);
  cuda::NvrtcOptions o;
  o.cacheDir = test::kernelCacheDir();
  auto m = cuda::compileCuda(k.source, k.symbol, "sm_90", o);
  ASSERT_TRUE(bool(m)) << llvm::toString(m.takeError()) << "\n" << k.source;
  EXPECT_FALSE(m->cubin.empty());
  cuda::GreedyKernel noPos = cuda::greedyTokenKernel(7, false);
  EXPECT_NE(noPos.source.find("static constexpr bool kHasPositions = false;"), std::string::npos);
  auto m2 = cuda::compileCuda(noPos.source, noPos.symbol, "sm_90", o);
  ASSERT_TRUE(bool(m2)) << llvm::toString(m2.takeError());
}

/// An entry's `positions` input (unused by its nodes too) gives the draw's
/// counter; without one the kernel reads none.
TEST(GreedyToken, PositionsInputIsTheDrawsCounter) {
  for (bool withPositions : {true, false}) {
    Graph g;
    Function &fn = g.addFunction("main");
    Builder b(fn);
    auto a = b.input("a", {DType::I32, {2, 9}});
    if (withPositions)
      b.input("positions", {DType::I32, {2}});
    b.result(b.convert(a, DType::F32, "logits"));
    ASSERT_FALSE(bool(b.finish()));
    CompiledProgram p = compiledProgram(g);
    ASSERT_EQ(p.entries.size(), 1u);
    const CompiledEntry &e = p.entries[0];
    const LaunchRecord &l = e.launches.back();
    ASSERT_EQ(l.node, kNoNode);
    ASSERT_EQ(l.args.size(), 6u);
    const IoBinding *pos = nullptr;
    for (const IoBinding &in : e.inputs)
      if (in.name == "positions")
        pos = &in;
    EXPECT_EQ(pos != nullptr, withPositions);
    if (pos) {
      BufferRef last = pos->where;
      last.offset += 4; // the second (last) row's
      EXPECT_EQ(l.args[4], last);
    } else {
      EXPECT_EQ(l.args[4], l.args[3]); // a valid address, not read
    }
  }
}

/// Only an f32 result named `logits` of rank 2 gets the launch.
TEST(GreedyToken, OnlyEntriesWithLogits) {
  auto lastIsGreedy = [](llvm::StringRef name, DType t, std::vector<int64_t> shape) {
    Graph g;
    Function &fn = g.addFunction("main");
    Builder b(fn);
    auto x = b.input("ids", {DType::I32, shape});
    b.result(b.convert(x, t, name));
    EXPECT_FALSE(bool(b.finish()));
    CompiledProgram p = compiledProgram(g);
    return !p.entries.empty() && p.entries[0].launches.back().node == kNoNode;
  };
  EXPECT_TRUE(lastIsGreedy("logits", DType::F32, {3, 7}));
  EXPECT_FALSE(lastIsGreedy("out", DType::F32, {3, 7}));
  EXPECT_FALSE(lastIsGreedy("logits", DType::F16, {3, 7}));
  EXPECT_FALSE(lastIsGreedy("logits", DType::F32, {21}));
}
