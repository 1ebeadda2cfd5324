//===- rope_set_rows.cpp - rope then KV-cache write -> fused.rope_set_rows ==//
//
//   %r = rope(%k, %pos) {mode = neox, n_dims = 64} : f32[1, 2, 64]
//   %k_cache.0.1 = set_rows(%k_cache.0, %r, %pos) : f16[4096, 2, 64]
// becomes
//   %k_cache.0.1 = fused.rope_set_rows(%k_cache.0, %k, %pos, %pos) {mode = neox, n_dims = 64}
//
// Legality (FUSIONS.md F3): f32 or f16 rope input (f16 writes only an f16
// cache), f32/f16/bf16 cache, an even head dim, packed rows; the rope output
// already has the cache's row layout (our canonical form has no view there).
//
//===----------------------------------------------------------------------===//
#include "passes/fusion/Pattern.h"

namespace fg::fusion {
namespace {

class RopeSetRows : public TreePattern {
public:
  RopeSetRows() { addVariant("rope_set_rows", setRowsPat(ropePat(m::Any(Cap::x)))); }
  llvm::StringRef name() const override { return "rope_set_rows"; }

  Decision check(const Function &fn, const Match &m) const override {
    if (Decision d = expectDType(fn, m.get(Cap::x), {DType::F32, DType::F16}, "rope input"); !d)
      return d;
    if (Decision d = checkRope(fn, *m.producer(fn, Cap::rope)); !d)
      return d;
    return checkSetRows(fn, *m.producer(fn, Cap::setRows));
  }

  FusedOp rewrite(const Function &fn, const Match &m) const override {
    auto rope = m.op<op::Rope>(fn, Cap::rope);
    op::FusedRopeSetRowsArgs a{.dest = m.get(Cap::dest),
                               .x = m.get(Cap::x),
                               .positions = m.get(Cap::positions),
                               .indices = m.get(Cap::indices),
                               .freqFactors = m.get(Cap::freqFactors),
                               .nDims = rope->nDims()};
    setRopeAttrs(a, *rope);
    return FusedOp::of(a);
  }
};

} // namespace

std::unique_ptr<FusionPattern> createRopeSetRowsPattern() {
  return std::make_unique<RopeSetRows>();
}

} // namespace fg::fusion
