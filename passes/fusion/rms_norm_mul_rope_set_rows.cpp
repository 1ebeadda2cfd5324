//===- rms_norm_mul_rope_set_rows.cpp - k-norm, rope, KV-cache write -------===//
//
//   %n = rms_norm(%k) {eps = 1e-06} : f32[1, 2, 64]
//   %m = mul(%n, %k_norm) : f32[1, 2, 64]
//   %r = rope(%m, %pos) {mode = neox, n_dims = 64} : f32[1, 2, 64]
//   %k_cache.0.1 = set_rows(%k_cache.0, %r, %pos) : f16[4096, 2, 64]
// becomes
//   %k_cache.0.1 = fused.rms_norm_mul_rope_set_rows(%k_cache.0, %k, %k_norm, %pos, %pos)
//                      {eps = 1e-06, mode = neox, n_dims = 64} : f16[4096, 2, 64]
//
// The fused op updates the cache in place (operand 0). Legality (FUSIONS.md
// F12): rms_norm_mul_rope's rules plus the cache write's (f32/f16/bf16 cache;
// i32 or i64 indices); the overlap proof runs after planning.
//
//===----------------------------------------------------------------------===//
#include "passes/fusion/Pattern.h"

namespace fg::fusion {
namespace {

class RmsNormMulRopeSetRows : public TreePattern {
public:
  RmsNormMulRopeSetRows() {
    addVariant("rms_norm_mul_rope_set_rows", setRowsPat(ropePat(normMulPat().singleUse())));
  }
  llvm::StringRef name() const override { return "rms_norm_mul_rope_set_rows"; }

  Decision check(const Function &fn, const Match &m) const override {
    if (Decision d = checkNormMul(fn, m); !d)
      return d;
    if (Decision d = checkRope(fn, m.node(fn, "rope")); !d)
      return d;
    return checkSetRows(fn, m.node(fn, "set_rows"));
  }

  FusedOp rewrite(const Function &fn, const Match &m) const override {
    FusedOp op{
        OpKind::FusedRmsNormMulRopeSetRows,
        {m.get("dest"), m.get("x"), m.get("w"), m.get("positions"), m.get("indices")},
        ropeAttrs(OpKind::FusedRmsNormMulRopeSetRows, m.node(fn, "rope"), &m.node(fn, "norm"))};
    if (m.has("freq_factors"))
      op.operands.push_back(m.get("freq_factors"));
    return op;
  }
};

} // namespace

std::unique_ptr<FusionPattern> createRmsNormMulRopeSetRowsPattern() {
  return std::make_unique<RmsNormMulRopeSetRows>();
}

} // namespace fg::fusion
