//===- GreedyToken.cpp - an entry's greedy token, on the device -----------===//
#include "codegen/cuda/GreedyToken.h"

#include "codegen/cuda/EmitterCommon.h"
#include "codegen/cuda/KernelSources.h"

#include <algorithm>

namespace fg::cuda {

using namespace detail;

namespace {

constexpr uint64_t kGreedyCounterBytes = 3 * sizeof(uint64_t);
/// A draw's shared memory (kernels/sample.cuh SampleShared: the candidates'
/// keys and values, a histogram, scratch; the kernel checks it fits): the
/// launch's dynamic shared memory, given only while the settings draw
/// (runtime: tokenLaunchShared).
constexpr uint32_t kDrawSharedBytes = kDeviceSampleCandidates * 16 + 2048;

} // namespace

GreedyKernel greedyTokenKernel(int64_t vocab, bool hasPositions, unsigned threads,
                               unsigned perThread) {
  GreedyKernel g;
  g.threads = threads;
  g.blocks = gridFor(vocab, static_cast<int64_t>(threads) * std::max(1u, perThread));
  std::string body =
      kernelSource("sample.cuh").str() + kernelSource("greedy.cuh").str() +
      "\nstruct Cfg {\n  static constexpr long long V = " + ilit(vocab) +
      ";\n  static constexpr int NT = " + std::to_string(threads) +
      ";\n  static constexpr int kCap = " + std::to_string(kDeviceSampleCandidates) +
      ";\n  static constexpr bool kHasPositions = " + (hasPositions ? "true" : "false") +
      ";\n  static constexpr unsigned kDrawShared = " + std::to_string(kDrawSharedBytes) +
      ";\n};\n" +
      kernelEntry(threads,
                  "const float *row, unsigned long long *acc, unsigned *status, unsigned *mirror, "
                  "const int *pos, const fg::SampleParams *params",
                  "extern __shared__ __align__(16) unsigned char fgDrawShared[];\n"
                  "  fg::greedyToken<Cfg>(row, acc, status, mirror, pos, params, fgDrawShared);");
  KernelSpec k = finishSpec("greedy_token", body);
  g.symbol = k.name;
  g.source = k.source;
  return g;
}

void addGreedyToken(CompiledEntry &entry, KernelSources &sources, SlotTables &tables,
                    unsigned threads, unsigned perThread) {
  const IoBinding *logits = nullptr;
  for (const IoBinding &o : entry.outputs)
    if (o.name == "logits" && o.type.dtype == DType::F32 && o.type.rank() == 2)
      logits = &o;
  if (!logits || entry.launches.empty())
    return;
  const int64_t rows = logits->type.shape[0], vocab = logits->type.shape[1];
  if (rows < 1 || vocab < 1 || vocab > 0x7fffffff)
    return;
  // The draw's counter takes the last row's position (the decoder ABI's
  // `positions` input, pinned in the arena for the whole entry); an entry
  // without one draws at counter 0 of its epoch.
  const IoBinding *positions = nullptr;
  for (const IoBinding &in : entry.inputs)
    if (in.name == "positions" && in.type.dtype == DType::I32 && in.type.rank() == 1 &&
        in.type.shape[0] >= 1)
      positions = &in;
  GreedyKernel g = greedyTokenKernel(vocab, positions != nullptr, threads, perThread);
  LaunchRecord l;
  l.kind = LaunchRecord::Kind::Kernel;
  l.symbol = g.symbol;
  l.grid[0] = g.blocks;
  l.block[0] = g.threads;
  l.sharedBytes = kDrawSharedBytes;
  BufferRef row = logits->where;
  row.offset += static_cast<uint64_t>((rows - 1) * vocab) * sizeof(float);
  l.args = {row, BufferRef{BufferSpace::Counters, 0, tables.counters(kGreedyCounterBytes)},
            BufferRef{BufferSpace::Status, 0, 0},
            BufferRef{BufferSpace::Counters, 0, tables.statusMirror()}, BufferRef{},
            BufferRef{BufferSpace::Counters, 0, tables.sampleParams()}};
  if (positions) {
    l.args[4] = positions->where;
    l.args[4].offset += static_cast<uint64_t>(positions->type.shape[0] - 1) * sizeof(int32_t);
  } else {
    l.args[4] = l.args[3]; // not read (kHasPositions false)
  }
  std::vector<bool> hasSuccessor(entry.launches.size(), false);
  for (const LaunchRecord &p : entry.launches)
    for (uint32_t d : p.deps)
      hasSuccessor[d] = true;
  for (size_t i = 0; i < entry.launches.size(); ++i)
    if (!hasSuccessor[i])
      l.deps.push_back(static_cast<uint32_t>(i));
  l.node = kNoNode;
  l.what = "the greedy token of @" + entry.name;
  entry.launches.push_back(std::move(l));
  sources.sourceOfLaunch.back().push_back(sources.sources.size());
  sources.sources.emplace_back(g.symbol, g.source);
}

} // namespace fg::cuda
