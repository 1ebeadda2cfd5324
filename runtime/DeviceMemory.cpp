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
  // What CudaRunner allocates: every slot in one block, each at a 256-byte
  // aligned offset (weightOffsets), so the tensors' bytes plus the padding.
  uint64_t placed = 0;
  weightOffsets(prog->weights, &placed);
  m.weights = static_cast<int64_t>(placed);
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
