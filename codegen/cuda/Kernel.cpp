//===- Kernel.cpp - emitKernel dispatch, layouts, shared emitter helpers ---===//
#include "codegen/cuda/Kernel.h"
#include "ir/OpViews.h"
#include "codegen/cuda/EmitterCommon.h"
#include "codegen/cuda/KernelSources.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/xxhash.h"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <cstdio>

namespace fg::cuda {

// --- layouts ------------------------------------------------------------------

Layout Layout::contiguous(llvm::ArrayRef<int64_t> shape) {
  Layout l;
  l.shape.assign(shape.begin(), shape.end());
  l.strides = contiguousStrides(shape);
  return l;
}

bool Layout::isContiguous() const {
  if (offset != 0)
    return false;
  int64_t expect = 1;
  for (size_t d = shape.size(); d-- > 0;) {
    if (shape[d] != 1 && strides[d] != expect)
      return false;
    expect *= shape[d];
  }
  return true;
}

std::optional<Layout> viewLayout(const Node &node, const Layout &in) {
  assert(node.info().has(kViewLike) && "viewLayout needs a view-like node");
  Layout out;
  switch (node.kind) {
  case OpKind::Reshape: {
    if (!Layout{in.shape, in.strides, 0}.isContiguous())
      return std::nullopt;
    out = Layout::contiguous(op::Reshape(node).shape());
    out.offset = in.offset;
    return out;
  }
  case OpKind::View: {
    // x_flat is x in row-major order: only a dense x maps flat indices to memory.
    Layout dense{in.shape, in.strides, 0};
    if (!dense.isContiguous())
      return std::nullopt;
    op::View view(node);
    out.shape.assign(view.shape().begin(), view.shape().end());
    out.strides.assign(view.strides().begin(), view.strides().end());
    out.offset = in.offset + view.offset();
    return out;
  }
  case OpKind::Permute: {
    out.offset = in.offset;
    for (int64_t p : op::Permute(node).perm()) {
      out.shape.push_back(in.shape[p]);
      out.strides.push_back(in.strides[p]);
    }
    return out;
  }
  case OpKind::Transpose: {
    out = in;
    size_t r = out.shape.size();
    std::swap(out.shape[r - 1], out.shape[r - 2]);
    std::swap(out.strides[r - 1], out.strides[r - 2]);
    return out;
  }
  default:
    return std::nullopt;
  }
}

std::vector<Layout> contiguousLayouts(const Function &fn, const Node &node) {
  std::vector<Layout> out;
  for (ValueId v : node.operands)
    out.push_back(Layout::contiguous(fn.type(v).shape));
  return out;
}

llvm::Expected<std::vector<Launch>> emitKernel(const Function &fn, const Node &node,
                                               llvm::ArrayRef<Layout> layouts,
                                               const EmitOptions &options) {
  if (layouts.size() != node.operands.size())
    return detail::unsupported(node, llvm::formatv("{0} operand layouts for {1} operands",
                                                   layouts.size(), node.operands.size()));
  for (size_t i = 0; i < layouts.size(); ++i) {
    const TensorType &t = fn.type(node.operands[i]);
    if (llvm::ArrayRef<int64_t>(layouts[i].shape) != llvm::ArrayRef<int64_t>(t.shape) ||
        layouts[i].strides.size() != t.shape.size())
      return detail::unsupported(node, llvm::formatv("operand {0} layout shape {1} != type {2}",
                                                     i, shapeStr(layouts[i].shape), t.str()));
  }
  if (node.info().has(kViewLike))
    return std::vector<Launch>{};
  // The GEMV family reads block-quantised weights itself (and checks that
  // nothing else is quantised); every other family takes none.
  if (detail::gemvOperands(node.kind).family)
    return detail::emitGemv(fn, node, layouts, options);
  if (node.kind == OpKind::GetRows && isQuantized(fn.type(node.operands[0]).dtype))
    return detail::emitQuantGetRows(fn, node, layouts);
  if (node.kind == OpKind::FusedGatedGemm)
    return detail::emitGatedGemm(fn, node, layouts, options); // decodes quantised weights itself
  if (llvm::Error e = detail::rejectQuantized(fn, node))
    return e;
  if (node.kind == OpKind::Attention || node.kind == OpKind::FusedRopeAttention ||
      node.kind == OpKind::FusedRopeKvAttention || node.kind == OpKind::FusedAttentionConvert)
    return detail::emitAttention(fn, node, layouts, options);
  if (detail::isFusedRowFamily(node.kind))
    return detail::emitFusedRow(fn, node, layouts, options);
  if (detail::isRowFamily(node.kind))
    return detail::emitRow(fn, node, layouts, options);
  if (detail::isElementwiseFamily(node.kind))
    return detail::emitElementwise(fn, node, layouts, options);
  return detail::unsupported(node, "no emitter family");
}

// --- shared helpers -------------------------------------------------------------

namespace detail {

llvm::StringRef commonHeader() { return kernelSource("common.cuh"); }

std::string ctype(DType t) {
  switch (t) {
  case DType::F32:
    return "float";
  case DType::F16:
    return "fg_f16";
  case DType::BF16:
    return "fg_bf16";
  case DType::I32:
    return "int";
  case DType::I64:
    return "long long";
  default:
    assert(false && "no device scalar type for a quantised dtype");
    return "void";
  }
}

std::string flit(double v) {
  float f = static_cast<float>(v);
  if (std::isnan(f))
    return "FG_NAN";
  if (std::isinf(f))
    return f > 0 ? "FG_INF" : "(-FG_INF)";
  char buf[64];
  std::snprintf(buf, sizeof buf, "%a", static_cast<double>(f));
  std::string s = buf;
  if (s.find('p') == std::string::npos) // "0x0p+0" always has p; paranoia
    s += "p+0";
  return "(" + s + "f)";
}

std::string dlit(double v) {
  if (std::isnan(v))
    return "((double)FG_NAN)";
  if (std::isinf(v))
    return v > 0 ? "((double)FG_INF)" : "(-(double)FG_INF)";
  char buf[64];
  std::snprintf(buf, sizeof buf, "%a", v);
  return "(" + std::string(buf) + ")";
}

std::string ilit(int64_t v) { return std::to_string(v) + "LL"; }

std::string unravel(llvm::StringRef lin, llvm::ArrayRef<int64_t> shape, llvm::StringRef prefix) {
  std::string s;
  if (shape.empty())
    return s;
  s += "    long long " + prefix.str() + "_r = " + lin.str() + ";\n";
  for (size_t d = shape.size(); d-- > 0;) {
    std::string name = prefix.str() + std::to_string(d);
    if (shape[d] == 1) {
      s += "    const long long " + name + " = 0;\n";
    } else if (d == 0) {
      s += "    const long long " + name + " = " + prefix.str() + "_r;\n";
    } else {
      s += "    const long long " + name + " = " + prefix.str() + "_r % " + ilit(shape[d]) + "; " +
           prefix.str() + "_r /= " + ilit(shape[d]) + ";\n";
    }
  }
  s += "    (void)" + prefix.str() + "_r;\n";
  return s;
}

std::string offsetExpr(const Layout &l, llvm::ArrayRef<std::string> coords) {
  assert(coords.size() == l.shape.size() && "one coordinate per layout dim");
  std::string s = "(" + ilit(l.offset);
  for (size_t d = 0; d < coords.size(); ++d) {
    if (coords[d].empty() || l.shape[d] == 1 || l.strides[d] == 0)
      continue;
    s += " + " + coords[d] + " * " + ilit(l.strides[d]);
  }
  return s + ")";
}

std::vector<std::string> coordNames(size_t n, llvm::StringRef prefix) {
  std::vector<std::string> v;
  for (size_t i = 0; i < n; ++i)
    v.push_back(prefix.str() + std::to_string(i));
  return v;
}

std::vector<std::string> broadcastCoords(llvm::ArrayRef<int64_t> shape, size_t outRank,
                                         llvm::StringRef prefix) {
  std::vector<std::string> v;
  size_t lead = outRank - shape.size();
  for (size_t d = 0; d < shape.size(); ++d)
    v.push_back(shape[d] == 1 ? std::string() : prefix.str() + std::to_string(d + lead));
  return v;
}

std::string kernelName(llvm::StringRef mnemonic, llvm::StringRef body) {
  std::string m = mnemonic.str();
  std::replace(m.begin(), m.end(), '.', '_');
  return "fg_" + m + "_" + llvm::utohexstr(llvm::xxHash64(body), /*LowerCase=*/true);
}

void renameKernel(std::string &source, const std::string &from, const std::string &to) {
  for (size_t p = 0; (p = source.find(from, p)) != std::string::npos; p += to.size())
    source.replace(p, from.size(), to);
}

std::string renameRewritten(std::string &source, const std::string &name) {
  const std::string renamed = name + "_" + llvm::utohexstr(llvm::xxHash64(source), true);
  renameKernel(source, name, renamed);
  return renamed;
}

KernelSpec finishSpec(llvm::StringRef mnemonic, std::string body) {
  KernelSpec k;
  k.name = kernelName(mnemonic, body);
  size_t pos;
  while ((pos = body.find("KERNEL")) != std::string::npos)
    body.replace(pos, 6, k.name);
  k.source = commonHeader().str() + body;
  return k;
}

std::string kernelEntry(unsigned threads, llvm::StringRef params, llvm::StringRef body,
                        unsigned minBlocks, llvm::StringRef prologue, unsigned clusterX) {
  return "extern \"C\" __global__ void __launch_bounds__(" + std::to_string(threads) +
         (minBlocks ? ", " + std::to_string(minBlocks) : "") + ") " +
         (clusterX ? "__cluster_dims__(" + std::to_string(clusterX) + ", 1, 1) " : "") +
         "KERNEL(" + params.str() +
         ") {\n" + (prologue.empty() ? "" : "  " + prologue.str() + "\n") +
         "  fg_pdl_begin();\n  " + body.str() + "\n}\n";
}

std::optional<EntrySplice> entrySplice(const std::string &source, const std::string &name) {
  const size_t entry = source.rfind("extern \"C\" __global__");
  const size_t at = entry == std::string::npos ? entry : source.find(name + "(", entry);
  const size_t open = at == std::string::npos ? at : source.find(") {\n", at);
  const size_t close = source.rfind("\n}\n");
  if (open == std::string::npos || close == std::string::npos || close < open)
    return std::nullopt;
  return EntrySplice{entry, at + name.size() + 1, open, close};
}

llvm::Error unsupported(const Node &node, const llvm::Twine &why) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                 "no CUDA kernel for '" + llvm::Twine(node.info().mnemonic) +
                                     "' with " + why);
}

llvm::Error rejectQuantized(const Function &fn, const Node &node) {
  for (size_t i = 0; i < node.operands.size(); ++i)
    if (isQuantized(fn.type(node.operands[i]).dtype))
      return unsupported(node, llvm::formatv("block-quantised operand {0} ({1}); dequantise "
                                             "weights at load time",
                                             i, fn.type(node.operands[i]).str())
                                   .str());
  for (ValueId r : node.results)
    if (isQuantized(fn.type(r).dtype))
      return unsupported(node, "a block-quantised result " + fn.type(r).str());
  return llvm::Error::success();
}

int64_t quantRowAlignment(DType t) {
  if (t == DType::Q4_K || t == DType::Q5_K || t == DType::IQ4_XS)
    return 8;
  if (t == DType::Q4_1 || t == DType::Q5_1 || t == DType::Q2_K)
    return 4;
  return 2;
}

unsigned gridFor(int64_t n, int64_t perBlock) {
  int64_t blocks = (n + perBlock - 1) / perBlock;
  return static_cast<unsigned>(std::clamp<int64_t>(blocks, 1, int64_t(1) << 20));
}

unsigned threadsForRow(int64_t len, unsigned maxThreads) {
  int64_t t = (len + 31) / 32 * 32;
  return static_cast<unsigned>(std::clamp<int64_t>(t, 32, maxThreads));
}

int64_t product(llvm::ArrayRef<int64_t> v) {
  int64_t n = 1;
  for (int64_t d : v)
    n *= d;
  return n;
}

int64_t elemBytes(DType t) { return dtypeInfo(t).blockBytes; }

} // namespace detail
} // namespace fg::cuda
