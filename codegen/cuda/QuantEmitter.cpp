//===- QuantEmitter.cpp - GGUF blocks decoded to rows: get_rows, prefill ---===//
//
// The dequantising row kernel (kernels/dequant.cuh, on the GEMV's block
// decoders): get_rows of a block-quantised table (embeddings), and the
// matrix of a prefill matmul decoded to f16 in scratch for cuBLAS. Both keep
// the weight quantised in device memory; only the GEMV-sized matmuls read it
// without this step (GemvEmitter.cpp).
//
//===----------------------------------------------------------------------===//
#include "codegen/cuda/EmitterCommon.h"
#include "codegen/cuda/KernelSources.h"

#include "llvm/Support/FormatVariadic.h"

#include <cassert>

namespace fg::cuda::detail {

const char *blockDecoder(DType t) {
  switch (t) {
  case DType::Q8_0:
    return "fg::DecQ8_0";
  case DType::Q4_0:
    return "fg::DecQ4_0";
  case DType::Q4_1:
    return "fg::DecQ4_1";
  case DType::Q5_0:
    return "fg::DecQ5_0";
  case DType::Q5_1:
    return "fg::DecQ5_1";
  case DType::Q5_K:
    return "fg::DecQ5_K";
  case DType::Q2_K:
    return "fg::DecQ2_K";
  case DType::Q3_K:
    return "fg::DecQ3_K";
  case DType::IQ4_NL:
    return "fg::DecIQ4_NL";
  case DType::IQ4_XS:
    return "fg::DecIQ4_XS";
  case DType::Q4_K:
    return "fg::DecQ4_K";
  case DType::Q6_K:
    return "fg::DecQ6_K";
  default:
    return nullptr;
  }
}


bool quantGetRowsSupported(const Function &fn, const Node &node, std::string *why) {
  auto no = [&](std::string w) {
    if (why)
      *why = std::move(w);
    return false;
  };
  const TensorType &tt = fn.type(node.operands[0]), &it = fn.type(node.operands[1]);
  if (!blockDecoder(tt.dtype) || !gemvDecodesNatively(tt.dtype))
    return no("no block decoder for " + std::string(dtypeName(tt.dtype)));
  if (tt.rank() != 2 || it.rank() != 1)
    return no("get_rows of a quantised table other than [rows, K] by [T] ids");
  DType out = fn.type(node.results[0]).dtype;
  if (out != DType::F32 && out != DType::F16 && out != DType::BF16)
    return no("a quantised get_rows into " + std::string(dtypeName(out)));
  return true;
}

KernelSpec dequantKernel(const DequantDesc &d) {
  const DTypeInfo &qi = dtypeInfo(d.q);
  int64_t be = qi.blockElems, bb = qi.blockBytes;
  bool vec = d.out == DType::F16 && d.oOff % 8 == 0 && d.oLd % 8 == 0;
  std::string c = "struct Cfg {\n";
  c += std::string("  using Dec = ") + blockDecoder(d.q) + ";\n";
  c += "  using Out = " + ctype(d.out) + ";\n  using Ids = " + ctype(d.ids) + ";\n";
  c += llvm::formatv("  static constexpr long long K = {0}, R = {1}, V = {2};\n", ilit(d.K),
                     ilit(d.R), ilit(d.V))
           .str();
  c += llvm::formatv("  static constexpr long long w_off = {0}, w_ld = {1}, o_off = {2}, "
                     "o_ld = {3}, ids_off = {4}, ids_s = {5};\n",
                     ilit(d.wOff / be * bb), ilit(d.wLd / be * bb), ilit(d.oOff), ilit(d.oLd),
                     ilit(d.idsOff), ilit(d.idsS))
           .str();
  c += llvm::formatv("  static constexpr long long w2_off = {0}, w2_ld = {1};\n",
                     ilit(d.w2Off / be * bb), ilit(d.w2Ld / be * bb))
           .str();
  c += std::string("  static constexpr bool kGather = ") + (d.gather ? "true" : "false") +
       ", kVecStore = " + (vec ? "true" : "false") + ", kPair = " + (d.pair ? "true" : "false") +
       ";\n};\n";
  assert(!(d.pair && d.gather) && "a pair of matrices is decoded whole");
  std::string params = "Cfg::Out* out, const unsigned char* w";
  std::string args = "out, w, ";
  if (d.gather) {
    params += ", const Cfg::Ids* ids";
    args += "ids";
  } else {
    args += "nullptr";
  }
  if (d.pair) {
    params += ", const unsigned char* w2";
    args += ", w2";
  }
  c += kernelEntry(256, params, "fg::dequantRows<Cfg>(" + args + ");");
  KernelSpec k = finishSpec(d.mnemonic,
                            kernelSource("gemv.cuh").str() + kernelSource("dequant.cuh").str() + c);
  k.grid[0] = gridFor((d.pair ? 2 : 1) * d.R * (d.K / 32) * 4, 256);
  k.block[0] = 256;
  k.params = {d.outParam, d.wParam};
  if (d.gather)
    k.params.push_back(d.idsParam);
  if (d.pair)
    k.params.push_back(d.w2Param);
  return k;
}

llvm::Expected<std::vector<Launch>> emitQuantGetRows(const Function &fn, const Node &node,
                                                     llvm::ArrayRef<Layout> ls) {
  std::string why;
  if (!quantGetRowsSupported(fn, node, &why))
    return unsupported(node, why);
  const TensorType &tt = fn.type(node.operands[0]);
  const Layout &tl = ls[0], &il = ls[1];
  const DTypeInfo &qi = dtypeInfo(tt.dtype);
  int64_t K = tt.shape[1], be = qi.blockElems;
  if (tl.strides[1] != 1 || tl.offset % be != 0 || tl.strides[0] % be != 0 || K % be != 0)
    return unsupported(node, "a quantised table whose rows are not whole contiguous blocks");
  DequantDesc d;
  d.mnemonic = node.info().mnemonic;
  d.q = tt.dtype;
  d.out = fn.type(node.results[0]).dtype;
  d.K = K;
  d.R = fn.type(node.operands[1]).shape[0];
  d.V = tt.shape[0];
  d.wOff = tl.offset;
  d.wLd = tl.strides[0];
  d.oOff = 0;
  d.oLd = K;
  d.gather = true;
  d.ids = fn.type(node.operands[1]).dtype;
  d.idsOff = il.offset;
  d.idsS = il.strides[0];
  d.outParam = Param::result(0);
  d.wParam = Param::operand(0);
  d.idsParam = Param::operand(1);
  return std::vector<Launch>{dequantKernel(d)};
}

} // namespace fg::cuda::detail
