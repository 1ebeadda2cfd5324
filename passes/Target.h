//===- Target.h - what the code generator answers for its kernels --*- C++ -*-===//
//
// A pass never copies a kernel constant (STYLE.md §14): it asks the target,
// as LLVM passes ask TargetTransformInfo and XLA's fusion asks its GPU cost
// analysis. The interface lives here, where its clients (fusion legality, the
// overlap proof, the memory plan, the fusion cost model) can see it;
// codegen/cuda/CudaTarget implements it from the emitters themselves, and
// compile() hands it to the pipeline (PassOptions::target, FusionOptions::target).
//
//   const Target &t = ...;
//   if (llvm::Error why = t.canEmit(NodeDesc::of(fn, node))) ...  // "no CUDA kernel for ..."
//   t.maxGemvTokens();                                           // 8: gated GEMV fusions
//   t.readsAllBeforeWrite(desc, 0);                              // topk_moe of <= 4 rows
//
// Without a target (`fusegraph opt --target=none`, unit tests of the IR) the
// passes assume nothing about kernels: no token limit, no scratch, no
// aliasing exemption beyond the IR's own (in-place state updates).
//
//===----------------------------------------------------------------------===//
#pragma once

#include "ir/Graph.h"
#include "ir/OpTable.h"

#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

#include <cstdint>

namespace fg {

/// A node as the target sees it: kind, operand and result types, attributes.
/// It need not be in a function yet (a fusion candidate is asked before it is
/// built).
struct NodeDesc {
  OpKind kind;
  llvm::SmallVector<TensorType, 6> operands; ///< present operands, in order
  AttrList attrs;
  llvm::SmallVector<TensorType, 2> results;

  static NodeDesc of(const Function &fn, const Node &node) {
    NodeDesc d{node.kind, {}, node.attrs, {}};
    for (ValueId v : node.operands)
      d.operands.push_back(fn.type(v));
    for (ValueId v : node.results)
      d.results.push_back(fn.type(v));
    return d;
  }
};

/// The target's estimate for one node: the op table's byte model (opCost)
/// plus what its kernels cost to launch.
struct NodeCost {
  double flops = 0;
  double bytes = 0;      ///< opCost: bytes read + written
  unsigned launches = 0; ///< kernel launches (and library calls) of the node
  double seconds = 0;    ///< max(bytes / bandwidth, flops / peak) + launches · launch cost
};

class Target {
public:
  virtual ~Target() = default;
  /// "cuda"
  virtual llvm::StringRef name() const = 0;
  /// Success when the target has kernels for `node`; else an error saying why
  /// not ("no CUDA kernel for 'rope' with ...").
  virtual llvm::Error canEmit(const NodeDesc &node) const = 0;
  /// Scratch bytes the node's kernels need for their duration (0: none; also
  /// 0 when the node cannot be emitted).
  virtual int64_t scratchBytes(const NodeDesc &node) const = 0;
  /// Whether the node's kernel reads all of operand `operand` before it writes
  /// any result, so that operand may share bytes with the results (the overlap
  /// proof's exemption). In-place state updates are the IR's own rule and are
  /// not asked here.
  virtual bool readsAllBeforeWrite(const NodeDesc &node, unsigned operand) const = 0;
  /// Most rows of x the GEMV kernels take (matmul, matmul_id and the gated
  /// fusions); larger matmuls go to a library GEMM, whose only epilogue is
  /// fused.matmul_add's per-row residual (CUDA: cuBLASLt with C = r).
  virtual int64_t maxGemvTokens() const = 0;
  /// Whether prefill chunks of expert-indexed matmuls over block-quantised
  /// experts run as one grouped GEMM (so gated_matmul_id_chunk may fuse
  /// them); false: only 16-bit experts do.
  virtual bool groupsQuantisedExperts() const { return false; }
  /// Whether `node` (matmul_id or fused.gated_matmul_id over block-quantised
  /// experts, f32 x) would run as a grouped GEMM that reads x in f16
  /// natively, so the `gemm-inputs` pass should convert x once before it.
  virtual bool groupedExpertHalfX(const NodeDesc &) const { return false; }
  /// The node's estimated cost on this target.
  virtual NodeCost cost(const NodeDesc &node) const = 0;
};

} // namespace fg
