//===- MoeEmitter.cpp - prefill expert matmuls as one grouped GEMM --------===//
//
// matmul_id and fused.gated_matmul_id over at least
// EmitOptions::groupedExpertMinTokens tokens (a prefill chunk) run
// kernels/moe.cuh (the design is in its banner): a routing launch that sorts
// the (token, slot) pairs by expert and writes the tile table on the device,
// then a grouped GEMM on the tensor cores whose grid rows take one tile each.
// This file only checks that the kernels apply, writes their `Cfg` (shared by
// both launches) and entries, and sizes the scratch and the grid. Where they
// do not apply (f32 weights, two streams of different types, more than 4095
// experts), the expert-indexed GEMV serves every token count.
//
//===----------------------------------------------------------------------===//
#include "codegen/cuda/EmitterCommon.h"
#include "codegen/cuda/KernelSources.h"

#include "llvm/Support/FormatVariadic.h"

#define FG_MOE_FN inline
#include "codegen/cuda/kernels/moe_tiles.cuh"

namespace fg::cuda::detail {
namespace {

constexpr int64_t kBN = 64;
constexpr int64_t kMaxExperts = 4095; // counters in shared memory
constexpr unsigned kRouteThreads = 1024;

const char *decoder(DType t) { return t == DType::BF16 ? "fg::DecBF16" : "fg::DecF16"; }
bool is16(DType t) { return t == DType::F16 || t == DType::BF16; }
std::string flag(bool b) { return b ? "true" : "false"; }

} // namespace

namespace {
/// The int8 form's block types (kernels/moe_i8.cuh): the policy and its
/// padded staged row in bytes (MoeI8...::kRow), or null.
struct I8Type {
  const char *policy;
  int64_t row;
};
const I8Type *i8Type(DType w) {
  static const I8Type q4k{"fg::MoeI8Q4K", 160}, q5k{"fg::MoeI8Q5K", 224},
      q80{"fg::MoeI8Q8_0", 288}, q40{"fg::MoeI8Q4_0", 160}, q6k{"fg::MoeI8Q6K", 224};
  switch (w) {
  case DType::Q4_K:
    return &q4k;
  case DType::Q5_K:
    return &q5k;
  case DType::Q8_0:
    return &q80;
  case DType::Q4_0:
    return &q40;
  case DType::Q6_K:
    return &q6k;
  default:
    return nullptr;
  }
}
} // namespace

bool groupedExpertInt8(const EmitOptions &o, DType w, int64_t K, int64_t X, int64_t kk) {
  // q6_K only when asked (2): its two masked mmas a sub-block made its
  // gate|up slower than the f16 form (Kernel.h, groupedExpertInt8).
  return o.groupedExpertInt8 > 0 && (w != DType::Q6_K || o.groupedExpertInt8 == 2) &&
         o.groupedExpertQuant && i8Type(w) && K % 256 == 0 && (X == 1 || X == kk);
}

int64_t groupedExpertTiles(int64_t pairs, int64_t experts, int64_t rows) {
  return moeMaxTiles(pairs, experts + 1, rows);
}

std::string groupedExpertRefusal(const Function &fn, const Node &node, unsigned streams,
                                 bool quant) {
  const TensorType &xt = fn.type(node.operands[0]);
  unsigned idsAt = 1 + streams;
  const TensorType &it = fn.type(node.operands[idsAt]);
  DType w0 = fn.type(node.operands[1]).dtype, w1 = fn.type(node.operands[streams]).dtype;
  // Block-quantised experts (EmitOptions::groupedExpertQuant): one type with
  // a block decoder, whole 32-weight steps along K (half8's unit).
  const bool q = quant && w0 == w1 && isQuantized(w0) && blockDecoder(w0) &&
                 gemvDecodesNatively(w0) && fn.type(node.operands[1]).shape[2] % 32 == 0;
  if (!q && (!is16(w0) || w0 != w1))
    return "weights " + std::string(dtypeName(w0)) + "/" + std::string(dtypeName(w1)) +
           (quant ? " (one 16-bit type, or one block-quantised type with K a multiple of 32)"
                  : " (one 16-bit type)");
  if (xt.dtype != DType::F32 && !is16(xt.dtype))
    return "x of dtype " + std::string(dtypeName(xt.dtype));
  int64_t E = fn.type(node.operands[1]).shape[0];
  if (E > kMaxExperts)
    return llvm::formatv("{0} experts (at most {1})", E, kMaxExperts).str();
  int64_t pairs = xt.shape[0] * it.shape[1];
  if (pairs >= (int64_t(1) << 31) || groupedExpertTiles(pairs, E) > 65535)
    return llvm::formatv("{0} (token, slot) pairs", pairs).str();
  return "";
}

llvm::Expected<std::vector<Launch>> emitGroupedExpert(const Function &fn, const Node &node,
                                                      llvm::ArrayRef<Layout> ls, unsigned streams,
                                                      llvm::StringRef epilogue,
                                                      const EmitOptions &o) {
  std::string why = groupedExpertRefusal(fn, node, streams, o.groupedExpertQuant);
  if (!why.empty())
    return unsupported(node, "the grouped expert GEMM: " + why);
  const TensorType &xt = fn.type(node.operands[0]), &wt = fn.type(node.operands[1]);
  unsigned idsAt = 1 + streams;
  const TensorType &it = fn.type(node.operands[idsAt]);
  const Layout &xl = ls[0], &il = ls[idsAt];
  int64_t E = wt.shape[0], N = wt.shape[1], K = wt.shape[2], kk = it.shape[1];
  // Tile height: 64 rows (a whole expert at W-moe's 512-token prefill, read
  // once) except 16-bit gate|up, where 64 rows doubled each block's mmas and
  // lost (eighth session). Quantised gate|up decodes each weight once a tile,
  // and decoding is its cost: 64 rows, 7.75 -> 7.56 ms at W-moe-12 q4_K's
  // 512-token prefill (H200, twelfth session, one run each).
  const bool quant = isQuantized(wt.dtype);
  const int64_t BM = o.groupedExpertRows == 32 || o.groupedExpertRows == 64 ? o.groupedExpertRows
                     : streams == 2 && !quant                               ? 32
                                                                            : 64;
  // The k-step: 64 (half the round trips a block waits for) unless forced to
  // 32. H200, twelfth session, W-moe-12 512-token prefill (ms, 32 -> 64):
  // f16 9.20 -> 8.41 (gate|up 4.42 -> 3.84, down 2.90 -> 2.70); q4_K 14.99 ->
  // 14.41.
  const int64_t KT = o.groupedExpertKT == 32 ? 32 : 64;
  // Quantised units: one row's step a thread (one scale decode) or spread
  // (whole sectors a warp load). One row's step for one stream only, as
  // measured (H200, twelfth session, W-moe-12 q4_K 512-token prefill): down
  // 3.03 ms spread, 2.61 by row; gate|up 8.71 ms spread, 10.43 by row (KT 32).
  const bool rowUnits = o.groupedExpertQuantRowUnits >= 0 ? o.groupedExpertQuantRowUnits == 1
                                                          : streams == 1;
  // Threads a block: 128, or 256 (EmitOptions::groupedExpertThreads) where
  // every thread keeps whole units (BM · KT / 8 >= 256). 256 halves each
  // thread's accumulators and in-flight units, so twice the warps fit an SM:
  // ptxas (sm_90) at W-moe-12's 512-token prefill, registers at 128 -> 256
  // threads, q4_K gate|up 248 -> 124 and down 126 -> 78, f16 gate|up 130 -> 82
  // and down 168 -> 80, no spills (scripts/kernel-resources.py).
  // The rule (0): 256 for quantised experts, 128 for 16-bit ones (W-moe-12's
  // 512-token prefill, H200, thirteenth session: q4_K 11.95 -> 9.14 ms at
  // 256, f16 8.37 -> 8.85).
  const int64_t threads = o.groupedExpertThreads > 0 ? o.groupedExpertThreads : quant ? 256 : 128;
  const int64_t NT = threads == 256 && BM * KT / 8 >= 256 ? 256 : 128;
  // Deferred quantised decode: the rule (-1) for two streams only (same
  // measurement at 256 threads: gate|up 4.89 -> 4.22 ms, down 2.28 -> 2.67).
  const bool deferred = o.groupedExpertQuantDeferred >= 0 ? o.groupedExpertQuantDeferred == 1
                                                          : streams == 2;
  // Empty m tiles' mmas skipped (EmitOptions::groupedExpertSkipRows) for
  // block-quantised experts, whose blocks issue in about half the cycles
  // (decoding): W-moe-12 q4_K 512-token prefill 9.14 / 9.18 -> 8.91 / 8.93
  // ms (H200, thirty-first session, call 3). 16-bit experts keep the plain
  // loop: f16 8.91 -> 9.43 with the skip, where the block's time is its
  // busiest warp's anyway.
  const bool skipRows = o.groupedExpertSkipRows && quant;
  int64_t pairs = xt.shape[0] * kk, tiles = groupedExpertTiles(pairs, E, BM);
  // Block-quantised experts on integer tensor cores (kernels/moe_i8.cuh): 8
  // warps of one n8 tile each (FG_DEBUG_MOE_THREADS=128: 4 warps of two),
  // every stream; the streams' alignment is checked below.
  bool i8 = groupedExpertInt8(o, wt.dtype, K, xt.shape[1], kk);
  const int64_t i8NT = o.groupedExpertThreads == 128 ? 128 : 256, i8NJ = kBN / 8 / (i8NT / 32);
  const int64_t xRows = xt.shape[0] * xt.shape[1];
  // The int8 x after the permutation: xq (K bytes a row, 16-byte aligned),
  // then {dx, Σ x} (8 bytes a 32-block).
  const uint64_t permEnd = static_cast<uint64_t>(4 + 4 * tiles + pairs) * 4;
  const uint64_t xqOff = (permEnd + 15) / 16 * 16;
  const uint64_t xsOff = xqOff + static_cast<uint64_t>(xRows * K + 15) / 16 * 16;
  const uint64_t i8End = xsOff + static_cast<uint64_t>(xRows * (K / 32)) * 8;
  bool bias = node.operands.size() > idsAt + 1;
  const Layout &w0l = ls[1], &w1l = ls[streams];
  auto vecOk = [&](const Layout &w) {
    return w.strides[2] == 1 && K % 8 == 0 && w.offset % 8 == 0 && w.strides[1] % 8 == 0 &&
           w.strides[0] % 8 == 0;
  };
  // Quantised streams: offsets and strides in bytes of whole blocks, aligned
  // for the decoder's loads (quantRowAlignment, the GEMV's rule).
  struct Stream {
    int64_t off, ld, ks, es;
  } ws[2] = {{w0l.offset, w0l.strides[1], w0l.strides[2], w0l.strides[0]},
             {w1l.offset, w1l.strides[1], w1l.strides[2], w1l.strides[0]}};
  if (quant) {
    const DTypeInfo &qi = dtypeInfo(wt.dtype);
    const int64_t be = qi.blockElems, bb = qi.blockBytes;
    const int64_t align = quantRowAlignment(wt.dtype);
    for (Stream &s : ws) {
      if (s.ks != 1 || s.off % be || s.ld % be || s.es % be)
        return unsupported(node, "the grouped expert GEMM: a " + std::string(dtypeName(wt.dtype)) +
                                     " weight whose rows are not whole contiguous blocks");
      s.off = s.off / be * bb, s.ld = s.ld / be * bb, s.es = s.es / be * bb;
      if (s.off % align || s.ld % align || s.es % align)
        return unsupported(node, "the grouped expert GEMM: a " + std::string(dtypeName(wt.dtype)) +
                                     " weight whose rows are not " + std::to_string(align) +
                                     "-byte aligned");
      // The int8 form stages a row's 256-weight step by 16-byte cp.async
      // (q6_K: by 4-byte words from the word holding the block's start,
      // which must lie 0 or 2 bytes before it): q8_0's and q4_0's views of
      // a whole number of 8 blocks only (a weight's own rows always are;
      // a view that starts inside a row may not be), else the f16 form.
      const int64_t i8Align = wt.dtype == DType::Q6_K ? 2 : 16;
      if (s.off % i8Align || s.ld % i8Align || s.es % i8Align)
        i8 = false;
    }
  }
  // x rows as 16-byte f32 units (two float4 loads per 8 k instead of 8).
  const bool xVec = xt.dtype == DType::F32 && xl.strides[2] == 1 && xl.offset % 4 == 0 &&
                    xl.strides[0] % 4 == 0 && (xt.shape[1] == 1 || xl.strides[1] % 4 == 0);
  // f16 x for quantised experts (EmitOptions::groupedExpertHalfX, the
  // gemm-inputs pass's convert): 8 halves a 16-byte load, stored to the tile
  // as they are (the f16 the kernel would have rounded x to).
  const bool xVec16 = o.groupedExpertHalfX && quant && o.gemvQuantXHalf &&
                      xt.dtype == DType::F16 && xl.strides[2] == 1 && xl.offset % 8 == 0 &&
                      xl.strides[0] % 8 == 0 && (xt.shape[1] == 1 || xl.strides[1] % 8 == 0);
  Layout b0l = bias ? ls[idsAt + 1] : Layout::contiguous({1, 1});
  Layout b1l = bias ? ls[idsAt + 2] : Layout::contiguous({1, 1});
  DType b0t = bias ? fn.type(node.operands[idsAt + 1]).dtype : DType::F32;
  DType b1t = bias ? fn.type(node.operands[idsAt + 2]).dtype : DType::F32;

  std::string c;
  c += "struct Cfg {\n";
  c += "  using X = " + ctype(xt.dtype) + ";\n";
  // The mma type: the weights' (16-bit), or f16 for quantised weights, whose
  // block decoder (Q) writes f16 units (half8) into the tile.
  c += std::string("  using Dec0 = ") + decoder(quant ? DType::F16 : wt.dtype) + ";\n";
  c += std::string("  using Dec1 = ") + decoder(quant ? DType::F16 : wt.dtype) + ";\n";
  c += std::string("  using Q = ") + (quant ? blockDecoder(wt.dtype) : "fg::DecF16") + ";\n";
  c += std::string("  using W = ") + (quant ? "unsigned char" : "Dec0::T") + ";\n";
  c += "  using Ids = " + ctype(it.dtype) + ";\n";
  c += "  using B0 = " + ctype(b0t) + ";\n  using B1 = " + ctype(b1t) + ";\n";
  c += "  using Epi = " + epilogue.str() + ";\n";
  c += llvm::formatv("  static constexpr int BM = {0}, BN = {1}, KT = {2}, NT = {3};\n", BM, kBN, KT,
                     i8 ? i8NT : NT)
           .str();
  // The int8 GEMM's dynamic shared memory (kernels/moe_i8.cuh MoeI8Smem):
  // two stages of x rows (288 bytes), their {dx, Σ x} (72) and the weight
  // rows' 256-weight steps (the policy's padded row, i8Type, a stream).
  const int64_t i8Row = i8 ? i8Type(wt.dtype)->row : 0;
  const int64_t i8Shared = 2 * BM * 288 + 2 * BM * 72 + 2 * streams * kBN * i8Row;
  if (i8)
    c += std::string("  using I8 = ") + i8Type(wt.dtype)->policy + ";\n";
  c += "  static constexpr int kI8NJ = " + std::to_string(i8NJ) +
       ";\n  static constexpr long long kI8Shared = " + ilit(i8Shared) + ";\n";
  c += "  static constexpr long long kXRows = " + ilit(xRows) +
       ", kXRowsPerToken = " + ilit(xt.shape[1]) + ", kXqOff = " + ilit(int64_t(xqOff)) +
       ", kXsOff = " + ilit(int64_t(xsOff)) + ";\n";
  c += "  static constexpr long long N = " + ilit(N) + ", K = " + ilit(K) + ", E = " + ilit(E) +
       ", kk = " + ilit(kk) + ", kPairs = " + ilit(pairs) + ", kTilesOff = 4LL, kPermOff = " +
       ilit(4 + 4 * tiles) + ";\n";
  c += "  static constexpr bool kBias = " + flag(bias) +
       ", kWVec = " + flag(!quant && vecOk(w0l) && vecOk(w1l)) + ", kQuant = " + flag(quant) +
       ", kXVec = " + flag(xVec) + ", kXVec16 = " + flag(xVec16) +
       ", kXHalf = " + flag(quant && o.gemvQuantXHalf) +
       ", kQRowUnits = " + flag(quant && rowUnits) +
       ", kQDeferred = " + flag(quant && deferred) +
       ", kSkipRows = " + flag(skipRows) + ";\n";
  c += "  static constexpr long long w0_off = " + ilit(ws[0].off) + ", w0_ld = " +
       ilit(ws[0].ld) + ", w0_ks = " + ilit(ws[0].ks) + ", w0_es = " + ilit(ws[0].es) + ";\n";
  c += "  static constexpr long long w1_off = " + ilit(ws[1].off) + ", w1_ld = " +
       ilit(ws[1].ld) + ", w1_ks = " + ilit(ws[1].ks) + ", w1_es = " + ilit(ws[1].es) + ";\n";
  c += "  static constexpr long long b0_off = " + ilit(b0l.offset) + ", b0_se = " +
       ilit(b0l.strides[0]) + ", b0_sn = " + ilit(b0l.strides[1]) + ", b1_off = " +
       ilit(b1l.offset) + ", b1_se = " + ilit(b1l.strides[0]) + ", b1_sn = " +
       ilit(b1l.strides[1]) + ";\n";
  c += "  static constexpr long long x_off = " + ilit(xl.offset) + ", x_st = " +
       ilit(xl.strides[0]) + ", x_sj = " + ilit(xt.shape[1] == 1 ? 0 : xl.strides[1]) +
       ", x_ks = " + ilit(xl.strides[2]) + ";\n";
  c += "  static constexpr long long ids_off = " + ilit(il.offset) + ", ids_st = " +
       ilit(il.strides[0]) + ", ids_sj = " + ilit(il.strides[1]) + ";\n";
  c += "};\n";
  std::string srcs = kernelSource("gemv.cuh").str() + kernelSource("moe_tiles.cuh").str() +
                     kernelSource("moe.cuh").str() +
                     (i8 ? kernelSource("moe_i8.cuh").str() : std::string()) + c;

  // The routing launch; in the int8 form its blocks 1.. quantise x (8
  // lanes a 32-block, at most two blocks an SM).
  KernelSpec route =
      i8 ? finishSpec(node.info().mnemonic,
                      srcs + kernelEntry(kRouteThreads,
                                         "int* scratch, const Cfg::Ids* ids, const Cfg::X* x",
                                         "fg::moeRouteI8<Cfg>(fg::MoeArgs<Cfg>{nullptr, scratch, "
                                         "x, nullptr, nullptr, ids, nullptr, nullptr});"))
         : finishSpec(node.info().mnemonic,
                      srcs + kernelEntry(kRouteThreads, "int* scratch, const Cfg::Ids* ids",
                                         "fg::moeRoute<Cfg>(fg::MoeArgs<Cfg>{nullptr, "
                                         "scratch, nullptr, nullptr, nullptr, ids, "
                                         "nullptr, nullptr});"));
  route.block[0] = kRouteThreads;
  route.params = {Param::scratch(), Param::operand(idsAt)};
  if (i8) {
    const int64_t quantBlocks = std::min<int64_t>(
        (xRows * (K / 32) * 8 + kRouteThreads - 1) / kRouteThreads, 2 * int64_t(o.smCount));
    route.grid[0] = static_cast<unsigned>(1 + std::max<int64_t>(quantBlocks, 1));
    route.params.push_back(Param::operand(0));
  }

  std::string params = "float* y, int* scratch, const Cfg::X* x, const Cfg::W* w0";
  std::string args = "y, scratch, x, w0, ";
  args += streams == 2 ? "w1" : "nullptr";
  if (streams == 2)
    params += ", const Cfg::W* w1";
  params += ", const Cfg::Ids* ids";
  args += ", ids";
  if (bias) {
    params += ", const Cfg::B0* b0, const Cfg::B1* b1";
    args += ", b0, b1";
  } else {
    args += ", nullptr, nullptr";
  }
  const int64_t gemmThreads = i8 ? i8NT : NT;
  KernelSpec gemm = finishSpec(
      node.info().mnemonic,
      srcs + kernelEntry(static_cast<unsigned>(gemmThreads), params,
                         std::string(i8 ? "fg::moeGemmI8" : "fg::moeGemm") +
                             "<Cfg>(fg::MoeArgs<Cfg>{" + args + "});"));
  gemm.grid[0] = static_cast<unsigned>((N + kBN - 1) / kBN);
  gemm.grid[1] = static_cast<unsigned>(tiles);
  gemm.block[0] = static_cast<unsigned>(gemmThreads);
  if (i8) {
    gemm.actQuant = ActQuant::Int8; // the reference reproduces x's int8 (cpuActQuant)
    gemm.sharedBytes = static_cast<unsigned>(i8Shared);
  }
  gemm.params = {Param::result(0), Param::scratch(), Param::operand(0), Param::operand(1)};
  if (streams == 2)
    gemm.params.push_back(Param::operand(2));
  gemm.params.push_back(Param::operand(idsAt));
  if (bias) {
    gemm.params.push_back(Param::operand(idsAt + 1));
    gemm.params.push_back(Param::operand(idsAt + 2));
  }
  uint64_t scratch = i8 ? i8End : permEnd;
  route.scratchBytes = gemm.scratchBytes = scratch;
  return std::vector<Launch>{std::move(route), std::move(gemm)};
}

} // namespace fg::cuda::detail
