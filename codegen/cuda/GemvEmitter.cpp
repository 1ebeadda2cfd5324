//===- GemvEmitter.cpp - matmul and matmul_id --------------------------------===//
//
// Decode-sized matmuls (at most EmitOptions::maxGemvTokens rows of x) become
// a generated GEMV: one warp per output column, each lane striding over K,
// f32 accumulation for every x row at once (so W is read once), a warp
// reduction, lane 0 writes. matmul_id is the same with the expert row picked
// by ids[t, j] read from device memory (one (t, j) pair per grid row).
// Larger matmuls go to cuBLAS through a CublasGemmSpec.
//
// The GEMV anchor takes a glu epilogue: fused.gated_matmul(_id) keeps a gate
// and an up accumulator per x row, reads x once for both, and lane 0 adds the
// biases and writes act(gate)·up for the node's glu kind, alpha and limit.
//
//===----------------------------------------------------------------------===//
#include "codegen/cuda/EmitterCommon.h"

#include "llvm/Support/FormatVariadic.h"

#include <algorithm>
#include <functional>

namespace fg::cuda::detail {
namespace {

constexpr unsigned kWarps = 4; ///< columns per block

/// Element offsets of each row of x (all dims but the last), row-major.
std::vector<int64_t> rowOffsets(const Layout &l) {
  size_t r = l.shape.size();
  Shape outer(l.shape.begin(), l.shape.end() - 1);
  int64_t rows = product(outer);
  std::vector<int64_t> out;
  for (int64_t i = 0; i < rows; ++i) {
    int64_t rem = i, off = l.offset;
    for (size_t d = r - 1; d-- > 0;) {
      off += (rem % l.shape[d]) * l.strides[d];
      rem /= l.shape[d];
    }
    out.push_back(off);
  }
  return out;
}

/// One weight stream of a GEMV's K loop: element k of its row is
/// `ptr[row + k * stride]`, and `step` is the statement that consumes the
/// weight value `wv` at index expression `k` (it may read x[... k ...]).
struct WStream {
  std::string ptr, row;
  int64_t stride;
  /// Element offsets whose sum is the row start (all must be multiples of the
  /// vector width for 16-byte loads).
  std::vector<int64_t> rowTerms;
  std::function<std::string(const std::string &wv, const std::string &k)> step;
};

/// The K loop of a GEMV lane. When every stream is unit-stride with 16-byte
/// aligned rows and K is a multiple of the vector width, each lane loads 16
/// bytes of each weight row per step (8 f16/bf16 or 4 f32 values), unrolled
/// for several loads in flight; otherwise one element per lane per step.
/// Dense GEMVs read x through the macro XV(m, k). `xPreload` (an f32 x with
/// unit stride whose rows start 16-byte aligned, at most 8 rows) lets the
/// vectorised loop load each lane's x values as float4s once per step, so x
/// reads stay as wide and coalesced as the weight reads.
struct XPreload {
  bool enabled = false;
};

std::string kLoop(DType wtype, int64_t K, const std::vector<WStream> &streams,
                  const std::string &indent, bool sameDTypes = true, XPreload xp = {}) {
  int64_t vec = 16 / elemBytes(wtype);
  bool vectorised = sameDTypes && K % vec == 0;
  for (const WStream &w : streams) {
    vectorised &= w.stride == 1;
    for (int64_t t : w.rowTerms)
      vectorised &= t % vec == 0;
  }
  std::string b;
  if (!vectorised) {
    b += indent + "for (long long k = lane; k < " + ilit(K) + "; k += 32) {\n";
    for (const WStream &w : streams)
      b += indent + "  " +
           w.step("fg_to_f(" + w.ptr + "[" + w.row + " + k * " + ilit(w.stride) + "])", "k") + "\n";
    return b + indent + "}\n";
  }
  std::string ct = ctype(wtype), V = std::to_string(vec);
  b += indent + "#pragma unroll 4\n";
  b += indent + "for (long long k0 = (long long)lane * " + V + "; k0 < " + ilit(K) + "; k0 += " +
       std::to_string(32 * vec) + ") {\n";
  for (size_t i = 0; i < streams.size(); ++i)
    b += indent + "  const uint4 raw" + std::to_string(i) + " = __ldg(reinterpret_cast<const uint4 *>(" +
         streams[i].ptr + " + " + streams[i].row + " + k0));\n";
  if (xp.enabled && vec % 4 == 0) {
    b += indent + "  float xa[M][" + V + "];\n";
    b += indent + "#pragma unroll\n" + indent + "  for (int m = 0; m < M; ++m)\n";
    b += indent + "#pragma unroll\n" + indent + "    for (int q = 0; q < " + std::to_string(vec / 4) +
         "; ++q) {\n";
    b += indent + "      const float4 t = __ldg(reinterpret_cast<const float4 *>(x + xrow[m] + k0) + q);\n";
    b += indent + "      xa[m][4 * q] = t.x; xa[m][4 * q + 1] = t.y; xa[m][4 * q + 2] = t.z; "
                  "xa[m][4 * q + 3] = t.w;\n";
    b += indent + "    }\n";
    b += "#undef XV\n#define XV(m, k) xa[m][(k) - k0]\n";
  }
  b += indent + "#pragma unroll\n" + indent + "  for (int e = 0; e < " + V + "; ++e) {\n";
  b += indent + "    const long long k = k0 + e;\n";
  for (size_t i = 0; i < streams.size(); ++i)
    b += indent + "    " +
         streams[i].step("fg_to_f(reinterpret_cast<const " + ct + " *>(&raw" + std::to_string(i) +
                             ")[e])",
                         "k") +
         "\n";
  return b + indent + "  }\n" + indent + "}\n";
}

/// Opens a dense GEMV body: the constant row offsets of x, the lane, and the
/// loop of this warp over output columns n (closed by the caller).
std::string denseLoopOpen(const std::vector<int64_t> &xrows, int64_t N) {
  std::string b = "  const long long xrow[M] = {";
  for (size_t i = 0; i < xrows.size(); ++i)
    b += (i ? ", " : "") + ilit(xrows[i]);
  b += "};\n";
  b += "  const int lane = threadIdx.x & 31;\n";
  b += "  for (long long n = (long long)blockIdx.x * " + std::to_string(kWarps) +
       " + (threadIdx.x >> 5); n < " + ilit(N) + "; n += (long long)gridDim.x * " +
       std::to_string(kWarps) + ") {\n";
  return b;
}

/// Opens an expert-indexed GEMV body: the loop over (token t, slot j) pairs
/// (grid y), the expert e = ids[t, j] read from device memory, the x row
/// offset, and the warp's loop over output columns n (both closed by the caller).
std::string expertLoopOpen(const Layout &il, const Layout &xl, int64_t X, int64_t kk, int64_t N) {
  std::string b = "  const int lane = threadIdx.x & 31;\n";
  b += "  for (long long pr = blockIdx.y; pr < " + ilit(xl.shape[0] * kk) + "; pr += gridDim.y) {\n";
  b += "    const long long t = pr / " + ilit(kk) + ", j = pr % " + ilit(kk) + ";\n";
  b += "    const long long e = (long long)ids[" + offsetExpr(il, {"t", "j"}) + "];\n";
  b += "    const long long xoff = " + offsetExpr(xl, {"t", X == 1 ? "" : "j", ""}) + ";\n";
  b += "    for (long long n = (long long)blockIdx.x * " + std::to_string(kWarps) +
       " + (threadIdx.x >> 5); n < " + ilit(N) + "; n += (long long)gridDim.x * " +
       std::to_string(kWarps) + ") {\n";
  return b;
}

/// Whether x can be preloaded as float4s (see XPreload).
XPreload xPreload(DType xt, const Layout &xl, const std::vector<int64_t> &xrows) {
  XPreload p;
  p.enabled = xt == DType::F32 && xl.strides.back() == 1 && xrows.size() <= 8;
  for (int64_t r : xrows)
    p.enabled &= r % 4 == 0;
  return p;
}

bool isGemmType(DType t) { return t == DType::F32 || t == DType::F16 || t == DType::BF16; }

llvm::Expected<std::vector<Launch>> emitDenseGemv(const Function &fn, const Node &node,
                                                  llvm::ArrayRef<Layout> ls) {
  const TensorType &xt = fn.type(node.operands[0]), &wt = fn.type(node.operands[1]);
  const Layout &xl = ls[0], &wl = ls[1];
  int64_t N = wt.shape[0], K = wt.shape[1];
  std::vector<int64_t> xrows = rowOffsets(xl);
  int64_t M = static_cast<int64_t>(xrows.size());
  std::string xs = ilit(xl.strides.back());

  std::string b = "#define M " + std::to_string(M) + "\n";
  b += "extern \"C\" __global__ void __launch_bounds__(" + std::to_string(32 * kWarps) +
       ") KERNEL(float* y, const " + ctype(xt.dtype) + "* x, const " + ctype(wt.dtype) +
       "* w) {\n";
  b += denseLoopOpen(xrows, N);
  b += "    float acc[M];\n#pragma unroll\n    for (int m = 0; m < M; ++m) acc[m] = 0.0f;\n";
  b += "    const long long wrow = " + ilit(wl.offset) + " + n * " + ilit(wl.strides[0]) + ";\n";
  b += "#define XV(m, k) fg_to_f(x[xrow[m] + (k) * " + xs + "])\n";
  WStream ws{"w", "wrow", wl.strides[1], {wl.offset, wl.strides[0]},
             [&](const std::string &wv, const std::string &k) {
               return "{ const float wv = " + wv +
                      ";\n#pragma unroll\n      for (int m = 0; m < M; ++m) acc[m] += wv * XV(m, " +
                      k + "); }";
             }};
  b += kLoop(wt.dtype, K, {ws}, "    ", true, xPreload(xt.dtype, xl, xrows));
  b += "#pragma unroll\n    for (int m = 0; m < M; ++m) {\n";
  b += "      const float s = fg_warp_sum(acc[m]);\n";
  b += "      if (lane == 0) y[m * " + ilit(N) + " + n] = s;\n    }\n  }\n}\n";
  KernelSpec k = finishSpec("matmul", b);
  k.grid[0] = gridFor(N, kWarps);
  k.block[0] = 32 * kWarps;
  k.params = {Param::result(0), Param::operand(0), Param::operand(1)};
  return std::vector<Launch>{std::move(k)};
}

/// True when the rows of `l` (all dims but the last) are evenly spaced by
/// `rowStride` and the last dim is unit-stride.
bool uniformRows(const Layout &l, int64_t &rowStride) {
  size_t r = l.shape.size();
  if (r == 0 || (l.shape[r - 1] != 1 && l.strides[r - 1] != 1))
    return false;
  rowStride = l.shape[r - 1];
  bool first = true;
  int64_t expect = 0;
  for (size_t d = r - 1; d-- > 0;) {
    if (l.shape[d] == 1)
      continue;
    if (first) {
      rowStride = l.strides[d];
      expect = rowStride * l.shape[d];
      first = false;
    } else {
      if (l.strides[d] != expect)
        return false;
      expect *= l.shape[d];
    }
  }
  return rowStride >= l.shape[r - 1];
}

llvm::Expected<std::vector<Launch>> emitCublas(const Function &fn, const Node &node,
                                               llvm::ArrayRef<Layout> ls) {
  const TensorType &xt = fn.type(node.operands[0]), &wt = fn.type(node.operands[1]);
  const Layout &xl = ls[0], &wl = ls[1];
  if (!isGemmType(wt.dtype))
    return unsupported(node, "weight dtype " + std::string(dtypeName(wt.dtype)) + " for cuBLAS");
  if (wl.strides[1] != 1 || wl.strides[0] < wt.shape[1])
    return unsupported(node, "a weight whose rows are not unit-stride (insert a cont)");
  int64_t N = wt.shape[0], K = wt.shape[1], M = xt.numRows();
  CublasGemmSpec g;
  g.name = "matmul_cublas";
  g.transA = true;
  g.transB = false;
  g.m = N;
  g.n = M;
  g.k = K;
  g.aType = g.bType = wt.dtype;
  g.cType = DType::F32;
  g.lda = wl.strides[0];
  g.a = {Param::operand(1), static_cast<uint64_t>(wl.offset * elemBytes(wt.dtype))};
  g.c = {Param::result(0), 0};
  g.ldc = N;
  std::vector<Launch> out;
  int64_t rowStride = 0;
  if (xt.dtype == wt.dtype && uniformRows(xl, rowStride)) {
    g.b = {Param::operand(0), static_cast<uint64_t>(xl.offset * elemBytes(xt.dtype))};
    g.ldb = rowStride;
  } else {
    uint64_t bytes = static_cast<uint64_t>(M * K * elemBytes(wt.dtype));
    KernelSpec cvt = emitCopyKernel(xt.dtype, xl, wt.dtype, Param::scratch(), Param::operand(0));
    cvt.scratchBytes = bytes;
    g.scratchBytes = bytes;
    g.b = {Param::scratch(), 0};
    g.ldb = K;
    out.push_back(std::move(cvt));
  }
  out.push_back(std::move(g));
  return out;
}

llvm::Expected<std::vector<Launch>> emitMatMulId(const Function &fn, const Node &node,
                                                 llvm::ArrayRef<Layout> ls) {
  const TensorType &xt = fn.type(node.operands[0]), &wt = fn.type(node.operands[1]),
                   &it = fn.type(node.operands[2]);
  const Layout &xl = ls[0], &wl = ls[1], &il = ls[2];
  int64_t T = xt.shape[0], X = xt.shape[1], E = wt.shape[0], N = wt.shape[1], K = wt.shape[2];
  int64_t kk = it.shape[1];
  int64_t pairs = T * kk;
  std::string b = "extern \"C\" __global__ void __launch_bounds__(" +
                  std::to_string(32 * kWarps) + ") KERNEL(float* y, const " + ctype(xt.dtype) +
                  "* x, const " + ctype(wt.dtype) + "* w, const " + ctype(it.dtype) + "* ids) {\n";
  b += expertLoopOpen(il, xl, X, kk, N);
  b += "      float acc = 0.0f;\n";
  b += "      if (e >= 0 && e < " + ilit(E) + ") {\n";
  b += "        const long long wrow = " + offsetExpr(wl, {"e", "n", ""}) + ";\n";
  std::string xs2 = ilit(xl.strides[2]);
  WStream ws{"w", "wrow", wl.strides[2], {wl.offset, wl.strides[0], wl.strides[1]},
             [&](const std::string &wv, const std::string &k) {
               return "acc += " + wv + " * fg_to_f(x[xoff + " + k + " * " + xs2 + "]);";
             }};
  b += kLoop(wt.dtype, K, {ws}, "        ");
  b += "      }\n";
  b += "      acc = fg_warp_sum(acc);\n";
  b += "      if (lane == 0) y[pr * " + ilit(N) + " + n] = acc;\n    }\n  }\n}\n";
  KernelSpec k = finishSpec("matmul_id", b);
  k.grid[0] = gridFor(N, kWarps);
  k.grid[1] = static_cast<unsigned>(std::clamp<int64_t>(pairs, 1, 65535));
  k.block[0] = 32 * kWarps;
  k.params = {Param::result(0), Param::operand(0), Param::operand(1), Param::operand(2)};
  return std::vector<Launch>{std::move(k)};
}

/// Most x rows the dense gated GEMV keeps accumulators for (2 per row per lane).
constexpr int64_t kMaxGatedRows = 16;

/// fused.gated_matmul(x [.., K], w_gate [N, K], w_up [N, K], b_gate?, b_up?):
/// the dense GEMV with two accumulators per x row, so x is read once for both
/// lanes; lane 0 adds the biases and writes glu(gate, up).
llvm::Expected<std::vector<Launch>> emitGatedGemv(const Function &fn, const Node &node,
                                                  llvm::ArrayRef<Layout> ls) {
  const TensorType &xt = fn.type(node.operands[0]), &wt = fn.type(node.operands[1]),
                   &ut = fn.type(node.operands[2]);
  const Layout &xl = ls[0], &gl = ls[1], &ul = ls[2];
  bool bias = node.operands.size() > 3;
  int64_t N = wt.shape[0], K = wt.shape[1];
  std::vector<int64_t> xrows = rowOffsets(xl);
  int64_t M = static_cast<int64_t>(xrows.size());
  if (M > kMaxGatedRows)
    return unsupported(node, llvm::formatv("{0} rows of x (the fused GEMV takes at most {1})", M,
                                           kMaxGatedRows)
                                 .str());
  std::string xs = ilit(xl.strides.back());
  std::string params = "float* y, const " + ctype(xt.dtype) + "* x, const " + ctype(wt.dtype) +
                       "* wg, const " + ctype(ut.dtype) + "* wu";
  if (bias)
    params += ", const " + ctype(fn.type(node.operands[3]).dtype) + "* bg, const " +
              ctype(fn.type(node.operands[4]).dtype) + "* bu";
  std::string b = "#define M " + std::to_string(M) + "\n";
  b += "extern \"C\" __global__ void __launch_bounds__(" + std::to_string(32 * kWarps) +
       ") KERNEL(" + params + ") {\n";
  b += denseLoopOpen(xrows, N);
  b += "    float ag[M], au[M];\n#pragma unroll\n    for (int m = 0; m < M; ++m) { ag[m] = 0.0f; "
       "au[m] = 0.0f; }\n";
  b += "    const long long grow = " + ilit(gl.offset) + " + n * " + ilit(gl.strides[0]) +
       ", urow = " + ilit(ul.offset) + " + n * " + ilit(ul.strides[0]) + ";\n";
  // Both streams in one loop, so x is read once for gate and up.
  WStream gs{"wg", "grow", gl.strides[1], {gl.offset, gl.strides[0]},
             [](const std::string &wv, const std::string &) { return "const float gv = " + wv + ";"; }};
  b += "#define XV(m, k) fg_to_f(x[xrow[m] + (k) * " + xs + "])\n";
  WStream us{"wu", "urow", ul.strides[1], {ul.offset, ul.strides[0]},
             [&](const std::string &wv, const std::string &k) {
               return "{ const float uv = " + wv +
                      ";\n#pragma unroll\n      for (int m = 0; m < M; ++m) { const float xv = "
                      "XV(m, " + k + "); ag[m] += gv * xv; au[m] += uv * xv; } }";
             }};
  b += kLoop(wt.dtype, K, {gs, us}, "    ", wt.dtype == ut.dtype, xPreload(xt.dtype, xl, xrows));
  b += "#pragma unroll\n    for (int m = 0; m < M; ++m) {\n";
  b += "      float g = fg_warp_sum(ag[m]), u = fg_warp_sum(au[m]);\n";
  b += "      if (lane == 0) {\n";
  if (bias) {
    const Layout &bgl = ls[3], &bul = ls[4];
    b += "        g = g + fg_to_f(bg[" + ilit(bgl.offset) + " + n * " + ilit(bgl.strides.back()) +
         "]);\n";
    b += "        u = u + fg_to_f(bu[" + ilit(bul.offset) + " + n * " + ilit(bul.strides.back()) +
         "]);\n";
  }
  b += "        float r;\n" + gluStatements(node, "g", "u", "r");
  b += "        y[m * " + ilit(N) + " + n] = r;\n      }\n    }\n  }\n}\n";
  KernelSpec k = finishSpec(node.info().mnemonic, b);
  k.grid[0] = gridFor(N, kWarps);
  k.block[0] = 32 * kWarps;
  k.params = {Param::result(0), Param::operand(0), Param::operand(1), Param::operand(2)};
  if (bias) {
    k.params.push_back(Param::operand(3));
    k.params.push_back(Param::operand(4));
  }
  return std::vector<Launch>{std::move(k)};
}

/// fused.gated_matmul_id(x [T, X, K], w_gate [E, N, K], w_up [E, N, K], ids
/// [T, k], b_gate [E, N]?, b_up [E, N]?): matmul_id with two accumulators;
/// each (t, j) pair reads its x row once for both lanes.
llvm::Expected<std::vector<Launch>> emitGatedMatMulId(const Function &fn, const Node &node,
                                                      llvm::ArrayRef<Layout> ls) {
  const TensorType &xt = fn.type(node.operands[0]), &wt = fn.type(node.operands[1]),
                   &ut = fn.type(node.operands[2]), &it = fn.type(node.operands[3]);
  const Layout &xl = ls[0], &gl = ls[1], &ul = ls[2], &il = ls[3];
  bool bias = node.operands.size() > 4;
  int64_t T = xt.shape[0], X = xt.shape[1], E = wt.shape[0], N = wt.shape[1], K = wt.shape[2];
  int64_t kk = it.shape[1];
  int64_t pairs = T * kk;
  std::string params = "float* y, const " + ctype(xt.dtype) + "* x, const " + ctype(wt.dtype) +
                       "* wg, const " + ctype(ut.dtype) + "* wu, const " + ctype(it.dtype) +
                       "* ids";
  if (bias)
    params += ", const " + ctype(fn.type(node.operands[4]).dtype) + "* bg, const " +
              ctype(fn.type(node.operands[5]).dtype) + "* bu";
  std::string b = "extern \"C\" __global__ void __launch_bounds__(" +
                  std::to_string(32 * kWarps) + ") KERNEL(" + params + ") {\n";
  b += expertLoopOpen(il, xl, X, kk, N);
  b += "      float ag = 0.0f, au = 0.0f;\n";
  b += "      const bool valid = e >= 0 && e < " + ilit(E) + ";\n";
  b += "      if (valid) {\n";
  b += "        const long long grow = " + offsetExpr(gl, {"e", "n", ""}) +
       ", urow = " + offsetExpr(ul, {"e", "n", ""}) + ";\n";
  std::string xs2 = ilit(xl.strides[2]);
  WStream gs{"wg", "grow", gl.strides[2], {gl.offset, gl.strides[0], gl.strides[1]},
             [](const std::string &wv, const std::string &) { return "const float gv = " + wv + ";"; }};
  WStream us{"wu", "urow", ul.strides[2], {ul.offset, ul.strides[0], ul.strides[1]},
             [&](const std::string &wv, const std::string &k) {
               return "{ const float uv = " + wv + ", xv = fg_to_f(x[xoff + " + k + " * " + xs2 +
                      "]); ag += gv * xv; au += uv * xv; }";
             }};
  b += kLoop(wt.dtype, K, {gs, us}, "        ", wt.dtype == ut.dtype);
  b += "      }\n";
  b += "      float g = fg_warp_sum(ag), u = fg_warp_sum(au);\n";
  b += "      if (lane == 0) {\n";
  if (bias) {
    // add_id adds 0 for an out-of-range expert, like the unfused kernel.
    b += "        if (valid) {\n";
    b += "          g = g + fg_to_f(bg[" + offsetExpr(ls[4], {"e", "n"}) + "]);\n";
    b += "          u = u + fg_to_f(bu[" + offsetExpr(ls[5], {"e", "n"}) + "]);\n";
    b += "        } else { g = g + 0.0f; u = u + 0.0f; }\n";
  }
  b += "        float r;\n" + gluStatements(node, "g", "u", "r");
  b += "        y[pr * " + ilit(N) + " + n] = r;\n      }\n    }\n  }\n}\n";
  KernelSpec k = finishSpec(node.info().mnemonic, b);
  k.grid[0] = gridFor(N, kWarps);
  k.grid[1] = static_cast<unsigned>(std::clamp<int64_t>(pairs, 1, 65535));
  k.block[0] = 32 * kWarps;
  k.params = {Param::result(0), Param::operand(0), Param::operand(1), Param::operand(2),
              Param::operand(3)};
  if (bias) {
    k.params.push_back(Param::operand(4));
    k.params.push_back(Param::operand(5));
  }
  return std::vector<Launch>{std::move(k)};
}

} // namespace

llvm::Expected<std::vector<Launch>> emitGemv(const Function &fn, const Node &node,
                                             llvm::ArrayRef<Layout> ls, const EmitOptions &o) {
  if (node.kind == OpKind::FusedGatedMatmul)
    return emitGatedGemv(fn, node, ls);
  if (node.kind == OpKind::FusedGatedMatmulId)
    return emitGatedMatMulId(fn, node, ls);
  if (node.kind == OpKind::MatMulId)
    return emitMatMulId(fn, node, ls);
  if (fn.type(node.operands[0]).numRows() <= o.maxGemvTokens)
    return emitDenseGemv(fn, node, ls);
  return emitCublas(fn, node, ls);
}

} // namespace fg::cuda::detail
