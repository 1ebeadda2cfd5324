//===- ElementwiseEmitter.cpp - one thread per output element --------------===//
//
// Every op whose output element depends on a fixed set of input elements:
// binary arithmetic with numpy broadcasting, scale, clamp, unary math, glu,
// convert, cont, repeat, concat, get_rows, set_rows, add_id, and the fused
// elementwise ops (add/mul chains, unary_mul, relu_sqr, softcap,
// moe_weighted_sum: each step rounds to the dtype its decomposition stores,
// so the fused kernel equals the unfused chain). They all run ewMap<Cfg> of
// kernels/elementwise.cuh: this file only chooses the element function
// (Cfg::Fn and its policies), the index space (the output, or the source rows
// for set_rows; at most four dims) and each operand's layout in it:
//
//   add(a: f32[3, 5], b: f32[5])  ->
//     struct Cfg { using Out = float;
//                  using Ins = fg::EwList<fg::EwOp<float, 0LL, 0LL, 0LL, 5LL, 1LL>,
//                                         fg::EwOp<float, 0LL, 0LL, 0LL, 0LL, 1LL>>;
//                  using Fn = fg::EwBinary<fg::BinAdd>; ... D2 = 3LL, D3 = 5LL; };
//
//===----------------------------------------------------------------------===//
#include "codegen/cuda/EmitterCommon.h"
#include "codegen/cuda/KernelSources.h"
#include "ir/OpViews.h"

#include "llvm/Support/FormatVariadic.h"

#include <algorithm>
#include <array>
#include <cassert>
#include <cstring>

namespace fg::cuda::detail {
namespace {

constexpr unsigned kThreads = 256;
/// Most dims of an elementwise index space (like ggml).
constexpr size_t kMaxDims = 4;

int32_t bitsOf(double v) {
  float f = static_cast<float>(v);
  int32_t b;
  std::memcpy(&b, &f, sizeof b);
  return b;
}

/// The element policy of kernels/elementwise.cuh for an attribute-free unary
/// op: every FG_UNARY row of ir/Ops.def runs fg::Un<Kind>, so a new unary op's
/// kernel line is its struct there. Null for any other op.
const char *plainUnaryPolicy(OpKind k) {
  switch (k) {
#define FG_UNARY(Kind, mnemonic)                                                                   \
  case OpKind::Kind:                                                                               \
    return "fg::Un" #Kind;
#include "ir/Ops.def"
  default:
    return nullptr;
  }
}

/// The unary ops: the attribute-free ones, scale and clamp (their attributes
/// become template arguments).
bool isUnary(OpKind k) {
  return k == OpKind::Scale || k == OpKind::Clamp || plainUnaryPolicy(k) != nullptr;
}

/// The policy computing unary node `n` (isUnary(n.kind)).
std::string unaryPolicy(const Node &n) {
  switch (n.kind) {
  case OpKind::Scale: {
    op::Scale s(n);
    return llvm::formatv("fg::UnScale<{0}, {1}>", bitsOf(s.scale()), bitsOf(s.bias())).str();
  }
  case OpKind::Clamp: {
    op::Clamp c(n);
    return llvm::formatv("fg::UnClamp<{0}, {1}>", bitsOf(c.min()), bitsOf(c.max())).str();
  }
  default:
    assert(plainUnaryPolicy(n.kind) && "unaryPolicy of a node that is not unary");
    return plainUnaryPolicy(n.kind);
  }
}

/// The storage type a fused step rounds to (float: no rounding).
std::string roundType(DType t) { return ctype(t); }

/// Which position dim each operand dim is read at (-1: read at 0).
using DimMap = std::vector<int>;
/// numpy broadcasting: operand dim d is output dim d + (outRank - rank).
DimMap broadcastMap(size_t rank, size_t outRank) {
  DimMap m(rank);
  for (size_t d = 0; d < rank; ++d)
    m[d] = static_cast<int>(d + outRank - rank);
  return m;
}
/// Leading dims: operand dim d is output dim d.
DimMap leadingMap(size_t rank) {
  DimMap m(rank);
  for (size_t d = 0; d < rank; ++d)
    m[d] = static_cast<int>(d);
  return m;
}

/// Stride of dim d, 0 when it has one element (read at 0).
int64_t strideOf(const Layout &l, size_t d) { return l.shape[d] == 1 ? 0 : l.strides[d]; }

/// The strides of `l` over the four (right-aligned) dims of an index space of
/// rank `outRank`.
std::array<int64_t, kMaxDims> ewStrides(const Layout &l, size_t outRank, const DimMap &map) {
  std::array<int64_t, kMaxDims> s = {0, 0, 0, 0};
  for (size_t d = 0; d < map.size(); ++d)
    if (map[d] >= 0)
      s[map[d] + kMaxDims - outRank] += strideOf(l, d);
  return s;
}

/// `fg::EwOp<T, off, s0, s1, s2, s3>` of `l` in an index space of rank `outRank`.
std::string ewOp(const Layout &l, DType t, size_t outRank, const DimMap &map) {
  std::array<int64_t, kMaxDims> s = ewStrides(l, outRank, map);
  return llvm::formatv("fg::EwOp<{0}, {1}, {2}, {3}, {4}, {5}>", ctype(t), ilit(l.offset),
                       ilit(s[0]), ilit(s[1]), ilit(s[2]), ilit(s[3]))
      .str();
}

/// Whether `l` is read at the output's own flat index in `space` (every dim
/// of more than one element at the space's row-major stride) from an offset
/// that keeps groups of 4 elements aligned: the vector form's operands.
bool flatOperand(const Layout &l, const Shape &space, const DimMap &map) {
  std::array<int64_t, kMaxDims> s = ewStrides(l, space.size(), map);
  int64_t contiguous = 1;
  for (size_t k = space.size(); k-- > 0;) {
    if (space[k] > 1 && s[k + kMaxDims - space.size()] != contiguous)
      return false;
    contiguous *= space[k];
  }
  return l.offset % 4 == 0;
}

/// Everything one launch of ewMap needs.
struct EwDesc {
  std::string mnemonic, fn, out;
  Shape space;
  std::vector<std::string> ins; ///< EwOp types, in parameter order
  std::vector<Param> params;    ///< result first, then the operands
  int ilp = 1;                  ///< elements a thread, prefetched first (Cfg::kIlp)
  bool vec = false;             ///< 4 elements a thread by vector loads (Cfg::kVec)
  int groups = 1;               ///< the vector form's groups of 4 a thread (Cfg::kGroups)
};

KernelSpec ewKernel(const EwDesc &d) {
  assert(d.space.size() <= kMaxDims && "checked by the caller");
  int64_t dims[kMaxDims] = {1, 1, 1, 1};
  for (size_t k = 0; k < d.space.size(); ++k)
    dims[kMaxDims - d.space.size() + k] = d.space[k];
  std::string c = "struct Cfg {\n  using Out = " + d.out + ";\n  using Ins = fg::EwList<";
  for (size_t i = 0; i < d.ins.size(); ++i)
    c += (i ? ",\n                         " : "") + d.ins[i];
  c += ">;\n  using Fn = " + d.fn + ";\n";
  c += llvm::formatv("  static constexpr int kIns = {0}, kIlp = {5}, kGroups = {7};\n  static "
                     "constexpr bool kVec = {6};\n  static constexpr long long D0 = {1}, D1 = {2}, "
                     "D2 = {3}, D3 = {4};\n};\n",
                     d.ins.size(), ilit(dims[0]), ilit(dims[1]), ilit(dims[2]), ilit(dims[3]),
                     d.ilp, d.vec ? "true" : "false", d.groups)
           .str();
  std::string params = "Cfg::Out* out", args;
  for (size_t i = 0; i < d.ins.size(); ++i) {
    params += ", const void* in" + std::to_string(i);
    args += (i ? ", in" : "in") + std::to_string(i);
  }
  c += kernelEntry(kThreads, params, "fg::ewMap<Cfg>(fg::EwArgs<Cfg>{out, {" + args + "}});");
  KernelSpec k = finishSpec(d.mnemonic, kernelSource("elementwise.cuh").str() + c);
  k.grid[0] = gridFor(product(d.space), int64_t(kThreads) * (d.vec ? 4 * d.groups : d.ilp));
  k.block[0] = kThreads;
  k.params = d.params;
  return k;
}

struct Ctx {
  const Function &fn;
  const Node &node;
  llvm::ArrayRef<Layout> layouts;
  int ilp = 1; ///< EmitOptions::elementwiseIlp, for the maps over the output
  bool vec = false; ///< EmitOptions::elementwiseVector, for the maps over the output

  DType opType(unsigned i) const { return fn.type(node.operands[i]).dtype; }
  DType resType() const { return fn.type(node.result()).dtype; }
  const Shape &resShape() const { return fn.type(node.result()).shape; }
  /// Operand i broadcast against the output.
  std::string bcast(unsigned i) const {
    return ewOp(layouts[i], opType(i), resShape().size(),
                broadcastMap(layouts[i].shape.size(), resShape().size()));
  }
  /// A description over the output with operands 0..n-1 broadcast.
  EwDesc mapDesc(std::string fn) const {
    EwDesc d;
    d.mnemonic = node.info().mnemonic;
    d.fn = std::move(fn);
    d.out = ctype(resType());
    d.space = resShape();
    d.ilp = ilp;
    d.vec = vec && product(d.space) >= 4;
    d.params.push_back(Param::result(0));
    for (unsigned i = 0; i < node.operands.size(); ++i) {
      d.ins.push_back(bcast(i));
      d.params.push_back(Param::operand(i));
      d.vec = d.vec && flatOperand(layouts[i], resShape(),
                                   broadcastMap(layouts[i].shape.size(), resShape().size()));
    }
    return d;
  }
};

const char *binOp(OpKind k) {
  switch (k) {
  case OpKind::Add:
  case OpKind::FusedAddChain:
    return "fg::BinAdd";
  case OpKind::Sub:
    return "fg::BinSub";
  case OpKind::Mul:
  case OpKind::FusedMulChain:
    return "fg::BinMul";
  default:
    return "fg::BinDiv";
  }
}

llvm::Expected<KernelSpec> emitMap(const Ctx &c) {
  const Node &n = c.node;
  OpKind k = n.kind;
  DType rt = c.resType();
  size_t R = c.resShape().size();
  unsigned nIn = static_cast<unsigned>(n.operands.size());

  switch (k) {
  case OpKind::Add:
  case OpKind::Sub:
  case OpKind::Mul:
  case OpKind::Div:
    return ewKernel(c.mapDesc((isInteger(rt) ? "fg::EwBinaryInt<" : "fg::EwBinary<") +
                              std::string(binOp(k)) + ">"));
  case OpKind::Glu: {
    op::Glu glu(n);
    return ewKernel(c.mapDesc(llvm::formatv("fg::EwGlu<{0}, {1}, {2}>", static_cast<int>(glu.kind()),
                                            bitsOf(glu.alpha()), bitsOf(glu.limit()))
                                  .str()));
  }
  case OpKind::FusedGluConvert: { // the same GLU, stored in the result's 16-bit type
    op::FusedGluConvert glu(n);
    return ewKernel(c.mapDesc(llvm::formatv("fg::EwGlu<{0}, {1}, {2}>", static_cast<int>(glu.kind()),
                                            bitsOf(glu.alpha()), bitsOf(glu.limit()))
                                  .str()));
  }
  case OpKind::FusedAddChain:
  case OpKind::FusedMulChain: {
    // Each link rounds to its own result dtype (binary rule: equal dtypes keep
    // theirs, mixed floats give f32), exactly as the decomposition stores it.
    std::string fn = "fg::EwChain<" + std::string(binOp(k));
    DType t = c.opType(0);
    for (unsigned i = 1; i < nIn; ++i) {
      t = t == c.opType(i) ? t : DType::F32;
      fn += ", " + roundType(t);
    }
    return ewKernel(c.mapDesc(fn + ">"));
  }
  case OpKind::FusedUnaryMul: {
    OpKind act = OpKind::Silu;
    switch (op::FusedUnaryMul(n).act()) {
    case UnaryMulAct::Silu:
      act = OpKind::Silu;
      break;
    case UnaryMulAct::Sigmoid:
      act = OpKind::Sigmoid;
      break;
    case UnaryMulAct::Softplus:
      act = OpKind::Softplus;
      break;
    }
    return ewKernel(c.mapDesc("fg::EwUnaryMul<" + std::string(plainUnaryPolicy(act)) + ", " +
                              roundType(c.opType(0)) + ">"));
  }
  case OpKind::FusedReluSqr:
    return ewKernel(c.mapDesc("fg::EwReluSqr"));
  case OpKind::FusedSoftcap:
    return ewKernel(c.mapDesc(llvm::formatv("fg::EwSoftcap<{0}, {1}, {2}>",
                                            bitsOf(op::FusedSoftcap(n).inScale()),
                                            bitsOf(op::FusedSoftcap(n).outScale()),
                                            roundType(c.opType(0)))
                                  .str()));
  case OpKind::FusedMoeWeightedSum:
  case OpKind::FusedMoeWeightedSumAdd: {
    // out[t, n] = Σ_j (experts[t, j, n] (· scale[t, j])) · weights[t, j]
    // (+ residual[t, n]: the inputs are the op's operands in order, the
    // residual third).
    const Layout &el = c.layouts[0], &wl = c.layouts[1];
    bool res = k == OpKind::FusedMoeWeightedSumAdd;
    unsigned scaleAt = res ? 3 : 2;
    bool hasScale = nIn > scaleAt;
    EwDesc d = c.mapDesc("");
    d.ins = {ewOp(el, c.opType(0), R, {0, -1, 1}), ewOp(wl, c.opType(1), R, {0, -1, -1})};
    if (res)
      d.ins.push_back(ewOp(c.layouts[2], c.opType(2), R, {0, 1}));
    int64_t sSj = 0;
    if (hasScale) {
      d.ins.push_back(ewOp(c.layouts[scaleAt], c.opType(scaleAt), R, {0, -1, -1}));
      sSj = strideOf(c.layouts[scaleAt], 1);
    }
    d.fn = llvm::formatv("fg::EwMoeWeightedSum<{0}, {1}, {2}, {3}, {4}, {5}>", ilit(el.shape[1]),
                         hasScale ? "true" : "false", ilit(strideOf(el, 1)), ilit(strideOf(wl, 1)),
                         ilit(sSj), res ? "true" : "false")
               .str();
    return ewKernel(d);
  }
  case OpKind::Convert:
  case OpKind::Cont:
    return ewKernel(c.mapDesc("fg::EwConvert"));
  case OpKind::Repeat: {
    const Layout &l = c.layouts[0];
    int64_t r[kMaxDims] = {1, 1, 1, 1};
    for (size_t d = 0; d < l.shape.size(); ++d)
      r[kMaxDims - l.shape.size() + d] = l.shape[d]; // right-aligned, as broadcast
    return ewKernel(c.mapDesc(llvm::formatv("fg::EwRepeat<{0}, {1}, {2}, {3}>", ilit(r[0]),
                                            ilit(r[1]), ilit(r[2]), ilit(r[3]))
                                  .str()));
  }
  case OpKind::Concat: {
    int64_t axis = op::Concat(n).axis();
    return ewKernel(c.mapDesc(
        llvm::formatv("fg::EwConcat<{0}, {1}>", axis + kMaxDims - R, ilit(c.layouts[0].shape[axis]))
            .str()));
  }
  case OpKind::GetRows: {
    // out [B.., N, C..]; idx [B.., N]; table [B.., R, C..]: out dim d reads table
    // dim d, except dim `batch`, which reads row idx[..].
    const Layout &tl = c.layouts[0], &il = c.layouts[1];
    size_t batch = il.shape.size() - 1;
    DimMap tm = leadingMap(tl.shape.size());
    tm[batch] = -1;
    EwDesc d = c.mapDesc(
        llvm::formatv("fg::EwGetRows<{0}, {1}>", ilit(tl.shape[batch]), ilit(strideOf(tl, batch)))
            .str());
    d.ins = {ewOp(tl, c.opType(0), R, tm), ewOp(il, c.opType(1), R, leadingMap(il.shape.size()))};
    return ewKernel(d);
  }
  case OpKind::AddId: {
    // a [T, k, N] + b[ids[t, j], n]
    const Layout &bl = c.layouts[1];
    EwDesc d = c.mapDesc(
        llvm::formatv("fg::EwAddId<{0}, {1}>", ilit(bl.shape[0]), ilit(strideOf(bl, 0))).str());
    d.ins = {c.bcast(0), ewOp(bl, c.opType(1), R, {-1, 2}),
             ewOp(c.layouts[2], c.opType(2), R, {0, 1})};
    return ewKernel(d);
  }
  default:
    if (isUnary(k))
      return ewKernel(c.mapDesc("fg::EwUnary<" + unaryPolicy(n) + ">"));
    return unsupported(n, "the elementwise family");
  }
}

/// set_rows(dst, src [N, C..], idx [N]): dst[idx[n], c..] = src[n, c..], in
/// place: Result 0 is operand 0's buffer.
KernelSpec emitSetRows(const Ctx &c) {
  const Layout &dl = c.layouts[0], &sl = c.layouts[1];
  size_t R = sl.shape.size();
  DimMap dm = leadingMap(R);
  dm[0] = -1;
  EwDesc d;
  d.mnemonic = c.node.info().mnemonic;
  d.fn = llvm::formatv("fg::EwSetRows<{0}, {1}, {2}>", ewOp(dl, c.opType(0), R, dm),
                       ilit(dl.shape[0]), ilit(strideOf(dl, 0)))
             .str();
  d.out = ctype(c.opType(0));
  d.space = sl.shape;
  d.ins = {ewOp(sl, c.opType(1), R, leadingMap(R)),
           ewOp(c.layouts[2], c.opType(2), R, leadingMap(1))};
  d.params = {Param::result(0), Param::operand(1), Param::operand(2)};
  return ewKernel(d);
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
  case OpKind::FusedMoeWeightedSumAdd:
  case OpKind::FusedGluConvert:
    return true;
  default:
    return isUnary(k);
  }
}

llvm::Expected<std::vector<Launch>> emitElementwise(const Function &fn, const Node &node,
                                                    llvm::ArrayRef<Layout> layouts,
                                                    const EmitOptions &o) {
  // The prefetching form only where every operand is read at the output's
  // own position (broadcasts included); gathers, repeats and concats read
  // elsewhere, so a prefetch at that position would fetch the wrong bytes.
  bool samePosition = node.kind != OpKind::Repeat && node.kind != OpKind::Concat &&
                      node.kind != OpKind::GetRows && node.kind != OpKind::AddId &&
                      node.kind != OpKind::FusedMoeWeightedSum &&
                      node.kind != OpKind::FusedMoeWeightedSumAdd;
  Ctx c{fn, node, layouts, samePosition ? std::clamp(o.elementwiseIlp, 1, 8) : 1,
        samePosition && o.elementwiseVector};
  const Shape &space = node.kind == OpKind::SetRows ? layouts[1].shape : c.resShape();
  if (space.size() > kMaxDims)
    return unsupported(node, llvm::formatv("{0} dims (elementwise kernels take at most {1})",
                                           space.size(), kMaxDims)
                                 .str());
  if (node.kind == OpKind::SetRows)
    return std::vector<Launch>{emitSetRows(c)};
  auto k = emitMap(c);
  if (!k)
    return k.takeError();
  return std::vector<Launch>{std::move(*k)};
}

KernelSpec gluOfStackedRows(const Node &node, int64_t rows, int64_t n, int64_t base, DType in,
                            DType out, const EmitOptions &options) {
  op::FusedGatedGemm glu(node);
  EwDesc d;
  d.mnemonic = node.info().mnemonic;
  d.fn = llvm::formatv("fg::EwGlu<{0}, {1}, {2}>", static_cast<int>(glu.kind()),
                       bitsOf(glu.alpha()), bitsOf(glu.limit()))
             .str();
  d.out = ctype(out);
  d.space = {rows, n};
  d.ilp = std::max(1, options.elementwiseIlp);
  // Groups of 4 stay inside a row and 16-byte aligned when n % 4 == 0: the
  // vector form reads each operand through its strides (elementwise.cuh).
  d.vec = options.elementwiseVector && n % 4 == 0 && base % 4 == 0;
  d.groups = d.vec ? std::max(1, options.gluGroups) : 1;
  // Gate at column 0 and up at column n of each scratch row of 2n values.
  for (int64_t off : {int64_t(0), n}) {
    Layout l;
    l.shape = {rows, n};
    l.strides = {2 * n, 1};
    l.offset = base + off;
    d.ins.push_back(ewOp(l, in, 2, leadingMap(2)));
    d.params.push_back(Param::scratch());
  }
  d.params.insert(d.params.begin(), Param::result(0));
  return ewKernel(d);
}

KernelSpec emitCopyKernel(DType from, const Layout &layout, DType to, Param dst, Param src) {
  assert(layout.shape.size() <= kMaxDims && "a matmul operand has at most four dims");
  EwDesc d;
  d.mnemonic = "convert";
  d.fn = "fg::EwConvert";
  d.out = ctype(to);
  d.space = layout.shape;
  d.ins = {ewOp(layout, from, layout.shape.size(), leadingMap(layout.shape.size()))};
  d.params = {dst, src};
  return ewKernel(d);
}

} // namespace fg::cuda::detail
