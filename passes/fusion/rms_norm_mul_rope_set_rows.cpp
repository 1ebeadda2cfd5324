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
    if (Decision d = checkRope(fn, *m.producer(fn, Cap::rope)); !d)
      return d;
    return checkSetRows(fn, *m.producer(fn, Cap::setRows));
  }

  FusedOp rewrite(const Function &fn, const Match &m) const override {
    auto rope = m.op<op::Rope>(fn, Cap::rope);
    op::FusedRmsNormMulRopeSetRowsArgs a{.dest = m.get(Cap::dest),
                                         .x = m.get(Cap::x),
                                         .w = m.get(Cap::w),
                                         .positions = m.get(Cap::positions),
                                         .indices = m.get(Cap::indices),
                                         .freqFactors = m.get(Cap::freqFactors),
                                         .eps = m.op<op::RmsNorm>(fn, Cap::norm)->eps(),
                                         .nDims = rope->nDims()};
    setRopeAttrs(a, *rope);
    return FusedOp::of(a);
  }
};

} // namespace

std::unique_ptr<FusionPattern> createRmsNormMulRopeSetRowsPattern() {
  return std::make_unique<RmsNormMulRopeSetRows>();
}

} // namespace fg::fusion
