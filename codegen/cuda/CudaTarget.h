//===- CudaTarget.h - the CUDA emitters answer for their kernels --*- C++ -*-===//
//
// The fg::Target (passes/Target.h) of the CUDA code generator. Every answer
// comes from the emitters or their options, never from a copy: canEmit,
// scratchBytes and cost emit the node (specialised source text, no NVRTC) into
// a one-node probe function with dense operands; maxGemvTokens is
// EmitOptions::maxGemvTokens; the aliasing exemption is kTopkMoeAliasRows
// (Kernel.h), which the top-k emitter also uses.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "codegen/cuda/Kernel.h"
#include "passes/Target.h"

namespace fg::cuda {

/// Numbers of the cost estimate (H200 defaults; bench/ calibrates).
struct CudaCostModel {
  double readBandwidth = 4.0e12; ///< bytes/s a bandwidth-bound kernel reaches
  double peakFlops = 60e12;      ///< f32 flop/s of the generated kernels
  double launchSeconds = 2.5e-6; ///< fixed cost per launch (in a CUDA graph)
  /// A GEMV with the rms_norm prologue (fused.rms_norm_matmul,
  /// fused.rms_norm_gated_matmul) streams its weights this fraction slower
  /// than the plain GEMV: measured on the H200 (fourth session, W-dense) +19 %
  /// on gate|up and +28 % on q/k/v/lm head (with the norm's launch saved);
  /// 0.25 reproduces the sixth session's same-run steps, all prologues on:
  /// W-tiny faster (-6 %), W-dense and W-moe-12 slower (+3.5 %, +3 %).
  double normPrologueSlowdown = 0.25;
  /// The same for a launch on DP4A (KernelForm::Dp4aGemv): the same figure
  /// so far. The seventeenth session measured every prologue on at the
  /// defaults slower (W-dense q4_K 2.0156 -> 2.0893 ms: the FFN norm into
  /// gate|up) with the rstd computed before x is quantised, and the
  /// eighteenth session with it deferred to the stores (the default since,
  /// EmitOptions::gemvDp4aNormDeferred): 1.9173 -> 1.9354 ms (+0.9 %,
  /// 259 launches against 292), so it stays. FG_DEBUG_NORM_PROLOGUE_SLOWDOWN_DP4A.
  double normPrologueSlowdownDp4a = 0.25;
  /// q, k and v merged into one launch (fused.matmul_multi,
  /// fused.rms_norm_matmul_multi) pay on DP4A (quantised weights at T = 1,
  /// sixteenth session, same run: W-dense q4_K 2.135 -> 2.014 ms, q8_0
  /// 3.634 -> 3.582, q4_0 2.744 -> 2.469, Q4_K_M-like 2.450 -> 2.381,
  /// W-moe-12 q4_K 0.625 -> 0.581) but not on the tensor cores (gemvMulti:
  /// f16 W-dense 4.108 -> 4.169 in the sixth session, 4.122 -> 4.139 in the
  /// sixteenth; W-tiny and W-moe-12 slower too), where the separate GEMVs
  /// already overlap as parallel graph branches: the tensor-core form is
  /// charged one launch a segment more than its own plus this fraction of
  /// its weights' bandwidth time, so the cost check refuses it (negative:
  /// charged as one launch, as the DP4A form).
  double mergedTensorCoreSlowdown = 0.05;
  /// ... except where the merged weights total at most this many bytes at
  /// one token: there every member is latency-bound (a launch costs more
  /// than its bytes) and the merged launch, which carries each segment's row
  /// work in its stores (EmitOptions::gemvStoreTails: one-token rows only),
  /// is charged as one launch.
  /// Measured on the H100 (forty-third session, same call): W-tiny's 1.5 MiB
  /// q/k/v merged with its rope / cache writes dropped 0.1437 -> 0.1326 ms,
  /// W-dense's 48 MiB 5.395 -> 5.395 (and +0.7 % with the row launches
  /// kept). 4 MiB, as the prefetch's limit on a latency-bound GEMV
  /// (EmitOptions::pdlPrefetchMaxWeightBytes). FG_DEBUG_MERGED_TC_FREE_MB
  /// (negative: never).
  double mergedTensorCoreFreeBytes = 4.0 * 1024 * 1024;
};

/// The defaults with the FG_DEBUG_ overrides of the environment:
/// FG_DEBUG_NORM_PROLOGUE_SLOWDOWN=f (>= 0: 0 fuses every legal norm
/// prologue, a large value none; both factors), then
/// FG_DEBUG_NORM_PROLOGUE_SLOWDOWN_DP4A=f (the DP4A launches' alone) and
/// FG_DEBUG_MERGED_TC_SLOWDOWN=f (>= -1: a
/// negative value charges the tensor-core merged GEMV as one launch; the
/// tests that run it) and FG_DEBUG_MERGED_TC_FREE_MB=f (its weights up to
/// f MiB charged as one launch; negative: none).
CudaCostModel costModelFromEnv();

class CudaTarget final : public Target {
public:
  explicit CudaTarget(EmitOptions emit = {}, CudaCostModel cost = {})
      : emit_(std::move(emit)), costModel_(cost) {}

  llvm::StringRef name() const override { return "cuda"; }
  llvm::Error canEmit(const NodeDesc &node) const override;
  int64_t scratchBytes(const NodeDesc &node) const override;
  bool readsAllBeforeWrite(const NodeDesc &node, unsigned operand) const override;
  int64_t maxGemvTokens() const override { return emit_.maxGemvTokens; }
  bool groupsQuantisedExperts() const override { return emit_.groupedExpertQuant; }
  bool groupedExpertHalfX(const NodeDesc &node) const override;
  NodeCost cost(const NodeDesc &node) const override;

  const EmitOptions &emitOptions() const { return emit_; }
  /// The launches of `node` emitted into a one-node probe function with dense
  /// operands (what canEmit, scratchBytes and cost look at).
  llvm::Expected<std::vector<Launch>> emitProbe(const NodeDesc &node) const;

private:
  EmitOptions emit_;
  CudaCostModel costModel_;
};

/// The largest scratchBytes of a launch list (the node's one scratch buffer).
uint64_t scratchOf(llvm::ArrayRef<Launch> launches);

} // namespace fg::cuda
