//===- OpTable.cpp - rows of the op table ---------------------------------===//
//
// Shapes are row-major, outermost first. The semantics of each op (what the
// CPU reference computes) is documented beside its row.
//
//===----------------------------------------------------------------------===//
#include "ir/OpTable.h"

#include "ir/Decomposition.h"
#include "ir/OpViews.h"

#include "llvm/Support/FormatVariadic.h"

#include <cassert>
#include <cmath>
#include <iterator>
#include <limits>

namespace fg {
namespace {

using llvm::ArrayRef;
using llvm::Error;
using llvm::SmallVectorImpl;

Error fail(const llvm::Twine &msg) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(), msg);
}

template <typename... Ts> Error failf(const char *fmt, Ts &&...vals) {
  return fail(llvm::formatv(fmt, std::forward<Ts>(vals)...).str());
}

bool isIndex(DType t) { return t == DType::I32 || t == DType::I64; }

/// Activations are f32 unless the operand is another float type and the op
/// keeps it; real inputs (incl. quantised) read as f32.
DType realResult(DType t) { return isInteger(t) ? t : (isQuantized(t) ? DType::F32 : t); }

Error expectReal(const OpSignature &s, unsigned i, std::string_view what) {
  if (!isReal(s.operands[i].dtype))
    return failf("{0} must be a real type, got {1}", what, s.operands[i].str());
  return Error::success();
}

Error expectIndex(const OpSignature &s, unsigned i, std::string_view what) {
  if (!isIndex(s.operands[i].dtype))
    return failf("{0} must be i32 or i64, got {1}", what, s.operands[i].str());
  return Error::success();
}

Error expectRank(const OpSignature &s, unsigned i, int64_t rank, std::string_view what) {
  if (s.operands[i].rank() != rank)
    return failf("{0} must have rank {1}, got {2}", what, rank, s.operands[i].str());
  return Error::success();
}

// --- type rules ---------------------------------------------------------------

/// Elementwise unary: same shape; quantised storage reads as f32.
Error sameAsOperand0(const OpSignature &s, SmallVectorImpl<TensorType> &r) {
  if (auto e = expectReal(s, 0, "operand"))
    return e;
  r.push_back({realResult(s.operands[0].dtype), s.operands[0].shape});
  return Error::success();
}

/// a ∘ b with numpy broadcasting. Equal dtypes keep theirs; mixed floats give f32.
Error binaryRule(const OpSignature &s, SmallVectorImpl<TensorType> &r) {
  const TensorType &a = s.operands[0], &b = s.operands[1];
  auto shape = broadcastShapes(a.shape, b.shape);
  if (!shape)
    return failf("operand shapes {0} and {1} do not broadcast", a.str(), b.str());
  if (isInteger(a.dtype) != isInteger(b.dtype) || (isInteger(a.dtype) && a.dtype != b.dtype))
    return failf("operand dtypes {0} and {1} do not mix", dtypeName(a.dtype), dtypeName(b.dtype));
  DType dt = a.dtype == b.dtype ? realResult(a.dtype) : DType::F32;
  r.push_back({dt, *shape});
  return Error::success();
}

/// get_rows(table [B.., R, C..], idx [B.., N]) -> [B.., N, C..]: gathers rows
/// of each batch (C.. may be empty: probs [T, E] by ids [T, k] -> [T, k]).
/// Real tables give f32.
Error getRowsRule(const OpSignature &s, SmallVectorImpl<TensorType> &r) {
  const TensorType &t = s.operands[0], &idx = s.operands[1];
  if (auto e = expectIndex(s, 1, "indices"))
    return e;
  if (idx.rank() < 1 || t.rank() < idx.rank())
    return failf("table {0} must have at least the rank of indices {1}", t.str(), idx.str());
  int64_t batch = idx.rank() - 1;
  for (int64_t d = 0; d < batch; ++d)
    if (t.shape[d] != idx.shape[d])
      return failf("batch dim {0} of table {1} and indices {2} differ", d, t.str(), idx.str());
  Shape out(idx.shape.begin(), idx.shape.end());
  out.append(t.shape.begin() + batch + 1, t.shape.end());
  r.push_back({isInteger(t.dtype) ? t.dtype : DType::F32, out});
  return Error::success();
}

/// set_rows(dst [R, C..] state, src [N, C..], idx [N]) -> dst: dst[idx[n]] = src[n].
Error setRowsRule(const OpSignature &s, SmallVectorImpl<TensorType> &r) {
  const TensorType &dst = s.operands[0], &src = s.operands[1], &idx = s.operands[2];
  if (auto e = expectIndex(s, 2, "indices"))
    return e;
  if (auto e = expectRank(s, 2, 1, "indices"))
    return e;
  if (src.rank() != dst.rank() || src.rank() < 1)
    return failf("source {0} and destination {1} must have the same rank", src.str(), dst.str());
  if (src.shape[0] != idx.shape[0])
    return failf("source {0} has {1} rows but indices {2} has {3}", src.str(), src.shape[0],
                 idx.str(), idx.shape[0]);
  for (int64_t d = 1; d < dst.rank(); ++d)
    if (src.shape[d] != dst.shape[d])
      return failf("source row shape of {0} does not match destination {1}", src.str(), dst.str());
  if (isInteger(dst.dtype) != isInteger(src.dtype) || isQuantized(dst.dtype))
    return failf("cannot store {0} into {1}", dtypeName(src.dtype), dst.str());
  r.push_back(dst);
  return Error::success();
}

/// matmul(x [.., K], w [N, K]) -> f32[.., N]: y = x · wᵀ (w is [out, in]).
Error matmulRule(const OpSignature &s, SmallVectorImpl<TensorType> &r) {
  const TensorType &x = s.operands[0], &w = s.operands[1];
  if (auto e = expectReal(s, 0, "input"))
    return e;
  if (auto e = expectReal(s, 1, "weight"))
    return e;
  if (auto e = expectRank(s, 1, 2, "weight"))
    return e;
  if (x.rank() < 1 || x.shape.back() != w.shape[1])
    return failf("input {0} has {1} columns but weight {2} expects {3}", x.str(),
                 x.rowLength(), w.str(), w.shape[1]);
  Shape out(x.shape.begin(), x.shape.end() - 1);
  out.push_back(w.shape[0]);
  r.push_back({DType::F32, out});
  return Error::success();
}

/// matmul_id(x [T, X, K], w [E, N, K], ids [T, k]) -> f32[T, k, N]:
/// y[t, j] = x[t, X == 1 ? 0 : j] · w[ids[t, j]]ᵀ.
Error matmulIdRule(const OpSignature &s, SmallVectorImpl<TensorType> &r) {
  const TensorType &x = s.operands[0], &w = s.operands[1], &ids = s.operands[2];
  if (auto e = expectReal(s, 0, "input"))
    return e;
  if (auto e = expectReal(s, 1, "weights"))
    return e;
  if (auto e = expectIndex(s, 2, "ids"))
    return e;
  if (auto e = expectRank(s, 0, 3, "input"))
    return e;
  if (auto e = expectRank(s, 1, 3, "weights"))
    return e;
  if (auto e = expectRank(s, 2, 2, "ids"))
    return e;
  if (x.shape[0] != ids.shape[0])
    return failf("input {0} and ids {1} disagree on the token count", x.str(), ids.str());
  if (x.shape[1] != 1 && x.shape[1] != ids.shape[1])
    return failf("input {0} dim 1 must be 1 or k = {1}", x.str(), ids.shape[1]);
  if (x.shape[2] != w.shape[2])
    return failf("input {0} has {1} columns but weights {2} expect {3}", x.str(), x.shape[2],
                 w.str(), w.shape[2]);
  r.push_back({DType::F32, {x.shape[0], ids.shape[1], w.shape[1]}});
  return Error::success();
}

/// add_id(a [T, k, N], b [E, N], ids [T, k]) -> a: a[t, j] + b[ids[t, j]].
Error addIdRule(const OpSignature &s, SmallVectorImpl<TensorType> &r) {
  const TensorType &a = s.operands[0], &b = s.operands[1], &ids = s.operands[2];
  if (auto e = expectIndex(s, 2, "ids"))
    return e;
  if (auto e = expectRank(s, 0, 3, "input"))
    return e;
  if (auto e = expectRank(s, 1, 2, "bias"))
    return e;
  if (auto e = expectRank(s, 2, 2, "ids"))
    return e;
  if (a.shape[0] != ids.shape[0] || a.shape[1] != ids.shape[1] || a.shape[2] != b.shape[1])
    return failf("input {0}, bias {1} and ids {2} do not agree", a.str(), b.str(), ids.str());
  r.push_back({realResult(a.dtype), a.shape});
  return Error::success();
}

/// glu(gate, up) -> act(gate) · up, same shape.
Error gluRule(const OpSignature &s, SmallVectorImpl<TensorType> &r) {
  if (s.operands[0].shape != s.operands[1].shape)
    return failf("gate {0} and up {1} must have the same shape", s.operands[0].str(),
                 s.operands[1].str());
  return binaryRule(s, r);
}

Error normRule(const OpSignature &s, SmallVectorImpl<TensorType> &r) {
  if (s.operands[0].rank() < 1)
    return fail("operand must have rank >= 1");
  // rms_norm and layer_norm share this rule and their one attribute.
  static_assert(op::RmsNorm::epsIndex == op::LayerNorm::epsIndex);
  double eps = op::RmsNorm::attrsOf(s.attrs).eps();
  if (eps < 0)
    return failf("eps must be >= 0, got {0}", eps);
  return sameAsOperand0(s, r);
}

/// rope(x [T, H, D], pos [T], freq_factors [n_dims/2]?) -> x's shape.
Error ropeRule(const OpSignature &s, SmallVectorImpl<TensorType> &r) {
  const TensorType &x = s.operands[0];
  if (auto e = expectRank(s, 0, 3, "input"))
    return e;
  if (auto e = expectIndex(s, 1, "positions"))
    return e;
  if (auto e = expectRank(s, 1, 1, "positions"))
    return e;
  if (s.operands[1].shape[0] != x.shape[0])
    return failf("positions {0} must have one entry per token of {1}", s.operands[1].str(), x.str());
  int64_t nDims = op::Rope::attrsOf(s.attrs).nDims();
  if (nDims <= 0 || nDims % 2 || nDims > x.shape[2])
    return failf("n_dims = {0} must be even, positive and <= head dim {1}", nDims, x.shape[2]);
  if (s.operands.size() > 2) {
    const TensorType &ff = s.operands[2];
    if (ff.rank() != 1 || ff.shape[0] != nDims / 2 || !isFloat(ff.dtype))
      return failf("freq_factors must be a float vector of n_dims/2 = {0}, got {1}", nDims / 2,
                   ff.str());
  }
  return sameAsOperand0(s, r);
}

/// softmax(x, mask?) over the last dim of x·scale + slope·mask.
Error softmaxRule(const OpSignature &s, SmallVectorImpl<TensorType> &r) {
  if (s.operands.size() > 1 && !broadcastShapes(s.operands[0].shape, s.operands[1].shape))
    return failf("mask {0} does not broadcast to {1}", s.operands[1].str(), s.operands[0].str());
  if (s.operands.size() > 1 &&
      *broadcastShapes(s.operands[0].shape, s.operands[1].shape) != s.operands[0].shape)
    return failf("mask {0} is larger than input {1}", s.operands[1].str(), s.operands[0].str());
  return sameAsOperand0(s, r);
}

Error argsortRule(const OpSignature &s, SmallVectorImpl<TensorType> &r) {
  if (auto e = expectReal(s, 0, "operand"))
    return e;
  r.push_back({DType::I32, s.operands[0].shape});
  return Error::success();
}

/// top_k(x [.., C]) -> i32[.., k]: indices of the k largest, largest first
/// (ties: lower index first).
Error topKRule(const OpSignature &s, SmallVectorImpl<TensorType> &r) {
  if (auto e = expectReal(s, 0, "operand"))
    return e;
  int64_t k = op::TopK::attrsOf(s.attrs).k();
  if (k < 1 || k > s.operands[0].rowLength())
    return failf("k = {0} must be in [1, {1}]", k, s.operands[0].rowLength());
  Shape out = s.operands[0].shape;
  out.back() = k;
  r.push_back({DType::I32, out});
  return Error::success();
}

Error reduceRowRule(const OpSignature &s, SmallVectorImpl<TensorType> &r) {
  if (auto e = expectReal(s, 0, "operand"))
    return e;
  Shape out = s.operands[0].shape;
  if (out.empty())
    return fail("operand must have rank >= 1");
  out.back() = 1;
  r.push_back({realResult(s.operands[0].dtype), out});
  return Error::success();
}

Error concatRule(const OpSignature &s, SmallVectorImpl<TensorType> &r) {
  const TensorType &a = s.operands[0], &b = s.operands[1];
  int64_t axis = op::Concat::attrsOf(s.attrs).axis();
  if (a.rank() != b.rank() || axis < 0 || axis >= a.rank())
    return failf("cannot concatenate {0} and {1} along axis {2}", a.str(), b.str(), axis);
  for (int64_t d = 0; d < a.rank(); ++d)
    if (d != axis && a.shape[d] != b.shape[d])
      return failf("{0} and {1} differ outside axis {2}", a.str(), b.str(), axis);
  if (a.dtype != b.dtype)
    return failf("operand dtypes {0} and {1} differ", dtypeName(a.dtype), dtypeName(b.dtype));
  Shape out = a.shape;
  out[axis] += b.shape[axis];
  r.push_back({a.dtype, out});
  return Error::success();
}

bool allPositive(ArrayRef<int64_t> shape) {
  for (int64_t d : shape)
    if (d <= 0)
      return false;
  return true;
}

/// repeat(x) {shape}: tiles x; every target dim is a multiple of x's.
Error repeatRule(const OpSignature &s, SmallVectorImpl<TensorType> &r) {
  ArrayRef<int64_t> shape = op::Repeat::attrsOf(s.attrs).shape();
  const TensorType &x = s.operands[0];
  if (static_cast<int64_t>(shape.size()) != x.rank() || !allPositive(shape))
    return failf("repeat shape {0} must be positive with x's rank {1}", shapeStr(shape), x.rank());
  for (int64_t d = 0; d < x.rank(); ++d)
    if (x.shape[d] == 0 || shape[d] % x.shape[d])
      return failf("repeat shape {0} is not a multiple of {1}", shapeStr(shape), x.str());
  r.push_back({x.dtype, Shape(shape.begin(), shape.end())});
  return Error::success();
}

/// The product of `v`, or -1 when it overflows int64.
int64_t product(ArrayRef<int64_t> v) {
  int64_t n = 1;
  for (int64_t d : v)
    if (__builtin_mul_overflow(n, d, &n))
      return -1;
  return n;
}

Error reshapeRule(const OpSignature &s, SmallVectorImpl<TensorType> &r) {
  ArrayRef<int64_t> shape = op::Reshape::attrsOf(s.attrs).shape();
  if (!allPositive(shape) || product(shape) != s.operands[0].numElements())
    return failf("cannot reshape {0} to {1}", s.operands[0].str(), shapeStr(shape));
  r.push_back({s.operands[0].dtype, Shape(shape.begin(), shape.end())});
  return Error::success();
}

/// view(x) {shape, strides, offset}: element [i..] = x_flat[offset + Σ i_d·strides_d],
/// where x_flat is x in row-major order. Every element read must lie inside x.
Error viewRule(const OpSignature &s, SmallVectorImpl<TensorType> &r) {
  op::View view = op::View::attrsOf(s.attrs);
  ArrayRef<int64_t> shape = view.shape(), strides = view.strides();
  int64_t offset = view.offset();
  if (shape.size() != strides.size())
    return failf("view shape {0} and strides {1} differ in rank", shapeStr(shape),
                 shapeStr(strides));
  if (!allPositive(shape))
    return failf("view shape {0} must be positive", shapeStr(shape));
  int64_t lo = offset, hi = offset;
  for (size_t d = 0; d < shape.size(); ++d) {
    int64_t span = 0;
    if (__builtin_mul_overflow(shape[d] - 1, strides[d], &span) ||
        __builtin_add_overflow(span < 0 ? lo : hi, span, span < 0 ? &lo : &hi))
      return failf("view strides {0} overflow", shapeStr(strides));
  }
  if (lo < 0 || hi >= s.operands[0].numElements())
    return failf("view reads elements [{0}, {1}] outside {2}", lo, hi, s.operands[0].str());
  if (isQuantized(s.operands[0].dtype))
    return failf("cannot view block-quantised {0}", s.operands[0].str());
  r.push_back({s.operands[0].dtype, Shape(shape.begin(), shape.end())});
  return Error::success();
}

/// permute(x) {perm}: result dim i is x's dim perm[i].
Error permuteRule(const OpSignature &s, SmallVectorImpl<TensorType> &r) {
  const TensorType &x = s.operands[0];
  ArrayRef<int64_t> perm = op::Permute::attrsOf(s.attrs).perm();
  if (static_cast<int64_t>(perm.size()) != x.rank())
    return failf("perm {0} must have x's rank {1}", shapeStr(perm), x.rank());
  llvm::SmallVector<bool, 4> seen(perm.size(), false);
  Shape out;
  for (int64_t p : perm) {
    if (p < 0 || p >= x.rank() || seen[p])
      return failf("perm {0} is not a permutation", shapeStr(perm));
    seen[p] = true;
    out.push_back(x.shape[p]);
  }
  r.push_back({x.dtype, out});
  return Error::success();
}

Error transposeRule(const OpSignature &s, SmallVectorImpl<TensorType> &r) {
  const TensorType &x = s.operands[0];
  if (x.rank() < 2)
    return failf("transpose needs rank >= 2, got {0}", x.str());
  Shape out = x.shape;
  std::swap(out[out.size() - 1], out[out.size() - 2]);
  r.push_back({x.dtype, out});
  return Error::success();
}

Error contRule(const OpSignature &s, SmallVectorImpl<TensorType> &r) {
  r.push_back(s.operands[0]);
  return Error::success();
}

Error convertRule(const OpSignature &s, SmallVectorImpl<TensorType> &r) {
  DType to = op::Convert::attrsOf(s.attrs).dtype();
  if (isQuantized(to))
    return failf("cannot convert to block-quantised {0}", dtypeName(to));
  r.push_back({to, s.operands[0].shape});
  return Error::success();
}

/// attention(q [T, Hq, D], k [ctx, Hkv, D], v [ctx, Hkv, Dv], pos [T], sinks [Hq]?)
///   -> f32[T, Hq, Dv]. Query t sees rows j <= pos[t] (and j > pos[t] - window).
Error attentionRule(const OpSignature &s, SmallVectorImpl<TensorType> &r) {
  const TensorType &q = s.operands[0], &k = s.operands[1], &v = s.operands[2],
                   &pos = s.operands[3];
  for (unsigned i = 0; i < 3; ++i)
    if (auto e = expectRank(s, i, 3, i == 0 ? "q" : i == 1 ? "k cache" : "v cache"))
      return e;
  if (auto e = expectIndex(s, 3, "positions"))
    return e;
  if (pos.rank() != 1 || pos.shape[0] != q.shape[0])
    return failf("positions {0} must have one entry per query token of {1}", pos.str(), q.str());
  if (k.shape[0] != v.shape[0] || k.shape[1] != v.shape[1])
    return failf("k cache {0} and v cache {1} disagree", k.str(), v.str());
  if (q.shape[2] != k.shape[2])
    return failf("q head dim {0} != k head dim {1}", q.shape[2], k.shape[2]);
  if (q.shape[1] % k.shape[1])
    return failf("{0} query heads are not a multiple of {1} kv heads", q.shape[1], k.shape[1]);
  if (op::Attention::attrsOf(s.attrs).window() < 0 || op::Attention::attrsOf(s.attrs).softcap() < 0)
    return fail("window and softcap must be >= 0");
  if (s.operands.size() > 4 &&
      (s.operands[4].rank() != 1 || s.operands[4].shape[0] != q.shape[1]))
    return failf("sinks {0} must hold one logit per query head ({1})", s.operands[4].str(),
                 q.shape[1]);
  r.push_back({DType::F32, {q.shape[0], q.shape[1], v.shape[2]}});
  return Error::success();
}

// --- costs ---------------------------------------------------------------------

/// Bytes of `rows` of the leading dim of `t` (at most all of them).
double rowsBytes(const TensorType &t, double rows) {
  if (t.shape.empty() || t.shape[0] <= 0)
    return static_cast<double>(t.bytes());
  double all = static_cast<double>(t.shape[0]);
  return std::min(rows, all) * static_cast<double>(t.bytes()) / all;
}

/// A view moves no data.
void viewCost(const OpSignature &, ArrayRef<TensorType>, const CostContext &, Cost &c) {
  std::fill(c.operandBytes.begin(), c.operandBytes.end(), 0.0);
  c.flops = c.resultBytes = 0;
}

void matmulCost(const OpSignature &s, ArrayRef<TensorType> res, const CostContext &, Cost &c) {
  double k = static_cast<double>(s.operands[0].rowLength());
  c.flops = 2 * k * static_cast<double>(res[0].numElements());
}

/// Only the selected experts of the weights are read.
void matmulIdCost(const OpSignature &s, ArrayRef<TensorType> res, const CostContext &, Cost &c) {
  const TensorType &w = s.operands[1];
  c.flops = 2 * static_cast<double>(w.shape[2]) * static_cast<double>(res[0].numElements());
  c.operandBytes[1] = rowsBytes(w, static_cast<double>(s.operands[2].numElements()));
}

/// Only the selected experts' biases are read.
void addIdCost(const OpSignature &s, ArrayRef<TensorType>, const CostContext &, Cost &c) {
  c.operandBytes[1] = rowsBytes(s.operands[1], static_cast<double>(s.operands[2].numElements()));
}

/// Only the indexed rows of the table are read.
void getRowsCost(const OpSignature &s, ArrayRef<TensorType>, const CostContext &, Cost &c) {
  c.operandBytes[0] = rowsBytes(s.operands[0], static_cast<double>(s.operands[1].numElements()));
}

/// kvRows rows of each cache (every row when unknown).
void attentionCost(const OpSignature &s, ArrayRef<TensorType> res, const CostContext &ctx,
                   Cost &c) {
  const TensorType &q = s.operands[0], &k = s.operands[1];
  double rows = static_cast<double>(k.shape[0]);
  if (ctx.kvRows > 0)
    rows = std::min(rows, static_cast<double>(ctx.kvRows));
  c.flops = 2 * rows * static_cast<double>(q.numElements() + res[0].numElements());
  c.operandBytes[1] = rowsBytes(s.operands[1], rows);
  c.operandBytes[2] = rowsBytes(s.operands[2], rows);
}

/// set_rows touches only the rows it writes (on operand 0); its result is
/// that same buffer.
void setRowsCost(const OpSignature &s, ArrayRef<TensorType>, const CostContext &, Cost &c) {
  const TensorType &src = s.operands[1], &dst = s.operands[0];
  c.flops = static_cast<double>(src.numElements());
  c.operandBytes[0] = storageBytes(dst.dtype, src.numElements());
  c.resultBytes = 0;
}

// --- the table ----------------------------------------------------------------

// --- fused ops: rows whose semantics is their decomposition (ir/Decomposition.h) ---

template <OpKind K> Error fusedRule(const OpSignature &s, SmallVectorImpl<TensorType> &r) {
  return inferFusedTypes(K, s, r);
}
template <OpKind K>
void fusedCostRule(const OpSignature &s, ArrayRef<TensorType> res, const CostContext &ctx,
                   Cost &c) {
  c = fusedCost(K, s, res, ctx);
}

// --- the table: every line of ir/Ops.def ------------------------------------------

template <typename T> AttrSpec attrSpec(std::string_view name, bool required, T dflt) {
  return {name, AttrTraits<T>::kKind, required, AttrTraits<T>::make(dflt),
          AttrTraits<T>::words()};
}

/// One attribute line: the op it belongs to and its declaration.
struct AttrLine {
  OpKind op;
  AttrSpec spec;
};
const AttrLine kAttrLines[] = {
#define FG_ATTR(Kind, accessor, name, Type, dflt)                                                  \
  {OpKind::Kind, attrSpec<Type>(name, false, dflt)},
#define FG_ATTR_REQ(Kind, accessor, name, Type)                                                    \
  {OpKind::Kind, attrSpec<Type>(name, true, typename AttrTraits<Type>::Value{})},
#include "ir/Ops.def"
};

/// One operand line.
struct OperandLine {
  OpKind op;
  std::string_view name;
  bool optional;
};
constexpr OperandLine kOperandLines[] = {
#define FG_OPERAND(Kind, accessor, name) {OpKind::Kind, name, false},
#define FG_OPTIONAL(Kind, accessor, name) {OpKind::Kind, name, true},
#include "ir/Ops.def"
};

/// One op line.
struct OpLine {
  OpKind kind;
  std::string_view mnemonic;
  unsigned traits;
  TypeRule rule;
  CostRule cost;
  unsigned numResults;
  std::string_view decomposition;
};
const OpLine kOpLines[] = {
#define FG_OP(Kind, mnemonic, traits, typeRule, costRule)                                          \
  {OpKind::Kind, mnemonic, traits, typeRule, costRule, 1, {}},
#define FG_FUSED_OP(Kind, mnemonic, traits, numResults, decomposition)                             \
  {OpKind::Kind,                                                                                   \
   mnemonic,                                                                                       \
   (traits) | kFused,                                                                              \
   fusedRule<OpKind::Kind>,                                                                        \
   fusedCostRule<OpKind::Kind>,                                                                    \
   numResults,                                                                                     \
   decomposition},
#include "ir/Ops.def"
};

/// Required operands come first: an optional operand is never followed by a
/// required one (a node drops absent trailing operands).
constexpr bool optionalOperandsTrail() {
  for (size_t i = 1; i < std::size(kOperandLines); ++i)
    if (kOperandLines[i].op == kOperandLines[i - 1].op && kOperandLines[i - 1].optional &&
        !kOperandLines[i].optional)
      return false;
  return true;
}
static_assert(optionalOperandsTrail(), "ir/Ops.def: optional operands must trail");

/// The rows assembled from the lines: each op's operands and attributes are the
/// contiguous lines that follow it in ir/Ops.def.
struct Table {
  OpInfo rows[std::size(kOpLines)];
  std::string_view operandNames[std::size(kOperandLines)];
  AttrSpec attrs[std::size(kAttrLines)];
  Table() {
    for (size_t i = 0; i < std::size(kOperandLines); ++i)
      operandNames[i] = kOperandLines[i].name;
    for (size_t i = 0; i < std::size(kAttrLines); ++i)
      attrs[i] = kAttrLines[i].spec;
    size_t nextOperand = 0, nextAttr = 0;
    for (size_t i = 0; i < std::size(kOpLines); ++i) {
      const OpLine &l = kOpLines[i];
      assert(static_cast<size_t>(l.kind) == i && "the OpKind enum follows ir/Ops.def");
      size_t firstOperand = nextOperand, numOptional = 0;
      while (nextOperand < std::size(kOperandLines) && kOperandLines[nextOperand].op == l.kind)
        numOptional += kOperandLines[nextOperand++].optional;
      size_t firstAttr = nextAttr;
      while (nextAttr < std::size(kAttrLines) && kAttrLines[nextAttr].op == l.kind)
        ++nextAttr;
      rows[i] = OpInfo{l.kind,
                       l.mnemonic,
                       llvm::ArrayRef(operandNames + firstOperand, nextOperand - firstOperand),
                       static_cast<unsigned>(numOptional),
                       l.numResults,
                       l.traits,
                       llvm::ArrayRef(attrs + firstAttr, nextAttr - firstAttr),
                       l.rule,
                       l.cost,
                       l.decomposition};
    }
    assert(nextOperand == std::size(kOperandLines) && nextAttr == std::size(kAttrLines) &&
           "every operand and attribute line of ir/Ops.def follows its op");
  }
};

const Table &table() {
  static const Table t;
  return t;
}

} // namespace

std::optional<unsigned> OpInfo::findAttr(std::string_view name) const {
  for (unsigned i = 0; i < attrs.size(); ++i)
    if (attrs[i].name == name)
      return i;
  return std::nullopt;
}

const OpInfo &opInfo(OpKind kind) { return table().rows[static_cast<size_t>(kind)]; }

llvm::ArrayRef<OpInfo> allOps() { return table().rows; }

std::optional<OpKind> lookupOp(std::string_view m) {
  for (const OpInfo &row : allOps())
    if (row.mnemonic == m)
      return row.kind;
  return std::nullopt;
}

AttrList defaultAttrs(OpKind kind) {
  AttrList out;
  for (const AttrSpec &spec : opInfo(kind).attrs)
    out.push_back(spec.dflt);
  return out;
}

std::optional<Shape> broadcastShapes(llvm::ArrayRef<int64_t> a, llvm::ArrayRef<int64_t> b) {
  size_t n = std::max(a.size(), b.size());
  Shape out(n, 1);
  for (size_t i = 0; i < n; ++i) {
    int64_t da = i < n - a.size() ? 1 : a[i - (n - a.size())];
    int64_t db = i < n - b.size() ? 1 : b[i - (n - b.size())];
    if (da != db && da != 1 && db != 1)
      return std::nullopt;
    out[i] = da == 1 ? db : da;
  }
  return out;
}

llvm::Error inferResultTypes(OpKind kind, llvm::ArrayRef<TensorType> operands,
                             llvm::ArrayRef<Attribute> attrs,
                             llvm::SmallVectorImpl<TensorType> &results) {
  const OpInfo &info = opInfo(kind);
  if (operands.size() < info.minOperands() || operands.size() > info.maxOperands()) {
    std::string want = std::to_string(info.minOperands());
    if (info.numOptional)
      want += " to " + std::to_string(info.maxOperands());
    return fail(llvm::formatv("'{0}' expects {1} operand(s), got {2}", info.mnemonic, want,
                              operands.size())
                    .str());
  }
  assert(attrs.size() == info.attrs.size() && "nodes carry every declared attribute");
  for (const TensorType &t : operands)
    for (int64_t d : t.shape)
      if (d < 0)
        return fail(llvm::formatv("'{0}': negative dimension in {1}", info.mnemonic, t.str()).str());
  if (llvm::Error e = info.inferTypes(OpSignature{operands, attrs}, results))
    return fail(llvm::formatv("'{0}': {1}", info.mnemonic, llvm::toString(std::move(e))).str());
  return llvm::Error::success();
}

Cost opCost(OpKind kind, llvm::ArrayRef<TensorType> operands, llvm::ArrayRef<Attribute> attrs,
            llvm::ArrayRef<TensorType> results, const CostContext &ctx) {
  const OpInfo &info = opInfo(kind);
  // The default: 1 flop per result element, every operand and result whole.
  Cost c;
  for (const TensorType &t : operands)
    c.operandBytes.push_back(static_cast<double>(t.bytes()));
  for (const TensorType &t : results) {
    c.flops += static_cast<double>(t.numElements());
    c.resultBytes += static_cast<double>(t.bytes());
  }
  if (info.cost)
    info.cost(OpSignature{operands, attrs}, results, ctx, c);
  assert(c.operandBytes.size() == operands.size() && "one byte count per operand");
  c.bytes = c.resultBytes;
  for (double b : c.operandBytes)
    c.bytes += b;
  return c;
}

} // namespace fg
