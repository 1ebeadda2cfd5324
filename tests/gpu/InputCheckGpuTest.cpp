//===- InputCheckGpuTest.cpp - bad input values on the device ---------------===//
//
// The CUDA program checks token ids and positions on the device (the entry's
// input check, codegen/cuda/InputCheck.h): a bad value is an error after the
// step naming the input, index and value; the step wrote no state, so later
// good steps equal the CPU reference (which never saw the bad step). A real
// device fault is sticky: the executor refuses every later step.
//
//===----------------------------------------------------------------------===//
#include "GpuTestUtil.h"

#include "frontends/Frontend.h"
#include "runtime/ProgramIO.h"

#include <cstdlib>

using namespace fg;
using namespace fg::gputest;

namespace {

constexpr int64_t kCtx = 64;

const Plan &demoPlan() {
  static const Plan plan = [] {
    ModelOptions mo;
    mo.ctx = kCtx;
    mo.prefill = {4};
    auto g = loadModel("demo", mo);
    EXPECT_TRUE(bool(g)) << errString(g.takeError());
    auto p = compile(*g, CompileOptions{});
    EXPECT_TRUE(bool(p)) << errString(p.takeError());
    return std::move(*p);
  }();
  return plan;
}

Executor make(ExecOptions::Device d, ExecOptions::Mode m = ExecOptions::Mode::Graph,
              bool debugSync = false) {
  ExecOptions o;
  o.device = d;
  o.mode = m;
  o.debugSync = debugSync;
  auto e = Executor::create(demoPlan(), o);
  EXPECT_TRUE(bool(e)) << errString(e.takeError());
  return std::move(*e);
}

std::string run(Executor &e, llvm::StringRef entry, std::vector<int32_t> toks,
                std::vector<int32_t> pos) {
  if (auto err = e.setInput("tokens", toks))
    return errString(std::move(err));
  if (auto err = e.setInput("positions", pos))
    return errString(std::move(err));
  auto err = e.run(entry);
  return err ? errString(std::move(err)) : "";
}

std::vector<float> logits(Executor &e) {
  auto l = e.outputFloats("logits");
  EXPECT_TRUE(bool(l)) << (l ? "" : errString(l.takeError()));
  return l ? std::vector<float>(l->begin(), l->end()) : std::vector<float>{};
}

/// Bad token ids and positions, in graph and eager mode and in a prefill
/// chunk: each is reported with the step, input, index and value; the steps
/// between and after are good and match the CPU reference, so a refused step
/// wrote no KV row.
void badValuesThenGoodSteps(ExecOptions::Mode mode, bool debugSync = false) {
  Executor gpu = make(ExecOptions::Device::Cuda, mode, debugSync);
  Executor cpu = make(ExecOptions::Device::Cpu);
  // Good steps 0-1 on both.
  for (int32_t p = 0; p < 2; ++p) {
    ASSERT_EQ(run(gpu, "decode", {10 + p}, {p}), "");
    ASSERT_EQ(run(cpu, "decode", {10 + p}, {p}), "");
  }
  // Step 2: a token id past the vocabulary (512).
  EXPECT_EQ(run(gpu, "decode", {512}, {2}), "step 2: input 'tokens'[0] = 512 is outside [0, 512)");
  // Step 3: a position past ctx.
  EXPECT_EQ(run(gpu, "decode", {5}, {5000}),
            "step 3: input 'positions'[0] = 5000 is outside [0, 64)");
  // Step 4: a negative position.
  EXPECT_EQ(run(gpu, "decode", {5}, {-7}), "step 4: input 'positions'[0] = -7 is outside [0, 64)");
  // Step 5: a prefill chunk with a bad token at index 2 (the first bad one is named).
  EXPECT_EQ(run(gpu, "prefill_4", {1, 2, -1, 600}, {2, 3, 4, 5}),
            "step 5: input 'tokens'[2] = -1 is outside [0, 512)");
  // The refused steps wrote nothing: good steps continue at position 2 and
  // equal the reference, decode and prefill.
  ASSERT_EQ(run(gpu, "decode", {12}, {2}), "");
  ASSERT_EQ(run(cpu, "decode", {12}, {2}), "");
  EXPECT_LE(normalizedError(logits(gpu), logits(cpu)), 1e-3);
  ASSERT_EQ(run(gpu, "prefill_4", {3, 4, 5, 6}, {3, 4, 5, 6}), "");
  ASSERT_EQ(run(cpu, "prefill_4", {3, 4, 5, 6}, {3, 4, 5, 6}), "");
  EXPECT_LE(normalizedError(logits(gpu), logits(cpu)), 1e-3);
  for (int32_t p = 7; p < 12; ++p) {
    ASSERT_EQ(run(gpu, "decode", {(p * 37) % 512}, {p}), "");
    ASSERT_EQ(run(cpu, "decode", {(p * 37) % 512}, {p}), "");
    EXPECT_LE(normalizedError(logits(gpu), logits(cpu)), 1e-3) << "position " << p;
  }
}

TEST(GpuInputCheck, BadValuesAreReportedAndLaterStepsMatchTheReference) {
  FG_REQUIRE_GPU();
  badValuesThenGoodSteps(ExecOptions::Mode::Graph);
}

TEST(GpuInputCheck, EagerModeReportsTheSame) {
  FG_REQUIRE_GPU();
  badValuesThenGoodSteps(ExecOptions::Mode::Eager);
}

TEST(GpuInputCheck, DebugSyncReportsTheSame) {
  FG_REQUIRE_GPU();
  badValuesThenGoodSteps(ExecOptions::Mode::Eager, /*debugSync=*/true);
}

/// A refused step whose positions were good but whose token was bad writes no
/// KV row either: overwriting position 1 with a bad step, then running
/// position 2, equals the reference that never ran the bad step.
TEST(GpuInputCheck, BadTokenWritesNoKvRow) {
  FG_REQUIRE_GPU();
  Executor gpu = make(ExecOptions::Device::Cuda);
  Executor cpu = make(ExecOptions::Device::Cpu);
  for (Executor *e : {&gpu, &cpu}) {
    ASSERT_EQ(run(*e, "decode", {3}, {0}), "");
    ASSERT_EQ(run(*e, "decode", {4}, {1}), "");
  }
  EXPECT_EQ(run(gpu, "decode", {100000}, {1}),
            "step 2: input 'tokens'[0] = 100000 is outside [0, 512)");
  ASSERT_EQ(run(gpu, "decode", {8}, {2}), "");
  ASSERT_EQ(run(cpu, "decode", {8}, {2}), "");
  EXPECT_LE(normalizedError(logits(gpu), logits(cpu)), 1e-3);
}

/// A real device fault (a launch whose argument points far outside the arena)
/// is sticky: the step fails and every later step is refused with the first
/// error, without a crash. Runs in a child process (the context is lost).
TEST(GpuInputCheck, DeviceFaultIsSticky) {
  FG_REQUIRE_GPU();
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        const PlanSection *s = demoPlan().section("program");
        auto prog = decodeProgram(s->bytes);
        if (!prog)
          std::exit(2);
        // The first launch after the input check: point its first argument
        // 1 TiB past the arena.
        for (CompiledEntry &e : prog->entries)
          if (e.name == "decode")
            e.launches.at(1).args.at(0).offset += 1ull << 40;
        EncodedProgram enc = encodeProgram(*prog);
        std::vector<PlanSection> sections;
        for (const PlanSection &x : demoPlan().sections())
          sections.push_back(x.id == "program" ? PlanSection{"program", enc.bytes, enc.bulkOffset}
                                               : x);
        Plan bad(demoPlan().graph(), demoPlan().options(), {}, 0, 0, std::move(sections));
        ExecOptions o;
        o.device = ExecOptions::Device::Cuda;
        auto e = Executor::create(bad, o);
        if (!e)
          std::exit(3);
        std::string first = run(*e, "decode", {1}, {0});
        std::string second = run(*e, "decode", {1}, {1});
        bool ok = !first.empty() && second.find("an earlier step failed on the device") == 0 &&
                  second.find(first) != std::string::npos;
        std::fprintf(stderr, "first: %s\nsecond: %s\n", first.c_str(), second.c_str());
        std::exit(ok ? 0 : 1);
      },
      ::testing::ExitedWithCode(0), "first: ");
}

} // namespace

/// The embedding gather in the check's launch (FG_DEBUG_CHECK_GATHER: off by
/// default, built without a GPU in the forty-third session): the demo, two
/// layers of W-tiny (an f16 table) and of W-moe-12 q4_K (a quantised table,
/// dequantRows) decoded over the same tokens and positions, a jump to the
/// cache's end included, as graphs and eagerly: every step within 1e-5 of
/// the plan with the separate get_rows launch (the same bits expected) and
/// within 1e-3 of the CPU.
TEST(GpuInputCheck, GatherInTheCheckMatchesItsLaunch) {
  FG_REQUIRE_GPU();
  ModelOptions mo;
  mo.ctx = 256;
  auto g = loadModel("demo", mo);
  ASSERT_TRUE(bool(g)) << errString(g.takeError());
  compareSwitch(*g, 256, 512, 40, 40, "demo", "FG_DEBUG_CHECK_GATHER", "check gather");
  compareSwitch(workloadLayers("w-tiny"), 512, 4096, 40, 12, "w-tiny, 2 layers",
                "FG_DEBUG_CHECK_GATHER", "check gather");
  compareSwitch(workloadLayers("w-moe-12-q4_k"), 512, 4096, 40, 0, "w-moe-12-q4_k, 2 layers",
                "FG_DEBUG_CHECK_GATHER", "check gather");
}
