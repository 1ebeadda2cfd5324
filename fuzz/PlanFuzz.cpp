//===- PlanFuzz.cpp - fuzz the plan reader ----------------------------------===//
//
// Input: the bytes of a .plan file. They are read twice: as they are (magic,
// bounds and checksum checks), and with the crc32 recomputed over the mutated
// bytes, so that mutations get past the checksum and reach the section table,
// the meta lines, the IR and the program / weights sections, which must hold
// even against a forged checksum. For a plan that loads, the "program" and
// "weights" sections are decoded and every weight slot is loaded
// (loadSlotBytes, which dequantises stored types); a slot that refers to a
// file reads a stand-in file instead (the fuzzer must not open whatever path
// the input names).
//
//===----------------------------------------------------------------------===//
#include "FuzzUtil.h"

#include "runtime/Plan.h"
#include "runtime/ProgramIO.h"
#include "runtime/WeightLoad.h"
#include "runtime/WorkspaceSlots.h"

#include "llvm/Support/CRC.h"
#include "llvm/Support/Endian.h"

#include <algorithm>
#include <cstring>
#include <vector>

using namespace fg;

namespace {

// The file layout of runtime/Plan.h (format 1.0).
constexpr size_t kHeaderSize = 32, kEntrySize = 40, kCrcOffset = 24;

/// `bytes` with the crc32 field set to what the reader will compute, when the
/// header and section table are in bounds (else unchanged).
std::string withValidCrc(llvm::StringRef bytes) {
  std::string out = bytes.str();
  if (out.size() < kHeaderSize)
    return out;
  using llvm::support::endian::read32le;
  using llvm::support::endian::read64le;
  uint64_t count = read32le(out.data() + 20);
  uint64_t tableEnd = kHeaderSize + kEntrySize * count;
  if (tableEnd > out.size())
    return out;
  std::memset(&out[kCrcOffset], 0, 4);
  uint32_t crc =
      llvm::crc32(0, llvm::arrayRefFromStringRef(llvm::StringRef(out).take_front(tableEnd)));
  std::vector<std::pair<uint64_t, uint64_t>> sections; // offset, checked
  for (uint64_t i = 0; i < count; ++i) {
    const char *e = out.data() + kHeaderSize + kEntrySize * i;
    sections.push_back({read64le(e + 16), read64le(e + 32)});
  }
  std::stable_sort(sections.begin(), sections.end(),
                   [](const auto &a, const auto &b) { return a.first < b.first; });
  for (auto [offset, checked] : sections)
    crc =
        llvm::crc32(crc, llvm::arrayRefFromStringRef(llvm::StringRef(out).substr(offset, checked)));
  llvm::support::endian::write32le(&out[kCrcOffset], crc);
  return out;
}

/// A stand-in model file for slots that name one: 64 KiB of varied bytes.
const std::string &scratchWeights() {
  static const std::string path = [] {
    std::string bytes(64 * 1024, '\0');
    for (size_t i = 0; i < bytes.size(); ++i)
      bytes[i] = static_cast<char>((i * 131) % 251);
    return fuzz::writeScratch("weights.bin", bytes);
  }();
  return path;
}

/// Loads every slot: embedded ones as they are, recipes with every source
/// read from the stand-in file instead (never a path the input names).
void loadSlots(const std::vector<TensorSlot> &slots) {
  for (const TensorSlot &s : slots) {
    if (s.recipe.empty() && s.bytes.empty())
      continue;
    TensorSlot slot = s;
    for (RecipeSource &src : slot.recipe.sources) {
      src.file = scratchWeights();
      src.fileSize = 0; // unchecked
      src.offset %= 64 * 1024;
    }
    llvm::Expected<std::vector<uint8_t>> b = loadSlotBytes(slot);
    fuzz::drop(b);
  }
}

void readPlan(llvm::StringRef bytes) {
  llvm::Expected<Plan> plan = Plan::deserialize(bytes, "fuzz.plan");
  if (!plan) {
    llvm::consumeError(plan.takeError());
    return;
  }
  if (const PlanSection *s = plan->section("program")) {
    llvm::Expected<CompiledProgram> p = decodeProgram(s->bytes);
    if (p) {
      loadSlots(p->weights);
      loadSlots(p->state);
      // What the runner computes from the launches' deps at load.
      for (const CompiledEntry &e : p->entries) {
        llvm::Expected<std::vector<int>> slots = workspaceSlotsOf(e.launches, kWorkspaceSlots);
        fuzz::drop(slots);
      }
    }
    fuzz::drop(p);
  }
  if (const PlanSection *s = plan->section("weights")) {
    llvm::Expected<std::vector<TensorSlot>> w = decodeWeightTable(s->bytes);
    if (w)
      loadSlots(*w);
    fuzz::drop(w);
  }
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  llvm::StringRef bytes(reinterpret_cast<const char *>(data), size);
  readPlan(bytes);
  std::string fixed = withValidCrc(bytes);
  if (fixed != bytes)
    readPlan(fixed);
  return 0;
}
