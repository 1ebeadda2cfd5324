//===- EmitterCommon.h - shared pieces of the CUDA emitters (internal) -*- C++ -*-===//
//
// Not a public header: the emitter families (ElementwiseEmitter, RowEmitter,
// GemvEmitter, AttentionEmitter) and Kernel.cpp share these helpers.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "codegen/cuda/Kernel.h"

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/ADT/Twine.h"
#include "llvm/Support/Error.h"

#include <optional>
#include <string>
#include <vector>

namespace fg::cuda::detail {

/// Device helpers every kernel source starts with: fg_f16 / fg_bf16 storage
/// types, fg_to_f / fg_from_f<T> conversions (round to nearest even), warp
/// and block reductions.
llvm::StringRef commonHeader();

/// The device storage type of a scalar dtype: float, fg_f16, fg_bf16, int, long long.
std::string ctype(DType t);
/// A float literal that reads back to exactly `float(v)`: `0x1.99999ap-4f`,
/// `FG_INF`, `(-FG_INF)`, `FG_NAN`.
std::string flit(double v);
/// A double literal that reads back to exactly `v`: `0x1.999999999999ap-4`, `(double)FG_INF`.
std::string dlit(double v);
/// `123LL`
std::string ilit(int64_t v);

/// `const long long <prefix>0 = ...;` lines unravelling the linear index
/// `lin` over `shape` (row-major). Dims of size 1 get a literal 0.
std::string unravel(llvm::StringRef lin, llvm::ArrayRef<int64_t> shape, llvm::StringRef prefix);
/// `(offset + c0 * s0 + ...)` for `layout` with coordinate expressions
/// `coords` (one per layout dim; empty string: the coordinate is 0).
std::string offsetExpr(const Layout &layout, llvm::ArrayRef<std::string> coords);
/// Coordinates of an operand of rank r broadcast to an output of rank R
/// (numpy rules): out coordinate names `<prefix>i`, dims of size 1 read 0.
std::vector<std::string> broadcastCoords(llvm::ArrayRef<int64_t> operandShape, size_t outRank,
                                         llvm::StringRef prefix);
/// Names `<prefix>0 .. <prefix>(n-1)`.
std::vector<std::string> coordNames(size_t n, llvm::StringRef prefix);

/// `fg_<mnemonic>_<16 hex digits of a hash of body>`.
std::string kernelName(llvm::StringRef mnemonic, llvm::StringRef body);
/// Replaces every occurrence of kernel name `from` in `source` with `to`.
void renameKernel(std::string &source, const std::string &from, const std::string &to);
/// A kernel source rewritten after its emitter (a merge) gets another name,
/// since modules are keyed by kernel names: `name_<16 hex digits of a hash of
/// source>`, written into `source` and returned.
std::string renameRewritten(std::string &source, const std::string &name);
/// Puts the common header in front of `body`, where `body` uses the
/// placeholder `KERNEL` for the entry's name; fills name and source.
KernelSpec finishSpec(llvm::StringRef mnemonic, std::string body);
/// The one shape of a kernel entry: `extern "C" __global__` with launch
/// bounds `threads`, named `KERNEL`, whose body starts with fg_pdl_begin()
/// (the programmatic-dependent-launch wait, common.cuh) and then runs `body`.
/// `minBlocks` > 0 also asks for that many resident blocks per SM (the
/// register cap that follows from it). `prologue`, if any, runs before the
/// wait, possibly while the previous kernel still runs: it issues L2
/// prefetch hints (fg_prefetch_l2) and reads, bypassing L1, only what it
/// needs to aim them (decode attention: the positions), or loads weights
/// into registers (the DP4A GEMV's first tiles, the fused router's rows):
/// nothing it reads is written by a kernel of the step, and it writes
/// nothing. `clusterX` > 0 compiles the
/// thread-block cluster shape (clusterX, 1, 1) into the entry
/// (__cluster_dims__): every launch of it, graphs included, runs clusters of
/// that many blocks along x (the grid's x a multiple of it).
std::string kernelEntry(unsigned threads, llvm::StringRef params, llvm::StringRef body,
                        unsigned minBlocks = 0, llvm::StringRef prologue = {},
                        unsigned clusterX = 0);
/// Where the merges after the emitters splice into a kernel source of one
/// entry (kernelEntry's shape) named `name`: the entry (`extern "C"`), the
/// first character of its parameter list, the end of that list (`) {`) and
/// the end of its body (`\n}\n`); none when the source has no such entry.
struct EntrySplice {
  size_t entry, params, open, close;
};
std::optional<EntrySplice> entrySplice(const std::string &source, const std::string &name);

/// "no CUDA kernel for '<op>' with <why>"
llvm::Error unsupported(const Node &node, const llvm::Twine &why);
/// Errors when an operand (or result) has a block-quantised dtype.
llvm::Error rejectQuantized(const Function &fn, const Node &node);

/// Grid size for a grid-stride loop over `n` items with `perBlock` each.
unsigned gridFor(int64_t n, int64_t perBlock);
/// Threads for a row of `len` elements: a multiple of 32, at most `maxThreads`.
unsigned threadsForRow(int64_t len, unsigned maxThreads = 256);
int64_t product(llvm::ArrayRef<int64_t> v);
int64_t elemBytes(DType t);

// The families (each in its own file).
bool isElementwiseFamily(OpKind k);
llvm::Expected<std::vector<Launch>> emitElementwise(const Function &fn, const Node &node,
                                                    llvm::ArrayRef<Layout> layouts,
                                                    const EmitOptions &options);
bool isRowFamily(OpKind k);
llvm::Expected<std::vector<Launch>> emitRow(const Function &fn, const Node &node,
                                            llvm::ArrayRef<Layout> layouts,
                                            const EmitOptions &options);
/// Row-wise anchors with epilogues (FusedRowEmitter.cpp): fused.rms_norm_mul,
/// rms_norm_mul_add, rms_norm_mul_rope, rms_norm_mul_rope_set_rows,
/// rope_set_rows, topk_moe.
bool isFusedRowFamily(OpKind k);
llvm::Expected<std::vector<Launch>> emitFusedRow(const Function &fn, const Node &node,
                                                 llvm::ArrayRef<Layout> layouts,
                                                 const EmitOptions &options);
/// matmul, matmul_id, and the GEMV anchor with a glu epilogue:
/// fused.gated_matmul(_id).
llvm::Expected<std::vector<Launch>> emitGemv(const Function &fn, const Node &node,
                                             llvm::ArrayRef<Layout> layouts,
                                             const EmitOptions &options);
/// Weight dtypes the GEMV template decodes (f32, f16, bf16 and the GGUF
/// block types with a decoder in kernels/gemv.cuh).
bool gemvDecodesNatively(DType t);
/// The kernels/gemv.cuh decoder of a GGUF block type as stored
/// (`fg::DecQ4_0`, ...; q4_K's narrow one), or null for other dtypes: the one
/// table the GEMV and the dequantising kernels name their decoders from.
const char *blockDecoder(DType t);

/// Where a GEMV-family op keeps its weight streams: operands first ..
/// first + streams - 1 (x is operand 0; the norm-prologue forms take the
/// norm weight as operand 1). `family` is false for any other op.
struct GemvOperands {
  bool family = false;
  unsigned first = 1, streams = 1;
};
GemvOperands gemvOperands(OpKind kind);

/// Rows of a block-quantised matrix decoded by kernels/dequant.cuh (element
/// offsets and strides; the kernel turns the matrix's into bytes).
struct DequantDesc {
  std::string mnemonic;
  DType q = DType::Q8_0, out = DType::F16, ids = DType::I32;
  int64_t K = 0, R = 0, V = 0;           ///< columns, rows written, rows of the matrix
  int64_t wOff = 0, wLd = 0;             ///< matrix: element offset, row stride
  int64_t oOff = 0, oLd = 0;             ///< output: element offset, row stride
  bool gather = false;                   ///< row r reads row ids[idsOff + r·idsS]
  int64_t idsOff = 0, idsS = 1;
  Param outParam = Param::result(0), wParam = Param::operand(0), idsParam = Param::operand(1);
  /// A second matrix of R rows decoded after the first (rows R..2R-1 of the
  /// output; not with gather): fused.gated_gemm's up weight after its gate.
  bool pair = false;
  int64_t w2Off = 0, w2Ld = 0; ///< the second matrix: element offset, row stride
  Param w2Param = Param::operand(2);
};
KernelSpec dequantKernel(const DequantDesc &d);
/// get_rows of a quantised table [V, K] by ids [T] (QuantEmitter.cpp).
bool quantGetRowsSupported(const Function &fn, const Node &node, std::string *why);
llvm::Expected<std::vector<Launch>> emitQuantGetRows(const Function &fn, const Node &node,
                                                     llvm::ArrayRef<Layout> layouts);
llvm::Expected<std::vector<Launch>> emitAttention(const Function &fn, const Node &node,
                                                  llvm::ArrayRef<Layout> layouts,
                                                  const EmitOptions &options);
/// Why the flash-attention prefill kernel cannot take this attention node
/// (empty: it can); emitAttention asks when T >= attentionPrefillMinTokens.
std::string attentionPrefillRefusal(const Function &fn, const Node &node);
/// Why the grouped expert GEMM (kernels/moe.cuh) cannot take this matmul_id
/// (streams 1) or fused.gated_matmul_id (streams 2) node (empty: it can).
std::string groupedExpertRefusal(const Function &fn, const Node &node, unsigned streams,
                                 bool quant = false);
/// Tiles the grouped GEMM's grid holds for `pairs` (token, slot) pairs in
/// tiles of `rows` pairs (32 gives the most: the refusal's bound).
int64_t groupedExpertTiles(int64_t pairs, int64_t experts, int64_t rows = 32);
/// Whether the grouped expert GEMM of this node (x [T, X, K], experts of
/// dtype `w`, `kk` slots) runs on integer tensor cores (kernels/moe_i8.cuh,
/// EmitOptions::groupedExpertInt8): q4_K, q5_K, q8_0 or q4_0 experts, K a
/// multiple of 256, x rows one a token or one a slot.
bool groupedExpertInt8(const EmitOptions &o, DType w, int64_t K, int64_t X, int64_t kk);
/// Routing + grouped GEMM launches; `epilogue` is the GEMV's epilogue policy
/// (`fg::EpiStore` or `fg::EpiGlu<...>`), shared with kernels/gemv.cuh.
llvm::Expected<std::vector<Launch>> emitGroupedExpert(const Function &fn, const Node &node,
                                                      llvm::ArrayRef<Layout> layouts,
                                                      unsigned streams, llvm::StringRef epilogue,
                                                      const EmitOptions &options);
/// The flash-attention prefill kernel (kernels/attention_prefill.cuh).
llvm::Expected<std::vector<Launch>> emitAttentionPrefill(const Function &fn, const Node &node,
                                                         llvm::ArrayRef<Layout> layouts,
                                                         const EmitOptions &options);

/// fused.gated_gemm (GatedGemm.cpp): gate and up as one stacked cuBLAS GEMM
/// into scratch (two where the weights do not adjoin), then the GLU.
llvm::Expected<std::vector<Launch>> emitGatedGemm(const Function &fn, const Node &node,
                                                  llvm::ArrayRef<Layout> layouts,
                                                  const EmitOptions &options);
/// The GLU of fused.gated_gemm over its scratch: from element `base` on
/// (in elements of `in`), rows of 2n values of type `in`, gate in [0, n) and
/// up in [n, 2n) of each, the result [rows, n] in `out`
/// (ElementwiseEmitter.cpp; the vector form where n % 4 == 0 and
/// base % 4 == 0).
KernelSpec gluOfStackedRows(const Node &node, int64_t rows, int64_t n, int64_t base, DType in,
                            DType out, const EmitOptions &options);

/// A dense copy of `src` (read through `layout`) converted to `to`, written to
/// `dst` (used by the cuBLAS path to stage B). Param order: dst, src.
KernelSpec emitCopyKernel(DType from, const Layout &layout, DType to, Param dst, Param src);

/// The rope attributes every rope row declares (rope and the fused rope ops).
struct RopeAttrs {
  RopeMode mode = RopeMode::Normal;
  int64_t nDims = 0;
  double theta = 0, freqScale = 0, extFactor = 0, attnFactor = 0, betaFast = 0, betaSlow = 0;
  int64_t nCtxOrig = 0;
};
template <typename View> RopeAttrs ropeAttrsOf(View v) {
  return {v.mode(),       v.nDims(),      v.theta(),    v.freqScale(), v.extFactor(),
          v.attnFactor(), v.betaFast(),   v.betaSlow(), v.nCtxOrig()};
}
/// `struct Rope { ... };` for the rope rows (row.cuh, MapRope) and the
/// attention's q (attnQ): the rope attributes `a` of `node` as constants (YaRN's
/// ramp bounds and magnitude precomputed in double).
llvm::Expected<std::string> ropeCfg(const Node &node, const RopeAttrs &a, bool freqFactors);
/// Pair i's angle per position, pos · theta^(-2i/n) scaled by freq_scale and
/// YaRN's ramp (before any freq factor), for i < n_dims / 2: the attention's
/// q rope reads them from a table (attnQ) instead of computing f64 pow.
std::vector<double> ropeFrequencies(const RopeAttrs &a);
/// The byte alignment the block decoders' loads need of a quantised row
/// (q4_1, q5_1, q2_K: 4-byte loads; narrow q4_K, q5_K, iq4_xs: 8; else 2).
int64_t quantRowAlignment(DType t);

} // namespace fg::cuda::detail
