//===- RowKernels.h - what the row emitters share (internal) -----*- C++ -*-===//
//
// Not a public header: RowEmitter.cpp and FusedRowEmitter.cpp describe their
// kernels of kernels/row.cuh with these pieces (operand layouts in the row
// space, vector widths, the work split) and RowEmitter's norms and rope go
// through the fused row generator (emitNormRows) with fewer steps on.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "codegen/cuda/EmitterCommon.h"

#include <string>

namespace fg::cuda::detail {

/// Most outer dims a row kernel takes (operands of rank <= 4, like ggml).
constexpr size_t kMaxRowOuterDims = 3;

/// The rows of a row space: outer dims right-aligned in d[0..2] (padded with
/// 1), `count` rows of `len` elements.
struct RowShape {
  int64_t d[3] = {1, 1, 1};
  int64_t count = 1, len = 1;
  size_t rank = 1; ///< rank of the row space (outer dims + 1)
};
/// Errors (unsupported) for a scalar or more than three outer dims.
llvm::Expected<RowShape> rowShape(const Node &node, llvm::ArrayRef<int64_t> shape);

/// An operand read in a row space: element (r0, r1, r2, c) at off + Σ r·s + c·sc.
struct RowOperand {
  DType dtype = DType::F32;
  int64_t off = 0, s[3] = {0, 0, 0}, sc = 0;
};
/// `l` broadcast against a row space of rank `rank` (numpy rules: missing and
/// size-1 dims read index 0).
RowOperand rowOperand(const Layout &l, DType t, size_t rank);
/// `fg::RowOp<T, off, s0, s1, s2, sc>`
std::string rowOpType(const RowOperand &o);
/// `fg::VecOp<T, off, stride>` for a rank-1 operand (stride 0 if its one dim is 1).
std::string vecOpType(const Layout &l, DType t);
/// The widest load (elements, a power of two, at most 16 bytes) that reads
/// `len` consecutive elements of every row of `o` aligned; 1 if none.
int vecWidth(const RowOperand &o, int64_t len);
/// Same for a dense result row of `len` elements of `t`.
int denseVecWidth(DType t, int64_t len);

/// How the (row, slice) items of a launch map to threads (see row.cuh).
struct RowSplit {
  unsigned group = 32, threads = 32; ///< threads per row; per block
  int64_t split = 1;                 ///< blocks (slices) per row
  unsigned grid = 1;
};
/// The multi-block rule. `statUnits`: loads of the statistics pass per row;
/// `workUnits`: units of the write pass per row; `canSplit`: whether slices
/// may go to different blocks (ops with one result per row: no).
RowSplit chooseRowSplit(int64_t rows, int64_t statUnits, int64_t workUnits, unsigned maxThreads,
                        bool canSplit, const EmitOptions &o);

/// `static constexpr` lines of the row space and split, for a Cfg struct.
std::string rowCfgShape(const RowShape &r, const RowSplit &s);
/// float as its bits, for `__int_as_float` in a Cfg.
int32_t f32Bits(double v);

/// The norm/rope row generator (FusedRowEmitter.cpp): rms_norm, layer_norm,
/// rope and the fused anchors fused.rms_norm_mul(_add), rms_norm_mul_rope
/// (_set_rows), rope_set_rows.
/// The row work of a one-token rope, rope / norm row with a cache write, or
/// set_rows, as the tail of a GEMV launch (GemvTails.cpp): a warp a row over
/// the tail blocks' grid (common.cuh fg_tails). `cfg` is the body of its
/// parameter struct, whose name is `Cfg` in `params` and `call`; its block
/// size is the macro FG_TAIL_THREADS.
struct RowTail {
  std::string cfg;
  std::vector<std::pair<std::string, std::string>> params; ///< (type, name)
  std::string call;
  std::vector<Param> ps;
  int64_t items = 0; ///< warps' worth of work
  std::string what;  ///< the op's mnemonic
  /// The local form (no statistics, normal-mode pairs): `rangeCall` does the
  /// elements [fg_begin, fg_end) of the flattened rows (row.cuh normRowsRange).
  bool local = false;
  std::string rangeCall;
  /// The register form (local ones only): `elementCall` does element fg_f
  /// given its value fg_v and, where `pairs` (a rope), its partner's fg_vp
  /// (row.cuh normRowsElement).
  std::string elementCall;
  /// Element fg_f's angle and cache row into fg_e (normRowsElementEarly).
  std::string earlyCall;
  /// The operands earlyCall reads (positions, cache row indices, frequency factors).
  std::vector<int> earlyReads;
  bool pairs = false;
  int x = 1; ///< the operand index of the rows read
};
llvm::Expected<RowTail> emitRowTail(const Function &fn, const Node &node,
                                    llvm::ArrayRef<Layout> layouts, const EmitOptions &options);

llvm::Expected<std::vector<Launch>> emitNormRows(const Function &fn, const Node &node,
                                                 llvm::ArrayRef<Layout> layouts,
                                                 const EmitOptions &options);

} // namespace fg::cuda::detail
