//===- matmul_multi.cpp - sibling matmuls of one x -> fused.matmul_multi ---===//
//
//   %q = matmul(%xn, %wq) : f32[1, 4096]
//   %k = matmul(%xn, %wk) : f32[1, 1024]          // the same x
//   %v = matmul(%xn, %wv) : f32[1, 1024]
// becomes
//   %q, %k, %v = fused.matmul_multi(%xn, %wq, %wk, %wv)
//       : f32[1, 4096], f32[1, 1024], f32[1, 1024]
//
// Issue 13 item 3, "merged projections": the q, k and v projections of a
// layer as one GEMV launch instead of three (2 launches fewer per layer).
// The kernel (kernels/gemv.cuh, gemvMulti) takes one pointer per weight and
// its blocks pick their segment from their blockIdx.x range; each segment
// is the one-stream GEMV of a plain matmul over its own weight, read where
// it already lives (no concatenated copy in the plan, no load-time recipe).
// Every result is its own value, so the consumers of q, k and v (rope,
// rope_set_rows, the q/k norms, set_rows of v) read them exactly as before.
//
// The group: the matmuls reading %x as their x whose weights share the
// first one's dtype (up to three, in program order; a fourth forms its own
// group in the next round), rooted at the first. Left out of the group, so that the pattern never competes with a
// larger one: a matmul whose only consumer is a glu (the gate|up pair is
// fused.gated_matmul's). Legality: 2 or 3 members; 1 to the target's GEMV
// token limit rows of f32 x, contiguous; weights [N, K] of one dtype,
// contiguous (no transposed or strided views); no member feeds an add as its
// only consumer (qwen2's q/k/v biases: refused, because matmul_add keeps
// each bias in its GEMV's epilogue — three launches — while the merged GEMV
// has no bias epilogue yet and would leave three add launches beside it).
// Which weight dtypes have a kernel (f32, f16, bf16 and the GGUF types the
// GEMV decodes natively; every segment reads its blocks with the plain
// matmul's decoder) and whether cuBLAS would be faster for a member is the
// target's canEmit answer.
//
// On by default; the CUDA target's cost accepts only merges that run on
// DP4A (CudaCostModel::mergedTensorCoreSlowdown: the tensor-core merged GEMV
// was measured slower). Where rms_norm_matmul would take the same GEMVs the merged GEMV
// wins (3 ops against 1 each); rms_norm_matmul then gives the merged op the
// norm prologue in the next round (fused.rms_norm_matmul_multi), by the
// same cost rule.
//
//===----------------------------------------------------------------------===//
#include "passes/fusion/Pattern.h"

namespace fg::fusion {
namespace {

constexpr unsigned kMaxSegments = 3;
constexpr Cap kWeightCaps[kMaxSegments] = {Cap::w0, Cap::w1, Cap::w2};
constexpr Cap kResultCaps[kMaxSegments] = {Cap::y0, Cap::y1, Cap::y2};

class MatmulMulti : public FusionPattern {
public:
  llvm::StringRef name() const override { return "matmul_multi"; }

  void prepare(const Function &fn) override { users_ = valueUsers(fn); }

  /// Whether `n` is a matmul reading `x` as its x (not as its weight).
  static bool readsAsX(const Node &n, ValueId x) {
    return n.kind == OpKind::MatMul && n.operands[0] == x && n.operands[1] != x;
  }

  /// Whether the only consumer of matmul `n` is a glu (gated_matmul's lane).
  bool feedsGluOnly(const Function &fn, const Node &n) const {
    const auto &u = users_[n.result()];
    return u.size() == 1 && fn.node(u.front()).kind == OpKind::Glu &&
           !llvm::is_contained(fn.results(), n.result());
  }

  void match(const Function &fn, NodeId root, llvm::SmallVectorImpl<Match> &out) const override {
    const Node &first = fn.node(root);
    if (first.kind != OpKind::MatMul)
      return;
    ValueId x = first.operands[0];
    const DType wdt = fn.type(first.operands[1]).dtype;
    llvm::SmallVector<NodeId, kMaxSegments> group;
    for (NodeId u : users_[x]) {
      const Node &n = fn.node(u);
      // One weight dtype a group (one decoder for every segment): Q4_K_M's
      // q4_K q and k merge without its q6_K v.
      if (!readsAsX(n, x) || feedsGluOnly(fn, n) || fn.type(n.operands[1]).dtype != wdt)
        continue;
      group.push_back(u);
      if (group.size() == kMaxSegments)
        break;
    }
    // One candidate per group, at its first member.
    if (group.size() < 2 || group.front() != root)
      return;
    Match m;
    m.root = root;
    m.set(Cap::x, x);
    for (size_t s = 0; s < group.size(); ++s) {
      const Node &n = fn.node(group[s]);
      m.nodes.push_back(group[s]);
      m.outputs.push_back(n.result());
      m.set(kWeightCaps[s], n.operands[1]);
      m.set(kResultCaps[s], n.result());
    }
    m.benefit = static_cast<unsigned>(group.size());
    m.variant = std::to_string(group.size()) + " segments";
    out.push_back(std::move(m));
  }

  Decision check(const Function &fn, const Match &m) const override {
    ValueId x = m.get(Cap::x);
    const TensorType &xt = fn.type(x);
    int64_t tokens = xt.numRows();
    int64_t maxTokens = target() ? target()->maxGemvTokens() : INT64_MAX;
    if (tokens < 1 || tokens > maxTokens)
      return Decision::no(label(fn, x) + " has " + llvm::Twine(tokens) +
                          " tokens; the merged GEMV takes 1 to " + llvm::Twine(maxTokens));
    if (Decision d = expectDType(fn, x, {DType::F32}, "input"); !d)
      return d;
    if (!isContiguous(fn, x))
      return Decision::no("input " + label(fn, x) + " must be contiguous");
    ValueId w0 = m.get(Cap::w0);
    for (unsigned s = 0; s < kMaxSegments && m.has(kWeightCaps[s]); ++s) {
      ValueId w = m.get(kWeightCaps[s]), y = m.get(kResultCaps[s]);
      const TensorType &wt = fn.type(w);
      if (wt.rank() != 2)
        return Decision::no("weight " + label(fn, w) + " " + wt.str() + " is not a matrix");
      if (wt.dtype != fn.type(w0).dtype)
        return Decision::no("weights " + label(fn, w0) + " " + fn.type(w0).str() + " and " +
                            label(fn, w) + " " + wt.str() + " differ in dtype");
      if (!isContiguous(fn, w))
        return Decision::no("weight " + label(fn, w) + " must be contiguous (a transposed or "
                            "strided view)");
      const auto &u = users_[y];
      if (u.size() == 1 && fn.node(u.front()).kind == OpKind::Add &&
          !llvm::is_contained(fn.results(), y))
        return Decision::no(label(fn, y) + " feeds only an add (a bias or residual): "
                                           "matmul_add keeps it in the GEMV epilogue, the "
                                           "merged GEMV has none");
    }
    return Decision::yes();
  }

  FusedOp rewrite(const Function &, const Match &m) const override {
    return FusedOp::of(op::FusedMatmulMultiArgs{
        .x = m.get(Cap::x), .w0 = m.get(Cap::w0), .w1 = m.get(Cap::w1), .w2 = m.get(Cap::w2)});
  }

private:
  UserTable users_;
};

} // namespace

std::unique_ptr<FusionPattern> createMatmulMultiPattern() {
  return std::make_unique<MatmulMulti>();
}

} // namespace fg::fusion
