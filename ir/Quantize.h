//===- Quantize.h - a test quantiser for every GGUF block type --*- C++ -*-===//
//
// Turns f32 values into valid blocks of any block-quantised dtype, so weights
// can be initialised quantised (`weight %w: q4_k[64, 256] {init = normal(...)}`)
// and kernels tested and benchmarked without model files.
//
// Round to nearest per block, with ggml's block layouts (ir/Numeric.cpp decodes
// them): not llama.cpp's importance-weighted search, so a file quantised here
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

} // namespace fg
