//===- GreedyToken.h - an entry's greedy token, on the device ---*- C++ -*-===//
//
// Lowering, after the input check: an entry with an f32 result `logits`
// [rows, vocab] (a decoder's decode and prefill entries) ends with one small
// kernel (kernels/greedy.cuh) that takes the first argmax of the last row and
// writes it to the status words (kStatusWordGreedy, and a flag word: 0 when
// the row holds a NaN or only -inf). A Session sampling greedily reads that
// word after the step instead of copying the row (vocab × 4 bytes: 513 KB for
// a 128k vocabulary) to the host and scanning it; any other sampler, and
// every observer of the logits, still reads the row.
//
// The launch waits for every launch without a successor (it is the entry's
// one sink), has no node (kNoNode, like the input check), and takes the row,
// its counters (BufferSpace::Counters, left zero) and the status words.
// CudaRunner recognises it as the last launch when that has no node.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "codegen/cuda/LaunchSchedule.h"

namespace fg::cuda {

/// Appends the greedy-token launch to `entry` and registers its source, when
/// the entry has an f32 output `logits` of rank 2.
void addGreedyToken(CompiledEntry &entry, KernelSources &sources, SlotTables &tables);

/// The greedy kernel's (symbol, source) for a row of `vocab` logits, and its
/// grid (blocks of kGreedyThreads).
struct GreedyKernel {
  std::string symbol, source;
  unsigned blocks = 1;
};
GreedyKernel greedyTokenKernel(int64_t vocab);

} // namespace fg::cuda
