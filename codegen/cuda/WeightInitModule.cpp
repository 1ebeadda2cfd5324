//===- WeightInitModule.cpp - the device's weight initialiser module ------===//
#include "codegen/cuda/WeightInitModule.h"

namespace fg::cuda {
namespace {

/// ir/InitFormula.h, as text (CMakeLists.txt embeds it).
constexpr const char kInitFormula[] =
#include "generated/InitFormulaText.inc"
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

} // namespace

bool needsInitModule(const CompiledProgram &prog) {
  for (const TensorSlot &w : prog.weights)
    if (w.init.kind == WeightInit::Kind::Normal || w.init.kind == WeightInit::Kind::Uniform ||
        w.init.kind == WeightInit::Kind::Constant)
      return true;
  return false;
}

const std::string &initModuleSource() {
  static const std::string source =
      std::string("// fusegraph weight initialisers\n") + kInitFormula + kInitKernels;
  return source;
}

} // namespace fg::cuda
