//===- Quantize.h - a test quantiser for every GGUF block type --*- C++ -*-===//
//
// Turns f32 values into valid blocks of any block-quantised dtype, so weights
// can be initialised quantised (`weight %w: q4_k[64, 256] {init = normal(...)}`)
// and kernels tested and benchmarked without model files.
//
// Round to nearest per block, with ggml's block layouts (ir/Numeric.cpp decodes
// them; the blocks themselves are ir/QuantizeBlock.h, shared with the device): not llama.cpp's importance-weighted search, so a file quantised here
// is a little less accurate than one from llama-quantize, but every block is
// valid and decodes close to its input (ir/Numeric.h decodeRow).
//
//===----------------------------------------------------------------------===//
#pragma once

#include "ir/DType.h"

#include <cstdint>

namespace fg {

/// Quantises `n` f32 values (a multiple of `t`'s block size) into `dst`
/// (storageBytes(t, n) bytes). Returns false when `t` is not a block type or
/// `n` is not a whole number of blocks. Non-finite inputs are read as 0;
/// scales saturate at f16's largest finite value (never inf).
bool quantizeRow(DType t, const float *src, uint8_t *dst, int64_t n);

/// The block type of `t` as ir/QuantizeBlock.h numbers it (fg_quant::Type:
/// the device initialiser's argument), or 0 when `t` is not a block type.
int quantBlockType(DType t);

/// How a GEMV kernel reads its activations x. The DP4A GEMVs
/// (codegen/cuda/kernels/gemv_dp4a.cuh) quantise x to int8 per aligned block
/// of 32, as ggml's q8_1: the CUDA program records which launches do
/// (LaunchRecord::actQuant), so the CPU reference can compute what they
/// compute (ReferenceInterpreter::setActQuant) instead of the exact product.
enum class ActQuant : uint8_t {
  Exact,            ///< x as it is (f32 arithmetic)
  Int8,             ///< x ≈ dx·xq per block (quantizeActivationsInt8)
  Int8NormDeferred, ///< a norm prologue's x·norm_w quantised, the row's rstd
                    ///< multiplying each sum (the deferred prologue)
};
// A norm prologue with its rstd applied before the quantisation (the DP4A
// kernel's debug form, FG_DEBUG_DP4A_NORM_DEFERRED=0) records Int8: the
// reference then quantises its own normalised row, whose f64 rstd differs
// from the kernel's f32 one in the last bits, so a rounding may flip (about
// 4e-4 of a result each): that form is checked against the exact reference.

/// Whether a GEMV over `t` weights quantises x where its launch says Int8
/// (the DP4A kernels' types, q4_K, q8_0, q4_0, q6_K, and q5_K, which the
/// grouped expert GEMM on integer tensor cores takes).
bool quantizesActivations(DType t);

/// x[0 .. k) (k a multiple of 32) to int8 per block of 32, the DP4A kernels'
/// arithmetic to the bit: dx = max|x| / 127 and xq = rint(x · (127 / max|x|))
/// (round half to even), in f32; a block whose max|x| ≤ 1e-30 is all zeros,
/// a NaN 0 (the max ignores it).
/// `dx` gets k / 32 scales.
void quantizeActivationsInt8(const float *x, int64_t k, int8_t *xq, float *dx);

} // namespace fg
