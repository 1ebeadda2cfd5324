//===- GemmInputs.cpp - x of library GEMMs converted once (`gemm-inputs`) ---===//
//
// A matmul over more rows than the target's GEMV takes runs as a library GEMM
// (cuBLAS) in the weight's 16-bit type: with an f32 x its launch first
// converts x into scratch, once per matmul. Prefill projections share their
// x — q, k and v read one normalised row block, gate and up another — so a
// W-dense prefill of 512 tokens made 7 conversions a layer where 4 distinct
// inputs need converting (224 conversion launches, 3.35 ms of 22.4 on the
// H200, seventh session). This pass makes the conversion an op: before the
// first such matmul reading x it inserts one `convert(x) {dtype = D}` (D the
// weight's dtype, f16 for block-quantised weights, whose GEMM decodes them to
// f16) and every such matmul reading x with that D takes it; the GEMM then
// reads it in place. The numbers are those of the launch's own conversion
// (the same rounding, now visible to the CPU reference too). Matmuls the GEMV
// takes, f32 weights and x already in D are left alone. fused.matmul_add over
// as many rows (the same GEMM, with the residual as its C) is treated as a
// matmul.
//
// On by default (CompileOptions::gemmInputConverts; `--gemm-x-inside` turns
// it off): measured on the H200 (eighth session, one run), W-dense's prefill
// of 512 tokens 22.15 -> 21.06 ms, W-moe-12's 15.33 -> 15.21.
//
//   %y1 = matmul(%x, %wq) : f32[512, 4096]      (x: f32[512, 4096], wq: f16)
//   %y2 = matmul(%x, %wk) : f32[512, 1024]
// becomes
//   %x.f16 = convert(%x) {dtype = f16} : f16[512, 4096]
//   %y1 = matmul(%x.f16, %wq) : f32[512, 4096]
//   %y2 = matmul(%x.f16, %wk) : f32[512, 1024]
//
// An x that reshapes an op's own result is converted before the reshape
// (convert(attention) then reshape: attention_convert fuses the pair).
//
// Expert-indexed matmuls (matmul_id, fused.gated_matmul_id) take the same
// convert where the target says its grouped GEMM reads x in f16
// (Target::groupedExpertHalfX: block-quantised experts, which the CUDA
// grouped GEMM multiplies with x rounded to f16 anyway; opt-in,
// FG_DEBUG_MOE_HALF_X=1).
//
//===----------------------------------------------------------------------===//
#include "ir/Builder.h"
#include "passes/FunctionCopy.h"
#include "passes/Passes.h"
#include "passes/Target.h"

#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/STLExtras.h"

namespace fg {
namespace {

class GemmInputsPass : public Pass {
public:
  llvm::StringRef name() const override { return "gemm-inputs"; }

  llvm::Expected<bool> run(Function &fn, PassContext &ctx) override {
    ctx.stat("converts", 0);
    ctx.stat("matmuls", 0);
    if (!ctx.target)
      return false; // which matmuls are library GEMMs is the target's answer
    const int64_t gemvRows = ctx.target->maxGemvTokens();
    // The dtype x should have for node `n`, or nullopt to leave it.
    auto wanted = [&](const Node &n) -> std::optional<DType> {
      // fused.matmul_add over these rows is the same GEMM with the residual
      // as its C (the CUDA target's cuBLASLt form), reading x the same way.
      // Expert-indexed matmuls the target's grouped GEMM runs with f16 x
      // (block-quantised experts, Target::groupedExpertHalfX).
      if (n.kind == OpKind::MatMulId || n.kind == OpKind::FusedGatedMatmulId)
        return ctx.target->groupedExpertHalfX(NodeDesc::of(fn, n)) ? std::optional(DType::F16)
                                                                    : std::nullopt;
      if (n.kind != OpKind::MatMul && n.kind != OpKind::FusedMatmulAdd)
        return std::nullopt;
      const TensorType &xt = fn.type(n.operands[0]), &wt = fn.type(n.operands[1]);
      if (xt.dtype != DType::F32 || xt.numRows() <= gemvRows)
        return std::nullopt;
      if (wt.dtype == DType::F16 || wt.dtype == DType::BF16)
        return wt.dtype;
      if (isQuantized(wt.dtype))
        return DType::F16;
      return std::nullopt;
    };
    // Once a node: the expert-indexed question builds a probe function.
    std::vector<std::optional<DType>> want;
    for (const Node &n : fn.nodes())
      want.push_back(wanted(n));
    auto wantOf = [&](const Node &n) { return want[static_cast<size_t>(&n - fn.nodes().data())]; };
    if (llvm::none_of(want, [](const std::optional<DType> &d) { return d.has_value(); }))
      return false;

    // x a reshape of an op's own result: converted before the reshape (see
    // below). Where the matmuls that convert it are the reshape's only
    // readers, the f32 reshape is not copied at all — left in, it would be a
    // second use of the op's result until the next dce, and the fusion
    // patterns that take the convert (attention_convert) need a single use.
    auto reshapedResult = [&](ValueId x) -> const Node * {
      const Node *r = fn.producer(x);
      const Node *src = r && r->kind == OpKind::Reshape ? fn.producer(r->operands[0]) : nullptr;
      return src && !src->info().has(kViewLike) ? r : nullptr;
    };
    std::vector<unsigned> uses(fn.numValues(), 0), convertingUses(fn.numValues(), 0);
    for (const Node &n : fn.nodes())
      for (unsigned i = 0; i < n.operands.size(); ++i) {
        ++uses[n.operands[i]];
        convertingUses[n.operands[i]] += i == 0 && wantOf(n).has_value();
      }
    for (ValueId r : fn.results())
      ++uses[r];
    auto dropped = [&](const Node &n) {
      return n.kind == OpKind::Reshape && reshapedResult(n.result()) &&
             uses[n.result()] == convertingUses[n.result()];
    };

    // Rebuild in program order; a convert goes right before the first matmul
    // that wants it, where x is defined and read at the same point as before.
    FunctionCopy copy(fn);
    llvm::DenseMap<std::pair<ValueId, unsigned>, ValueId> converted;
    int64_t converts = 0, matmuls = 0;
    for (const Node &node : fn.nodes()) {
      if (dropped(node))
        continue;
      std::optional<DType> d = wantOf(node);
      if (!d) {
        copy.copy(node);
        continue;
      }
      auto key = std::make_pair(node.operands[0], static_cast<unsigned>(*d));
      auto it = converted.find(key);
      if (it == converted.end()) {
        Builder b(copy.out());
        // A name no value of the old function has (values after this point
        // are added under their old names), made unique in the copy too.
        std::string base = fn.value(node.operands[0]).name;
        std::string name = fn.uniqueName((base.empty() ? std::string("x") : base) + "." +
                                         std::string(dtypeName(*d)));
        // x a reshape of an op's own result (attention's [T, H, D] rows
        // flattened for the o projection): the op's result is converted and
        // the converted rows reshaped, so the op and its convert are
        // adjacent for the fusion patterns that store the GEMM's type
        // themselves (attention_convert). The same numbers: the convert is
        // elementwise.
        const Node *r = reshapedResult(node.operands[0]);
        ValueId c, cs = kNoValue;
        if (r) {
          cs = b.convert(copy.map(r->operands[0]), *d, name);
          c = b.reshape(cs, fn.type(node.operands[0]).shape, fn.uniqueName(name + ".rows"));
        } else {
          c = b.convert(copy.map(node.operands[0]), *d, name);
        }
        if (llvm::Error e = b.finish())
          return e;
        for (ValueId v : {cs, c})
          if (v != kNoValue)
            copy.out().node(copy.out().value(v).def).loc = node.loc;
        it = converted.insert({key, c}).first;
        ++converts;
      }
      llvm::SmallVector<ValueId, 6> operands;
      for (ValueId o : node.operands)
        operands.push_back(copy.map(o));
      operands[0] = it->second;
      copy.copy(node, operands);
      ++matmuls;
    }
    fn = copy.finish();
    ctx.stat("converts", converts);
    ctx.stat("matmuls", matmuls);
    return true;
  }
};

} // namespace

std::unique_ptr<Pass> createGemmInputsPass() { return std::make_unique<GemmInputsPass>(); }

} // namespace fg
