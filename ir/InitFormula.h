//===- InitFormula.h - weight initialisers, defined once for host and device ---===//
//
// The one definition of what `normal(...)`, `uniform(...)` and `constant(...)`
// initialisers (WeightInit, ir/Graph.h) put in element i of a weight. The CPU
// reference and the host materialise weights with it (runtime/reference), and
// its text is embedded at build time into the NVRTC module that generates
// weights on the device (codegen/cuda/WeightInitModule.cpp), so both sides
// run the same code:
//
//   h = splitmix64(seed ^ (0x9E3779B97F4A7C15 · i))
//   normal:   mean + std · sqrt(-2 ln u1) · cos(2π u2)   (Box–Muller, f64; u1, u2 from h)
//   uniform:  min + (max − min) · (h >> 11) · 2^-53       (f64)
//   constant: value
//   then rounded once to f32; f16/bf16 round that f32 to nearest even;
//   i32/i64 round it half away from zero (llroundf).
//
// Arithmetic is written with explicit round-to-nearest operations, so the
// device compiler cannot contract a·b + c into an FMA that the host does not
// do: uniform and constant weights are bit-identical on both sides. Normal
// weights also go through the platform's f64 log and cos (glibc on the host,
// CUDA's libdevice on the GPU), which may differ in the last f64 bit; after
// rounding to f32 that almost never shows.
//
// This file must stay self-contained: NVRTC compiles it without our include
// paths or the C++ standard library.
//
//===----------------------------------------------------------------------===//
#pragma once

#if defined(__CUDACC__)
#define FG_INIT_FN __host__ __device__ __forceinline__
#define FG_INIT_MUL(x, y) __dmul_rn((x), (y))
#define FG_INIT_ADD(x, y) __dadd_rn((x), (y))
#define FG_INIT_SQRT(x) sqrt(x)
#define FG_INIT_LOG(x) log(x)
#define FG_INIT_COS(x) cos(x)
#define FG_INIT_LLROUNDF(x) llroundf(x)
#else
#include <cmath>
#define FG_INIT_FN inline
#define FG_INIT_MUL(x, y) ((x) * (y))
#define FG_INIT_ADD(x, y) ((x) + (y))
#define FG_INIT_SQRT(x) std::sqrt(x)
#define FG_INIT_LOG(x) std::log(x)
#define FG_INIT_COS(x) std::cos(x)
#define FG_INIT_LLROUNDF(x) std::llround(x)
#endif

namespace fg_init {

typedef unsigned long long u64;

/// The initialiser kinds the formula knows (the device kernels' `kind` argument).
enum Kind : int { None = 0, Normal = 1, Uniform = 2, Constant = 3 };

FG_INIT_FN u64 splitmix64(u64 z) {
  z += 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

/// Element `i` in f64. Normal: a = mean, b = std; uniform: a = min, b = max;
/// constant: a = value.
FG_INIT_FN double value(int kind, u64 seed, double a, double b, u64 i) {
  const u64 h = splitmix64(seed ^ (0x9E3779B97F4A7C15ull * i));
  if (kind == Normal) {
    const double u1 = FG_INIT_MUL((double)(h >> 32) + 0.5, 0x1p-32); // exact: < 2^33, power of 2
    const double u2 = FG_INIT_MUL((double)(h & 0xFFFFFFFFull), 0x1p-32);
    const double r = FG_INIT_SQRT(FG_INIT_MUL(-2.0, FG_INIT_LOG(u1)));
    const double z = FG_INIT_MUL(r, FG_INIT_COS(FG_INIT_MUL(6.283185307179586, u2)));
    return FG_INIT_ADD(a, FG_INIT_MUL(b, z));
  }
  if (kind == Uniform)
    return FG_INIT_ADD(a, FG_INIT_MUL(FG_INIT_ADD(b, -a), FG_INIT_MUL((double)(h >> 11), 0x1p-53)));
  return a;
}

/// The f32 every dtype rounds from.
FG_INIT_FN float toF32(double v) { return (float)v; }

/// An integer weight's element: the f32 value rounded half away from zero.
FG_INIT_FN long long toInteger(float f) { return (long long)FG_INIT_LLROUNDF(f); }

} // namespace fg_init
