//===- attention_convert.cpp - convert(attention) -> fused.attention_convert ===//
//
// A prefill chunk's attention feeds the o projection's library GEMM, which
// reads x in the weight's 16-bit type: the gemm-inputs pass converts the f32
// rows in a launch of their own (W-dense's 2048-token prefill: 32 launches,
// 0.40 ms of 55, and the flash kernel writes 32 MiB of f32 a layer that the
// convert reads back). The fused form stores the rounded rows directly.
//
//   %a = attention(%q, %k_cache, %v_cache, %positions) {scale = 0.088} : f32[512, 32, 128]
//   %y = convert(%a) {dtype = f16} : f16[512, 32, 128]
// becomes
//   %y = fused.attention_convert(%q, %k_cache, %v_cache, %positions)
//        {scale = 0.088, dtype = f16} : f16[512, 32, 128]
//
// Legality: the attention's only consumer is the convert, whose target is a
// 16-bit float. The numbers are the two ops' (attention in float, rounded
// once). The CUDA target takes the fused form only where the flash prefill
// kernel runs (a chunk of attentionPrefillMinTokens queries or more, 16-bit
// caches): the decode kernel merges f32 partials and writes f32, so decode
// entries keep the pair, with the target's reason in the report.
//
// On by default since the thirtieth session. Like glu_convert it folds
// gemm-inputs' converts (that pass runs before fuse while it is enabled).
//
//===----------------------------------------------------------------------===//
#include "passes/fusion/Pattern.h"

namespace fg::fusion {
namespace {

class AttentionConvert : public TreePattern {
public:
  AttentionConvert() {
    addVariant("attention_convert",
               m::Convert(m::Attention(m::Any(Cap::x), m::Any(Cap::kCache), m::Any(Cap::vCache),
                                       m::Any(Cap::attnPositions), m::Opt(Cap::sinks))
                              .bind(Cap::attn)
                              .singleUse()));
  }
  llvm::StringRef name() const override { return "attention_convert"; }
  bool foldsGemmInputConverts() const override { return true; }

  Decision check(const Function &fn, const Match &m) const override {
    return expectSixteenBitConvert(fn, m);
  }

  FusedOp rewrite(const Function &fn, const Match &m) const override {
    auto attn = m.op<op::Attention>(fn, Cap::attn);
    return FusedOp::of(op::FusedAttentionConvertArgs{
        .q = m.get(Cap::x),
        .kCache = m.get(Cap::kCache),
        .vCache = m.get(Cap::vCache),
        .positions = m.get(Cap::attnPositions),
        .sinks = m.get(Cap::sinks),
        .scale = attn->scale(),
        .window = attn->window(),
        .softcap = attn->softcap(),
        .dtype = fn.type(fn.node(m.root).result()).dtype});
  }
};

} // namespace

std::unique_ptr<FusionPattern> createAttentionConvertPattern() {
  return std::make_unique<AttentionConvert>();
}

} // namespace fg::fusion
