//===- LaunchSchedule.h - launch records of one entry --------------*- C++ -*-===//
//
// Lowering, step 4: the entry's launch list, in program order, each record
// with its pointer arguments resolved against the proven plan to (space,
// index, byte offset), its node id and op kind, and its dependencies from the
// launch DAG: a node's first launch waits for the last launch of each
// predecessor node; its own launches run in order. cuBLAS calls that may run
// at the same time take different workspaces (runtime/WorkspaceSlots.h); a
// call waits for an earlier one only where the slots run out (an extra edge,
// never a missing one). Kernel sources are collected for the module step.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "codegen/cuda/EmitNodes.h"
#include "codegen/cuda/ProvenPlan.h"
#include "runtime/Program.h"

#include "llvm/ADT/StringMap.h"
#include "llvm/Support/Error.h"

#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace fg::cuda {

/// The program's weight and state tables, shared by name across entries.
class SlotTables {
public:
  explicit SlotTables(CompiledProgram &prog) : prog_(prog) {}
  /// The table index of weight or state argument `a` (added on first use).
  uint32_t slot(const Function &fn, const Argument &a);
  /// A fresh range of `bytes` in the program's counters (256-byte aligned;
  /// every launch that asks gets its own, in every entry).
  uint64_t counters(uint64_t bytes);
  /// The status words' device mirror: one range of the counters (kStatusBytes)
  /// for the whole program, which every entry's input check and greedy token
  /// share (kernels/check.cuh: the step count and the greedy ring, read there
  /// from device memory instead of over the bus).
  uint64_t statusMirror();
  /// The greedy launches' draw settings (runtime/Program.h
  /// DeviceSampleParams): one range of the counters for the whole program.
  uint64_t sampleParams();
  /// Whether `b` starts on the byte after `a` ends in the runner's weight
  /// allocation: two weight refs, `b` at offset 0 of the slot right after
  /// `a`'s, `a` reaching its slot's end (aBytes: what the GEMM reads of it),
  /// and `a`'s slot a whole number of kWeightAlign units.
  bool weightsAdjoin(const BufferRef &a, uint64_t aBytes, const BufferRef &b) const;

private:
  llvm::StringMap<uint32_t> weightIndex_, stateIndex_;
  CompiledProgram &prog_;
  std::optional<uint64_t> statusMirror_, sampleParams_;
};

/// Kernel sources of the launches, to be compiled into modules: (symbol,
/// source) per kernel launch, and per entry and launch the index of its source
/// (~0 for cuBLAS calls).
struct KernelSources {
  std::vector<std::pair<std::string, std::string>> sources;
  std::vector<std::vector<size_t>> sourceOfLaunch;
};

/// Where value `v` of `fn` lives under `proven`'s plan: its weight or state
/// slot, or its arena offset (views resolve to what they view).
llvm::Expected<BufferRef> bufferOfValue(const Function &fn, const ProvenPlan &proven,
                                        SlotTables &tables, ValueId v);

/// Arena bytes [first, second).
using ArenaRange = std::pair<uint64_t, uint64_t>;
inline bool arenaRangesOverlap(const ArenaRange &a, const ArenaRange &b) {
  return a.first < b.second && b.first < a.second;
}

/// The arena bytes [begin, end) value `v`'s storage occupies; nullopt outside
/// the arena (a weight or state); [0, ~0) (overlapping everything) where `v`
/// has no placement.
std::optional<ArenaRange> arenaRangeOf(const Function &fn, const ProvenPlan &proven,
                                       SlotTables &tables, ValueId v);

/// Removes the launches whose work now runs inside another launch of the
/// same entry (the merges after step 4: GemvTails.h, RoutingHeads.h):
/// into[j] == j keeps launch j, else its work runs inside launch into[j].
/// The host takes the removed launch's dependencies, the removed launch's
/// dependents wait for the host, indices are renumbered and the removed
/// launches' sources dropped. Every kept dependency must stay earlier than
/// its dependent (the callers check it).
void dropMergedLaunches(CompiledEntry &entry, KernelSources &sources,
                        llvm::ArrayRef<uint32_t> into);

/// Fills `out` (name, arena, inputs, outputs, launches) for entry `fn`.
llvm::Error scheduleLaunches(const Function &fn, llvm::ArrayRef<Layout> layouts,
                             llvm::ArrayRef<NodeCode> code, const ProvenPlan &proven,
                             SlotTables &tables, KernelSources &sources, CompiledEntry &out,
                             unsigned workspaceSlots);

} // namespace fg::cuda
