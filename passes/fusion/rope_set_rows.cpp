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
  RopeSetRows() { addVariant("rope_set_rows", setRowsPat(ropePat(m::Any("x")))); }
  llvm::StringRef name() const override { return "rope_set_rows"; }

  Decision check(const Function &fn, const Match &m) const override {
    if (Decision d = expectDType(fn, m.get("x"), {DType::F32, DType::F16}, "rope input"); !d)
      return d;
    if (Decision d = checkRope(fn, m.node(fn, "rope")); !d)
      return d;
    return checkSetRows(fn, m.node(fn, "set_rows"));
  }

  FusedOp rewrite(const Function &fn, const Match &m) const override {
    FusedOp op{OpKind::FusedRopeSetRows,
               {m.get("dest"), m.get("x"), m.get("positions"), m.get("indices")},
               ropeAttrs(OpKind::FusedRopeSetRows, m.node(fn, "rope"), nullptr)};
    if (m.has("freq_factors"))
      op.operands.push_back(m.get("freq_factors"));
    return op;
  }
};

} // namespace

std::unique_ptr<FusionPattern> createRopeSetRowsPattern() {
  return std::make_unique<RopeSetRows>();
}

} // namespace fg::fusion
