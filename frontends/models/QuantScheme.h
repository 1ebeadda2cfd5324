//===- QuantScheme.h - which block type each decoder weight gets -*- C++ -*-===//
//
// How llama-quantize assigns types to a decoder's tensors, for the workloads
// and tests that build quantised models without files:
//
//   q4_k, q8_0, ...  every matrix and the embedding in that type
//   q4_k_m           llama.cpp's Q4_K_M: q4_k, but q6_k for `output` and for
//                    attn_v and ffn_down(_exps) in the layers use_more_bits
//                    picks (the first and last eighth, every third between:
//                    half of them)
//
// A tensor whose rows are not whole blocks of its type takes llama.cpp's
// fallback type (q4_k -> q5_0, q5_k -> q5_1, q6_k -> q8_0, q2_k / q3_k /
// iq4_xs -> iq4_nl), and f16 when even that does not fit.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "ir/DType.h"

#include "llvm/ADT/StringRef.h"

#include <cstdint>
#include <optional>
#include <string>

namespace fg {

struct QuantScheme {
  DType base = DType::Q4_K;
  bool mediumMix = false; ///< q4_k_m: q6_k for output and half of attn_v / ffn_down

  /// `q4_k`, `iq4_xs`, `q4_k_m`; nullopt for anything else (f16 included).
  static std::optional<QuantScheme> parse(llvm::StringRef name);
  std::string name() const;

  /// The type of decoder weight `weight` (`blk.3.attn_v`, `output`,
  /// `token_embd`) whose rows hold `rowLength` elements, in a model of
  /// `nLayers` layers.
  DType dtypeOf(llvm::StringRef weight, int64_t rowLength, int64_t nLayers) const;
};

/// llama.cpp's use_more_bits(i_layer, n_layers).
bool useMoreBits(int64_t layer, int64_t nLayers);

/// `t` when rows of `rowLength` are whole blocks of it, else llama.cpp's
/// fallback for it (see above), else f16.
DType quantFallback(DType t, int64_t rowLength);

} // namespace fg
