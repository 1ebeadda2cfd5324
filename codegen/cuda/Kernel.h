//===- Kernel.h - what the CUDA emitters produce for one node ----*- C++ -*-===//
//
// emitKernel() turns one node of a Function into a short list of launches:
// generated CUDA C++ kernels (KernelSpec) and cuBLAS calls (CublasGemmSpec).
// Shapes, strides and attributes are baked into the source as constants (the
// kernels are specialised); run-time values (positions, token ids, expert ids)
// are read from device memory, so one CUDA graph serves every step.
//
// Kernel calling convention: every parameter is a pointer, in the order of
// KernelSpec::params, to the START of the buffer (operand, result or scratch);
// operand layouts (element strides and offset) are already in the source. Each
// kernel is `extern "C" __global__`, named KernelSpec::name. Results are
// written densely (row-major). Launches of one node run in list order on one
// stream and share one scratch buffer.
//
// View-like ops (reshape, view, permute, transpose) produce no launch: their
// result aliases the operand with the layout viewLayout() gives.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "codegen/cuda/Cublas.h"
#include "ir/Graph.h"
#include "ir/Quantize.h"

#include "llvm/ADT/ArrayRef.h"
#include "llvm/Support/Error.h"

#include <optional>
#include <string>
#include <variant>
#include <vector>

namespace fg::cuda {

/// How an operand lies in memory, in elements: element [i..] is at
/// base[offset + Σ i_d·strides_d]. Views are not materialised; consumers read
/// through this.
struct Layout {
  Shape shape, strides;
  int64_t offset = 0;

  static Layout contiguous(llvm::ArrayRef<int64_t> shape);
  bool isContiguous() const; ///< dense row-major with offset 0
  bool operator==(const Layout &o) const {
    return shape == o.shape && strides == o.strides && offset == o.offset;
  }
};

/// The layout of a view-like node's result given its operand's layout, or
/// nullopt when it cannot be expressed with strides (reshape of a
/// non-contiguous operand: insert a `cont`). Asserts the node is view-like.
std::optional<Layout> viewLayout(const Node &node, const Layout &operand);

/// What a KernelSpec's kernel is, where a rule outside its emitter needs to
/// know (CudaTarget::cost); Other for every kernel no rule asks about.
enum class KernelForm : uint8_t {
  Other,
  MergedTensorCoreGemv, ///< fused.matmul_multi's segments on the tensor cores (gemvMulti)
  Dp4aGemv,             ///< a GEMV at T = 1 on DP4A (gemv_dp4a.cuh), merged segments too
};

struct KernelSpec {
  std::string name;   ///< the kernel's entry symbol in `source`
  std::string source; ///< complete CUDA C++ translation unit
  unsigned grid[3] = {1, 1, 1};
  unsigned block[3] = {1, 1, 1};
  unsigned sharedBytes = 0; ///< dynamic shared memory
  std::vector<Param> params;
  uint64_t scratchBytes = 0; ///< scratch this launch list needs
  /// Bytes of the launch's own counters (Param::counters()): zero before
  /// its first run, and the kernel leaves them zero, so no launch clears them.
  uint64_t counterBytes = 0;
  KernelForm form = KernelForm::Other; ///< not part of a plan: the compiler's rules read it
  /// The plain GEMV (kernels/gemv.cuh gemv<Cfg>): the output rows each block
  /// stores, block b rows [b·tileRows, (b + 1)·tileRows); the merged one
  /// (gemvMulti) likewise within each segment's range of blocks; 0 for every
  /// other kernel. Not part of a plan: the GEMV tails' local forms read it.
  int64_t tileRows = 0;
  /// How its GEMVs read x (LaunchRecord::actQuant): Int8 on DP4A.
  ActQuant actQuant = ActQuant::Exact;
};

using Launch = std::variant<KernelSpec, CublasGemmSpec>;

struct EmitOptions {
  std::string arch = "sm_90";
  /// matmul with at most this many rows of x uses the generated GEMV; above,
  /// cuBLAS.
  int64_t maxGemvTokens = 8;
  /// attention over at least this many queries (a prefill chunk) uses the
  /// flash-attention prefill kernel where it applies (16-bit caches, head
  /// dims multiples of 16 up to 128); fewer, the flash-decoding kernel.
  int64_t attentionPrefillMinTokens = 9;
  /// The prefill flash kernel keeps q and P as one rounded 16-bit value each
  /// instead of hi + lo (half the mmas, fewer registers, ~1e-3 error), as
  /// FlashAttention does. Measured on the H200 (eighth session, one run):
  /// W-dense prefill 512 attention 3.54 -> 3.07 ms, W-moe-12 1.29 -> 1.13.
  /// Off (FG_DEBUG_FLASH_HALF=0): hi + lo, ~22 bits.
  bool attentionPrefillHalf = true;
  /// __launch_bounds__ minimum blocks per SM for the prefill flash kernel (0:
  /// none; it takes 255 registers and runs 2 blocks of 4 warps per SM, 9.7 %
  /// achieved occupancy on the H200). For timing (FG_DEBUG_FLASH_MIN_BLOCKS).
  unsigned attentionPrefillMinBlocks = 0;
  /// Key tiles in flight in the prefill flash kernel: 2 (the next tile's
  /// cp.async overlaps this one's mmas) or 1 (load, wait, compute: the form
  /// before the ninth session). Measured on the H200 (ninth session, W-dense
  /// prefill of 512 tokens, attention): 1.60 ms with 2, 1.79 with 1.
  /// FG_DEBUG_FLASH_STAGES (1-3; 3 holds two tiles ahead: 104 KB of
  /// shared memory a block at D = 128, still two blocks an SM).
  int attentionPrefillStages = 2;
  /// The prefill flash kernel waits for a tile's K before S = q·Kᵀ and for
  /// its V only before O += P·V (two cp.async groups a tile and a third
  /// barrier), as FlashAttention-2 does; off: one wait for both.
  /// FG_DEBUG_FLASH_SPLIT_WAIT.
  bool attentionPrefillSplitWait = false;
  /// Warps (16 queries each) per block of the prefill flash kernel: 4 (64
  /// queries, two blocks an SM at 230 registers) or 8 (128 queries: each
  /// key tile staged once for twice the rows, one block an SM).
  /// FG_DEBUG_FLASH_WARPS.
  int attentionPrefillWarps = 4;
  /// The prefill flash kernel's S = q·Kᵀ and O += P·V on warpgroup MMAs
  /// (wgmma, sm_90a: K and V read by the tensor cores from shared memory
  /// once per 64 queries, where ldmatrix brought every fragment through
  /// each warp's registers) on compute capability 9.0; elsewhere, or where
  /// its shape rules refuse (AttentionPrefillEmitter.cpp), mma.sync.
  /// FG_DEBUG_FLASH_WGMMA.
  bool attentionPrefillWgmma = false;
  /// The wgmma form with three stages: each tile's O += P·V is waited for
  /// with the next tile's S (its tensor-core time overlaps the barrier and
  /// the copies between), one tile ahead instead of two.
  /// FG_DEBUG_FLASH_WG_DEFER.
  bool attentionPrefillWgDefer = false;
  /// Key rows per shared-memory tile of the prefill flash kernel (64; 32
  /// halves the score registers and the tile's shared memory, and measured
  /// slower on the H200, ninth session: W-dense prefill attention 1.62 ->
  /// 2.12 ms at 512 tokens, 13.1 -> 17.7 at 2048). For timing
  /// (FG_DEBUG_FLASH_KEYS=32|64).
  int attentionPrefillKeys = 64;
  /// S = q·Kᵀ of the prefill flash kernel with the head-dim steps outer and
  /// the key columns inner (consecutive mmas independent) instead of one
  /// column's D/16 mmas back to back: 230 registers instead of 250, and on
  /// the H200 (thirtieth session, one call, two runs each, W-dense prefill
  /// attention) 0.808/0.826 -> 0.788/0.798 ms at 512 tokens, 7.118/7.104 ->
  /// 6.988/6.989 at 2048. FG_DEBUG_FLASH_KS_OUTER=0 for the previous order.
  bool attentionPrefillKsOuter = true;
  /// A prefill rope (more than maxGemvTokens tokens) takes this many heads of
  /// a token per warp, computing each angle once for all of them (2 where
  /// the head count is not a multiple; 1: a head a warp, the form before the
  /// ninth session). Measured on the H200 (ninth session, with the flash
  /// kernel's changes, same call): W-dense's prefill ropes 0.66 -> 0.21 ms at
  /// 512 tokens, 2.57 -> 0.76 at 2048. FG_DEBUG_ROPE_HEADS.
  int64_t ropeHeads = 4;
  /// Decode attention: cp.async stages of each warp's ring in shared memory
  /// (-1: the rule of AttentionEmitter.cpp; 0: the register-load form, no
  /// ring; 2..8; 1 means register loads too), 8-key steps per tile (0: the
  /// rule), the blocks per SM its split grid is sized for (0: the rule) and
  /// the tiles each warp takes at least in a split of the ring form (0: the
  /// rule; the register path of a hybrid keeps its own splits). For timing
  /// (FG_DEBUG_ATTN_STAGES / _STEPS / _BLOCKS_PER_SM / _MIN_TILES,
  /// fg_bench_kernels --attn-*).
  int attentionStages = -1, attentionSteps = 0, attentionBlocksPerSm = 0, attentionMinTiles = 0;
  /// The split form's tree merge (attention.cuh, attnMergeSplits): splits a
  /// group (0: one block merges every split; -1: groups of ⌈√splits⌉ past
  /// 2 · SMs head-splits). Off: measured slower everywhere (H100, thirty-eighth
  /// session, --pdl, µs one level -> the -1 rule): W-moe KV 8192 15.8 ->
  /// 20.5, KV 32768 35.0 -> 37.8; groups of 6 on W-dense KV 8192 17.9 ->
  /// 21.0; the W-moe-12 step at KV 8192 1.083 -> 1.143 ms. A merge level
  /// is a fence, a counter and two L2 round trips (~3-5 us); the one
  /// block's read of every partial is not the bound. FG_DEBUG_ATTN_MERGE_GROUP.
  int attentionMergeGroup = 0;
  /// The split merge's partials loaded at once a column: its o loop's
  /// unroll up to 16; above, batches of that many while that many are left,
  /// then the 16-wide loop (attention.cuh attnMergeSplits). A plain 32-wide
  /// unroll measured 1-3 % faster at T = 1 and KV 8192 / 32768 but 9.5 %
  /// slower where the splits are fewer than 32 (all in the loop's
  /// remainder: W-dense at T = 2; thirty-eighth session); the batched form
  /// is not yet timed. 1..32 (a batch of 32 float4 is 128 registers).
  /// FG_DEBUG_ATTN_MERGE_UNROLL.
  int attentionMergeUnroll = 16;
  /// The staged form runs tokens with at most this many live rows in the
  /// register-load form (one kernel, chosen per token at run time). Measured
  /// on the H200 (eighth session): at KV 1024 register loads are faster
  /// (W-dense kernel 7.40 us, the ring 8.49), at KV 8192 the ring (19.23 us,
  /// register loads 20.98; W-moe 18.67 against 25.24).
  /// FG_DEBUG_ATTN_REG_MAX_LIVE (0: always staged).
  int64_t attentionRegMaxLive = 2048;
  /// The ring is compiled in only for caches of more than this many rows: at
  /// short KV the kernel's 64 KB of shared memory costs W-moe-12 1.5 % a step
  /// even on the register path (eighth session), and a cache of at most 4096
  /// rows rarely reaches the lengths where the ring wins (8192: W-moe-12
  /// -9 to -10 % a step, W-dense -2 %). FG_DEBUG_ATTN_STAGES=N > 0 forces
  /// the ring.
  int64_t attentionRingMinCtx = 4096;
  /// Decode attention's cluster form (register loads only: caches of at
  /// most attentionRingMinCtx rows unless the ring is forced): the splits of
  /// one (kv head, token) are the blocks of one thread-block cluster of this
  /// many (at most 8, the portable size; 0: off, the splits merge through
  /// scratch and a counter in global memory). Each block sends its merged
  /// partial of head h straight into the shared memory of the cluster's
  /// block h (distributed shared memory), and after one cluster barrier
  /// each block h merges its head and writes it: no fence, atomic or L2 round
  /// trip on the way out. attentionClusterWarps warps a block (4 or 8: a
  /// cluster of 8 blocks of 8 warps covers 1024 keys in one round of 16-key
  /// tiles at D = 128). Written in the eighteenth session: the kernel at KV
  /// 1024 issues one instruction every 7.5 cycles from one warp a scheduler
  /// (Nsight Compute, call 2): latency on the way out, not bandwidth.
  /// Measured (call 3, same run): the kernel at KV 1024 W-dense 7.90 ->
  /// 7.35 us, W-moe 9.77 -> 8.38 (4 warps: 8.59 / 9.60; clusters of 4:
  /// 8.65 / 9.79); steps W-dense q4_K 1.9245 / 1.9251 -> 1.8965 / 1.9021 ms,
  /// W-dense f16 4.0609 -> 4.0413, W-moe-12 q4_K 0.5677 -> 0.5665: on.
  /// FG_DEBUG_ATTN_CLUSTER=N (0: off), FG_DEBUG_ATTN_CLUSTER_WARPS=4|8,
  /// fg_bench_kernels --attn-cluster / --attn-cluster-warps.
  /// attentionClusterSteps: 8-key steps of a warp's tile in the cluster form
  /// (0: the rule, at most 3 steps and 24 16-byte loads a lane: 3 at D = 64
  /// and 128 with 16-bit caches, 1 at D = 256 and with f32 caches at D =
  /// 128). A round
  /// of 8 blocks of 8 warps covers 1024 keys at 2 steps, so 1025 live keys
  /// took a second round trip in one warp a block; 3 covers 1536 (NVRTC,
  /// D = 128 f16: 166 / 206 registers at 2 / 3). Measured in the
  /// twenty-fourth session (call 3, FG_DEBUG_ATTN_CLUSTER_STEPS=3 against
  /// the rule of 2 then): W-moe-12 q4_K 0.5072 -> 0.5010 ms, W-dense q4_K
  /// 1.8334 -> 1.8225, W-moe-12 0.8025 -> 0.7977; the rule since.
  /// FG_DEBUG_ATTN_CLUSTER_STEPS, --attn-cluster-steps.
  int attentionCluster = 8, attentionClusterWarps = 8, attentionClusterSteps = 0;
  /// Decode attention's early loads (attention.cuh, attentionEarly): a
  /// one-token launch in the register form loads its warps' first tile of K
  /// and V rows into registers before griddepcontrol.wait, while the kernels
  /// before it still run, and after the wait loads again only the token's
  /// own row (which this step's set_rows wrote). Only where the cache
  /// operands are arguments or one set_rows at the attention's positions
  /// into an argument (AttentionEmitter.cpp, cacheWrites).
  /// FG_DEBUG_ATTN_EARLY=0, fg_bench_kernels --attn-early 0.
  bool attentionEarlyLoads = true;
  /// One-token row launches that wait for one GEMV alone (q's rope, k's
  /// rope and cache write, the q/k norm rows, v's cache write) run as tails
  /// of that GEMV's kernel (GemvTails.h, common.cuh fg_tails): up to three
  /// launches fewer a decoder layer. Measured in the twenty-fifth session
  /// (same run, graph-fused): W-tiny 0.1467 -> 0.1567-0.1608 ms (84 -> 60
  /// launches), W-dense q4_K 1.784 -> 1.821, W-moe-12 q4_K 0.5006 -> 0.4994:
  /// the ticket, the wait for every block and the tails' L2 round trips cost
  /// more than the programmatic launch boundary they replace, so off.
  /// Bit-identical results (GpuGemvTails.*). FG_DEBUG_GEMV_TAILS=1.
  bool gemvTails = false;
  /// Threads a block of the token launch (kernels/greedy.cuh; 32 to 1024, a
  /// multiple of 32). The draw (sample.cuh) is one block's work over the whole
  /// row, latency-bound at 8 warps (H200, thirty-sixth session: 31-46 µs for
  /// temperature alone over W-tiny's 32000 logits, 16-19 cycles a warp
  /// instruction); 1024 threads give it four times the warps, with the grid
  /// four times smaller for the argmax. Measured in the thirty-seventh
  /// session (H100, W-tiny, two rounds, wall ms): greedy 0.1545 / 0.1544 at
  /// 256 against 0.1557 / 0.1536; top-k 40 + top-p 0.95 drawn 0.2254 /
  /// 0.2264 -> 0.1868 / 0.1860 (-17 %); temperature alone 0.1854 / 0.1862 ->
  /// 0.1776 / 0.1763 (-5 %); the greedy and draw tests pass at both.
  /// FG_DEBUG_GREEDY_THREADS=256 gives the previous form.
  unsigned greedyThreads = 1024;
  /// Values a thread of the greedy token's launch scans at least: its grid
  /// is ceil(vocab / (greedyThreads · this)) blocks, and a grid of one block
  /// takes its winner without atomics or a ticket (kernels/greedy.cuh).
  /// FG_DEBUG_GREEDY_PER_THREAD.
  unsigned greedyPerThread = 4;
  /// The entry's embedding gather (get_rows of the checked token ids) in the
  /// input check's launch, after the check (InputCheck.h): one launch, and
  /// one hop of the step's chain, fewer. Built in the forty-third session
  /// after its device time was spent: off until measured.
  /// FG_DEBUG_CHECK_GATHER=1 turns it on.
  bool checkGathers = false;
  /// The local form of those tails (GemvTails.h): where a plain GEMV (one
  /// tile of rows a block) is read whole by a rope in normal mode (pairs of
  /// neighbouring channels), a rope and cache write, or a cache write, each
  /// block runs that row work on the elements it just stored — no ticket, no
  /// wait for other blocks. W-tiny's q, k and v paths (10 -> 7 launches a
  /// layer). Written in the twenty-fifth session after the last GPU call:
  /// compiled with NVRTC, not yet run on a GPU, so off.
  /// FG_DEBUG_GEMV_LOCAL_TAILS=1 (the store form below, where on, takes
  /// these cases first).
  bool gemvLocalTails = false;
  /// The register form of the local tails (GemvTails.h; gemv.cuh
  /// GemvNoTail): where the local form applies, each thread that stores an
  /// element of the GEMV's result runs the row op on that value at once —
  /// the rope's pair partner added from the same partial sums, the angle and
  /// the cache row computed there, the cache written from registers — with
  /// no barrier and no re-read (the local form's cost: a barrier and an L2
  /// round trip per block). One tail a GEMV. The same bits as the launches
  /// (GpuGemvTails.StoreForm*). On since the forty-second session: W-tiny
  /// 84 -> 60 launches, 0.1518-0.1522 -> 0.1465-0.1471 ms (-3.4 %, H100,
  /// three pairs of steps in one call), W-dense 389 -> 293 launches, even.
  /// A merged projection (gemvMulti) takes one store tail a segment (its
  /// q's rope, k's rope and cache write, v's cache write: forty-third
  /// session). FG_DEBUG_GEMV_STORE_TAILS=0 turns it off.
  bool gemvStoreTails = true;
  /// The store tails' reads ahead: the rope angle (f64 pow, cos, sin: ~3 %
  /// of a W-tiny step at the end of the GEMV, forty-second session:
  /// debugStoreTailNoAngle) and the cache row, computed before the GEMV's
  /// wait from the positions, so their latency overlaps the kernel before it
  /// (GemvTails.cpp earlyOk: only where no predecessor triggers first and the
  /// positions are the entry's input). Bit-identical. Measured (H100, same
  /// calls): the angle alone ahead (q and k) W-tiny -0.9 % against the store
  /// tails, W-dense even; with the cache rows ahead too (q, k and v) W-tiny
  /// +1.5 %, W-dense +4.6 % — the code ahead runs before a trigger-first
  /// GEMV's trigger, delaying the attention's launch. Off until it runs
  /// between the trigger and the wait. FG_DEBUG_STORE_TAIL_EARLY=1.
  bool gemvStoreTailEarly = false;
  /// One token's MoE routing (fused.topk_moe) run by every block of the
  /// expert GEMV that reads its ids, after that kernel's wait, instead of a
  /// launch of its own (RoutingHeads.h; topk.cuh, topkHead): a MoE layer's
  /// chain one launch shorter, the same ids and weights to the bit; only
  /// where the GEMV's blocks fit the GPU at half occupancy (the DP4A expert
  /// GEMVs, not the tensor-core one: measured in RoutingHeads.h). On since
  /// the twenty-sixth session (W-moe-12 q4_K -0.9 % over five pairs of steps
  /// in three calls, four of them faster).
  /// FG_DEBUG_ROUTING_HEADS=0 turns it off.
  bool routingHeads = true;
  /// The routing heads' blocks that do not store the ids rank the staged
  /// logits themselves where that provably gives the gate's ids in the same
  /// order (topk.cuh, topkRanksLogits: softmax or delayed softmax without a
  /// selection bias, finite logits, neighbours 2^-20 apart): the GEMV needs
  /// only the ids, so they skip the gate's f64 exps, its sums and three
  /// barriers before their first weight load; the block that stores ids and
  /// weights, the last (fewest tiles), runs the whole routing. The same bits.
  /// Correct on the H100 (GpuRoutingHeads.RankedLogitsKeepTheGatesOrder,
  /// memcheck) but not faster (forty-first session: W-moe-12 q4_K even, q8_0
  /// +0.4 %; ~0.25 us off a gated launch alone, none in the graph), so off;
  /// FG_DEBUG_HEAD_RANKS_LOGITS=1 turns it on.
  bool routingHeadRanksLogits = false;
  /// Timing only, wrong values: the launches of these ops (mnemonics, comma
  /// separated: "rope,set_rows") are dropped from every entry's schedule, each
  /// folded into the launch before it as a merge would (dropMergedLaunches),
  /// so a step shows what merging them away could save at most.
  /// FG_DEBUG_DROP_OPS=rope,set_rows.
  std::string debugDropOps;
  /// Timing only, wrong values: the store tails' ropes skip the angle (cos
  /// 1, sin 0) — what the f64 angle costs at the end of the GEMV.
  /// FG_DEBUG_STORE_TAIL_NO_ANGLE=1.
  bool debugStoreTailNoAngle = false;
  /// The one-token expert down projection reads its ids and routing weights
  /// and loads its first rows before its programmatic-launch wait where their
  /// writers are proven finished when it starts (EarlyExperts.h; the float
  /// experts of a model whose routing is its own launch). On since the
  /// fortieth session (H100, W-moe-12 f16 -1.3 % over four pairs of steps in
  /// one call, every one faster; the same bits as the late form).
  /// FG_DEBUG_EARLY_EXPERTS=0 turns it off.
  bool earlyExperts = true;
  /// With the routing heads, the down projection ranks the router's logits
  /// again before its wait instead (EarlyExperts.h, the ranked form), where
  /// the gated launch before it streams at least this many bytes of its
  /// selected experts (its blocks' re-ranking then hides under that launch);
  /// -1: never. Off: measured in the fortieth session (H100, same call),
  /// W-moe-12 q4_K (14.2 MB of selected gate|up a layer) +0.3 % slower over
  /// four pairs, every one; q8_0 (26.7 MB) -0.7 % over two. A threshold
  /// between them (FG_DEBUG_EARLY_RANKED_MIN_MB=20) is the next thing to
  /// time; FG_DEBUG_EARLY_RANKED=1 takes every launch (0), =0 none.
  int64_t earlyRankedMinGatedBytes = -1;
  /// Sibling cuBLAS GEMMs of one B and one shape (a prefill chunk's k and v
  /// projections) as one strided batch of two (GemmPairs.h); written in the
  /// twenty-ninth session after fg_bench_prefill_gemms' strided form (7 µs a
  /// W-dense layer less at 512 rows). FG_DEBUG_GEMM_PAIRS=0 turns it off.
  bool gemmPairs = true;
  /// fused.gated_gemm's stacked GEMM writes gate|up in the result's 16-bit
  /// type where that is the GEMM's operand type (f16 weights and result, or
  /// bf16 and bf16), not f32: its scratch and the GLU's reads halve (W-dense
  /// 2048 rows: 235 -> 117 MB a layer each way). Off: f32, the form before
  /// the thirtieth session. In f16 a gate or up value beyond ±65504 becomes
  /// ±inf (and a GLU of −inf NaN) where f32 kept it finite; bf16 keeps f32's
  /// range. ggml's cuBLAS path rounds the same GEMMs' results to f16 too.
  /// FG_DEBUG_GATED_GEMM_NARROW=0 turns it off.
  bool gatedGemmNarrowC = true;
  /// fused.gated_gemm's GLU (the vector elementwise form): groups of 4
  /// elements a thread, all loaded before the first is computed (1: one
  /// group, the form of every other elementwise kernel). Measured slower on
  /// the H200 (thirtieth session, W-dense 2048-token prefill, two runs
  /// each): the 32 GLUs 1.870 / 1.867 ms with 1, 2.095 / 2.089 with 2,
  /// 2.036 / 2.013 with 4 — 16 bytes in flight a thread already cover the
  /// latency. For timing: FG_DEBUG_GLU_GROUPS=N (1-8).
  int gluGroups = 1;
  /// fused.matmul_id_sum_add of one token with f16, bf16 or f32 experts
  /// (kernels/moe_sum.cuh, a warp a row over the k slots' rows end to end),
  /// where only the DP4A form existed: W-moe-12 f16 15 -> 14 launches a
  /// layer (the weighted sum's launch gone). On since the twenty-seventh
  /// session: steps off / on alternating in one call, W-moe-12 f16
  /// 0.7996/0.7646 and 0.7905/0.7673 ms (-3.6 %), bf16 -3.6 %, W-moe-48 f16
  /// -3.3 %. FG_DEBUG_MOE_SUM_FLOAT=0 turns it off.
  bool moeSumFloat = true;
  /// Decode attention loads its share of q before the position (attention.cuh,
  /// kQFirst; not with q's rope, and at most 2 fragments a thread), so the two
  /// round trips after the wait overlap: the phase stamps of the twenty-fourth
  /// session measured the position's alone at 900-1800 cycles before q's
  /// 700-1100. Bit-identical results (GpuAttentionOptions.QFirstBitIdentical).
  /// On since the twenty-fifth session (with attentionClusterAsync: W-tiny
  /// -2 to -4 %, W-moe-12 q4_K -1.5 to -2 %). FG_DEBUG_ATTN_Q_FIRST=0,
  /// fg_bench_kernels --attn-q-first 0.
  bool attentionQFirst = true;
  /// Decode attention's cluster form sends its partials by st.async into an
  /// mbarrier of the merging block (attention.cuh, kClusterAsync) instead of
  /// remote stores and a second cluster barrier, whose release half is a
  /// MEMBAR.ALL.GPU on sm_90 (read from the SASS). Bit-identical results
  /// (GpuAttentionOptions.ClusterAsyncBitIdentical). On since the
  /// twenty-fifth session. FG_DEBUG_ATTN_CLUSTER_ASYNC=0,
  /// --attn-cluster-async 0.
  bool attentionClusterAsync = true;
  /// Programmatic-launch prologues: the bytes one launch of a dense GEMV or
  /// of decode attention prefetches into L2 before its griddepcontrol.wait
  /// (its first weight rows; the KV rows of its split), while the kernel
  /// before it still runs (kernels/gemv.cuh gemvPrefetch, attention.cuh
  /// attentionPrefetch). 0: no prologue. FG_DEBUG_PDL_PREFETCH_MB.
  /// Measured on the H200 (eleventh session, one call, three rounds; graph-
  /// fused ms a step): 16 MiB with the 4 MiB weight limit below took W-tiny
  /// 0.1983 -> 0.1721 (-13 %), W-moe-12 0.866 -> 0.857, W-dense 4.136 ->
  /// 4.123; without the limit W-dense lost 4 % (4.136 -> 4.284).
  int64_t pdlPrefetchBytes = 16 << 20;
  /// Only GEMVs whose weights (both streams) are at most this many bytes get
  /// the prologue: a launch that streams tens of MB is bandwidth-bound from
  /// its first tile, and prefetching its head only takes DRAM time from the
  /// kernel before it. Negative: no limit. FG_DEBUG_PDL_PREFETCH_MAX_MB.
  int64_t pdlPrefetchMaxWeightBytes = 4 << 20;
  /// Whether decode attention gets its prologue (with a budget above 0).
  /// FG_DEBUG_PDL_PREFETCH_ATTN=0 leaves it out.
  bool pdlPrefetchAttention = true;
  /// The kernels whose results a one-token decode attention reads (its q
  /// rope, its caches' set_rows) trigger their dependents before their own
  /// wait (common.cuh, fg_pdl_begin_trigger_first), so the attention's
  /// prologue runs during the kernels before them (EmitNodes.cpp).
  /// Measured (twenty-fourth session, call 3, one run, graph-fused ms, with
  /// 3-step cluster tiles): W-tiny 0.1504 / 0.1512 -> 0.1485 / 0.1487,
  /// W-dense 4.0310 / 4.0295 -> 4.0031 / 4.0151, W-dense q4_K 1.8225 ->
  /// 1.8079, W-moe-12 q4_K 0.5010 -> 0.4962: on. FG_DEBUG_PDL_ATTN_TRIGGER=0|1.
  bool pdlTriggerBeforeAttention = true;
  /// Elementwise maps over the output: elements a thread, their operands
  /// prefetched into L1 before the first is computed (FG_DEBUG_EW_ILP=N). One
  /// by default: measured on the H200 (ninth session, one call), 2 and 4
  /// took W-dense's 512-token prefill 20.60 -> 19.05 ms, but the vector form
  /// below (where it applies, which is every convert, GLU and add of that
  /// prefill) took it to 18.53, and decode steps did not move with either.
  int elementwiseIlp = 1;
  /// Elementwise maps whose operands are all read at the output's own flat
  /// index (no broadcast, offsets keeping groups of 4 aligned): 4 elements a
  /// thread through one vector load per operand and one vector store (8 or
  /// 16 bytes); it takes precedence over elementwiseIlp where it applies.
  /// Measured on the H200 (ninth session, one call, W-dense prefill of 512
  /// tokens): converts 2.13 -> 0.69 ms, GLUs 1.51 -> 0.65, adds 0.71 -> 0.40,
  /// the prefill 20.60 -> 18.53 ms (W-moe-12 12.09 -> 11.89); decode steps
  /// within noise. FG_DEBUG_EW_VEC=0 turns it off.
  bool elementwiseVector = true;
  /// matmul_id / fused.gated_matmul_id over at least this many tokens sort
  /// their (token, slot) pairs by expert on the device and run one grouped
  /// GEMM (16-bit weights); fewer, the expert-indexed GEMV.
  int64_t groupedExpertMinTokens = 9;
  /// Pairs per tile of the grouped expert GEMM: 32 or 64 (0: the rule — 64
  /// for one weight stream, a whole expert at W-moe's 512-token prefill, ~32
  /// pairs each, so its weights are read once; 32 for gate|up's two streams,
  /// where 64 rows made the block's math too long). Measured on the H200
  /// (eighth session, W-moe-12 prefill 512): down 3.99 -> 3.73 ms with 64,
  /// gate|up 5.33 -> 6.06 with 64. Quantised gate|up takes 64 too (its cost
  /// is decoding each weight once a tile: MoeEmitter.cpp). FG_DEBUG_MOE_ROWS
  /// forces one.
  int64_t groupedExpertRows = 0;
  /// The grouped expert GEMM's k-step, 32 or 64 (0: the rule, 64: half the
  /// round trips a block waits for; W-moe-12 f16 512-token prefill 9.20 ->
  /// 8.41 ms on the H200, twelfth session). FG_DEBUG_MOE_KT forces one.
  int64_t groupedExpertKT = 0;
  /// Quantised experts in the grouped GEMM: a thread's weight units are the
  /// quarters of one row's 32-weight step (1: one scale decode a step) or
  /// spread over rows like the 16-bit form's (0: whole sectors per warp load);
  /// -1: the rule (MoeEmitter.cpp). FG_DEBUG_MOE_QROW forces one.
  int groupedExpertQuantRowUnits = -1;
  /// Quantised experts in the grouped GEMM: a step's raw block bytes wait in
  /// registers through the previous step's mmas and are decoded when stored
  /// to the tile (1), or are decoded as they arrive, before those mmas (0);
  /// -1: the rule, deferred for two streams only. Measured (H200, thirteenth
  /// session, W-moe-12 q4_K 512-token prefill, 256 threads): gate|up 4.89 ->
  /// 4.22 ms deferred, down 2.28 -> 2.67. FG_DEBUG_MOE_QDEFER=0|1.
  int groupedExpertQuantDeferred = -1;
  /// Threads a block of the grouped expert GEMM: 128, or 256 where each
  /// thread keeps whole units (MoeEmitter.cpp: half the registers a thread,
  /// twice the warps an SM); 0: the rule, 256 for block-quantised experts and
  /// 128 for 16-bit ones. Measured (H200, thirteenth session, W-moe-12
  /// 512-token prefill): q4_K 11.95 -> 9.14 ms at 256, f16 8.37 -> 8.85.
  /// FG_DEBUG_MOE_THREADS=128|256.
  int64_t groupedExpertThreads = 0;
  /// The grouped expert GEMM's warps skip the mmas of m tiles past their
  /// tile's rows (an expert's last tile, or one with fewer pairs than the
  /// tile's height: ~32 pairs an expert in 64-row tiles at W-moe's
  /// 512-token prefill), for block-quantised experts (the rule and its
  /// measurement are in MoeEmitter.cpp). Same bits either way.
  /// FG_DEBUG_MOE_SKIP_ROWS=0 turns it off.
  bool groupedExpertSkipRows = true;
  /// The grouped expert GEMM over block-quantised experts takes x in f16
  /// (which it rounds x to anyway, gemvQuantXHalf): the `gemm-inputs` pass
  /// converts x once (Target::groupedExpertHalfX) and the kernel loads 8
  /// halves a unit straight into its tile — half the x bytes each of a
  /// layer's column blocks re-reads, and no conversion a block. The same
  /// bits (one round to nearest of the same f32, in the convert instead of
  /// the GEMM). Written after the thirty-second session's last GPU call:
  /// opt-in until its GPU test runs. FG_DEBUG_MOE_HALF_X=1.
  bool groupedExpertHalfX = false;
  /// The grouped expert GEMM over block-quantised experts (K a multiple of
  /// 256) on integer tensor cores (kernels/moe_i8.cuh): x quantised to int8
  /// per 32 once, by the routing launch's other blocks, and the weights fed
  /// to mma.m16n8k32 as they lie, where the f16 form decodes each weight to
  /// an f16 tile (~22 instructions a weight, bound by issue). The launch
  /// reads x as ActQuant::Int8 (the reference reproduces it). 0: off; 1 (the
  /// rule): q4_K, q5_K, q8_0 and q4_0; 2: q6_K too. Measured on the H200
  /// (thirty-third session, fg_bench_kernels' prefill expert cases, µs,
  /// f16 form -> int8): gate|up q4_K 379 -> 260, q5_K 419 -> 273, q4_0 541
  /// -> 245, q6_K 596 -> 639 (slower: its 16-weight scales, two masked mmas a
  /// sub-block); down q4_K 247 -> 151, q5_K 290 -> 158, q4_0 268 -> 147, q6_K
  /// 350 -> 322; W-moe-12 q4_K 512-token prefill 7.60 -> 6.18 ms. q8_0 passed
  /// its GPU tests but was not timed. FG_DEBUG_MOE_INT8=0|1|2.
  int groupedExpertInt8 = 1;
  /// The grouped expert GEMM over block-quantised experts too (q4_K, q8_0,
  /// ...: each 8-weight unit of a tile decoded by the GEMV's block decoders
  /// into the f16 tile in shared memory, moeLoadQ), instead of one GEMV per
  /// (token, slot) pair: W-moe-12 q4_K's 512-token prefill spends 59.9 of its
  /// 61.0 ms in those GEMVs (H200, eleventh session). Opt-in until its GPU
  /// tests have run (written in the eleventh session after its last GPU call).
  /// On since the twelfth session, whose GPU tests passed (memcheck clean) and
  /// measured that prefill at 14.4 ms. FG_DEBUG_GROUPED_QUANT=0 turns it off.
  bool groupedExpertQuant = true;
  /// Streaming multiprocessors of the target (H200: 132); sizes split grids.
  unsigned smCount = 132;
  /// GEMV variant overrides for tuning (fg_bench_kernels --gemv-*); 0 keeps
  /// the rule of GemvEmitter.cpp. Rows of x from which 16-bit weights use the
  /// tensor cores; output rows per block (lanes path); warps per block;
  /// k-steps per chunk.
  int64_t gemvTensorCoreMinRows = 0;
  int gemvRows = 0, gemvWarps = 0, gemvUnroll = 0;
  /// q4_K through the narrow decoder (a k-step of 32, 8-byte loads) instead of
  /// the whole-super-block one: the previous kernel, for side-by-side timing.
  bool gemvNarrowQuant = false;
  /// Whole-super-block q4_K GEMV: resident warps per SM its launch bounds ask
  /// for (0: the rule; -1: no bound), and whether a warp loads its next chunk
  /// before the math of this one (-1: the rule, 0 off, 1 on).
  int gemvWideWarpsPerSm = 0, gemvWidePrefetch = -1;
  /// q4_K through DecQ4_KS (scales applied in f32 after the mma, x as one
  /// f16) instead of DecQ4_KW: opt-in until measured.
  bool gemvWideScaled = false;
  /// Quantised GEMVs on the tensor cores take x as one f16 (one mma per
  /// k-slot pair) instead of hi + lo (two). Measured on the H200 (sixth
  /// session): W-dense q4_K 3.45 -> 2.87 ms, q6_K 8.45 -> 7.75, W-moe-12 q4_K
  /// 0.752 -> 0.710; the worst normalised error of the quantised workload
  /// tests moved by at most 2.4e-4. Off: hi + lo, for timing both.
  bool gemvQuantXHalf = true;
  /// Wide quantised GEMVs: warps per SM the rule fills (blocks x warps per
  /// block; the first rule's was 32, measured slower than 16).
  int64_t gemvWideWarpTarget = 16;
  /// iq4_nl rows of whole 512-weight groups through the wide loop
  /// (DecIQ4_NLW). Measured on the H200 (seventh session, W-dense kernels at
  /// T = 1): gate_up 61.5 -> 23.0 us, lm head 407 -> 175. Off: the narrow loop.
  bool gemvWideIq4nl = true;
  /// q6_K rows of whole 8-super-block groups through the wide loop
  /// (DecQ6_KW; K % 2048 == 0). Measured as above: down 47.2 -> 30.8 us, lm
  /// head 429 -> 190. Off: the narrow loop.
  bool gemvWideQ6k = true;
  /// q4_K GEMVs of one row of x (dense: matmul, matmul_add, gated_matmul)
  /// on integer dot products (kernels/gemv_dp4a.cuh: x quantised to int8 per
  /// 32, one DP4A per 4 weights; q4_K, q8_0, q4_0, q6_K; dense or
  /// expert-indexed) instead of the tensor cores: 0 never; 1 (the default)
  /// the rule, launches that take no prefetch prologue (weights above
  /// pdlPrefetchMaxWeightBytes, prologues off, expert-indexed: the smaller
  /// dense ones keep the tensor-core GEMV with its L2 prefetch prologue); 2
  /// every eligible launch; 3 the rule for dense launches only. The rules
  /// (1, 3) take q4_K, q8_0, q4_0 (with gemvDp4aShareX) and q6_K
  /// (gemvDp4aQ6k); 2 takes all four at any size. Measured (H200, steps, graph-fused ms): fourteenth session, x per
  /// warp, 0 -> 1: W-dense q4_K 2.84 -> 2.43, Q4_K_M-like 3.11 -> 2.88, q8_0
  /// 4.26 -> 4.09, q4_0 3.31 -> 4.22 (then not in the rules), W-moe-12 q4_K
  /// 0.690 -> 0.777 (its 4.7 MB q and o: hence gemvDp4aMinWeightBytes).
  /// Fifteenth session, with x shared a block (gemvDp4aShareX), 0 -> 3 ->
  /// 3 + shared x: W-dense q4_K 2.838 -> 2.416 -> 2.141 (2.109 with
  /// gemvDp4aCombine 4), q8_0 4.247 -> 3.800 -> 3.605, Q4_K_M-like 2.876
  /// (3) -> 2.427 (+ q6_K); W-moe-12 q4_K 0.700 -> 0.657 -> 0.626 with the
  /// experts too (1); W-dense q4_0 3.317 (0) -> 2.790 (2): hence 1, shared
  /// x, q6_K and q4_0 in the rules.
  /// FG_DEBUG_GEMV_DP4A=0|1|2|3.
  int gemvDp4a = 1;
  /// Its rows a warp takes at once, and the resident warps per SM its grid
  /// and launch bounds aim at (FG_DEBUG_DP4A_UNROLL, FG_DEBUG_DP4A_WARPS).
  int gemvDp4aUnroll = 2;
  int64_t gemvDp4aWarpTarget = 16;
  /// The rules (gemvDp4a 1, 3) take a dense launch only when its weights
  /// are above this too. With x per row group W-moe-12 q4_K's q and o
  /// (4.7 MB) were slower on DP4A (kernels 4.4 -> 5.5 us; the step 0.692 ->
  /// 0.787 ms with them and the lm head on DP4A, 0.681 with the lm head
  /// alone; fourteenth session: 8 MiB); with x shared a block faster (the
  /// step 0.632 at 8 MiB, 0.620 at 4; fifteenth session), so 4 MiB, the
  /// prefetch prologue's own limit.
  int64_t gemvDp4aMinWeightBytes = 4 << 20;
  /// Whether the rules (gemvDp4a 1, 3) take q6_K (DecQ6_KW's rows: K a
  /// multiple of 2048, gemvWideQ6k); 2 always does. Q4_K_M-like (q6_K lm
  /// head and half the downs), shared x: 2.876 ms without -> 2.427 with
  /// (fifteenth session; 2.876 is without the shared x too).
  /// FG_DEBUG_DP4A_Q6K=0|1.
  bool gemvDp4aQ6k = true;
  /// Tiles whose K-warp sums a DP4A block combines at once (1: every tile,
  /// one barrier a tile; F: two barriers every F tiles, so the K-warps of a
  /// block drift apart by up to F tiles of loads). W-dense q4_K, shared x:
  /// 2.141 ms at 1, 2.109 at 4 (fifteenth session).
  /// FG_DEBUG_DP4A_COMBINE=1..16.
  int gemvDp4aCombine = 4;
  /// Whether a DP4A block's row groups share the x quantisation (each
  /// quantises a share of the block's K-slices into shared memory, all read
  /// them back) instead of each quantising all of it: the same bits, 1/kRowWarps
  /// of the work (at K 4096 q4_0 a lane quantises 128 values, as much work as
  /// 15 rows, and walks about 2 rows a launch). W-dense q4_K 2.416 ->
  /// 2.141 ms, q8_0 3.800 -> 3.605 (fifteenth session, the rule 3).
  /// FG_DEBUG_DP4A_SHARE_X=0|1.
  bool gemvDp4aShareX = true;
  /// Whether a dense DP4A launch loads its first tile's weights in the
  /// entry's prologue, before the programmatic-launch wait (else after it,
  /// as an expert-indexed one does; W-moe-12 q4_K with its q and o on DP4A
  /// 0.787 ms with, 0.778 without: within the noise). FG_DEBUG_DP4A_PROLOGUE=0|1.
  bool gemvDp4aPrologueLoad = true;
  /// Tiles after the one a DP4A block holds in registers whose weight rows
  /// it asks L2 for (prefetch.global.L2; 0: none): more bytes in flight an
  /// SM than one tile of registers (the fifteenth session's breakdown: the
  /// W-dense q4_K GEMVs at 57 % of the bandwidth). A hint, the same bits.
  /// Measured slower at every size (sixteenth session, kernels at T = 1:
  /// W-dense gate_up q4_K 11.75 us at 0, 13.79 at 1, 14.20 at 3; lm head
  /// 75.4 -> 90.9; steps W-dense q4_K 2.131 -> 2.184 ms at 2, W-moe-12
  /// 0.618 -> 0.637): 0. FG_DEBUG_DP4A_L2_AHEAD=0..8.
  int gemvDp4aL2Ahead = 0;
  /// Stages of the DP4A GEMV's weight ring in dynamic shared memory (0: the
  /// register form, one tile loaded ahead). With S >= 2 each lane copies
  /// its own 16-byte units of the S - 1 tiles after the one it computes by
  /// cp.async into its own slots (no barrier), so S - 1 tiles of weights
  /// are in flight a block instead of one: the register form streams at
  /// one tile a memory latency (the sixteenth session's lm head: ~37 KB an
  /// SM a tile, a tile every ~1.25 us). q4_K only (its rows are 16-byte
  /// units); fewer stages where S would not fit the blocks an SM.
  /// Measured slower (sixteenth session, kernels at T = 1: W-dense gate_up
  /// q4_K 11.77 us in registers, 14.97 at 3 stages, 15.19 at 4; lm head
  /// 75.5 -> 97.2; the W-dense q4_K step 2.135 -> 2.427 ms at 4): Nsight
  /// shows the GEMV as issue-bound as latency-bound, and the ring's copies
  /// and shared-memory reads add instructions a weight. 0.
  /// FG_DEBUG_DP4A_STAGES=0..8.
  int gemvDp4aStages = 0;
  /// Tiles a DP4A lane holds in registers ahead of its arithmetic (1..3;
  /// the staged ring takes 1; 0: the rule, 2 for a dense q4_K launch and 1
  /// for the other types and for expert-indexed launches). The seventeenth session's first call put the GEMV's fixed
  /// cost at ~3.2 us a launch (W-dense o q4_K 5.66 us for 9.4 MB, ~2.4 of
  /// them streaming), a tile latency of it the pipeline's fill (one tile in
  /// flight while x is quantised). Measured (its second call): in the
  /// kernel benchmark's back-to-back launches of one GEMV 2 ahead is slower
  /// (gate_up q4_K 11.56 -> 12.25 us, 3 ahead 13.51: the next launch's
  /// blocks fit an SM only once this one's leave, so its prologue overlaps
  /// nothing), but in a step, where a GEMV follows the attention or a
  /// norm, its two prologue tiles overlap them: W-dense q4_K 2.0032 ->
  /// 1.9313 ms (3 ahead 2.0871, 128 registers), W-moe-12 q4_K 0.5900 ->
  /// 0.5904; q4_0 2.4766 -> 2.5073, q8_0 3.5923 -> 3.9891 (20 and 33
  /// registers of loads a row: spills). Its third call, alternating runs:
  /// W-dense q4_K 2.0251, 2.0099, 2.0224 at one against 1.9265, 1.9318,
  /// 1.9338 at two (-4.3 %), Q4_K_M-like 2.3535 -> 2.3112, W-moe-12 q4_K
  /// 0.5867 -> 0.5942 (its expert launches load after the wait: hence the
  /// rule's dense-only two, not measured apart). FG_DEBUG_DP4A_AHEAD=0..3.
  int gemvDp4aAhead = 0;
  /// q6_K's own warps an SM and tiles ahead on DP4A (0: gemvDp4aWarpTarget
  /// and gemvDp4aAhead's rule), so a q6_K rule can change without moving
  /// the q4_K GEMVs of a mixed model (Q4_K_M's lm head and half its downs
  /// are q6_K). The eighteenth session measured W-dense q6_K's lm head at
  /// 50.8 % of the bandwidth, with ~27 KB of useful bytes in flight an SM
  /// (8 16-byte loads a row for ~52 bytes, one tile ahead); at 8 warps an SM
  /// 2 or 3 tiles ahead fit without spills (146 / 174 registers). Not yet
  /// timed (scripts/gpu-s19-call1.sh). FG_DEBUG_DP4A_Q6K_WARPS,
  /// FG_DEBUG_DP4A_Q6K_AHEAD.
  int64_t gemvDp4aQ6kWarpTarget = 0;
  int gemvDp4aQ6kAhead = 0;
  /// q6_K's rows on DP4A read by whole warps (Dp4aQ6KWarp, gemv_dp4a.cuh):
  /// a K-warp's 1680-byte span of a row loaded as its 105 aligned 16-byte
  /// units, one contiguous 512 bytes a load, and each lane's pieces read
  /// back through the warp's stage in shared memory; else each lane loads
  /// two aligned units around each of its pieces (DecQ6_KW: ~2.4x the bytes
  /// asked of L2, 33 registers a row, not 17). Nsight Compute (nineteenth
  /// session) put the q6_K lm head on L2 (82.7 % busy) at 47 % of DRAM.
  /// With it q6_K takes q4_K's warps an SM and two tiles ahead (dp4aLightLoads;
  /// still one row a warp: two spilled). The same bits. Measured (H200,
  /// nineteenth session, one call): lm head 187.0 -> 117.3 us (51 -> 82 % of
  /// the read bandwidth; DRAM 72 %, L2 hits 6 %), gate_up 25.1 -> 16.4, down
  /// 23.6 -> 17.4, q+o 9.7 -> 7.1; steps W-dense q6_K 3.709 / 3.713 ->
  /// 2.718 / 2.705 ms, Q4_K_M-like 2.261 -> 2.071 (1 ahead 2.886, 3 ahead
  /// 3.619). FG_DEBUG_DP4A_Q6K_WARP=0|1.
  bool gemvDp4aQ6kWarp = true;
  /// q4_K, q8_0 and q4_0 rows on DP4A read by whole warps too
  /// (Dp4aWarpOf, gemv_dp4a.cuh): each lane of their own forms loads its
  /// pieces (q4_K 3 units, q8_0 and q4_0 5), so one load instruction's
  /// 16-byte units sit apart and L2 sends each 32-byte sector twice; read
  /// by whole warps, each load is 512 contiguous bytes and the pieces come
  /// back through the warp's stage in shared memory (the same bits; the
  /// staged ring, gemvDp4aStages, is not taken with it). Dense launches
  /// (twentieth session, W-dense steps: q8_0 3.53 -> 3.28 ms, q4_0 2.43 ->
  /// 2.12, q4_K 1.92 -> 1.86). FG_DEBUG_DP4A_WARP_LOAD=0|1.
  bool gemvDp4aWarpLoad = true;
  /// The same for expert-indexed launches (matmul_id): -1 the rule, q8_0
  /// by whole warps and q4_K / q4_0 lane by lane; 0 none; 1 every type.
  /// W-moe-12 q4_K took 0.553 -> 0.578 ms with every launch read by whole
  /// warps (twentieth session); q8_0's gated expert GEMV 12.17 -> 9.97 us
  /// (48 -> 59 % of the bandwidth), q4_K's the same 7.23 / 7.24
  /// (twenty-second session, fg_bench_kernels, one run).
  /// FG_DEBUG_DP4A_WARP_LOAD_EXPERTS=0|1.
  int gemvDp4aWarpLoadExperts = -1;
  /// The DP4A GEMV's rms_norm prologue with the row's rstd deferred to the
  /// stores (Cfg::kNormDeferred, gemv_dp4a.cuh fg_dp4a_run): x · nw is
  /// quantised at once, its sum of squares taken in the same pass, and each
  /// row's sums are multiplied by the rstd where they are stored, instead of
  /// a pass over x and two barriers (gemvNormScales) before the
  /// quantisation, on the path from the programmatic-launch wait to the
  /// first arithmetic. On since the eighteenth session (call 1, same run:
  /// W-dense q4_K 1.9511 / 1.9297 -> 1.9173 ms, W-moe-12 q4_K 0.5704 ->
  /// 0.5645 with early extras; the quantised model tests pass with it).
  /// FG_DEBUG_DP4A_NORM_DEFERRED=0|1.
  bool gemvDp4aNormDeferred = true;
  /// The GEMVs (DP4A and tensor cores) load each row's bias and addend
  /// (fused.matmul_add's residual) when the row's tile starts (the DP4A
  /// GEMV: its combine window), not at its store (Cfg::kEarlyExtras,
  /// gemv.cuh GemvExtras): the stores follow the warps' barrier and a
  /// second barrier waits for them, so a load there is an L2 round trip for
  /// the whole block, and at the launch's end on its critical path (o and
  /// down + residual). The same bits. Written in the seventeenth session
  /// after its last GPU call, NVRTC-compiled only: off until the GPU tests
  /// and a step confirm it. FG_DEBUG_GEMV_EARLY_EXTRAS=0|1.
  bool gemvEarlyExtras = false;
};

/// The FG_DEBUG_* switches of the environment (FG_DEBUG_FLASH_*, _MOE_*,
/// _DP4A_*, ...; each documented at the option it sets) applied over `o`:
/// what compile() does before it emits, and what the kernel benchmark does
/// before its own flags, so a switch times the same form in both.
/// Defined in Compile.cpp.
void applyDebugEnvironment(EmitOptions &o);

/// fused.topk_moe with at most this many rows runs in one block that stages all
/// its logits in shared memory before writing anything, so its results may
/// alias the logits (the CUDA target answers the overlap proof with it).
constexpr int64_t kTopkMoeAliasRows = 4;

/// The launches that compute `node`'s results. `operandLayouts` has one entry
/// per operand (layout of the buffer each operand is read from). Errors say
/// "no CUDA kernel for '<op>' with ..." for unsupported cases (quantised
/// operands, head dims over 512, ...). View-like ops return an empty list.
llvm::Expected<std::vector<Launch>> emitKernel(const Function &fn, const Node &node,
                                               llvm::ArrayRef<Layout> operandLayouts,
                                               const EmitOptions &options = {});

/// Convenience: contiguous layouts of every operand.
std::vector<Layout> contiguousLayouts(const Function &fn, const Node &node);

} // namespace fg::cuda
