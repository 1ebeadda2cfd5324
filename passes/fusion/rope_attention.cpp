//===- rope_attention.cpp - q's rope inside decode attention ---------------===//
//
//   %q_rope = rope(%q_heads, %positions) {n_dims = 64} : f32[1, 8, 64]
//   %attn = attention(%q_rope, %k_cache.0.1, %v_cache.0.1, %positions) {scale = 0.125}
// becomes
//   %attn = fused.rope_attention(%q_heads, %k_cache.0.1, %v_cache.0.1, %positions)
//           {scale = 0.125, n_dims = 64}
//
// Decode attention loads each q row once per block; rotating it there costs
// a few sines per block and saves the rope's launch, which sits on the
// critical path between the q projection and attention (issue 13: launches
// a layer). The K rope stays where it is, in the cache write
// (rope_set_rows), which runs beside q's path.
//
// Legality: one position operand for both (the rope's positions are the
// attention's); q f32 (an f16 rope would round its result, which the kernel
// does not); the rope's result has no other use; no sinks (the fused op
// declares none). The target refuses the prefill form (the flash kernel
// takes no rope), so prefill entries keep the rope's launch.
//
//===----------------------------------------------------------------------===//
#include "passes/fusion/Pattern.h"

namespace fg::fusion {
namespace {

class RopeAttention : public TreePattern {
public:
  RopeAttention() {
    addVariant("rope_attention",
               m::Attention(ropePat(m::Any(Cap::x)).singleUse(), m::Any(Cap::kCache),
                            m::Any(Cap::vCache), m::Any(Cap::attnPositions), m::Opt(Cap::sinks)));
  }
  llvm::StringRef name() const override { return "rope_attention"; }

  Decision check(const Function &fn, const Match &m) const override {
    if (m.has(Cap::sinks))
      return Decision::no("the attention has sinks (" + label(fn, m.get(Cap::sinks)) +
                          "), which fused.rope_attention does not take");
    if (m.get(Cap::positions) != m.get(Cap::attnPositions))
      return Decision::no("the rope's positions " + label(fn, m.get(Cap::positions)) +
                          " are not the attention's " + label(fn, m.get(Cap::attnPositions)));
    if (Decision d = expectDType(fn, m.get(Cap::x), {DType::F32}, "rope input"); !d)
      return d;
    return checkRope(fn, *m.producer(fn, Cap::rope));
  }

  FusedOp rewrite(const Function &fn, const Match &m) const override {
    auto rope = m.op<op::Rope>(fn, Cap::rope);
    op::Attention attn(*fn.producer(m.outputs.front()));
    op::FusedRopeAttentionArgs a{.q = m.get(Cap::x),
                                 .kCache = m.get(Cap::kCache),
                                 .vCache = m.get(Cap::vCache),
                                 .positions = m.get(Cap::positions),
                                 .freqFactors = m.get(Cap::freqFactors),
                                 .scale = attn.scale(),
                                 .window = attn.window(),
                                 .softcap = attn.softcap(),
                                 .nDims = rope->nDims()};
    setRopeAttrs(a, *rope);
    return FusedOp::of(a);
  }
};

} // namespace

std::unique_ptr<FusionPattern> createRopeAttentionPattern() {
  return std::make_unique<RopeAttention>();
}

} // namespace fg::fusion
