//===- WorkspaceSlots.cpp - which cuBLAS workspace each GEMM of an entry uses ===//
#include "runtime/WorkspaceSlots.h"

#include <algorithm>
#include <cassert>
#include <string>

namespace fg {
namespace {

/// Whether launch `u` is `i` or one of its ancestors. Deps point to earlier
/// launches, so the walk back from `i` never needs a launch before `u`.
bool reaches(const std::vector<LaunchRecord> &ls, uint32_t u, uint32_t i,
             std::vector<uint32_t> &seen, uint32_t stamp, std::vector<uint32_t> &stack) {
  if (u == i)
    return true;
  stack.assign(1, i);
  seen[i] = stamp;
  while (!stack.empty()) {
    uint32_t n = stack.back();
    stack.pop_back();
    for (uint32_t d : ls[n].deps) {
      if (d == u)
        return true;
      if (d > u && seen[d] != stamp) {
        seen[d] = stamp;
        stack.push_back(d);
      }
    }
  }
  return false;
}

} // namespace

llvm::Expected<std::vector<int>> assignWorkspaceSlots(std::vector<LaunchRecord> &launches,
                                                      unsigned slots, bool addEdges) {
  std::vector<int> slotOf(launches.size(), -1);
  if (slots == 0)
    slots = 1;
  // Per slot: its last user (-1: unused) and when it was last taken.
  std::vector<int64_t> lastUser(slots, -1);
  std::vector<uint32_t> seen(launches.size(), 0), stack;
  uint32_t stamp = 0;
  for (uint32_t i = 0; i < launches.size(); ++i) // the walk below only goes back
    for (uint32_t d : launches[i].deps)
      if (d >= i)
        return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                       "launch " + std::to_string(i) + " (" + launches[i].what +
                                           ") depends on a later launch " + std::to_string(d));
  for (uint32_t i = 0; i < launches.size(); ++i) {
    LaunchRecord &l = launches[i];
    if (l.kind != LaunchRecord::Kind::Gemm)
      continue;
    auto freeSlot = [&]() -> int {
      for (unsigned s = 0; s < slots; ++s) {
        if (lastUser[s] < 0)
          return static_cast<int>(s);
        if (++stamp == 0) { // the stamps wrapped: start the marks afresh
          std::fill(seen.begin(), seen.end(), 0u);
          stamp = 1;
        }
        if (reaches(launches, static_cast<uint32_t>(lastUser[s]), i, seen, stamp, stack))
          return static_cast<int>(s);
      }
      return -1;
    };
    int s = freeSlot();
    if (s < 0) {
      if (!addEdges)
        return llvm::createStringError(
            llvm::inconvertibleErrorCode(),
            "launch " + std::to_string(i) + " (" + l.what + ") may run beside " +
                std::to_string(slots) +
                " other cuBLAS calls, each holding a workspace: the plan is inconsistent");
      // The slot taken longest ago (its last user has the lowest index).
      unsigned oldest = 0;
      for (unsigned t = 1; t < slots; ++t)
        if (lastUser[t] < lastUser[oldest])
          oldest = t;
      l.deps.push_back(static_cast<uint32_t>(lastUser[oldest]));
      s = freeSlot();
      assert(s >= 0 && "the new edge frees at least its own slot");
    }
    slotOf[i] = s;
    lastUser[static_cast<unsigned>(s)] = i;
  }
  return slotOf;
}

llvm::Expected<std::vector<int>> workspaceSlotsOf(const std::vector<LaunchRecord> &launches,
                                                  unsigned slots) {
  std::vector<LaunchRecord> copy = launches; // untouched: no edge is added
  return assignWorkspaceSlots(copy, slots, /*addEdges=*/false);
}

unsigned workspaceSlotsUsed(const std::vector<int> &slotOfLaunch) {
  int most = -1;
  for (int s : slotOfLaunch)
    most = std::max(most, s);
  return static_cast<unsigned>(most + 1);
}

} // namespace fg
