//===- GemvTails.h - one-token row work at the end of the GEMV it reads -*- C++ -*-===//
//
// Lowering, after step 4 (EmitOptions::gemvTails): a launch that waits for one
// GEMV launch alone and is the short row work of one token — q's rope, k's
// rope and cache write (fused.rope_set_rows, fused.rms_norm_mul_rope_set_rows),
// the q norm and rope (fused.rms_norm_mul_rope), v's cache write (set_rows) —
// runs as a tail of that GEMV's kernel instead of a launch of its own
// (kernels/common.cuh fg_tails: the last blocks to finish the GEMV wait for
// every block, then run the rows as their own small grid). A decode layer's
// q, k and v paths then end with their projections: up to three launches
// fewer a layer, and the attention waits for one launch less in a row.
//
// Why the proven plan still holds. The plan and its overlap proof are made
// for the separate launches (ProvenPlan.h). A tail B is merged into A only
// when A is B's one predecessor, so every launch that may run beside B's
// work inside A's launch was already proven against B: a launch C that runs
// beside A either is an ancestor of A (then not beside it) or has no path to
// B (B's only edge comes from A), so C was concurrent with B as well. The
// tail runs after every block of A has stored its results (the ticket) and
// before A's launch completes, so whatever waited for B now waits for A.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "codegen/cuda/EmitNodes.h"
#include "codegen/cuda/LaunchSchedule.h"
#include "codegen/cuda/ValueLayouts.h"

namespace fg::cuda {

/// Merges the entry's tail launches into their GEMVs (records, deps and
/// sources). Returns how many launches it removed.
llvm::Expected<unsigned> mergeGemvTails(const Function &fn, llvm::ArrayRef<Layout> layouts,
                                        llvm::ArrayRef<NodeCode> code, const ProvenPlan &proven,
                                        const EmitOptions &options, SlotTables &tables,
                                        KernelSources &sources, CompiledEntry &entry);

} // namespace fg::cuda
