//===- RowEmitter.cpp - row-wise ops: norms, softmax, rope, sums, ranks ----===//
//
// Row-wise ops run the templates of kernels/row.cuh: rms_norm, layer_norm and
// rope go through the norm/rope row generator (FusedRowEmitter.cpp, with the
// fused steps off); softmax (mask, scale, ALiBi), sum_rows, mean, argsort and
// top_k are described here. This file only chooses: the operands' layouts in
// the row space, the load widths, and the work split; it writes a parameter
// struct `Cfg` and an `extern "C"` entry that calls the template.
//
// The multi-block rule (chooseRowSplit). A row goes to a group of G threads,
// G = threads for max(loads of the statistics pass, units of the write pass),
// a multiple of 32 up to 256 (512 for softmax); rows of at most 32 units are
// one warp each, up to 8 rows per block. When there are fewer rows than SMs
// and the op writes a row's elements independently (norms, rope, softmax),
// S = min(⌈2·SMs / rows⌉, ⌈write units / G⌉) blocks share each row: every
// one of them computes the row's statistics from the whole row and writes
// 1/S of it, so no thread is left without a write unit and the launch has
// about two blocks per SM. One row of 4096 f32 (16 KB): 4 blocks of 256
// threads; each thread has 4 16-byte loads in flight for the statistics and
// one for each operand of its slice. The extra reads of the row (S·16 KB)
// hit L2 and cost less than a microsecond; the latency of a single block's
// dependent loop over 16 vectors per thread is what they replace.
//
//===----------------------------------------------------------------------===//
#include "codegen/cuda/KernelSources.h"
#include "ir/OpViews.h"
#include "codegen/cuda/RowKernels.h"

#include "llvm/Support/FormatVariadic.h"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <cstring>

namespace fg::cuda::detail {

// --- shared with FusedRowEmitter.cpp -------------------------------------------------

llvm::Expected<RowShape> rowShape(const Node &node, llvm::ArrayRef<int64_t> shape) {
  if (shape.empty())
    return unsupported(node, "a scalar input");
  if (shape.size() - 1 > kMaxRowOuterDims)
    return unsupported(node, llvm::formatv("{0} outer dims (row kernels take at most {1})",
                                           shape.size() - 1, kMaxRowOuterDims)
                                 .str());
  RowShape r;
  r.rank = shape.size();
  size_t outer = shape.size() - 1, lead = kMaxRowOuterDims - outer;
  for (size_t k = 0; k < outer; ++k)
    r.d[lead + k] = shape[k];
  r.count = product(shape.drop_back());
  r.len = shape.back();
  return r;
}

RowOperand rowOperand(const Layout &l, DType t, size_t rank) {
  RowOperand o;
  o.dtype = t;
  o.off = l.offset;
  size_t r = l.shape.size();
  assert(r <= rank && "an operand of a row op has at most the row space's rank");
  size_t lead = rank - r, padOuter = kMaxRowOuterDims - (rank - 1);
  for (size_t k = 0; k + 1 < rank; ++k) {
    if (k < lead)
      continue;
    size_t od = k - lead;
    if (l.shape[od] != 1)
      o.s[padOuter + k] = l.strides[od];
  }
  if (r >= 1 && l.shape[r - 1] != 1)
    o.sc = l.strides[r - 1];
  return o;
}

std::string rowOpType(const RowOperand &o) {
  return llvm::formatv("fg::RowOp<{0}, {1}, {2}, {3}, {4}, {5}>", ctype(o.dtype), ilit(o.off),
                       ilit(o.s[0]), ilit(o.s[1]), ilit(o.s[2]), ilit(o.sc))
      .str();
}

std::string vecOpType(const Layout &l, DType t) {
  assert(l.shape.size() == 1 && "a vector operand");
  int64_t st = l.shape[0] == 1 ? 0 : l.strides[0];
  return llvm::formatv("fg::VecOp<{0}, {1}, {2}>", ctype(t), ilit(l.offset), ilit(st)).str();
}

int vecWidth(const RowOperand &o, int64_t len) {
  if (o.sc != 1)
    return 1;
  for (int64_t v = 16 / elemBytes(o.dtype); v > 1; v /= 2) {
    bool ok = len % v == 0 && o.off % v == 0;
    for (int64_t s : o.s)
      ok &= s % v == 0;
    if (ok)
      return static_cast<int>(v);
  }
  return 1;
}

int denseVecWidth(DType t, int64_t len) {
  for (int64_t v = 16 / elemBytes(t); v > 1; v /= 2)
    if (len % v == 0)
      return static_cast<int>(v);
  return 1;
}

RowSplit chooseRowSplit(int64_t rows, int64_t statUnits, int64_t workUnits, unsigned maxThreads,
                        bool canSplit, const EmitOptions &o) {
  RowSplit s;
  s.group = threadsForRow(std::max<int64_t>({statUnits, workUnits, 1}), maxThreads);
  int64_t sms = std::max<int64_t>(o.smCount, 1);
  if (canSplit && rows < sms) {
    int64_t want = (2 * sms + rows - 1) / rows;
    int64_t busy = (workUnits + s.group - 1) / s.group; // slices that keep every thread busy
    s.split = std::max<int64_t>(1, std::min(want, busy));
  }
  int64_t items = std::max<int64_t>(rows, 1) * s.split;
  int64_t perBlock = s.group == 32 ? std::clamp<int64_t>(items, 1, 8) : 1;
  s.threads = s.group * static_cast<unsigned>(perBlock);
  s.grid = static_cast<unsigned>(
      std::clamp<int64_t>((items + perBlock - 1) / perBlock, 1, int64_t(1) << 20));
  return s;
}

std::string rowCfgShape(const RowShape &r, const RowSplit &s) {
  return llvm::formatv("  static constexpr long long D0 = {0}, D1 = {1}, D2 = {2}, L = {3}, "
                       "kSplit = {4};\n  static constexpr int kThreads = {5}, kGroup = {6};\n",
                       ilit(r.d[0]), ilit(r.d[1]), ilit(r.d[2]), ilit(r.len), ilit(s.split),
                       s.threads, s.group)
      .str();
}

int32_t f32Bits(double v) {
  float f = static_cast<float>(v);
  int32_t b;
  std::memcpy(&b, &f, sizeof b);
  return b;
}

namespace {

/// row.cuh + Cfg + the entry `extern "C" KERNEL(params) { call }`, launched
/// with `split`'s grid and block.
KernelSpec rowKernel(const Node &node, const std::string &cfg, const std::string &params,
                     const std::string &call, const RowSplit &split, std::vector<Param> ps,
                     unsigned shared = 0) {
  std::string src = kernelSource("row.cuh").str() + "\nstruct Cfg {\n" + cfg + "};\n";
  src += kernelEntry(split.threads, params, call);
  KernelSpec k = finishSpec(node.info().mnemonic, src);
  k.grid[0] = split.grid;
  k.block[0] = split.threads;
  k.sharedBytes = shared;
  k.params = std::move(ps);
  return k;
}

/// sum_rows, mean: one result per row, so one group per row.
llvm::Expected<KernelSpec> emitSum(const Function &fn, const Node &node, llvm::ArrayRef<Layout> ls,
                                   const EmitOptions &o) {
  const TensorType &xt = fn.type(node.operands[0]);
  auto r = rowShape(node, xt.shape);
  if (!r)
    return r.takeError();
  RowOperand x = rowOperand(ls[0], xt.dtype, r->rank);
  int vx = vecWidth(x, r->len);
  RowSplit sp = chooseRowSplit(r->count, r->len / vx, 0, 256, /*canSplit=*/false, o);
  std::string c = "  using X = " + rowOpType(x) +
                  ";\n  using Out = " + ctype(fn.type(node.result()).dtype) + ";\n" +
                  rowCfgShape(*r, sp);
  c += llvm::formatv("  static constexpr int kVX = {0};\n  static constexpr bool kMean = {1};\n",
                     vx, node.kind == OpKind::Mean ? "true" : "false")
           .str();
  return rowKernel(node, c, "Cfg::Out* out, const Cfg::X::T* x",
                   "fg::sumRows<Cfg>(fg::SumArgs<Cfg>{out, x});", sp,
                   {Param::result(0), Param::operand(0)});
}

llvm::Expected<KernelSpec> emitSoftmax(const Function &fn, const Node &node,
                                       llvm::ArrayRef<Layout> ls, const EmitOptions &o) {
  const TensorType &xt = fn.type(node.operands[0]);
  DType rt = fn.type(node.result()).dtype;
  bool hasMask = node.operands.size() > 1;
  auto r = rowShape(node, xt.shape);
  if (!r)
    return r.takeError();
  RowOperand x = rowOperand(ls[0], xt.dtype, r->rank), mask;
  int v = std::min(vecWidth(x, r->len), denseVecWidth(rt, r->len));
  if (hasMask) {
    mask = rowOperand(ls[1], fn.type(node.operands[1]).dtype, r->rank);
    v = std::min(v, vecWidth(mask, r->len));
  }
  v = std::min(v, 4); // four values per step keep the three passes in registers
  RowSplit sp = chooseRowSplit(r->count, r->len / v, r->len / v, 512, /*canSplit=*/true, o);

  // ALiBi slope (ggml): head h = coordinate of dim rank-3 (r1 in the row space).
  double maxBias = op::Softmax(node).maxBias();
  bool alibi = maxBias > 0 && hasMask;
  uint32_t n2 = 1;
  float m0 = 1, m1 = 1;
  if (alibi) {
    int64_t nHead = r->rank >= 3 ? xt.shape[r->rank - 3] : 1;
    n2 = 1u << static_cast<uint32_t>(std::floor(std::log2(static_cast<float>(nHead))));
    m0 = std::pow(2.0f, -static_cast<float>(maxBias) / n2);
    m1 = std::pow(2.0f, -(static_cast<float>(maxBias) / 2.0f) / n2);
  }
  std::string c = "  using X = " + rowOpType(x) +
                  ";\n  using Mask = " + (hasMask ? rowOpType(mask) : std::string("fg::NoRowOp")) +
                  ";\n  using Out = " + ctype(rt) + ";\n" + rowCfgShape(*r, sp);
  c += llvm::formatv("  static constexpr int kV = {0}, kScaleBits = {1}, kM0Bits = {2}, kM1Bits = "
                     "{3};\n  static constexpr long long kAlibiN2 = {4};\n"
                     "  static constexpr bool kMask = {5}, kAlibi = {6};\n",
                     v, f32Bits(op::Softmax(node).scale()), f32Bits(m0), f32Bits(m1), ilit(n2),
                     hasMask ? "true" : "false", alibi ? "true" : "false")
           .str();
  std::string params = "Cfg::Out* out, const Cfg::X::T* x";
  std::vector<Param> ps{Param::result(0), Param::operand(0)};
  if (hasMask) {
    params += ", const Cfg::Mask::T* mask";
    ps.push_back(Param::operand(1));
  }
  return rowKernel(node, c, params,
                   std::string("fg::softmaxRows<Cfg>(fg::SoftmaxArgs<Cfg>{out, x, ") +
                       (hasMask ? "mask" : "nullptr") + "});",
                   sp, ps);
}

/// argsort / top_k (row.cuh rankRows): one block per row, the row's keys in
/// shared memory when they fit.
llvm::Expected<KernelSpec> emitSort(const Function &fn, const Node &node, llvm::ArrayRef<Layout> ls,
                                    const EmitOptions &) {
  const TensorType &xt = fn.type(node.operands[0]);
  auto r = rowShape(node, xt.shape);
  if (!r)
    return r.takeError();
  bool topK = op::TopK::classof(node);
  bool desc = topK || op::Argsort(node).order() == SortOrder::Desc;
  int64_t outLen = topK ? op::TopK(node).k() : r->len;
  bool inShared = r->len * 4 <= 48 * 1024;
  RowSplit sp;
  sp.group = sp.threads = threadsForRow(r->len, 256);
  sp.grid = static_cast<unsigned>(std::clamp<int64_t>(r->count, 1, int64_t(1) << 20));
  std::string c = "  using X = " + rowOpType(rowOperand(ls[0], xt.dtype, r->rank)) + ";\n" +
                  rowCfgShape(*r, sp);
  c += llvm::formatv("  static constexpr long long K = {0};\n  static constexpr bool kDesc = {1}, "
                     "kShared = {2};\n",
                     ilit(outLen), desc ? "true" : "false", inShared ? "true" : "false")
           .str();
  return rowKernel(
      node, c, "int* out, const Cfg::X::T* x", "fg::rankRows<Cfg>(fg::RankArgs<Cfg>{out, x});", sp,
      {Param::result(0), Param::operand(0)},
      // Whole 16-byte units: NVRTC reads the staged keys four at a time, the
      // last unit past an odd length too (compute-sanitizer saw L = 61 read
      // bytes 244-255 of a 244-byte array).
      inShared ? static_cast<unsigned>((r->len + 3) / 4 * 16) : 0);
}

} // namespace

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
                                            llvm::ArrayRef<Layout> ls, const EmitOptions &o) {
  auto one = [](llvm::Expected<KernelSpec> k) -> llvm::Expected<std::vector<Launch>> {
    if (!k)
      return k.takeError();
    return std::vector<Launch>{std::move(*k)};
  };
  switch (node.kind) {
  case OpKind::RmsNorm:
  case OpKind::LayerNorm:
  case OpKind::Rope:
    return emitNormRows(fn, node, ls, o);
  case OpKind::Softmax:
    return one(emitSoftmax(fn, node, ls, o));
  case OpKind::Argsort:
  case OpKind::TopK:
    return one(emitSort(fn, node, ls, o));
  default: // SumRows, Mean
    return one(emitSum(fn, node, ls, o));
  }
}

} // namespace fg::cuda::detail
