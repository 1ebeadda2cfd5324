//===- Numeric.h - storage conversions: f16, bf16, GGUF blocks ---*- C++ -*-===//
//
// The one place that knows how each dtype's bytes map to real numbers. The
// CPU reference, weight initialisation and the model frontends all use it.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "ir/DType.h"

#include <cstdint>

namespace fg {

float halfToFloat(uint16_t h);
uint16_t floatToHalf(float f); ///< round to nearest even; overflow -> inf
float bf16ToFloat(uint16_t b);
uint16_t floatToBf16(float f); ///< round to nearest even

/// Decodes `n` consecutive elements starting at `src` (n a multiple of the
/// block size for block types) into f32.
void decodeRow(DType t, const uint8_t *src, float *dst, int64_t n);
/// Encodes `n` f32 values into `dst` in dtype `t` (float and integer types; for
/// integer types values are rounded to nearest). Block types are not encodable
/// here: returns false.
bool encodeRow(DType t, const float *src, uint8_t *dst, int64_t n);
/// A q4_K or q5_K row's two parts of `n` elements (whole 256-blocks): scaled
/// = d·sc·q and mins = dmin·m, so that decodeRow gives scaled − mins (each
/// product in f32, as decodeRow's). The DP4A GEMV and the grouped expert
/// GEMM on integer tensor cores apply the first to int8 x and the second to
/// the exact x (ActQuant, ir/Quantize.h). Asserts `t` is one of the two.
void decodeKQuantParts(DType t, const uint8_t *src, float *scaled, float *mins, int64_t n);

/// The 16 levels of iq4_nl / iq4_xs (ggml's kvalues_iq4nl), times the block scale.
extern const int8_t kIQ4Values[16];

} // namespace fg
