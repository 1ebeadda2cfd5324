//===- InputCheck.h - the device-side check of an entry's inputs --*- C++ -*-===//
//
// Lowering, after the launch schedule: an entry whose inputs carry a value
// range (the graph's input bindings: token ids in [0, vocab), positions in
// [0, ctx)) starts with one small kernel (kernels/check.cuh) that copies every
// such input from the runner's pinned host staging (BufferSpace::Staging:
// what setInput wrote) into its arena slot, checks every value on the device
// and writes the status words (BufferSpace::Status, runtime/Program.h: host
// memory the runner reads after the step). Every other launch of the entry
// waits for it, so it sits inside the entry's CUDA graph, and a step of such
// an entry is one cudaGraphLaunch: no copy on the stream before it, no copy
// of the status after it (issue 13's "a step is one call").
//
// Why one kernel first rather than checks inside get_rows / rope / set_rows /
// attention: the inputs are read once, in one place, and the consuming
// kernels stay as they are (they already gather zeros for a bad row and skip
// a cache row out of range); the check also sets a bad step's positions to -1
// so that no kernel writes state on that step. It costs one launch per step.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "codegen/cuda/LaunchSchedule.h"

#include <optional>

namespace fg::cuda {

/// The check kernel's source and symbol for `entry`'s checked inputs (those
/// with a range), or none when no input has one. Its parameters: the status
/// words, their device mirror, each checked input's arena slot, then each
/// one's staging, in input order.
std::optional<std::pair<std::string, std::string>> inputCheckKernel(const CompiledEntry &entry);

/// Prepends the input check to `entry`'s launches (node kNoNode, every launch
/// without dependencies now waits for it) and registers its source, when any
/// input has a range. `sourceOfLaunch` is the entry's list in `sources`; the
/// status words' device mirror is `tables`' (SlotTables::statusMirror).
/// `gather` (EmitOptions::checkGathers): the get_rows launch that gathers the
/// checked token's row of a weight table (a one-token entry), waiting for
/// the check alone,
/// runs in the check's block after it (one launch fewer; its record's `what`
/// names it: "... + get_rows ...").
void addInputCheck(CompiledEntry &entry, KernelSources &sources, SlotTables &tables,
                   bool gather = false);

} // namespace fg::cuda
