//===- AttentionPrefillEmitter.cpp - causal flash attention for prefill ---===//
//
// attention with T ≥ EmitOptions::attentionPrefillMinTokens queries (a
// prefill chunk) runs kernels/attention_prefill.cuh (the design is in its
// banner): one block per (tile of 16·kW queries, query head), key tiles of
// BN rows through shared memory, S and O on the tensor cores. This file only
// checks that the kernel applies, writes its `Cfg` and the entry. No scratch,
// no counters. Where it does not apply (f32 caches, head dims that are not
// multiples of 16 or above 128) emitAttention keeps the flash-decoding kernel,
// which is correct for any T (causal by position), only slower.
//
//===----------------------------------------------------------------------===//
#include "codegen/cuda/EmitterCommon.h"
#include "codegen/cuda/KernelSources.h"
#include "codegen/cuda/Nvrtc.h"
#include "ir/OpViews.h"

#include "llvm/Support/FormatVariadic.h"

#include <algorithm>

namespace fg::cuda::detail {
namespace {

constexpr int64_t kMaxDim = 128;

const char *decoder(DType t) { return t == DType::BF16 ? "fg::AttnBF16" : "fg::AttnF16"; }
bool isFloatType(DType t) { return t == DType::F16 || t == DType::BF16 || t == DType::F32; }

/// 16-byte loads: unit stride along the head dim and every row start aligned.
bool vectorRows(const Layout &l, int64_t dim) {
  return l.strides[2] == 1 && dim % 8 == 0 && l.offset % 8 == 0 && l.strides[0] % 8 == 0 &&
         l.strides[1] % 8 == 0;
}

std::string flag(bool b) { return b ? "true" : "false"; }

} // namespace

std::string attentionPrefillRefusal(const Function &fn, const Node &node) {
  const TensorType &qt = fn.type(node.operands[0]), &kt = fn.type(node.operands[1]),
                   &vt = fn.type(node.operands[2]);
  int64_t Hq = qt.shape[1], D = qt.shape[2], ctx = kt.shape[0], Hkv = kt.shape[1],
          Dv = vt.shape[2];
  auto is16 = [](DType t) { return t == DType::F16 || t == DType::BF16; };
  if (!is16(kt.dtype) || !is16(vt.dtype))
    return "cache dtype " + std::string(dtypeName(kt.dtype)) + "/" +
           std::string(dtypeName(vt.dtype)) + " (f16 or bf16)";
  if (D % 16 || Dv % 16 || D > kMaxDim || Dv > kMaxDim)
    return llvm::formatv("head dim {0}/{1} (multiples of 16 up to {2})", D, Dv, kMaxDim).str();
  if (!isFloatType(qt.dtype))
    return "q of dtype " + std::string(dtypeName(qt.dtype));
  if (node.operands.size() > 4 && !isFloatType(fn.type(node.operands[4]).dtype))
    return "sinks of dtype " + std::string(dtypeName(fn.type(node.operands[4]).dtype));
  if (Hkv <= 0 || Hq % Hkv || Hq > 65535)
    return llvm::formatv("{0} query heads over {1} kv heads", Hq, Hkv).str();
  // Key indices are 32-bit in the kernel, one tile (at most 64 rows) past
  // the last key included.
  if (ctx > (int64_t(1) << 31) - 2 * 64)
    return "a cache of more than 2^31 - 128 rows";
  return "";
}

llvm::Expected<std::vector<Launch>> emitAttentionPrefill(const Function &fn, const Node &node,
                                                         llvm::ArrayRef<Layout> ls,
                                                         const EmitOptions &o) {
  std::string why = attentionPrefillRefusal(fn, node);
  if (!why.empty())
    return unsupported(node, "the prefill kernel: " + why);
  const TensorType &qt = fn.type(node.operands[0]), &kt = fn.type(node.operands[1]),
                   &vt = fn.type(node.operands[2]), &pt = fn.type(node.operands[3]);
  bool hasSinks = node.operands.size() > 4;
  int64_t T = qt.shape[0], Hq = qt.shape[1], D = qt.shape[2];
  int64_t ctx = kt.shape[0], Hkv = kt.shape[1], Dv = vt.shape[2];
  // attention, or fused.attention_convert (the same with 16-bit rows stored).
  const bool convert = node.kind == OpKind::FusedAttentionConvert;
  auto attrs = [&](auto a) { return std::tuple{a.scale(), a.softcap(), a.window()}; };
  const auto [scale, softcap, window] =
      convert ? attrs(op::FusedAttentionConvert(node)) : attrs(op::Attention(node));
  const DType yt = fn.type(node.result()).dtype;
  if (yt != DType::F32 && yt != DType::F16 && yt != DType::BF16)
    return unsupported(node, "a result of dtype " + std::string(dtypeName(yt)));
  const Layout &ql = ls[0], &kl = ls[1], &vl = ls[2], &pl = ls[3];
  Layout sl = hasSinks ? ls[4] : Layout::contiguous({Hq});

  std::string c;
  c += "struct Cfg {\n";
  c += "  using Q = " + ctype(qt.dtype) + ";\n";
  c += std::string("  using DecK = ") + decoder(kt.dtype) + ";\n";
  c += std::string("  using DecV = ") + decoder(vt.dtype) + ";\n";
  c += "  using Pos = " + ctype(pt.dtype) + ";\n";
  c += "  using Sink = " + ctype(hasSinks ? fn.type(node.operands[4]).dtype : DType::F32) + ";\n";
  c += "  using Y = " + ctype(yt) + ";\n";
  c += llvm::formatv("  static constexpr int kY = {0};\n",
                     yt == DType::F32 ? 0 : yt == DType::F16 ? 1 : 2)
           .str();
  // Two or three stages (the next key tiles' cp.async in flight while this
  // one is computed) where both caches take 16-byte copies; else one.
  bool vecK = vectorRows(kl, D), vecV = vectorRows(vl, Dv);
  int stages = vecK && vecV ? std::clamp(o.attentionPrefillStages, 1, 3) : 1;
  bool splitWait = stages >= 2 && o.attentionPrefillSplitWait;
  // Keys per shared-memory tile (EmitOptions::attentionPrefillKeys), warps
  // (16 queries each) per block.
  int64_t keys = o.attentionPrefillKeys == 32 ? 32 : 64;
  const int kWarps = o.attentionPrefillWarps == 8 ? 8 : 4;
  c += llvm::formatv("  static constexpr int kW = {0}, BN = {1}, S = {2};\n", kWarps, keys, stages)
           .str();
  c += "  static constexpr bool kSplitWait = " + flag(splitWait) + ";\n";
  // S and O on warpgroup MMAs (EmitOptions::attentionPrefillWgmma): the
  // arch-specific target of compute capability 9.0 only (sm_90a), one
  // warpgroup of 64 queries, 64-key tiles through cp.async stages, q and P
  // in one half, value rows in 64-column blocks — at head dims D = Dv = 128
  // only: its shared-memory layout was checked there
  // (scripts/flash-wgmma-layout.py), and at D = Dv = 64 it measured wrong on
  // the H100 (thirty-sixth session, errors 0.35-1.45; the key or the value
  // side, not separated), so other head dims keep the mma.sync form.
  const bool wgmma = o.attentionPrefillWgmma && archNumber(o.arch) == 90 && stages >= 2 &&
                     kWarps == 4 && keys == 64 && o.attentionPrefillHalf && D == 128 &&
                     Dv == 128;
  c += "  static constexpr bool kWgmma = " + flag(wgmma) + ";\n";
  // The previous tile's O += P·V waited for with the next tile's S (three
  // stages, one tile ahead): EmitOptions::attentionPrefillWgDefer.
  c += "  static constexpr bool kWgDefer = " +
       flag(wgmma && stages == 3 && o.attentionPrefillWgDefer) + ";\n";
  c += "  static constexpr long long T = " + ilit(T) + ", Hq = " + ilit(Hq) +
       ", G = " + ilit(Hq / Hkv) + ", D = " + ilit(D) + ", Dv = " + ilit(Dv) +
       ", ctx = " + ilit(ctx) + ", window = " + ilit(window) + ";\n";
  c += "  static constexpr bool kSinks = " + flag(hasSinks) + ", kSoftcap = " + flag(softcap > 0) +
       ", kVecK = " + flag(vecK) + ", kVecV = " + flag(vecV) +
       ", kHalf = " + flag(o.attentionPrefillHalf) +
       ", kKsOuter = " + flag(o.attentionPrefillKsOuter) + ";\n";
  c += "  static constexpr long long q_off = " + ilit(ql.offset) + ", q_st = " +
       ilit(ql.strides[0]) + ", q_sh = " + ilit(ql.strides[1]) + ", q_sd = " +
       ilit(ql.strides[2]) + ";\n";
  c += "  static constexpr long long k_off = " + ilit(kl.offset) + ", k_sj = " +
       ilit(kl.strides[0]) + ", k_sh = " + ilit(kl.strides[1]) + ", k_sd = " +
       ilit(kl.strides[2]) + ";\n";
  c += "  static constexpr long long v_off = " + ilit(vl.offset) + ", v_sj = " +
       ilit(vl.strides[0]) + ", v_sh = " + ilit(vl.strides[1]) + ", v_sd = " +
       ilit(vl.strides[2]) + ";\n";
  c += "  static constexpr long long pos_off = " + ilit(pl.offset) + ", pos_st = " +
       ilit(pl.strides[0]) + ", sink_off = " + ilit(sl.offset) + ", sink_sh = " +
       ilit(sl.strides[0]) + ";\n";
  c += "  static __device__ __forceinline__ float scale() { return " + flit(scale) +
       "; }\n";
  c += "  static __device__ __forceinline__ float softcap() { return " +
       flit(softcap > 0 ? softcap : 1.0) + "; }\n";
  c += "};\n";
  std::string params = "Cfg::Y* y, const Cfg::Q* q, const Cfg::DecK::T* k, "
                       "const Cfg::DecV::T* v, const Cfg::Pos* pos";
  if (hasSinks)
    params += ", const Cfg::Sink* sinks";
  c += kernelEntry(32 * kWarps, params,
                   llvm::formatv("fg::flashAttention<Cfg>(fg::FlashArgs<Cfg>{{y, q, k, v, pos, {0}});",
                                 hasSinks ? "sinks" : "nullptr")
                       .str(),
                   o.attentionPrefillMinBlocks);
  KernelSpec k = finishSpec("attention", kernelSource("attention.cuh").str() +
                                             kernelSource("attention_prefill.cuh").str() + c);
  if (wgmma)
    k.source = kArchSpecificMarker.str() + k.source;
  k.grid[0] = static_cast<unsigned>((T + 16 * kWarps - 1) / (16 * kWarps));
  k.grid[1] = static_cast<unsigned>(Hq);
  k.block[0] = 32 * kWarps;
  // The key and value tiles: S stages of `keys` rows of K and V, each row
  // padded by 8 elements (the kernel's ktiles / vtiles).
  k.sharedBytes = static_cast<unsigned>(2 * stages * keys * (wgmma ? D + Dv : (D + 8) + (Dv + 8)));
  k.params = {Param::result(0), Param::operand(0), Param::operand(1), Param::operand(2),
              Param::operand(3)};
  if (hasSinks)
    k.params.push_back(Param::operand(4));
  return std::vector<Launch>{std::move(k)};
}

} // namespace fg::cuda::detail
