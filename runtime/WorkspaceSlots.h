//===- WorkspaceSlots.h - which cuBLAS workspace each GEMM of an entry uses -*- C++ -*-===//
//
// A cuBLAS call writes its workspace, so two calls that may run at the same
// time must not share one. Before the tenth session every GEMM of an entry
// waited for the previous one (one workspace, an extra edge each): the q, k
// and v projections of a prefill, parallel branches of the launch DAG, ran
// one after the other. Now an entry's GEMMs rotate through up to
// kWorkspaceSlots workspaces of CompiledProgram::workspaceBytes each: a GEMM
// takes the lowest slot whose last user is one of its ancestors in the
// launch DAG (it has finished by the time this one starts), or an unused
// slot; when there is none, the schedule adds one edge, from the slot used
// longest ago, and takes the lowest slot that frees.
//
// The compiler (codegen/cuda/LaunchSchedule.cpp) runs assignWorkspaceSlots
// with edges allowed and stores only the edges; the runner runs it again on
// the loaded deps, edges refused, and gets the same slots (the choice at each
// GEMM depends only on its ancestors and the earlier choices, and adding an
// edge into GEMM i changes no earlier launch's ancestors). A plan written
// before the slots existed chains every GEMM, so every GEMM finds slot 0 free.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "runtime/Program.h"

#include "llvm/Support/Error.h"

#include <vector>

namespace fg {

/// Workspaces a plan's GEMMs rotate through at most: the widest set of
/// parallel GEMMs of the decoders fusegraph compiles (q, k and v).
constexpr unsigned kWorkspaceSlots = 3;

/// The workspace slot of every launch of `launches` (-1 for kernels), at most
/// `slots` of them. With `addEdges`, a GEMM that finds no free slot gets an
/// edge from the last user of the slot used longest ago (appended to its
/// deps); without, that is an error naming the launch. Deps must point to
/// earlier launches.
llvm::Expected<std::vector<int>> assignWorkspaceSlots(std::vector<LaunchRecord> &launches,
                                                      unsigned slots, bool addEdges);

/// The runner's side: the slots of a loaded entry's launches, no edge added
/// (an error if the plan would need one).
llvm::Expected<std::vector<int>> workspaceSlotsOf(const std::vector<LaunchRecord> &launches,
                                                  unsigned slots);

/// The slots `assignWorkspaceSlots` uses: 1 + the largest slot, 0 without GEMMs.
unsigned workspaceSlotsUsed(const std::vector<int> &slotOfLaunch);

} // namespace fg
