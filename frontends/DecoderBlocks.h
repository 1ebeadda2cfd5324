//===- DecoderBlocks.h - canonical decoder building blocks ------*- C++ -*-===//
//
// Every frontend lowers its model through these blocks, so each pattern the
// fusion passes look for has exactly ONE spelling in the IR:
//
//   rms_norm·w      %n = rms_norm(%x) {eps}; %y = mul(%n, %w) [; add(%y, %residual)]
//   q/k path        matmul → [add bias] → reshape [T, H, D]
//                   → [rms_norm → mul(norm [D])] → rope(positions[, freq_factors])
//   kv-cache write  set_rows(%k_cache, %k_rope, %positions)
//                   (no view: [T, Hkv, D] already is the cache's row layout)
//   attention       attention(q, k_cache', v_cache', positions[, sinks])
//                   → reshape [T, H·Dv] → matmul(wo)
//   top-k routing   matmul(gate_inp) → softmax | sigmoid | sqrt(softplus)
//                   → [add(bias)] → top_k → get_rows(probs, ids)
//                   → [sum_rows → clamp(min) → div] → [scale]
//   gated FFN       glu(matmul(x, gate), matmul(x, up)) → matmul(down)
//                   (and the same with matmul_id for experts)
//   MoE reduction   mul(experts, reshape(weights, [T, k, 1])) → k views → k−1 adds
//
// Blocks never fail loudly: shape errors are recorded by the Builder (first
// one wins) and reported by buildDecoderGraph / Builder::finish.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "ir/Builder.h"
#include "ir/Graph.h"

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace fg {

/// kNoValue marks an absent optional operand in the structs below.
inline bool present(ValueId v) { return v != kNoValue; }

// --- norms ----------------------------------------------------------------------

/// mul(rms_norm(x) {eps}, w) [→ add(·, residual)]; the rms_norm is operand 0 of
/// the mul and the mul operand 0 of the add (the order F12-F15 expect).
ValueId rmsNormMul(Builder &b, ValueId x, ValueId w, double eps, ValueId residual = kNoValue,
                   llvm::StringRef name = {});

// --- attention ------------------------------------------------------------------

struct AttentionWeights {
  ValueId q = kNoValue, k = kNoValue, v = kNoValue, output = kNoValue; ///< [out, in]
  ValueId qBias = kNoValue, kBias = kNoValue, vBias = kNoValue;        ///< optional [out]
  ValueId qNorm = kNoValue, kNorm = kNoValue;                          ///< optional [head_dim]
  ValueId freqFactors = kNoValue;                                      ///< optional [n_dims/2]
  ValueId sinks = kNoValue;                                            ///< optional [n_heads]
};

struct AttentionOptions {
  int64_t nHeads = 0, nKvHeads = 0, headDim = 0;
  int64_t headDimV = 0;  ///< 0: headDim
  double normEps = 1e-6; ///< q/k-norm epsilon
  Builder::RopeParams rope;
  double scale = 0; ///< 0: 1/sqrt(headDim)
  int64_t window = 0;
  double softcap = 0;
};

struct AttentionResult {
  ValueId out = kNoValue;    ///< [T, n_embd]
  ValueId kCache = kNoValue; ///< the caches' new versions
  ValueId vCache = kNoValue;
};

/// Self-attention over the KV cache. `x` is the normalised input [T, n_embd];
/// `prefix` names intermediates (`blk.0.` → `blk.0.q_rope`, ...).
AttentionResult attentionBlock(Builder &b, ValueId x, ValueId positions, const AttentionWeights &w,
                               ValueId kCache, ValueId vCache, const AttentionOptions &opt,
                               llvm::StringRef prefix = {});

// --- MoE routing ------------------------------------------------------------------

/// The renormalisation clamp (2^-14), as ggml's tests and kernels use it.
constexpr double kMoeRenormMin = 6.103515625e-5;

struct MoeRoutingOptions {
  int64_t nExpertsUsed = 0; ///< k
  TopkGating gating = TopkGating::Softmax; ///< early gating only (not DelayedSoftmax)
  bool renormalize = false; ///< w / max(Σ w, kMoeRenormMin)
  double scale = 1;         ///< applied (as a scale op) only when != 1
};

struct MoeRouting {
  ValueId ids = kNoValue;     ///< i32[T, k], best first
  ValueId weights = kNoValue; ///< f32[T, k], the unbiased probabilities of the chosen experts
};

/// Top-k routing of `x` [T, n_embd] by `gateInp` [E, n_embd]. `selectionBias`
/// [E] (optional) steers the choice only; the weights stay unbiased.
MoeRouting moeRouting(Builder &b, ValueId x, ValueId gateInp, ValueId selectionBias,
                      const MoeRoutingOptions &opt, llvm::StringRef prefix = {});

// --- feed-forward --------------------------------------------------------------------

/// glu(matmul(x, gate), matmul(x, up)) {kind} → matmul(·, down).
ValueId gatedFfn(Builder &b, ValueId x, ValueId gate, ValueId up, ValueId down, GluKind kind,
                 llvm::StringRef prefix = {});

/// Expert-indexed: x [T, n] → reshape [T, 1, n]; glu(matmul_id(x, gate_exps, ids),
/// matmul_id(x, up_exps, ids)) → matmul_id(·, down_exps, ids) → f32[T, k, n].
ValueId gatedFfnExperts(Builder &b, ValueId x, ValueId gateExps, ValueId upExps, ValueId downExps,
                        ValueId ids, GluKind kind, llvm::StringRef prefix = {});

/// Σ_j experts[t, j, :] · weights[t, j]: mul(experts [T, k, n], reshape(weights,
/// [T, k, 1])) → k views ([T, n], strides [k·n, 1], offset j·n) → k−1 adds.
ValueId moeWeightedSum(Builder &b, ValueId experts, ValueId weights, llvm::StringRef prefix = {});

// --- whole decoders ---------------------------------------------------------------------

/// A weight's initialiser, from its name, type and index in the (fixed)
/// declaration order; the index is a convenient stable seed.
using WeightInitFn =
    std::function<WeightInit(llvm::StringRef name, const TensorType &type, unsigned index)>;

struct DecoderConfig {
  int64_t nLayers = 0, nEmbd = 0, nHeads = 0, nKvHeads = 0;
  int64_t headDim = 0; ///< 0: n_embd / n_heads (which must divide)
  int64_t vocab = 0;

  enum class FfnKind { Dense, Moe } ffn = FfnKind::Dense;
  int64_t nFf = 0; ///< dense hidden size
  int64_t nExperts = 0, nExpertsUsed = 0, expertFf = 0;
  TopkGating gating = TopkGating::Softmax;
  bool renormalizeExperts = false;
  double expertWeightsScale = 1;
  bool expertSelectionBias = false; ///< blk.N.exp_probs_b [E]
  GluKind glu = GluKind::SwiGLU;

  double normEps = 1e-6;
  Builder::RopeParams rope;     ///< rope.nDims 0: the whole head
  bool ropeFreqFactors = false; ///< a shared `rope_freqs` [n_dims/2] weight
  bool qkNorm = false;          ///< blk.N.attn_q_norm / attn_k_norm [head_dim]
  bool qkvBias = false;         ///< blk.N.attn_{q,k,v}.bias
  double attnScale = 0;         ///< 0: 1/sqrt(head_dim)
  int64_t slidingWindow = 0;
  double attnSoftcap = 0;
  bool attnSinks = false;     ///< blk.N.attn_sinks [n_heads]
  bool tieEmbeddings = false; ///< logits use token_embd (no `output` weight)
  /// Which layers attend through `slidingWindow`; empty: every layer (when
  /// slidingWindow > 0). gemma3 interleaves sliding layers with global ones.
  std::vector<bool> slidingLayers;
  /// The rope of the sliding layers when it differs (gemma3's local base);
  /// none: `rope` for every layer.
  std::optional<Builder::RopeParams> ropeSliding;
  double embdScale = 1;   ///< x = get_rows(token_embd) · embdScale (gemma: √n_embd)
  bool postNorms = false; ///< gemma3: blk.N.post_attention_norm / post_ffw_norm
                          ///< normalise the attention and FFN outputs before the residual add

  /// Per-weight storage dtype (a model file's own), from the config being
  /// built, the weight's name, its shape (rows of the last dimension) and the
  /// default chosen here (weightDType for matrices and the embedding, f32 for
  /// norms, biases, the router and rope factors); null: the defaults.
  std::function<DType(const DecoderConfig &c, llvm::StringRef name, DType dflt,
                      llvm::ArrayRef<int64_t> shape)>
      weightDTypeOf;

  int64_t ctx = 4096;
  DType kvDType = DType::F16;
  DType weightDType = DType::F16; ///< matrices and the embedding; norms and the router are f32
  WeightInitFn init;              ///< null: weights are bound by the caller (WeightInit::None)

  int64_t resolvedHeadDim() const { return headDim ? headDim : (nHeads ? nEmbd / nHeads : 0); }
  /// Whether layer `il` attends through the sliding window.
  bool isSlidingLayer(int64_t il) const {
    return slidingWindow > 0 &&
           (slidingLayers.empty() || (il < static_cast<int64_t>(slidingLayers.size()) &&
                                      slidingLayers[static_cast<size_t>(il)]));
  }
};

/// Clear errors for configurations that cannot build (sizes, divisibility,
/// rope dims, expert counts, dtypes).
llvm::Error validateDecoderConfig(const DecoderConfig &config);

/// Which rows of logits an entry returns.
enum class LogitRows {
  Last, ///< f32[1, vocab]: the last token's row (prefill's default: the lm head is a GEMV)
  All,  ///< f32[T, vocab]: one row per token (`--all-logits`, for `--dump-logits`)
};

struct DecoderEntry {
  std::string name; ///< `decode`, `prefill_64`
  int64_t tokens = 1;
  LogitRows logits = LogitRows::Last; ///< same thing for T = 1
  /// The role the entry's function carries (decoderEntries: decode, prefill);
  /// Other for an entry a caller adds of its own.
  EntryRole role = EntryRole::Other;
};

/// `decode` (T = 1) then `prefill_N` for each bucket, in the order given; the
/// prefill entries return `logits` rows (the last one by default).
std::vector<DecoderEntry> decoderEntries(llvm::ArrayRef<int64_t> prefillBuckets,
                                         LogitRows logits = LogitRows::Last);

/// One Function per entry, all with the same arguments in ABI order:
/// tokens, positions, weights (fixed order), state (k_cache.L, v_cache.L per layer).
llvm::Expected<Graph> buildDecoderGraph(const DecoderConfig &config,
                                        llvm::ArrayRef<DecoderEntry> entries);

/// Builds one entry into `fn` (already named). Exposed for tests and for
/// frontends that add entries of their own. With LogitRows::Last and T > 1 the
/// final norm and the lm head see only row T-1 of the residual stream (a view),
/// so `logits` is f32[1, vocab] and the lm head is a GEMV, not a T-row GEMM.
llvm::Error buildDecoderFunction(const DecoderConfig &config, int64_t tokens, Function &fn,
                                 LogitRows logits = LogitRows::Last);

} // namespace fg
