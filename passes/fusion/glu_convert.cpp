//===- glu_convert.cpp - convert(glu(g, u)) -> fused.glu_convert ----------===//
//
// A prefill chunk's GLU feeds the down projection's library GEMM, which reads
// x in the weight's 16-bit type: the gemm-inputs pass converts it in a launch
// of its own (W-dense's 512-token prefill: 32 of its 128 converts, 7.3 M
// elements a layer). The fused kernel writes the GLU in that type directly.
//
//   %t = glu(%g, %u) : f32[512, 14336]
//   %y = convert(%t) {dtype = f16} : f16[512, 14336]
// becomes
//   %y = fused.glu_convert(%g, %u) {dtype = f16} : f16[512, 14336]
//
// Legality: the GLU's only consumer is the convert, f32 gate and up of the
// same shape, contiguous, a 16-bit target. The numbers are those of the two
// ops (the GLU in float, rounded once to the target type).
//
// On by default since the ninth session (H200, one call, with the vector
// elementwise form: W-dense's 512-token prefill 18.53 -> 18.00 ms, the GLU
// and its convert 0.65 + 0.37 -> 0.57 ms). While it is enabled gemm-inputs
// runs before fuse (the converts must exist when fusion runs:
// codegen/cuda/Compile.cpp); --disable-fusion glu_convert restores the
// order before it.
//
//===----------------------------------------------------------------------===//
#include "passes/fusion/Pattern.h"

namespace fg::fusion {
namespace {

class GluConvert : public TreePattern {
public:
  GluConvert() {
    addVariant("glu_convert",
               m::Convert(m::Glu(m::Any(Cap::gate), m::Any(Cap::up)).bind(Cap::glu).singleUse()));
  }
  llvm::StringRef name() const override { return "glu_convert"; }
  bool foldsGemmInputConverts() const override { return true; }

  Decision check(const Function &fn, const Match &m) const override {
    for (Cap c : {Cap::gate, Cap::up}) {
      ValueId v = m.get(c);
      if (Decision d = expectDType(fn, v, {DType::F32}, c == Cap::gate ? "gate" : "up"); !d)
        return d;
      if (!isContiguous(fn, v))
        return Decision::no(label(fn, v) + " must be contiguous");
    }
    if (fn.type(m.get(Cap::gate)).shape != fn.type(m.get(Cap::up)).shape)
      return Decision::no("gate and up differ in shape (a broadcast GLU)");
    return expectSixteenBitConvert(fn, m);
  }

  FusedOp rewrite(const Function &fn, const Match &m) const override {
    auto glu = m.op<op::Glu>(fn, Cap::glu);
    return FusedOp::of(op::FusedGluConvertArgs{.gate = m.get(Cap::gate),
                                               .up = m.get(Cap::up),
                                               .kind = glu->kind(),
                                               .alpha = glu->alpha(),
                                               .limit = glu->limit(),
                                               .dtype = fn.type(fn.node(m.root).result()).dtype});
  }
};

} // namespace

std::unique_ptr<FusionPattern> createGluConvertPattern() { return std::make_unique<GluConvert>(); }

} // namespace fg::fusion
