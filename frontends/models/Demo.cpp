//===- Demo.cpp - the built-in demo decoder -------------------------------===//
#include "frontends/models/Demo.h"

namespace fg {

DecoderConfig demoConfig(int64_t ctx, DType kvDType) {
  DecoderConfig c;
  c.nLayers = 2;
  c.nEmbd = 256;
  c.nHeads = 4;
  c.nKvHeads = 2;
  c.headDim = 64;
  c.vocab = 512;
  c.ffn = DecoderConfig::FfnKind::Moe;
  c.nExperts = 8;
  c.nExpertsUsed = 2;
  c.expertFf = 128;
  c.gating = TopkGating::Softmax;
  c.renormalizeExperts = true;
  c.glu = GluKind::SwiGLU;
  c.normEps = 1e-6;
  c.rope.mode = RopeMode::Neox;
  c.rope.theta = 1e6;
  c.qkNorm = true;
  c.ctx = ctx;
  c.kvDType = kvDType;
  c.weightDType = DType::F32;
  c.init = demoWeightInit;
  return c;
}

DecoderConfig demoDenseConfig(int64_t ctx) {
  DecoderConfig c = demoConfig(ctx);
  c.ffn = DecoderConfig::FfnKind::Dense;
  c.nFf = 64;
  c.qkNorm = false;
  c.qkvBias = true;
  c.ropeFreqFactors = true;
  c.attnSinks = true;
  c.slidingWindow = 3;
  c.attnSoftcap = 20;
  c.vocab = 64;
  c.glu = GluKind::GeGLU;
  return c;
}

WeightInit demoWeightInit(llvm::StringRef name, const TensorType &, unsigned index) {
  uint64_t seed = index + 1;
  if (name.endswith("_norm"))
    return WeightInit::normal(seed, 0.1, 1.0);
  // The embedding is a little larger than the matrices: with std 1 it drowns
  // the layers' contributions to the residual stream and greedy decoding falls
  // into a 2-cycle at once; with 0.02 it repeats tokens early; 0.05 gives
  // varied greedy sequences (DemoNumericTest checks this).
  if (name == "token_embd")
    return WeightInit::normal(seed, 0.05);
  return WeightInit::normal(seed, 0.02);
}

llvm::Expected<Graph> buildDemoGraph(int64_t ctx, llvm::ArrayRef<int64_t> prefillBuckets,
                                     DType kvDType, LogitRows logits) {
  return buildDecoderGraph(demoConfig(ctx, kvDType), decoderEntries(prefillBuckets, logits));
}

} // namespace fg
