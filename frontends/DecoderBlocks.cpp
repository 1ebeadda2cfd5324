//===- DecoderBlocks.cpp - canonical decoder building blocks --------------===//
#include "frontends/DecoderBlocks.h"

#include "ir/Checked.h"
#include "ir/Diag.h"

#include "llvm/ADT/StringSet.h"
#include "llvm/ADT/Twine.h"

#include <cmath>
#include <limits>

namespace fg {

namespace {

/// `prefix` + `suffix` (a value name).
std::string nameOf(llvm::StringRef prefix, llvm::StringRef suffix) {
  return (prefix + suffix).str();
}

/// x [→ add(x, bias)] when a bias is present.
ValueId withBias(Builder &b, ValueId x, ValueId bias, llvm::StringRef name) {
  return present(bias) ? b.add(x, bias, name) : x;
}

} // namespace

// --- norms ----------------------------------------------------------------------

ValueId rmsNormMul(Builder &b, ValueId x, ValueId w, double eps, ValueId residual,
                   llvm::StringRef name) {
  std::string base = name.str();
  ValueId n = b.rmsNorm(x, eps, base.empty() ? "" : base + "_rms");
  ValueId y = b.mul(n, w, present(residual) ? (base.empty() ? "" : base + "_mul") : base);
  if (present(residual))
    y = b.add(y, residual, base);
  return y;
}

// --- attention ------------------------------------------------------------------

namespace {

/// matmul → [add bias] → reshape [T, heads, dim] → [rms_norm → mul(norm)] → rope.
ValueId projectRope(Builder &b, ValueId x, ValueId positions, ValueId w, ValueId bias, ValueId norm,
                    ValueId freqFactors, int64_t heads, int64_t dim, const AttentionOptions &opt,
                    llvm::StringRef p) {
  if (b.failed())
    return kNoValue;
  int64_t tokens = b.type(x).rank() ? b.type(x).shape.front() : 1;
  ValueId y = b.matmul(x, w, nameOf(p, "_proj"));
  y = withBias(b, y, bias, nameOf(p, "_bias"));
  y = b.reshape(y, {tokens, heads, dim}, nameOf(p, "_heads"));
  if (present(norm))
    y = b.mul(b.rmsNorm(y, opt.normEps, nameOf(p, "_rms")), norm, nameOf(p, "_normed"));
  std::optional<ValueId> ff;
  if (present(freqFactors))
    ff = freqFactors;
  return b.rope(y, positions, opt.rope, ff, nameOf(p, "_rope"));
}

/// The name of a state value, for its next version (`k_cache.0` → `k_cache.0.1`).
std::string stateName(Builder &b, ValueId v) {
  return v < b.function().numValues() ? b.function().value(v).name : std::string();
}

} // namespace

AttentionResult attentionBlock(Builder &b, ValueId x, ValueId positions, const AttentionWeights &w,
                               ValueId kCache, ValueId vCache, const AttentionOptions &opt,
                               llvm::StringRef prefix) {
  AttentionResult r;
  if (b.failed())
    return r;
  if (opt.nHeads <= 0 || opt.nKvHeads <= 0 || opt.headDim <= 0) {
    b.fail(prefix + "attention: n_heads, n_kv_heads and head_dim must be positive");
    return r;
  }
  int64_t tokens = b.type(x).rank() ? b.type(x).shape.front() : 1;
  int64_t dv = opt.headDimV ? opt.headDimV : opt.headDim;
  std::string p = prefix.str();

  ValueId q = projectRope(b, x, positions, w.q, w.qBias, w.qNorm, w.freqFactors, opt.nHeads,
                          opt.headDim, opt, p + "q");
  ValueId k = projectRope(b, x, positions, w.k, w.kBias, w.kNorm, w.freqFactors, opt.nKvHeads,
                          opt.headDim, opt, p + "k");
  // The rope output [T, Hkv, D] already has the cache's row layout: no view.
  r.kCache = b.setRows(kCache, k, positions, stateName(b, kCache));

  ValueId v = b.matmul(x, w.v, p + "v_proj");
  v = withBias(b, v, w.vBias, p + "v_bias");
  v = b.reshape(v, {tokens, opt.nKvHeads, dv}, p + "v_heads");
  r.vCache = b.setRows(vCache, v, positions, stateName(b, vCache));

  Builder::AttentionParams ap;
  ap.scale = opt.scale != 0 ? opt.scale : 1.0 / std::sqrt(static_cast<double>(opt.headDim));
  ap.window = opt.window;
  ap.softcap = opt.softcap;
  std::optional<ValueId> sinks;
  if (present(w.sinks))
    sinks = w.sinks;
  ValueId a = b.attention(q, r.kCache, r.vCache, positions, ap, sinks, p + "attn");
  a = b.reshape(a, {tokens, opt.nHeads * dv}, p + "attn_flat");
  r.out = b.matmul(a, w.output, p + "attn_out");
  return r;
}

// --- MoE routing ------------------------------------------------------------------

MoeRouting moeRouting(Builder &b, ValueId x, ValueId gateInp, ValueId selectionBias,
                      const MoeRoutingOptions &opt, llvm::StringRef prefix) {
  MoeRouting r;
  std::string p = prefix.str();
  ValueId logits = b.matmul(x, gateInp, p + "router_logits");
  ValueId probs = kNoValue;
  if (opt.gating == TopkGating::DelayedSoftmax) {
    // top-k of the raw logits, then a softmax of the k chosen (no bias, no renormalisation).
    r.ids = b.topK(logits, opt.nExpertsUsed, p + "expert_ids");
    ValueId chosen = b.getRows(logits, r.ids, p + "expert_logits");
    ValueId weights = b.softmax(chosen, std::nullopt, 1, 0, p + "expert_weights");
    if (opt.scale != 1)
      weights = b.scale(weights, opt.scale, 0, p + "expert_weights_scaled");
    r.weights = weights;
    return r;
  }
  switch (opt.gating) {
  case TopkGating::DelayedSoftmax:
    break; // handled above
  case TopkGating::Softmax:
    probs = b.softmax(logits, std::nullopt, 1, 0, p + "router_probs");
    break;
  case TopkGating::Sigmoid:
    probs = b.unary(OpKind::Sigmoid, logits, p + "router_probs");
    break;
  case TopkGating::SqrtSoftplus:
    probs = b.unary(OpKind::Sqrt, b.unary(OpKind::Softplus, logits, p + "router_softplus"),
                    p + "router_probs");
    break;
  }
  ValueId selection =
      present(selectionBias) ? b.add(probs, selectionBias, p + "router_select") : probs;
  r.ids = b.topK(selection, opt.nExpertsUsed, p + "expert_ids");
  ValueId weights = b.getRows(probs, r.ids, p + "expert_weights");
  if (opt.renormalize) {
    ValueId sum = b.sumRows(weights, p + "expert_weights_sum");
    ValueId clamped = b.clamp(sum, kMoeRenormMin, std::numeric_limits<double>::infinity(),
                              p + "expert_weights_clamped");
    weights = b.div(weights, clamped, p + "expert_weights_norm");
  }
  if (opt.scale != 1)
    weights = b.scale(weights, opt.scale, 0, p + "expert_weights_scaled");
  r.weights = weights;
  return r;
}

// --- feed-forward --------------------------------------------------------------------

ValueId gatedFfn(Builder &b, ValueId x, ValueId gate, ValueId up, ValueId down, GluKind kind,
                 llvm::StringRef prefix) {
  std::string p = prefix.str();
  ValueId g = b.matmul(x, gate, p + "ffn_gate_proj");
  ValueId u = b.matmul(x, up, p + "ffn_up_proj");
  ValueId act = b.glu(g, u, kind, 1.702, 7.0, p + "ffn_act");
  return b.matmul(act, down, p + "ffn_out");
}

ValueId gatedFfnExperts(Builder &b, ValueId x, ValueId gateExps, ValueId upExps, ValueId downExps,
                        ValueId ids, GluKind kind, llvm::StringRef prefix) {
  if (b.failed())
    return kNoValue;
  std::string p = prefix.str();
  const TensorType &xt = b.type(x);
  if (xt.rank() != 2)
    return b.fail(p + "experts: input must be [T, n_embd], got " + xt.str());
  ValueId x3 = b.reshape(x, {xt.shape[0], 1, xt.shape[1]}, p + "ffn_exps_in");
  ValueId g = b.matmulId(x3, gateExps, ids, p + "ffn_gate_exps_proj");
  ValueId u = b.matmulId(x3, upExps, ids, p + "ffn_up_exps_proj");
  ValueId act = b.glu(g, u, kind, 1.702, 7.0, p + "ffn_exps_act");
  return b.matmulId(act, downExps, ids, p + "ffn_exps_out");
}

ValueId moeWeightedSum(Builder &b, ValueId experts, ValueId weights, llvm::StringRef prefix) {
  if (b.failed())
    return kNoValue;
  std::string p = prefix.str();
  const TensorType &et = b.type(experts);
  if (et.rank() != 3)
    return b.fail(p + "moe sum: experts must be [T, k, n], got " + et.str());
  int64_t t = et.shape[0], k = et.shape[1], n = et.shape[2];
  ValueId w3 = b.reshape(weights, {t, k, 1}, p + "expert_weights_3d");
  ValueId weighted = b.mul(experts, w3, p + "ffn_exps_weighted");
  ValueId sum = kNoValue;
  for (int64_t j = 0; j < k; ++j) {
    ValueId view =
        b.view(weighted, {t, n}, {k * n, 1}, j * n, p + "ffn_exps_slot" + std::to_string(j));
    sum = j == 0 ? view : b.add(sum, view, p + "ffn_moe_sum");
  }
  return sum;
}

// --- whole decoders ---------------------------------------------------------------------

namespace {

llvm::Error badConfig(const llvm::Twine &msg) {
  return makeError("invalid decoder config: " + msg);
}

std::string str(int64_t v) { return std::to_string(v); }

bool isKvDType(DType t) { return t == DType::F16 || t == DType::BF16 || t == DType::F32; }

struct LayerWeights {
  ValueId attnNorm = kNoValue, ffnNorm = kNoValue;
  ValueId postAttnNorm = kNoValue, postFfwNorm = kNoValue; ///< gemma3
  AttentionWeights attn;
  ValueId ffnGate = kNoValue, ffnUp = kNoValue, ffnDown = kNoValue;
  ValueId gateInp = kNoValue, selectionBias = kNoValue;
  ValueId gateExps = kNoValue, upExps = kNoValue, downExps = kNoValue;
  ValueId kCache = kNoValue, vCache = kNoValue;
};

/// Declares weights in one fixed order, so every entry sees the same names,
/// types and initialisers (and the init index is stable).
class WeightDeclarer {
public:
  WeightDeclarer(Builder &b, const DecoderConfig &c) : b_(b), c_(c) {}
  ValueId operator()(const std::string &name, DType dt, llvm::ArrayRef<int64_t> shape) {
    TensorType t(c_.weightDTypeOf ? c_.weightDTypeOf(c_, name, dt, shape) : dt, shape);
    WeightInit init = c_.init ? c_.init(name, t, index_) : WeightInit();
    ++index_;
    return b_.weight(name, t, init);
  }

private:
  Builder &b_;
  const DecoderConfig &c_;
  unsigned index_ = 0;
};

} // namespace

llvm::Error validateDecoderConfig(const DecoderConfig &c) {
  auto positive = [](int64_t v) { return v > 0; };
  if (!positive(c.nLayers))
    return badConfig("n_layers must be >= 1, got " + str(c.nLayers));
  if (!positive(c.nEmbd))
    return badConfig("n_embd must be >= 1, got " + str(c.nEmbd));
  if (!positive(c.nHeads) || !positive(c.nKvHeads))
    return badConfig("n_heads and n_kv_heads must be >= 1, got " + str(c.nHeads) + " and " +
                     str(c.nKvHeads));
  if (!positive(c.vocab))
    return badConfig("vocab must be >= 1, got " + str(c.vocab));
  if (c.headDim < 0)
    return badConfig("head_dim must be >= 1 (or 0 for n_embd / n_heads), got " + str(c.headDim));
  if (c.headDim == 0 && c.nEmbd % c.nHeads)
    return badConfig("n_embd " + str(c.nEmbd) + " is not divisible by n_heads " + str(c.nHeads) +
                     "; set head_dim explicitly");
  if (c.nHeads % c.nKvHeads)
    return badConfig("n_heads " + str(c.nHeads) + " is not a multiple of n_kv_heads " +
                     str(c.nKvHeads));
  int64_t d = c.resolvedHeadDim();
  int64_t nDims = c.rope.nDims ? c.rope.nDims : d;
  if (nDims <= 0 || nDims % 2 || nDims > d)
    return badConfig("rope n_dims " + str(nDims) + " must be even, positive and <= head_dim " +
                     str(d));
  if (c.rope.theta <= 0)
    return badConfig("rope theta must be > 0");
  if (c.normEps < 0)
    return badConfig("norm eps must be >= 0");
  if (c.slidingWindow < 0 || c.attnSoftcap < 0)
    return badConfig("sliding window and attention softcap must be >= 0");
  if (!c.slidingLayers.empty() && static_cast<int64_t>(c.slidingLayers.size()) != c.nLayers)
    return badConfig("sliding layer pattern lists " +
                     str(static_cast<int64_t>(c.slidingLayers.size())) +
                     " layers but the model has " + str(c.nLayers));
  if (c.ropeSliding && c.ropeSliding->theta <= 0)
    return badConfig("sliding-layer rope theta must be > 0");
  if (!(c.embdScale > 0))
    return badConfig("embedding scale must be > 0");
  if (c.ffn == DecoderConfig::FfnKind::Dense) {
    if (!positive(c.nFf))
      return badConfig("dense ffn size must be >= 1, got " + str(c.nFf));
  } else {
    if (!positive(c.nExperts) || !positive(c.expertFf))
      return badConfig("MoE needs n_experts >= 1 and expert_ffn >= 1, got " + str(c.nExperts) +
                       " and " + str(c.expertFf));
    if (c.nExpertsUsed < 1 || c.nExpertsUsed > c.nExperts)
      return badConfig("experts used (top-k) " + str(c.nExpertsUsed) + " must be in [1, " +
                       str(c.nExperts) + "]");
  }
  if (!positive(c.ctx))
    return badConfig("ctx must be >= 1, got " + str(c.ctx));
  if (!isKvDType(c.kvDType))
    return badConfig("kv cache dtype must be f16, bf16 or f32, got " +
                     std::string(dtypeName(c.kvDType)));
  if (!isReal(c.weightDType))
    return badConfig("weight dtype must be a float or block-quantised type, got " +
                     std::string(dtypeName(c.weightDType)));
  // Every tensor the decoder declares fits the text form's 2^48 elements
  // (checked products: huge hyperparameters never wrap into small shapes).
  {
    constexpr int64_t kMaxElements = int64_t(1) << 48;
    const bool dense = c.ffn == DecoderConfig::FfnKind::Dense;
    const std::pair<const char *, llvm::SmallVector<int64_t, 3>> sizes[] = {
        {"n_heads * head_dim * n_embd", {c.nHeads, d, c.nEmbd}},
        {"n_kv_heads * head_dim * n_embd", {c.nKvHeads, d, c.nEmbd}},
        {"vocab * n_embd", {c.vocab, c.nEmbd}},
        {"ctx * n_kv_heads * head_dim", {c.ctx, c.nKvHeads, d}},
        {"ctx * n_heads", {c.ctx, c.nHeads}},
        {dense ? "ffn size * n_embd" : "n_experts * expert_ffn * n_embd",
         dense ? llvm::SmallVector<int64_t, 3>{c.nFf, c.nEmbd}
               : llvm::SmallVector<int64_t, 3>{c.nExperts, c.expertFf, c.nEmbd}}};
    for (const auto &[what, dims] : sizes) {
      std::optional<int64_t> n = checkedElements(dims);
      if (!n || *n > kMaxElements)
        return badConfig(llvm::Twine(what) + " (" + shapeStr(dims) +
                         ") is more than 2^48 elements");
    }
  }
  if (isQuantized(c.weightDType)) {
    int64_t block = dtypeInfo(c.weightDType).blockElems;
    int64_t ffIn = c.ffn == DecoderConfig::FfnKind::Dense ? c.nFf : c.expertFf;
    for (auto [what, len] : {std::pair<const char *, int64_t>{"n_embd", c.nEmbd},
                             {"n_heads * head_dim", c.nHeads * d},
                             {"ffn size", ffIn}})
      if (len % block)
        return badConfig(llvm::Twine(what) + " = " + str(len) + " is not a multiple of the " +
                         std::string(dtypeName(c.weightDType)) + " block size " + str(block));
  }
  return llvm::Error::success();
}

std::vector<DecoderEntry> decoderEntries(llvm::ArrayRef<int64_t> prefillBuckets,
                                         LogitRows logits) {
  std::vector<DecoderEntry> out{{"decode", 1, LogitRows::Last, EntryRole::Decode}};
  for (int64_t n : prefillBuckets)
    out.push_back({"prefill_" + std::to_string(n), n, logits, EntryRole::Prefill});
  return out;
}

llvm::Error buildDecoderFunction(const DecoderConfig &c, int64_t tokens, Function &fn,
                                 LogitRows logits) {
  if (auto e = validateDecoderConfig(c))
    return e;
  if (tokens < 1 || tokens > c.ctx)
    return badConfig("entry '" + fn.name() + "' has " + str(tokens) +
                     " tokens; it must be in [1, ctx = " + str(c.ctx) + "]");
  const bool moe = c.ffn == DecoderConfig::FfnKind::Moe;
  const int64_t d = c.resolvedHeadDim(), nDims = c.rope.nDims ? c.rope.nDims : d;
  const int64_t qDim = c.nHeads * d, kvDim = c.nKvHeads * d;
  const DType wt = c.weightDType, f32 = DType::F32;

  Builder b(fn);
  // ABI order: inputs, then every weight, then every state.
  ValueId tokenIds = b.input("tokens", {DType::I32, {tokens}});
  ValueId positions = b.input("positions", {DType::I32, {tokens}});
  // The values each input may hold (checked by the executors): token ids name
  // rows of the embedding, positions rows of the KV cache.
  fn.arguments()[fn.value(tokenIds).index].bind = {BindKind::Tokens, 0, c.vocab};
  fn.arguments()[fn.value(positions).index].bind = {BindKind::Positions, 0, c.ctx};

  WeightDeclarer weight(b, c);
  ValueId tokenEmbd = weight("token_embd", wt, {c.vocab, c.nEmbd});
  ValueId ropeFreqs = c.ropeFreqFactors ? weight("rope_freqs", f32, {nDims / 2}) : kNoValue;
  std::vector<LayerWeights> layers(c.nLayers);
  for (int64_t il = 0; il < c.nLayers; ++il) {
    LayerWeights &L = layers[il];
    std::string p = "blk." + str(il) + ".";
    L.attnNorm = weight(p + "attn_norm", f32, {c.nEmbd});
    L.attn.q = weight(p + "attn_q", wt, {qDim, c.nEmbd});
    if (c.qkvBias)
      L.attn.qBias = weight(p + "attn_q.bias", f32, {qDim});
    L.attn.k = weight(p + "attn_k", wt, {kvDim, c.nEmbd});
    if (c.qkvBias)
      L.attn.kBias = weight(p + "attn_k.bias", f32, {kvDim});
    L.attn.v = weight(p + "attn_v", wt, {kvDim, c.nEmbd});
    if (c.qkvBias)
      L.attn.vBias = weight(p + "attn_v.bias", f32, {kvDim});
    L.attn.output = weight(p + "attn_output", wt, {c.nEmbd, qDim});
    if (c.qkNorm) {
      L.attn.qNorm = weight(p + "attn_q_norm", f32, {d});
      L.attn.kNorm = weight(p + "attn_k_norm", f32, {d});
    }
    if (c.attnSinks)
      L.attn.sinks = weight(p + "attn_sinks", f32, {c.nHeads});
    L.attn.freqFactors = ropeFreqs;
    if (c.postNorms)
      L.postAttnNorm = weight(p + "post_attention_norm", f32, {c.nEmbd});
    L.ffnNorm = weight(p + "ffn_norm", f32, {c.nEmbd});
    if (!moe) {
      L.ffnGate = weight(p + "ffn_gate", wt, {c.nFf, c.nEmbd});
      L.ffnUp = weight(p + "ffn_up", wt, {c.nFf, c.nEmbd});
      L.ffnDown = weight(p + "ffn_down", wt, {c.nEmbd, c.nFf});
    } else {
      L.gateInp = weight(p + "ffn_gate_inp", f32, {c.nExperts, c.nEmbd});
      if (c.expertSelectionBias)
        L.selectionBias = weight(p + "exp_probs_b", f32, {c.nExperts});
      L.gateExps = weight(p + "ffn_gate_exps", wt, {c.nExperts, c.expertFf, c.nEmbd});
      L.upExps = weight(p + "ffn_up_exps", wt, {c.nExperts, c.expertFf, c.nEmbd});
      L.downExps = weight(p + "ffn_down_exps", wt, {c.nExperts, c.nEmbd, c.expertFf});
    }
    if (c.postNorms)
      L.postFfwNorm = weight(p + "post_ffw_norm", f32, {c.nEmbd});
  }
  ValueId outputNorm = weight("output_norm", f32, {c.nEmbd});
  ValueId output = c.tieEmbeddings ? tokenEmbd : weight("output", wt, {c.vocab, c.nEmbd});
  for (int64_t il = 0; il < c.nLayers; ++il) {
    layers[il].kCache = b.state("k_cache." + str(il), {c.kvDType, {c.ctx, c.nKvHeads, d}});
    layers[il].vCache = b.state("v_cache." + str(il), {c.kvDType, {c.ctx, c.nKvHeads, d}});
  }

  AttentionOptions ao;
  ao.nHeads = c.nHeads;
  ao.nKvHeads = c.nKvHeads;
  ao.headDim = d;
  ao.normEps = c.normEps;
  ao.rope = c.rope;
  ao.rope.nDims = nDims;
  ao.scale = c.attnScale;
  ao.window = c.slidingWindow;
  ao.softcap = c.attnSoftcap;
  MoeRoutingOptions ro;
  ro.nExpertsUsed = c.nExpertsUsed;
  ro.gating = c.gating;
  ro.renormalize = c.renormalizeExperts;
  ro.scale = c.expertWeightsScale;

  ValueId x = b.getRows(tokenEmbd, tokenIds, c.embdScale != 1 ? "x_unscaled" : "x");
  if (c.embdScale != 1)
    x = b.scale(x, c.embdScale, 0, "x");
  for (int64_t il = 0; il < c.nLayers; ++il) {
    const LayerWeights &L = layers[il];
    std::string p = "blk." + str(il) + ".";
    AttentionOptions lao = ao;
    if (!c.isSlidingLayer(il))
      lao.window = 0;
    else if (c.ropeSliding) {
      lao.rope = *c.ropeSliding;
      lao.rope.nDims = nDims;
    }
    ValueId h = rmsNormMul(b, x, L.attnNorm, c.normEps, kNoValue, p + "attn_in");
    AttentionResult a = attentionBlock(b, h, positions, L.attn, L.kCache, L.vCache, lao, p);
    ValueId ffnInp = present(L.postAttnNorm)
                         ? rmsNormMul(b, a.out, L.postAttnNorm, c.normEps, x, p + "ffn_inp")
                         : b.add(a.out, x, p + "ffn_inp");
    ValueId f = rmsNormMul(b, ffnInp, L.ffnNorm, c.normEps, kNoValue, p + "ffn_in");
    ValueId ffnOut = kNoValue;
    if (!moe) {
      ffnOut = gatedFfn(b, f, L.ffnGate, L.ffnUp, L.ffnDown, c.glu, p);
    } else {
      MoeRouting r = moeRouting(b, f, L.gateInp, L.selectionBias, ro, p);
      ValueId experts = gatedFfnExperts(b, f, L.gateExps, L.upExps, L.downExps, r.ids, c.glu, p);
      ffnOut = moeWeightedSum(b, experts, r.weights, p);
    }
    x = present(L.postFfwNorm) ? rmsNormMul(b, ffnOut, L.postFfwNorm, c.normEps, ffnInp, p + "out")
                               : b.add(ffnOut, ffnInp, p + "out");
  }
  // Only the last token's logits: row T-1 of the residual stream feeds the
  // final norm and the lm head (a GEMV instead of a T-row GEMM).
  if (logits == LogitRows::Last && tokens > 1)
    x = b.view(x, {1, c.nEmbd}, {c.nEmbd, 1}, (tokens - 1) * c.nEmbd, "x_last");
  ValueId norm = rmsNormMul(b, x, outputNorm, c.normEps, kNoValue, "result_norm");
  b.result(b.matmul(norm, output, "logits"));
  return b.finish();
}

llvm::Expected<Graph> buildDecoderGraph(const DecoderConfig &config,
                                        llvm::ArrayRef<DecoderEntry> entries) {
  if (auto e = validateDecoderConfig(config))
    return e;
  if (entries.empty())
    return badConfig("no entries to build (expected at least `decode`)");
  llvm::StringSet<> seen;
  Graph g;
  for (const DecoderEntry &entry : entries) {
    if (!seen.insert(entry.name).second)
      return badConfig("entry '" + entry.name + "' is listed twice");
    Function &fn = g.addFunction(entry.name);
    if (auto e = buildDecoderFunction(config, entry.tokens, fn, entry.logits))
      return e;
    if (entry.role != EntryRole::Other)
      fn.setContract({entry.role, entry.tokens});
  }
  return g;
}

} // namespace fg
