//===- Workloads.h - the benchmark workloads of DESIGN "Benchmarks" -*- C++ -*-===//
//
// Model shapes without model files: random weights that the runtime generates
// on the device (WeightInit::normal; nothing is embedded in a plan).
//
//   w-dense      Llama-3-8B shape: 4096 embd, 32 layers, 32 heads, 8 KV heads,
//                head dim 128, ffn 14336, vocab 128256, rope theta 500000
//   w-moe-12     Qwen3-30B-A3B shape at 12 layers: 2048 embd, 32 heads, 4 KV
//   w-moe-48     heads, head dim 128, q/k-norm, 128 experts, top-8 softmax
//   (w-moe = 48) routing with renormalisation, expert ffn 768, vocab 151936
//   w-tiny       512 embd, 8 layers, 8 heads, 8 KV heads, ffn 1408, vocab 32000
//
// A `-bf16` suffix (`w-dense-bf16`) selects bf16 weights; f16 is the default.
// A quantisation suffix (`w-dense-q4_k`, `w-moe-12-q6_k`, `w-dense-q4_k_m`;
// any block type, or llama.cpp's Q4_K_M mix: QuantScheme.h) quantises the
// matrices and the embedding: the same normal values, quantised on the host
// at load (ir/Quantize.h).
// Matrices and the embedding are normal(std 0.02), norms normal(mean 1,
// std 0.02); the router stays f32 as DecoderBlocks declares it.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "frontends/DecoderBlocks.h"
#include "frontends/models/QuantScheme.h"

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

#include <cstdint>
#include <string>
#include <vector>

namespace fg {

struct WorkloadOptions {
  int64_t ctx = 2048;                ///< KV cache rows (benchmarks decode at position 1024)
  std::vector<int64_t> prefill = {}; ///< prefill buckets; none: `decode` only
  DType kvDType = DType::F16;
  DType weightDType = DType::F16; ///< f16 or bf16; a `-bf16` name suffix overrides it
  bool allLogits = false;         ///< prefill returns every logits row, not the last
};

/// The canonical workload names (without dtype suffixes).
std::vector<std::string> workloadNames();

/// The quantised workloads the benchmarks and tests name (any other block
/// type suffix works too).
std::vector<std::string> quantisedWorkloadNames();

/// Whether `name` is a workload (`w-dense`, `w-moe-12-bf16`, ...).
bool isWorkloadName(llvm::StringRef name);

/// The decoder configuration of workload `name`. Errors name the known workloads.
llvm::Expected<DecoderConfig> workloadConfig(llvm::StringRef name, const WorkloadOptions &opts);

/// The workload's graph: `decode` and one `prefill_N` per bucket.
llvm::Expected<Graph> buildWorkload(llvm::StringRef name, const WorkloadOptions &opts);

/// Quantised weights by `q`: the matrices and the embedding (the weights
/// declared with `matrixMark`) get q.dtypeOf(name, row length), the row length
/// read from the weight's own shape and the layer count from the config being
/// built (a caller may change the sizes after workloadConfig); norms, biases
/// and the router keep their f32.
void quantiseMatrices(DecoderConfig &c, const QuantScheme &q, DType matrixMark);

/// The workloads' initialiser: normal(seed = index + 1, std 0.02), norms mean 1.
WeightInit workloadWeightInit(llvm::StringRef name, const TensorType &type, unsigned index);

} // namespace fg
