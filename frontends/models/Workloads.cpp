//===- Workloads.cpp - the benchmark workloads ----------------------------===//
#include "frontends/models/Workloads.h"

#include "frontends/models/QuantScheme.h"
#include "ir/Diag.h"

#include "llvm/ADT/StringExtras.h"

namespace fg {

namespace {

/// A workload name split into its shape and weight suffix: `-bf16` / `-f16`,
/// or a quantisation (`-q4_k`, `-q4_k_m`, any block type; QuantScheme.h).
struct SplitName {
  llvm::StringRef base;
  std::optional<QuantScheme> quant;
};

SplitName splitName(llvm::StringRef name, DType &dtype) {
  if (name.consume_back("-bf16")) {
    dtype = DType::BF16;
  } else if (name.consume_back("-f16")) {
    dtype = DType::F16;
  } else if (size_t dash = name.rfind('-'); dash != llvm::StringRef::npos) {
    if (std::optional<QuantScheme> q = QuantScheme::parse(name.substr(dash + 1)))
      return {name.take_front(dash), q};
  }
  return {name, std::nullopt};
}


DecoderConfig denseConfig() {
  DecoderConfig c;
  c.nLayers = 32;
  c.nEmbd = 4096;
  c.nHeads = 32;
  c.nKvHeads = 8;
  c.headDim = 128;
  c.vocab = 128256;
  c.ffn = DecoderConfig::FfnKind::Dense;
  c.nFf = 14336;
  c.normEps = 1e-5;
  c.rope.mode = RopeMode::Normal;
  c.rope.theta = 500000;
  return c;
}

DecoderConfig moeConfig(int64_t layers) {
  DecoderConfig c;
  c.nLayers = layers;
  c.nEmbd = 2048;
  c.nHeads = 32;
  c.nKvHeads = 4;
  c.headDim = 128;
  c.vocab = 151936;
  c.ffn = DecoderConfig::FfnKind::Moe;
  c.nExperts = 128;
  c.nExpertsUsed = 8;
  c.expertFf = 768;
  c.gating = TopkGating::Softmax;
  c.renormalizeExperts = true;
  c.qkNorm = true;
  c.normEps = 1e-6;
  c.rope.mode = RopeMode::Neox;
  c.rope.theta = 1e6;
  return c;
}

DecoderConfig tinyConfig() {
  DecoderConfig c;
  c.nLayers = 8;
  c.nEmbd = 512;
  c.nHeads = 8;
  c.nKvHeads = 8;
  c.headDim = 64;
  c.vocab = 32000;
  c.ffn = DecoderConfig::FfnKind::Dense;
  c.nFf = 1408;
  c.normEps = 1e-5;
  c.rope.mode = RopeMode::Normal;
  c.rope.theta = 10000;
  return c;
}

} // namespace

void quantiseMatrices(DecoderConfig &c, const QuantScheme &q, DType matrixMark) {
  c.weightDTypeOf = [q, matrixMark](const DecoderConfig &built, llvm::StringRef name, DType dflt,
                                    llvm::ArrayRef<int64_t> shape) {
    if (dflt != matrixMark || shape.empty())
      return dflt;
    return q.dtypeOf(name, shape.back(), built.nLayers);
  };
}

std::vector<std::string> workloadNames() { return {"w-dense", "w-moe-12", "w-moe-48", "w-tiny"}; }

std::vector<std::string> quantisedWorkloadNames() {
  return {"w-dense-q4_k",  "w-dense-q8_0",  "w-dense-q4_0",  "w-dense-q6_k",
          "w-dense-q4_k_m", "w-moe-12-q4_k", "w-moe-12-q4_0", "w-moe-12-q6_k",
          "w-tiny-q4_k",   "w-tiny-q8_0",   "w-tiny-q4_k_m"};
}

bool isWorkloadName(llvm::StringRef name) {
  DType d = DType::F16;
  llvm::StringRef base = splitName(name, d).base;
  return base == "w-moe" || llvm::is_contained(workloadNames(), base.str());
}

llvm::Expected<DecoderConfig> workloadConfig(llvm::StringRef name, const WorkloadOptions &opts) {
  DType wt = opts.weightDType;
  SplitName split = splitName(name, wt);
  llvm::StringRef base = split.base;
  DecoderConfig c;
  if (base == "w-dense")
    c = denseConfig();
  else if (base == "w-moe-12")
    c = moeConfig(12);
  else if (base == "w-moe-48" || base == "w-moe")
    c = moeConfig(48);
  else if (base == "w-tiny")
    c = tinyConfig();
  else
    return makeError("unknown workload '" + name + "' (workloads: " +
                     llvm::join(workloadNames(), ", ") +
                     "; add -bf16 for bf16 weights or a quantisation such as -q4_k, -q8_0, "
                     "-q4_k_m)");
  if (wt != DType::F16 && wt != DType::BF16)
    return makeError("workload weights must be f16 or bf16, got " +
                     std::string(dtypeName(wt)));
  c.weightDType = wt;
  if (split.quant)
    quantiseMatrices(c, *split.quant, wt);
  c.ctx = opts.ctx;
  c.kvDType = opts.kvDType;
  c.init = workloadWeightInit;
  return c;
}

llvm::Expected<Graph> buildWorkload(llvm::StringRef name, const WorkloadOptions &opts) {
  auto c = workloadConfig(name, opts);
  if (!c)
    return c.takeError();
  for (int64_t n : opts.prefill)
    if (n < 1 || n > opts.ctx)
      return makeError("invalid option: prefill size " + std::to_string(n) +
                       " must be in [1, ctx = " + std::to_string(opts.ctx) + "]");
  return buildDecoderGraph(
      *c, decoderEntries(opts.prefill, opts.allLogits ? LogitRows::All : LogitRows::Last));
}

WeightInit workloadWeightInit(llvm::StringRef name, const TensorType &, unsigned index) {
  uint64_t seed = index + 1;
  if (name.endswith("_norm"))
    return WeightInit::normal(seed, 0.02, 1.0);
  return WeightInit::normal(seed, 0.02);
}

} // namespace fg
