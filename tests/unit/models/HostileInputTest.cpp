//===- HostileInputTest.cpp - plans, .fg sizes, flags and files (issue 10) ===//
//
// Inputs an attacker would try against the readers behind the model files:
// a plan whose checksum is valid but whose weight slot is nonsense, tensor
// sizes the machine cannot hold, a ctx that overflows the KV cache, files that
// are links to devices. Each must be one clean error (exit 1 from the CLI),
// never an abort, a signal or a hang.
//
//===----------------------------------------------------------------------===//
#include "ModelFiles.h"

#include "frontends/Frontend.h"
#include "ir/Checked.h"
#include "ir/Parser.h"
#include "runtime/Executor.h"
#include "runtime/HostMemory.h"
#include "runtime/Plan.h"
#include "runtime/ProgramIO.h"
#include "runtime/WeightLoad.h"
#include "runtime/reference/Interpreter.h"

#include "llvm/ADT/SmallString.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/Program.h"

#include <gtest/gtest.h>

#include <limits>

namespace fg {
namespace {

using test::fusegraphBinary;
using test::runCli;

std::string errorText(llvm::Error e) { return llvm::toString(std::move(e)); }

// --- checked arithmetic -------------------------------------------------------------------

TEST(Checked, ProductsThatOverflowAreNullopt) {
  EXPECT_EQ(checkedMul(int64_t(1) << 31, int64_t(1) << 31), int64_t(1) << 62);
  EXPECT_EQ(checkedMul(int64_t(1) << 40, int64_t(1) << 30), std::nullopt);
  EXPECT_EQ(checkedMul(-1, 4), std::nullopt);
  EXPECT_EQ(checkedAdd(std::numeric_limits<int64_t>::max(), 1), std::nullopt);
  EXPECT_EQ(checkedElements({}), 1);
  EXPECT_EQ(checkedElements({3, 0, 5}), 0);
  EXPECT_EQ(checkedElements({int64_t(1) << 56, 64}), int64_t(1) << 62);
  EXPECT_EQ(checkedBytes(DType::F32, {int64_t(1) << 56, 64}), std::nullopt) << "2^64 bytes";
  EXPECT_EQ(checkedBytes(DType::Q8_0, {2, 64}), 2 * 2 * 34);
  EXPECT_EQ(checkedBytes(DType::Q8_0, {2, 48}), std::nullopt) << "rows of whole blocks only";
}

/// The block types added for issue 14 size through the same table: whole
/// blocks only, and a product past int64 is refused, not wrapped.
TEST(Checked, EveryBlockTypeSizesByItsTable) {
  EXPECT_EQ(checkedBytes(DType::Q5_0, {3, 64}), 3 * 2 * 22);
  EXPECT_EQ(checkedBytes(DType::Q5_1, {1, 32}), 24);
  EXPECT_EQ(checkedBytes(DType::Q2_K, {2, 512}), 2 * 2 * 84);
  EXPECT_EQ(checkedBytes(DType::Q3_K, {1, 256}), 110);
  EXPECT_EQ(checkedBytes(DType::Q5_K, {4, 256}), 4 * 176);
  EXPECT_EQ(checkedBytes(DType::IQ4_NL, {2, 96}), 2 * 3 * 18);
  EXPECT_EQ(checkedBytes(DType::IQ4_XS, {1, 768}), 3 * 136);
  EXPECT_EQ(checkedBytes(DType::IQ4_XS, {2, 96}), std::nullopt) << "rows of whole blocks only";
  EXPECT_EQ(checkedBytes(DType::Q3_K, {4, 128}), std::nullopt);
  // Block types take at most ~1.1 bytes per element, so their sizes overflow
  // only with the element count: 2^62 elements fit, 2^64 do not.
  EXPECT_EQ(checkedBytes(DType::Q3_K, {int64_t(1) << 54, 256}), (int64_t(1) << 54) * 110);
  EXPECT_EQ(checkedBytes(DType::Q3_K, {int64_t(1) << 56, 256}), std::nullopt);
  EXPECT_EQ(checkedBytes(DType::Q2_K, {int64_t(1) << 42, int64_t(1) << 22}), std::nullopt);
}

// --- plans whose checksum is valid but whose slots are not --------------------------------

/// A plan with a `weights` section holding `slot`, checksummed as compile
/// writes it, then read back from its bytes.
llvm::Expected<Plan> planWithSlot(const TensorSlot &slot) {
  auto g = parseGraph("graph @decode(input %tokens: i32[1],\n"
                      "    weight %w: f16[4, 32]) {\n"
                      "  %x = get_rows(%w, %tokens) : f32[1, 32]\n"
                      "  return %x\n"
                      "}\n",
                      "slot.fg");
  if (!g)
    return g.takeError();
  EncodedProgram table = encodeWeightTable({slot});
  PlanOptions po;
  po.ctx = 16;
  Plan p(std::move(*g), po, {}, 0, 0, {{"weights", table.bytes, table.bulkOffset}});
  return Plan::deserialize(p.serialize(), "forged.plan");
}

/// A slot of `type` whose recipe reads `stored` from `file` at `offset`
/// (converted to type's dtype when they differ).
TensorSlot recipeSlot(TensorType type, TensorType stored, uint64_t offset = 0,
                      uint64_t fileSize = 1 << 20) {
  TensorSlot s("w", type);
  s.recipe.sources.push_back({"/m.gguf", fileSize, offset, stored, "w.weight"});
  if (stored.dtype != type.dtype)
    s.recipe.steps.push_back(RecipeStep::convert(type.dtype));
  return s;
}

/// A quantised slot with last dimension 0 divided by zero at load (SIGFPE).
TEST(HostilePlan, QuantisedSlotWithAnEmptyRow) {
  TensorSlot s = recipeSlot(TensorType{DType::F16, {4, 0}}, TensorType{DType::Q8_0, {4, 0}});
  s.recipe.sources[0].file = "/nonexistent/model.gguf";
  auto plan = planWithSlot(s);
  ASSERT_TRUE(bool(plan)) << errorText(plan.takeError()) << " (the checksum is valid)";
  auto exec = Executor::create(*plan, {});
  ASSERT_FALSE(bool(exec));
  std::string msg = errorText(exec.takeError());
  EXPECT_EQ(msg.rfind("plan section 'weights' is corrupt (slot 'w' f16[4, 0]: recipe: step "
                      "'convert(f16)' on q8_0[4, 0]: its rows are empty or its size overflows "
                      "at byte ",
                      0),
            0u)
      << msg;
  // loadSlotBytes refuses it too, without dividing.
  auto bytes = loadSlotBytes(s);
  ASSERT_FALSE(bool(bytes));
  EXPECT_NE(errorText(bytes.takeError()).find("rows are empty"), std::string::npos);
}

/// Other forged slots: an overflowing shape, a mapped range past the file,
/// a stored dtype that converts to an integer type.
TEST(HostilePlan, ForgedSlotsAreRefusedOneByOne) {
  struct Case {
    TensorSlot slot;
    std::string want;
  };
  std::vector<Case> cases;
  TensorType huge{DType::F32, {int64_t(1) << 56, 64}};
  cases.push_back(
      {recipeSlot(huge, huge), "slot 'w' f32[72057594037927936, 64]: its size overflows"});
  cases.push_back({recipeSlot(TensorType{DType::F16, {4, 32}}, TensorType{DType::F16, {4, 32}},
                              ~uint64_t(0) - 8),
                   "lie past the end of the 1048576-byte file /m.gguf"});
  cases.push_back({recipeSlot(TensorType{DType::I32, {4, 32}}, TensorType{DType::Q8_0, {4, 32}}),
                   "converts only between real dtypes, to a float dtype"});
  for (const Case &c : cases) {
    auto slots = decodeWeightTable(encodeWeightTable({c.slot}).bytes);
    ASSERT_FALSE(bool(slots)) << c.want;
    std::string msg = errorText(slots.takeError());
    EXPECT_NE(msg.find(c.want), std::string::npos) << msg;
    EXPECT_EQ(msg.rfind("plan section 'weights' is corrupt (", 0), 0u) << msg;
  }
}

/// The program section's state slots and input bindings are checked too.
TEST(HostilePlan, ProgramStateSlotsAndBindings) {
  CompiledProgram p;
  p.arch = "sm_90";
  p.state = {TensorSlot("k_cache.0", TensorType{DType::F16, {int64_t(1) << 56, 64}})};
  auto back = decodeProgram(encodeProgram(p).bytes);
  ASSERT_FALSE(bool(back));
  std::string msg = errorText(back.takeError());
  EXPECT_NE(msg.find("slot 'k_cache.0' f16[72057594037927936, 64]: its size overflows"),
            std::string::npos)
      << msg;

  CompiledProgram q;
  q.arch = "sm_90";
  CompiledEntry e;
  e.name = "decode";
  e.inputs.push_back({"tokens", TensorType{DType::I32, {int64_t(1) << 62, 8}}, {}, {}});
  q.entries.push_back(e);
  auto back2 = decodeProgram(encodeProgram(q).bytes);
  ASSERT_FALSE(bool(back2));
  EXPECT_NE(errorText(back2.takeError()).find("binding size overflows"), std::string::npos);
}

// --- host allocations the machine cannot hold ---------------------------------------------

/// A .fg weight f32[16777216, 65536] (4 TiB, under the parser's element cap)
/// aborted with bad_alloc when the reference materialised it.
TEST(HostileSizes, WeightLargerThanTheMachine) {
  auto g =
      parseGraph("graph @decode(input %tokens: i32[1],\n"
                 "    weight %w: f32[16777216, 65536] {init = normal(seed = 1, std = 1.0)}) {\n"
                 "  %x = get_rows(%w, %tokens) : f32[1, 65536]\n"
                 "  return %x\n"
                 "}\n",
                 "big.fg");
  ASSERT_TRUE(bool(g)) << errorText(g.takeError());
  ReferenceInterpreter interp(*g);
  llvm::Error e = interp.prepare();
  ASSERT_TRUE(bool(e));
  std::string msg = errorText(std::move(e));
  EXPECT_EQ(msg.rfind("weight 'w' f32[16777216, 65536] needs 4398046511104 bytes of host memory "
                      "but this machine can hold at most ",
                      0),
            0u)
      << msg;
  HostTensor t;
  llvm::Error init =
      materializeInit(WeightInit::normal(1, 1.0), TensorType{DType::F32, {16777216, 65536}}, t);
  EXPECT_NE(errorText(std::move(init)).find("bytes of host memory"), std::string::npos);
}

/// A state the machine cannot hold, and a node whose result it cannot hold.
TEST(HostileSizes, StateAndIntermediatesLargerThanTheMachine) {
  auto g = parseGraph("graph @decode(input %tokens: i32[1],\n"
                      "    state %s: f16[1099511627776, 64]) {\n"
                      "  %x = exp(%s) : f16[1099511627776, 64]\n"
                      "  return %x\n"
                      "}\n",
                      "state.fg");
  ASSERT_TRUE(bool(g)) << errorText(g.takeError());
  ReferenceInterpreter interp(*g);
  std::string msg = errorText(interp.prepare());
  EXPECT_NE(msg.find("state 's' f16[1099511627776, 64] needs 140737488355328 bytes"),
            std::string::npos)
      << msg;

  auto h = parseGraph("graph @decode(input %x: f32[1, 4]) {\n"
                      "  %y = repeat(%x) {shape = [1099511627776, 4]} : f32[1099511627776, 4]\n"
                      "  return %y\n"
                      "}\n",
                      "wide.fg");
  ASSERT_TRUE(bool(h)) << errorText(h.takeError());
  ReferenceInterpreter interp2(*h);
  llvm::StringMap<HostTensor> in;
  in["x"] = HostTensor::zeros(TensorType{DType::F32, {1, 4}});
  std::vector<std::pair<std::string, HostTensor>> out;
  msg = errorText(interp2.run("decode", in, out));
  EXPECT_NE(msg.find("bytes of host memory"), std::string::npos) << msg;
}

TEST(HostileSizes, HostMemoryLimitIsTheMachines) {
  EXPECT_GT(hostMemoryLimit(), uint64_t(1) << 20);
  EXPECT_FALSE(bool(checkHostAllocation(1024, "a little")));
  std::string msg = errorText(checkHostAllocation(~uint64_t(0), "everything"));
  EXPECT_EQ(msg.rfind("everything needs 18446744073709551615 bytes of host memory", 0), 0u) << msg;
}

/// --ctx 100000000 and 2^63 - 1 aborted (bad_alloc, length_error) sizing the KV cache.
TEST(HostileSizes, CtxBeyondTheLimit) {
  for (int64_t ctx : {int64_t(100000000), std::numeric_limits<int64_t>::max()}) {
    ModelOptions o;
    o.ctx = ctx;
    auto g = loadModel("demo", o);
    ASSERT_FALSE(bool(g)) << ctx;
    EXPECT_EQ(errorText(g.takeError()), "invalid option: ctx " + std::to_string(ctx) +
                                            " is more than 16777216 rows, the most a KV "
                                            "cache may have");
  }
}

// --- the CLI: one line, exit 1 ------------------------------------------------------------

/// Exit 1 and exactly one line containing `want`: `fusegraph: error: ...`, or
/// a library's `<file>: error: ...` (printed unchanged).
void expectOneLineError(llvm::ArrayRef<std::string> args, llvm::StringRef want) {
  int rc = -1;
  std::string out = runCli(args, rc, /*seconds=*/60);
  EXPECT_EQ(rc, 1) << out;
  EXPECT_NE(out.find("error: "), std::string::npos) << out;
  EXPECT_EQ(std::count(out.begin(), out.end(), '\n'), 1) << out;
  EXPECT_NE(out.find(want), std::string::npos) << "expected '" << want.str() << "' in " << out;
}

TEST(HostileCli, CtxFlags) {
  if (fusegraphBinary().empty())
    GTEST_SKIP() << "no fusegraph binary beside the tests";
  for (const char *ctx : {"100000000", "9223372036854775807"}) {
    expectOneLineError({"run", "demo", "--ctx", ctx, "--prompt-ids", "1", "--steps", "2"},
                       "is more than 16777216 rows");
    expectOneLineError({"inspect", "demo", "--ctx", ctx}, "is more than 16777216 rows");
  }
}

TEST(HostileCli, FgWeightLargerThanTheMachine) {
  if (fusegraphBinary().empty())
    GTEST_SKIP() << "no fusegraph binary beside the tests";
  std::string path = test::tempPath(".fg");
  std::string text = "graph @decode(input %tokens: i32[1], input %positions: i32[1],\n"
                     "    weight %w: f32[16777216, 65536] {init = normal(seed = 1, std = 1.0)}) {\n"
                     "  %x = get_rows(%w, %tokens) : f32[1, 65536]\n"
                     "  %logits = exp(%x) : f32[1, 65536]\n"
                     "  return %logits\n"
                     "}\n";
  test::writeFile(path, std::vector<uint8_t>(text.begin(), text.end()));
  expectOneLineError({"run", path, "--device", "cpu", "--prompt-ids", "1", "--steps", "1"},
                     "weight 'w' f32[16777216, 65536] needs 4398046511104 bytes of host memory");
  llvm::sys::fs::remove(path);
}

TEST(HostileCli, LinksToDevices) {
  if (fusegraphBinary().empty())
    GTEST_SKIP() << "no fusegraph binary beside the tests";
  for (std::string dev : {"/dev/zero", "/dev/urandom"})
    for (const char *ext : {".gguf", ".fg", ".plan"}) {
      std::string path = test::tempPath(ext);
      llvm::sys::fs::remove(path);
      ASSERT_FALSE(llvm::sys::fs::create_link(dev, path));
      expectOneLineError({"inspect", path}, "not a regular file (a character device)");
      if (std::string(ext) == ".fg")
        expectOneLineError({"opt", path}, "not a regular file (a character device)");
      llvm::sys::fs::remove(path);
    }
}

} // namespace
} // namespace fg
