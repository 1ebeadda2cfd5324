//===- GemmPairs.h - sibling GEMMs of one x as one strided batch -*- C++ -*-===//
//
// Lowering, after step 4 (EmitOptions::gemmPairs): two plain cuBLAS GEMMs of
// one entry with the same shape reading the same B — a prefill chunk's k and
// v projections, x·W_kᵀ and x·W_vᵀ (N = 1024 each at W-dense's shape) —
// become one cublasGemmStridedBatchedEx of two (GemmShape::batch): A's stride
// is the distance between the two weights in the runner's one weight
// allocation (runtime/Program.h, weightOffsets: known when the plan is
// built), B's stride 0, C's the distance between the two results in the
// arena. A small GEMM fills the GPU poorly (k and v were 11-15 µs each at 512
// rows, 370 TFLOP/s against ~700 for q), and the pair fills it twice as well
// (fg_bench_prefill_gemms' "strided" form: 7 µs a layer less on random
// operands, twenty-ninth session).
//
// Which pairs. The later GEMM (i) joins the earlier one (j, the host) when:
// both are the plain form (cublasGemmEx, beta 0, one GEMM each), of one shape,
// types, leading dimensions and alpha; they read the same B; their A are
// both in the weight allocation or both in the arena and their C both in
// the arena, at distances of a whole number of elements with one sign (the
// batch runs from the lower pair on); every dependency of i comes before j
// in the list (i moves up to j's place, so nothing i waits for may come
// after the host); and neither result overlaps the other's, the B both read
// or, for an A in the arena, the other's A (the two run side by side inside
// the launch). With every dependency of i before j, a memory plan that put
// i's result on bytes j reads or writes would have given i an edge from a
// launch at or after j, so these checks hold anyway; they stay as a guard.
//
// Why the proven plan still holds. The host waits for the dependencies of
// both and their dependents wait for it (dropMergedLaunches), so a launch
// that may run beside the host was unordered with both in the proven plan,
// which covered it against both GEMMs' reads and writes. i's work moves
// earlier, but past no launch it waited for.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "codegen/cuda/LaunchSchedule.h"
#include "runtime/Program.h"

namespace fg::cuda {

/// Merges sibling GEMM pairs of `entry` into strided batches of two; returns
/// how many pairs it formed. `weights`: the program's weight table so far
/// (every slot `entry` uses is in it).
unsigned pairSiblingGemms(CompiledEntry &entry, KernelSources &sources,
                          const std::vector<TensorSlot> &weights);

} // namespace fg::cuda
