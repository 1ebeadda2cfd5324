//===- PlanTest.cpp - plan files: round trip and refusals -----------------===//
#include "runtime/Plan.h"
#include "codegen/cuda/Compile.h"
#include "frontends/Frontend.h"
#include "ir/Printer.h"

#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/raw_ostream.h"

#include <gtest/gtest.h>

#include <cstring>

using namespace fg;
using namespace llvm;

namespace {

template <typename T> std::string errorText(Expected<T> &v) {
  return v ? std::string("(no error)") : toString(v.takeError());
}

/// A fresh folder for one test's files.
struct TempDir {
  SmallString<128> path;
  TempDir() { EXPECT_FALSE(sys::fs::createUniqueDirectory("fg-plan-test", path)); }
  ~TempDir() { sys::fs::remove_directories(path); }
  std::string file(StringRef name) const {
    SmallString<128> p(path);
    sys::path::append(p, name);
    return std::string(p);
  }
};

Plan demoPlan() {
  ModelOptions mo;
  mo.ctx = 32;
  mo.prefill = {4, 8};
  Expected<Graph> g = loadModel("demo", mo);
  EXPECT_TRUE(bool(g)) << errorText(g);
  CompileOptions co;
  co.ctx = 32;
  co.arch = "sm_89";
  co.disableFusion = {"rms_norm_mul", "glu"};
  co.source = "demo";
  Expected<Plan> p = compile(*g, co);
  EXPECT_TRUE(bool(p)) << errorText(p);
  return std::move(*p);
}

/// A small plan built from text, so tests can afford to try every prefix.
Plan smallPlan() {
  Graph g;
  Function &fn = g.addFunction("decode");
  ValueId tokens = fn.addArgument("tokens", TensorType(DType::I32, {1}), ArgRole::Input);
  ValueId emb = fn.addArgument("emb", TensorType(DType::F32, {8, 4}), ArgRole::Weight,
                               WeightInit::normal(3, 0.5));
  SmallVector<TensorType, 1> rt;
  Error e = inferResultTypes(OpKind::GetRows, {fn.type(emb), fn.type(tokens)},
                             defaultAttrs(OpKind::GetRows), rt);
  EXPECT_FALSE(bool(e)) << toString(std::move(e));
  NodeId n =
      fn.addNode(OpKind::GetRows, {emb, tokens}, defaultAttrs(OpKind::GetRows), rt, {"logits"});
  fn.addResult(fn.node(n).result());
  PlanOptions po;
  po.ctx = 16;
  po.prefill = {};
  po.source = "small.fg";
  return Plan(std::move(g), po, {{"dce", false}}, 12040, 12040);
}

std::string readFile(StringRef path) {
  auto buf = MemoryBuffer::getFile(path, false, false);
  EXPECT_TRUE(bool(buf));
  return buf ? (*buf)->getBuffer().str() : "";
}

void writeFile(StringRef path, StringRef bytes) {
  std::error_code ec;
  raw_fd_ostream os(path, ec);
  ASSERT_FALSE(ec);
  os << bytes;
}

} // namespace

/// Save then load gives back the same IR text, options, pass records and versions.
TEST(Plan, RoundTripDemo) {
  TempDir dir;
  Plan p = demoPlan();
  ASSERT_EQ(p.options().ctx, 32);
  EXPECT_EQ(p.options().prefill, (std::vector<int64_t>{4, 8}));
  EXPECT_FALSE(p.passes().empty());
  std::string path = dir.file("demo.plan");
  ASSERT_FALSE(bool(p.save(path)));
  Expected<Plan> q = Plan::load(path);
  ASSERT_TRUE(bool(q)) << errorText(q);
  EXPECT_EQ(printToString(q->graph()), printToString(p.graph()));
  EXPECT_EQ(q->options(), p.options());
  EXPECT_EQ(q->options().arch, "sm_89");
  EXPECT_EQ(q->options().disableFusion, (std::vector<std::string>{"rms_norm_mul", "glu"}));
  ASSERT_EQ(q->passes().size(), p.passes().size());
  for (size_t i = 0; i < p.passes().size(); ++i)
    EXPECT_EQ(q->passes()[i], p.passes()[i]);
  EXPECT_EQ(q->cudaRuntimeVersion(), p.cudaRuntimeVersion());
  EXPECT_EQ(q->nvrtcVersion(), p.nvrtcVersion());
  EXPECT_EQ(q->entries(), (std::vector<std::string>{"decode", "prefill_4", "prefill_8"}));
  // Saving the loaded plan writes the same bytes.
  EXPECT_EQ(q->serialize(), p.serialize());
}

/// A plan is a function of its inputs: compiling the same model twice (CUDA
/// program included) gives the same bytes — no wall times inside.
TEST(Plan, CompilingTwiceGivesTheSameBytes) {
  Plan a = demoPlan(), b = demoPlan();
  EXPECT_EQ(a.serialize(), b.serialize());
}

/// The header carries the magic, version 1.0 and the versions given.
TEST(Plan, HeaderLayout) {
  std::string bytes = smallPlan().serialize();
  ASSERT_GE(bytes.size(), 32u);
  EXPECT_EQ(bytes.substr(0, 8), std::string("FGPLAN\0\0", 8));
  EXPECT_EQ(bytes[8], 1); // major, little-endian
  EXPECT_EQ(bytes[9], 0);
  EXPECT_EQ(bytes[10], 0); // minor
  EXPECT_EQ(uint8_t(bytes[12]) | uint8_t(bytes[13]) << 8, 12040);
  EXPECT_EQ(cudaVersionStr(12040), "12.4");
  EXPECT_EQ(cudaVersionStr(0), "unknown");
}

/// Save writes through a temporary file: nothing else is left in the folder,
/// and an existing plan is replaced whole.
TEST(Plan, SaveIsAtomic) {
  TempDir dir;
  std::string path = dir.file("x.plan");
  writeFile(path, "old contents");
  ASSERT_FALSE(bool(smallPlan().save(path)));
  EXPECT_EQ(readFile(path), smallPlan().serialize());
  std::error_code ec;
  int files = 0;
  for (sys::fs::directory_iterator it(dir.path, ec), end; it != end && !ec; it.increment(ec))
    ++files;
  EXPECT_EQ(files, 1);
}

/// A missing file names the file.
TEST(Plan, MissingFile) {
  Expected<Plan> p = Plan::load("/nonexistent/dir/x.plan");
  std::string msg = errorText(p);
  EXPECT_NE(msg.find("/nonexistent/dir/x.plan: cannot read plan"), std::string::npos) << msg;
}

/// Flipping any single byte outside the padding is caught (by the magic, the
/// version or the checksum), never loads, never crashes.
TEST(Plan, CorruptByteRefused) {
  std::string good = smallPlan().serialize();
  ASSERT_TRUE(bool(Plan::deserialize(good, "x.plan")));
  int checksum = 0;
  for (size_t i = 0; i < good.size(); ++i) {
    if (i >= 28 && i < 32)
      continue; // the reserved word is not read
    std::string bad = good;
    bad[i] ^= 0x5a;
    Expected<Plan> p = Plan::deserialize(bad, "x.plan");
    ASSERT_FALSE(bool(p)) << "byte " << i;
    std::string msg = toString(p.takeError());
    EXPECT_EQ(msg.rfind("x.plan: ", 0), 0u) << msg;
    checksum += msg.find("corrupt plan (checksum mismatch") != std::string::npos;
  }
  // Everything past the magic and the version is covered by the checksum
  // (a flipped section offset/size may be reported as a truncation instead).
  EXPECT_GT(checksum, static_cast<int>(good.size()) - 100);
}

/// A flipped byte in the IR text of the demo plan is reported as corruption.
TEST(Plan, CorruptIrSectionOfSavedFile) {
  TempDir dir;
  std::string path = dir.file("demo.plan");
  ASSERT_FALSE(bool(demoPlan().save(path)));
  std::string bytes = readFile(path);
  size_t at = bytes.find("rms_norm");
  ASSERT_NE(at, std::string::npos);
  bytes[at] = 'R';
  writeFile(path, bytes);
  Expected<Plan> p = Plan::load(path);
  std::string msg = errorText(p);
  EXPECT_NE(msg.find(path + ": corrupt plan (checksum mismatch"), std::string::npos) << msg;
}

/// Every proper prefix of a plan is refused as truncated (or, when shorter
/// than the magic, as not a plan).
TEST(Plan, TruncatedRefused) {
  std::string good = smallPlan().serialize();
  for (size_t n = 0; n < good.size(); ++n) {
    Expected<Plan> p = Plan::deserialize(StringRef(good).take_front(n), "t.plan");
    ASSERT_FALSE(bool(p)) << "prefix " << n;
    std::string msg = toString(p.takeError());
    if (n == 0)
      EXPECT_EQ(msg, "t.plan: not a fusegraph plan (bad magic)");
    else
      EXPECT_EQ(msg.rfind("t.plan: truncated plan", 0), 0u) << "prefix " << n << ": " << msg;
  }
}

/// A plan from a newer major version is refused with both versions named.
TEST(Plan, NewerMajorRefused) {
  std::string bytes = smallPlan().serialize();
  bytes[8] = 2;
  Expected<Plan> p = Plan::deserialize(bytes, "new.plan");
  EXPECT_EQ(errorText(p), "new.plan: plan format 2.x is newer than this fusegraph (1.x)");
}

/// Extra sections (codegen's program) round-trip as bytes; their bulk tail is
/// outside the checksum, their checked head inside it.
TEST(Plan, ExtraSectionWithBulkTail) {
  Plan small = smallPlan();
  Plan p(small.graph(), small.options(), {}, 0, 0,
         {{"program", std::string("HEAD") + std::string(64, 'w'), 4}});
  std::string bytes = p.serialize();
  Expected<Plan> q = Plan::deserialize(bytes, "p.plan");
  ASSERT_TRUE(bool(q)) << errorText(q);
  ASSERT_EQ(q->sections().size(), 1u);
  const PlanSection *s = q->section("program");
  ASSERT_NE(s, nullptr);
  EXPECT_EQ(s->bytes, std::string("HEAD") + std::string(64, 'w'));
  EXPECT_EQ(s->checked, 4u);
  EXPECT_EQ(q->section("kernels"), nullptr);
  EXPECT_EQ(q->serialize(), bytes);

  size_t head = bytes.find("HEAD");
  ASSERT_NE(head, std::string::npos);
  std::string bulkFlip = bytes;
  bulkFlip[head + 10] = 'x'; // weight bytes: not checksummed
  EXPECT_TRUE(bool(Plan::deserialize(bulkFlip, "p.plan")));
  std::string headFlip = bytes;
  headFlip[head + 1] = 'x';
  Expected<Plan> bad = Plan::deserialize(headFlip, "p.plan");
  EXPECT_NE(errorText(bad).find("checksum mismatch"), std::string::npos);
}

/// Another file type is refused by its magic.
TEST(Plan, WrongMagicRefused) {
  std::string bytes = smallPlan().serialize();
  std::memcpy(&bytes[0], "GGUF", 4);
  Expected<Plan> p = Plan::deserialize(bytes, "model.gguf");
  EXPECT_EQ(errorText(p), "model.gguf: not a fusegraph plan (bad magic)");
  Expected<Plan> q = Plan::deserialize("graph @decode() {\n}\n", "a.fg");
  EXPECT_EQ(errorText(q), "a.fg: not a fusegraph plan (bad magic)");
}
