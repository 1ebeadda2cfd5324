//===- matmul_add.cpp - matmul then add -> fused.matmul_add ----------------===//
//
//   %o = matmul(%x, %w) : f32[1, 4096]
//   %y = add(%o, %r) : f32[1, 4096]          // either operand order
// becomes
//   %y = fused.matmul_add(%x, %w, %r) : f32[1, 4096]
//
// The residual add after the attention output and down projections (and a
// bias add after any projection, r = [N] broadcast over the rows) moves into
// the matmul. Decode-sized x (1 to the target's GEMV token limit rows): the
// GEMV's epilogue, one launch fewer, and the sum is never written and read
// back. Prefill-sized x (more rows; issue 15 item 2): where the plain matmul
// is a library GEMM, the CUDA target emits one cuBLASLt GEMM with the
// residual as its C and the result as its D (beta = 1), so the add's launch
// and its read of y and r and write of the sum are gone (W-dense's 512-token
// prefill: 64 adds, 0.72 ms of 20.9).
//
// Legality: the matmul's result has no other use; f32 x, contiguous (over
// more rows than the GEMV takes, also x already in a 16-bit type: the
// gemm-inputs pass's convert, when it ran before fusion); r f32 with one
// value per output column, either per row of y or shared by all rows (the add
// must not broadcast y itself). Whether the target has the kernel (weight
// dtype; cuBLAS being faster for this shape; the shared bias, which the
// cuBLASLt form refuses) is its canEmit answer.
//
//===----------------------------------------------------------------------===//
#include "passes/fusion/Pattern.h"

namespace fg::fusion {
namespace {

class MatmulAdd : public TreePattern {
public:
  MatmulAdd() {
    addVariant("matmul_add",
               m::Add(m::MatMul(m::Any(Cap::x), m::Any(Cap::w)).bind(Cap::matmul).singleUse(),
                      m::Any(Cap::residual))
                   .commutative());
  }
  llvm::StringRef name() const override { return "matmul_add"; }

  Decision check(const Function &fn, const Match &m) const override {
    ValueId x = m.get(Cap::x), r = m.get(Cap::residual);
    const TensorType &xt = fn.type(x), &yt = fn.type(m.get(Cap::matmul)), &rt = fn.type(r);
    int64_t tokens = xt.numRows();
    if (tokens < 1)
      return Decision::no(label(fn, x) + " has no rows");
    // Above the GEMV's rows the matmul is a library GEMM, whose x may already
    // be in the weight's 16-bit type; the GEMV reads f32 x.
    int64_t maxGemvTokens = target() ? target()->maxGemvTokens() : INT64_MAX;
    bool libraryGemm = tokens > maxGemvTokens;
    if (Decision d = libraryGemm
                         ? expectDType(fn, x, {DType::F32, DType::F16, DType::BF16}, "input")
                         : expectDType(fn, x, {DType::F32}, "input");
        !d)
      return d;
    if (Decision d = expectDType(fn, r, {DType::F32}, "addend"); !d)
      return d;
    if (!isContiguous(fn, x))
      return Decision::no("input " + label(fn, x) + " must be contiguous");
    const TensorType &outT = fn.type(m.outputs.front());
    if (outT.shape != yt.shape)
      return Decision::no("the add broadcasts the product " + yt.str() + " to " + outT.str());
    bool perRow = rt.shape == yt.shape, shared = rt.numElements() == yt.rowLength() &&
                                                 rt.rowLength() == yt.rowLength();
    if (!perRow && !shared)
      return Decision::no("addend " + label(fn, r) + " " + rt.str() +
                          " must be one value per output column, per row of " + yt.str() +
                          " or shared by all rows");
    if (!isContiguous(fn, r))
      return Decision::no("addend " + label(fn, r) + " must be contiguous");
    return Decision::yes();
  }

  FusedOp rewrite(const Function &, const Match &m) const override {
    return FusedOp::of(op::FusedMatmulAddArgs{
        .x = m.get(Cap::x), .w = m.get(Cap::w), .r = m.get(Cap::residual)});
  }
};

} // namespace

std::unique_ptr<FusionPattern> createMatmulAddPattern() { return std::make_unique<MatmulAdd>(); }

} // namespace fg::fusion
