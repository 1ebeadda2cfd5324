//===- GemmPairs.cpp - sibling GEMMs of one x as one strided batch ---------===//
#include "codegen/cuda/GemmPairs.h"

#include "ir/DType.h"

#include <cstdint>
#include <optional>

namespace fg::cuda {

namespace {

bool sameRef(const BufferRef &a, const BufferRef &b) {
  return a.space == b.space && a.index == b.index && a.offset == b.offset;
}

/// A GEMM that may take part in a pair: the plain form, a single GEMM,
/// writing C = alpha·op(A)·op(B) (beta 0) into the arena.
bool pairable(const LaunchRecord &l) {
  const GemmDesc &g = l.gemm;
  return l.kind == LaunchRecord::Kind::Gemm && !g.lt && g.batch == 1 && g.beta == 0 &&
         g.c.space == BufferSpace::Arena &&
         (g.a.space == BufferSpace::Weight || g.a.space == BufferSpace::Arena);
}

bool sameShape(const GemmDesc &x, const GemmDesc &y) {
  return x.transA == y.transA && x.transB == y.transB && x.m == y.m && x.n == y.n &&
         x.k == y.k && x.aType == y.aType && x.bType == y.bType && x.cType == y.cType &&
         x.lda == y.lda && x.ldb == y.ldb && x.ldc == y.ldc && x.alpha == y.alpha;
}

/// Bytes an operand of `type` spans (one batch member).
uint64_t spanBytes(const GemmExtent &x, DType type) {
  return x.elems() * static_cast<uint64_t>(storageBytes(type, 1));
}

bool overlap(uint64_t a, uint64_t aBytes, uint64_t b, uint64_t bBytes) {
  return a < b + bBytes && b < a + aBytes;
}

} // namespace

unsigned pairSiblingGemms(CompiledEntry &entry, KernelSources &sources,
                          const std::vector<TensorSlot> &weights) {
  std::vector<LaunchRecord> &recs = entry.launches;
  const std::vector<uint64_t> weightAt = weightOffsets(weights);
  // Absolute byte address of A within its space (weights: the runner's one
  // allocation; arena: the entry's arena).
  auto addressOfA = [&](const BufferRef &r) -> std::optional<uint64_t> {
    if (r.space == BufferSpace::Arena)
      return r.offset;
    if (r.index >= weightAt.size())
      return std::nullopt;
    return weightAt[r.index] + r.offset;
  };
  std::vector<uint32_t> into(recs.size());
  for (uint32_t j = 0; j < recs.size(); ++j)
    into[j] = j;
  unsigned pairs = 0;
  for (uint32_t j = 0; j < recs.size(); ++j) {
    if (into[j] != j || !pairable(recs[j]))
      continue;
    for (uint32_t i = j + 1; i < recs.size(); ++i) {
      LaunchRecord &host = recs[j];
      const LaunchRecord &other = recs[i];
      if (into[i] != i || !pairable(other) || other.node == host.node)
        continue;
      const GemmDesc &g = host.gemm, &h = other.gemm;
      if (!sameShape(g, h) || !sameRef(g.b, h.b) || g.a.space != h.a.space)
        continue;
      if (!llvm::all_of(other.deps, [&](uint32_t d) { return d < j; }))
        continue;
      // Side by side in one launch: the later result may not share bytes
      // with the host's result or with the B both read.
      const uint64_t cb = spanBytes(extentC(g), g.cType);
      if (overlap(g.c.offset, cb, h.c.offset, cb))
        continue;
      if (g.b.space == BufferSpace::Arena && overlap(h.c.offset, cb, g.b.offset, spanBytes(extentB(g), g.bType)))
        continue;
      // Nor either result with the other's A where A lives in the arena (a
      // weight decoded into scratch).
      if (g.a.space == BufferSpace::Arena) {
        const uint64_t ab = spanBytes(extentA(g), g.aType);
        if (overlap(h.c.offset, cb, g.a.offset, ab) || overlap(g.c.offset, cb, h.a.offset, ab))
          continue;
      }
      std::optional<uint64_t> a0 = addressOfA(g.a), a1 = addressOfA(h.a);
      if (!a0 || !a1 || *a0 == *a1)
        continue;
      // One sign for both strides: the batch runs from the lower pair on.
      const bool hostFirst = *a1 > *a0;
      if (hostFirst != (h.c.offset > g.c.offset))
        continue;
      const uint64_t aElem = static_cast<uint64_t>(storageBytes(g.aType, 1));
      const uint64_t cElem = static_cast<uint64_t>(storageBytes(g.cType, 1));
      const uint64_t da = hostFirst ? *a1 - *a0 : *a0 - *a1;
      const uint64_t dc = hostFirst ? h.c.offset - g.c.offset : g.c.offset - h.c.offset;
      if (da % aElem != 0 || dc % cElem != 0)
        continue;
      GemmDesc merged = hostFirst ? g : h;
      merged.batch = 2;
      merged.strideA = static_cast<int64_t>(da / aElem);
      merged.strideB = 0;
      merged.strideC = static_cast<int64_t>(dc / cElem);
      host.gemm = merged;
      host.what += " [+ " + other.what + ", one strided batch]";
      into[i] = j;
      ++pairs;
      break;
    }
  }
  if (pairs)
    dropMergedLaunches(entry, sources, into);
  return pairs;
}

} // namespace fg::cuda
