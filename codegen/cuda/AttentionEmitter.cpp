//===- AttentionEmitter.cpp - flash-decoding attention with GQA -------------===//
//
// attention(q [T, Hq, D], k [ctx, Hkv, D], v [ctx, Hkv, Dv], pos [T], sinks [Hq]?)
// runs the template of kernels/attention.cuh (the design is in its banner):
// one block per (split, kv head × head chunk, token) computing every query
// head of the group from the same K/V rows on the tensor cores, splits sized
// at run time from the live length, and the merge done by the last split
// block of each (token, head block). This file only chooses: head chunks,
// dv slices, keys in flight per warp, the most splits the grid holds, the
// scratch layout; it describes them as a parameter struct `Cfg` and writes
// the entry. One launch: the split counters ([T · HB] unsigned, then the
// tree merge's group counters [T · HB · groupSlots]) are the launch's own
// program counters (Param::counters: zeroed at load, and each merging block
// resets its counter), so nothing clears them per step.
//
// Scratch: per (token, head block) smax + groupSlots partials of kPart
// floats: m[8], l[8], o[GB][DvP] (the splits', then the groups').
//
//===----------------------------------------------------------------------===//
#include "codegen/cuda/EmitterCommon.h"
#include "ir/OpViews.h"
#include "codegen/cuda/KernelSources.h"
#include "codegen/cuda/Nvrtc.h"

#include "llvm/Support/FormatVariadic.h"

#include <algorithm>
#include <cmath>
#include <tuple>

namespace fg::cuda::detail {
namespace {

constexpr int64_t kMaxHeadDim = 512;
constexpr int kWarps = 4;
constexpr int64_t kMaxSplits = 256;
/// Blocks per SM the grid aims for at long KV (bytes in flight per SM).
constexpr int64_t kBlocksPerSm = 4;

int64_t ceilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }
int64_t roundUp(int64_t a, int64_t b) { return ceilDiv(a, b) * b; }

const char *kvDecoder(DType t) {
  switch (t) {
  case DType::F16:
    return "fg::AttnF16";
  case DType::BF16:
    return "fg::AttnBF16";
  default:
    return "fg::AttnF32";
  }
}

bool isKvType(DType t) { return t == DType::F16 || t == DType::BF16 || t == DType::F32; }
bool isFloatType(DType t) { return t == DType::F16 || t == DType::BF16 || t == DType::F32; }

/// 16-byte loads of 8 elements: unit stride along the head dim and every row
/// start aligned (8 elements for 16-bit types, 4 floats for f32).
bool vectorRows(const Layout &l, DType t, int64_t dim) {
  int64_t v = elemBytes(t) == 4 ? 4 : 8;
  return l.strides[2] == 1 && dim % 8 == 0 && l.offset % v == 0 && l.strides[0] % v == 0 &&
         l.strides[1] % v == 0;
}

/// Everything chosen for one node.
struct AttnPlan {
  int64_t G, HC, GB, HB, NCK, DVS, NSL, DvP, U, minChunk, smax, part, counters;
  int64_t uRegs, minChunkRegs; ///< the register-load form's (the staged form's short-KV path)
  int64_t stages = 0, ringBytes = 0; ///< the staged form's ring (0: register loads)
  int64_t warps = kWarps;             ///< warps a block
  int64_t cluster = 0; ///< the cluster form's blocks a cluster (= smax; 0: the global merge)
  int64_t group = 0, groupSlots = 0; ///< the tree merge's splits a group, and its group slots
  uint64_t scratchBytes;
};

/// Shared memory per block on sm_90 (227 KiB, of 228 per SM, less 1 KiB the
/// runtime reserves per block).
constexpr int64_t kSharedPerSm = 228 * 1024, kReservedPerBlock = 1024;
/// The staged form's deepest ring (tiles in flight per warp + 1).
constexpr int64_t kMaxStages = 4;

/// Bytes of the kernel's static `AttnShared<C>` (attention.cuh), rounded up.
int64_t staticShared(int64_t NCK, int64_t DVS, int64_t smax, int64_t warps = kWarps,
                     int64_t cluster = 0, int64_t DvP = 0) {
  int64_t partials = warps * 8 * DVS * 4 + 3 * warps * 8 * 4 + 8 * 4, merge = smax * 8 * 4;
  int64_t incoming = (cluster ? cluster * (2 + DvP) * 4 : 4) + 8; // AttnShared::in, bar
  return NCK * 2 * 32 * 16 + std::max(partials, merge) + incoming + 16;
}
/// Static shared memory a kernel may declare (48 KiB), less a margin for
/// the compiler's rounding.
constexpr int64_t kStaticSharedMax = 48 * 1024 - 256;

AttnPlan plan(int64_t T, int64_t Hq, int64_t Hkv, int64_t D, int64_t Dv, int64_t ctx, DType kt,
              DType vt, bool vecRows, unsigned smCount, const EmitOptions &o) {
  AttnPlan p;
  p.G = Hq / Hkv;
  p.HC = ceilDiv(p.G, 8); // rows 8-15 of the mma hold the lo halves: 8 heads a block
  p.GB = ceilDiv(p.G, p.HC);
  p.HB = Hkv * p.HC;
  p.NCK = ceilDiv(D, 32);
  int64_t dvPad = roundUp(Dv, 32);
  // Dv slices: the accumulators take DVS / 2 registers a lane; 256 columns
  // fit beside the loads of 16-bit caches up to D = 256 (226 registers at
  // D = Dv = 256, no spills), 128 otherwise (f32 caches load twice the bytes).
  bool wide = D <= 256 && Dv <= 256 && elemBytes(kt) == 2 && elemBytes(vt) == 2;
  p.DVS = std::min<int64_t>(dvPad, wide ? 256 : 128);
  p.NSL = ceilDiv(dvPad, p.DVS);
  p.DvP = roundUp(Dv, 4);
  // Keys per warp tile: as many 8-key steps as keep ~16 16-byte loads per
  // lane in flight (256 bytes of registers), 1 to 4.
  int64_t loadsPerStep = p.NCK * (elemBytes(kt) == 4 ? 2 : 1) +
                         p.DVS / 32 * (elemBytes(vt) == 4 ? 2 : 1);
  p.U = std::clamp<int64_t>(16 / loadsPerStep, 1, 4);
  p.uRegs = p.U;
  p.minChunkRegs = kWarps * p.U * 8;
  // The staged form: each warp keeps stages − 1 tiles of cp.async copies in
  // flight through a ring in shared memory while it computes one, instead of
  // one burst of register loads per tile (a round trip of latency each).
  // Tiles of two 8-key steps where two stages of them fit, else of one
  // (below), sized for `blocks` resident blocks per SM; rows must take
  // 16-byte copies.
  int64_t blocks = kBlocksPerSm;
  bool ring = o.attentionStages > 0 || (o.attentionStages < 0 && ctx > o.attentionRingMinCtx);
  if (vecRows && ring) {
    // Two blocks an SM, or one where two would leave the merging block more
    // than two (split, head) partials an SM to read: its round trips are
    // the launch's tail (phase stamps, thirty-eighth session: 13.4k of W-moe's
    // cycles at KV 8192). Measured with programmatic edges (H100, µs, 2 -> 1
    // block): W-moe (66 splits x 8 heads at T = 1) KV 8192 15.4 -> 13.4, KV
    // 32768 34.8 -> 31.2; W-dense (33 x 4) KV 8192 17.8 -> 23.2, and W-moe
    // at T = 2 (33 x 8) 15.6 -> 23.3: those keep two.
    // The split count (hence the merge area) at `b` blocks an SM.
    auto splitsAt = [&](int64_t b) {
      return std::min(kMaxSplits, ceilDiv(static_cast<int64_t>(smCount) * b, T * p.HB));
    };
    // (The splits at two blocks an SM as the grid below takes them: capped by
    // the cache's rows at a round of 2-step tiles.)
    int64_t b = o.attentionBlocksPerSm;
    if (b <= 0) {
      int64_t two = std::min(splitsAt(2), ceilDiv(ctx, kWarps * 2 * 8 * std::max(1, o.attentionMinTiles)));
      b = two * p.GB > 2 * static_cast<int64_t>(smCount) ? 1 : 2;
    }
    int64_t smaxHint = splitsAt(b);
    int64_t budget = kSharedPerSm / b - kReservedPerBlock - staticShared(p.NCK, p.DVS, smaxHint);
    // Tiles of two 8-key steps where two stages of them fit (W-dense at
    // D = 128: 2 stages of 32 KB a block, the same ring bytes as 4 of 16 KB
    // — one tile ahead of the math, not three — and half the waits and
    // barriers a key), else of one. Measured with
    // programmatic edges (H100, thirty-eighth session, µs, 1 step -> 2):
    // W-dense KV 8192 17.93 -> 17.75 (T = 2: 30.70 -> 28.01), KV 32768
    // 53.60 -> 52.57 (T = 2: 99.55 -> 84.70); W-moe 15.67 -> 15.31,
    // 35.11 -> 34.71.
    for (int64_t U : o.attentionSteps > 0 ? std::vector<int64_t>{o.attentionSteps}
                                          : std::vector<int64_t>{2, 1}) {
      int64_t stage = kWarps * 32 * U * loadsPerStep * 16;
      int64_t S = o.attentionStages > 0 ? o.attentionStages
                                        : std::min<int64_t>(kMaxStages, budget / stage);
      if (S >= 2 && S * stage <= budget) {
        p.U = U;
        p.stages = S;
        p.ringBytes = S * stage;
        blocks = b;
        break;
      }
    }
  }
  // A split is at least one round of the block's warps (or minTiles rounds).
  p.minChunk = kWarps * p.U * 8 * std::max(1, o.attentionMinTiles);
  int64_t target = static_cast<int64_t>(smCount) * blocks;
  p.smax = std::clamp<int64_t>(ceilDiv(target, T * p.HB), 1,
                               std::min(kMaxSplits, ceilDiv(ctx, p.minChunk)));
  // The cluster form (register loads only): the splits of a (kv head,
  // token) are one cluster's blocks, as many as the cache's rows need at
  // one round of the block's warps each, at most EmitOptions::
  // attentionCluster, and at least one a head of the block (block h merges
  // head h); it runs where that many fit and its static shared memory does,
  // on caches of at most attentionRingMinCtx rows (at 4096 rows, 4 rounds
  // of 16-key tiles a warp, as many as the split form's 17 blocks of 4
  // warps take at W-dense's shape; longer caches want more blocks), for
  // sm_90 and later (clusters and their barriers are Hopper's).
  if (p.stages == 0 && o.attentionCluster > 0 && ctx <= o.attentionRingMinCtx &&
      archNumber(o.arch) >= 90) {
    int64_t warps = o.attentionClusterWarps == 4 ? 4 : 8;
    // Tiles of up to 3 steps, 24 16-byte loads a lane at most (D = 64 and
    // 128 with 16-bit caches: 3; D = 256, or f32 caches at D = 128: 1; f32
    // at D = 64: 3). At D = 64 this is one step fewer than the split form's
    // rule (live lengths of 1537-2048 take two rounds there, not measured;
    // W-tiny's KV 1025 measured 1 % faster with it). A round of 8 blocks of
    // 8 warps then covers 1536 keys at D = 128, so KV 1025 takes one round,
    // not two (measured, twenty-fourth session: W-dense q4_K 1.8334 ->
    // 1.8225 ms alone, with the trigger before attention 1.8172 -> 1.8079).
    int64_t U = o.attentionClusterSteps > 0 ? std::min(o.attentionClusterSteps, 4)
                                            : std::clamp<int64_t>(24 / loadsPerStep, 1, 3);
    int64_t minChunk = warps * U * 8 * std::max(1, o.attentionMinTiles);
    int64_t limit = std::min(o.attentionCluster, 8);
    int64_t cs = std::clamp<int64_t>(ceilDiv(ctx, minChunk), p.GB, std::max(limit, p.GB));
    if (cs <= limit && staticShared(p.NCK, p.DVS, cs, warps, cs, p.DvP) <= kStaticSharedMax) {
      p.warps = warps;
      p.U = p.uRegs = U;
      p.cluster = cs;
      p.smax = cs;
      p.minChunk = minChunk;
      p.minChunkRegs = minChunk;
    }
  }
  p.part = 16 + p.GB * p.DvP;
  // The tree merge (attention.cuh, attnMergeSplits; opt-in,
  // EmitOptions::attentionMergeGroup): groups of splits merge first (in
  // parallel on as many SMs), then the groups — where the split form's last
  // block would read smax · GB · Dv floats (W-moe at KV 8192 and two blocks
  // an SM: 66 splits of 8 heads, 264 KiB). Measured slower: a level costs
  // more than that read. (-1: groups of ⌈√smax⌉ past 2 · SMs head-splits.)
  if (p.cluster == 0) {
    int64_t g = o.attentionMergeGroup;
    if (g < 0)
      g = p.smax * p.GB > 2 * static_cast<int64_t>(smCount)
              ? std::max<int64_t>(2, static_cast<int64_t>(std::ceil(std::sqrt(double(p.smax)))))
              : 0;
    if (g > 0 && g < p.smax) {
      p.group = g;
      p.groupSlots = ceilDiv(p.smax, g);
    }
  }
  p.counters = T * p.HB * (1 + p.groupSlots);
  p.scratchBytes = static_cast<uint64_t>(T * p.HB * (p.smax + p.groupSlots) * p.part) * 4;
  return p;
}

/// How the early loads (attention.cuh, attentionEarly) may treat a cache
/// operand: Stable when no kernel of the function writes it before the
/// attention (an argument: a later set_rows into it is ordered after the
/// attention by its write-after-read edge),
/// Fresh when its only write in the function is one set_rows form into an
/// argument at the attention's own positions (the token's row is loaded
/// again after the wait), Unknown otherwise (no early loads).
enum class CacheWrites { Stable, Fresh, Unknown };
CacheWrites cacheWrites(const Function &fn, ValueId cache, ValueId pos) {
  const Node *w = fn.producer(cache);
  if (w == nullptr)
    return CacheWrites::Stable;
  ValueId dest = kNoValue, rows = kNoValue;
  if (w->kind == OpKind::SetRows) {
    dest = op::SetRows(*w).dest(), rows = op::SetRows(*w).indices();
  } else if (w->kind == OpKind::FusedRopeSetRows) {
    dest = op::FusedRopeSetRows(*w).dest(), rows = op::FusedRopeSetRows(*w).indices();
  } else if (w->kind == OpKind::FusedRmsNormMulRopeSetRows) {
    dest = op::FusedRmsNormMulRopeSetRows(*w).dest();
    rows = op::FusedRmsNormMulRopeSetRows(*w).indices();
  } else {
    return CacheWrites::Unknown;
  }
  return rows == pos && fn.producer(dest) == nullptr ? CacheWrites::Fresh : CacheWrites::Unknown;
}

std::string lit(int64_t v) { return ilit(v); }
std::string flag(bool b) { return b ? "true" : "false"; }

} // namespace

llvm::Expected<std::vector<Launch>> emitAttention(const Function &fn, const Node &node,
                                                  llvm::ArrayRef<Layout> ls,
                                                  const EmitOptions &o) {
  // fused.rope_kv_attention: operands (k_cache, v_cache, q, k, v,
  // positions, freq_factors?), results (k_cache, v_cache, y); the other
  // forms: (q, k_cache, v_cache, positions, sinks | freq_factors?), (y).
  const bool kv = node.kind == OpKind::FusedRopeKvAttention;
  const unsigned qI = kv ? 2 : 0, kI = kv ? 0 : 1, vI = kv ? 1 : 2, pI = kv ? 5 : 3,
                 xI = kv ? 6 : 4, yR = kv ? 2 : 0;
  const TensorType &qt = fn.type(node.operands[qI]), &kt = fn.type(node.operands[kI]),
                   &vt = fn.type(node.operands[vI]), &pt = fn.type(node.operands[pI]);
  // fused.attention_convert stores 16-bit rows: only the flash prefill
  // kernel does (this kernel merges f32 partials into f32 rows).
  if (node.kind == OpKind::FusedAttentionConvert) {
    if (qt.shape[0] < o.attentionPrefillMinTokens)
      return unsupported(node, llvm::formatv("{0} tokens: the decode kernel writes f32 rows (the "
                                             "flash prefill kernel, from {1} tokens, stores "
                                             "16-bit ones)",
                                             qt.shape[0], o.attentionPrefillMinTokens)
                                   .str());
    if (std::string why = attentionPrefillRefusal(fn, node); !why.empty())
      return unsupported(node, "the flash prefill kernel: " + why);
    return emitAttentionPrefill(fn, node, ls, o);
  }
  // fused.rope_attention: q's rope in the q load (attnQ); its operand 4 is
  // the rope's freq_factors, and it has no sinks.
  const bool rope = node.kind == OpKind::FusedRopeAttention || kv;
  bool hasSinks = !rope && node.operands.size() > xI;
  const bool hasFF = rope && node.operands.size() > xI;
  auto attrs = [&](auto a) { return std::tuple{a.scale(), a.softcap(), a.window()}; };
  const auto [scale, softcap, window] = kv     ? attrs(op::FusedRopeKvAttention(node))
                                        : rope ? attrs(op::FusedRopeAttention(node))
                                               : attrs(op::Attention(node));
  int64_t T = qt.shape[0], Hq = qt.shape[1], D = qt.shape[2];
  int64_t ctx = kt.shape[0], Hkv = kt.shape[1], Dv = vt.shape[2];
  if (D > kMaxHeadDim || Dv > kMaxHeadDim)
    return unsupported(node, llvm::formatv("head dim {0}/{1} (at most {2})", D, Dv, kMaxHeadDim)
                                 .str());
  if (!isKvType(kt.dtype) || !isKvType(vt.dtype))
    return unsupported(node, "cache dtype " + std::string(dtypeName(kt.dtype)) + "/" +
                                 std::string(dtypeName(vt.dtype)) + " (f16, bf16 or f32)");
  if (!isFloatType(qt.dtype))
    return unsupported(node, "q of dtype " + std::string(dtypeName(qt.dtype)));
  if (hasSinks && !isFloatType(fn.type(node.operands[xI]).dtype))
    return unsupported(node, "sinks of dtype " +
                                 std::string(dtypeName(fn.type(node.operands[xI]).dtype)));
  if (rope && T >= o.attentionPrefillMinTokens)
    return unsupported(node, llvm::formatv("{0} tokens: the flash prefill kernel (from {1}) "
                                           "takes no rope",
                                           T, o.attentionPrefillMinTokens)
                                 .str());
  if (hasFF && !isFloatType(fn.type(node.operands[xI]).dtype))
    return unsupported(node, "freq_factors of dtype " +
                                 std::string(dtypeName(fn.type(node.operands[xI]).dtype)));
  // The block that holds the token's keys writes its kv head's rows first
  // (attention.cuh attnWriteKv): one token, whose rows no other block reads.
  if (kv && T != 1)
    return unsupported(node, llvm::formatv("{0} tokens: the kernel writes the K and V rows of "
                                           "one token",
                                           T)
                                 .str());
  if (kv && (fn.type(node.operands[3]).dtype != DType::F32 ||
             fn.type(node.operands[4]).dtype != DType::F32))
    return unsupported(node, "k and v rows of dtype " +
                                 std::string(dtypeName(fn.type(node.operands[3]).dtype)) + "/" +
                                 std::string(dtypeName(fn.type(node.operands[4]).dtype)) +
                                 " (f32)");
  // The rope: its Rope struct (the rope rows' constants) and pair i's
  // frequency as a table in global memory (read through L1 by attnQ).
  std::string ropeStruct, ropeTable;
  if (rope) {
    const RopeAttrs ra = kv ? ropeAttrsOf(op::FusedRopeKvAttention(node))
                            : ropeAttrsOf(op::FusedRopeAttention(node));
    if (ra.nDims < 2 || ra.nDims > D || ra.nDims % 2 != 0)
      return unsupported(node, llvm::formatv("n_dims = {0} of head dim {1}", ra.nDims, D).str());
    auto r = ropeCfg(node, ra, hasFF);
    if (!r)
      return r.takeError();
    ropeStruct = std::move(*r);
    ropeStruct += "  static __device__ __forceinline__ double ropeFreq(long long i) { return "
                  "fg_rope_freq[i]; }\n";
    ropeTable = "static __device__ const double fg_rope_freq[] = {";
    for (double f : ropeFrequencies(ra))
      ropeTable += dlit(f) + ", ";
    ropeTable += "};\n";
  }
  if (T >= o.attentionPrefillMinTokens && attentionPrefillRefusal(fn, node).empty())
    return emitAttentionPrefill(fn, node, ls, o);
  const Layout &ql = ls[qI], &kl = ls[kI], &vl = ls[vI], &pl = ls[pI];
  bool vecK = vectorRows(kl, kt.dtype, D), vecV = vectorRows(vl, vt.dtype, Dv);
  AttnPlan p = plan(T, Hq, Hkv, D, Dv, ctx, kt.dtype, vt.dtype, vecK && vecV, o.smCount, o);
  if (p.HB > 65535 || T > 65535)
    return unsupported(node, llvm::formatv("{0} tokens x {1} head blocks (at most 65535 each)", T,
                                           p.HB)
                                 .str());
  if (kv && p.HC != 1)
    return unsupported(node, llvm::formatv("{0} q heads a kv head in {1} chunks: the rows would "
                                           "be written by one chunk's blocks and read by the "
                                           "others'",
                                           p.G, p.HC)
                                 .str());
  Layout sl = hasSinks ? ls[xI] : Layout::contiguous({Hq});

  std::string c = ropeTable;
  c += "struct Cfg {\n";
  c += "  using Q = " + ctype(qt.dtype) + ";\n";
  c += std::string("  using DecK = ") + kvDecoder(kt.dtype) + ";\n";
  c += std::string("  using DecV = ") + kvDecoder(vt.dtype) + ";\n";
  c += "  using Pos = " + ctype(pt.dtype) + ";\n";
  c += "  using Sink = " + ctype(hasSinks ? fn.type(node.operands[xI]).dtype : DType::F32) + ";\n";
  c += "  using FF = " + ctype(hasFF ? fn.type(node.operands[xI]).dtype : DType::F32) + ";\n";
  c += ropeStruct;
  c += llvm::formatv("  static constexpr int kW = {0}, kU = {1}, kGB = {2}, kHC = {3}, kSmax = {4}, "
                     "NCK = {5}, DVS = {6}, NSL = {7}, kStages = {8}, kURegs = {9}, "
                     "kCluster = {10};\n  static constexpr int kGroup = {11}, kGroupSlots = {12}, "
                     "kMergeUnroll = {13};\n",
                     p.warps, p.U, p.GB, p.HC, p.smax, p.NCK, p.DVS, p.NSL, p.stages, p.uRegs,
                     p.cluster, p.group, p.groupSlots,
                     std::clamp(o.attentionMergeUnroll, 1, 32))
           .str();
  c += "  static constexpr long long T = " + lit(T) + ", Hq = " + lit(Hq) + ", G = " + lit(p.G) +
       ", kHB = " + lit(p.HB) + ", D = " + lit(D) + ", Dv = " + lit(Dv) + ", DvP = " + lit(p.DvP) +
       ", ctx = " + lit(ctx) + ", window = " + lit(window) + ", kMinChunk = " +
       lit(p.minChunk) + ", kMinChunkRegs = " + lit(p.minChunkRegs) +
       ", kRegMaxLive = " + lit(o.attentionRegMaxLive) + ";\n";
  // The prologue's keys per block (attentionPrefetch): EmitOptions::
  // pdlPrefetchBytes spread over every split of every kv head and token, in
  // 8-key steps; contiguous rows only (else none).
  // The prologue fetches whole 128-byte lines of each K and V row.
  int64_t rowBytes = roundUp(D * elemBytes(kt.dtype), 128) + roundUp(Dv * elemBytes(vt.dtype), 128),
          pfKeys = 0;
  if (o.pdlPrefetchBytes > 0 && o.pdlPrefetchAttention && rowBytes > 0 && kl.strides[2] == 1 && vl.strides[2] == 1)
    pfKeys = o.pdlPrefetchBytes / (p.smax * Hkv * T * rowBytes) / 8 * 8;
  c += "  static constexpr long long kPart = " + lit(p.part) + ", kPfKeys = " + lit(pfKeys) +
       ";\n";
  c += "  static constexpr bool kSinks = " + flag(hasSinks) + ", kSoftcap = " + flag(softcap > 0) +
       ", kVecK = " + flag(vecK) + ", kVecV = " + flag(vecV) + ", kRope = " + flag(rope) + ";\n";
  // The early loads: one token, register loads, caches the step writes at
  // most at the token's row.
  // (fused.rope_kv_attention writes the token's rows itself, after the
  // wait: Fresh, where no earlier kernel writes the cache.)
  auto writes = [&](unsigned i) {
    if (kv)
      return fn.producer(node.operands[i]) == nullptr ? CacheWrites::Fresh : CacheWrites::Unknown;
    return cacheWrites(fn, node.operands[i], node.operands[pI]);
  };
  const CacheWrites kw = writes(kI), vw = writes(vI);
  // (16-byte rows only: the rows read again after the wait take coherent
  // 16-byte loads, attention.cuh attnLoadCg.)
  const bool early = o.attentionEarlyLoads && T == 1 && p.stages == 0 && vecK && vecV &&
                     kw != CacheWrites::Unknown && vw != CacheWrites::Unknown;
  c += "  static constexpr bool kQFirst = " + flag(o.attentionQFirst) +
       ", kClusterAsync = " + flag(o.attentionClusterAsync && p.cluster > 0) + ";\n";
  c += "  static constexpr bool kEarly = " + flag(early) +
       ", kFreshK = " + flag(kw == CacheWrites::Fresh) +
       ", kFreshV = " + flag(vw == CacheWrites::Fresh) + ";\n";
  const Layout fl = hasFF ? ls[xI] : Layout::contiguous({1});
  const Layout knl = kv ? ls[3] : Layout::contiguous({1, 1, 1}),
               vnl = kv ? ls[4] : Layout::contiguous({1, 1, 1});
  c += "  static constexpr bool kWriteKv = " + flag(kv) + ";\n";
  c += "  static constexpr long long kn_off = " + lit(knl.offset) + ", kn_sh = " +
       lit(knl.strides[1]) + ", kn_sd = " + lit(knl.strides[2]) + ", vn_off = " +
       lit(vnl.offset) + ", vn_sh = " + lit(vnl.strides[1]) + ", vn_sd = " + lit(vnl.strides[2]) +
       ";\n";
  c += "  static constexpr long long ff_off = " + lit(fl.offset) + ", ff_s = " + lit(fl.strides[0]) +
       ";\n";
  c += "  static constexpr long long q_off = " + lit(ql.offset) + ", q_st = " + lit(ql.strides[0]) +
       ", q_sh = " + lit(ql.strides[1]) + ", q_sd = " + lit(ql.strides[2]) + ";\n";
  c += "  static constexpr long long k_off = " + lit(kl.offset) + ", k_sj = " + lit(kl.strides[0]) +
       ", k_sh = " + lit(kl.strides[1]) + ", k_sd = " + lit(kl.strides[2]) + ";\n";
  c += "  static constexpr long long v_off = " + lit(vl.offset) + ", v_sj = " + lit(vl.strides[0]) +
       ", v_sh = " + lit(vl.strides[1]) + ", v_sd = " + lit(vl.strides[2]) + ";\n";
  c += "  static constexpr long long pos_off = " + lit(pl.offset) +
       ", pos_st = " + lit(pl.strides[0]) + ", sink_off = " + lit(sl.offset) +
       ", sink_sh = " + lit(sl.strides[0]) + ";\n";
  c += "  static __device__ __forceinline__ float scale() { return " + flit(scale) +
       "; }\n";
  c += "  static __device__ __forceinline__ float softcap() { return " +
       flit(softcap > 0 ? softcap : 1.0) + "; }\n";
  c += "};\n";
  // (The caches are writable where the kernel writes them: they are the
  // operands the IR updates in place, so results 0 and 1 are these bytes.)
  const std::string cq = kv ? "" : "const ";
  std::string params = "float* y, float* scratch, unsigned* counters, const Cfg::Q* q, " + cq +
                       "Cfg::DecK::T* k, " + cq + "Cfg::DecV::T* v, const Cfg::Pos* pos";
  if (hasSinks)
    params += ", const Cfg::Sink* sinks";
  if (hasFF)
    params += ", const Cfg::FF* ff";
  if (kv)
    params += ", const float* kn, const float* vn";
  const std::string args =
      llvm::formatv("fg::AttnArgs<Cfg>{{y, scratch, counters, q, k, v, pos, {0}, {1}, {2}}",
                    hasSinks ? "sinks" : "nullptr", hasFF ? "ff" : "nullptr",
                    kv ? "k, v, kn, vn" : "nullptr, nullptr, nullptr, nullptr")
          .str();
  c += kernelEntry(static_cast<unsigned>(32 * p.warps), params,
                   "fg::attention<Cfg>(" + args + ", first);", 0,
                   "fg::AttnEarly<Cfg> first = fg::attentionPrefetch<Cfg>(" + args + ");",
                   static_cast<unsigned>(p.cluster));
  KernelSpec main = finishSpec("attention", kernelSource("attention.cuh").str() + c);
  main.grid[0] = static_cast<unsigned>(p.smax);
  main.grid[1] = static_cast<unsigned>(p.HB);
  main.grid[2] = static_cast<unsigned>(T);
  main.block[0] = static_cast<unsigned>(32 * p.warps);
  main.params = {Param::result(yR),  Param::scratch(),  Param::counters(), Param::operand(qI),
                 Param::operand(kI), Param::operand(vI), Param::operand(pI)};
  if (hasSinks || hasFF)
    main.params.push_back(Param::operand(xI));
  if (kv) {
    main.params.push_back(Param::operand(3));
    main.params.push_back(Param::operand(4));
  }
  main.sharedBytes = static_cast<unsigned>(p.ringBytes);
  main.scratchBytes = p.scratchBytes;
  main.counterBytes = static_cast<uint64_t>(p.counters) * 4;
  return std::vector<Launch>{std::move(main)};
}

} // namespace fg::cuda::detail
