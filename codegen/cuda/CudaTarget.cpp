//===- CudaTarget.cpp - the CUDA emitters answer for their kernels --------===//
#include "codegen/cuda/CudaTarget.h"
#include "codegen/cuda/EmitterCommon.h"

#include "llvm/Support/Process.h"

#include <algorithm>
#include <limits>
#include <variant>

namespace fg::cuda {

uint64_t scratchOf(llvm::ArrayRef<Launch> launches) {
  uint64_t bytes = 0;
  for (const Launch &l : launches)
    bytes = std::max<uint64_t>(bytes, std::visit([](const auto &s) { return s.scratchBytes; }, l));
  return bytes;
}

namespace {

/// `d` as the one node of `probe`, its operands the function's inputs.
const Node &addProbeNode(Function &probe, const NodeDesc &d) {
  llvm::SmallVector<ValueId, 6> operands;
  for (size_t i = 0; i < d.operands.size(); ++i)
    operands.push_back(probe.addArgument("o" + std::to_string(i), d.operands[i], ArgRole::Input));
  llvm::SmallVector<std::string, 2> names;
  for (size_t r = 0; r < d.results.size(); ++r)
    names.push_back("r" + std::to_string(r));
  return probe.node(probe.addNode(d.kind, operands, d.attrs, d.results, names));
}

} // namespace

llvm::Expected<std::vector<Launch>> CudaTarget::emitProbe(const NodeDesc &d) const {
  Function probe("probe");
  const Node &node = addProbeNode(probe, d);
  return emitKernel(probe, node, contiguousLayouts(probe, node), emit_);
}

llvm::Error CudaTarget::canEmit(const NodeDesc &node) const {
  llvm::Expected<std::vector<Launch>> launches = emitProbe(node);
  return launches ? llvm::Error::success() : launches.takeError();
}

int64_t CudaTarget::scratchBytes(const NodeDesc &node) const {
  llvm::Expected<std::vector<Launch>> launches = emitProbe(node);
  if (!launches) {
    llvm::consumeError(launches.takeError());
    return 0;
  }
  return static_cast<int64_t>(scratchOf(*launches));
}

bool CudaTarget::groupedExpertHalfX(const NodeDesc &d) const {
  if (!emit_.groupedExpertHalfX || !emit_.groupedExpertQuant || !emit_.gemvQuantXHalf)
    return false;
  unsigned streams = d.kind == OpKind::FusedGatedMatmulId ? 2 : d.kind == OpKind::MatMulId ? 1 : 0;
  if (!streams || d.operands.size() < 2 + streams)
    return false;
  const TensorType &x = d.operands[0];
  if (x.dtype != DType::F32 || x.shape.empty() || x.shape[0] < emit_.groupedExpertMinTokens ||
      !isQuantized(d.operands[1].dtype))
    return false;
  // The int8 form quantises the f32 x itself (kernels/moe_i8.cuh).
  const TensorType &w = d.operands[1], &ids = d.operands[1 + streams];
  if (w.shape.size() == 3 && x.shape.size() == 3 && ids.shape.size() == 2 &&
      detail::groupedExpertInt8(emit_, w.dtype, w.shape[2], x.shape[1], ids.shape[1]))
    return false;
  // The grouped GEMM must take the node as it would be with f16 x.
  NodeDesc half = d;
  half.operands[0].dtype = DType::F16;
  Function probe("probe");
  return detail::groupedExpertRefusal(probe, addProbeNode(probe, half), streams, /*quant=*/true)
      .empty();
}

bool CudaTarget::readsAllBeforeWrite(const NodeDesc &node, unsigned operand) const {
  switch (node.kind) {
  case OpKind::FusedTopkMoe:
    // One block stages every row's logits before writing ids and weights.
    return operand == 0 && !node.operands.empty() &&
           node.operands[0].numRows() <= kTopkMoeAliasRows;
  default:
    return false;
  }
}

NodeCost CudaTarget::cost(const NodeDesc &node) const {
  Cost c = opCost(node.kind, node.operands, node.attrs, node.results);
  NodeCost out;
  out.flops = c.flops;
  out.bytes = c.bytes;
  llvm::Expected<std::vector<Launch>> launches = emitProbe(node);
  if (launches)
    out.launches = static_cast<unsigned>(launches->size());
  else {
    llvm::consumeError(launches.takeError());
    out.launches = opInfo(node.kind).has(kViewLike) ? 0 : 1;
  }
  out.seconds = std::max(out.bytes / costModel_.readBandwidth, out.flops / costModel_.peakFlops) +
                out.launches * costModel_.launchSeconds;
  // The weight matrices' bytes: the operands from the GEMV family's first
  // weight on (after x, and the norm weight of a prologue GEMV).
  const unsigned w0 = detail::gemvOperands(node.kind).first;
  auto weightSeconds = [&] {
    double weights = 0;
    for (size_t i = w0; i < node.operands.size(); ++i)
      weights += static_cast<double>(node.operands[i].bytes());
    return weights / costModel_.readBandwidth;
  };
  if (node.kind == OpKind::FusedRmsNormMatmul || node.kind == OpKind::FusedRmsNormGatedMatmul ||
      node.kind == OpKind::FusedRmsNormMatmulMulti || node.kind == OpKind::FusedRmsNormMulMatmul) {
    const bool dp4a = launches && launches->size() == 1 &&
                      std::holds_alternative<KernelSpec>(launches->front()) &&
                      std::get<KernelSpec>(launches->front()).form == KernelForm::Dp4aGemv;
    out.seconds += (dp4a ? costModel_.normPrologueSlowdownDp4a : costModel_.normPrologueSlowdown) *
                   weightSeconds();
  }
  // One token over few enough weights: the merge is charged as one launch.
  const bool freeMerge = costModel_.mergedTensorCoreFreeBytes >= 0 &&
                         node.operands[0].numRows() == 1 &&
                         weightSeconds() * costModel_.readBandwidth <=
                             costModel_.mergedTensorCoreFreeBytes;
  if ((node.kind == OpKind::FusedMatmulMulti || node.kind == OpKind::FusedRmsNormMatmulMulti) &&
      costModel_.mergedTensorCoreSlowdown >= 0 && launches && launches->size() == 1 &&
      std::holds_alternative<KernelSpec>(launches->front()) &&
      std::get<KernelSpec>(launches->front()).form == KernelForm::MergedTensorCoreGemv &&
      !freeMerge)
    // The tensor-core merged GEMV: no faster than its segments' launches.
    out.seconds += static_cast<double>(node.operands.size() - w0) * costModel_.launchSeconds +
                   costModel_.mergedTensorCoreSlowdown * weightSeconds();
  return out;
}

CudaCostModel costModelFromEnv() {
  CudaCostModel m;
  auto factor = [](const char *name, double lo, double &into) {
    if (auto v = llvm::sys::Process::GetEnv(name); v && !v->empty()) {
      double f = 0;
      if (!llvm::StringRef(*v).getAsDouble(f) && f >= lo) {
        into = f;
        return true;
      }
    }
    return false;
  };
  if (factor("FG_DEBUG_NORM_PROLOGUE_SLOWDOWN", 0.0, m.normPrologueSlowdown))
    m.normPrologueSlowdownDp4a = m.normPrologueSlowdown; // both, as before the DP4A factor
  factor("FG_DEBUG_NORM_PROLOGUE_SLOWDOWN_DP4A", 0.0, m.normPrologueSlowdownDp4a);
  factor("FG_DEBUG_MERGED_TC_SLOWDOWN", -1.0, m.mergedTensorCoreSlowdown);
  if (double mb = 0; factor("FG_DEBUG_MERGED_TC_FREE_MB", std::numeric_limits<double>::lowest(), mb))
    m.mergedTensorCoreFreeBytes = mb < 0 ? -1.0 : mb * 1024 * 1024;
  return m;
}

} // namespace fg::cuda
