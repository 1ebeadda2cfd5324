//===- ElementwiseEmitter.cpp - one thread per output element --------------===//
//
// Every op whose output element depends on a fixed set of input elements:
// binary arithmetic with numpy broadcasting, scale, clamp, unary math, glu,
// convert, cont, repeat, concat, get_rows, set_rows, add_id, and the fused
// elementwise ops (add/mul chains, unary_mul, relu_sqr, softcap,
// moe_weighted_sum: each step rounds to the dtype its decomposition stores,
// so the fused kernel equals the unfused chain). The kernel is a
// grid-stride loop over the iteration space (the output, or the source rows
// for set_rows); each index is unravelled with constant divisors and every
// operand is read through its own strides, so views are never materialised.
//
//   add(a: f32[3, 5], b: f32[5])  ->
//     out[i] = fg_to_f(in0[c0*5 + c1]) + fg_to_f(in1[c1])
//
//===----------------------------------------------------------------------===//
#include "codegen/cuda/EmitterCommon.h"

#include "llvm/Support/FormatVariadic.h"

#include <cassert>
#include <cmath>

namespace fg::cuda::detail {
namespace {

constexpr unsigned kThreads = 256;

struct Ctx {
  const Function &fn;
  const Node &node;
  llvm::ArrayRef<Layout> layouts;

  DType opType(unsigned i) const { return fn.type(node.operands[i]).dtype; }
  DType resType() const { return fn.type(node.result()).dtype; }
  const Shape &resShape() const { return fn.type(node.result()).shape; }
  std::string in(unsigned i) const { return "in" + std::to_string(i); }
  /// Raw element of operand i at coordinates (one per operand dim).
  std::string elem(unsigned i, llvm::ArrayRef<std::string> coords) const {
    return in(i) + "[" + offsetExpr(layouts[i], coords) + "]";
  }
  /// Operand i read as float, broadcast against the output.
  std::string realB(unsigned i) const {
    return "fg_to_f(" + elem(i, broadcastCoords(layouts[i].shape, resShape().size(), "c")) + ")";
  }
  /// Operand i read as long long, broadcast against the output.
  std::string intB(unsigned i) const {
    return "((long long)" + elem(i, broadcastCoords(layouts[i].shape, resShape().size(), "c")) +
           ")";
  }
};

/// Converts an expression of dtype `from` (raw storage) to a stored value of `to`.
std::string convertExpr(DType from, DType to, const std::string &raw) {
  if (from == to)
    return raw;
  if (isInteger(from) && isInteger(to))
    return "(" + ctype(to) + ")(" + raw + ")";
  if (isInteger(from))
    return "fg_from_f<" + ctype(to) + ">((float)(" + raw + "))";
  if (isInteger(to))
    return "fg_from_f<" + ctype(to) + ">(fg_to_f(" + raw + "))";
  return "fg_from_f<" + ctype(to) + ">(fg_to_f(" + raw + "))";
}

/// `v` (a float expression) rounded through dtype `t` (identity for f32), as a
/// value the reference stores in `t` and reads back.
std::string roundTo(DType t, const std::string &v) {
  if (t == DType::F32)
    return "(" + v + ")";
  return "fg_to_f(fg_from_f<" + ctype(t) + ">(" + v + "))";
}

std::string unaryExpr(OpKind k, const Node &node, const std::string &x) {
  switch (k) {
  case OpKind::Scale:
    return x + " * " + flit(node.f("scale")) + " + " + flit(node.f("bias"));
  case OpKind::Clamp:
    return "fminf(fmaxf(" + x + ", " + flit(node.f("min")) + "), " + flit(node.f("max")) + ")";
  case OpKind::Sqrt:
    return "sqrtf(" + x + ")";
  case OpKind::Sqr:
    return x + " * " + x;
  case OpKind::Exp:
    return "expf(" + x + ")";
  case OpKind::Tanh:
    return "tanhf(" + x + ")";
  case OpKind::Sigmoid:
    return "1.0f / (1.0f + expf(-" + x + "))";
  case OpKind::Silu:
    return x + " / (1.0f + expf(-" + x + "))";
  case OpKind::Gelu:
    return "0.5f * " + x + " * (1.0f + tanhf(0.7978845608028654f * (" + x + " + 0.044715f * " + x +
           " * " + x + " * " + x + ")))";
  case OpKind::Relu:
    return "fmaxf(" + x + ", 0.0f)";
  case OpKind::Softplus:
    return "(" + x + " > 20.0f ? " + x + " : log1pf(expf(" + x + ")))";
  default:
    assert(false && "not a unary op");
    return x;
  }
}

bool isUnary(OpKind k) {
  switch (k) {
  case OpKind::Scale:
  case OpKind::Clamp:
  case OpKind::Sqrt:
  case OpKind::Sqr:
  case OpKind::Exp:
  case OpKind::Tanh:
  case OpKind::Sigmoid:
  case OpKind::Silu:
  case OpKind::Gelu:
  case OpKind::Relu:
  case OpKind::Softplus:
    return true;
  default:
    return false;
  }
}

/// The loop around `body`: iterate over `space`, coordinates c0..c(r-1).
std::string loopKernel(const std::string &params, llvm::ArrayRef<int64_t> space,
                       const std::string &body) {
  std::string s = "extern \"C\" __global__ void __launch_bounds__(" + std::to_string(kThreads) +
                  ") KERNEL(" + params + ") {\n";
  s += "  for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < " +
       ilit(product(space)) + "; i += (long long)gridDim.x * blockDim.x) {\n";
  s += unravel("i", space, "c");
  s += body;
  s += "  }\n}\n";
  return s;
}

std::string outParam(DType t) { return ctype(t) + "* out"; }
std::string inParam(DType t, unsigned i) { return "const " + ctype(t) + "* in" + std::to_string(i); }

KernelSpec makeSpec(const Node &node, std::string body, llvm::ArrayRef<int64_t> space,
                    std::vector<Param> params) {
  KernelSpec k = finishSpec(node.info().mnemonic, std::move(body));
  k.grid[0] = gridFor(product(space), kThreads);
  k.block[0] = kThreads;
  k.params = std::move(params);
  return k;
}

/// out[i] = f(operands...), iteration space = result shape.
llvm::Expected<KernelSpec> emitMap(const Ctx &c) {
  const Node &n = c.node;
  OpKind k = n.kind;
  DType rt = c.resType();
  std::string params = outParam(rt);
  std::vector<Param> ps{Param::result(0)};
  unsigned nIn = static_cast<unsigned>(n.operands.size());
  for (unsigned i = 0; i < nIn; ++i) {
    params += ", " + inParam(c.opType(i), i);
    ps.push_back(Param::operand(i));
  }
  std::string st = ctype(rt), v;
  const Shape &out = c.resShape();
  size_t R = out.size();

  switch (k) {
  case OpKind::Add:
  case OpKind::Sub:
  case OpKind::Mul:
  case OpKind::Div: {
    const char *op = k == OpKind::Add ? " + " : k == OpKind::Sub ? " - " : k == OpKind::Mul ? " * "
                                                                                           : " / ";
    if (isInteger(rt)) {
      std::string a = c.intB(0), b = c.intB(1);
      if (k == OpKind::Div)
        v = "(" + st + ")(" + b + " == 0 ? 0LL : " + a + " / " + b + ")";
      else
        v = "(" + st + ")(" + a + op + b + ")";
    } else {
      v = "fg_from_f<" + st + ">(" + c.realB(0) + op + c.realB(1) + ")";
    }
    break;
  }
  case OpKind::Glu: {
    std::string body = "    const float g = " + c.realB(0) + ";\n    const float u = " + c.realB(1) +
                       ";\n    float y;\n" + gluStatements(n, "g", "u", "y");
    body += "    out[i] = fg_from_f<" + st + ">(y);\n";
    return makeSpec(n, loopKernel(params, out, body), out, ps);
  }
  case OpKind::FusedAddChain:
  case OpKind::FusedMulChain: {
    // Each link rounds to its own result dtype (binary rule: equal dtypes keep
    // theirs, mixed floats give f32), exactly as the decomposition stores it.
    const char *op = k == OpKind::FusedAddChain ? " + " : " * ";
    DType t = c.opType(0);
    std::string body = "    float a = " + c.realB(0) + ";\n";
    for (unsigned i = 1; i < nIn; ++i) {
      t = t == c.opType(i) ? t : DType::F32;
      body += "    a = " + roundTo(t, "a" + std::string(op) + c.realB(i)) + ";\n";
    }
    body += "    out[i] = fg_from_f<" + st + ">(a);\n";
    return makeSpec(n, loopKernel(params, out, body), out, ps);
  }
  case OpKind::FusedUnaryMul: {
    static constexpr OpKind kActs[] = {OpKind::Silu, OpKind::Sigmoid, OpKind::Softplus};
    OpKind act = kActs[n.i("act")];
    std::string body = "    const float x = " + c.realB(0) + ";\n";
    body += "    const float a = " + roundTo(c.opType(0), unaryExpr(act, n, "x")) + ";\n";
    body += "    out[i] = fg_from_f<" + st + ">(a * " + c.realB(1) + ");\n";
    return makeSpec(n, loopKernel(params, out, body), out, ps);
  }
  case OpKind::FusedReluSqr: {
    // relu is exact in every float type; sqr rounds once.
    std::string body = "    const float r = fmaxf(" + c.realB(0) + ", 0.0f);\n";
    body += "    out[i] = fg_from_f<" + st + ">(r * r);\n";
    return makeSpec(n, loopKernel(params, out, body), out, ps);
  }
  case OpKind::FusedSoftcap: {
    std::string body = "    const float a = " + roundTo(c.opType(0), c.realB(0) + " * " +
                                                              flit(n.f("in_scale")) + " + 0.0f") +
                       ";\n";
    body += "    const float t = " + roundTo(c.opType(0), "tanhf(a)") + ";\n";
    body += "    out[i] = fg_from_f<" + st + ">(t * " + flit(n.f("out_scale")) + " + 0.0f);\n";
    return makeSpec(n, loopKernel(params, out, body), out, ps);
  }
  case OpKind::FusedMoeWeightedSum: {
    // out[t, n] = Σ_j (experts[t, j, n] (· scale[t, j])) · weights[t, j], in
    // slot order (the decomposition's adds: slot j is added to the sum so far).
    const Layout &el = c.layouts[0];
    int64_t kk = el.shape[1];
    bool hasScale = nIn > 2;
    auto slotVec = [&](unsigned op) { return "fg_to_f(" + c.elem(op, {"c0", "j", ""}) + ")"; };
    std::string body = "    float s = 0.0f;\n";
    body += "    for (long long j = 0; j < " + ilit(kk) + "; ++j) {\n";
    body += "      float e = fg_to_f(" + c.elem(0, {"c0", "j", "c1"}) + ");\n";
    if (hasScale)
      body += "      e = e * " + slotVec(2) + ";\n";
    body += "      const float y = e * " + slotVec(1) + ";\n";
    body += "      s = j == 0 ? y : y + s;\n    }\n";
    body += "    out[i] = fg_from_f<" + st + ">(s);\n";
    return makeSpec(n, loopKernel(params, out, body), out, ps);
  }
  case OpKind::Convert:
  case OpKind::Cont:
    v = convertExpr(c.opType(0), rt, c.elem(0, coordNames(R, "c")));
    break;
  case OpKind::Repeat: {
    std::vector<std::string> co;
    for (size_t d = 0; d < R; ++d)
      co.push_back(c.layouts[0].shape[d] == 1 ? std::string()
                                              : "(c" + std::to_string(d) + " % " +
                                                    ilit(c.layouts[0].shape[d]) + ")");
    v = c.elem(0, co);
    break;
  }
  case OpKind::Concat: {
    int64_t axis = n.i("axis");
    int64_t split = c.layouts[0].shape[axis];
    std::vector<std::string> ca = coordNames(R, "c"), cb = ca;
    cb[axis] = "(c" + std::to_string(axis) + " - " + ilit(split) + ")";
    v = "c" + std::to_string(axis) + " < " + ilit(split) + " ? " + c.elem(0, ca) + " : " +
        c.elem(1, cb);
    break;
  }
  case OpKind::GetRows: {
    // out [B.., N, C..]; idx [B.., N]; table [B.., R, C..].
    const Layout &tl = c.layouts[0], &il = c.layouts[1];
    size_t idxRank = il.shape.size(), batch = idxRank - 1;
    std::vector<std::string> ic = coordNames(idxRank, "c"), tc;
    for (size_t d = 0; d < batch; ++d)
      tc.push_back("c" + std::to_string(d));
    tc.push_back("row");
    for (size_t d = idxRank; d < R; ++d)
      tc.push_back("c" + std::to_string(d));
    std::string body = "    const long long row = (long long)" + c.elem(1, ic) + ";\n";
    std::string val = isInteger(rt) ? c.elem(0, tc) : "fg_to_f(" + c.elem(0, tc) + ")";
    body += "    out[i] = (row >= 0 && row < " + ilit(tl.shape[batch]) + ") ? " + val + " : (" +
            st + ")0;\n";
    return makeSpec(n, loopKernel(params, out, body), out, ps);
  }
  case OpKind::AddId: {
    // a [T, k, N] + b[ids[t, j], n]
    const Layout &bl = c.layouts[1];
    std::string body = "    const long long e = (long long)" + c.elem(2, {"c0", "c1"}) + ";\n";
    body += "    const float bv = (e >= 0 && e < " + ilit(bl.shape[0]) + ") ? fg_to_f(" +
            c.elem(1, {"e", "c2"}) + ") : 0.0f;\n";
    body += "    out[i] = fg_from_f<" + st + ">(fg_to_f(" + c.elem(0, {"c0", "c1", "c2"}) +
            ") + bv);\n";
    return makeSpec(n, loopKernel(params, out, body), out, ps);
  }
  default:
    if (!isUnary(k))
      return unsupported(n, "the elementwise family");
    v = "fg_from_f<" + st + ">(" + unaryExpr(k, n, "x") + ")";
    std::string body = "    const float x = " + c.realB(0) + ";\n    out[i] = " + v + ";\n";
    return makeSpec(n, loopKernel(params, out, body), out, ps);
  }
  return makeSpec(n, loopKernel(params, out, "    out[i] = " + v + ";\n"), out, ps);
}

/// set_rows(dst, src [N, C..], idx [N]): dst[idx[n], c..] = src[n, c..], in
/// place: Result 0 is operand 0's buffer.
KernelSpec emitSetRows(const Ctx &c) {
  const Layout &dl = c.layouts[0], &sl = c.layouts[1];
  DType dt = c.opType(0), sdt = c.opType(1);
  size_t R = sl.shape.size();
  std::string params = ctype(dt) + "* dst, " + inParam(sdt, 1) + ", " + inParam(c.opType(2), 2);
  std::vector<std::string> sc = coordNames(R, "c"), dc = sc;
  dc[0] = "row";
  std::string body = "    const long long row = (long long)" + c.elem(2, {"c0"}) + ";\n";
  body += "    if (row < 0 || row >= " + ilit(dl.shape[0]) + ") continue;\n";
  body += "    dst[" + offsetExpr(dl, dc) + "] = " + convertExpr(sdt, dt, c.elem(1, sc)) + ";\n";
  return makeSpec(c.node, loopKernel(params, sl.shape, body), sl.shape,
                  {Param::result(0), Param::operand(1), Param::operand(2)});
}

} // namespace

bool isElementwiseFamily(OpKind k) {
  switch (k) {
  case OpKind::Add:
  case OpKind::Sub:
  case OpKind::Mul:
  case OpKind::Div:
  case OpKind::Glu:
  case OpKind::Convert:
  case OpKind::Cont:
  case OpKind::Repeat:
  case OpKind::Concat:
  case OpKind::GetRows:
  case OpKind::SetRows:
  case OpKind::AddId:
  case OpKind::FusedAddChain:
  case OpKind::FusedMulChain:
  case OpKind::FusedUnaryMul:
  case OpKind::FusedReluSqr:
  case OpKind::FusedSoftcap:
  case OpKind::FusedMoeWeightedSum:
    return true;
  default:
    return isUnary(k);
  }
}

llvm::Expected<std::vector<Launch>> emitElementwise(const Function &fn, const Node &node,
                                                    llvm::ArrayRef<Layout> layouts,
                                                    const EmitOptions &) {
  Ctx c{fn, node, layouts};
  if (node.kind == OpKind::SetRows)
    return std::vector<Launch>{emitSetRows(c)};
  auto k = emitMap(c);
  if (!k)
    return k.takeError();
  return std::vector<Launch>{std::move(*k)};
}

std::string gluStatements(const Node &n, llvm::StringRef g, llvm::StringRef u, llvm::StringRef y) {
  std::string G = g.str(), U = u.str(), Y = y.str(), s;
  double alpha = n.f("alpha"), limit = n.f("limit");
  switch (n.e<GluKind>("kind")) {
  case GluKind::SwiGLU:
    s += "    " + Y + " = " + G + " / (1.0f + expf(-" + G + ")) * " + U + ";\n";
    break;
  case GluKind::GeGLU:
    s += "    " + Y + " = " + unaryExpr(OpKind::Gelu, n, G) + ";\n    " + Y + " *= " + U + ";\n";
    break;
  case GluKind::SwiGLUOAI:
    s += "    { const float gc = fminf(" + G + ", " + flit(limit) + ");\n      const float uc = fminf(fmaxf(" +
         U + ", " + flit(-limit) + "), " + flit(limit) + ");\n      " + Y + " = gc / (1.0f + expf(-" +
         flit(alpha) + " * gc)) * (uc + 1.0f); }\n";
    break;
  case GluKind::SwiGLUClamp:
    s += "    { const float gc = fminf(" + G + ", " + flit(limit) + ");\n      const float uc = fminf(fmaxf(" +
         U + ", " + flit(-limit) + "), " + flit(limit) + ");\n      " + Y +
         " = gc / (1.0f + expf(-gc)) * uc; }\n";
    break;
  }
  return s;
}

KernelSpec emitCopyKernel(DType from, const Layout &layout, DType to, Param dst, Param src) {
  size_t R = layout.shape.size();
  std::string params = ctype(to) + "* out, const " + ctype(from) + "* in0";
  std::string raw = "in0[" + offsetExpr(layout, coordNames(R, "c")) + "]";
  std::string body = "    out[i] = " + convertExpr(from, to, raw) + ";\n";
  KernelSpec k = finishSpec("convert", loopKernel(params, layout.shape, body));
  k.grid[0] = gridFor(product(layout.shape), kThreads);
  k.block[0] = kThreads;
  k.params = {dst, src};
  return k;
}

} // namespace fg::cuda::detail
