//===- FusedRowEmitter.cpp - row-wise anchors with epilogues ---------------===//
//
// One block per row (a grid-stride loop over rows), like RowEmitter, with the
// fused op's steps composed into one kernel:
//
//   anchor     [rms_norm: block sum of squares → scale]
//   epilogue   [· w] [+ residual] [rope: pair (i0, i1) rotated in registers]
//   store      dense result row, or [set_rows: dest[indices[t], h, :] in the
//              dest's dtype, in place: Result 0 is operand 0's buffer]
//
// fused.rms_norm_mul, rms_norm_mul_add, rms_norm_mul_rope,
// rms_norm_mul_rope_set_rows and rope_set_rows are that one generator with
// different steps switched on. Each value is computed in the order and
// precision of the op's decomposition (f32, rope angles in f64; the rope
// result rounds to its dtype before the cache conversion). Positions and
// row indices are read from device memory, so one graph serves every step.
//
// fused.topk_moe(logits [T, E], bias [E]?) -> ids i32[T, k], weights f32[T, k]:
// the block stages its rows' logits in shared memory, computes the gate
// (softmax, sigmoid or sqrt(softplus), in f64 like the reference, rounded to
// f32), adds the selection bias, ranks every expert by counting (value, then
// lower index first: top_k's order), and the k winners gather the unbiased
// probabilities; one thread then applies the delayed softmax over the k,
// renormalisation (Σ → clamp(min) → div) and the scale. When T <= 4 one block
// takes every row and reads all logits before writing any result, which is
// what passes/memory/OverlapProof.cpp declares for this op (the results may
// share the logits' bytes).
//
//===----------------------------------------------------------------------===//
#include "codegen/cuda/EmitterCommon.h"

#include "llvm/Support/FormatVariadic.h"

#include <algorithm>
#include <cassert>

namespace fg::cuda::detail {
namespace {

/// Which operand plays which part; -1: absent.
struct Roles {
  int dest = -1, x = -1, w = -1, residual = -1, positions = -1, indices = -1, ff = -1;
  bool rope = false;
};

Roles rolesOf(const Node &n) {
  Roles r;
  int count = static_cast<int>(n.operands.size());
  auto opt = [&](int i) { return i < count ? i : -1; };
  switch (n.kind) {
  case OpKind::FusedRmsNormMul:
    r.x = 0, r.w = 1;
    break;
  case OpKind::FusedRmsNormMulAdd:
    r.x = 0, r.w = 1, r.residual = 2;
    break;
  case OpKind::FusedRmsNormMulRope:
    r.x = 0, r.w = 1, r.positions = 2, r.ff = opt(3), r.rope = true;
    break;
  case OpKind::FusedRmsNormMulRopeSetRows:
    r.dest = 0, r.x = 1, r.w = 2, r.positions = 3, r.indices = 4, r.ff = opt(5), r.rope = true;
    break;
  case OpKind::FusedRopeSetRows:
    r.dest = 0, r.x = 1, r.positions = 2, r.indices = 3, r.ff = opt(4), r.rope = true;
    break;
  default:
    assert(false && "not a fused norm/rope row");
  }
  return r;
}

/// Offset of element `col` of the current row (coordinates r0..) of an
/// operand with layout `l`, broadcast against a row space of rank `rank`.
std::string rowElem(const Layout &l, size_t rank, const std::string &col) {
  std::vector<std::string> co = broadcastCoords(l.shape, rank, "r");
  if (!co.empty() && !co.back().empty())
    co.back() = col;
  return offsetExpr(l, co);
}

llvm::Expected<std::vector<Launch>> emitNormRope(const Function &fn, const Node &node,
                                                 llvm::ArrayRef<Layout> ls) {
  Roles ro = rolesOf(node);
  const TensorType &xt = fn.type(node.operands[ro.x]);
  size_t rank = xt.shape.size();
  if (rank == 0)
    return unsupported(node, "a scalar input");
  if (ro.rope && rank != 3)
    return unsupported(node, "a rope input that is not [T, H, D]");
  Shape outer(xt.shape.begin(), xt.shape.end() - 1);
  int64_t rows = product(outer), len = xt.shape.back();
  int64_t nDims = ro.rope ? node.i("n_dims") : 0;
  DType st = ro.dest >= 0 ? fn.type(node.operands[ro.dest]).dtype : fn.type(node.result()).dtype;
  // The rope's own result dtype (its input's): the value rounds to it before
  // a cache store converts it (f16 rows only go to an f16 cache).
  DType ropeT = ro.w >= 0 ? DType::F32 : xt.dtype;

  unsigned nt = ro.rope ? threadsForRow(std::max<int64_t>(nDims / 2, len - nDims), 256)
                        : threadsForRow(len, 256);
  // Parameters: the written buffer first, then the operands read.
  std::string params = ctype(st) + "* out";
  std::vector<Param> ps{Param::result(0)};
  auto addIn = [&](int i, const char *name) {
    if (i < 0)
      return;
    params += ", const " + ctype(fn.type(node.operands[i]).dtype) + "* " + name;
    ps.push_back(Param::operand(static_cast<unsigned>(i)));
  };
  addIn(ro.x, "x");
  addIn(ro.w, "w");
  addIn(ro.residual, "res");
  addIn(ro.positions, "pos");
  addIn(ro.indices, "idx");
  addIn(ro.ff, "ff");

  std::string b = "#define NT " + std::to_string(nt) +
                  "\nextern \"C\" __global__ void __launch_bounds__(NT) KERNEL(" + params +
                  ") {\n";
  b += "  for (long long row = blockIdx.x; row < " + ilit(rows) + "; row += gridDim.x) {\n";
  b += unravel("row", outer, "r");
  auto X = [&](const std::string &col) {
    return "fg_to_f(x[" + rowElem(ls[ro.x], rank, col) + "])";
  };
  if (ro.indices >= 0) {
    // set_rows: the cache row this token goes to; rows out of range are skipped
    // (uniform over the block, before any reduction).
    const Layout &dl = ls[ro.dest];
    b += "    const long long drow = (long long)idx[" + offsetExpr(ls[ro.indices], {"r0"}) + "];\n";
    b += "    if (drow < 0 || drow >= " + ilit(dl.shape[0]) + ") continue;\n";
  }
  if (ro.w >= 0) {
    b += "    float ss = 0.0f;\n";
    b += "    for (long long col = threadIdx.x; col < " + ilit(len) +
         "; col += NT) { const float v = " + X("col") + "; ss += v * v; }\n";
    b += "    ss = fg_block_sum<NT>(ss);\n";
    b += "    const float scale = 1.0f / sqrtf(ss / " + flit(static_cast<double>(len)) + " + " +
         flit(node.f("eps")) + ");\n";
  }
  // The value of channel `col` after the anchor and the elementwise epilogue.
  auto val = [&](const std::string &col) {
    if (ro.w < 0)
      return X(col);
    std::string v = "(" + X(col) + " * scale) * fg_to_f(w[" + rowElem(ls[ro.w], rank, col) + "])";
    if (ro.residual >= 0)
      v = "(" + v + ") + fg_to_f(res[" + rowElem(ls[ro.residual], rank, col) + "])";
    return v;
  };
  auto store = [&](const std::string &col, const std::string &v) {
    std::string where = ro.dest >= 0 ? offsetExpr(ls[ro.dest], {"drow", "r1", col})
                                     : "row * " + ilit(len) + " + " + col;
    std::string value = v;
    if (ro.rope && ro.dest >= 0 && ropeT != DType::F32 && ropeT != st)
      value = "fg_to_f(fg_from_f<" + ctype(ropeT) + ">(" + v + "))";
    return "out[" + where + "] = fg_from_f<" + ctype(st) + ">(" + value + ");";
  };
  if (!ro.rope) {
    b += "    for (long long col = threadIdx.x; col < " + ilit(len) + "; col += NT) { " +
         store("col", val("col")) + " }\n";
  } else {
    b += "    const double p = (double)pos[" + offsetExpr(ls[ro.positions], {"r0"}) + "];\n";
    b += "    for (long long i = threadIdx.x; i < " + ilit(nDims / 2) + "; i += NT) {\n";
    b += ropePairStatements(node,
                            ro.ff >= 0 ? "fg_to_f(ff[" + offsetExpr(ls[ro.ff], {"i"}) + "])" : "");
    b += "      const float a = " + val("i0") + ", bb = " + val("i1") + ";\n";
    b += "      " + store("i0", "a * cs - bb * sn") + "\n";
    b += "      " + store("i1", "a * sn + bb * cs") + "\n";
    b += "    }\n";
    if (nDims < len)
      b += "    for (long long c = " + ilit(nDims) + " + threadIdx.x; c < " + ilit(len) +
           "; c += NT) { " + store("c", val("c")) + " }\n";
  }
  b += "  }\n}\n";
  KernelSpec k = finishSpec(node.info().mnemonic, b);
  k.grid[0] = static_cast<unsigned>(std::clamp<int64_t>(rows, 1, int64_t(1) << 20));
  k.block[0] = nt;
  k.params = std::move(ps);
  return std::vector<Launch>{std::move(k)};
}

llvm::Expected<std::vector<Launch>> emitTopkMoe(const Function &fn, const Node &node,
                                                llvm::ArrayRef<Layout> ls) {
  const TensorType &lt = fn.type(node.operands[0]);
  bool hasBias = node.operands.size() > 1;
  if (lt.rank() != 2)
    return unsupported(node, "logits " + lt.str() + " that are not [T, E]");
  int64_t T = lt.shape[0], E = lt.shape[1], K = node.i("k");
  if (K < 1 || K > E)
    return unsupported(node, llvm::formatv("k = {0} of {1} experts", K, E).str());
  // Rows staged per block: all of them (one block) when the results may alias
  // the logits (CudaTarget::readsAllBeforeWrite), else one.
  int64_t rpb = T <= kTopkMoeAliasRows ? std::max<int64_t>(T, 1) : 1;
  // Shared: logits of the block's rows, and per expert p and the selection key.
  uint64_t shared = static_cast<uint64_t>(rpb * E + 2 * E) * 4 + static_cast<uint64_t>(K) * 4;
  if (shared > 48 * 1024)
    return unsupported(node, llvm::formatv("{0} experts (shared memory)", E).str());
  using enum TopkGating;
  TopkGating gating = static_cast<TopkGating>(node.i("gating"));
  bool renorm = node.i("renorm") != 0;
  double scale = node.f("scale");
  unsigned nt = threadsForRow(E, 512);

  std::string params = "int* ids, float* wout, const " + ctype(lt.dtype) + "* logits";
  if (hasBias)
    params += ", const " + ctype(fn.type(node.operands[1]).dtype) + "* bias";
  std::string b;
  b += "static __device__ __forceinline__ float key(float v) { return isnan(v) ? -FG_INF : v; }\n";
  b += "static __device__ __forceinline__ double fg_block_sum_d(double v, double* sh) {\n";
  b += "#pragma unroll\n  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);\n";
  b += "  __syncthreads();\n  if ((threadIdx.x & 31) == 0) sh[threadIdx.x >> 5] = v;\n";
  b += "  __syncthreads();\n  double s = 0.0;\n";
  b += "  for (int w = 0; w < (int)(NT / 32); ++w) s += sh[w];\n  return s;\n}\n";
  b = "#define NT " + std::to_string(nt) + "\n#define E " + std::to_string(E) + "\n#define RPB " +
      std::to_string(rpb) + "\n" + b;
  b += "extern \"C\" __global__ void __launch_bounds__(NT) KERNEL(" + params + ") {\n";
  b += "  extern __shared__ float smem[];\n";
  b += "  float* lg = smem;            // [RPB][E] staged logits\n";
  b += "  float* pr = lg + RPB * E;    // [E] gate probabilities\n";
  b += "  float* sel = pr + E;         // [E] selection keys\n";
  b += "  float* wk = sel + E;         // [k] chosen weights\n";
  b += "  __shared__ double shd[32];\n";
  b += "  __shared__ float shf[32];\n";
  b += "  for (long long r0 = (long long)blockIdx.x * RPB; r0 < " + ilit(T) +
       "; r0 += (long long)gridDim.x * RPB) {\n";
  b += "    const int nr = (int)min((long long)RPB, " + ilit(T) + " - r0);\n";
  b += "    __syncthreads();\n";
  b += "    for (int q = 0; q < nr; ++q)\n";
  b += "      for (int e = threadIdx.x; e < E; e += NT) lg[q * E + e] = fg_to_f(logits[" +
       offsetExpr(ls[0], {"(r0 + q)", "e"}) + "]);\n";
  b += "    __syncthreads();\n";
  b += "    for (int q = 0; q < nr; ++q) {\n";
  b += "      const long long row = r0 + q;\n";
  b += "      const float* x = lg + q * E;\n";
  // 1. gate probabilities (as the reference: f64 math, stored as f32).
  switch (gating) {
  case Softmax:
  case DelayedSoftmax: {
    // Delayed: the selection is on raw logits; the softmax runs over the k later.
    if (gating == DelayedSoftmax) {
      b += "      for (int e = threadIdx.x; e < E; e += NT) pr[e] = x[e];\n";
      break;
    }
    b += "      float mx = -FG_INF;\n";
    b += "      for (int e = threadIdx.x; e < E; e += NT) mx = fmaxf(mx, x[e]);\n";
    b += "      mx = fg_warp_max(mx);\n";
    b += "      __syncthreads();\n      if ((threadIdx.x & 31) == 0) shf[threadIdx.x >> 5] = mx;\n";
    b += "      __syncthreads();\n";
    b += "      mx = -FG_INF;\n      for (int w = 0; w < (int)(NT / 32); ++w) mx = fmaxf(mx, "
         "shf[w]);\n";
    b += "      double se = 0.0;\n";
    b += "      for (int e = threadIdx.x; e < E; e += NT) se += mx == -FG_INF ? 0.0 : exp((double)x[e] "
         "- (double)mx);\n";
    b += "      se = fg_block_sum_d(se, shd);\n";
    b += "      for (int e = threadIdx.x; e < E; e += NT) pr[e] = se > 0.0 && mx != -FG_INF ? "
         "(float)(exp((double)x[e] - (double)mx) / se) : 0.0f;\n";
    break;
  }
  case Sigmoid:
    b += "      for (int e = threadIdx.x; e < E; e += NT) pr[e] = (float)(1.0 / (1.0 + "
         "exp(-(double)x[e])));\n";
    break;
  case SqrtSoftplus:
    b += "      for (int e = threadIdx.x; e < E; e += NT) {\n";
    b += "        const double v = (double)x[e];\n";
    b += "        const float sp = (float)(v > 20.0 ? v : log1p(exp(v)));\n";
    b += "        pr[e] = (float)sqrt((double)sp);\n      }\n";
    break;
  default:
    return unsupported(node, llvm::formatv("gating {0}", static_cast<int64_t>(gating)).str());
  }
  // 2. selection keys: the biased probabilities (the bias steers the choice only).
  b += "      for (int e = threadIdx.x; e < E; e += NT) sel[e] = key(pr[e]";
  if (hasBias)
    b += " + fg_to_f(bias[" + ilit(ls[1].offset) + " + e * " + ilit(ls[1].strides.back()) + "])";
  b += ");\n";
  b += "      __syncthreads();\n";
  // 3. top-k by rank counting; the k winners gather the unbiased p.
  b += "      for (int e = threadIdx.x; e < E; e += NT) {\n";
  b += "        const float v = sel[e];\n        int rank = 0;\n";
  b += "        for (int j = 0; j < E; ++j) { const float u = sel[j]; rank += (u > v) || (u == v "
       "&& j < e); }\n";
  b += "        if (rank < " + ilit(K) + ") { ids[row * " + ilit(K) + " + rank] = e; wk[rank] = "
       "pr[e]; }\n";
  b += "      }\n";
  b += "      __syncthreads();\n";
  // 4. weight epilogue, serial over the k (as the reference's row loops).
  b += "      if (threadIdx.x == 0) {\n";
  if (gating == DelayedSoftmax) {
    b += "        double m = -(double)FG_INF, s = 0.0;\n";
    b += "        for (int j = 0; j < " + ilit(K) + "; ++j) m = fmax(m, (double)wk[j]);\n";
    b += "        for (int j = 0; j < " + ilit(K) + "; ++j) s += m == -(double)FG_INF ? 0.0 : "
         "exp((double)wk[j] - m);\n";
    b += "        for (int j = 0; j < " + ilit(K) + "; ++j) wk[j] = s > 0.0 && m != "
         "-(double)FG_INF ? (float)(exp((double)wk[j] - m) / s) : 0.0f;\n";
  }
  if (renorm) {
    b += "        double s = 0.0;\n";
    b += "        for (int j = 0; j < " + ilit(K) + "; ++j) s += (double)wk[j];\n";
    b += "        const float c = (float)fmax((double)(float)s, " + dlit(node.f("clamp_min")) +
         ");\n";
    b += "        for (int j = 0; j < " + ilit(K) + "; ++j) wk[j] = (float)((double)wk[j] / "
         "(double)c);\n";
  }
  if (scale != 1)
    b += "        for (int j = 0; j < " + ilit(K) + "; ++j) wk[j] = (float)((double)wk[j] * " +
         dlit(scale) + " + 0.0);\n";
  b += "        for (int j = 0; j < " + ilit(K) + "; ++j) wout[row * " + ilit(K) +
       " + j] = wk[j];\n";
  b += "      }\n";
  b += "      __syncthreads();\n";
  b += "    }\n  }\n}\n";
  KernelSpec k = finishSpec(node.info().mnemonic, b);
  k.grid[0] = static_cast<unsigned>(std::clamp<int64_t>((T + rpb - 1) / rpb, 1, int64_t(1) << 20));
  k.block[0] = nt;
  k.sharedBytes = static_cast<unsigned>(shared);
  k.params = {Param::result(0), Param::result(1), Param::operand(0)};
  if (hasBias)
    k.params.push_back(Param::operand(1));
  return std::vector<Launch>{std::move(k)};
}

} // namespace

bool isFusedRowFamily(OpKind k) {
  switch (k) {
  case OpKind::FusedRmsNormMul:
  case OpKind::FusedRmsNormMulAdd:
  case OpKind::FusedRmsNormMulRope:
  case OpKind::FusedRmsNormMulRopeSetRows:
  case OpKind::FusedRopeSetRows:
  case OpKind::FusedTopkMoe:
    return true;
  default:
    return false;
  }
}

llvm::Expected<std::vector<Launch>> emitFusedRow(const Function &fn, const Node &node,
                                                 llvm::ArrayRef<Layout> ls, const EmitOptions &) {
  if (node.kind == OpKind::FusedTopkMoe)
    return emitTopkMoe(fn, node, ls);
  return emitNormRope(fn, node, ls);
}

} // namespace fg::cuda::detail
