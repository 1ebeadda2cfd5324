//===- rope_kv_attention.cpp - decode attention writes its own K and V rows ---===//
//
//   %q_rope = rope(%q_heads, %positions) {n_dims = 64} : f32[1, 8, 64]
//   %k_rope = rope(%k_heads, %positions) {n_dims = 64} : f32[1, 8, 64]
//   %k_cache.0.1 = set_rows(%k_cache.0, %k_rope, %positions) : f16[4096, 8, 64]
//   %v_cache.0.1 = set_rows(%v_cache.0, %v_heads, %positions) : f16[4096, 8, 64]
//   %attn = attention(%q_rope, %k_cache.0.1, %v_cache.0.1, %positions) {scale = 0.125}
// becomes
//   %k_cache.0.1, %v_cache.0.1, %attn = fused.rope_kv_attention(%k_cache.0,
//       %v_cache.0, %q_heads, %k_heads, %v_heads, %positions) {scale = 0.125, n_dims = 64}
//
// Issue 13, launches a layer: q's rope, K's rope and cache write and V's
// cache write each had a launch between the q/k/v projections and the
// attention (three of a llama layer's ten). The eleventh session moved q's
// rope alone into the attention (rope_attention) and found it slower: the
// K path (k GEMV, rope_set_rows) then decided when attention could start.
// Here both cache writes go too: the attention block whose keys hold the
// step's position rotates k, stores the k and v rows and only then reads
// its keys (kernels/attention.cuh, attnWriteKv), so the attention follows
// the projections directly.
//
// The group: an attention whose q is a rope, whose k cache is set_rows of a
// rope and whose v cache is set_rows, all at the attention's positions —
// the ropes with one freq_factors operand (or none) and the same
// attributes. Legality: q, k and v rows f32 and packed; the caches f32, f16
// or bf16 and written whole rows at a time (the cache's rows are the
// source's rows); the caches distinct state (the driver's rules keep the
// rotated rows' other uses out); no reader of a new cache version before
// the attention (one node for both writes could not be ordered: a helper's
// review found the cycle); no sinks. The CUDA target takes one token
// (a block writes the rows its own keys hold; with more tokens a block
// would need rows other tokens' blocks write) and refuses the rest.
//
// The benefit, 5 ops, outranks rope_set_rows (2) and rope_attention (2), so
// where it applies those do not; where the target refuses it (prefill
// chunks), they take the pieces as before.
//
//===----------------------------------------------------------------------===//
#include "passes/fusion/Pattern.h"

namespace fg::fusion {
namespace {

class RopeKvAttention : public TreePattern {
public:
  RopeKvAttention() {
    // One Cap for every positions operand and for both ropes' freq_factors:
    // the matcher binds them to one value or fails.
    Pat qRope = ropePat(m::Any(Cap::x)).singleUse();
    Pat kRope = m::Rope(m::Any(Cap::k), m::Any(Cap::positions), m::Opt(Cap::freqFactors))
                    .bind(Cap::kRope)
                    .singleUse();
    Pat kRows =
        m::SetRows(m::Any(Cap::kCache), std::move(kRope), m::Any(Cap::positions)).bind(Cap::kRows);
    Pat vRows =
        m::SetRows(m::Any(Cap::vCache), m::Any(Cap::v), m::Any(Cap::positions)).bind(Cap::vRows);
    addVariant("rope_kv_attention",
               m::Attention(std::move(qRope), std::move(kRows), std::move(vRows),
                            m::Any(Cap::positions), m::Opt(Cap::sinks)),
               {Cap::kRows, Cap::vRows, Cap::root});
  }
  llvm::StringRef name() const override { return "rope_kv_attention"; }

  Decision check(const Function &fn, const Match &m) const override {
    if (m.has(Cap::sinks))
      return Decision::no("the attention has sinks (" + label(fn, m.get(Cap::sinks)) +
                          "), which fused.rope_kv_attention does not take");
    const Node &qRope = *m.producer(fn, Cap::rope), &kRope = *m.producer(fn, Cap::kRope);
    for (unsigned a = 0; a < qRope.attrs.size(); ++a)
      if (!qRope.attrs[a].equals(kRope.attrs[a], qRope.info().attrs[a].kind))
        return Decision::no("the ropes of " + label(fn, m.get(Cap::x)) + " and " +
                            label(fn, m.get(Cap::k)) + " differ in " +
                            std::string(qRope.info().attrs[a].name));
    if (m.get(Cap::kCache) == m.get(Cap::vCache))
      return Decision::no("the k and v rows go to one cache " + label(fn, m.get(Cap::kCache)));
    // The two cache writes become one node: a reader of either new cache
    // before the attention (between the writes) could have to follow the
    // fused node and precede it at once (it reads the other cache's old
    // version, or feeds the fused op). Readers after the attention are fine.
    for (Cap c : {Cap::kRows, Cap::vRows})
      for (NodeId u = 0; u < m.root; ++u)
        if (!m.absorbs(u) && llvm::is_contained(fn.node(u).operands, m.get(c)))
          return Decision::no(label(fn, m.get(c)) + " is read before the attention, by " +
                              label(fn, fn.node(u).results.back()) +
                              ": one node for both cache writes could not be ordered");
    for (Cap c : {Cap::x, Cap::k, Cap::v}) {
      const llvm::StringRef what = c == Cap::x ? llvm::StringRef("q") : capName(c);
      if (Decision d = expectDType(fn, m.get(c), {DType::F32}, what); !d)
        return d;
      if (!hasContiguousRows(fn, m.get(c)))
        return Decision::no("the rows of " + label(fn, m.get(c)) + " must be packed");
    }
    for (Cap c : {Cap::kRows, Cap::vRows}) {
      const Node &w = *m.producer(fn, c);
      if (Decision d = checkSetRows(fn, w); !d)
        return d;
      if (fn.type(w.operands[1]).rank() != fn.type(w.result()).rank() ||
          fn.type(w.operands[1]).rowLength() != fn.type(w.result()).rowLength())
        return Decision::no("set_rows " + label(fn, w.result()) + " writes rows of " +
                            fn.type(w.operands[1]).str() + " into " + fn.type(w.result()).str());
    }
    if (Decision d = checkRope(fn, qRope); !d)
      return d;
    return checkRope(fn, kRope);
  }

  FusedOp rewrite(const Function &fn, const Match &m) const override {
    auto rope = m.op<op::Rope>(fn, Cap::rope);
    op::Attention attn(fn.node(m.root));
    op::FusedRopeKvAttentionArgs a{.kCache = m.get(Cap::kCache),
                                   .vCache = m.get(Cap::vCache),
                                   .q = m.get(Cap::x),
                                   .k = m.get(Cap::k),
                                   .v = m.get(Cap::v),
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

std::unique_ptr<FusionPattern> createRopeKvAttentionPattern() {
  return std::make_unique<RopeKvAttention>();
}

} // namespace fg::fusion
