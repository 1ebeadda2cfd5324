//===- Demo.h - the built-in demo decoder -------------------------*- C++ -*-===//
//
// A small Qwen3-MoE-style decoder with deterministic random weights, used by
// `fusegraph demo` and by tests: 2 layers, n_embd 256, 4 heads, 2 KV heads,
// head dim 64, q/k-norm, neox rope (theta 1e6), 8 experts, top-2 softmax
// routing with renormalisation, expert ffn 128, vocab 512, rms eps 1e-6.
// Weights are f32 (so CPU and GPU agree tightly); the KV cache is f16 unless
// asked otherwise.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "frontends/DecoderBlocks.h"

namespace fg {

/// The demo's configuration for a given context length and cache dtype.
DecoderConfig demoConfig(int64_t ctx = 4096, DType kvDType = DType::F16);

/// The demo's dense sibling for tests: what the MoE demo does not exercise —
/// a dense GeGLU FFN (64), q/k/v biases, rope frequency factors, attention
/// sinks, a sliding window of 3, an attention softcap of 20 — with vocab 64.
DecoderConfig demoDenseConfig(int64_t ctx);

/// The demo's initialiser: normal(seed = index + 1, std = 0.02) for matrices,
/// normal(seed, std = 0.1, mean = 1) for norm weights, std 0.05 for the embedding.
WeightInit demoWeightInit(llvm::StringRef name, const TensorType &type, unsigned index);

/// The demo graph with entries `decode` and `prefill_N` for each bucket
/// (returning the last row of logits, or every row with LogitRows::All).
llvm::Expected<Graph> buildDemoGraph(int64_t ctx, llvm::ArrayRef<int64_t> prefillBuckets,
                                     DType kvDType = DType::F16,
                                     LogitRows logits = LogitRows::Last);

} // namespace fg
