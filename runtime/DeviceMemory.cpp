//===- DeviceMemory.cpp - what a plan takes on the device once loaded -----===//
#include "runtime/DeviceMemory.h"

#include "runtime/WorkspaceSlots.h"

#include <algorithm>

namespace fg {

DeviceMemory deviceMemory(const CompiledProgram *prog, int64_t graphWeightBytes,
                          int64_t stateBytes) {
  DeviceMemory m{graphWeightBytes, stateBytes, 0, 0};
  if (!prog)
    return m;
  m.weights = static_cast<int64_t>(prog->weightBytes());
  unsigned slots = 1; // CudaRunner allocates at least one workspace
  for (const CompiledEntry &e : prog->entries) {
    m.arena = std::max(m.arena, static_cast<int64_t>(e.arenaBytes));
    if (llvm::Expected<std::vector<int>> s = workspaceSlotsOf(e.launches, kWorkspaceSlots))
      slots = std::max(slots, workspaceSlotsUsed(*s));
    else
      llvm::consumeError(s.takeError());
  }
  m.workspace = static_cast<int64_t>(slots * prog->workspaceBytes);
  return m;
}

} // namespace fg
