//===- Ops.cpp - the reference semantics of every op -----------------------===//
//
// One eval function per op of ir/Ops.def, dispatched through the same list,
// so an op without a reference does not compile. Real operands are read as
// f32 (dequantised), arithmetic runs in f32 with f64 accumulation for dot
// products and reductions, and each result is stored in its own dtype.
// Data-movement ops (views, concat, repeat, gathers of integer tables) move
// bytes, so integers and f16 values are never rounded through f32.
//
//===----------------------------------------------------------------------===//
#include "runtime/reference/Eval.h"

#include "ir/Numeric.h"
#include "ir/Quantize.h"
#include "ir/OpViews.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/Support/FormatVariadic.h"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <cstring>
#include <numbers>
#include <numeric>

namespace fg {
namespace {

using llvm::ArrayRef;
using llvm::Error;
using llvm::SmallVector;

Error fail(const llvm::Twine &msg) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(), msg);
}

template <typename... Ts> Error failf(const char *fmt, Ts &&...vals) {
  return fail(llvm::formatv(fmt, std::forward<Ts>(vals)...).str());
}

int64_t product(ArrayRef<int64_t> v) {
  int64_t n = 1;
  for (int64_t d : v)
    n *= d;
  return n;
}

/// Calls fn(index, flat) for every index of `shape` in row-major order.
template <typename Fn> void forEachIndex(ArrayRef<int64_t> shape, Fn fn) {
  int64_t n = product(shape);
  SmallVector<int64_t, 6> idx(shape.size(), 0);
  for (int64_t flat = 0; flat < n; ++flat) {
    fn(ArrayRef<int64_t>(idx), flat);
    for (int64_t d = static_cast<int64_t>(shape.size()) - 1; d >= 0; --d) {
      if (++idx[d] < shape[d])
        break;
      idx[d] = 0;
    }
  }
}

/// Strides (elements) of `in` aligned to the trailing dims of `out`, 0 where
/// `in` broadcasts (numpy rules; the type rule already checked they agree).
Shape broadcastStrides(ArrayRef<int64_t> in, ArrayRef<int64_t> out) {
  Shape s(out.size(), 0);
  Shape inStrides = contiguousStrides(in);
  size_t lead = out.size() - in.size();
  for (size_t d = 0; d < in.size(); ++d)
    s[lead + d] = in[d] == 1 ? 0 : inStrides[d];
  return s;
}

int64_t dot(ArrayRef<int64_t> idx, ArrayRef<int64_t> strides) {
  int64_t off = 0;
  for (size_t d = 0; d < idx.size(); ++d)
    off += idx[d] * strides[d];
  return off;
}

/// Bytes of one element of a scalar dtype.
int64_t elemBytes(DType t) {
  assert(!isQuantized(t) && "block types have no per-element size");
  return dtypeInfo(t).blockBytes;
}

/// Decodes elements [start, start + count) of `t` into out; for block types
/// both must be whole blocks.
Error decodeRange(const HostTensor &t, int64_t start, int64_t count, float *out) {
  int64_t block = dtypeInfo(t.type.dtype).blockElems;
  if (start % block || count % block)
    return failf("cannot read elements [{0}, {1}) of {2}: not whole {3}-element blocks", start,
                 start + count, t.type.str(), block);
  decodeRow(t.type.dtype, t.data.data() + storageBytes(t.type.dtype, start), out, count);
  return Error::success();
}

/// The node, its operands and where its results go.
struct Ctx {
  const Node &node;
  ArrayRef<const HostTensor *> ops;
  SmallVector<TensorType, 1> types; ///< result types, from the op's type rule
  llvm::SmallVectorImpl<HostTensor> &results;
  ActQuant act = ActQuant::Exact; ///< how the node's GEMVs read x (matmul, matmul_id)

  const HostTensor &op(unsigned i) const { return *ops[i]; }
  bool has(unsigned i) const { return i < ops.size(); }
  const TensorType &type() const { return types[0]; }

  std::vector<float> floats(unsigned i) const { return op(i).toFloats(); }
  std::vector<int64_t> ints(unsigned i) const { return op(i).toInts(); }

  /// Stores f32 values as the (first) result, encoded in its dtype.
  Error emit(ArrayRef<float> values) {
    if (isQuantized(type().dtype))
      return failf("cannot produce block-quantised {0}", type().str());
    results.push_back(HostTensor::fromFloats(type(), values));
    return Error::success();
  }
  Error emit(HostTensor t) {
    assert(t.type == type() && "eval produced the wrong type");
    results.push_back(std::move(t));
    return Error::success();
  }
};

/// Integer indices with a range check; `what` names the operand in errors.
Error checkIndex(int64_t i, int64_t bound, llvm::StringRef what, int64_t where) {
  if (i < 0 || i >= bound)
    return failf("{0}[{1}] = {2} is out of range [0, {3})", what, where, i, bound);
  return Error::success();
}

/// out element e = x element src(e) for scalar dtypes, moving bytes.
template <typename SrcFn> Error gatherBytes(Ctx &c, const HostTensor &x, SrcFn src) {
  if (isQuantized(x.type.dtype))
    return failf("the reference cannot rearrange elements of block-quantised {0}", x.type.str());
  int64_t eb = elemBytes(x.type.dtype);
  HostTensor out = HostTensor::zeros(c.type());
  forEachIndex(c.type().shape, [&](ArrayRef<int64_t> idx, int64_t flat) {
    std::memcpy(out.data.data() + flat * eb, x.data.data() + src(idx) * eb, eb);
  });
  return c.emit(std::move(out));
}

// --- gathers and scatters -------------------------------------------------------

Error evalGetRows(Ctx &c) {
  const HostTensor &table = c.op(0);
  std::vector<int64_t> idx = c.ints(1);
  ArrayRef<int64_t> ts = table.type.shape;
  int64_t batch = c.op(1).type.rank() - 1;
  int64_t rows = ts[batch], cols = product(ts.drop_front(batch + 1));
  int64_t n = c.op(1).type.rowLength(), nb = product(ts.take_front(batch));
  for (size_t i = 0; i < idx.size(); ++i)
    if (Error e = checkIndex(idx[i], rows, "indices", static_cast<int64_t>(i)))
      return e;
  if (isInteger(table.type.dtype)) {
    int64_t eb = elemBytes(table.type.dtype);
    HostTensor out = HostTensor::zeros(c.type());
    for (int64_t b = 0; b < nb; ++b)
      for (int64_t j = 0; j < n; ++j)
        std::memcpy(out.data.data() + (b * n + j) * cols * eb,
                    table.data.data() + (b * rows + idx[b * n + j]) * cols * eb, cols * eb);
    return c.emit(std::move(out));
  }
  std::vector<float> out(static_cast<size_t>(nb * n * cols));
  for (int64_t b = 0; b < nb; ++b)
    for (int64_t j = 0; j < n; ++j)
      if (Error e = decodeRange(table, (b * rows + idx[b * n + j]) * cols, cols,
                                out.data() + (b * n + j) * cols))
        return e;
  return c.emit(out);
}

Error evalSetRows(Ctx &c) {
  HostTensor dst = c.op(0);
  if (Error e = ref::setRowsInPlace(dst, c.op(1), c.op(2)))
    return e;
  return c.emit(std::move(dst));
}

// --- matmuls --------------------------------------------------------------------

/// out[m, n] = Σ_k x[m, k] · w[n, k] with f64 accumulation, w decoded a row
/// at a time. `act` Int8 (or Int8NormDeferred: its caller has x·norm_w here)
/// over weights whose GEMV quantises x (quantizesActivations): each x row as
/// the DP4A kernels read it, x̂ = dx·xq per 32 (quantizeActivationsInt8), and
/// q4_K's and q5_K's mins (dmin·m) against the exact x, as kernels/gemv_dp4a.cuh
/// and kernels/moe_i8.cuh compute
/// Σ w·x: every integer dot there is exact, so only f32 rounding differs.
Error matmulRows(const float *x, int64_t m, const HostTensor &w, int64_t wRow0, int64_t n,
                 int64_t k, float *out, int64_t outStride, ActQuant act = ActQuant::Exact) {
  const DType wt = w.type.dtype;
  const bool int8 = act != ActQuant::Exact && quantizesActivations(wt);
  if (int8 && k % 32)
    return failf("int8 activations take whole blocks of 32, not K = {0}", k);
  // With int8 x, `mins` holds q4_K's / q5_K's dmin·m (zero for the other types).
  std::vector<float> row(static_cast<size_t>(k)), mins(int8 ? static_cast<size_t>(k) : 0);
  std::vector<double> xhat; // m rows of dx·xq
  if (int8) {
    xhat.resize(static_cast<size_t>(m * k));
    std::vector<int8_t> xq(static_cast<size_t>(k));
    std::vector<float> dx(static_cast<size_t>(k / 32));
    for (int64_t i = 0; i < m; ++i) {
      quantizeActivationsInt8(x + i * k, k, xq.data(), dx.data());
      for (int64_t l = 0; l < k; ++l)
        xhat[i * k + l] = static_cast<double>(dx[l / 32]) * xq[l];
    }
  }
  for (int64_t j = 0; j < n; ++j) {
    if (int8 && (wt == DType::Q4_K || wt == DType::Q5_K)) {
      if ((wRow0 + j) * k % 256 || k % 256)
        return failf("cannot read {0} row {1} of {2} elements: not whole 256-blocks",
                     dtypeName(wt), wRow0 + j, k);
      decodeKQuantParts(wt, w.data.data() + storageBytes(wt, (wRow0 + j) * k), row.data(),
                        mins.data(), k);
    } else if (Error e = decodeRange(w, (wRow0 + j) * k, k, row.data())) {
      return e;
    }
    for (int64_t i = 0; i < m; ++i) {
      const float *xr = x + i * k;
      double acc = 0;
      if (!int8)
        for (int64_t l = 0; l < k; ++l)
          acc += static_cast<double>(xr[l]) * row[l];
      else
        for (int64_t l = 0; l < k; ++l)
          acc += xhat[i * k + l] * row[l] - static_cast<double>(xr[l]) * mins[l];
      out[i * outStride + j] = static_cast<float>(acc);
    }
  }
  return Error::success();
}

Error evalMatMul(Ctx &c) {
  std::vector<float> x = c.floats(0);
  const HostTensor &w = c.op(1);
  int64_t n = w.type.shape[0], k = w.type.shape[1];
  int64_t m = k ? static_cast<int64_t>(x.size()) / k : 0;
  std::vector<float> out(static_cast<size_t>(m * n));
  if (Error e = matmulRows(x.data(), m, w, 0, n, k, out.data(), n, c.act))
    return e;
  return c.emit(out);
}

Error evalMatMulId(Ctx &c) {
  std::vector<float> x = c.floats(0);
  const HostTensor &w = c.op(1);
  std::vector<int64_t> ids = c.ints(2);
  int64_t t = c.op(0).type.shape[0], xRows = c.op(0).type.shape[1];
  int64_t experts = w.type.shape[0], n = w.type.shape[1], k = w.type.shape[2];
  int64_t kSel = c.op(2).type.shape[1];
  std::vector<float> out(static_cast<size_t>(t * kSel * n));
  // The (token, slot) pairs of each expert, so that its rows are decoded
  // once for all of them (a prefill chunk gives an expert dozens of pairs;
  // one decode a pair made the GPU tests' references take minutes). Each
  // output is the same sum over the same k order either way.
  std::vector<std::vector<int64_t>> pairsOf(static_cast<size_t>(experts));
  for (int64_t p = 0; p < t * kSel; ++p) {
    if (Error err = checkIndex(ids[p], experts, "ids", p))
      return err;
    pairsOf[ids[p]].push_back(p);
  }
  std::vector<float> xs, ys;
  for (int64_t e = 0; e < experts; ++e) {
    const std::vector<int64_t> &pairs = pairsOf[e];
    if (pairs.empty())
      continue;
    const int64_t m = static_cast<int64_t>(pairs.size());
    xs.resize(static_cast<size_t>(m * k));
    ys.resize(static_cast<size_t>(m * n));
    for (int64_t i = 0; i < m; ++i) {
      const int64_t ti = pairs[i] / kSel, j = pairs[i] % kSel;
      const float *xr = x.data() + (ti * xRows + (xRows == 1 ? 0 : j)) * k;
      std::copy(xr, xr + k, xs.begin() + i * k);
    }
    if (Error err = matmulRows(xs.data(), m, w, e * n, n, k, ys.data(), n, c.act))
      return err;
    for (int64_t i = 0; i < m; ++i)
      std::copy(ys.begin() + i * n, ys.begin() + (i + 1) * n, out.begin() + pairs[i] * n);
  }
  return c.emit(out);
}

// --- elementwise ------------------------------------------------------------------

template <typename Fn> Error binary(Ctx &c, Fn fn) {
  ArrayRef<int64_t> out = c.type().shape;
  Shape sa = broadcastStrides(c.op(0).type.shape, out);
  Shape sb = broadcastStrides(c.op(1).type.shape, out);
  if (isInteger(c.type().dtype)) {
    std::vector<int64_t> a = c.ints(0), b = c.ints(1), r(static_cast<size_t>(product(out)));
    bool divByZero = false;
    forEachIndex(out, [&](ArrayRef<int64_t> idx, int64_t flat) {
      int64_t x = a[dot(idx, sa)], y = b[dot(idx, sb)];
      if (c.node.kind == OpKind::Div && y == 0) {
        divByZero = true;
        return;
      }
      r[flat] = c.node.kind == OpKind::Add   ? x + y
                : c.node.kind == OpKind::Sub ? x - y
                : c.node.kind == OpKind::Mul ? x * y
                                             : x / y;
    });
    if (divByZero)
      return fail("integer division by zero");
    return c.emit(HostTensor::fromInts(c.type(), r));
  }
  std::vector<float> a = c.floats(0), b = c.floats(1), r(static_cast<size_t>(product(out)));
  forEachIndex(out, [&](ArrayRef<int64_t> idx, int64_t flat) {
    r[flat] = fn(a[dot(idx, sa)], b[dot(idx, sb)]);
  });
  return c.emit(r);
}

Error evalAdd(Ctx &c) {
  return binary(c, [](float a, float b) { return a + b; });
}
Error evalSub(Ctx &c) {
  return binary(c, [](float a, float b) { return a - b; });
}
Error evalMul(Ctx &c) {
  return binary(c, [](float a, float b) { return a * b; });
}
Error evalDiv(Ctx &c) {
  return binary(c, [](float a, float b) { return a / b; });
}

Error evalAddId(Ctx &c) {
  std::vector<float> a = c.floats(0), b = c.floats(1);
  std::vector<int64_t> ids = c.ints(2);
  int64_t experts = c.op(1).type.shape[0], n = c.op(1).type.shape[1];
  for (size_t r = 0; r < ids.size(); ++r) {
    if (Error e = checkIndex(ids[r], experts, "ids", static_cast<int64_t>(r)))
      return e;
    for (int64_t j = 0; j < n; ++j)
      a[r * n + j] += b[ids[r] * n + j];
  }
  return c.emit(a);
}

template <typename Fn> Error unary(Ctx &c, Fn fn) {
  std::vector<float> x = c.floats(0);
  for (float &v : x)
    v = static_cast<float>(fn(static_cast<double>(v)));
  return c.emit(x);
}

double sigmoid(double x) { return 1.0 / (1.0 + std::exp(-x)); }
double silu(double x) { return x * sigmoid(x); }
double geluTanh(double x) {
  const double k = std::sqrt(2.0 / std::numbers::pi);
  return 0.5 * x * (1.0 + std::tanh(k * (x + 0.044715 * x * x * x)));
}

Error evalScale(Ctx &c) {
  op::Scale v(c.node);
  double s = v.scale(), b = v.bias();
  return unary(c, [&](double x) { return x * s + b; });
}
Error evalClamp(Ctx &c) {
  double lo = op::Clamp(c.node).min(), hi = op::Clamp(c.node).max();
  return unary(c, [&](double x) { return std::max(std::min(x, hi), lo); });
}
Error evalSqrt(Ctx &c) {
  return unary(c, [](double x) { return std::sqrt(x); });
}
Error evalSqr(Ctx &c) {
  return unary(c, [](double x) { return x * x; });
}
Error evalExp(Ctx &c) {
  return unary(c, [](double x) { return std::exp(x); });
}
Error evalTanh(Ctx &c) {
  return unary(c, [](double x) { return std::tanh(x); });
}
Error evalSigmoid(Ctx &c) { return unary(c, sigmoid); }
Error evalSilu(Ctx &c) { return unary(c, silu); }
Error evalGelu(Ctx &c) { return unary(c, geluTanh); }
Error evalRelu(Ctx &c) {
  return unary(c, [](double x) { return x > 0 ? x : 0.0; });
}
Error evalSoftplus(Ctx &c) {
  return unary(c, [](double x) { return x > 20 ? x : std::log1p(std::exp(x)); });
}
Error evalNeg(Ctx &c) {
  return unary(c, [](double x) { return -x; });
}

Error evalGlu(Ctx &c) {
  std::vector<float> g = c.floats(0), u = c.floats(1);
  op::Glu v(c.node);
  GluKind kind = v.kind();
  double alpha = v.alpha(), limit = v.limit();
  for (size_t i = 0; i < g.size(); ++i) {
    double gv = g[i], uv = u[i], y = 0;
    switch (kind) {
    case GluKind::SwiGLU:
      y = silu(gv) * uv;
      break;
    case GluKind::GeGLU:
      y = geluTanh(gv) * uv;
      break;
    case GluKind::SwiGLUOAI: {
      double gc = std::min(gv, limit), uc = std::clamp(uv, -limit, limit);
      y = gc * sigmoid(alpha * gc) * (uc + 1.0);
      break;
    }
    case GluKind::SwiGLUClamp: {
      double gc = std::min(gv, limit), uc = std::clamp(uv, -limit, limit);
      y = silu(gc) * uc;
      break;
    }
    }
    g[i] = static_cast<float>(y);
  }
  return c.emit(g);
}

// --- row-wise ---------------------------------------------------------------------

template <typename Fn> Error perRow(Ctx &c, Fn fn) {
  std::vector<float> x = c.floats(0);
  int64_t n = c.op(0).type.rowLength();
  for (int64_t r = 0, e = n ? static_cast<int64_t>(x.size()) / n : 0; r < e; ++r)
    fn(x.data() + r * n, n);
  return c.emit(x);
}

Error evalRmsNorm(Ctx &c) {
  double eps = op::RmsNorm(c.node).eps();
  return perRow(c, [&](float *row, int64_t n) {
    double ss = 0;
    for (int64_t i = 0; i < n; ++i)
      ss += static_cast<double>(row[i]) * row[i];
    double r = 1.0 / std::sqrt(ss / static_cast<double>(n) + eps);
    for (int64_t i = 0; i < n; ++i)
      row[i] = static_cast<float>(row[i] * r);
  });
}

Error evalLayerNorm(Ctx &c) {
  double eps = op::LayerNorm(c.node).eps();
  return perRow(c, [&](float *row, int64_t n) {
    double sum = 0;
    for (int64_t i = 0; i < n; ++i)
      sum += row[i];
    double mean = sum / static_cast<double>(n), var = 0;
    for (int64_t i = 0; i < n; ++i)
      var += (row[i] - mean) * (row[i] - mean);
    double r = 1.0 / std::sqrt(var / static_cast<double>(n) + eps);
    for (int64_t i = 0; i < n; ++i)
      row[i] = static_cast<float>((row[i] - mean) * r);
  });
}

/// ggml's rope with YaRN (FUSIONS.md F13, step 3), in f64.
Error evalRope(Ctx &c) {
  std::vector<float> x = c.floats(0);
  std::vector<int64_t> pos = c.ints(1);
  std::vector<float> ff = c.has(2) ? c.floats(2) : std::vector<float>();
  op::Rope nd(c.node);
  RopeMode mode = nd.mode();
  int64_t nDims = nd.nDims(), half = nDims / 2;
  double theta = nd.theta(), freqScale = nd.freqScale(), ext = nd.extFactor();
  double attn = nd.attnFactor();
  double nCtxOrig = static_cast<double>(nd.nCtxOrig());
  // ggml_rope_yarn_corr_dims
  auto corrDim = [&](double beta) {
    return static_cast<double>(nDims) * std::log(nCtxOrig / (beta * 2 * std::numbers::pi)) /
           (2 * std::log(theta));
  };
  double low = std::max(0.0, std::floor(corrDim(nd.betaFast())));
  double high = std::min(static_cast<double>(nDims - 1), std::ceil(corrDim(nd.betaSlow())));
  double mscale = ext != 0 ? attn * (1.0 + 0.1 * std::log(1.0 / freqScale)) : attn;

  ArrayRef<int64_t> shape = c.op(0).type.shape;
  int64_t tokens = shape[0], heads = shape[1], d = shape[2];
  std::vector<double> cosv(half), sinv(half);
  for (int64_t t = 0; t < tokens; ++t) {
    double p = static_cast<double>(pos[t]);
    for (int64_t i = 0; i < half; ++i) {
      double extrap = p * std::pow(theta, -2.0 * static_cast<double>(i) / nDims);
      if (!ff.empty())
        extrap /= ff[i];
      double angle = freqScale * extrap;
      if (ext != 0) {
        double y = (static_cast<double>(i) - low) / std::max(0.001, high - low);
        double rampMix = (1.0 - std::clamp(y, 0.0, 1.0)) * ext;
        angle = angle * (1 - rampMix) + extrap * rampMix;
      }
      cosv[i] = std::cos(angle) * mscale;
      sinv[i] = std::sin(angle) * mscale;
    }
    for (int64_t h = 0; h < heads; ++h) {
      float *row = x.data() + (t * heads + h) * d;
      for (int64_t i = 0; i < half; ++i) {
        int64_t ia = mode == RopeMode::Neox ? i : 2 * i;
        int64_t ib = mode == RopeMode::Neox ? i + half : 2 * i + 1;
        double a = row[ia], b = row[ib];
        row[ia] = static_cast<float>(a * cosv[i] - b * sinv[i]);
        row[ib] = static_cast<float>(a * sinv[i] + b * cosv[i]);
      }
    }
  }
  return c.emit(x);
}

/// softmax over the last dim of x·scale + slope·mask. A row whose every logit
/// is −inf gives zeros.
Error evalSoftmax(Ctx &c) {
  std::vector<float> x = c.floats(0);
  std::vector<float> mask = c.has(1) ? c.floats(1) : std::vector<float>();
  double scale = op::Softmax(c.node).scale(), maxBias = op::Softmax(c.node).maxBias();
  ArrayRef<int64_t> shape = c.op(0).type.shape;
  int64_t rank = static_cast<int64_t>(shape.size());
  int64_t n = c.op(0).type.rowLength();
  int64_t nHead = rank >= 3 ? shape[rank - 3] : 1;
  int64_t headStride = rank >= 3 ? product(shape.drop_front(rank - 2)) : 0;
  double n2 = std::exp2(std::floor(std::log2(static_cast<double>(nHead))));
  double m0 = std::exp2(-maxBias / n2), m1 = std::exp2(-maxBias / 2 / n2);
  Shape ms = c.has(1) ? broadcastStrides(c.op(1).type.shape, shape) : Shape();
  std::vector<double> logits(static_cast<size_t>(n));
  SmallVector<int64_t, 6> idx(shape.size(), 0);
  for (int64_t r = 0, rows = n ? static_cast<int64_t>(x.size()) / n : 0; r < rows; ++r) {
    int64_t h = rank >= 3 ? (r * n / headStride) % nHead : 0;
    double slope = maxBias > 0 ? (h < n2 ? std::pow(m0, static_cast<double>(h + 1))
                                         : std::pow(m1, 2.0 * (static_cast<double>(h) - n2) + 1))
                               : 1.0;
    // index of the row's first element, for the mask's broadcast strides
    for (int64_t d = rank - 1, rem = r * n; d >= 0; --d) {
      idx[d] = rem % shape[d];
      rem /= shape[d];
    }
    int64_t mBase = c.has(1) ? dot(idx, ms) : 0, mStep = c.has(1) ? ms.back() : 0;
    double mx = -INFINITY;
    for (int64_t i = 0; i < n; ++i) {
      double v = x[r * n + i] * scale;
      if (c.has(1))
        v += slope * mask[mBase + i * mStep];
      logits[i] = v;
      mx = std::max(mx, v);
    }
    double sum = 0;
    for (int64_t i = 0; i < n; ++i) {
      logits[i] = mx == -INFINITY ? 0.0 : std::exp(logits[i] - mx);
      sum += logits[i];
    }
    for (int64_t i = 0; i < n; ++i)
      x[r * n + i] = sum > 0 ? static_cast<float>(logits[i] / sum) : 0.0f;
  }
  return c.emit(x);
}

/// Stable sort of each row's indices; descending keeps lower indices first on ties.
std::vector<int64_t> sortedRows(Ctx &c, bool descending, int64_t keep) {
  std::vector<float> x = c.floats(0);
  int64_t n = c.op(0).type.rowLength();
  std::vector<int64_t> out;
  std::vector<int64_t> order(static_cast<size_t>(n));
  for (int64_t r = 0, rows = n ? static_cast<int64_t>(x.size()) / n : 0; r < rows; ++r) {
    const float *row = x.data() + r * n;
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) {
      return descending ? row[a] > row[b] : row[a] < row[b];
    });
    out.insert(out.end(), order.begin(), order.begin() + keep);
  }
  return out;
}

Error evalArgsort(Ctx &c) {
  bool desc = op::Argsort(c.node).order() == SortOrder::Desc;
  return c.emit(HostTensor::fromInts(c.type(), sortedRows(c, desc, c.op(0).type.rowLength())));
}

Error evalTopK(Ctx &c) {
  return c.emit(HostTensor::fromInts(c.type(), sortedRows(c, true, op::TopK(c.node).k())));
}

template <bool Mean> Error reduceRows(Ctx &c) {
  std::vector<float> x = c.floats(0);
  int64_t n = c.op(0).type.rowLength();
  std::vector<float> out(static_cast<size_t>(c.type().numElements()));
  for (size_t r = 0; r < out.size(); ++r) {
    double s = 0;
    for (int64_t i = 0; i < n; ++i)
      s += x[r * n + i];
    out[r] = static_cast<float>(Mean ? s / static_cast<double>(n) : s);
  }
  return c.emit(out);
}

Error evalSumRows(Ctx &c) { return reduceRows<false>(c); }
Error evalMean(Ctx &c) { return reduceRows<true>(c); }

// --- layout ---------------------------------------------------------------------

Error evalConcat(Ctx &c) {
  int64_t axis = op::Concat(c.node).axis();
  const HostTensor &a = c.op(0), &b = c.op(1);
  if (isQuantized(a.type.dtype))
    return failf("the reference cannot concatenate block-quantised {0}", a.type.str());
  int64_t eb = elemBytes(a.type.dtype);
  Shape sa = contiguousStrides(a.type.shape), sb = contiguousStrides(b.type.shape);
  int64_t split = a.type.shape[axis];
  HostTensor out = HostTensor::zeros(c.type());
  SmallVector<int64_t, 6> j;
  forEachIndex(c.type().shape, [&](ArrayRef<int64_t> idx, int64_t flat) {
    j.assign(idx.begin(), idx.end());
    bool inA = j[axis] < split;
    if (!inA)
      j[axis] -= split;
    const uint8_t *src = inA ? a.data.data() + dot(j, sa) * eb : b.data.data() + dot(j, sb) * eb;
    std::memcpy(out.data.data() + flat * eb, src, eb);
  });
  return c.emit(std::move(out));
}

Error evalRepeat(Ctx &c) {
  ArrayRef<int64_t> xs = c.op(0).type.shape;
  Shape strides = contiguousStrides(xs);
  return gatherBytes(c, c.op(0), [&](ArrayRef<int64_t> idx) {
    int64_t off = 0;
    for (size_t d = 0; d < idx.size(); ++d)
      off += (idx[d] % xs[d]) * strides[d];
    return off;
  });
}

/// Same elements in the same row-major order: the bytes are the bytes.
Error copyBytes(Ctx &c) {
  HostTensor out = c.op(0);
  out.type = c.type();
  return c.emit(std::move(out));
}

Error evalReshape(Ctx &c) { return copyBytes(c); }
Error evalCont(Ctx &c) { return copyBytes(c); }

Error evalView(Ctx &c) {
  ArrayRef<int64_t> strides = op::View(c.node).strides();
  int64_t offset = op::View(c.node).offset();
  return gatherBytes(c, c.op(0), [&](ArrayRef<int64_t> idx) { return offset + dot(idx, strides); });
}

Error evalPermute(Ctx &c) {
  ArrayRef<int64_t> perm = op::Permute(c.node).perm();
  Shape xs = contiguousStrides(c.op(0).type.shape);
  Shape strides(perm.size());
  for (size_t i = 0; i < perm.size(); ++i)
    strides[i] = xs[perm[i]]; // result dim i walks x's dim perm[i]
  return gatherBytes(c, c.op(0), [&](ArrayRef<int64_t> idx) { return dot(idx, strides); });
}

Error evalTranspose(Ctx &c) {
  Shape strides = contiguousStrides(c.op(0).type.shape);
  std::swap(strides[strides.size() - 1], strides[strides.size() - 2]);
  return gatherBytes(c, c.op(0), [&](ArrayRef<int64_t> idx) { return dot(idx, strides); });
}

Error evalConvert(Ctx &c) {
  if (isInteger(c.op(0).type.dtype))
    return c.emit(HostTensor::fromInts(c.type(), c.ints(0)));
  return c.emit(c.floats(0));
}

// --- attention --------------------------------------------------------------------

Error evalAttention(Ctx &c) {
  std::vector<float> q = c.floats(0);
  std::vector<int64_t> pos = c.ints(3);
  std::vector<float> sinks = c.has(4) ? c.floats(4) : std::vector<float>();
  const HostTensor &kc = c.op(1), &vc = c.op(2);
  int64_t tokens = c.op(0).type.shape[0], hq = c.op(0).type.shape[1], d = c.op(0).type.shape[2];
  int64_t ctx = kc.type.shape[0], hkv = kc.type.shape[1], dv = vc.type.shape[2];
  op::Attention attn(c.node);
  double scale = attn.scale(), softcap = attn.softcap();
  int64_t window = attn.window();
  int64_t maxPos = -1;
  for (int64_t t = 0; t < tokens; ++t) {
    if (pos[t] < 0 || pos[t] >= ctx)
      return failf("positions[{0}] = {1} is outside the cache of {2} rows", t, pos[t], ctx);
    maxPos = std::max(maxPos, pos[t]);
  }
  // Only rows [0, maxPos] are ever visible.
  int64_t live = maxPos + 1;
  std::vector<float> k(static_cast<size_t>(live * hkv * d)),
      v(static_cast<size_t>(live * hkv * dv));
  if (Error e = decodeRange(kc, 0, live * hkv * d, k.data()))
    return e;
  if (Error e = decodeRange(vc, 0, live * hkv * dv, v.data()))
    return e;

  int64_t group = hq / hkv;
  std::vector<float> out(static_cast<size_t>(tokens * hq * dv));
  std::vector<double> scores, acc(static_cast<size_t>(dv));
  for (int64_t t = 0; t < tokens; ++t)
    for (int64_t h = 0; h < hq; ++h) {
      int64_t kvh = h / group, p = pos[t];
      int64_t lo = window > 0 ? std::max<int64_t>(0, p - window + 1) : 0;
      const float *qr = q.data() + (t * hq + h) * d;
      scores.assign(static_cast<size_t>(p - lo + 1), 0);
      double mx = sinks.empty() ? -INFINITY : sinks[h];
      for (int64_t j = lo; j <= p; ++j) {
        const float *kr = k.data() + (j * hkv + kvh) * d;
        double s = 0;
        for (int64_t l = 0; l < d; ++l)
          s += static_cast<double>(qr[l]) * kr[l];
        s *= scale;
        if (softcap > 0)
          s = softcap * std::tanh(s / softcap);
        scores[j - lo] = s;
        mx = std::max(mx, s);
      }
      double denom = sinks.empty() ? 0.0 : std::exp(sinks[h] - mx);
      std::fill(acc.begin(), acc.end(), 0.0);
      for (int64_t j = lo; j <= p; ++j) {
        double w = std::exp(scores[j - lo] - mx);
        denom += w;
        const float *vr = v.data() + (j * hkv + kvh) * dv;
        for (int64_t l = 0; l < dv; ++l)
          acc[l] += w * vr[l];
      }
      float *o = out.data() + (t * hq + h) * dv;
      for (int64_t l = 0; l < dv; ++l)
        o[l] = static_cast<float>(acc[l] / denom);
    }
  return c.emit(out);
}

} // namespace

namespace ref {

Error setRowsInPlace(HostTensor &dst, const HostTensor &src, const HostTensor &idx) {
  if (isQuantized(dst.type.dtype))
    return failf("cannot store rows into block-quantised {0}", dst.type.str());
  std::vector<int64_t> rows = idx.toInts();
  int64_t nRows = dst.type.shape.empty() ? 1 : dst.type.shape[0];
  int64_t cols = nRows ? dst.numElements() / nRows : 0;
  for (size_t n = 0; n < rows.size(); ++n)
    if (Error e = checkIndex(rows[n], nRows, "indices", static_cast<int64_t>(n)))
      return e;
  int64_t rowBytes = storageBytes(dst.type.dtype, cols);
  if (isInteger(dst.type.dtype) && isInteger(src.type.dtype)) {
    HostTensor enc = HostTensor::fromInts({dst.type.dtype, src.type.shape}, src.toInts());
    for (size_t n = 0; n < rows.size(); ++n)
      std::memcpy(dst.data.data() + rows[n] * rowBytes, enc.data.data() + n * rowBytes, rowBytes);
    return Error::success();
  }
  std::vector<float> values = src.toFloats();
  for (size_t n = 0; n < rows.size(); ++n)
    encodeRow(dst.type.dtype, values.data() + n * cols, dst.data.data() + rows[n] * rowBytes, cols);
  return Error::success();
}

} // namespace ref

Error evalNode(const Node &node, ArrayRef<const HostTensor *> operands,
               llvm::SmallVectorImpl<HostTensor> &results, ActQuant act) {
  const OpInfo &info = node.info();
  auto where = [&](Error e) {
    return fail("'" + llvm::Twine(info.mnemonic) + "': " + llvm::toString(std::move(e)));
  };
  SmallVector<TensorType, 4> types;
  for (size_t i = 0; i < operands.size(); ++i) {
    const HostTensor *t = operands[i];
    if (!t)
      return where(failf("operand {0} is missing", i));
    if (static_cast<int64_t>(t->data.size()) != t->type.bytes())
      return where(failf("operand {0} holds {1} bytes but {2} needs {3}", i, t->data.size(),
                         t->type.str(), t->type.bytes()));
    types.push_back(t->type);
  }
  SmallVector<TensorType, 1> resultTypes;
  if (Error e = inferResultTypes(node.kind, types, node.attrs, resultTypes))
    return e; // already names the op
  Ctx c{node, operands, resultTypes, results, act};
  size_t before = results.size();
  auto dispatch = [&]() -> Error {
    switch (node.kind) {
#define FG_OP(Kind, ...)                                                                           \
  case OpKind::Kind:                                                                               \
    return eval##Kind(c);
#define FG_FUSED_OP(Kind, ...)                                                                     \
  case OpKind::Kind:                                                                               \
    return ref::evalDecomposed(node, operands, results, act);
#include "ir/Ops.def"
    }
    return fail("unknown op kind");
  };
  Error e = dispatch();
  if (e)
    return where(std::move(e));
  assert((results.size() - before == info.numResults ||
          (info.has(kVariadicResults) && results.size() - before == node.results.size())) &&
         "eval produced every result");
  (void)before;
  return Error::success();
}

} // namespace fg
