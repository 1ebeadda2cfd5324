// Structural tests of the canonical decoder blocks: each block emits exactly
// the use-def chain the fusion passes match (walked from the block's result).
#include "frontends/DecoderBlocks.h"

#include "ir/Builder.h"
#include "ir/OpViews.h"
#include "passes/fusion/Fusion.h"

#include <gtest/gtest.h>

#include <cmath>

using namespace fg;

namespace {

/// The node producing `v`; fails the test (returns null) when `v` is not
/// produced by an op of kind `kind`.
const Node *def(const Function &fn, ValueId v, OpKind kind) {
  if (v == kNoValue || v >= fn.numValues()) {
    ADD_FAILURE() << "invalid value";
    return nullptr;
  }
  const Node *n = fn.producer(v);
  if (!n) {
    ADD_FAILURE() << "%" << fn.value(v).name << " is an argument, expected " << mnemonic(kind);
    return nullptr;
  }
  if (n->kind != kind) {
    ADD_FAILURE() << "%" << fn.value(v).name << " is produced by " << mnemonic(n->kind)
                  << ", expected " << mnemonic(kind);
    return nullptr;
  }
  return n;
}

std::string nameOf(const Function &fn, ValueId v) { return fn.value(v).name; }

DecoderConfig tinyConfig(bool moe) {
  DecoderConfig c;
  c.nLayers = 1;
  c.nEmbd = 32;
  c.nHeads = 4;
  c.nKvHeads = 2;
  c.headDim = 8;
  c.vocab = 16;
  if (moe) {
    c.ffn = DecoderConfig::FfnKind::Moe;
    c.nExperts = 4;
    c.nExpertsUsed = 3;
    c.expertFf = 8;
    c.renormalizeExperts = true;
  } else {
    c.nFf = 24;
  }
  c.ctx = 16;
  c.weightDType = DType::F32;
  c.rope.mode = RopeMode::Neox;
  return c;
}

Function buildOne(const DecoderConfig &c, int64_t tokens, LogitRows rows = LogitRows::All) {
  Function fn("decode");
  llvm::Error e = buildDecoderFunction(c, tokens, fn, rows);
  EXPECT_FALSE(bool(e)) << llvm::toString(std::move(e));
  return fn;
}

std::string errorOf(const DecoderConfig &c, llvm::ArrayRef<DecoderEntry> entries) {
  auto g = buildDecoderGraph(c, entries);
  if (g)
    return "<no error>";
  return llvm::toString(g.takeError());
}

} // namespace

/// rmsNormMul emits add(mul(rms_norm(x), w), residual), rms_norm first in the mul.
TEST(DecoderBlocks, RmsNormMulAddChain) {
  Function fn;
  Builder b(fn);
  auto x = b.input("x", {DType::F32, {2, 16}});
  auto r = b.input("r", {DType::F32, {2, 16}});
  auto w = b.weight("w", {DType::F32, {16}});
  auto y = rmsNormMul(b, x, w, 1e-5, r, "y");
  ASSERT_FALSE(b.failed());
  EXPECT_EQ(nameOf(fn, y), "y");
  const Node *add = def(fn, y, OpKind::Add);
  ASSERT_TRUE(add);
  EXPECT_EQ(add->operands[1], r);
  const Node *mul = def(fn, add->operands[0], OpKind::Mul);
  ASSERT_TRUE(mul);
  EXPECT_EQ(mul->operands[1], w);
  const Node *norm = def(fn, mul->operands[0], OpKind::RmsNorm);
  ASSERT_TRUE(norm);
  EXPECT_EQ(norm->operands[0], x);
  EXPECT_EQ(op::RmsNorm(*norm).eps(), 1e-5);
  EXPECT_EQ(fn.numNodes(), 3u);

  // Without a residual the mul is the result.
  auto z = rmsNormMul(b, x, w, 1e-6, kNoValue, "z");
  ASSERT_TRUE(def(fn, z, OpKind::Mul));
  EXPECT_EQ(fn.numNodes(), 5u);
}

/// q: matmul → reshape [T, H, D] → rms_norm → mul(q_norm) → rope; k the same with
/// KV heads → set_rows(k_cache) directly (no view); v: matmul → reshape → set_rows;
/// attention(q, k', v', positions) {scale 1/sqrt(D)} → reshape [T, H·D] → matmul(wo).
TEST(DecoderBlocks, AttentionChainWithQkNorm) {
  DecoderConfig c = tinyConfig(false);
  c.qkNorm = true;
  c.rope.theta = 1e6;
  Function fn = buildOne(c, 3);
  ValueId positions = fn.lookup("positions");
  const Node *out = def(fn, fn.lookup("blk.0.attn_out"), OpKind::MatMul);
  ASSERT_TRUE(out);
  EXPECT_EQ(out->operands[1], fn.lookup("blk.0.attn_output"));
  const Node *flat = def(fn, out->operands[0], OpKind::Reshape);
  ASSERT_TRUE(flat);
  EXPECT_EQ(fn.type(flat->result()), TensorType(DType::F32, {3, 32}));
  const Node *attn = def(fn, flat->operands[0], OpKind::Attention);
  ASSERT_TRUE(attn);
  EXPECT_DOUBLE_EQ(op::Attention(*attn).scale(), 1 / std::sqrt(8.0));
  EXPECT_EQ(op::Attention(*attn).window(), 0);
  ASSERT_EQ(attn->operands.size(), 4u) << "no sinks";
  EXPECT_EQ(attn->operands[3], positions);

  // q path.
  const Node *qRope = def(fn, attn->operands[0], OpKind::Rope);
  ASSERT_TRUE(qRope);
  EXPECT_EQ(qRope->operands.size(), 2u);
  EXPECT_EQ(qRope->operands[1], positions);
  EXPECT_EQ(op::Rope(*qRope).mode(), RopeMode::Neox);
  EXPECT_EQ(op::Rope(*qRope).nDims(), 8);
  EXPECT_EQ(op::Rope(*qRope).theta(), 1e6);
  const Node *qMul = def(fn, qRope->operands[0], OpKind::Mul);
  ASSERT_TRUE(qMul);
  EXPECT_EQ(qMul->operands[1], fn.lookup("blk.0.attn_q_norm"));
  const Node *qNorm = def(fn, qMul->operands[0], OpKind::RmsNorm);
  ASSERT_TRUE(qNorm);
  const Node *qHeads = def(fn, qNorm->operands[0], OpKind::Reshape);
  ASSERT_TRUE(qHeads);
  EXPECT_EQ(fn.type(qHeads->result()), TensorType(DType::F32, {3, 4, 8}));
  const Node *qProj = def(fn, qHeads->operands[0], OpKind::MatMul);
  ASSERT_TRUE(qProj);
  EXPECT_EQ(qProj->operands[1], fn.lookup("blk.0.attn_q"));
  // The projection reads the normalised input: mul(rms_norm(x), attn_norm).
  const Node *inMul = def(fn, qProj->operands[0], OpKind::Mul);
  ASSERT_TRUE(inMul);
  EXPECT_EQ(inMul->operands[1], fn.lookup("blk.0.attn_norm"));
  ASSERT_TRUE(def(fn, inMul->operands[0], OpKind::RmsNorm));

  // k path: set_rows(k_cache.0, rope(mul(rms_norm(reshape(matmul))))), positions).
  const Node *kSet = def(fn, attn->operands[1], OpKind::SetRows);
  ASSERT_TRUE(kSet);
  EXPECT_EQ(nameOf(fn, kSet->result()), "k_cache.0.1");
  EXPECT_EQ(kSet->operands[0], fn.lookup("k_cache.0"));
  EXPECT_EQ(kSet->operands[2], positions);
  const Node *kRope = def(fn, kSet->operands[1], OpKind::Rope);
  ASSERT_TRUE(kRope);
  EXPECT_EQ(fn.type(kRope->result()), TensorType(DType::F32, {3, 2, 8}));
  const Node *kMul = def(fn, kRope->operands[0], OpKind::Mul);
  ASSERT_TRUE(kMul);
  EXPECT_EQ(kMul->operands[1], fn.lookup("blk.0.attn_k_norm"));
  const Node *kNorm = def(fn, kMul->operands[0], OpKind::RmsNorm);
  ASSERT_TRUE(kNorm);
  const Node *kHeads = def(fn, kNorm->operands[0], OpKind::Reshape);
  ASSERT_TRUE(kHeads);
  const Node *kProj = def(fn, kHeads->operands[0], OpKind::MatMul);
  ASSERT_TRUE(kProj);
  EXPECT_EQ(kProj->operands[1], fn.lookup("blk.0.attn_k"));

  // v path.
  const Node *vSet = def(fn, attn->operands[2], OpKind::SetRows);
  ASSERT_TRUE(vSet);
  EXPECT_EQ(nameOf(fn, vSet->result()), "v_cache.0.1");
  EXPECT_EQ(vSet->operands[0], fn.lookup("v_cache.0"));
  const Node *vHeads = def(fn, vSet->operands[1], OpKind::Reshape);
  ASSERT_TRUE(vHeads);
  EXPECT_EQ(fn.type(vHeads->result()), TensorType(DType::F32, {3, 2, 8}));
  const Node *vProj = def(fn, vHeads->operands[0], OpKind::MatMul);
  ASSERT_TRUE(vProj);
  EXPECT_EQ(vProj->operands[1], fn.lookup("blk.0.attn_v"));

  // No views anywhere in the attention block.
  for (const Node &n : fn.nodes())
    EXPECT_NE(n.kind, OpKind::View);
}

/// Without q/k-norm the rope reads the reshape; biases add after the matmul;
/// freq factors, sinks, window, softcap and an explicit scale reach their ops.
TEST(DecoderBlocks, AttentionOptions) {
  DecoderConfig c = tinyConfig(false);
  c.qkvBias = true;
  c.ropeFreqFactors = true;
  c.rope.nDims = 4;
  c.attnSinks = true;
  c.slidingWindow = 5;
  c.attnSoftcap = 30;
  c.attnScale = 0.25;
  Function fn = buildOne(c, 1);
  const Node *attn = def(fn, fn.lookup("blk.0.attn"), OpKind::Attention);
  ASSERT_TRUE(attn);
  EXPECT_EQ(op::Attention(*attn).scale(), 0.25);
  EXPECT_EQ(op::Attention(*attn).window(), 5);
  EXPECT_EQ(op::Attention(*attn).softcap(), 30);
  ASSERT_EQ(attn->operands.size(), 5u);
  EXPECT_EQ(attn->operands[4], fn.lookup("blk.0.attn_sinks"));
  EXPECT_EQ(fn.type(attn->operands[4]), TensorType(DType::F32, {4}));

  const Node *qRope = def(fn, attn->operands[0], OpKind::Rope);
  ASSERT_TRUE(qRope);
  EXPECT_EQ(op::Rope(*qRope).nDims(), 4);
  ASSERT_EQ(qRope->operands.size(), 3u);
  EXPECT_EQ(qRope->operands[2], fn.lookup("rope_freqs"));
  EXPECT_EQ(fn.type(qRope->operands[2]), TensorType(DType::F32, {2}));
  const Node *qHeads = def(fn, qRope->operands[0], OpKind::Reshape);
  ASSERT_TRUE(qHeads);
  const Node *qBias = def(fn, qHeads->operands[0], OpKind::Add);
  ASSERT_TRUE(qBias);
  EXPECT_EQ(qBias->operands[1], fn.lookup("blk.0.attn_q.bias"));
  ASSERT_TRUE(def(fn, qBias->operands[0], OpKind::MatMul));

  const Node *vSet = def(fn, attn->operands[2], OpKind::SetRows);
  ASSERT_TRUE(vSet);
  const Node *vHeads = def(fn, vSet->operands[1], OpKind::Reshape);
  ASSERT_TRUE(vHeads);
  const Node *vBias = def(fn, vHeads->operands[0], OpKind::Add);
  ASSERT_TRUE(vBias);
  EXPECT_EQ(vBias->operands[1], fn.lookup("blk.0.attn_v.bias"));
}

/// Routing: matmul → softmax → top_k → get_rows(probs, ids) → sum_rows → clamp(2^-14) → div.
TEST(DecoderBlocks, MoeRoutingSoftmaxRenorm) {
  Function fn;
  Builder b(fn);
  auto x = b.input("x", {DType::F32, {2, 16}});
  auto gi = b.weight("gate_inp", {DType::F32, {8, 16}});
  MoeRoutingOptions o;
  o.nExpertsUsed = 2;
  o.renormalize = true;
  MoeRouting r = moeRouting(b, x, gi, kNoValue, o, "l.");
  ASSERT_FALSE(b.failed()) << llvm::toString(b.finish());
  EXPECT_EQ(fn.type(r.ids), TensorType(DType::I32, {2, 2}));
  EXPECT_EQ(fn.type(r.weights), TensorType(DType::F32, {2, 2}));
  const Node *div = def(fn, r.weights, OpKind::Div);
  ASSERT_TRUE(div);
  const Node *clamp = def(fn, div->operands[1], OpKind::Clamp);
  ASSERT_TRUE(clamp);
  EXPECT_EQ(op::Clamp(*clamp).min(), 6.103515625e-5);
  EXPECT_TRUE(std::isinf(op::Clamp(*clamp).max()));
  const Node *sum = def(fn, clamp->operands[0], OpKind::SumRows);
  ASSERT_TRUE(sum);
  EXPECT_EQ(sum->operands[0], div->operands[0]);
  const Node *gather = def(fn, div->operands[0], OpKind::GetRows);
  ASSERT_TRUE(gather);
  EXPECT_EQ(gather->operands[1], r.ids);
  const Node *sm = def(fn, gather->operands[0], OpKind::Softmax);
  ASSERT_TRUE(sm);
  EXPECT_EQ(sm->operands.size(), 1u);
  EXPECT_EQ(op::Softmax(*sm).scale(), 1);
  const Node *topk = def(fn, r.ids, OpKind::TopK);
  ASSERT_TRUE(topk);
  EXPECT_EQ(op::TopK(*topk).k(), 2);
  EXPECT_EQ(topk->operands[0], sm->result()) << "no bias: top_k reads the probabilities";
  const Node *logits = def(fn, sm->operands[0], OpKind::MatMul);
  ASSERT_TRUE(logits);
  EXPECT_EQ(logits->operands[0], x);
  EXPECT_EQ(logits->operands[1], gi);
  EXPECT_EQ(fn.numNodes(), 7u);
}

/// sqrt(softplus) gating with a selection bias and a scale: the bias feeds
/// top_k only; get_rows reads the unbiased probabilities; scale comes last.
TEST(DecoderBlocks, MoeRoutingBiasSqrtSoftplusScale) {
  Function fn;
  Builder b(fn);
  auto x = b.input("x", {DType::F32, {1, 16}});
  auto gi = b.weight("gate_inp", {DType::F32, {8, 16}});
  auto bias = b.weight("exp_probs_b", {DType::F32, {8}});
  MoeRoutingOptions o;
  o.nExpertsUsed = 3;
  o.gating = TopkGating::SqrtSoftplus;
  o.scale = 2.5;
  MoeRouting r = moeRouting(b, x, gi, bias, o);
  ASSERT_FALSE(b.failed()) << llvm::toString(b.finish());
  const Node *scale = def(fn, r.weights, OpKind::Scale);
  ASSERT_TRUE(scale);
  EXPECT_EQ(op::Scale(*scale).scale(), 2.5);
  EXPECT_EQ(op::Scale(*scale).bias(), 0);
  const Node *gather = def(fn, scale->operands[0], OpKind::GetRows);
  ASSERT_TRUE(gather);
  const Node *probs = def(fn, gather->operands[0], OpKind::Sqrt);
  ASSERT_TRUE(probs);
  ASSERT_TRUE(def(fn, probs->operands[0], OpKind::Softplus));
  const Node *topk = def(fn, r.ids, OpKind::TopK);
  ASSERT_TRUE(topk);
  const Node *sel = def(fn, topk->operands[0], OpKind::Add);
  ASSERT_TRUE(sel);
  EXPECT_EQ(sel->operands[0], gather->operands[0]);
  EXPECT_EQ(sel->operands[1], bias);

  // Sigmoid gating, no renorm, no scale: the weights are the get_rows.
  MoeRoutingOptions s;
  s.nExpertsUsed = 1;
  s.gating = TopkGating::Sigmoid;
  MoeRouting r2 = moeRouting(b, x, gi, kNoValue, s, "s.");
  const Node *g2 = def(fn, r2.weights, OpKind::GetRows);
  ASSERT_TRUE(g2);
  ASSERT_TRUE(def(fn, g2->operands[0], OpKind::Sigmoid));
}

/// Delayed softmax gating (the fourth TopkGating): top_k of the raw logits,
/// then a softmax of the k chosen, then the scale; fusion turns it into
/// fused.topk_moe {gating = delayed_softmax}.
TEST(DecoderBlocks, MoeRoutingDelayedSoftmax) {
  Function fn;
  Builder b(fn);
  auto x = b.input("x", {DType::F32, {1, 16}});
  auto gi = b.weight("gate_inp", {DType::F32, {8, 16}});
  MoeRoutingOptions o;
  o.nExpertsUsed = 2;
  o.gating = TopkGating::DelayedSoftmax;
  o.scale = 1.5;
  MoeRouting r = moeRouting(b, x, gi, kNoValue, o);
  b.result(r.ids);
  b.result(r.weights);
  ASSERT_FALSE(b.failed()) << llvm::toString(b.finish());
  const Node *scale = def(fn, r.weights, OpKind::Scale);
  ASSERT_TRUE(scale);
  const Node *softmax = def(fn, scale->operands[0], OpKind::Softmax);
  ASSERT_TRUE(softmax);
  const Node *gather = def(fn, softmax->operands[0], OpKind::GetRows);
  ASSERT_TRUE(gather);
  EXPECT_EQ(gather->operands[1], r.ids);
  const Node *topk = def(fn, r.ids, OpKind::TopK);
  ASSERT_TRUE(topk);
  EXPECT_EQ(topk->operands[0], gather->operands[0]); // the raw logits
  ASSERT_TRUE(def(fn, topk->operands[0], OpKind::MatMul));

  Graph g;
  g.addFunction("f") = fn;
  FusionReport report;
  ASSERT_FALSE(static_cast<bool>(fuseWithOverlapProof(g, {}, report)));
  ASSERT_EQ(report.count("topk_moe"), 1);
  for (const Node &n : g.functions().front().nodes())
    if (n.kind == OpKind::FusedTopkMoe) {
      EXPECT_EQ(op::FusedTopkMoe(n).gating(), TopkGating::DelayedSoftmax);
      EXPECT_EQ(op::FusedTopkMoe(n).scale(), 1.5);
    }
}

/// Dense FFN: matmul(down) of glu(matmul(x, gate), matmul(x, up)) {kind}.
TEST(DecoderBlocks, DenseGatedFfn) {
  DecoderConfig c = tinyConfig(false);
  c.glu = GluKind::GeGLU;
  Function fn = buildOne(c, 2);
  const Node *out = def(fn, fn.lookup("blk.0.out"), OpKind::Add);
  ASSERT_TRUE(out);
  EXPECT_EQ(out->operands[1], fn.lookup("blk.0.ffn_inp"));
  const Node *down = def(fn, out->operands[0], OpKind::MatMul);
  ASSERT_TRUE(down);
  EXPECT_EQ(down->operands[1], fn.lookup("blk.0.ffn_down"));
  const Node *glu = def(fn, down->operands[0], OpKind::Glu);
  ASSERT_TRUE(glu);
  EXPECT_EQ(op::Glu(*glu).kind(), GluKind::GeGLU);
  const Node *g = def(fn, glu->operands[0], OpKind::MatMul);
  const Node *u = def(fn, glu->operands[1], OpKind::MatMul);
  ASSERT_TRUE(g && u);
  EXPECT_EQ(g->operands[1], fn.lookup("blk.0.ffn_gate"));
  EXPECT_EQ(u->operands[1], fn.lookup("blk.0.ffn_up"));
  EXPECT_EQ(g->operands[0], u->operands[0]) << "gate and up read the same activation";
  EXPECT_EQ(fn.type(glu->result()), TensorType(DType::F32, {2, 24}));
  // ffn_inp = add(attention out, residual x).
  const Node *inp = def(fn, fn.lookup("blk.0.ffn_inp"), OpKind::Add);
  ASSERT_TRUE(inp);
  EXPECT_EQ(inp->operands[0], fn.lookup("blk.0.attn_out"));
  EXPECT_EQ(inp->operands[1], fn.lookup("x"));
}

/// MoE FFN: matmul_id chain on x reshaped [T, 1, n], then the weighted sum as
/// mul(experts, reshape(w, [T, k, 1])) → k views → k−1 adds, chained left to right.
TEST(DecoderBlocks, ExpertFfnAndWeightedSum) {
  DecoderConfig c = tinyConfig(true); // k = 3, n_embd = 32
  Function fn = buildOne(c, 2);
  const Node *out = def(fn, fn.lookup("blk.0.out"), OpKind::Add);
  ASSERT_TRUE(out);
  // sum = add(add(view0, view1), view2)
  const Node *add2 = def(fn, out->operands[0], OpKind::Add);
  ASSERT_TRUE(add2);
  const Node *add1 = def(fn, add2->operands[0], OpKind::Add);
  ASSERT_TRUE(add1);
  const Node *views[3] = {def(fn, add1->operands[0], OpKind::View),
                          def(fn, add1->operands[1], OpKind::View),
                          def(fn, add2->operands[1], OpKind::View)};
  for (int j = 0; j < 3; ++j) {
    ASSERT_TRUE(views[j]);
    EXPECT_EQ(op::View(*views[j]).shape(), llvm::ArrayRef<int64_t>({2, 32}));
    EXPECT_EQ(op::View(*views[j]).strides(), llvm::ArrayRef<int64_t>({3 * 32, 1}));
    EXPECT_EQ(op::View(*views[j]).offset(), j * 32);
    EXPECT_EQ(views[j]->operands[0], views[0]->operands[0]);
  }
  const Node *weighted = def(fn, views[0]->operands[0], OpKind::Mul);
  ASSERT_TRUE(weighted);
  const Node *w3 = def(fn, weighted->operands[1], OpKind::Reshape);
  ASSERT_TRUE(w3);
  EXPECT_EQ(fn.type(w3->result()), TensorType(DType::F32, {2, 3, 1}));
  ASSERT_TRUE(def(fn, w3->operands[0], OpKind::Div)) << "the renormalised routing weights";

  const Node *down = def(fn, weighted->operands[0], OpKind::MatMulId);
  ASSERT_TRUE(down);
  EXPECT_EQ(fn.type(down->result()), TensorType(DType::F32, {2, 3, 32}));
  EXPECT_EQ(down->operands[1], fn.lookup("blk.0.ffn_down_exps"));
  const Node *glu = def(fn, down->operands[0], OpKind::Glu);
  ASSERT_TRUE(glu);
  const Node *g = def(fn, glu->operands[0], OpKind::MatMulId);
  const Node *u = def(fn, glu->operands[1], OpKind::MatMulId);
  ASSERT_TRUE(g && u);
  EXPECT_EQ(g->operands[1], fn.lookup("blk.0.ffn_gate_exps"));
  EXPECT_EQ(u->operands[1], fn.lookup("blk.0.ffn_up_exps"));
  EXPECT_EQ(g->operands[0], u->operands[0]);
  EXPECT_EQ(g->operands[2], u->operands[2]);
  EXPECT_EQ(g->operands[2], down->operands[2]);
  ASSERT_TRUE(def(fn, g->operands[2], OpKind::TopK));
  const Node *x3 = def(fn, g->operands[0], OpKind::Reshape);
  ASSERT_TRUE(x3);
  EXPECT_EQ(fn.type(x3->result()), TensorType(DType::F32, {2, 1, 32}));
}

/// k = 1: the weighted sum is a single view, no adds.
TEST(DecoderBlocks, WeightedSumSingleExpert) {
  Function fn;
  Builder b(fn);
  auto e = b.input("e", {DType::F32, {4, 1, 8}});
  auto w = b.input("w", {DType::F32, {4, 1}});
  auto s = moeWeightedSum(b, e, w);
  ASSERT_FALSE(b.failed());
  const Node *v = def(fn, s, OpKind::View);
  ASSERT_TRUE(v);
  EXPECT_EQ(fn.type(s), TensorType(DType::F32, {4, 8}));
  EXPECT_EQ(fn.numNodes(), 3u);
}

/// The decoder ends in logits = matmul(mul(rms_norm(last layer out), output_norm), output),
/// and starts with x = get_rows(token_embd, tokens).
TEST(DecoderBlocks, DecoderHeadAndTail) {
  DecoderConfig c = tinyConfig(true);
  c.nLayers = 2;
  Function fn = buildOne(c, 4);
  ASSERT_EQ(fn.results().size(), 1u);
  ValueId logits = fn.results()[0];
  EXPECT_EQ(nameOf(fn, logits), "logits");
  EXPECT_EQ(fn.type(logits), TensorType(DType::F32, {4, 16}));
  const Node *mm = def(fn, logits, OpKind::MatMul);
  ASSERT_TRUE(mm);
  EXPECT_EQ(mm->operands[1], fn.lookup("output"));
  const Node *mul = def(fn, mm->operands[0], OpKind::Mul);
  ASSERT_TRUE(mul);
  EXPECT_EQ(mul->operands[1], fn.lookup("output_norm"));
  const Node *norm = def(fn, mul->operands[0], OpKind::RmsNorm);
  ASSERT_TRUE(norm);
  EXPECT_EQ(norm->operands[0], fn.lookup("blk.1.out"));
  const Node *emb = def(fn, fn.lookup("x"), OpKind::GetRows);
  ASSERT_TRUE(emb);
  EXPECT_EQ(emb->operands[0], fn.lookup("token_embd"));
  EXPECT_EQ(emb->operands[1], fn.lookup("tokens"));
  // Layer 1 reads layer 0's output through its attention norm.
  const Node *in1 = def(fn, fn.lookup("blk.1.attn_in_rms"), OpKind::RmsNorm);
  ASSERT_TRUE(in1);
  EXPECT_EQ(in1->operands[0], fn.lookup("blk.0.out"));
}

/// LogitRows::Last (prefill's default): the final norm reads a view of row T-1
/// of the last layer's output, so logits is f32[1, vocab] and the lm head a GEMV.
TEST(DecoderBlocks, LastLogitsRowOnly) {
  DecoderConfig c = tinyConfig(true);
  c.nLayers = 2;
  Function fn = buildOne(c, 4, LogitRows::Last);
  ValueId logits = fn.results()[0];
  EXPECT_EQ(fn.type(logits), TensorType(DType::F32, {1, 16}));
  const Node *mm = def(fn, logits, OpKind::MatMul);
  ASSERT_TRUE(mm);
  const Node *mul = def(fn, mm->operands[0], OpKind::Mul);
  ASSERT_TRUE(mul);
  const Node *norm = def(fn, mul->operands[0], OpKind::RmsNorm);
  ASSERT_TRUE(norm);
  const Node *view = def(fn, norm->operands[0], OpKind::View);
  ASSERT_TRUE(view);
  EXPECT_EQ(view->operands[0], fn.lookup("blk.1.out"));
  EXPECT_EQ(fn.type(norm->operands[0]), TensorType(DType::F32, {1, c.nEmbd}));
  // Row 3 of [4, n_embd]: offset 3·n_embd elements.
  EXPECT_EQ(op::View(*view).offset(), 3 * c.nEmbd);
  // decode (T = 1) has nothing to drop: no view.
  Function one = buildOne(c, 1, LogitRows::Last);
  const Node *mm1 = def(one, one.results()[0], OpKind::MatMul);
  ASSERT_TRUE(mm1);
  const Node *norm1 = def(one, def(one, mm1->operands[0], OpKind::Mul)->operands[0],
                          OpKind::RmsNorm);
  ASSERT_TRUE(norm1);
  EXPECT_EQ(norm1->operands[0], one.lookup("blk.1.out"));
}

/// Tied embeddings: the logits matmul reads token_embd and there is no `output` weight.
TEST(DecoderBlocks, TiedEmbeddings) {
  DecoderConfig c = tinyConfig(false);
  c.tieEmbeddings = true;
  Function fn = buildOne(c, 1);
  EXPECT_EQ(fn.lookup("output"), kNoValue);
  const Node *mm = def(fn, fn.results()[0], OpKind::MatMul);
  ASSERT_TRUE(mm);
  EXPECT_EQ(mm->operands[1], fn.lookup("token_embd"));
}

/// Weight initialisers come from the callback with a stable index, the same in every entry.
TEST(DecoderBlocks, InitCallbackSharedByName) {
  DecoderConfig c = tinyConfig(true);
  c.init = [](llvm::StringRef name, const TensorType &t, unsigned index) {
    return WeightInit::normal(index * 10 + (name == "output" ? 1 : 0), 0.01 * t.rank());
  };
  auto g = buildDecoderGraph(c, decoderEntries({4, 8}));
  ASSERT_TRUE(bool(g)) << llvm::toString(g.takeError());
  ASSERT_EQ(g->functions().size(), 3u);
  const Function &decode = g->functions()[0];
  EXPECT_EQ(decode.name(), "decode");
  EXPECT_EQ(g->functions()[1].name(), "prefill_4");
  EXPECT_EQ(g->functions()[2].name(), "prefill_8");
  const Argument *emb = decode.argumentOf(decode.lookup("token_embd"));
  ASSERT_TRUE(emb);
  EXPECT_EQ(emb->init, WeightInit::normal(0, 0.02));
  const Argument *out = decode.argumentOf(decode.lookup("output"));
  ASSERT_TRUE(out);
  // token_embd, attn_norm, q, k, v, o, ffn_norm, gate_inp, gate, up, down, output_norm, output
  EXPECT_EQ(out->init, WeightInit::normal(121, 0.02));
  for (const Function &f : g->functions()) {
    ASSERT_EQ(f.arguments().size(), decode.arguments().size());
    for (size_t i = 0; i < f.arguments().size(); ++i) {
      const Argument &a = f.arguments()[i], &d = decode.arguments()[i];
      EXPECT_EQ(f.value(a.value).name, decode.value(d.value).name);
      EXPECT_EQ(a.role, d.role);
      EXPECT_EQ(a.init, d.init);
      if (a.role != ArgRole::Input) {
        EXPECT_EQ(f.type(a.value), decode.type(d.value));
      }
    }
  }
}

/// Mis-shaped configurations are clear errors, never crashes.
TEST(DecoderBlocks, ConfigErrors) {
  auto entries = decoderEntries({});
  DecoderConfig c = tinyConfig(false);
  c.headDim = 0;
  c.nEmbd = 30; // 30 / 4 heads
  EXPECT_EQ(errorOf(c, entries), "invalid decoder config: n_embd 30 is not divisible by n_heads "
                                 "4; set head_dim explicitly");
  c = tinyConfig(false);
  c.nKvHeads = 3;
  EXPECT_EQ(errorOf(c, entries),
            "invalid decoder config: n_heads 4 is not a multiple of n_kv_heads 3");
  c = tinyConfig(false);
  c.rope.nDims = 5;
  EXPECT_EQ(errorOf(c, entries), "invalid decoder config: rope n_dims 5 must be even, positive "
                                 "and <= head_dim 8");
  c = tinyConfig(true);
  c.nExpertsUsed = 5;
  EXPECT_EQ(errorOf(c, entries),
            "invalid decoder config: experts used (top-k) 5 must be in [1, 4]");
  c = tinyConfig(false);
  c.nFf = 0;
  EXPECT_EQ(errorOf(c, entries), "invalid decoder config: dense ffn size must be >= 1, got 0");
  c = tinyConfig(false);
  c.nLayers = 0;
  EXPECT_EQ(errorOf(c, entries), "invalid decoder config: n_layers must be >= 1, got 0");
  c = tinyConfig(false);
  c.kvDType = DType::I32;
  EXPECT_EQ(errorOf(c, entries),
            "invalid decoder config: kv cache dtype must be f16, bf16 or f32, got i32");
  c = tinyConfig(false);
  c.weightDType = DType::Q8_0; // n_embd 32 is fine, ffn 24 is not a whole block
  EXPECT_EQ(errorOf(c, entries), "invalid decoder config: ffn size = 24 is not a multiple of the "
                                 "q8_0 block size 32");
  c = tinyConfig(false);
  EXPECT_EQ(
      errorOf(c, decoderEntries({32})),
      "invalid decoder config: entry 'prefill_32' has 32 tokens; it must be in [1, ctx = 16]");
  EXPECT_EQ(errorOf(c, decoderEntries({4, 4})),
            "invalid decoder config: entry 'prefill_4' is listed twice");
  EXPECT_EQ(errorOf(c, {}), "invalid decoder config: no entries to build (expected at least "
                            "`decode`)");
}

/// A block given a mis-shaped weight records a builder error naming the op and value.
TEST(DecoderBlocks, MisShapedWeightIsABuilderError) {
  Function fn;
  Builder b(fn);
  auto x = b.input("x", {DType::F32, {1, 16}});
  auto pos = b.input("positions", {DType::I32, {1}});
  AttentionWeights w;
  w.q = b.weight("wq", {DType::F32, {32, 16}});
  w.k = b.weight("wk", {DType::F32, {16, 16}});
  w.v = b.weight("wv", {DType::F32, {16, 16}});
  w.output = b.weight("wo", {DType::F32, {16, 24}}); // expects 32 columns
  auto kc = b.state("k_cache.0", {DType::F16, {8, 2, 8}});
  auto vc = b.state("v_cache.0", {DType::F16, {8, 2, 8}});
  AttentionOptions o;
  o.nHeads = 4;
  o.nKvHeads = 2;
  o.headDim = 8;
  AttentionResult r = attentionBlock(b, x, pos, w, kc, vc, o, "blk.0.");
  EXPECT_EQ(r.out, kNoValue);
  llvm::Error e = b.finish();
  ASSERT_TRUE(bool(e));
  EXPECT_EQ(llvm::toString(std::move(e)),
            "builder: matmul '%blk.0.attn_out': 'matmul': input f32[1, 32] has 32 columns but "
            "weight f32[16, 24] expects 24");

  // Zero heads: a clear error, not a division by zero.
  Function fn2;
  Builder b2(fn2);
  auto x2 = b2.input("x", {DType::F32, {1, 16}});
  attentionBlock(b2, x2, x2, AttentionWeights(), kNoValue, kNoValue, AttentionOptions(), "l.");
  llvm::Error e2 = b2.finish();
  ASSERT_TRUE(bool(e2));
  EXPECT_EQ(llvm::toString(std::move(e2)),
            "builder: l.attention: n_heads, n_kv_heads and head_dim must be positive");
}
