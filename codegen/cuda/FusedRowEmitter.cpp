//===- FusedRowEmitter.cpp - norm/rope rows with epilogues, MoE routing ----===//
//
// The norm/rope row generator (emitNormRows) describes one launch of
// kernels/row.cuh normRows<Cfg> with the fused op's steps as policies:
//
//   anchor     Stat: rms_norm (Σx² → scale), layer_norm (mean, variance), none
//   epilogue   kMul [· w], kAdd [+ residual], Map: plain or rope (pair (i0, i1)
//              rotated in registers, angles in f64)
//   store      Store: dense result row in the result's dtype (fused.rms_norm_mul
//              {dtype = f16}: a prefill GEMM's input), or set_rows:
//              dest[indices[t], h, :] in the dest's dtype, in place (Result 0
//              is operand 0's buffer)
//
// rms_norm, layer_norm and rope (RowEmitter) and fused.rms_norm_mul,
// rms_norm_mul_add, rms_norm_mul_rope, rms_norm_mul_rope_set_rows and
// rope_set_rows are that one generator with different policies. Each value is
// computed in the order and precision of the op's decomposition (f32, rope
// angles in f64; the rope result rounds to its dtype before the cache
// conversion). Positions and row indices are read from device memory, so one
// graph serves every step. The work split (chooseRowSplit, RowEmitter.cpp)
// gives few long rows several blocks each.
//
// Why a fused row is never slower than the ops it replaces. Unfused,
// rms_norm → mul (→ add) is 2 (3) launches of the same row machinery: the
// norm reads x twice (statistics, then its slice) and writes y; the mul reads
// y and w and writes z; the add reads z and the residual and writes again.
// Fused, one launch reads x twice, w and the residual once and writes once:
// for one row of 4096 f32 that is 16 KB (+16 KB L2-hot re-read per block) +
// 16 KB (+16 KB) against 2-3 launches moving 80-128 KB, and the fused launch
// has the same work split as the unfused norm, so its critical path (one
// statistics pass of up to 8 16-byte loads in flight per thread, one block
// reduction, one write pass) is the norm's plus the loads of w (and the
// residual), which are prefetched into L1 before the statistics pass, so
// their latency hides behind it. The rope forms save the [T, H, D]
// round trip of the normalised rows and, with set_rows, of the rotated ones.
//
// fused.topk_moe(logits [T, E], bias [E]?) -> ids i32[T, k], weights f32[T, k]:
// kernels/topk.cuh topkMoe<Cfg> with a gate policy (softmax, sigmoid,
// sqrt(softplus), delayed softmax over the k); see there. When T <= 4 one
// block takes every row and reads all logits before writing any result, which
// is what passes/memory/OverlapProof.cpp declares for this op (the results may
// share the logits' bytes).
//
//===----------------------------------------------------------------------===//
#include "codegen/cuda/KernelSources.h"
#include "codegen/cuda/Nvrtc.h"
#include "codegen/cuda/RowKernels.h"
#include "ir/OpViews.h"

#include "llvm/Support/FormatVariadic.h"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <cstring>

namespace fg::cuda::detail {
namespace {

/// Which operand plays which part (-1: absent), and the row's typed attributes.
struct Roles {
  int dest = -1, x = -1, w = -1, residual = -1, positions = -1, indices = -1, ff = -1;
  bool rope = false;
  double eps = 0;       ///< norms
  RopeAttrs ropeAttrs;  ///< rope rows
};

Roles rolesOf(const Node &n) {
  Roles r;
  int count = static_cast<int>(n.operands.size());
  auto opt = [&](int i) { return i < count ? i : -1; };
  switch (n.kind) {
  case OpKind::RmsNorm:
    r.x = 0, r.eps = op::RmsNorm(n).eps();
    break;
  case OpKind::LayerNorm:
    r.x = 0, r.eps = op::LayerNorm(n).eps();
    break;
  case OpKind::Rope:
    r.x = 0, r.positions = 1, r.ff = opt(2), r.rope = true;
    r.ropeAttrs = ropeAttrsOf(op::Rope(n));
    break;
  case OpKind::FusedRmsNormMul:
    r.x = 0, r.w = 1, r.eps = op::FusedRmsNormMul(n).eps();
    break;
  case OpKind::FusedRmsNormMulAdd:
    r.x = 0, r.w = 1, r.residual = 2, r.eps = op::FusedRmsNormMulAdd(n).eps();
    break;
  case OpKind::FusedRmsNormMulRope:
    r.x = 0, r.w = 1, r.positions = 2, r.ff = opt(3), r.rope = true;
    r.eps = op::FusedRmsNormMulRope(n).eps();
    r.ropeAttrs = ropeAttrsOf(op::FusedRmsNormMulRope(n));
    break;
  case OpKind::FusedRmsNormMulRopeSetRows:
    r.dest = 0, r.x = 1, r.w = 2, r.positions = 3, r.indices = 4, r.ff = opt(5), r.rope = true;
    r.eps = op::FusedRmsNormMulRopeSetRows(n).eps();
    r.ropeAttrs = ropeAttrsOf(op::FusedRmsNormMulRopeSetRows(n));
    break;
  case OpKind::FusedRopeSetRows:
    r.dest = 0, r.x = 1, r.positions = 2, r.indices = 3, r.ff = opt(4), r.rope = true;
    r.ropeAttrs = ropeAttrsOf(op::FusedRopeSetRows(n));
    break;
  case OpKind::SetRows: // only as a GEMV tail (emitRowTail); else elementwise
    r.dest = 0, r.x = 1, r.indices = 2;
    break;
  default:
    assert(false && "not a norm/rope row");
  }
  return r;
}

/// The statistics of the anchor.
enum class RowStat { None, Rms, LayerNorm };

RowStat statOf(const Node &n) {
  switch (n.kind) {
  case OpKind::RmsNorm:
  case OpKind::FusedRmsNormMul:
  case OpKind::FusedRmsNormMulAdd:
  case OpKind::FusedRmsNormMulRope:
  case OpKind::FusedRmsNormMulRopeSetRows:
    return RowStat::Rms;
  case OpKind::LayerNorm:
    return RowStat::LayerNorm;
  default:
    return RowStat::None;
  }
}

/// Element (k, c) strides of a layout with dims of size 1 read at index 0.
int64_t strideOf(const Layout &l, size_t d) { return l.shape[d] == 1 ? 0 : l.strides[d]; }

} // namespace

/// ggml_rope_yarn_corr_dim (in double, like the CPU reference).
static double corrDim(int64_t nDims, int64_t nCtxOrig, double beta, double base) {
  return static_cast<double>(nDims) * std::log(static_cast<double>(nCtxOrig) / (beta * 2 * M_PI)) /
         (2 * std::log(base));
}

/// YaRN's ramp bounds and magnitude of rope attributes `a` (in double, like
/// the CPU reference; 0, 0 and attn_factor without YaRN).
struct RopeYarn {
  double low = 0, high = 0, mscale = 1;
};
static RopeYarn ropeYarn(const RopeAttrs &a) {
  RopeYarn y;
  y.mscale = a.attnFactor;
  if (a.extFactor != 0) {
    y.low = std::max(0.0, std::floor(corrDim(a.nDims, a.nCtxOrig, a.betaFast, a.theta)));
    y.high = std::min(static_cast<double>(a.nDims - 1),
                      std::ceil(corrDim(a.nDims, a.nCtxOrig, a.betaSlow, a.theta)));
    y.mscale *= 1.0 + 0.1 * std::log(1.0 / a.freqScale);
  }
  return y;
}

/// `struct Rope { ... };` for MapRope: the rope attributes `a` of `node` as
/// constants (YaRN's ramp bounds and magnitude precomputed in double).
llvm::Expected<std::string> ropeCfg(const Node &node, const RopeAttrs &a, bool freqFactors) {
  int64_t nDims = a.nDims;
  bool neox = a.mode == RopeMode::Neox;
  double base = a.theta, freqScale = a.freqScale, ext = a.extFactor;
  const RopeYarn y = ropeYarn(a);
  for (double v : {base, freqScale, ext, y.low, y.high, y.mscale})
    if (!std::isfinite(v))
      return unsupported(node, "rope attributes that are not finite");
  return llvm::formatv("  struct Rope {\n    static constexpr long long kNDims = {0};\n"
                       "    static constexpr bool kNeox = {1}, kFF = {2}, kYarn = {3};\n"
                       "    static constexpr double kTheta = {4}, kFreqScale = {5}, kExt = {6}, "
                       "kLow = {7}, kHigh = {8}, kMScale = {9};\n  };\n",
                       ilit(nDims), neox ? "true" : "false", freqFactors ? "true" : "false",
                       ext != 0 ? "true" : "false", dlit(base), dlit(freqScale), dlit(ext),
                       dlit(y.low), dlit(y.high), dlit(y.mscale))
      .str();
}

std::vector<double> ropeFrequencies(const RopeAttrs &a) {
  const RopeYarn y = ropeYarn(a);
  std::vector<double> f;
  for (int64_t i = 0; i < a.nDims / 2; ++i) {
    const double base = std::pow(a.theta, -2.0 * static_cast<double>(i) / static_cast<double>(a.nDims));
    double c = a.freqScale;
    if (a.extFactor != 0) {
      const double r = (static_cast<double>(i) - y.low) / std::max(0.001, y.high - y.low);
      const double ramp = (1.0 - std::min(1.0, std::max(0.0, r))) * a.extFactor;
      c = a.freqScale * (1.0 - ramp) + ramp;
    }
    f.push_back(base * c);
  }
  return f;
}

namespace {

/// One normRows launch before it becomes a kernel: the Cfg's body, the
/// entry's parameters (type, name) and the call's arguments.
struct NormRowsCode {
  std::string cfg;
  std::vector<std::pair<std::string, std::string>> params;
  std::string args;
  std::vector<Param> ps;
  RowSplit split;
  int64_t items = 0;     ///< (row, slice) items of the launch
  int64_t statUnits = 0; ///< vectors a row's statistics read (0: none)
};

/// `maxThreads`: the threads a row may take (32 for a GEMV tail: a warp a row).
llvm::Expected<NormRowsCode> normRowsCode(const Function &fn, const Node &node,
                                          llvm::ArrayRef<Layout> ls, const EmitOptions &o,
                                          unsigned maxThreads) {
  Roles ro = rolesOf(node);
  const TensorType &xt = fn.type(node.operands[ro.x]);
  auto rs = rowShape(node, xt.shape);
  if (!rs)
    return rs.takeError();
  const RowShape &r = *rs;
  if (ro.rope && r.rank != 3)
    return unsupported(node, "a rope input that is not [T, H, D]");
  int64_t nDims = ro.rope ? ro.ropeAttrs.nDims : 0;
  if (ro.rope && (nDims < 2 || nDims > r.len || nDims % 2 != 0))
    return unsupported(node, llvm::formatv("n_dims = {0} of {1} channels", nDims, r.len).str());
  RowStat stat = statOf(node);
  // The stored type: the dest's, else the result's (fused.rms_norm_mul with
  // dtype = f16 / bf16 rounds its f32 rows once, in fgStore).
  DType st = ro.dest >= 0 ? fn.type(node.operands[ro.dest]).dtype : fn.type(node.result()).dtype;
  if (!isFloat(st))
    return unsupported(node,
                       "result type " + std::string(dtypeName(st)) + " (the rows store floats)");
  // The rope's own result dtype (its input's): the value rounds to it before
  // a cache store converts it (f16 rows only go to an f16 cache).
  DType ropeT = ro.w >= 0 ? DType::F32 : xt.dtype;
  DType round = ro.rope && ro.dest >= 0 && ropeT != st ? ropeT : DType::F32;

  auto op = [&](int i) { return rowOperand(ls[i], fn.type(node.operands[i]).dtype, r.rank); };
  RowOperand x = op(ro.x);
  int vx = vecWidth(x, r.len);
  // The write pass moves kV columns of every operand per step (rope: pairs).
  int v = 1;
  if (!ro.rope && ro.dest < 0) {
    v = std::min({vecWidth(x, r.len), denseVecWidth(st, r.len), 4});
    if (ro.w >= 0)
      v = std::min(v, vecWidth(op(ro.w), r.len));
    if (ro.residual >= 0)
      v = std::min(v, vecWidth(op(ro.residual), r.len));
  }
  int64_t statUnits = stat == RowStat::None ? 0 : r.len / vx;
  int64_t workUnits = ro.rope ? nDims / 2 + (r.len - nDims) : r.len / v;
  // A prefill rope takes the heads of a token H at a time (MapRope::
  // runHeads: the angles once per lane for H heads); decode keeps one row
  // an item.
  int64_t heads = 1;
  if (ro.rope && r.d[1] > o.maxGemvTokens)
    for (int64_t h : {o.ropeHeads, int64_t(2)})
      if (heads == 1 && h > 1 && r.d[2] % h == 0)
        heads = h;
  RowSplit sp =
      chooseRowSplit(r.count / heads, statUnits, workUnits, maxThreads, /*canSplit=*/true, o);

  std::string c;
  c += "  using X = " + rowOpType(x) + ";\n";
  c += "  using W = " + (ro.w >= 0 ? rowOpType(op(ro.w)) : std::string("fg::NoRowOp")) + ";\n";
  c += "  using Res = " +
       (ro.residual >= 0 ? rowOpType(op(ro.residual)) : std::string("fg::NoRowOp")) + ";\n";
  auto vecOp = [&](int i) {
    return i >= 0 ? vecOpType(ls[i], fn.type(node.operands[i]).dtype) : std::string("fg::NoVecOp");
  };
  c += "  using Pos = " + vecOp(ro.positions) + ";\n  using Idx = " + vecOp(ro.indices) +
       ";\n  using FF = " + vecOp(ro.ff) + ";\n";
  c += "  using Out = " + ctype(st) + ";\n";
  switch (stat) {
  case RowStat::None:
    c += "  using Stat = fg::StatNone;\n";
    break;
  case RowStat::Rms:
    c += llvm::formatv("  using Stat = fg::StatRms<{0}>;\n", f32Bits(ro.eps)).str();
    break;
  case RowStat::LayerNorm:
    c += llvm::formatv("  using Stat = fg::StatLayerNorm<{0}>;\n", f32Bits(ro.eps)).str();
    break;
  }
  if (ro.rope) {
    auto rope = ropeCfg(node, ro.ropeAttrs, ro.ff >= 0);
    if (!rope)
      return rope.takeError();
    c += *rope + "  using Map = fg::MapRope<Rope>;\n";
  } else {
    c += "  using Map = fg::MapPlain;\n";
  }
  if (ro.dest >= 0) {
    const Layout &dl = ls[ro.dest];
    c += llvm::formatv("  using Store = fg::StoreSetRows<{0}, {1}, {2}, {3}, {4}, {5}>;\n",
                       ilit(dl.shape[0]), ilit(dl.offset), ilit(strideOf(dl, 0)),
                       ilit(strideOf(dl, 1)), ilit(strideOf(dl, 2)), ctype(round))
             .str();
  } else {
    c += "  using Store = fg::StoreDense;\n";
  }
  c += rowCfgShape(r, sp);
  if (heads > 1)
    c += llvm::formatv("  static constexpr int kHeads = {0};\n", heads).str();
  c += llvm::formatv("  static constexpr int kVX = {0}, kV = {1};\n"
                     "  static constexpr bool kMul = {2}, kAdd = {3};\n",
                     vx, v, ro.w >= 0 ? "true" : "false", ro.residual >= 0 ? "true" : "false")
           .str();

  // Parameters: the written buffer first, then the operands read.
  NormRowsCode code;
  code.params.push_back({"Cfg::Out*", "out"});
  code.args = "out";
  code.ps.push_back(Param::result(0));
  auto addIn = [&](int i, const char *type, const char *name) {
    code.args += std::string(", ") + (i >= 0 ? name : "nullptr");
    if (i < 0)
      return;
    code.params.push_back({std::string("const Cfg::") + type + "::T*", name});
    code.ps.push_back(Param::operand(static_cast<unsigned>(i)));
  };
  addIn(ro.x, "X", "x");
  addIn(ro.w, "W", "w");
  addIn(ro.residual, "Res", "res");
  addIn(ro.positions, "Pos", "pos");
  addIn(ro.indices, "Idx", "idx");
  addIn(ro.ff, "FF", "ff");
  code.cfg = std::move(c);
  code.split = sp;
  code.items = r.count / heads * sp.split;
  code.statUnits = statUnits;
  return code;
}

} // namespace

llvm::Expected<std::vector<Launch>> emitNormRows(const Function &fn, const Node &node,
                                                 llvm::ArrayRef<Layout> ls, const EmitOptions &o) {
  llvm::Expected<NormRowsCode> code = normRowsCode(fn, node, ls, o, 256);
  if (!code)
    return code.takeError();
  std::string params;
  for (const auto &[type, name] : code->params)
    params += (params.empty() ? "" : ", ") + type + " " + name;
  std::string src = kernelSource("row.cuh").str() + "\nstruct Cfg {\n" + code->cfg + "};\n";
  src += kernelEntry(code->split.threads, params,
                     "fg::normRows<Cfg>(fg::NormArgs<Cfg>{" + code->args + "});");
  KernelSpec k = finishSpec(node.info().mnemonic, src);
  k.grid[0] = code->split.grid;
  k.block[0] = code->split.threads;
  k.params = std::move(code->ps);
  return std::vector<Launch>{std::move(k)};
}

llvm::Expected<RowTail> emitRowTail(const Function &fn, const Node &node,
                                    llvm::ArrayRef<Layout> ls, const EmitOptions &o) {
  switch (node.kind) {
  case OpKind::Rope:
  case OpKind::FusedRopeSetRows:
  case OpKind::FusedRmsNormMulRope:
  case OpKind::FusedRmsNormMulRopeSetRows:
  case OpKind::SetRows:
    break;
  default:
    return unsupported(node, "no tail form (rope, the rope / norm rows and set_rows have one)");
  }
  const Roles ro = rolesOf(node);
  const TensorType &xt = fn.type(node.operands[ro.x]);
  if (xt.rank() != 3 || xt.shape[0] != 1)
    return unsupported(node, "a tail takes one token's [1, H, D] rows, not " + xt.str());
  if (ro.dest >= 0) {
    const TensorType &dt = fn.type(node.operands[ro.dest]);
    if (dt.rank() != 3 || dt.shape[1] != xt.shape[1] || dt.shape[2] != xt.shape[2])
      return unsupported(node, "a cache " + dt.str() + " that is not [rows, H, D] of the rows " +
                                   xt.str());
  }
  // A warp a row. A row's statistics add up in the separate launch's order
  // only while the row's vectors fit one warp (thread g then holds vector g
  // in both, and a block sum adds only zeros past the first warp): else no
  // tail, so the results stay the bits of the launch it replaces.
  llvm::Expected<NormRowsCode> code = normRowsCode(fn, node, ls, o, 32);
  if (!code)
    return code.takeError();
  assert(code->split.group == 32 && "a tail takes a warp a row");
  if (code->statUnits > 32)
    return unsupported(node, llvm::formatv("rows of {0} vectors (a tail sums at most a warp's "
                                           "32 in its launch's order)",
                                           code->statUnits)
                                 .str());
  RowTail t;
  // The block is the GEMV's: its thread count is the merged kernel's macro.
  const std::string threads = llvm::formatv("kThreads = {0},", code->split.threads).str();
  const size_t at = code->cfg.find(threads);
  assert(at != std::string::npos && "rowCfgShape writes kThreads");
  t.cfg = code->cfg.replace(at, threads.size(), "kThreads = FG_TAIL_THREADS,") +
          "  static constexpr bool kTailBody = true;\n";
  t.params = std::move(code->params);
  t.call = "fg::normRows<Cfg>(fg::NormArgs<Cfg>{" + code->args + "});";
  // The local form: no statistics over a row, and pairs of neighbouring
  // channels (a neox pair spans half a head).
  t.local = statOf(node) == RowStat::None && !(ro.rope && ro.ropeAttrs.mode == RopeMode::Neox);
  t.rangeCall =
      "fg::normRowsRange<Cfg>(fg::NormArgs<Cfg>{" + code->args + "}, fg_begin, fg_end);";
  t.elementCall =
      "fg::normRowsElement<Cfg>(fg::NormArgs<Cfg>{" + code->args + "}, fg_f, fg_v, fg_vp, fg_early);";
  t.earlyCall =
      "fg::normRowsElementEarly<Cfg>(fg::NormArgs<Cfg>{" + code->args + "}, fg_f, fg_e);";
  for (int o : {ro.positions, ro.indices, ro.ff})
    if (o >= 0 && o < static_cast<int>(node.operands.size()))
      t.earlyReads.push_back(o);
  t.pairs = ro.rope;
  t.x = ro.x;
  t.ps = std::move(code->ps);
  t.items = code->items;
  t.what = node.info().mnemonic;
  return t;
}

namespace {

/// The gate policy of topk.cuh for the `gating` attribute.
llvm::Expected<const char *> gatePolicy(const Node &node, TopkGating g) {
  switch (g) {
  case TopkGating::Softmax:
    return "fg::GateSoftmax";
  case TopkGating::Sigmoid:
    return "fg::GateSigmoid";
  case TopkGating::SqrtSoftplus:
    return "fg::GateSqrtSoftplus";
  case TopkGating::DelayedSoftmax:
    return "fg::GateDelayed";
  }
  return unsupported(node, llvm::formatv("gating {0}", static_cast<int>(g)).str());
}

/// The routing members of a topk.cuh parameter struct (topkRow): the gate
/// policy, the bias flag and the weight epilogue (renormalisation, scale).
llvm::Expected<std::string> routingCfg(const Node &node, TopkGating g, bool hasBias, bool renorm,
                                       double scale, double clampMin) {
  auto gate = gatePolicy(node, g);
  if (!gate)
    return gate.takeError();
  if (!renorm)
    clampMin = 0.0;
  if (!std::isfinite(scale) || !std::isfinite(clampMin))
    return unsupported(node, "a scale or clamp that is not finite");
  return std::string("  using Gate = ") + *gate + ";\n" +
         llvm::formatv("  static constexpr bool kBias = {0}, kRenorm = {1}, kScale = {2};\n"
                       "  static constexpr double kClampMin = {3}, kScaleBy = {4};\n",
                       hasBias ? "true" : "false", renorm ? "true" : "false",
                       scale != 1 ? "true" : "false", dlit(clampMin), dlit(scale))
             .str();
}

llvm::Expected<std::vector<Launch>> emitTopkMoe(const Function &fn, const Node &node,
                                                llvm::ArrayRef<Layout> ls) {
  const TensorType &lt = fn.type(node.operands[0]);
  bool hasBias = node.operands.size() > 1;
  if (lt.rank() != 2)
    return unsupported(node, "logits " + lt.str() + " that are not [T, E]");
  int64_t T = lt.shape[0], E = lt.shape[1], K = op::FusedTopkMoe(node).k();
  if (K < 1 || K > E)
    return unsupported(node, llvm::formatv("k = {0} of {1} experts", K, E).str());
  // Rows staged per block: all of them (one block) when the results may alias
  // the logits (CudaTarget::readsAllBeforeWrite), else one.
  int64_t rpb = T <= kTopkMoeAliasRows ? std::max<int64_t>(T, 1) : 1;
  // Shared: logits of the block's rows, and per expert p and the selection key.
  uint64_t shared = static_cast<uint64_t>(rpb * E + 2 * E) * 4 + static_cast<uint64_t>(K) * 4;
  if (shared > 48 * 1024)
    return unsupported(node, llvm::formatv("{0} experts (shared memory)", E).str());
  op::FusedTopkMoe topk(node);
  auto routing = routingCfg(node, topk.gating(), hasBias, topk.renorm() != 0, topk.scale(),
                            topk.clampMin());
  if (!routing)
    return routing.takeError();
  unsigned nt = threadsForRow(E, 512);
  const Layout &ll = ls[0];
  std::string c = "struct Cfg {\n";
  c += "  using Logit = " + ctype(lt.dtype) +
       ";\n  using Bias = " + ctype(hasBias ? fn.type(node.operands[1]).dtype : DType::F32) + ";\n";
  c += *routing;
  c += llvm::formatv("  static constexpr int kThreads = {0}, E = {1}, K = {2}, RPB = {3};\n", nt, E,
                     K, rpb)
           .str();
  c += llvm::formatv("  static constexpr long long T = {0}, kLogitOff = {1}, kLogitS0 = {2}, "
                     "kLogitS1 = {3}, kBiasOff = {4}, kBiasS = {5};\n",
                     ilit(T), ilit(ll.offset), ilit(ll.shape[0] == 1 ? 0 : ll.strides[0]),
                     ilit(ll.shape[1] == 1 ? 0 : ll.strides[1]), ilit(hasBias ? ls[1].offset : 0),
                     ilit(hasBias ? ls[1].strides.back() : 0))
           .str();
  c += "};\n";
  std::string params = "int* ids, float* wout, const Cfg::Logit* logits";
  if (hasBias)
    params += ", const Cfg::Bias* bias";
  c += kernelEntry(nt, params,
                   std::string("fg::topkMoe<Cfg>(fg::TopkArgs<Cfg>{ids, wout, logits, ") +
                       (hasBias ? "bias" : "nullptr") + "});");
  KernelSpec k = finishSpec(node.info().mnemonic, kernelSource("topk.cuh").str() + c);
  k.grid[0] = static_cast<unsigned>(std::clamp<int64_t>((T + rpb - 1) / rpb, 1, int64_t(1) << 20));
  k.block[0] = nt;
  k.sharedBytes = static_cast<unsigned>(shared);
  k.params = {Param::result(0), Param::result(1), Param::operand(0)};
  if (hasBias)
    k.params.push_back(Param::operand(1));
  return std::vector<Launch>{std::move(k)};
}

/// fused.rms_norm_matmul_topk_moe at one token (topk.cuh, routerTopk): a
/// warp an expert over ceil(E / kRouterWarps) blocks, the router row held in
/// registers (up to kRouterHeld 16-byte units a lane, loaded before the
/// programmatic-launch wait when the router is a graph weight), the logits
/// through the launch's scratch to the last block (a counter of its own),
/// which ranks them. Needs one token, f32 x and norm weight, a 16/32-bit
/// router with 16-byte aligned rows of whole 16-byte units, and the experts'
/// arrays in static shared memory.
constexpr int64_t kRouterWarps = 2, kRouterHeld = 16;

llvm::Expected<std::vector<Launch>> emitRouterTopk(const Function &fn, const Node &node,
                                                   llvm::ArrayRef<Layout> ls) {
  op::FusedRmsNormMatmulTopkMoe r(node);
  const TensorType &xt = fn.type(node.operands[0]), &nt = fn.type(node.operands[1]);
  const TensorType &wt = fn.type(node.operands[2]);
  const bool hasBias = node.operands.size() > 3;
  if (xt.numRows() != 1 || xt.dtype != DType::F32 || ls[0].strides.back() != 1)
    return unsupported(node, "x " + xt.str() + " (the fused router takes one f32 token)");
  if (wt.rank() != 2 || !(wt.dtype == DType::F32 || wt.dtype == DType::F16 || wt.dtype == DType::BF16))
    return unsupported(node, "router " + wt.str() + " (an f32, f16 or bf16 matrix)");
  const int64_t E = wt.shape[0], L = wt.shape[1], K = r.k();
  const int64_t V = 16 / elemBytes(wt.dtype);
  const Layout &wl = ls[2];
  if (L % V != 0 || wl.strides[1] != 1 || wl.offset % V != 0 || wl.strides[0] % V != 0)
    return unsupported(node, "router " + wt.str() + " whose rows are not whole aligned 16-byte units");
  if (nt.dtype != DType::F32 || nt.numElements() != L || ls[1].strides.back() != 1)
    return unsupported(node, "norm weight " + nt.str() + " (f32, one per column)");
  if (K < 1 || K > E)
    return unsupported(node, llvm::formatv("k = {0} of {1} experts", K, E).str());
  if ((3 * E + K) * 4 > 40 * 1024)
    return unsupported(node, llvm::formatv("{0} experts (shared memory)", E).str());
  auto routing =
      routingCfg(node, r.gating(), hasBias, r.renorm() != 0, r.scale(), r.clampMin());
  if (!routing)
    return routing.takeError();
  const float eps = static_cast<float>(r.eps());
  int32_t epsBits;
  std::memcpy(&epsBits, &eps, 4);
  const int64_t blocks = (E + kRouterWarps - 1) / kRouterWarps;
  const int64_t held = std::min(kRouterHeld, (L / V + 31) / 32);
  std::string c = "struct Cfg {\n";
  c += "  using W = " + ctype(wt.dtype) + ";\n  using NW = float;\n  using Bias = " +
       ctype(hasBias ? fn.type(node.operands[3]).dtype : DType::F32) + ";\n";
  c += *routing;
  c += llvm::formatv("  static constexpr int kWarps = {0}, kBlocks = {1}, kHeld = {2}, V = {3}, E = {4}, "
                     "K = {5}, L = {6}, kEpsBits = {7};\n",
                     kRouterWarps, blocks, held, V, E, K, L, epsBits)
           .str();
  c += llvm::formatv("  static constexpr long long kXOff = {0}, kNwOff = {1}, kWOff = {2}, kWLd = {3}, "
                     "kBiasOff = {4}, kBiasS = {5};\n",
                     ilit(ls[0].offset), ilit(ls[1].offset), ilit(wl.offset), ilit(wl.strides[0]),
                     ilit(hasBias ? ls[3].offset : 0), ilit(hasBias ? ls[3].strides.back() : 0))
           .str();
  c += "};\n";
  std::string params = "float* normed, int* ids, float* wout, float* scratch, unsigned* counters, "
                       "const float* x, const Cfg::NW* nw, const Cfg::W* w";
  if (hasBias)
    params += ", const Cfg::Bias* bias";
  // The router's rows before the wait only when no kernel writes them (a
  // graph weight); otherwise the same loads after it.
  const Argument *wa = fn.argumentOf(node.operands[2]);
  const bool early = wa && wa->role == ArgRole::Weight;
  const std::string load = "fg::RouterRow<Cfg> held = fg::routerPrefetch<Cfg>(w);";
  c += kernelEntry(static_cast<unsigned>(32 * kRouterWarps), params,
                   std::string(early ? "" : load + "\n  ") +
                       "fg::routerTopk<Cfg>(fg::RouterArgs<Cfg>{normed, ids, wout, scratch, counters, "
                       "x, nw, w, " +
                       (hasBias ? "bias" : "nullptr") + "}, held);",
                   0, early ? load : "");
  KernelSpec k = finishSpec(node.info().mnemonic,
                            kernelSource("row.cuh").str() + kernelSource("topk.cuh").str() + c);
  k.grid[0] = static_cast<unsigned>(blocks);
  k.block[0] = static_cast<unsigned>(32 * kRouterWarps);
  k.params = {Param::result(0),   Param::result(1),   Param::result(2), Param::scratch(),
              Param::counters(), Param::operand(0), Param::operand(1), Param::operand(2)};
  if (hasBias)
    k.params.push_back(Param::operand(3));
  k.scratchBytes = static_cast<uint64_t>(E) * 4;
  k.counterBytes = 4;
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
  case OpKind::FusedRmsNormMatmulTopkMoe:
    return true;
  default:
    return false;
  }
}

llvm::Expected<std::vector<Launch>> emitFusedRow(const Function &fn, const Node &node,
                                                 llvm::ArrayRef<Layout> ls, const EmitOptions &o) {
  if (node.kind == OpKind::FusedTopkMoe)
    return emitTopkMoe(fn, node, ls);
  if (node.kind == OpKind::FusedRmsNormMatmulTopkMoe)
    return emitRouterTopk(fn, node, ls);
  return emitNormRows(fn, node, ls, o);
}

} // namespace fg::cuda::detail
