//===- RoutingHeads.h - one token's MoE routing in the expert GEMV's blocks -*- C++ -*-===//
//
// Lowering, after step 4 and the GEMV tails (EmitOptions::routingHeads): a
// fused.topk_moe launch of one token — a single block ranking the router's
// logits, 2-3 µs of launch and latency a MoE layer for a few hundred bytes —
// runs instead at the start of the first expert GEMV that reads its ids
// (fused.gated_matmul_id, matmul_id): after that kernel's programmatic-launch
// wait every block stages the logits and ranks them itself (topk.cuh,
// topkHead: the code and the order of sums of the topk kernel, so the ids
// and weights are the same bits), reads its expert from shared memory, and
// block (0, 0, 0) stores the ids and weights for the launches after it (the
// down projection). A MoE layer's chain is one launch shorter.
//
// Only where the GEMV's blocks all fit on the GPU at half occupancy (blocks
// x threads <= SMs x 1024): each block pays the routing's latency (staging,
// three block reductions, the ranking, one thread's renormalisation) before
// its first weight load, once if every block is resident, once a wave if
// not. Measured on the H200 (twenty-sixth session, bench/RESULTS.md):
// W-moe-12 q4_K's DP4A gated GEMV (264 blocks of 256 threads) 0.4941 ->
// 0.4897 ms a step, the mean of five off / on pairs in three calls (four
// faster, one slower); W-moe-12 f16's tensor-core one (3072 blocks of 128)
// 0.794 / 0.808 -> 0.921 / 0.921 (+14-16 %), so that one keeps the topk launch.
//
// Why the proven plan still holds. The topk launch B is merged into A, the
// first launch that waits for it (the list is in program order, so every
// other dependent of B comes after A and none is an ancestor of A): B's work
// moves later but past no launch that needed it, its dependents wait for A
// instead, and A takes B's dependencies. A launch C that may run beside the merged launch is
// unordered with A: not an ancestor of B (it would be one of A), not a
// descendant of B (those wait for A now), so C was unordered with B in the
// proven plan, which covered it against B's reads and writes. Inside the
// merged launch B's work and A's run side by side in different blocks, so
// the merge checks the arena ranges itself: B's stores (ids, weights)
// overlap nothing A or B reads or A writes, and A's result overlaps nothing
// B reads (the logits, which other blocks may still be staging).
//
//===----------------------------------------------------------------------===//
#pragma once

#include "codegen/cuda/EmitNodes.h"
#include "codegen/cuda/LaunchSchedule.h"
#include "codegen/cuda/ValueLayouts.h"

#include "llvm/ADT/StringRef.h"

#include <optional>
#include <string>

namespace fg::cuda {

/// The head's pointer parameters of a kernel entry: the logits, and the
/// selection bias where the routing has one.
std::string routingHeadParams(bool bias);

/// `src` (a kernel source) with topk.cuh, where it lacks it, and the head's
/// configuration `cfg` (struct FgHead) before its entry, `params` after the
/// entry's parameters, and `code` (whole lines) at the start of its body
/// (`beforeWait`) or right after its programmatic-launch wait; nothing where
/// the entry or its wait is not found. (The routing heads here; the down
/// projection's second ranking, EarlyExperts.h.)
std::optional<std::string> spliceRoutingHead(const std::string &src, const std::string &cfg,
                                             llvm::StringRef params, llvm::StringRef code,
                                             bool beforeWait);

/// Merges the entry's one-token topk_moe launches into the expert GEMVs
/// that read their ids (records, deps and sources). Returns how many
/// launches it removed.
llvm::Expected<unsigned> mergeRoutingHeads(const Function &fn, llvm::ArrayRef<Layout> layouts,
                                           llvm::ArrayRef<NodeCode> code, const ProvenPlan &proven,
                                           const EmitOptions &options, SlotTables &tables,
                                           KernelSources &sources, CompiledEntry &entry);

} // namespace fg::cuda
