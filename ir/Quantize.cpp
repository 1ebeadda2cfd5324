//===- Quantize.cpp - round-to-nearest quantiser for every block type -----===//
//
// The block quantisers are ir/QuantizeBlock.h (shared with the device's
// weight initialiser); this file walks a row's blocks and maps DType to them.
//
//===----------------------------------------------------------------------===//
#include "ir/Quantize.h"

#include "ir/Numeric.h"
#include "ir/QuantizeBlock.h"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <cstring>

namespace fg {

int quantBlockType(DType t) {
  switch (t) {
  case DType::Q8_0:
    return fg_quant::Q8_0;
  case DType::Q4_0:
    return fg_quant::Q4_0;
  case DType::Q4_1:
    return fg_quant::Q4_1;
  case DType::Q5_0:
    return fg_quant::Q5_0;
  case DType::Q5_1:
    return fg_quant::Q5_1;
  case DType::IQ4_NL:
    return fg_quant::IQ4_NL;
  case DType::Q2_K:
    return fg_quant::Q2_K;
  case DType::Q3_K:
    return fg_quant::Q3_K;
  case DType::Q4_K:
    return fg_quant::Q4_K;
  case DType::Q5_K:
    return fg_quant::Q5_K;
  case DType::Q6_K:
    return fg_quant::Q6_K;
  case DType::IQ4_XS:
    return fg_quant::IQ4_XS;
  case DType::F32:
  case DType::F16:
  case DType::BF16:
  case DType::I32:
  case DType::I64:
    break;
  }
  return 0;
}

bool quantizeRow(DType t, const float *src, uint8_t *dst, int64_t n) {
  int type = quantBlockType(t);
  const DTypeInfo &info = dtypeInfo(t);
  if (!type || n < 0 || n % info.blockElems)
    return false;
  assert(fg_quant::blockElems(type) == info.blockElems &&
         fg_quant::blockBytes(type) == info.blockBytes && "QuantizeBlock.h's table is DType's");
  for (int64_t b = 0, e = n / info.blockElems; b < e; ++b)
    fg_quant::quantizeBlock(type, src + b * info.blockElems, dst + b * info.blockBytes);
  return true;
}

bool quantizesActivations(DType t) {
  return t == DType::Q4_K || t == DType::Q5_K || t == DType::Q8_0 || t == DType::Q4_0 ||
         t == DType::Q6_K;
}

void quantizeActivationsInt8(const float *x, int64_t k, int8_t *xq, float *dx) {
  assert(k % 32 == 0 && "whole blocks of 32");
  for (int64_t b = 0; b < k / 32; ++b) {
    const float *v = x + 32 * b;
    float amax = 0.0f;
    for (int i = 0; i < 32; ++i)
      amax = std::fmax(amax, std::fabs(v[i]));
    // The kernel's order: one f32 division for the inverse, one product a value.
    const float inv = amax > 1e-30f ? 127.0f / amax : 0.0f;
    dx[b] = amax / 127.0f;
    for (int i = 0; i < 32; ++i) { // a NaN (x NaN, or inf · 0) is 0, as __float2int_rn's
      const float q = v[i] * inv;
      xq[32 * b + i] = std::isnan(q) ? int8_t(0) : static_cast<int8_t>(std::nearbyint(q));
    }
  }
}

} // namespace fg
