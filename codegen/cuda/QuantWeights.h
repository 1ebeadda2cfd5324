//===- QuantWeights.h - which readers take GGUF blocks as stored -*- C++ -*-===//
//
// The CUDA target's answer to "does this node's kernel read this
// block-quantised operand as stored?", asked by compile() before lowering:
// a weight every reader takes natively stays in its GGUF type (the device
// holds the file's bytes); any other is dequantised to f16 at load time.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "codegen/cuda/Kernel.h"

#include <string>

namespace fg::cuda {

/// Whether `node`'s kernel reads operand `operand` in its block-quantised
/// dtype as stored, for the types with a decoder in kernels/gemv.cuh (q8_0,
/// q4_0, q4_1, q4_k, q6_k): the weight streams of a GEMV (matmul, matmul_id,
/// fused.gated_matmul(_id), fused.matmul_add; a matmul over more rows than
/// the GEMV takes decodes the weight to f16 scratch for cuBLAS), and the
/// table of get_rows when it is [rows, K] indexed by [T] ids (a gather that
/// dequantises, kernels/dequant.cuh). When false, `why` says why; compile
/// then dequantises that weight to f16 at load time (the named fallback).
bool readsQuantizedNatively(const Function &fn, const Node &node, unsigned operand,
                            const EmitOptions &options, std::string *why = nullptr);

} // namespace fg::cuda
