//===- QuantScheme.cpp - llama-quantize's type choice per tensor ----------===//
#include "frontends/models/QuantScheme.h"

namespace fg {

std::optional<QuantScheme> QuantScheme::parse(llvm::StringRef name) {
  QuantScheme s;
  if (name == "q4_k_m") {
    s.mediumMix = true;
    return s;
  }
  std::optional<DType> t = parseDType(std::string_view(name.data(), name.size()));
  if (!t || !isQuantized(*t))
    return std::nullopt;
  s.base = *t;
  return s;
}

std::string QuantScheme::name() const {
  return mediumMix ? "q4_k_m" : std::string(dtypeName(base));
}

bool useMoreBits(int64_t layer, int64_t nLayers) {
  return layer < nLayers / 8 || layer >= 7 * nLayers / 8 || (layer - nLayers / 8) % 3 == 2;
}

DType quantFallback(DType t, int64_t rowLength) {
  auto fits = [&](DType d) { return rowLength % dtypeInfo(d).blockElems == 0; };
  if (fits(t))
    return t;
  DType fallback = DType::F16;
  switch (t) {
  case DType::Q4_K:
    fallback = DType::Q5_0;
    break;
  case DType::Q5_K:
    fallback = DType::Q5_1;
    break;
  case DType::Q6_K:
    fallback = DType::Q8_0;
    break;
  case DType::Q2_K:
  case DType::Q3_K:
  case DType::IQ4_XS:
    fallback = DType::IQ4_NL;
    break;
  default:
    break;
  }
  return fits(fallback) ? fallback : DType::F16;
}

DType QuantScheme::dtypeOf(llvm::StringRef weight, int64_t rowLength, int64_t nLayers) const {
  DType t = mediumMix ? DType::Q4_K : base;
  if (mediumMix) {
    int64_t layer = -1;
    llvm::StringRef rest = weight;
    if (rest.consume_front("blk.") && !rest.consumeInteger(10, layer) && rest.consume_front(".")) {
      bool moreBits = rest == "attn_v" || rest == "ffn_down" || rest == "ffn_down_exps";
      if (moreBits && useMoreBits(layer, nLayers))
        t = DType::Q6_K;
    } else if (weight == "output") {
      t = DType::Q6_K;
    }
  }
  return quantFallback(t, rowLength);
}

} // namespace fg
