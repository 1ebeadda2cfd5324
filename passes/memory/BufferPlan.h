//===- BufferPlan.h - where every value lives: arena, weight, state ---*- C++ -*-===//
//
// Liveness over the launch DAG, then offsets in one arena.
//   - Weights and state live outside the arena, in their own buffers named by
//     their argument; views of them and new state versions (set_rows results)
//     share that buffer.
//   - Inputs and results get arena slices live for the whole run (never shared).
//   - A view shares its base's slice: a dense view of a dense base narrows it
//     to [base + offset·elemBytes, + bytes); any other view keeps the base's
//     range. Uses of a view keep the base alive.
//   - Two arena allocations share bytes only when every launch touching one
//     happens-before (in the DAG, not in program order) the launch defining the
//     other; so values of parallel branches never share.
//   - Best fit over the free gaps left by conflicting allocations, every offset
//     and size aligned (256 bytes by default).
//   - Optional per-node scratch (split-K partials) is live only during its node.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "passes/memory/LaunchDag.h"

#include "ir/Graph.h"

#include "llvm/Support/Error.h"

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace fg {

enum class Location : uint8_t {
  None,   ///< no storage (a value of an erased node)
  Arena,  ///< a slice of the per-entry arena
  Weight, ///< the buffer of weight argument `Placement::buffer`
  State,  ///< the buffer of state argument `Placement::buffer`
};
llvm::StringRef locationName(Location l);

struct Placement {
  Location loc = Location::None;
  /// Weight/State: the argument value owning the buffer. Arena: the value
  /// owning the allocation (the storage root: itself unless a view/update).
  ValueId buffer = kNoValue;
  /// [offset, offset + size): the bytes the value may touch, in its buffer.
  int64_t offset = 0;
  int64_t size = 0;
  /// Byte offset (in the buffer) of element [0, .., 0], and element strides,
  /// when `addressable`: element [i..] is at dataOffset + Σ i_d·strides_d·elemBytes.
  /// False for views the planner cannot express that way (e.g. a view of a
  /// permuted value, or a permuted block-quantised weight): the codegen
  /// composes those from the IR.
  int64_t dataOffset = 0;
  Shape strides;
  bool addressable = true;
  bool contiguous = true; ///< addressable with row-major strides (size-1 dims ignored)
  bool pinned = false;    ///< arena slice of an input or result: live for the whole run

  int64_t end() const { return offset + size; }
};

struct ScratchSlice {
  int64_t offset = 0; ///< in the arena
  int64_t size = 0;   ///< 0: the node asked for no scratch
};

struct MemoryPlanOptions {
  int64_t alignment = 256; ///< of every arena offset and allocation size (a power of two)
  /// Scratch bytes a launching node needs for its duration (0: none).
  std::function<int64_t(const Function &, NodeId)> scratchBytes;
};

struct BufferPlan {
  std::vector<Placement> values;     ///< indexed by ValueId
  std::vector<ScratchSlice> scratch; ///< indexed by NodeId
  int64_t alignment = 256;
  int64_t arenaBytes = 0; ///< size of the arena (a multiple of alignment)
  /// The largest sum of (aligned) arena allocation sizes live at once when the
  /// launches run in program order. Every set of allocations live together at
  /// one program point conflicts pairwise, so this is a lower bound of both the
  /// DAG's worst concurrent live set (an antichain maximum, which we do not
  /// compute) and of arenaBytes: peakLiveBytes <= arenaBytes always.
  int64_t peakLiveBytes = 0;
  /// Arena bytes that would be needed without any sharing (sum of aligned sizes).
  int64_t unsharedBytes = 0;

  const Placement &at(ValueId v) const { return values[v]; }
  /// Whether two placements are in the same buffer (the arena, or one argument's).
  static bool sameBuffer(const Placement &a, const Placement &b);
  /// Whether their byte ranges intersect (same buffer and non-empty overlap).
  static bool overlaps(const Placement &a, const Placement &b);
};

/// Plans `fn` given its DAG (built from the same function).
llvm::Expected<BufferPlan> planMemory(const Function &fn, const LaunchDag &dag,
                                      const MemoryPlanOptions &opts = {});

/// Checks, independently of the planner's bookkeeping, that every two arena
/// allocations (values by storage root, and scratch) whose lifetimes are not
/// ordered by happens-before have disjoint byte ranges, and that offsets are
/// aligned and inside the arena. The error lists the first violations.
llvm::Error verifyNoOverlap(const Function &fn, const BufferPlan &plan, const LaunchDag &dag);

} // namespace fg
