//===- WeightInitModule.cpp - the device's weight initialiser module ------===//
#include "codegen/cuda/WeightInitModule.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringRef.h"

namespace fg::cuda {
namespace {

/// ir/InitFormula.h and ir/QuantizeBlock.h, as text (CMakeLists.txt embeds them).
constexpr const char kInitFormula[] =
#include "generated/InitFormulaText.inc"
    ;
constexpr const char kQuantizeBlock[] =
#include "generated/QuantizeBlockText.inc"
    ;

/// One kernel per generated dtype: fg_init_<dtype> (initKernelSymbol) stores
/// fg_init::value rounded as the formula says.
constexpr const char kInitKernels[] = R"cuda(
typedef unsigned long long fg_u64;
#define FG_INIT_LOOP for (fg_u64 i = blockIdx.x * (fg_u64)blockDim.x + threadIdx.x; i < n; \
                          i += (fg_u64)gridDim.x * blockDim.x)
#define FG_INIT_F32(i) fg_init::toF32(fg_init::value(kind, seed, a, b, (i)))
extern "C" __global__ void fg_init_f32(float *out, fg_u64 n, int kind, fg_u64 seed, double a, double b) {
  FG_INIT_LOOP out[i] = FG_INIT_F32(i);
}
extern "C" __global__ void fg_init_f16(unsigned short *out, fg_u64 n, int kind, fg_u64 seed, double a, double b) {
  FG_INIT_LOOP {
    unsigned short h;
    asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(FG_INIT_F32(i)));
    out[i] = h;
  }
}
extern "C" __global__ void fg_init_bf16(unsigned short *out, fg_u64 n, int kind, fg_u64 seed, double a, double b) {
  FG_INIT_LOOP {
    unsigned short h;
    asm("cvt.rn.bf16.f32 %0, %1;" : "=h"(h) : "f"(FG_INIT_F32(i)));
    out[i] = h;
  }
}
extern "C" __global__ void fg_init_i32(int *out, fg_u64 n, int kind, fg_u64 seed, double a, double b) {
  FG_INIT_LOOP out[i] = (int)fg_init::toInteger(FG_INIT_F32(i));
}
extern "C" __global__ void fg_init_i64(long long *out, fg_u64 n, int kind, fg_u64 seed, double a, double b) {
  FG_INIT_LOOP out[i] = fg_init::toInteger(FG_INIT_F32(i));
}
)cuda";

/// Block-quantised weights: a thread per block computes its values with the
/// formula, then quantises them with ir/QuantizeBlock.h (the host's own
/// quantiser), so the blocks are the ones the host would make. Instantiated
/// per type: FG_INIT_QUANT(q4_k, Q4_K).
constexpr const char kQuantKernel[] = R"cuda(
#define FG_INIT_QUANT(name, T)                                                                 \
  extern "C" __global__ void fg_init_##name(unsigned char *out, fg_u64 n, int kind, fg_u64 seed, \
                                             double a, double b) {                             \
    const int E = fg_quant::blockElems(fg_quant::T), B = fg_quant::blockBytes(fg_quant::T);     \
    float x[256];                                                                              \
    for (fg_u64 k = blockIdx.x * (fg_u64)blockDim.x + threadIdx.x; k < n / E;                  \
         k += (fg_u64)gridDim.x * blockDim.x) {                                                \
      for (int j = 0; j < E; ++j)                                                              \
        x[j] = FG_INIT_F32(k * E + j);                                                         \
      fg_quant::quantizeBlock(fg_quant::T, x, out + k * B);                                    \
    }                                                                                          \
  }
)cuda";

/// A weight the formula makes (normal, uniform, constant).
bool isGenerated(const WeightInit &init) {
  return init.kind == WeightInit::Kind::Normal || init.kind == WeightInit::Kind::Uniform ||
         init.kind == WeightInit::Kind::Constant;
}

} // namespace

bool needsInitModule(const CompiledProgram &prog) {
  return llvm::any_of(prog.weights, [](const TensorSlot &w) { return isGenerated(w.init); });
}

std::vector<DType> initialisedBlockTypes(const CompiledProgram &prog) {
  std::vector<DType> out;
  for (const TensorSlot &w : prog.weights)
    if (isQuantized(w.type.dtype) && isGenerated(w.init) && !llvm::is_contained(out, w.type.dtype))
      out.push_back(w.type.dtype);
  return out;
}

std::string initModuleSource(llvm::ArrayRef<DType> blockTypes) {
  std::string s = std::string("// fusegraph weight initialisers\n") + kInitFormula + kInitKernels;
  if (blockTypes.empty())
    return s;
  s += kQuantizeBlock;
  s += kQuantKernel;
  for (DType t : blockTypes) {
    std::string name(dtypeName(t)), upper = llvm::StringRef(name).upper();
    s += "FG_INIT_QUANT(" + name + ", " + upper + ")\n";
  }
  return s;
}

} // namespace fg::cuda
