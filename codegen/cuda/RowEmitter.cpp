//===- RowEmitter.cpp - one block per row ----------------------------------===//
//
// Row-wise ops: rms_norm, layer_norm, softmax (mask, scale, ALiBi), rope,
// argsort, top_k, sum_rows, mean. A grid-stride loop over rows (so any row
// count works) gives each row to one block; the block reduces in f32 with
// warp shuffles. The operand's outer dims are unravelled from the row index
// with constant divisors and read through the operand's strides; results are
// written densely.
//
//===----------------------------------------------------------------------===//
#include "codegen/cuda/EmitterCommon.h"

#include "llvm/Support/FormatVariadic.h"

#include <algorithm>
#include <cassert>
#include <cmath>

namespace fg::cuda::detail {
namespace {

/// Rows of `shape` (all but the last dim) and the row length.
struct Rows {
  Shape outer;
  int64_t count = 1, len = 1;
  explicit Rows(llvm::ArrayRef<int64_t> shape) {
    if (shape.empty())
      return;
    outer.assign(shape.begin(), shape.end() - 1);
    count = product(outer);
    len = shape.back();
  }
};

std::string rowLoopHead(const Rows &r) {
  return "  for (long long row = blockIdx.x; row < " + ilit(r.count) + "; row += gridDim.x) {\n" +
         unravel("row", r.outer, "r");
}

/// Offset of element `col` of the current row of an operand with layout `l`
/// whose outer dims are the row coordinates r0.. (broadcast to the row space).
std::string rowElemOffset(const Layout &l, size_t rank, const std::string &col) {
  std::vector<std::string> co = broadcastCoords(l.shape, rank, "r");
  if (!co.empty() && !co.back().empty())
    co.back() = col;
  return offsetExpr(l, co);
}

KernelSpec rowSpec(const Node &node, std::string body, const Rows &r, unsigned threads,
                   std::vector<Param> params, unsigned shared = 0) {
  KernelSpec k = finishSpec(node.info().mnemonic, std::move(body));
  k.grid[0] = static_cast<unsigned>(std::clamp<int64_t>(r.count, 1, int64_t(1) << 20));
  k.block[0] = threads;
  k.sharedBytes = shared;
  k.params = std::move(params);
  return k;
}

std::string head(unsigned nt, const std::string &params) {
  return "#define NT " + std::to_string(nt) + "\nextern \"C\" __global__ void __launch_bounds__(NT) "
         "KERNEL(" + params + ") {\n";
}

/// rms_norm, layer_norm, sum_rows, mean.
KernelSpec emitReduce(const Function &fn, const Node &node, llvm::ArrayRef<Layout> ls) {
  const TensorType &xt = fn.type(node.operands[0]);
  DType rt = fn.type(node.result()).dtype;
  Rows r(xt.shape);
  unsigned nt = threadsForRow(r.len);
  std::string x = "fg_to_f(x[" + rowElemOffset(ls[0], xt.rank(), "col") + "])";
  std::string st = ctype(rt), lenF = flit(static_cast<double>(r.len));
  std::string b = head(nt, ctype(rt) + "* out, const " + ctype(xt.dtype) + "* x");
  b += rowLoopHead(r);
  auto colLoop = [&](const std::string &stmt) {
    return "    for (long long col = threadIdx.x; col < " + ilit(r.len) + "; col += NT) { " + stmt +
           " }\n";
  };
  switch (node.kind) {
  case OpKind::RmsNorm:
    b += "    float s = 0.0f;\n" + colLoop("const float v = " + x + "; s += v * v;");
    b += "    s = fg_block_sum<NT>(s);\n";
    b += "    const float scale = 1.0f / sqrtf(s / " + lenF + " + " + flit(node.f("eps")) + ");\n";
    b += colLoop("out[row * " + ilit(r.len) + " + col] = fg_from_f<" + st + ">(" + x + " * scale);");
    break;
  case OpKind::LayerNorm:
    b += "    float s = 0.0f;\n" + colLoop("s += " + x + ";");
    b += "    const float mean = fg_block_sum<NT>(s) / " + lenF + ";\n";
    b += "    float q = 0.0f;\n" + colLoop("const float d = " + x + " - mean; q += d * d;");
    b += "    const float var = fg_block_sum<NT>(q) / " + lenF + ";\n";
    b += "    const float scale = 1.0f / sqrtf(var + " + flit(node.f("eps")) + ");\n";
    b += colLoop("out[row * " + ilit(r.len) + " + col] = fg_from_f<" + st + ">((" + x +
                 " - mean) * scale);");
    break;
  default: // SumRows, Mean
    b += "    float s = 0.0f;\n" + colLoop("s += " + x + ";");
    b += "    s = fg_block_sum<NT>(s);\n";
    if (node.kind == OpKind::Mean)
      b += "    s = s / " + lenF + ";\n";
    b += "    if (threadIdx.x == 0) out[row] = fg_from_f<" + st + ">(s);\n";
    break;
  }
  b += "  }\n}\n";
  return rowSpec(node, b, r, nt, {Param::result(0), Param::operand(0)});
}

KernelSpec emitSoftmax(const Function &fn, const Node &node, llvm::ArrayRef<Layout> ls) {
  const TensorType &xt = fn.type(node.operands[0]);
  DType rt = fn.type(node.result()).dtype;
  bool hasMask = node.operands.size() > 1;
  Rows r(xt.shape);
  unsigned nt = threadsForRow(r.len, 512);
  size_t rank = xt.shape.size();
  std::string params = ctype(rt) + "* out, const " + ctype(xt.dtype) + "* x";
  if (hasMask)
    params += ", const " + ctype(fn.type(node.operands[1]).dtype) + "* mask";
  std::string b = head(nt, params);

  // ALiBi slope (ggml): head h = coordinate of dim rank-3.
  double maxBias = node.f("max_bias");
  b += rowLoopHead(r);
  if (maxBias > 0 && hasMask) {
    int64_t nHead = rank >= 3 ? xt.shape[rank - 3] : 1;
    uint32_t n2 = 1u << static_cast<uint32_t>(std::floor(std::log2(static_cast<float>(nHead))));
    float m0 = std::pow(2.0f, -static_cast<float>(maxBias) / n2);
    float m1 = std::pow(2.0f, -(static_cast<float>(maxBias) / 2.0f) / n2);
    std::string h = rank >= 3 ? "r" + std::to_string(rank - 3) : "0LL";
    b += "    const long long h = " + h + ";\n";
    b += "    const float slope = h < " + ilit(n2) + " ? powf(" + flit(m0) +
         ", (float)(h + 1)) : powf(" + flit(m1) + ", (float)(2 * (h - " + ilit(n2) + ") + 1));\n";
  } else {
    b += "    const float slope = 1.0f;\n";
  }
  std::string v = "fg_to_f(x[" + rowElemOffset(ls[0], rank, "col") + "]) * " +
                  flit(node.f("scale"));
  if (hasMask)
    v += " + slope * fg_to_f(mask[" + rowElemOffset(ls[1], rank, "col") + "])";
  auto colLoop = [&](const std::string &stmt) {
    return "    for (long long col = threadIdx.x; col < " + ilit(r.len) + "; col += NT) { " + stmt +
           " }\n";
  };
  b += "    (void)slope;\n    float m = -FG_INF;\n" + colLoop("m = fmaxf(m, " + v + ");");
  b += "    m = fg_block_max<NT>(m);\n";
  b += "    float s = 0.0f;\n" + colLoop("s += expf(" + v + " - m);");
  b += "    const float inv = 1.0f / fg_block_sum<NT>(s);\n";
  b += colLoop("out[row * " + ilit(r.len) + " + col] = fg_from_f<" + ctype(rt) + ">(expf(" + v +
               " - m) * inv);");
  b += "  }\n}\n";
  std::vector<Param> ps{Param::result(0), Param::operand(0)};
  if (hasMask)
    ps.push_back(Param::operand(1));
  return rowSpec(node, b, r, nt, ps);
}

/// ggml_rope_yarn_corr_dim (in double, like the CPU reference).
double corrDim(int64_t nDims, int64_t nCtxOrig, double beta, double base) {
  return static_cast<double>(nDims) * std::log(static_cast<double>(nCtxOrig) / (beta * 2 * M_PI)) /
         (2 * std::log(base));
}

KernelSpec emitRope(const Function &fn, const Node &node, llvm::ArrayRef<Layout> ls) {
  const TensorType &xt = fn.type(node.operands[0]);
  DType rt = fn.type(node.result()).dtype;
  bool hasFF = node.operands.size() > 2;
  int64_t D = xt.shape[2];
  int64_t nDims = node.i("n_dims");

  Rows r(xt.shape); // rows = T * H
  unsigned nt = threadsForRow(std::max<int64_t>(nDims / 2, D - nDims), 256);
  std::string params = ctype(rt) + "* out, const " + ctype(xt.dtype) + "* x, const " +
                       ctype(fn.type(node.operands[1]).dtype) + "* pos";
  if (hasFF)
    params += ", const " + ctype(fn.type(node.operands[2]).dtype) + "* ff";
  std::string b = head(nt, params);
  b += rowLoopHead(r); // r0 = t, r1 = h
  auto xAt = [&](const std::string &col) {
    return "fg_to_f(x[" + offsetExpr(ls[0], {"r0", "r1", col}) + "])";
  };
  std::string ob = "row * " + ilit(D);
  // Angles in double (like the CPU reference): positions reach 1e5 and more.
  b += "    const double p = (double)" + std::string("pos[") + offsetExpr(ls[1], {"r0"}) + "];\n";
  b += "    for (long long i = threadIdx.x; i < " + ilit(nDims / 2) + "; i += NT) {\n";
  b += ropePairStatements(node, hasFF ? "fg_to_f(ff[" + offsetExpr(ls[2], {"i"}) + "])" : "");
  b += "      const float a = " + xAt("i0") + ", bb = " + xAt("i1") + ";\n";
  b += "      out[" + ob + " + i0] = fg_from_f<" + ctype(rt) + ">(a * cs - bb * sn);\n";
  b += "      out[" + ob + " + i1] = fg_from_f<" + ctype(rt) + ">(a * sn + bb * cs);\n";
  b += "    }\n";
  if (nDims < D)
    b += "    for (long long c = " + ilit(nDims) + " + threadIdx.x; c < " + ilit(D) +
         "; c += NT) out[" + ob + " + c] = fg_from_f<" + ctype(rt) + ">(" + xAt("c") + ");\n";
  b += "  }\n}\n";
  std::vector<Param> ps{Param::result(0), Param::operand(0), Param::operand(1)};
  if (hasFF)
    ps.push_back(Param::operand(2));
  return rowSpec(node, b, r, nt, ps);
}

/// argsort / top_k by rank counting: element i's rank is the number of
/// elements ordered before it (value, then index, so the sort is stable and
/// ties go to the lower index). O(len²) per row; NaN sorts as -inf.
KernelSpec emitSort(const Function &fn, const Node &node, llvm::ArrayRef<Layout> ls) {
  const TensorType &xt = fn.type(node.operands[0]);
  Rows r(xt.shape);
  bool desc = node.kind == OpKind::TopK || node.e<SortOrder>("order") == SortOrder::Desc;
  int64_t outLen = node.kind == OpKind::TopK ? node.i("k") : r.len;
  unsigned nt = threadsForRow(r.len, 256);
  bool inShared = r.len * 4 <= 48 * 1024;
  std::string b = "static __device__ __forceinline__ float key(float v) { return isnan(v) ? -FG_INF : v; }\n" +
      head(nt, "int* out, const " + ctype(xt.dtype) + "* x");
  if (inShared)
    b += "  extern __shared__ float vals[];\n";
  b += rowLoopHead(r);
  std::string ld = "key(fg_to_f(x[" + rowElemOffset(ls[0], xt.rank(), "j") + "]))";
  if (inShared) {
    b += "    __syncthreads();\n";
    b += "    for (long long j = threadIdx.x; j < " + ilit(r.len) + "; j += NT) vals[j] = " + ld +
         ";\n";
    b += "    __syncthreads();\n";
  }
  std::string get = inShared ? "vals[j]" : ld;
  std::string cmp = desc ? ">" : "<";
  b += "    for (long long i = threadIdx.x; i < " + ilit(r.len) + "; i += NT) {\n";
  {
    std::string getI = inShared ? "vals[i]" : "key(fg_to_f(x[" +
                                                  rowElemOffset(ls[0], xt.rank(), "i") + "]))";
    b += "      const float vi = " + getI + ";\n      long long rank = 0;\n";
  }
  b += "      for (long long j = 0; j < " + ilit(r.len) + "; ++j) {\n";
  b += "        const float vj = " + get + ";\n";
  b += "        rank += (vj " + cmp + " vi) || (vj == vi && j < i);\n      }\n";
  b += "      if (rank < " + ilit(outLen) + ") out[row * " + ilit(outLen) + " + rank] = (int)i;\n";
  b += "    }\n  }\n}\n";
  return rowSpec(node, b, r, nt, {Param::result(0), Param::operand(0)},
                 inShared ? static_cast<unsigned>(r.len * 4) : 0);
}

} // namespace

std::string ropePairStatements(const Node &node, llvm::StringRef ffElem, llvm::StringRef ind) {
  int64_t nDims = node.i("n_dims");
  bool neox = node.e<RopeMode>("mode") == RopeMode::Neox;
  double base = node.f("theta"), freqScale = node.f("freq_scale"), ext = node.f("ext_factor");
  int64_t nCtx = node.i("n_ctx_orig");
  double low = std::max(0.0, std::floor(corrDim(nDims, nCtx, node.f("beta_fast"), base)));
  double high = std::min(static_cast<double>(nDims - 1),
                         std::ceil(corrDim(nDims, nCtx, node.f("beta_slow"), base)));
  double mscale = node.f("attn_factor");
  if (ext != 0)
    mscale *= 1.0 + 0.1 * std::log(1.0 / freqScale);
  std::string in = ind.str(), b;
  b += in + "double theta = p * pow(" + dlit(base) + ", -2.0 * (double)i / " + dlit(nDims) + ");\n";
  if (!ffElem.empty())
    b += in + "theta = theta / (double)" + ffElem.str() + ";\n";
  b += in + "double th = " + dlit(freqScale) + " * theta;\n";
  if (ext != 0) {
    b += in + "const double y = ((double)i - " + dlit(low) + ") / fmax(0.001, " + dlit(high) +
         " - " + dlit(low) + ");\n";
    b += in + "const double ramp = (1.0 - fmin(1.0, fmax(0.0, y))) * " + dlit(ext) + ";\n";
    b += in + "th = th * (1.0f - ramp) + theta * ramp;\n";
  }
  b += in + "const float cs = (float)(cos(th) * " + dlit(mscale) + "), sn = (float)(sin(th) * " +
       dlit(mscale) + ");\n";
  std::string i0 = neox ? "i" : "2 * i", i1 = neox ? "i + " + ilit(nDims / 2) : "2 * i + 1";
  b += in + "const long long i0 = " + i0 + ", i1 = " + i1 + ";\n";
  return b;
}

bool isRowFamily(OpKind k) {
  switch (k) {
  case OpKind::RmsNorm:
  case OpKind::LayerNorm:
  case OpKind::Softmax:
  case OpKind::Rope:
  case OpKind::Argsort:
  case OpKind::TopK:
  case OpKind::SumRows:
  case OpKind::Mean:
    return true;
  default:
    return false;
  }
}

llvm::Expected<std::vector<Launch>> emitRow(const Function &fn, const Node &node,
                                            llvm::ArrayRef<Layout> ls, const EmitOptions &) {
  switch (node.kind) {
  case OpKind::Softmax:
    return std::vector<Launch>{emitSoftmax(fn, node, ls)};
  case OpKind::Rope:
    return std::vector<Launch>{emitRope(fn, node, ls)};
  case OpKind::Argsort:
  case OpKind::TopK:
    return std::vector<Launch>{emitSort(fn, node, ls)};
  default:
    return std::vector<Launch>{emitReduce(fn, node, ls)};
  }
}

} // namespace fg::cuda::detail
