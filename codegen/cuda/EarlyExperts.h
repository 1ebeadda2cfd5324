//===- EarlyExperts.h - an expert launch reads its experts before its wait -*- C++ -*-===//
//
// Lowering, after the launch merges (EmitOptions::earlyExperts): the one-token
// expert down projection (fused.matmul_id_sum_add: kernels/moe_sum.cuh for
// float experts, gemv_dp4a.cuh Dp4aMoeSum for block-quantised ones) reads its
// ids and routing weights after its programmatic-launch wait and only then
// asks DRAM for its expert rows: two dependent round trips on the MoE layer's
// chain. Where the launches that write the ids and the weights are proven
// finished whenever this launch can start, its source is switched to
// Cfg::kEarlyIds: the entry's prologue reads them (at L2, ld.global.cg) and
// loads its first rows before the wait. The same loads and sums: the same
// bits either way.
//
// The proof. A launch D on programmatic edges starts once each of its direct
// predecessors P has passed its trigger; P triggers after its own wait
// (fg_pdl_begin; a trigger-first entry, fg_pdl_begin_trigger_first, refuses),
// and P's wait returns once every launch it depends on has finished with its
// writes visible. So every strict ancestor of a direct predecessor of D has
// finished when D starts (the set F). D's prologue sees what it would see
// after its wait if every launch L that may write the bytes of the ids or the
// weights is in F (finished before D starts) or a descendant of D (those
// start only after every block of D has passed its prologue and trigger);
// any other writer — a direct predecessor itself, a launch unordered with D —
// refuses. A launch may write its node's results (a routing head's host:
// and the topk node's); a launch that runs other merged work (the GEMV
// tails, a GEMM pair: "+" in its label) may write anything. Graph inputs refuse (their writers, the
// input check and the copies before the graph, are not launches here).
// A graph with full edges (an entry with cuBLAS calls; programmatic launch
// off) or an eager run starts D after its predecessors finished: the proof
// holds a fortiori. FG_DEBUG_PDL_EARLY_TRIGGER=1 (timing only) voids it, so
// it turns the pass off.
//
// So it serves a model whose routing is its own launch (topk_moe, two
// launches before the down projection: the float experts of W-moe-12). With
// the routing heads (RoutingHeads.h: the DP4A experts) the ids come from the
// gated launch right before, whose writes are its node's results and the
// topk node's; there the down projection may rank the router's logits again
// before its wait instead (EmitOptions::earlyRankedMinGatedBytes: off,
// measured slower on W-moe-12 q4_K; topk.cuh, topkHeadEarly: the head's code and
// order of sums, no stores; its ids and weights in shared memory,
// Cfg::kSlotsShared) where the head's threads fit its block, taking the
// logits as one more pointer (a selection bias only as a weight). The plan
// never had the down projection read the logits: their bytes may go to any
// value defined after the routing, the down projection's own result
// included (a block that passed its wait may store it while a late block
// still ranks). So for them the proof is stricter: the router GEMV (the
// logits' producer, finished when the launch starts) and its ancestors are
// the only writers allowed besides the launch's descendants, and the
// launch's own results and scratch must not touch them
// (EarlyExperts.ALogitsAliasRefusesTheRankedForm plants that alias).
//
//===----------------------------------------------------------------------===//
#pragma once

#include "codegen/cuda/EmitNodes.h"
#include "codegen/cuda/LaunchSchedule.h"

#include "llvm/ADT/StringRef.h"

namespace fg::cuda {

/// The marker the down projections' sources carry (GemvEmitter.cpp) and
/// what it becomes.
inline constexpr const char *kEarlyIdsOff = "kEarlyIds = false";
inline constexpr const char *kEarlyIdsOn = "kEarlyIds = true";
/// What a switched launch's label (LaunchRecord::what) ends with: it reads
/// the stored ids, or ranks the router's logits again (inspect counts them).
inline constexpr llvm::StringLiteral kEarlyReadLabel = " (experts read before the wait)";
inline constexpr llvm::StringLiteral kEarlyRankedLabel =
    " (experts ranked again before the wait)";

/// Switches the entry's expert down projections whose ids and routing
/// weights are proven written before they start to their early form; also
/// those that may rank the router's logits again where the gated launch
/// before them streams at least `rankMinGatedBytes` of selected experts
/// (EmitOptions::earlyRankedMinGatedBytes; -1: none). Returns how many it
/// switched.
llvm::Expected<unsigned> markEarlyExperts(const Function &fn, const ProvenPlan &proven,
                                          int64_t rankMinGatedBytes,
                                          SlotTables &tables, KernelSources &sources,
                                          CompiledEntry &entry);

} // namespace fg::cuda
