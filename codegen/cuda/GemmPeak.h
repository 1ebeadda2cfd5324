//===- GemmPeak.h - measured tensor-core GEMM throughput ----------*- C++ -*-===//
//
// The compute roofline beside the prefill benchmark (issue 15): one large
// cuBLAS GEMM (f16 or bf16 operands, f32 accumulate, the compute type the
// plan's cuBLAS calls use) on random operands, timed with CUDA events in the
// same process, so a prefill figure is read as a fraction of what this GPU
// reaches today on data like a model's.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "llvm/Support/Error.h"

#include <cstdint>

namespace fg::cuda {

struct GemmPeakOptions {
  int64_t n = 8192;  ///< an n x n x n GEMM
  bool bf16 = false; ///< operand type: f16 (default) or bf16
  int repeats = 10;  ///< timed repetitions after 3 untimed ones; the median is reported
  /// One repeated value in A and B instead of random ones: ~12 % faster on
  /// the H200 (less power, higher clocks), a peak no model's weights reach.
  bool constantOperands = false;
};

struct GemmPeak {
  double tflops = 0; ///< 2 n^3 / median time
  double ms = 0;     ///< the median time of one GEMM
  int64_t n = 0;
};

/// Fills `bytes` of device memory with random 16-bit floats in [-1, 1] (f16,
/// or bf16), the operands every tensor-core timing should use: one repeated
/// value draws less power and clocks higher (~12 % on the H200).
llvm::Error fillRandom16(void *device, size_t bytes, bool bf16 = false);

/// Times the GEMM on the current device. Errors: no device, CUDA or cuBLAS failures.
llvm::Expected<GemmPeak> measureGemmPeak(const GemmPeakOptions &opts = {});

} // namespace fg::cuda
