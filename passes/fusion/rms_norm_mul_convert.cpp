//===- rms_norm_mul_convert.cpp - convert(rms_norm(x) * w) -> 16-bit norm -===//
//
// A prefill chunk's attention and FFN norms feed the q/k/v and gate/up
// projections' library GEMMs, which read x in the weight's 16-bit type: the
// gemm-inputs pass converts the norm's f32 rows in a launch of their own
// (W-dense's 512-token prefill: 64 of its 128 converts, 2 M elements each).
// The norm's row kernel writes them in that type directly.
//
//   %n = rms_norm(%x) {eps = 1e-05} : f32[512, 4096]
//   %m = mul(%n, %w) : f32[512, 4096]               // either operand order
//   %y = convert(%m) {dtype = f16} : f16[512, 4096]
// becomes
//   %y = fused.rms_norm_mul(%x, %w) {eps = 1e-05, dtype = f16} : f16[512, 4096]
//
// and so does convert(fused.rms_norm_mul(%x, %w)) of an f32 norm (a graph
// fused earlier, or written so).
//
// No new op: fused.rms_norm_mul has a `dtype` attribute (default f32), whose
// decomposition ends in `[dtype != f32] convert` (ir/Ops.def). The row
// kernel (kernels/row.cuh normRows) already stores through its Cfg::Out, the
// result's type (fgStore rounds each f32 value once), which is how rms_norm
// of f16 rows runs; so the emitter, its work split and the CPU reference
// (the decomposition: the norm in f32, rounded once to the target, equal to
// the unfused pair) needed no new code. glu_convert has an op of its own
// because glu is a primitive op whose result type is its input's. The name
// differs from the fused op's so that it can be turned off on its own.
//
// Legality: as rms_norm_mul (f32 x, w and product, packed rows, w
// broadcasting into x); the product's only consumer is the convert (the
// driver's single-use rule); a 16-bit float target; an already fused norm
// must store f32.
//
// rms_norm_mul_add (norm · w + residual) is not covered: its result is the
// residual stream, which the next layer's norm and add read in f32 too.
//
// On by default since the ninth session (--disable-fusion rms_norm_mul_convert
// turns it off; checked and timed in that session's third GPU call:
// bench/RESULTS.md); while it is enabled gemm-inputs runs before fuse (the
// converts must exist when fusion runs: codegen/cuda/Compile.cpp).
//
//===----------------------------------------------------------------------===//
#include "passes/fusion/Pattern.h"

namespace fg::fusion {
namespace {

class RmsNormMulConvert : public TreePattern {
public:
  RmsNormMulConvert() {
    // convert(rms_norm(x) * w): absorbs three ops, so it wins over rms_norm_mul.
    addVariant("rms_norm_mul_convert", m::Convert(normMulPat().singleUse()));
    // convert(fused.rms_norm_mul(x, w)): a norm fused before the convert existed.
    addVariant(
        "fused",
        m::Convert(m::FusedRmsNormMul(m::Any(Cap::x), m::Any(Cap::w)).bind(Cap::norm).singleUse()));
  }
  llvm::StringRef name() const override { return "rms_norm_mul_convert"; }
  bool foldsGemmInputConverts() const override { return true; }

  Decision check(const Function &fn, const Match &m) const override {
    if (auto fused = m.op<op::FusedRmsNormMul>(fn, Cap::norm)) {
      if (fused->dtype() != DType::F32)
        return Decision::no("the norm " + label(fn, m.get(Cap::norm)) + " already stores " +
                            std::string(dtypeName(fused->dtype())));
      ValueId x = m.get(Cap::x), w = m.get(Cap::w);
      for (auto [v, what] : {std::pair<ValueId, const char *>{x, "input"}, {w, "weight"}})
        if (Decision d = expectDType(fn, v, {DType::F32}, what); !d)
          return d;
      if (!hasContiguousRows(fn, x) || !hasContiguousRows(fn, w))
        return Decision::no("the rows of " + label(fn, x) + " and " + label(fn, w) +
                            " must be packed");
    } else if (Decision d = checkNormMul(fn, m); !d) {
      return d;
    }
    return expectSixteenBitConvert(fn, m);
  }

  FusedOp rewrite(const Function &fn, const Match &m) const override {
    auto fused = m.op<op::FusedRmsNormMul>(fn, Cap::norm);
    double eps = fused ? fused->eps() : m.op<op::RmsNorm>(fn, Cap::norm)->eps();
    return FusedOp::of(op::FusedRmsNormMulArgs{.x = m.get(Cap::x),
                                               .w = m.get(Cap::w),
                                               .eps = eps,
                                               .dtype = fn.type(fn.node(m.root).result()).dtype});
  }
};

} // namespace

std::unique_ptr<FusionPattern> createRmsNormMulConvertPattern() {
  return std::make_unique<RmsNormMulConvert>();
}

} // namespace fg::fusion
