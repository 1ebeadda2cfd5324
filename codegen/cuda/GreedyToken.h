//===- GreedyToken.h - an entry's token, picked on the device ---*- C++ -*-===//
//
// Lowering, after the input check: an entry with an f32 result `logits`
// [rows, vocab] (a decoder's decode and prefill entries) ends with one small
// kernel (kernels/greedy.cuh) that takes the first argmax of the last row —
// or a seeded draw from it, when the host set the program's draw settings
// (runtime/Program.h DeviceSampleParams; kernels/sample.cuh) — and writes it
// to the status words (kStatusWordGreedy, and a flag word: 1 for the token,
// 0 when the row holds a NaN or only -inf, 2 when a draw's candidates did not
// fit). A Session reads that word after the step instead of copying the row
// (vocab × 4 bytes: 513 KB for a 128k vocabulary) to the host; a custom
// sampler, and every observer of the logits, still reads the row.
//
// The launch waits for every launch without a successor (it is the entry's
// one sink), has no node (kNoNode, like the input check), and takes the row,
// its counters (BufferSpace::Counters, left zero), the status words and
// their device mirror, the last element of the entry's `positions` input
// (the draw's counter) and the draw settings (one counters range for the
// program). Its dynamic shared memory (sharedBytes) is a draw's: CudaRunner,
// which recognises it as the last launch when that has no node, launches it
// with none while the settings are greedy (and rebuilds the graphs when they
// change), so a greedy step's blocks, resident early under programmatic
// launch, take no shared memory from the kernels before them.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "codegen/cuda/LaunchSchedule.h"

namespace fg::cuda {

/// Appends the greedy-token launch to `entry` and registers its source, when
/// the entry has an f32 output `logits` of rank 2.
/// `threads`: a block's (EmitOptions::greedyThreads); `perThread`: values a
/// thread scans at least (EmitOptions::greedyPerThread).
void addGreedyToken(CompiledEntry &entry, KernelSources &sources, SlotTables &tables,
                    unsigned threads = 1024, unsigned perThread = 4);

/// The greedy kernel's (symbol, source) for a row of `vocab` logits, and its
/// grid (blocks of `threads`, `perThread` values a thread at least: the grid
/// is as small as that allows); `hasPositions`: its draw reads the last
/// row's position.
struct GreedyKernel {
  std::string symbol, source;
  unsigned blocks = 1, threads = 1024;
};
GreedyKernel greedyTokenKernel(int64_t vocab, bool hasPositions = true, unsigned threads = 1024,
                               unsigned perThread = 4);

} // namespace fg::cuda
