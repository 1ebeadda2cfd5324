//===- EmitterTest.cpp - every op emits kernels that NVRTC compiles --------===//
//
// No GPU here: numerical checks against the CPU reference run in tests/gpu.
// This builds small graphs for every op of ir/Ops.def over several shapes and
// dtypes, emits each node, checks the launch descriptions, and compiles every
// distinct kernel source for sm_90 (cache under the build tree).
//
//===----------------------------------------------------------------------===//
#include "codegen/cuda/EmitNodes.h"
#include "codegen/cuda/Kernel.h"
#include "codegen/cuda/ValueLayouts.h"
#include "ir/OpViews.h"
#include "codegen/cuda/Nvrtc.h"
#include "ir/Builder.h"
#include "tests/unit/codegen/TestKernelCache.h"

#include "llvm/ADT/SmallString.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/Path.h"

#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <limits>
#include <map>
#include <set>

using namespace fg;
using namespace fg::cuda;

namespace {

/// Shared across the tests of this binary: distinct sources compiled so far.
struct Compiled {
  std::set<std::string> sources;
  std::set<OpKind> covered;
  unsigned compiles = 0;
};
Compiled &compiled() {
  static Compiled c;
  return c;
}

bool hasBytes(const std::vector<char> &blob, llvm::StringRef s) {
  return llvm::StringRef(blob.data(), blob.size()).contains(s);
}

void checkAndCompile(const KernelSpec &k, size_t numOperands) {
  SCOPED_TRACE(k.name);
  EXPECT_TRUE(llvm::StringRef(k.name).startswith("fg_"));
  EXPECT_NE(k.source.find("void __launch_bounds__"), std::string::npos);
  EXPECT_NE(k.source.find(k.name + "("), std::string::npos);
  EXPECT_EQ(k.source.find("KERNEL("), std::string::npos);
  for (unsigned g : k.grid)
    EXPECT_GE(g, 1u);
  EXPECT_LE(k.grid[1], 65535u);
  EXPECT_LE(k.grid[2], 65535u);
  EXPECT_GE(k.block[0], 32u);
  EXPECT_LE(k.block[0] * k.block[1] * k.block[2], 1024u);
  // Above 48 KiB the runtime raises the kernel's limit; 227 KiB is sm_90's.
  EXPECT_LE(k.sharedBytes, 227u * 1024);
  EXPECT_FALSE(k.params.empty());
  for (const Param &p : k.params) {
    if (p.kind == Param::Kind::Operand) {
      EXPECT_LT(p.index, numOperands);
    }
    if (p.kind == Param::Kind::Scratch) {
      EXPECT_GT(k.scratchBytes, 0u);
    }
  }
  // Programmatic dependent launch: the entry's first statement is the wait
  // for the kernels it depends on (common.cuh, fg_pdl_begin).
  size_t entry = k.source.rfind("__global__ void");
  ASSERT_NE(entry, std::string::npos);
  llvm::StringRef body = llvm::StringRef(k.source).substr(k.source.find('{', entry));
  // A GEMV, decode attention or the fused router first runs its prefetch
  // prologue (weights only: L2 hints or register loads, kernelEntry), the
  // expert down projection its prologue (which reads nothing unless the
  // lowering proves it may: EarlyExperts.h), then waits.
  llvm::StringRef waitAt = body;
  if (body.startswith("{\n  fg::") && body.contains("Prefetch<"))
    waitAt = body.drop_front(body.find(";\n") + 1);
  else if (body.startswith("{\n  const fg::") && body.contains("SumPrologue<"))
    waitAt = body.drop_front(body.find("SumPrologue<")).drop_front(
        body.drop_front(body.find("SumPrologue<")).find(";\n") + 1);
  else
    waitAt = body.drop_front(1);
  // (The kernels decode attention reads may trigger first: EmitNodes.cpp.)
  EXPECT_TRUE(waitAt.startswith("\n  fg_pdl_begin();") ||
              waitAt.startswith("\n  fg_pdl_begin_trigger_first();"))
      << body.take_front(200).str();
  if (!compiled().sources.insert(k.source).second)
    return;
  ++compiled().compiles;
  NvrtcOptions o;
  o.cacheDir = test::kernelCacheDir();
  auto m = compileCuda(k.source, k.name, "sm_90", o);
  ASSERT_TRUE(static_cast<bool>(m)) << llvm::toString(m.takeError()) << "\n" << k.source;
  EXPECT_FALSE(m->cubin.empty());
  EXPECT_TRUE(hasBytes(m->cubin, k.name));
}

using BuildFn = std::function<void(Builder &)>;

/// Builds a function, emits every node (contiguous operands unless `layouts`
/// overrides the last node's) and compiles what comes out. Returns the
/// launches of the last node.
std::vector<Launch> emitAll(const BuildFn &build, std::vector<Layout> lastLayouts = {},
                            EmitOptions opts = {}) {
  Function fn("t");
  Builder b(fn);
  build(b);
  if (llvm::Error e = b.finish()) {
    ADD_FAILURE() << llvm::toString(std::move(e));
    return {};
  }
  std::vector<Launch> last;
  for (size_t n = 0; n < fn.numNodes(); ++n) {
    const Node &node = fn.node(static_cast<NodeId>(n));
    std::vector<Layout> ls = contiguousLayouts(fn, node);
    if (n + 1 == fn.numNodes() && !lastLayouts.empty())
      ls = lastLayouts;
    auto launches = emitKernel(fn, node, ls, opts);
    if (!launches) {
      ADD_FAILURE() << mnemonic(node.kind) << ": " << llvm::toString(launches.takeError());
      return {};
    }
    compiled().covered.insert(node.kind);
    for (const Launch &l : *launches)
      if (const auto *k = std::get_if<KernelSpec>(&l))
        checkAndCompile(*k, node.operands.size());
    last = std::move(*launches);
  }
  return last;
}

const KernelSpec &kernel(const std::vector<Launch> &ls, size_t i) {
  return std::get<KernelSpec>(ls.at(i));
}

bool ok(llvm::Error e) {
  if (!e)
    return true;
  ADD_FAILURE() << llvm::toString(std::move(e));
  return false;
}

TensorType T(DType d, std::initializer_list<int64_t> s) { return TensorType(d, s); }

const DType kFloats[] = {DType::F32, DType::F16, DType::BF16};

bool contains(const KernelSpec &k, llvm::StringRef s) { return llvm::StringRef(k.source).contains(s); }

std::string ctypeOf(DType t) {
  return t == DType::F32 ? "float" : t == DType::F16 ? "fg_f16" : "fg_bf16";
}

} // namespace

TEST(CudaEmit, BinaryBroadcastAllFloatTypes) {
  for (DType dt : kFloats)
    for (OpKind k : {OpKind::Add, OpKind::Sub, OpKind::Mul, OpKind::Div}) {
      auto ls = emitAll([&](Builder &b) {
        auto x = b.input("x", T(dt, {3, 37}));
        auto y = b.input("y", T(dt, {37}));
        b.result(b.create(k, {x, y}));
      });
      ASSERT_EQ(ls.size(), 1u);
      EXPECT_EQ(kernel(ls, 0).params.size(), 3u);
      // The broadcast operand is read without the row coordinate.
      EXPECT_TRUE(contains(kernel(ls, 0), "fg::EwOp<" + ctypeOf(dt) + ", 0LL, 0LL, 0LL, 0LL, 1LL>"));
      EXPECT_TRUE(contains(kernel(ls, 0), "fg::EwBinary<"));
    }
  // Broadcasting both ways, mixed dtypes (-> f32), integers.
  emitAll([](Builder &b) {
    auto x = b.input("x", T(DType::F32, {5, 1, 7}));
    auto y = b.input("y", T(DType::F16, {1, 6, 7}));
    b.result(b.mul(x, y));
  });
  emitAll([](Builder &b) {
    auto x = b.input("x", T(DType::I32, {9}));
    auto y = b.input("y", T(DType::I32, {9}));
    b.result(b.add(b.div(x, y), y));
  });
}

TEST(CudaEmit, MoreThan65535RowsUseAGridStrideLoop) {
  auto ls = emitAll([](Builder &b) {
    auto x = b.input("x", T(DType::F32, {70001, 33}));
    auto y = b.input("y", T(DType::F32, {70001, 1}));
    b.result(b.add(x, y));
  });
  ASSERT_EQ(ls.size(), 1u);
  const KernelSpec &k = kernel(ls, 0);
  EXPECT_EQ(k.grid[0], (70001u * 33 + 255) / 256);
  EXPECT_NE(k.source.find("D2 = 70001LL, D3 = 33LL"), std::string::npos);
  EXPECT_NE(k.source.find("long long i"), std::string::npos);

  auto rn = emitAll([](Builder &b) {
    b.result(b.rmsNorm(b.input("x", T(DType::F16, {70001, 65})), 1e-6));
  });
  ASSERT_EQ(rn.size(), 1u);
  EXPECT_EQ(kernel(rn, 0).grid[0], 70001u);
  EXPECT_EQ(kernel(rn, 0).block[0], 96u);
  // Many rows: one block per row (no split), the template's grid-stride loop.
  EXPECT_TRUE(llvm::StringRef(kernel(rn, 0).source).contains("D2 = 70001LL, L = 65LL, kSplit = 1LL"));
  EXPECT_TRUE(llvm::StringRef(kernel(rn, 0).source).contains("fg::normRows<Cfg>"));
}

TEST(CudaEmit, UnaryScaleClampGlu) {
  for (OpKind k : op::kUnaryOps) // every FG_UNARY row of ir/Ops.def
    emitAll([&](Builder &b) { b.result(b.unary(k, b.input("x", T(DType::F32, {37, 45})))); });
  for (DType dt : {DType::F16, DType::BF16})
    emitAll([&](Builder &b) {
      b.result(b.unary(OpKind::Silu, b.input("x", T(dt, {37, 45}))));
    });
  auto sc = emitAll([](Builder &b) { b.result(b.scale(b.input("x", T(DType::F32, {100})), 0.1, 2)); });
  // 0.1f and 2.0f as their exact bits.
  EXPECT_TRUE(contains(kernel(sc, 0), "fg::EwUnary<fg::UnScale<1036831949, 1073741824>>"));
  emitAll([](Builder &b) { b.result(b.clamp(b.input("x", T(DType::F16, {100})), -1, 1)); });
  emitAll([](Builder &b) {
    b.result(b.clamp(b.input("x", T(DType::F32, {100})), 6.103515625e-5,
                     std::numeric_limits<double>::infinity()));
  });
  for (GluKind g : {GluKind::SwiGLU, GluKind::GeGLU, GluKind::SwiGLUOAI, GluKind::SwiGLUClamp})
    emitAll([&](Builder &b) {
      auto x = b.input("g", T(DType::F32, {3, 77}));
      auto u = b.input("u", T(DType::F32, {3, 77}));
      b.result(b.glu(x, u, g));
    });
}

TEST(CudaEmit, ConvertContRepeatConcat) {
  std::pair<DType, DType> pairs[] = {{DType::F32, DType::F16}, {DType::F16, DType::F32},
                                     {DType::F32, DType::BF16}, {DType::BF16, DType::F16},
                                     {DType::F32, DType::I32}, {DType::I32, DType::F32},
                                     {DType::I32, DType::I64}};
  for (const auto &p : pairs) // not a structured binding: clang 14 cannot capture one
    emitAll([&](Builder &b) { b.result(b.convert(b.input("x", T(p.first, {7, 45})), p.second)); });
  // cont of a transposed operand reads through the strides.
  Layout tr;
  tr.shape = {37, 45};
  tr.strides = {1, 37};
  auto cont = emitAll(
      [](Builder &b) { b.result(b.cont(b.input("x", T(DType::F16, {37, 45})))); }, {tr});
  EXPECT_TRUE(contains(kernel(cont, 0), "fg::EwOp<fg_f16, 0LL, 0LL, 0LL, 1LL, 37LL>"));
  emitAll([](Builder &b) { b.result(b.repeat(b.input("x", T(DType::F32, {1, 5})), {3, 15})); });
  for (int64_t axis : {0, 1})
    emitAll([&](Builder &b) {
      auto x = b.input("x", T(DType::F32, {3, 5}));
      auto y = b.input("y", T(DType::F32, {3, 5}));
      b.result(b.concat(x, y, axis));
    });
}

/// The opt-in prefetching form of the elementwise maps
/// (EmitOptions::elementwiseIlp, with the default vector form off): kIlp
/// elements a thread, a grid of ⌈n / (256 · kIlp)⌉ blocks; it compiles for a
/// convert, a broadcast add and a glu. A gather reads elsewhere than the
/// output's position and keeps one element a thread; so does the scalar form
/// (both off).
TEST(CudaEmit, ElementwisePrefetchForm) {
  EmitOptions o, scalar;
  o.elementwiseIlp = 4;
  o.elementwiseVector = scalar.elementwiseVector = false;
  auto cv = emitAll(
      [](Builder &b) { b.result(b.convert(b.input("x", T(DType::F32, {512, 4099})), DType::F16)); },
      {}, o);
  EXPECT_TRUE(contains(kernel(cv, 0), "kIns = 1, kIlp = 4, kGroups = 1;"));
  EXPECT_EQ(kernel(cv, 0).grid[0], unsigned((512 * 4099 + 1023) / 1024));
  auto plain = emitAll(
      [](Builder &b) { b.result(b.convert(b.input("x", T(DType::F32, {512, 4099})), DType::F16)); },
      {}, scalar);
  EXPECT_TRUE(contains(kernel(plain, 0), "kIns = 1, kIlp = 1, kGroups = 1;"));
  EXPECT_FALSE(contains(kernel(plain, 0), "kVec = true;"));
  EXPECT_EQ(kernel(plain, 0).grid[0], unsigned((512 * 4099 + 255) / 256));
  auto add = emitAll(
      [](Builder &b) {
        b.result(b.add(b.input("x", T(DType::F32, {33, 100})), b.input("y", T(DType::F32, {100}))));
      },
      {}, o);
  EXPECT_TRUE(contains(kernel(add, 0), "kIns = 2, kIlp = 4, kGroups = 1;"));
  auto glu = emitAll(
      [](Builder &b) {
        b.result(b.glu(b.input("g", T(DType::F32, {9, 77})), b.input("u", T(DType::F32, {9, 77})),
                       GluKind::SwiGLU));
      },
      {}, o);
  EXPECT_TRUE(contains(kernel(glu, 0), "kIlp = 4, kGroups = 1;"));
  auto rows = emitAll(
      [](Builder &b) {
        b.result(b.getRows(b.weight("emb", T(DType::F16, {100, 67})),
                           b.input("tokens", T(DType::I32, {3}))));
      },
      {}, o);
  EXPECT_TRUE(contains(kernel(rows, 0), "kIlp = 1;"));
}

/// The vector form of the elementwise maps (EmitOptions::elementwiseVector,
/// the default since the ninth session): 4 elements a thread where every
/// operand is read at the output's flat index — a convert, a glu, an f16
/// add, a chain; a broadcast operand, a transposed one or a gather keep the
/// plain form.
TEST(CudaEmit, ElementwiseVectorForm) {
  EmitOptions o;
  EXPECT_TRUE(o.elementwiseVector);
  auto one = [&](const std::function<void(Builder &)> &build, std::vector<Layout> ls = {}) {
    return emitAll(build, std::move(ls), o);
  };
  auto cv = one([](Builder &b) {
    b.result(b.convert(b.input("x", T(DType::F32, {512, 4099})), DType::F16));
  });
  EXPECT_TRUE(contains(kernel(cv, 0), "kVec = true;"));
  EXPECT_EQ(kernel(cv, 0).grid[0], unsigned((512 * 4099 + 1023) / 1024));
  auto glu = one([](Builder &b) {
    b.result(b.glu(b.input("g", T(DType::F32, {9, 77})), b.input("u", T(DType::F32, {9, 77})),
                   GluKind::SwiGLU));
  });
  EXPECT_TRUE(contains(kernel(glu, 0), "kVec = true;"));
  auto add16 = one([](Builder &b) {
    b.result(b.add(b.input("x", T(DType::F16, {33, 100})), b.input("y", T(DType::F16, {33, 100}))));
  });
  EXPECT_TRUE(contains(kernel(add16, 0), "kVec = true;"));
  auto i64 = one([](Builder &b) {
    b.result(b.convert(b.input("x", T(DType::I32, {7, 45})), DType::I64));
  });
  EXPECT_TRUE(contains(kernel(i64, 0), "kVec = true;"));
  auto bc = one([](Builder &b) {
    b.result(b.add(b.input("x", T(DType::F32, {33, 100})), b.input("y", T(DType::F32, {100}))));
  });
  EXPECT_TRUE(contains(kernel(bc, 0), "kVec = false;"));
  Layout tr;
  tr.shape = {37, 45};
  tr.strides = {1, 37};
  auto cont = one([](Builder &b) { b.result(b.cont(b.input("x", T(DType::F16, {37, 45})))); },
                  {tr});
  EXPECT_TRUE(contains(kernel(cont, 0), "kVec = false;"));
  auto rows = one([](Builder &b) {
    b.result(b.getRows(b.weight("emb", T(DType::F16, {100, 67})),
                       b.input("tokens", T(DType::I32, {3}))));
  });
  EXPECT_TRUE(contains(kernel(rows, 0), "kVec = false;"));
  EXPECT_TRUE(contains(kernel(emitAll([](Builder &b) {
                                b.result(b.convert(b.input("x", T(DType::F32, {8})), DType::F16));
                              }),
                              0),
                       "kVec = false;")); // off by default
}

/// fused.glu_convert is the GLU's map with the result's 16-bit type.
TEST(CudaEmit, GluConvert) {
  for (DType to : {DType::F16, DType::BF16}) {
    auto ls = emitAll([&](Builder &b) {
      auto g = b.input("g", T(DType::F32, {9, 77}));
      auto u = b.input("u", T(DType::F32, {9, 77}));
      b.result(b.create(OpKind::FusedGluConvert, {g, u},
                        {{"kind", Attribute::ofEnum(0)}, {"dtype", Attribute::ofDType(to)}}));
    });
    ASSERT_EQ(ls.size(), 1u);
    EXPECT_TRUE(contains(kernel(ls, 0), "fg::EwGlu<0,"));
    EXPECT_TRUE(contains(kernel(ls, 0), to == DType::F16 ? "using Out = fg_f16;"
                                                          : "using Out = fg_bf16;"));
  }
}

/// fused.rms_norm_mul {dtype = f16|bf16} (the rms_norm_mul_convert pattern)
/// is the norm row kernel storing the result's 16-bit type: prefill row
/// counts and row lengths of W-dense (4096), gpt-oss (2880) and a small head
/// dim (96) through NVRTC; an integer result is refused with a reason.
TEST(CudaEmit, RmsNormMulConvert) {
  struct Case {
    int64_t rows, len;
  };
  for (Case c : {Case{9, 4096}, Case{65, 2880}, Case{513, 96}})
    for (DType to : {DType::F16, DType::BF16}) {
      SCOPED_TRACE(llvm::formatv("{0}x{1} {2}", c.rows, c.len, dtypeName(to).data()).str());
      auto ls = emitAll([&](Builder &b) {
        auto x = b.input("x", T(DType::F32, {c.rows, c.len}));
        b.result(b.create(OpKind::FusedRmsNormMul, {x, b.weight("w", T(DType::F32, {c.len}))},
                          {{"eps", Attribute::ofFloat(1e-5)}, {"dtype", Attribute::ofDType(to)}}));
      });
      ASSERT_EQ(ls.size(), 1u);
      EXPECT_TRUE(contains(kernel(ls, 0), "using Out = " + ctypeOf(to) + ";"));
      EXPECT_TRUE(contains(kernel(ls, 0), "using Stat = fg::StatRms<"));
      EXPECT_TRUE(contains(kernel(ls, 0), "kMul = true, kAdd = false;"));
      EXPECT_TRUE(contains(kernel(ls, 0), "kV = 4;")); // 8-byte stores of 4 halves
    }
  Function fn("int_result");
  Builder b(fn);
  auto x = b.input("x", T(DType::F32, {9, 64}));
  b.result(
      b.create(OpKind::FusedRmsNormMul, {x, b.weight("w", T(DType::F32, {64}))},
               {{"eps", Attribute::ofFloat(1e-5)}, {"dtype", Attribute::ofDType(DType::I32)}}));
  ASSERT_TRUE(ok(b.finish()));
  auto e = emitKernel(fn, fn.node(0), contiguousLayouts(fn, fn.node(0)));
  ASSERT_FALSE(static_cast<bool>(e));
  std::string m = llvm::toString(e.takeError());
  EXPECT_NE(m.find("result type i32"), std::string::npos) << m;
}

TEST(CudaEmit, GetRowsSetRowsAddId) {
  for (DType dt : kFloats)
    emitAll([&](Builder &b) {
      auto t = b.weight("emb", T(dt, {100, 67}));
      b.result(b.getRows(t, b.input("tokens", T(DType::I32, {3}))));
    });
  emitAll([](Builder &b) { // batched, routing weights [T, E] by ids [T, k]
    auto p = b.input("p", T(DType::F32, {5, 8}));
    b.result(b.getRows(p, b.input("ids", T(DType::I32, {5, 2}))));
  });
  emitAll([](Builder &b) {
    auto t = b.input("t", T(DType::I32, {2, 5, 3}));
    b.result(b.getRows(t, b.input("ids", T(DType::I64, {2, 4}))));
  });
  for (DType cache : kFloats)
    for (DType idx : {DType::I32, DType::I64}) {
      auto ls = emitAll([&](Builder &b) {
        auto k = b.state("k_cache.0", T(cache, {64, 2, 33}));
        auto src = b.input("k", T(DType::F32, {3, 2, 33}));
        b.result(b.setRows(k, src, b.input("positions", T(idx, {3}))));
      });
      ASSERT_EQ(ls.size(), 1u);
      // In place: writes Result 0 (operand 0's buffer), reads source and indices.
      EXPECT_EQ(kernel(ls, 0).params,
                (std::vector<Param>{Param::result(0), Param::operand(1), Param::operand(2)}));
      // 64 cache rows of 2 x 33.
      EXPECT_TRUE(contains(kernel(ls, 0), ">, 64LL, 66LL>"));
    }
  emitAll([](Builder &b) {
    auto a = b.input("a", T(DType::F32, {3, 2, 45}));
    auto bias = b.weight("b", T(DType::F32, {8, 45}));
    b.result(b.addId(a, bias, b.input("ids", T(DType::I32, {3, 2}))));
  });
}

TEST(CudaEmit, NormsReductionsSoftmax) {
  for (DType dt : kFloats) {
    emitAll([&](Builder &b) { b.result(b.rmsNorm(b.input("x", T(dt, {3, 100})), 1e-5)); });
    emitAll([&](Builder &b) { b.result(b.layerNorm(b.input("x", T(dt, {3, 1000})), 1e-5)); });
  }
  emitAll([](Builder &b) { b.result(b.rmsNorm(b.input("x", T(DType::F32, {4096})), 1e-6)); });
  emitAll([](Builder &b) { b.result(b.sumRows(b.input("x", T(DType::F32, {2, 3, 37})))); });
  emitAll([](Builder &b) { b.result(b.mean(b.input("x", T(DType::F16, {5, 300})))); });
  emitAll([](Builder &b) { b.result(b.softmax(b.input("x", T(DType::F32, {6, 45})))); });
  emitAll([](Builder &b) {
    b.result(b.softmax(b.input("x", T(DType::F32, {2, 4, 7, 45})),
                       b.input("mask", T(DType::F16, {7, 45})), 0.125, 8.0));
  });
  auto sm = emitAll([](Builder &b) {
    b.result(b.softmax(b.input("x", T(DType::F32, {6, 5, 45})),
                       b.input("mask", T(DType::F32, {1, 5, 45})), 0.5));
  });
  EXPECT_EQ(kernel(sm, 0).params.size(), 3u);
}

/// Few long rows: several blocks share a row (each computes the statistics of
/// the whole row and writes its own slice); many rows: one block, or one warp,
/// per row. 16-byte loads where the layout allows them.
TEST(CudaEmit, RowKernelsSplitFewLongRows) {
  struct Case {
    int64_t rows, len;
    unsigned split, threads, grid; ///< rms_norm family (up to 256 threads)
    unsigned smSplit, smThreads, smGrid; ///< softmax (up to 512 threads)
    int vx, v;
  };
  const Case cases[] = {{1, 4096, 4, 256, 4, 2, 512, 2, 4, 4},
                        {1, 5000, 5, 256, 5, 3, 512, 3, 4, 4},
                        {3, 4097, 17, 256, 51, 9, 512, 27, 1, 1},
                        {66000, 64, 1, 256, 8250, 1, 256, 8250, 4, 4}};
  for (const Case &c : cases) {
    SCOPED_TRACE(std::to_string(c.rows) + "x" + std::to_string(c.len));
    auto shape = [&](const char *) { return T(DType::F32, {c.rows, c.len}); };
    for (OpKind k : {OpKind::FusedRmsNormMul, OpKind::FusedRmsNormMulAdd, OpKind::RmsNorm,
                     OpKind::LayerNorm}) {
      auto ls = emitAll([&](Builder &b) {
        std::vector<ValueId> ops{b.input("x", shape("x"))};
        if (k != OpKind::RmsNorm && k != OpKind::LayerNorm)
          ops.push_back(b.weight("w", T(DType::F32, {c.len})));
        if (k == OpKind::FusedRmsNormMulAdd)
          ops.push_back(b.input("r", shape("r")));
        b.result(b.create(k, ops, {{"eps", Attribute::ofFloat(1e-6)}}));
      });
      const KernelSpec &kk = kernel(ls, 0);
      EXPECT_EQ(kk.grid[0], c.grid);
      EXPECT_EQ(kk.block[0], c.threads);
      EXPECT_TRUE(contains(kk, "kSplit = " + std::to_string(c.split) + "LL"));
      EXPECT_TRUE(contains(kk, llvm::formatv("kVX = {0}, kV = {1};", c.vx, c.v).str()));
    }
    auto sm = emitAll([&](Builder &b) { b.result(b.softmax(b.input("x", shape("x")))); });
    EXPECT_EQ(kernel(sm, 0).grid[0], c.smGrid);
    EXPECT_EQ(kernel(sm, 0).block[0], c.smThreads);
    EXPECT_TRUE(contains(kernel(sm, 0), "kSplit = " + std::to_string(c.smSplit) + "LL"));
  }
  // As many SMs as rows: one block per row.
  EmitOptions one;
  one.smCount = 1;
  auto ls = emitAll(
      [](Builder &b) { b.result(b.rmsNorm(b.input("x", T(DType::F32, {1, 4096})), 1e-6)); }, {},
      one);
  EXPECT_EQ(kernel(ls, 0).grid[0], 1u);
  EXPECT_TRUE(contains(kernel(ls, 0), "kSplit = 1LL"));
  // A weight read from an odd offset: the statistics keep 16-byte loads, the
  // write pass goes one element at a time.
  Layout w = Layout::contiguous({4096});
  w.offset = 1;
  auto odd = emitAll(
      [](Builder &b) {
        b.result(b.create(OpKind::FusedRmsNormMul,
                          {b.input("x", T(DType::F32, {1, 4096})),
                           b.weight("w", T(DType::F32, {4096}))},
                          {{"eps", Attribute::ofFloat(1e-6)}}));
      },
      {Layout::contiguous({1, 4096}), w});
  EXPECT_TRUE(contains(kernel(odd, 0), "kVX = 4, kV = 1;"));
  EXPECT_TRUE(contains(kernel(odd, 0), "fg::RowOp<float, 1LL, 0LL, 0LL, 0LL, 1LL>"));
}

TEST(CudaEmit, Rope) {
  for (RopeMode mode : {RopeMode::Normal, RopeMode::Neox})
    for (DType dt : {DType::F32, DType::F16}) {
      Builder::RopeParams p;
      p.mode = mode;
      emitAll([&](Builder &b) {
        auto x = b.input("x", T(dt, {3, 4, 64}));
        b.result(b.rope(x, b.input("positions", T(DType::I32, {3})), p));
      });
    }
  Builder::RopeParams yarn; // partial rotation, YaRN, freq factors
  yarn.mode = RopeMode::Neox;
  yarn.nDims = 32;
  yarn.extFactor = 1;
  yarn.freqScale = 0.25;
  yarn.nCtxOrig = 4096;
  yarn.theta = 1e6;
  auto ls = emitAll([&](Builder &b) {
    auto x = b.input("x", T(DType::F32, {5, 3, 80}));
    auto ff = b.weight("rope_freqs", T(DType::F32, {16}));
    b.result(b.rope(x, b.input("positions", T(DType::I64, {5})), yarn, ff));
  });
  ASSERT_EQ(ls.size(), 1u);
  EXPECT_EQ(kernel(ls, 0).params.size(), 4u);
  EXPECT_NE(kernel(ls, 0).source.find("kYarn = true"), std::string::npos);
  // Channels 32..79 pass through.
  EXPECT_NE(kernel(ls, 0).source.find("kNDims = 32LL"), std::string::npos);
  EXPECT_NE(kernel(ls, 0).source.find("L = 80LL"), std::string::npos);
  EXPECT_EQ(kernel(ls, 0).source.find("kHeads = "), std::string::npos); // 5 tokens: decode-sized
}

/// A prefill rope (more than 8 tokens) takes the heads of a token 4 at a time
/// (2 when the head count is not a multiple of 4, 1 when it is odd), the
/// grid sized for the groups; every form compiles.
TEST(CudaEmit, RopePrefillHeadGroups) {
  // (Not a structured binding: clang 14 cannot capture one in the lambda.)
  for (std::pair<int64_t, int64_t> hg : {std::pair<int64_t, int64_t>{32, 4}, {6, 2}, {5, 0}}) {
    const int64_t heads = hg.first, group = hg.second;
    SCOPED_TRACE(heads);
    Builder::RopeParams p;
    p.mode = RopeMode::Neox;
    auto ls = emitAll([&](Builder &b) {
      auto x = b.input("x", T(DType::F32, {37, heads, 128}));
      b.result(b.rope(x, b.input("positions", T(DType::I32, {37})), p));
    });
    ASSERT_EQ(ls.size(), 1u);
    const KernelSpec &k = kernel(ls, 0);
    if (group == 0) {
      EXPECT_EQ(k.source.find("kHeads = "), std::string::npos);
      continue;
    }
    EXPECT_NE(k.source.find("kHeads = " + std::to_string(group) + ";"), std::string::npos);
    if (heads == 32) { // 296 groups of 64 pairs: a block of 64 threads each
      EXPECT_EQ(k.grid[0], 296u);
      EXPECT_EQ(k.block[0], 64u);
    }
  }
}

TEST(CudaEmit, ArgsortTopK) {
  for (SortOrder o : {SortOrder::Asc, SortOrder::Desc})
    emitAll([&](Builder &b) { b.result(b.argsort(b.input("x", T(DType::F32, {5, 37})), o)); });
  auto big = emitAll([](Builder &b) {
    b.result(b.argsort(b.input("x", T(DType::F32, {2, 20000})), SortOrder::Desc));
  });
  EXPECT_EQ(kernel(big, 0).sharedBytes, 0u); // row too long for shared memory
  auto tk = emitAll([](Builder &b) { b.result(b.topK(b.input("x", T(DType::F16, {7, 128})), 5)); });
  EXPECT_EQ(kernel(tk, 0).sharedBytes, 128u * 4);
  EXPECT_NE(kernel(tk, 0).source.find("K = 5LL"), std::string::npos);
  EXPECT_NE(kernel(tk, 0).source.find("fg::rankRows<Cfg>"), std::string::npos);
}

TEST(CudaEmit, GemvForFewTokens) {
  for (DType wt : kFloats)
    for (int64_t M : {1, 5}) {
      auto ls = emitAll([&](Builder &b) {
        auto x = b.input("x", T(DType::F32, {M, 100}));
        b.result(b.matmul(x, b.weight("w", T(wt, {77, 100}))));
      });
      ASSERT_EQ(ls.size(), 1u);
      // Few rows of x: lanes over K, 2 output rows per block; from 3 rows of
      // 16-bit weights: tensor cores, a tile of 16 output rows per block.
      unsigned rows = M >= 3 && wt != DType::F32 ? 16 : 4;
      EXPECT_EQ(kernel(ls, 0).grid[0], (77u + rows - 1) / rows);
      EXPECT_TRUE(contains(kernel(ls, 0), "static constexpr int M = " + std::to_string(M)));
      EXPECT_TRUE(contains(kernel(ls, 0), "fg::gemv<Cfg>"));
    }
  // 3+ rows of x on a large weight (≥ 64 MiB): cuBLAS is faster than the
  // tensor-core GEMV there; 1-2 rows stay generated.
  for (int64_t M : {2, 4}) {
    auto ls = emitAll([&](Builder &b) {
      auto x = b.input("x", T(DType::F32, {M, 4096}));
      b.result(b.matmul(x, b.weight("w", T(DType::F16, {8192, 4096}))));
    });
    EXPECT_EQ(std::holds_alternative<CublasGemmSpec>(ls.back()), M == 4);
  }
  emitAll([](Builder &b) { // 3-D x, 6 rows, f16 x
    auto x = b.input("x", T(DType::F16, {2, 3, 64}));
    b.result(b.matmul(x, b.weight("w", T(DType::F16, {33, 64}))));
  });
  for (int64_t X : {1, 3})
    emitAll([&](Builder &b) {
      auto x = b.input("x", T(DType::F32, {2, X, 64}));
      auto w = b.weight("w", T(DType::F16, {8, 45, 64}));
      b.result(b.matmulId(x, w, b.input("ids", T(DType::I32, {2, 3}))));
    });
}

TEST(CudaEmit, LargeMatmulGoesToCublas) {
  // f32 x and f32 W: cuBLAS reads x directly.
  auto ls = emitAll([](Builder &b) {
    auto x = b.input("x", T(DType::F32, {2, 10, 96}));
    b.result(b.matmul(x, b.weight("w", T(DType::F32, {50, 96}))));
  });
  ASSERT_EQ(ls.size(), 1u);
  const auto &g = std::get<CublasGemmSpec>(ls[0]);
  EXPECT_TRUE(g.transA);
  EXPECT_FALSE(g.transB);
  EXPECT_EQ(g.m, 50);
  EXPECT_EQ(g.n, 20);
  EXPECT_EQ(g.k, 96);
  EXPECT_EQ(g.lda, 96);
  EXPECT_EQ(g.ldb, 96);
  EXPECT_EQ(g.ldc, 50);
  EXPECT_EQ(g.a.param, Param::operand(1));
  EXPECT_EQ(g.b.param, Param::operand(0));
  EXPECT_EQ(g.c.param, Param::result(0));
  EXPECT_EQ(g.aType, DType::F32);
  EXPECT_EQ(g.scratchBytes, 0u);

  // f16 W: x is converted to f16 into scratch first.
  auto ls2 = emitAll([](Builder &b) {
    auto x = b.input("x", T(DType::F32, {9, 96}));
    b.result(b.matmul(x, b.weight("w", T(DType::F16, {50, 96}))));
  });
  ASSERT_EQ(ls2.size(), 2u);
  const KernelSpec &cvt = kernel(ls2, 0);
  EXPECT_EQ(cvt.params, (std::vector<Param>{Param::scratch(), Param::operand(0)}));
  EXPECT_EQ(cvt.scratchBytes, 9u * 96 * 2);
  const auto &g2 = std::get<CublasGemmSpec>(ls2[1]);
  EXPECT_EQ(g2.b.param, Param::scratch());
  EXPECT_EQ(g2.bType, DType::F16);
  EXPECT_EQ(g2.n, 9);
  EXPECT_EQ(g2.scratchBytes, 9u * 96 * 2);

  // A larger GEMV limit keeps it generated.
  EmitOptions o;
  o.maxGemvTokens = 16;
  auto ls3 = emitAll(
      [](Builder &b) {
        auto x = b.input("x", T(DType::F32, {9, 96}));
        b.result(b.matmul(x, b.weight("w", T(DType::F16, {50, 96}))));
      },
      {}, o);
  ASSERT_EQ(ls3.size(), 1u);
  EXPECT_TRUE(std::holds_alternative<KernelSpec>(ls3[0]));
}

/// Attention is one launch: the flash-decoding kernel over (splits, kv heads
/// × head chunks, tokens), its split counters in the launch's own program
/// counters (zeroed at load, reset by the kernel). Every variant (head dims,
/// GQA groups, KV dtypes, windows, softcap, sinks, tokens) compiles, and the
/// scratch holds every split's partial.
TEST(CudaEmit, AttentionFlashDecoding) {
  struct Case {
    int64_t T, Hq, Hkv, D, Dv, window;
    double softcap;
    bool sinks;
    DType cache;
    int64_t ctx = 1000;
    bool ringFits = true; ///< two stages of the staged form fit beside the blocks per SM the rule picks
  };
  Case cases[] = {
      {1, 8, 2, 64, 64, 0, 0, false, DType::F16},
      {1, 32, 8, 128, 128, 0, 0, false, DType::F16, 8192}, // W-dense
      {1, 32, 4, 128, 128, 0, 0, false, DType::F16, 8192}, // W-moe: one block an SM
      {1, 8, 8, 128, 128, 0, 0, false, DType::F16},        // group 1
      {1, 16, 2, 128, 128, 0, 0, false, DType::F16},       // group 8
      {1, 24, 2, 64, 64, 0, 0, false, DType::F16},         // group 12: two head chunks of 6
      {1, 8, 2, 256, 256, 0, 0, false, DType::BF16},
      {5, 8, 2, 128, 128, 16, 0, true, DType::F16},
      {3, 8, 2, 64, 64, 0, 30.0, false, DType::F32},
      {1, 8, 2, 128, 128, 0, 0, true, DType::F32},
      {2, 4, 1, 96, 80, 0, 0, false, DType::F16},  // Dv != D
      {1, 4, 2, 40, 40, 0, 0, false, DType::BF16}, // D not a multiple of 32
      {1, 4, 2, 36, 36, 0, 0, false, DType::F16},  // ... nor of 8: element loads
      {1, 4, 1, 512, 512, 0, 0, false, DType::F16}, // slower path: dv slices
      // a stage of 8 keys of f32 rows this long is 56 KiB: beside two
      // blocks an SM (8 kv heads; or 1000 rows, 16 splits) register loads;
      // at one (a single kv head over 8192 rows: 128 splits x 4 heads, past
      // the merge's 264) two stages fit
      {1, 32, 8, 320, 288, 0, 0, false, DType::F32, 1000, false},
      {1, 4, 1, 320, 288, 0, 0, false, DType::F32, 1000, false},
      {1, 4, 1, 320, 288, 0, 0, false, DType::F32, 8192, true},
  };
  // The load forms: the default rule (the ring where rows take 16-byte
  // copies and the cache has more than 4096 rows), the ring forced (2
  // stages) and register loads only.
  for (int stages : {-1, 2, 0})
  for (const Case &c : cases) {
    SCOPED_TRACE(llvm::formatv("T={0} Hq={1} Hkv={2} D={3} Dv={4} {5} stages {6}", c.T, c.Hq,
                               c.Hkv, c.D, c.Dv, std::string(dtypeName(c.cache)), stages)
                     .str());
    EmitOptions o;
    o.attentionStages = stages;
    o.attentionCluster = 0; // the splits merged in global memory (the cluster form: below)
    auto ls = emitAll([&](Builder &b) {
      auto q = b.input("q", T(DType::F32, {c.T, c.Hq, c.D}));
      auto k = b.state("k_cache.0", TensorType(c.cache, {c.ctx, c.Hkv, c.D}));
      auto v = b.state("v_cache.0", TensorType(c.cache, {c.ctx, c.Hkv, c.Dv}));
      auto pos = b.input("positions", T(DType::I32, {c.T}));
      std::optional<ValueId> sinks;
      if (c.sinks)
        sinks = b.weight("sinks", T(DType::F32, {c.Hq}));
      b.result(b.attention(q, k, v, pos, {0.125, c.window, c.softcap}, sinks));
    }, {}, o);
    ASSERT_EQ(ls.size(), 1u);
    const KernelSpec &attn = kernel(ls, 0);
    int64_t G = c.Hq / c.Hkv, HC = (G + 7) / 8, GB = (G + HC - 1) / HC;
    bool vec = c.D % 8 == 0 && c.Dv % 8 == 0;
    // The staged form: a ring of 2-4 stages in dynamic shared memory that
    // leaves room for two blocks per SM — or one, where two would split so
    // finely that the merge reads more than 264 (split, head) partials (W-moe
    // at T = 1: 66 x 8); else no dynamic shared memory.
    bool staged = vec && c.ringFits && (stages > 0 || (stages < 0 && c.ctx > 4096));
    int64_t two = std::min<int64_t>({256, (264 + c.T * c.Hkv * HC - 1) / (c.T * c.Hkv * HC),
                                     (c.ctx + 63) / 64});
    unsigned blocksPerSm = staged ? (two * GB > 264 ? 1 : 2) : 4;
    if (staged) {
      EXPECT_FALSE(contains(attn, ", kStages = 0, kURegs"));
      EXPECT_GT(attn.sharedBytes, 0u);
      EXPECT_LE(attn.sharedBytes, (blocksPerSm == 1 ? 200u : 100u) * 1024);
      if (c.ctx == 8192 && c.Hkv == 4 && stages < 0) { // W-moe: one block an SM
        EXPECT_TRUE(contains(attn, "kSmax = 33, "));
        EXPECT_TRUE(contains(attn, "kStages = 4, "));
      }
    } else {
      EXPECT_TRUE(contains(attn, ", kStages = 0, kURegs"));
      EXPECT_EQ(attn.sharedBytes, 0u);
    }
    // One block per (split, kv head × head chunk, token).
    unsigned S = attn.grid[0];
    EXPECT_GE(S, 1u);
    EXPECT_EQ(attn.grid[1], unsigned(c.Hkv * HC));
    EXPECT_EQ(attn.grid[2], unsigned(c.T));
    EXPECT_EQ(attn.block[0], 128u);
    EXPECT_LE(S, (c.ctx + 7) / 8);
    // Enough blocks for 132 SMs × the blocks per SM at a full cache, unless
    // the cache is short.
    if (c.ctx >= 8192) {
      // (or a split of at least 64 keys each: the register form's round)
      EXPECT_GE(uint64_t(S) * attn.grid[1] * attn.grid[2],
                std::min<uint64_t>(132u * blocksPerSm, c.ctx / 64 * attn.grid[1] * attn.grid[2]));
    }
    EXPECT_TRUE(contains(attn, llvm::formatv("kGB = {0}, kHC = {1}, kSmax = {2}", GB, HC, S).str()));
    // Counters: one per (token, head block); scratch: m[8], l[8], o[GB][Dv
    // rounded to 4] per split.
    // (No tree merge by default: AttentionTreeMerge below.)
    EXPECT_TRUE(contains(attn, "int kGroup = 0, kGroupSlots = 0, kMergeUnroll"));
    uint64_t counters = uint64_t(c.T * c.Hkv * HC);
    uint64_t part = 16 + GB * ((c.Dv + 3) / 4 * 4);
    EXPECT_EQ(attn.counterBytes, counters * 4);
    EXPECT_EQ(attn.scratchBytes, counters * S * part * 4);
    std::vector<Param> params = {Param::result(0),  Param::scratch(),  Param::counters(),
                                 Param::operand(0), Param::operand(1), Param::operand(2),
                                 Param::operand(3)};
    if (c.sinks)
      params.push_back(Param::operand(4));
    EXPECT_EQ(attn.params, params);
    EXPECT_TRUE(contains(attn, "window = " + std::to_string(c.window) + "LL"));
    EXPECT_TRUE(contains(attn, std::string("kSoftcap = ") + (c.softcap > 0 ? "true" : "false")));
    EXPECT_TRUE(contains(attn, std::string("kVecK = ") + (vec ? "true" : "false")));
    EXPECT_TRUE(contains(attn, "fg::attention<Cfg>("));
  }
}

/// Decode attention's tree merge (EmitOptions::attentionMergeGroup, off by
/// default): W-moe's shape at 8192 rows, groups of 9 of its 66 splits (two
/// blocks an SM asked for: the ring) and the rule's ⌈√66⌉ = 9 — 8 group slots after the
/// split slots and 8 group counters after the (token, kv head) ones; none
/// with one group or fewer (a group of 66), nor with the cluster form; and
/// the tree's kernel compiles (NVRTC).
TEST(CudaEmit, AttentionTreeMerge) {
  EXPECT_EQ(EmitOptions{}.attentionMergeGroup, 0);
  auto attn = [](int group, int64_t ctx) {
    EmitOptions o;
    o.attentionMergeGroup = group;
    o.attentionBlocksPerSm = 2; // (66 splits; the rule takes one block an SM, 33, here)
    auto ls = emitAll([&](Builder &b) {
      auto q = b.input("q", T(DType::F32, {1, 32, 128}));
      auto k = b.state("k_cache.0", TensorType(DType::F16, {ctx, 4, 128}));
      auto v = b.state("v_cache.0", TensorType(DType::F16, {ctx, 4, 128}));
      b.result(b.attention(q, k, v, b.input("positions", T(DType::I32, {1})), {0.1, 0, 0}));
    }, {}, o);
    return ls.empty() ? KernelSpec{} : kernel(ls, 0);
  };
  const uint64_t part = 16 + 8 * 128;
  for (int group : {9, -1}) {
    const KernelSpec k = attn(group, 8192);
    EXPECT_TRUE(contains(k, "kSmax = 66, ")) << group;
    EXPECT_TRUE(contains(k, "int kGroup = 9, kGroupSlots = 8, kMergeUnroll = 16;")) << group;
    EXPECT_EQ(k.counterBytes, 4u * (1 + 8) * 4) << group;
    EXPECT_EQ(k.scratchBytes, 4u * (66 + 8) * part * 4) << group;
  }
  const KernelSpec one = attn(66, 8192);
  EXPECT_TRUE(contains(one, "int kGroup = 0, kGroupSlots = 0, kMergeUnroll"));
  EXPECT_EQ(one.counterBytes, 4u * 4);
  // (1000 rows: the cluster form, which merges through shared memory.)
  EXPECT_TRUE(contains(attn(4, 1000), "int kGroup = 0, kGroupSlots = 0, kMergeUnroll"));
  EXPECT_TRUE(contains(attn(4, 1000), "kCluster = 8;"));
  // (A group of 2 over 66 splits: 33 slots; kept for the GPU test's forms.)
  const KernelSpec two = attn(2, 8192);
  EXPECT_TRUE(contains(two, "int kGroup = 2, kGroupSlots = 33, kMergeUnroll"));
  EXPECT_EQ(two.counterBytes, 4u * (1 + 33) * 4);
}

/// Decode attention's cluster form (EmitOptions::attentionCluster): the
/// entry carries the cluster shape, the grid's x is one cluster (as many
/// blocks as the cache's rows need at one round of the warps, at least the
/// group's heads, at most the option), the block the option's warps; it
/// compiles (NVRTC: the cluster barriers and remote stores) at 8 warps and
/// 4. On by default (clusters of 8, 8 warps); never with the ring (caches
/// past 4096 rows), with a cluster smaller than the heads a block merges,
/// or where its static shared memory would pass 48 KiB (D = 512).
TEST(CudaEmit, AttentionClusterForm) {
  EXPECT_EQ(EmitOptions{}.attentionCluster, 8);
  EXPECT_EQ(EmitOptions{}.attentionClusterWarps, 8);
  auto attn = [](int cluster, int warps, int64_t ctx, int64_t Hq, int64_t D) {
    EmitOptions o;
    o.attentionCluster = cluster;
    o.attentionClusterWarps = warps;
    auto ls = emitAll([&](Builder &b) {
      auto q = b.input("q", T(DType::F32, {1, Hq, D}));
      auto k = b.state("k_cache.0", TensorType(DType::F16, {ctx, 8, D}));
      auto v = b.state("v_cache.0", TensorType(DType::F16, {ctx, 8, D}));
      b.result(b.attention(q, k, v, b.input("positions", T(DType::I32, {1})), {0.1, 0, 0}));
    }, {}, o);
    return ls.empty() ? KernelSpec{} : kernel(ls, 0);
  };
  // W-dense's shape (G = 4) at 2048 rows: 8 warps x 24-key tiles (the rule:
  // 3 steps of 8 loads a lane) = 192 keys a round, so 11 blocks are wanted
  // and the option's 8 taken.
  const KernelSpec c8 = attn(8, 8, 2048, 32, 128);
  EXPECT_TRUE(contains(c8, "__cluster_dims__(8, 1, 1)"));
  EXPECT_TRUE(contains(c8, "kSmax = 8, "));
  EXPECT_TRUE(contains(c8, "kCluster = 8;"));
  EXPECT_TRUE(contains(c8, "static constexpr int kW = 8, kU = 3,"));
  EXPECT_TRUE(contains(c8, "kMinChunk = 192LL"));
  // The rule's steps at D = 64: 3 (4 loads a step; the split form takes 4).
  EXPECT_TRUE(contains(attn(8, 8, 2048, 32, 64), "static constexpr int kW = 8, kU = 3,"));
  EXPECT_TRUE(contains(attn(0, 8, 2048, 32, 64), "static constexpr int kW = 4, kU = 4,"));
  EXPECT_EQ(c8.grid[0], 8u);
  EXPECT_EQ(c8.grid[1], 8u);
  EXPECT_EQ(c8.block[0], 256u);
  // 4 warps, G = 8 (8 heads a block: a cluster of 8 at least) at 300 rows:
  // 300 / 64 = 5 blocks wanted, 8 taken.
  const KernelSpec c4 = attn(8, 4, 300, 64, 128);
  EXPECT_TRUE(contains(c4, "kCluster = 8;"));
  EXPECT_EQ(c4.block[0], 128u);
  EXPECT_EQ(c4.grid[0], 8u);
  {
    // Tiles of 2 steps forced (EmitOptions::attentionClusterSteps): 8 x 16
    // keys a round; at 2048 rows still 8 blocks.
    EmitOptions o;
    o.attentionClusterSteps = 2;
    auto ls = emitAll([&](Builder &b) {
      auto q = b.input("q", T(DType::F32, {1, 32, 128}));
      auto k = b.state("k_cache.0", TensorType(DType::F16, {2048, 8, 128}));
      auto v = b.state("v_cache.0", TensorType(DType::F16, {2048, 8, 128}));
      b.result(b.attention(q, k, v, b.input("positions", T(DType::I32, {1})), {0.1, 0, 0}));
    }, {}, o);
    ASSERT_EQ(ls.size(), 1u);
    EXPECT_TRUE(contains(kernel(ls, 0), "static constexpr int kW = 8, kU = 2,"));
    EXPECT_TRUE(contains(kernel(ls, 0), "kMinChunk = 128LL"));
    EXPECT_TRUE(contains(kernel(ls, 0), "kCluster = 8;"));
  }
  // Fewer rows than a round: clusters of the group's 4 heads, not 1.
  EXPECT_TRUE(contains(attn(8, 8, 64, 32, 128), "kCluster = 4;"));
  // Off: at 0, a cluster of 4 for a block of 8 heads, the ring, D = 512,
  // and a long cache without the ring (here: rows not 16-byte aligned).
  auto unaligned = [](int64_t ctx) {
    auto ls = emitAll([&](Builder &b) {
      auto q = b.input("q", T(DType::F32, {1, 32, 100}));
      auto k = b.state("k_cache.0", TensorType(DType::F16, {ctx, 8, 100}));
      auto v = b.state("v_cache.0", TensorType(DType::F16, {ctx, 8, 100}));
      b.result(b.attention(q, k, v, b.input("positions", T(DType::I32, {1})), {0.1, 0, 0}));
    });
    return ls.empty() ? KernelSpec{} : kernel(ls, 0);
  };
  EXPECT_TRUE(contains(unaligned(4096), "kCluster = 8;"));
  EXPECT_EQ(archNumber("sm_90"), 90);
  EXPECT_EQ(archNumber("sm_90a"), 90);
  EXPECT_EQ(archNumber("compute_89"), 89);
  EXPECT_EQ(archNumber("sm_100"), 100);
  EXPECT_EQ(archNumber("gfx90a"), 0);
  {
    // Clusters are sm_90's: the split form for sm_89.
    EmitOptions o;
    o.arch = "sm_89";
    auto ls = emitAll([&](Builder &b) {
      auto q = b.input("q", T(DType::F32, {1, 32, 128}));
      auto k = b.state("k_cache.0", TensorType(DType::F16, {2048, 8, 128}));
      auto v = b.state("v_cache.0", TensorType(DType::F16, {2048, 8, 128}));
      b.result(b.attention(q, k, v, b.input("positions", T(DType::I32, {1})), {0.1, 0, 0}));
    }, {}, o);
    ASSERT_EQ(ls.size(), 1u);
    EXPECT_TRUE(contains(kernel(ls, 0), "kCluster = 0;"));
  }
  for (const KernelSpec &k :
       {attn(0, 8, 2048, 32, 128), attn(4, 8, 2048, 64, 128), attn(8, 8, 8192, 32, 128),
        attn(8, 8, 2048, 32, 512), unaligned(4097)}) {
    EXPECT_TRUE(contains(k, "kCluster = 0;"));
    EXPECT_FALSE(contains(k, "__cluster_dims__("));
    EXPECT_EQ(k.block[0], 128u);
  }
}

/// The programmatic-launch prologue (EmitOptions::pdlPrefetchBytes): dense
/// GEMVs prefetch the first bytes of their first tiles' weight rows, decode
/// attention the first keys of its splits, both before fg_pdl_begin; the
/// budget is spread over the blocks and nothing is prefetched without one,
/// by expert-indexed GEMVs, or past a row.
TEST(CudaEmit, PdlPrefetchPrologue) {
  auto gemv = [](int64_t budget, bool expert, int64_t maxWeight = -1) {
    EmitOptions o;
    o.pdlPrefetchBytes = budget;
    o.pdlPrefetchMaxWeightBytes = maxWeight;
    auto ls = emitAll([&](Builder &b) {
      if (expert) {
        auto x = b.input("x", T(DType::F32, {1, 1, 256}));
        auto w = b.weight("w", T(DType::F16, {4, 300, 256}));
        b.result(b.matmulId(x, w, b.input("ids", T(DType::I32, {1, 1}))));
      } else {
        auto x = b.input("x", T(DType::F32, {1, 256}));
        b.result(b.matmul(x, b.weight("w", T(DType::F16, {300, 256}))));
      }
    }, {}, o);
    return ls.empty() ? KernelSpec{} : kernel(ls, 0);
  };
  // 300 rows of 512 bytes, 4 rows a block at one row of x: 75 tiles, all
  // of them among the first wave. 1 MiB over 75 x 4 rows is 3495 bytes a
  // row: the whole row; 64 KiB is 218: one line.
  const KernelSpec big = gemv(1 << 20, false), small = gemv(64 << 10, false);
  EXPECT_TRUE(contains(big, "kPfBlocks = 75LL, kPfBytes = 512LL"));
  EXPECT_TRUE(contains(small, "kPfBlocks = 75LL, kPfBytes = 128LL"));
  EXPECT_TRUE(contains(gemv(0, false), "kPfBlocks = 0LL, kPfBytes = 0LL"));
  EXPECT_TRUE(contains(gemv(1 << 20, true), "kPfBlocks = 0LL, kPfBytes = 0LL"));
  // The weight limit: 300 x 512 = 153600 bytes of weights.
  EXPECT_TRUE(contains(gemv(1 << 20, false, 153600), "kPfBlocks = 75LL, kPfBytes = 512LL"));
  EXPECT_TRUE(contains(gemv(1 << 20, false, 153599), "kPfBlocks = 0LL, kPfBytes = 0LL"));
  const std::string &src = big.source;
  size_t pro = src.find("fg::gemvPrefetch<Cfg>("), wait = src.find("fg_pdl_begin();", pro);
  EXPECT_NE(pro, std::string::npos);
  EXPECT_LT(pro, wait);
  EXPECT_LT(wait, src.find("fg::gemv<Cfg>("));

  auto attn = [](int64_t budget, int64_t D, bool on = true) {
    EmitOptions o;
    o.pdlPrefetchBytes = budget;
    o.pdlPrefetchAttention = on;
    auto ls = emitAll([&](Builder &b) {
      auto q = b.input("q", T(DType::F32, {1, 32, D}));
      auto k = b.state("k_cache.0", TensorType(DType::F16, {1000, 8, D}));
      auto v = b.state("v_cache.0", TensorType(DType::F16, {1000, 8, D}));
      b.result(b.attention(q, k, v, b.input("positions", T(DType::I32, {1})), {0.1, 0, 0}));
    }, {}, o);
    return ls.empty() ? KernelSpec{} : kernel(ls, 0);
  };
  // Keys a block = budget / (splits x kv heads x tokens x (K + V row bytes
  // in whole 128-byte lines)), in steps of 8.
  for (int64_t D : {64, 80, 128}) {
    const KernelSpec a = attn(4 << 20, D);
    const int64_t line = (2 * D + 127) / 128 * 128;
    const int64_t keys = (4 << 20) / (int64_t(a.grid[0]) * 8 * (2 * line)) / 8 * 8;
    EXPECT_GT(keys, 0);
    EXPECT_TRUE(contains(a, "kPfKeys = " + std::to_string(keys) + "LL")) << keys;
    EXPECT_LT(a.source.find("fg::attentionPrefetch<Cfg>("), a.source.find("fg_pdl_begin();"));
  }
  EXPECT_TRUE(contains(attn(0, 128), "kPfKeys = 0LL"));
  EXPECT_TRUE(contains(attn(4 << 20, 128, false), "kPfKeys = 0LL"));
}

/// Decode attention's early loads (EmitOptions::attentionEarlyLoads): on for
/// one token in the register form where each cache is an argument (every
/// row stable) or one set_rows into an argument at the attention's own
/// positions (that row loaded again after the wait); off for several
/// tokens, other rows, a cache written twice, the staged form and the option.
TEST(CudaEmit, AttentionEarlyLoads) {
  enum class KW { Arg, AtPos, OtherRows, Twice };
  auto attn = [](int64_t tokens, KW kw, KW vw, int64_t ctx = 1000, bool on = true) {
    EmitOptions o;
    o.attentionEarlyLoads = on;
    auto ls = emitAll([&](Builder &b) {
      auto q = b.input("q", T(DType::F32, {tokens, 32, 128}));
      auto pos = b.input("positions", T(DType::I32, {tokens}));
      auto rows = b.input("rows", T(DType::I32, {tokens}));
      auto write = [&](const char *name, KW w) {
        ValueId c = b.state(name, TensorType(DType::F16, {ctx, 8, 128}));
        auto x = b.input(std::string(name) + ".new", T(DType::F32, {tokens, 8, 128}));
        if (w == KW::AtPos)
          c = b.setRows(c, x, pos);
        else if (w == KW::OtherRows)
          c = b.setRows(c, x, rows);
        else if (w == KW::Twice)
          c = b.setRows(b.setRows(c, x, rows), x, pos);
        return c;
      };
      ValueId k = write("k_cache.0", kw), v = write("v_cache.0", vw);
      b.result(b.attention(q, k, v, pos, {0.1, 0, 0}));
    }, {}, o);
    return ls.empty() ? std::string() : kernel(ls, 0).source;
  };
  auto flags = [](bool early, bool fk, bool fv) {
    return std::string("kEarly = ") + (early ? "true" : "false") +
           ", kFreshK = " + (fk ? "true" : "false") + ", kFreshV = " + (fv ? "true" : "false");
  };
  EXPECT_NE(attn(1, KW::Arg, KW::Arg).find(flags(true, false, false)), std::string::npos);
  EXPECT_NE(attn(1, KW::AtPos, KW::AtPos).find(flags(true, true, true)), std::string::npos);
  EXPECT_NE(attn(1, KW::AtPos, KW::Arg).find(flags(true, true, false)), std::string::npos);
  EXPECT_NE(attn(1, KW::AtPos, KW::OtherRows).find("kEarly = false"), std::string::npos);
  EXPECT_NE(attn(1, KW::Twice, KW::AtPos).find("kEarly = false"), std::string::npos);
  EXPECT_NE(attn(2, KW::AtPos, KW::AtPos).find("kEarly = false"), std::string::npos);
  EXPECT_NE(attn(1, KW::AtPos, KW::AtPos, 1000, false).find("kEarly = false"), std::string::npos);
  // The staged form (caches of more than 4096 rows) keeps its ring.
  const std::string staged = attn(1, KW::AtPos, KW::AtPos, 8192);
  EXPECT_EQ(staged.find("kStages = 0, kURegs"), std::string::npos);
  EXPECT_NE(attn(1, KW::Arg, KW::Arg).find("kStages = 0, kURegs"), std::string::npos);
  EXPECT_NE(staged.find("kEarly = false"), std::string::npos);
  // The prologue is one statement before the wait and hands its registers over.
  const std::string src = attn(1, KW::AtPos, KW::AtPos);
  size_t pro = src.find("fg::AttnEarly<Cfg> first = fg::attentionPrefetch<Cfg>(");
  ASSERT_NE(pro, std::string::npos);
  EXPECT_LT(pro, src.find("fg_pdl_begin();", pro));
  EXPECT_NE(src.find(", first);", src.find("fg_pdl_begin();", pro)), std::string::npos);
}

/// EmitOptions::attentionQFirst and attentionClusterAsync (the latter in the
/// cluster form only) compile on every decode form (cluster and split, D =
/// 64 / 128 / 256 / 80, a group of 12 in two head chunks, f32 and bf16
/// caches, the staged ring) and say so in the Cfg; on by default since the
/// twenty-fifth session, and the default kernel says so.
TEST(CudaEmit, AttentionQFirstCompiles) {
  EXPECT_TRUE(EmitOptions{}.attentionQFirst);
  EXPECT_TRUE(EmitOptions{}.attentionClusterAsync);
  struct Shape {
    int64_t Hq, Hkv, D, ctx;
    DType cache;
    int cluster;
  };
  for (const Shape &sh : {Shape{32, 8, 128, 4096, DType::F16, 8}, Shape{8, 8, 64, 4096, DType::F16, 8},
                          Shape{32, 8, 128, 4096, DType::F16, 0}, Shape{16, 2, 256, 2048, DType::BF16, 8},
                          Shape{24, 2, 80, 1000, DType::F32, 8}, Shape{32, 8, 128, 8192, DType::F16, 8}}) {
    SCOPED_TRACE(llvm::formatv("Hq {0} Hkv {1} D {2} ctx {3} cluster {4}", sh.Hq, sh.Hkv, sh.D,
                               sh.ctx, sh.cluster)
                     .str());
    EmitOptions o;
    o.attentionQFirst = true;
    o.attentionClusterAsync = true;
    o.attentionCluster = sh.cluster;
    auto ls = emitAll([&](Builder &b) {
      auto q = b.input("q", T(DType::F32, {1, sh.Hq, sh.D}));
      auto k = b.state("k_cache.0", TensorType(sh.cache, {sh.ctx, sh.Hkv, sh.D}));
      auto v = b.state("v_cache.0", TensorType(sh.cache, {sh.ctx, sh.Hkv, sh.D}));
      b.result(b.attention(q, k, v, b.input("positions", T(DType::I32, {1})), {0.1, 0, 0}));
    }, {}, o);
    ASSERT_EQ(ls.size(), 1u);
    const bool cluster = contains(kernel(ls, 0), "kCluster = 8;");
    EXPECT_TRUE(contains(kernel(ls, 0), std::string("static constexpr bool kQFirst = true, "
                                                    "kClusterAsync = ") +
                                            (cluster ? "true;" : "false;")));
  }
}

/// EmitOptions::pdlTriggerBeforeAttention: the kernels a one-token decode
/// attention reads (q's rope through a view, the caches' set_rows) trigger
/// before their wait and take another name; the GEMV before them, the
/// attention itself and a two-token attention's producers do not.
TEST(CudaEmit, TriggerFirstBeforeDecodeAttention) {
  auto build = [](Function &fn, int64_t tokens) {
    Builder b(fn);
    auto pos = b.input("positions", T(DType::I32, {tokens}));
    auto x = b.input("x", T(DType::F32, {tokens, 256}));
    auto q = b.reshape(b.matmul(x, b.weight("wq", T(DType::F16, {256, 256}))), {tokens, 4, 64});
    auto qr = b.rope(q, pos, Builder::RopeParams{});
    auto k = b.state("k_cache.0", TensorType(DType::F16, {512, 2, 64}));
    auto v = b.state("v_cache.0", TensorType(DType::F16, {512, 2, 64}));
    auto kn = b.input("k_new", T(DType::F32, {tokens, 2, 64}));
    b.result(b.attention(qr, b.setRows(k, kn, pos), b.setRows(v, kn, pos), pos, {0.125, 0, 0}));
    return b.finish();
  };
  for (int64_t tokens : {1, 2}) {
    SCOPED_TRACE(tokens);
    Function fn("t");
    ASSERT_TRUE(ok(build(fn, tokens)));
    auto layouts = cuda::computeLayouts(fn);
    ASSERT_TRUE(bool(layouts)) << llvm::toString(layouts.takeError());
    for (bool on : {false, true}) {
      EmitOptions o;
      o.pdlTriggerBeforeAttention = on;
      auto code = cuda::emitNodes(fn, *layouts, o);
      ASSERT_TRUE(bool(code)) << llvm::toString(code.takeError());
      for (NodeId id = 0; id < fn.numNodes(); ++id) {
        const Node &n = fn.node(id);
        bool feeds = on && tokens == 1 && (n.kind == OpKind::Rope || n.kind == OpKind::SetRows);
        for (const Launch &l : (*code)[id].launches) {
          const auto *k = std::get_if<KernelSpec>(&l);
          if (k == nullptr)
            continue;
          SCOPED_TRACE(k->name);
          EXPECT_EQ(llvm::StringRef(k->name).endswith("_tf"), feeds);
          EXPECT_EQ(k->source.find("\n  fg_pdl_begin_trigger_first();\n") != std::string::npos,
                    feeds);
          EXPECT_EQ(k->source.rfind("\n  fg_pdl_begin();\n") == std::string::npos, feeds);
          if (feeds)
            checkAndCompile(*k, n.operands.size());
        }
      }
    }
  }
}

/// The splits a grid holds shrink as tokens × heads fill the GPU; a strided
/// q and caches whose rows are not 16-byte aligned take element loads.
TEST(CudaEmit, AttentionSplitsAndLayouts) {
  auto build = [](int64_t tokens) {
    return [tokens](Builder &b) {
      auto q = b.input("q", T(DType::F32, {tokens, 32, 128}));
      auto k = b.state("k_cache.0", TensorType(DType::F16, {32768, 8, 128}));
      auto v = b.state("v_cache.0", TensorType(DType::F16, {32768, 8, 128}));
      b.result(b.attention(q, k, v, b.input("positions", T(DType::I32, {tokens})), {0.1, 0, 0}));
    };
  };
  EmitOptions decodeOnly; // 64 tokens would take the prefill kernel
  decodeOnly.attentionPrefillMinTokens = 1 << 30;
  // The staged form (default) sizes the grid for 2 blocks per SM, the
  // register-load form for 4.
  unsigned s1 = kernel(emitAll(build(1)), 0).grid[0];
  unsigned s8 = kernel(emitAll(build(8)), 0).grid[0];
  unsigned s64 = kernel(emitAll(build(64), {}, decodeOnly), 0).grid[0];
  EXPECT_EQ(s1, 33u); // 132 SMs × 2 blocks / 8 kv heads
  EXPECT_EQ(s8, 5u);
  EXPECT_EQ(s64, 1u);
  EmitOptions registers;
  registers.attentionStages = 0;
  EXPECT_EQ(kernel(emitAll(build(1), {}, registers), 0).grid[0], 66u); // 132 × 4 / 8
  EXPECT_EQ(kernel(emitAll(build(8), {}, registers), 0).grid[0], 9u);
  registers.attentionPrefillMinTokens = 1 << 30;
  EXPECT_EQ(kernel(emitAll(build(64), {}, registers), 0).grid[0], 2u);

  // q read through a transposed view, k/v rows at an odd element offset.
  Layout q{{1, 8, 64}, {1, 1, 8}, 0};
  Layout kv{{100, 2, 64}, {128, 64, 1}, 3};
  Layout pos = Layout::contiguous({1});
  auto ls = emitAll(
      [](Builder &b) {
        auto qv = b.input("q", T(DType::F32, {1, 8, 64}));
        auto k = b.state("k_cache.0", TensorType(DType::F16, {100, 2, 64}));
        auto v = b.state("v_cache.0", TensorType(DType::F16, {100, 2, 64}));
        b.result(b.attention(qv, k, v, b.input("positions", T(DType::I32, {1})), {0.1, 0, 0}));
      },
      {q, kv, kv, pos});
  ASSERT_EQ(ls.size(), 1u);
  EXPECT_TRUE(contains(kernel(ls, 0), "kVecK = false, kVecV = false"));
  EXPECT_TRUE(contains(kernel(ls, 0), "q_sd = 8LL"));
  EXPECT_TRUE(contains(kernel(ls, 0), "k_off = 3LL"));
}

/// Prefill chunks (T >= 9 queries) with 16-bit caches and head dims that are
/// multiples of 16 up to 128 take the flash-attention prefill kernel: one
/// block per (64 queries, query head), no scratch, no counters; every variant
/// compiles. Eight tokens, f32 caches and other head dims keep flash decoding.
TEST(CudaEmit, AttentionPrefillKernel) {
  struct Case {
    int64_t T, Hq, Hkv, D, Dv, window;
    double softcap;
    bool sinks;
    DType cache;
    bool prefill; // the prefill kernel is expected
  };
  Case cases[] = {
      {64, 32, 8, 128, 128, 0, 0, false, DType::F16, true},   // W-dense, GQA 4
      {65, 8, 2, 64, 64, 16, 0, true, DType::BF16, true},     // window, sinks
      {511, 4, 4, 128, 128, 0, 30.0, false, DType::F16, true}, // softcap, group 1
      {9, 16, 2, 96, 80, 0, 0, false, DType::F16, true},      // Dv != D
      {70, 8, 2, 80, 48, 0, 0, false, DType::BF16, true},     // an odd number of k16 steps
      {2048, 32, 4, 128, 128, 0, 0, false, DType::BF16, true}, // W-moe
      {8, 32, 8, 128, 128, 0, 0, false, DType::F16, false},   // decode-sized
      {64, 8, 2, 128, 128, 0, 0, false, DType::F32, false},   // f32 cache
      {64, 8, 2, 256, 256, 0, 0, false, DType::F16, false},   // head dim 256
      {64, 8, 2, 72, 72, 0, 0, false, DType::F16, false},     // not a multiple of 16
  };
  for (const Case &c : cases) {
    SCOPED_TRACE(llvm::formatv("T={0} Hq={1} Hkv={2} D={3} Dv={4} {5}", c.T, c.Hq, c.Hkv, c.D,
                               c.Dv, std::string(dtypeName(c.cache)))
                     .str());
    auto ls = emitAll([&](Builder &b) {
      auto q = b.input("q", T(DType::F32, {c.T, c.Hq, c.D}));
      auto k = b.state("k_cache.0", TensorType(c.cache, {4096, c.Hkv, c.D}));
      auto v = b.state("v_cache.0", TensorType(c.cache, {4096, c.Hkv, c.Dv}));
      auto pos = b.input("positions", T(DType::I32, {c.T}));
      std::optional<ValueId> sinks;
      if (c.sinks)
        sinks = b.weight("sinks", T(DType::F32, {c.Hq}));
      b.result(b.attention(q, k, v, pos, {0.125, c.window, c.softcap}, sinks));
    });
    ASSERT_EQ(ls.size(), 1u);
    const KernelSpec &attn = kernel(ls, 0);
    EXPECT_EQ(contains(attn, "fg::flashAttention<Cfg>("), c.prefill);
    EXPECT_EQ(contains(attn, "fg::attention<Cfg>("), !c.prefill);
    if (!c.prefill)
      continue;
    EXPECT_EQ(attn.grid[0], unsigned((c.T + 63) / 64));
    EXPECT_EQ(attn.grid[1], unsigned(c.Hq));
    EXPECT_EQ(attn.grid[2], 1u);
    EXPECT_EQ(attn.block[0], 128u);
    EXPECT_EQ(attn.scratchBytes, 0u);
    EXPECT_EQ(attn.counterBytes, 0u);
    // Two stages of 64-row K and V tiles, rows padded by 8 elements.
    EXPECT_EQ(attn.sharedBytes, unsigned(2 * 2 * 64 * ((c.D + 8) + (c.Dv + 8))));
    EXPECT_TRUE(contains(attn, "S = 2;"));
    std::vector<Param> params = {Param::result(0), Param::operand(0), Param::operand(1),
                                 Param::operand(2), Param::operand(3)};
    if (c.sinks)
      params.push_back(Param::operand(4));
    EXPECT_EQ(attn.params, params);
    EXPECT_TRUE(contains(attn, "G = " + std::to_string(c.Hq / c.Hkv) + "LL"));
    EXPECT_TRUE(contains(attn, "window = " + std::to_string(c.window) + "LL"));
    EXPECT_TRUE(contains(attn, std::string("kSinks = ") + (c.sinks ? "true" : "false")));
    EXPECT_TRUE(contains(attn, std::string("kSoftcap = ") + (c.softcap > 0 ? "true" : "false")));
  }

  // Both forms of q and P (EmitOptions::attentionPrefillHalf) and both
  // orders of S's mmas (attentionPrefillKsOuter) compile for both cache
  // types.
  for (DType cache : {DType::F16, DType::BF16})
    for (auto [half, ksOuter] : {std::pair{false, false}, {true, false}, {false, true}, {true, true}}) {
      EmitOptions o;
      o.attentionPrefillHalf = half;
      o.attentionPrefillKsOuter = ksOuter;
      auto hs = emitAll(
          [&](Builder &b) {
            auto q = b.input("q", T(DType::F32, {65, 8, 128}));
            auto k = b.state("k_cache.0", TensorType(cache, {4096, 2, 128}));
            auto v = b.state("v_cache.0", TensorType(cache, {4096, 2, 128}));
            auto pos = b.input("positions", T(DType::I32, {65}));
            b.result(b.attention(q, k, v, pos, {0.125, 0, 0.0}, std::nullopt));
          },
          {}, o);
      ASSERT_EQ(hs.size(), 1u);
      EXPECT_TRUE(contains(kernel(hs, 0), std::string("kHalf = ") + (half ? "true" : "false")));
      EXPECT_TRUE(
          contains(kernel(hs, 0), std::string("kKsOuter = ") + (ksOuter ? "true" : "false")));
    }

  // Three stages, K and V waited for apart, 8 warps a block (128 queries):
  // each compiles, with its grid and shared memory; split waits need
  // stages, so one stage keeps one wait.
  struct Form {
    int stages, warps;
    bool split;
    bool splitOn; // kSplitWait expected
  };
  for (DType cache : {DType::F16, DType::BF16})
    for (Form f : {Form{3, 4, false, false}, Form{2, 4, true, true}, Form{3, 8, true, true},
                   Form{1, 4, true, false}, Form{2, 8, false, false}}) {
      SCOPED_TRACE(llvm::formatv("stages {0} warps {1} split {2}", f.stages, f.warps, f.split).str());
      EmitOptions o;
      o.attentionPrefillStages = f.stages;
      o.attentionPrefillWarps = f.warps;
      o.attentionPrefillSplitWait = f.split;
      auto hs = emitAll(
          [&](Builder &b) {
            auto q = b.input("q", T(DType::F32, {300, 32, 128}));
            auto k = b.state("k_cache.0", TensorType(cache, {4096, 8, 128}));
            auto v = b.state("v_cache.0", TensorType(cache, {4096, 8, 128}));
            auto pos = b.input("positions", T(DType::I32, {300}));
            b.result(b.attention(q, k, v, pos, {0.125, 0, 0.0}, std::nullopt));
          },
          {}, o);
      ASSERT_EQ(hs.size(), 1u);
      const KernelSpec &a = kernel(hs, 0);
      EXPECT_EQ(a.grid[0], unsigned((300 + 16 * f.warps - 1) / (16 * f.warps)));
      EXPECT_EQ(a.block[0], unsigned(32 * f.warps));
      EXPECT_EQ(a.sharedBytes, unsigned(2 * f.stages * 64 * (136 + 136)));
      EXPECT_TRUE(contains(a, "S = " + std::to_string(f.stages) + ";"));
      EXPECT_TRUE(contains(a, std::string("kSplitWait = ") + (f.splitOn ? "true" : "false")));
    }

  // Warpgroup MMAs (attentionPrefillWgmma, and its deferred O wait):
  // sm_90a (the source starts with the arch-specific marker), no row padding
  // in shared memory; head dims other than D = Dv = 128 (D = Dv = 64
  // measured wrong), or one stage, keep mma.sync.
  struct WgCase {
    int64_t D, Dv;
    int stages;
    bool wg;
    bool defer = false; // the deferred O wait (three stages: kWgDefer)
  };
  for (DType cache : {DType::F16, DType::BF16})
    for (WgCase w : {WgCase{128, 128, 2, true}, WgCase{128, 128, 3, true, true},
                     WgCase{128, 64, 2, false}, WgCase{64, 64, 3, false}, WgCase{80, 64, 2, false},
                     WgCase{128, 96, 2, false}, WgCase{128, 128, 1, false}}) {
      SCOPED_TRACE(llvm::formatv("wgmma D {0} Dv {1} stages {2}", w.D, w.Dv, w.stages).str());
      EmitOptions o;
      o.attentionPrefillWgmma = true;
      o.attentionPrefillWgDefer = w.defer;
      o.attentionPrefillStages = w.stages;
      auto hs = emitAll(
          [&](Builder &b) {
            auto q = b.input("q", T(DType::F32, {100, 8, w.D}));
            auto k = b.state("k_cache.0", TensorType(cache, {4096, 2, w.D}));
            auto v = b.state("v_cache.0", TensorType(cache, {4096, 2, w.Dv}));
            auto pos = b.input("positions", T(DType::I32, {100}));
            b.result(b.attention(q, k, v, pos, {0.125, 0, 0.0}, std::nullopt));
          },
          {}, o);
      ASSERT_EQ(hs.size(), 1u);
      const KernelSpec &a = kernel(hs, 0);
      EXPECT_EQ(contains(a, "kWgmma = true"), w.wg);
      EXPECT_TRUE(contains(a, std::string("kWgDefer = ") + (w.defer ? "true" : "false")));
      EXPECT_EQ(llvm::StringRef(a.source).startswith(kArchSpecificMarker), w.wg);
      EXPECT_EQ(a.sharedBytes, unsigned(2 * w.stages * 64 *
                                        (w.wg ? w.D + w.Dv : (w.D + 8) + (w.Dv + 8))));
    }

  // A strided q and cache rows at an odd element offset: element loads.
  Layout q{{64, 8, 64}, {8, 1, 512}, 0};
  Layout kv{{100, 2, 64}, {128, 64, 1}, 3};
  auto ls = emitAll(
      [](Builder &b) {
        auto qv = b.input("q", T(DType::F32, {64, 8, 64}));
        auto k = b.state("k_cache.0", TensorType(DType::F16, {100, 2, 64}));
        auto v = b.state("v_cache.0", TensorType(DType::F16, {100, 2, 64}));
        b.result(b.attention(qv, k, v, b.input("positions", T(DType::I32, {64})), {0.1, 0, 0}));
      },
      {q, kv, kv, Layout::contiguous({64})});
  ASSERT_EQ(ls.size(), 1u);
  EXPECT_TRUE(contains(kernel(ls, 0), "fg::flashAttention<Cfg>("));
  EXPECT_TRUE(contains(kernel(ls, 0), "kVecK = false, kVecV = false"));
  EXPECT_TRUE(contains(kernel(ls, 0), "q_sd = 512LL"));
  EXPECT_TRUE(contains(kernel(ls, 0), "k_off = 3LL"));
}

/// Expert-indexed matmuls over 9+ tokens with 16-bit weights: a routing
/// launch (one block: counts, tile table, permutation in scratch) and the
/// grouped GEMM (grid: 64-column tiles × the most 64-row tiles — 32 with
/// groupedExpertRows = 32 — the pairs can need); both compile. f32 weights, mixed weight types and 8 tokens keep the
/// expert-indexed GEMV.
TEST(CudaEmit, GroupedExpertGemm) {
  struct Case {
    int64_t T, X, E, N, K, kk;
    DType w;
    bool gated, bias;
  };
  Case cases[] = {
      {64, 1, 8, 100, 72, 2, DType::F16, false, false},  // N, K past the tiles: zero-padded
      {64, 2, 8, 64, 64, 2, DType::BF16, false, false},  // one x row per slot
      {16, 1, 16, 40, 64, 4, DType::F16, true, true},    // gate|up + GLU, biases
      {512, 1, 128, 768, 2048, 8, DType::BF16, true, false}, // W-moe gate|up
      {512, 8, 128, 2048, 768, 8, DType::F16, false, false}, // W-moe down
  };
  // Both tile heights with a 32-wide k-step, and both with a 64-wide one; 256
  // threads a block with 32 rows × 64-wide steps (and asked for with 32 × 32,
  // where a thread would hold half a unit: 128).
  struct Tiling {
    int64_t rows, kt, threads;
  };
  const Tiling tilings[] = {{64, 32, 128}, {32, 32, 128}, {32, 64, 128},
                            {64, 64, 128}, {32, 64, 256}, {32, 32, 256}};
  for (auto [rows, kt, threads] : tilings)
  for (const Case &c : cases) {
    SCOPED_TRACE(llvm::formatv("T={0} E={1} N={2} K={3} kk={4} rows {5} k-step {6} threads {7}",
                               c.T, c.E, c.N, c.K, c.kk, rows, kt, threads)
                     .str());
    EmitOptions o;
    o.groupedExpertRows = rows;
    o.groupedExpertKT = kt;
    o.groupedExpertThreads = threads;
    const unsigned nt = threads == 256 && rows * kt / 8 >= 256 ? 256 : 128;
    auto build = [&](Builder &b) {
      auto x = b.input("x", T(DType::F32, {c.T, c.X, c.K}));
      auto ids = b.input("ids", T(DType::I32, {c.T, c.kk}));
      auto w = b.weight("gate_exps", T(c.w, {c.E, c.N, c.K}));
      if (!c.gated) {
        b.result(b.matmulId(x, w, ids));
        return;
      }
      std::vector<ValueId> ops{x, w, b.weight("up_exps", T(c.w, {c.E, c.N, c.K})), ids};
      if (c.bias) {
        ops.push_back(b.weight("b_gate", T(DType::F32, {c.E, c.N})));
        ops.push_back(b.weight("b_up", T(DType::F32, {c.E, c.N})));
      }
      b.result(b.create(OpKind::FusedGatedMatmulId, ops,
                        {{"kind", Attribute::ofEnum(0)},
                         {"alpha", Attribute::ofFloat(1.702)},
                         {"limit", Attribute::ofFloat(7.0)}}));
    };
    auto ls = emitAll(build, {}, o);
    ASSERT_EQ(ls.size(), 2u);
    const KernelSpec &route = kernel(ls, 0), &gemm = kernel(ls, 1);
    int64_t pairs = c.T * c.kk;
    int64_t tiles = pairs / rows + std::min(c.E + 1, pairs);
    EXPECT_TRUE(contains(gemm, "BM = " + std::to_string(rows) + ","));
    EXPECT_TRUE(contains(gemm, "KT = " + std::to_string(kt) + ","));
    // f32 x rows of whole 16-byte units load as float4 pairs.
    EXPECT_TRUE(contains(gemm, "kXVec = true"));
    EXPECT_TRUE(contains(gemm, "kXHalf = false")); // 16-bit weights: x as hi + lo
    // The rule (groupedExpertRows = 0): 64 rows for one stream, 32 for two.
    EmitOptions rule;
    auto ruled = emitAll(build, {}, rule);
    EXPECT_TRUE(contains(kernel(ruled, 1), c.gated ? "BM = 32," : "BM = 64,"));
    EXPECT_TRUE(contains(route, "fg::moeRoute<Cfg>("));
    EXPECT_EQ(route.block[0], 1024u);
    EXPECT_EQ(route.grid[0] * route.grid[1] * route.grid[2], 1u);
    unsigned idsAt = c.gated ? 3 : 2;
    EXPECT_EQ(route.params, (std::vector<Param>{Param::scratch(), Param::operand(idsAt)}));
    EXPECT_TRUE(contains(gemm, "fg::moeGemm<Cfg>("));
    EXPECT_EQ(gemm.grid[0], unsigned((c.N + 63) / 64));
    EXPECT_EQ(gemm.grid[1], unsigned(tiles));
    EXPECT_EQ(gemm.block[0], nt);
    EXPECT_TRUE(contains(gemm, "NT = " + std::to_string(nt) + ";"));
    std::vector<Param> params = {Param::result(0), Param::scratch(), Param::operand(0),
                                 Param::operand(1)};
    if (c.gated)
      params.push_back(Param::operand(2));
    params.push_back(Param::operand(idsAt));
    if (c.bias) {
      params.push_back(Param::operand(4));
      params.push_back(Param::operand(5));
    }
    EXPECT_EQ(gemm.params, params);
    // Scratch: the tile count (+ 3 ints of padding), 4 ints a tile, one int a pair.
    uint64_t scratch = uint64_t(4 + 4 * tiles + pairs) * 4;
    EXPECT_EQ(route.scratchBytes, scratch);
    EXPECT_EQ(gemm.scratchBytes, scratch);
    EXPECT_TRUE(contains(gemm, "kPermOff = " + std::to_string(4 + 4 * tiles) + "LL"));
    EXPECT_TRUE(contains(gemm, c.gated ? "using Epi = fg::EpiGlu<" : "using Epi = fg::EpiStore"));
  }
  // The GEMV keeps 8 tokens, f32 weights and a mixed pair of weight types.
  auto gemvOnly = [&](int64_t tokens, DType w0, DType w1) {
    return emitAll([&](Builder &b) {
      auto x = b.input("x", T(DType::F32, {tokens, 1, 64}));
      auto ids = b.input("ids", T(DType::I32, {tokens, 2}));
      b.result(b.create(OpKind::FusedGatedMatmulId,
                        {x, b.weight("g", T(w0, {4, 32, 64})), b.weight("u", T(w1, {4, 32, 64})),
                         ids},
                        {{"kind", Attribute::ofEnum(0)},
                         {"alpha", Attribute::ofFloat(1.702)},
                         {"limit", Attribute::ofFloat(7.0)}}));
    });
  };
  for (auto ls : {gemvOnly(8, DType::F16, DType::F16), gemvOnly(64, DType::F32, DType::F32),
                  gemvOnly(64, DType::F16, DType::BF16)}) {
    ASSERT_EQ(ls.size(), 1u);
    EXPECT_TRUE(contains(kernel(ls, 0), "fg::gemv<Cfg>("));
  }
}

TEST(CudaEmit, ViewsEmitNothingAndComposeLayouts) {
  Function fn("v");
  Builder b(fn);
  auto x = b.input("x", T(DType::F32, {2, 3, 4}));
  auto r = b.reshape(x, {6, 4});
  auto p = b.permute(x, {2, 0, 1});
  auto t = b.transpose(x);
  auto v = b.view(x, {3, 2}, {4, 12}, 1);
  b.result(r);
  b.result(p);
  b.result(t);
  b.result(v);
  ASSERT_TRUE(ok(b.finish()));
  Layout in = Layout::contiguous({2, 3, 4});
  EXPECT_EQ(in.strides, (Shape{12, 4, 1}));
  for (size_t n = 0; n < fn.numNodes(); ++n) {
    auto ls = emitKernel(fn, fn.node(n), contiguousLayouts(fn, fn.node(n)));
    ASSERT_TRUE(static_cast<bool>(ls));
    EXPECT_TRUE(ls->empty());
    compiled().covered.insert(fn.node(n).kind);
  }
  EXPECT_EQ(viewLayout(fn.node(0), in)->strides, (Shape{4, 1}));
  EXPECT_EQ(viewLayout(fn.node(1), in)->strides, (Shape{1, 12, 4}));
  EXPECT_EQ(viewLayout(fn.node(1), in)->shape, (Shape{4, 2, 3}));
  EXPECT_EQ(viewLayout(fn.node(2), in)->strides, (Shape{12, 1, 4}));
  auto vl = viewLayout(fn.node(3), in);
  EXPECT_EQ(vl->strides, (Shape{4, 12}));
  EXPECT_EQ(vl->offset, 1);
  // Reshape of a transposed (non-dense) operand needs a cont.
  EXPECT_FALSE(viewLayout(fn.node(0), *viewLayout(fn.node(2), in)).has_value());
  EXPECT_FALSE(viewLayout(fn.node(2), in)->isContiguous());
}

/// Block-quantised experts in the grouped GEMM (EmitOptions::
/// groupedExpertQuant, the default): the B units decoded by the GEMV's block
/// decoder (fg::Dec...) into f16 mmas, the weights' offsets and strides in
/// bytes; every block type with a decoder compiles. Off, or with K not a
/// multiple of 32, the expert-indexed GEMV keeps them.
TEST(CudaEmit, GroupedExpertGemmQuantised) {
  auto build = [](DType w, int64_t K, bool gated, DType xt = DType::F32) {
    return [=](Builder &b) {
      auto x = b.input("x", T(xt, {64, 1, K}));
      auto ids = b.input("ids", T(DType::I32, {64, 4}));
      auto g = b.weight("gate_exps", T(w, {8, 96, K}));
      if (!gated) {
        b.result(b.matmulId(x, g, ids));
        return;
      }
      b.result(b.create(OpKind::FusedGatedMatmulId,
                        {x, g, b.weight("up_exps", T(w, {8, 96, K})), ids},
                        {{"kind", Attribute::ofEnum(0)},
                         {"alpha", Attribute::ofFloat(1.702)},
                         {"limit", Attribute::ofFloat(7.0)}}));
    };
  };
  EmitOptions on;
  on.groupedExpertQuant = true;
  on.groupedExpertInt8 = 0; // the f16 form (the int8 one: GroupedExpertGemmInt8)
  // q4_K in both forms, q8_0 gated, iq4_nl (a lookup-table decoder) alone:
  // every compile is CI time, and the decoders are the GEMV's, compiled there.
  const std::pair<DType, bool> forms[] = {{DType::Q4_K, false},
                                          {DType::Q4_K, true},
                                          {DType::Q8_0, true},
                                          {DType::IQ4_NL, false}};
  for (auto [w, gated] : forms) {
      SCOPED_TRACE(std::string(dtypeName(w)) + (gated ? " gated" : ""));
      auto ls = emitAll(build(w, 256, gated), {}, on);
      ASSERT_EQ(ls.size(), 2u);
      const KernelSpec &gemm = kernel(ls, 1);
      EXPECT_TRUE(contains(gemm, "kQuant = true"));
      EXPECT_TRUE(contains(gemm, "using Dec0 = fg::DecF16;"));
      EXPECT_TRUE(contains(gemm, "using W = unsigned char;"));
      // Row stride: 256 weights in whole blocks, in bytes; the expert's: 96 rows.
      const DTypeInfo &qi = dtypeInfo(w);
      const int64_t row = 256 / qi.blockElems * qi.blockBytes;
      EXPECT_TRUE(contains(gemm, "w0_ld = " + std::to_string(row) + "LL")) << row;
      EXPECT_TRUE(contains(gemm, "w0_es = " + std::to_string(96 * row) + "LL"));
      EXPECT_TRUE(contains(gemm, "kXHalf = true")); // x as one f16, the quantised GEMV's rule
      // The rule: a 64-wide k-step, 64-row tiles; one row's step a thread
      // for one stream.
      EXPECT_TRUE(contains(gemm, "KT = 64,"));
      EXPECT_TRUE(contains(gemm, "BM = 64,"));
      EXPECT_TRUE(contains(gemm, gated ? "kQRowUnits = false" : "kQRowUnits = true"));
      // 256 threads for quantised experts; deferred decode for two streams.
      EXPECT_TRUE(contains(gemm, "NT = 256;"));
      EXPECT_EQ(gemm.block[0], 256u);
      EXPECT_TRUE(contains(gemm, gated ? "kQDeferred = true" : "kQDeferred = false"));
    }
  // The other forms over quantised gate|up: a 32-wide k-step with one row's
  // step a thread.
  EmitOptions narrow = on;
  narrow.groupedExpertKT = 32;
  narrow.groupedExpertQuantRowUnits = 1;
  auto q32 = emitAll(build(DType::Q4_K, 256, true), {}, narrow);
  ASSERT_EQ(q32.size(), 2u);
  EXPECT_TRUE(contains(kernel(q32, 1), "KT = 32,"));
  EXPECT_TRUE(contains(kernel(q32, 1), "kQRowUnits = true"));
  // Deferred decode forced on: raw bytes held through the mmas, in both unit
  // mappings (gate|up spread by the rule, one stream by row).
  EmitOptions deferred = on;
  deferred.groupedExpertQuantDeferred = 1;
  for (bool gated : {true, false}) {
    SCOPED_TRACE(gated ? "deferred gated" : "deferred");
    auto d = emitAll(build(DType::Q4_K, 256, gated), {}, deferred);
    ASSERT_EQ(d.size(), 2u);
    EXPECT_TRUE(contains(kernel(d, 1), "kQDeferred = true"));
    EXPECT_TRUE(contains(kernel(d, 1), gated ? "kQRowUnits = false" : "kQRowUnits = true"));
  }
  EXPECT_TRUE(contains(kernel(q32, 1), "kQDeferred = true")); // gated: the rule
  EmitOptions eager = narrow;
  eager.groupedExpertQuantDeferred = 0;
  EXPECT_TRUE(contains(kernel(emitAll(build(DType::Q4_K, 256, true), {}, eager), 1),
                       "kQDeferred = false"));
  // Empty m tiles' mmas skipped by default for quantised experts (16-bit
  // ones keep the plain loop), and the form without the skip still compiles.
  EXPECT_TRUE(contains(kernel(q32, 1), "kSkipRows = true"));
  EXPECT_TRUE(contains(kernel(emitAll(build(DType::F16, 256, true), {}, on), 1),
                       "kSkipRows = false"));
  EmitOptions noSkip = on;
  noSkip.groupedExpertSkipRows = false;
  EXPECT_TRUE(contains(kernel(emitAll(build(DType::Q4_K, 256, true), {}, noSkip), 1),
                       "kSkipRows = false"));
  // x in f16 (the gemm-inputs pass's convert, opt-in FG_DEBUG_MOE_HALF_X=1):
  // a unit's 8 halves one 16-byte load into the tile; without the option the
  // kernel reads f16 x element by element as before.
  EmitOptions halfX = on;
  halfX.groupedExpertHalfX = true;
  EXPECT_TRUE(contains(kernel(emitAll(build(DType::Q4_K, 256, true, DType::F16), {}, halfX), 1),
                       "kXVec16 = true"));
  EXPECT_TRUE(contains(kernel(emitAll(build(DType::Q4_K, 256, true, DType::F16), {}, on), 1),
                       "kXVec16 = false"));
  EXPECT_TRUE(contains(kernel(q32, 1), "kXVec16 = false")); // f32 x
  // 128 threads a block forced, quantised gate|up; 16-bit experts take 128 by
  // the rule.
  EmitOptions narrowBlocks = on;
  narrowBlocks.groupedExpertThreads = 128;
  auto q128 = emitAll(build(DType::Q4_K, 256, true), {}, narrowBlocks);
  ASSERT_EQ(q128.size(), 2u);
  EXPECT_TRUE(contains(kernel(q128, 1), "NT = 128;"));
  EXPECT_EQ(kernel(q128, 1).block[0], 128u);
  auto f16Gated = emitAll(build(DType::F16, 256, true), {}, on);
  ASSERT_EQ(f16Gated.size(), 2u);
  EXPECT_TRUE(contains(kernel(f16Gated, 1), "NT = 128;"));
  // On by default; off, the GEMV. K = 96 (three 32-weight steps of q8_0
  // blocks) is taken.
  EXPECT_EQ(emitAll(build(DType::Q4_K, 256, false)).size(), 2u);
  EmitOptions off;
  off.groupedExpertQuant = false;
  auto gemv = emitAll(build(DType::Q4_K, 256, false), {}, off);
  ASSERT_EQ(gemv.size(), 1u);
  // The expert-indexed GEMV: on DP4A by the rule (EmitOptions::gemvDp4a),
  // else on the tensor cores.
  EXPECT_TRUE(contains(kernel(gemv, 0), "fg::gemvDp4a<CfgD>("));
  off.gemvDp4a = 0;
  EXPECT_TRUE(contains(kernel(emitAll(build(DType::Q4_K, 256, false), {}, off), 0),
                       "fg::gemv<Cfg>("));
  EXPECT_EQ(emitAll(build(DType::Q8_0, 96, true), {}, on).size(), 2u);
  // GpuQuantGemv.GroupedExpertGemmQuantised's K (288: q4_0/q4_1/q8_0) is taken.
  EXPECT_EQ(emitAll(build(DType::Q4_1, 288, false), {}, on).size(), 2u);
  // The 16-bit form keeps its own decoder and element strides.
  auto f16 = emitAll(build(DType::F16, 256, false), {}, on);
  ASSERT_EQ(f16.size(), 2u);
  EXPECT_TRUE(contains(kernel(f16, 1), "kQuant = false"));
  EXPECT_TRUE(contains(kernel(f16, 1), "w0_ld = 256LL"));
}

/// q4_K, q5_K, q6_K, q8_0 and q4_0 experts on integer tensor cores (kernels/moe_i8.cuh, opt-in
/// EmitOptions::groupedExpertInt8): the routing launch also quantises x (its
/// grid one block more than the quantising blocks, x its third parameter),
/// the GEMM reads x as ActQuant::Int8 and its scratch holds the int8 rows
/// after the permutation; one and two streams, x a row a token and a row a
/// slot, 256 and 128 threads, compiled by NVRTC. Other types (q4_1) keep the
/// f16 form, as does everything without the option.
TEST(CudaEmit, GroupedExpertGemmInt8) {
  auto build = [](DType w, int64_t K, bool gated, int64_t X) {
    return [=](Builder &b) {
      auto x = b.input("x", T(DType::F32, {40, X, K}));
      auto ids = b.input("ids", T(DType::I32, {40, 4}));
      auto g = b.weight("gate_exps", T(w, {8, 100, K}));
      if (!gated) {
        b.result(b.matmulId(x, g, ids));
        return;
      }
      b.result(b.create(OpKind::FusedGatedMatmulId,
                        {x, g, b.weight("up_exps", T(w, {8, 100, K})), ids},
                        {{"kind", Attribute::ofEnum(0)},
                         {"alpha", Attribute::ofFloat(1.702)},
                         {"limit", Attribute::ofFloat(7.0)}}));
    };
  };
  EmitOptions on;
  on.groupedExpertInt8 = 2; // every type, q6_K too
  struct Form {
    bool gated;
    int64_t X, K, threads;
  };
  struct Typed {
    DType w;
    Form f;
  };
  for (auto [w, f] : {Typed{DType::Q4_K, {true, 1, 512, 0}}, Typed{DType::Q4_K, {false, 4, 256, 0}},
                      Typed{DType::Q4_K, {false, 1, 768, 128}}, Typed{DType::Q5_K, {true, 1, 256, 0}},
                      Typed{DType::Q5_K, {false, 4, 512, 0}}, Typed{DType::Q8_0, {true, 1, 256, 0}},
                      Typed{DType::Q4_0, {false, 4, 512, 0}}, Typed{DType::Q6_K, {true, 1, 768, 0}}}) {
    SCOPED_TRACE(std::string(dtypeName(w)) + (f.gated ? " gated X " : " X ") +
                 std::to_string(f.X) + " K " + std::to_string(f.K) + " threads " +
                 std::to_string(f.threads));
    EmitOptions o = on;
    o.groupedExpertThreads = f.threads;
    auto ls = emitAll(build(w, f.K, f.gated, f.X), {}, o);
    ASSERT_EQ(ls.size(), 2u);
    const KernelSpec &route = kernel(ls, 0), &gemm = kernel(ls, 1);
    EXPECT_TRUE(contains(route, "fg::moeRouteI8<Cfg>("));
    EXPECT_TRUE(contains(gemm, "fg::moeGemmI8<Cfg>("));
    ASSERT_EQ(route.params.size(), 3u);
    EXPECT_EQ(route.params[2].kind, Param::Kind::Operand);
    EXPECT_EQ(route.params[2].index, 0u);
    // 40 · X rows of K / 32 blocks, 8 lanes a block, 1024 threads a block.
    const int64_t quant = (40 * f.X * (f.K / 32) * 8 + 1023) / 1024;
    EXPECT_EQ(route.grid[0], static_cast<unsigned>(1 + quant));
    EXPECT_EQ(gemm.actQuant, ActQuant::Int8);
    EXPECT_EQ(route.actQuant, ActQuant::Exact);
    const unsigned nt = f.threads == 128 ? 128u : 256u;
    EXPECT_EQ(gemm.block[0], nt);
    EXPECT_TRUE(contains(gemm, nt == 128 ? "kI8NJ = 2;" : "kI8NJ = 1;"));
    EXPECT_TRUE(contains(gemm, "kXRowsPerToken = " + std::to_string(f.X) + "LL"));
    const std::map<DType, std::pair<const char *, unsigned>> policy = {
        {DType::Q4_K, {"fg::MoeI8Q4K", 160}},
        {DType::Q5_K, {"fg::MoeI8Q5K", 224}},
        {DType::Q8_0, {"fg::MoeI8Q8_0", 288}},
        {DType::Q4_0, {"fg::MoeI8Q4_0", 160}},
        {DType::Q6_K, {"fg::MoeI8Q6K", 224}}};
    EXPECT_TRUE(contains(gemm, std::string("using I8 = ") + policy.at(w).first + ";"));
    // Two stages of x (288 + 72 bytes a row) and of the weight rows (the
    // policy's padded step a stream), dynamic.
    EXPECT_EQ(gemm.sharedBytes, 2u * 64 * 360 + 2u * (f.gated ? 2 : 1) * 64 * policy.at(w).second);
    // The int8 rows and their {dx, Σ x} after the routing's scratch.
    const uint64_t rows = 40 * static_cast<uint64_t>(f.X);
    EXPECT_GE(gemm.scratchBytes, rows * f.K + rows * (f.K / 32) * 8);
    EXPECT_EQ(route.scratchBytes, gemm.scratchBytes);
  }
  // A q8_0 view starting one block into its weight (34 bytes: its rows'
  // steps are not 16-byte aligned for cp.async) keeps the f16 form.
  {
    std::vector<Layout> ls = {Layout::contiguous({40, 1, 256}), Layout::contiguous({8, 100, 256}),
                              Layout::contiguous({40, 4})};
    ls[1].offset = 32;
    auto shifted = emitAll(build(DType::Q8_0, 256, false, 1), ls, on);
    ASSERT_EQ(shifted.size(), 2u);
    EXPECT_FALSE(contains(kernel(shifted, 1), "moeGemmI8"));
    EXPECT_TRUE(contains(kernel(shifted, 1), "fg::moeGemm<Cfg>("));
  }
  // Not taken: q4_1, or the option off.
  EXPECT_FALSE(contains(kernel(emitAll(build(DType::Q4_1, 256, true, 1), {}, on), 1),
                        "moeGemmI8"));
  EmitOptions off;
  off.groupedExpertInt8 = 0;
  EXPECT_FALSE(contains(kernel(emitAll(build(DType::Q4_K, 768, false, 1), {}, off), 1), "moeGemmI8"));
  EXPECT_EQ(kernel(emitAll(build(DType::Q4_K, 768, false, 1), {}, off), 1).actQuant,
            ActQuant::Exact);
  // The rule (1, the default): q4_K yes, q6_K no.
  EXPECT_TRUE(contains(kernel(emitAll(build(DType::Q4_K, 768, false, 1)), 1), "moeGemmI8"));
  EXPECT_FALSE(contains(kernel(emitAll(build(DType::Q6_K, 768, false, 1)), 1), "moeGemmI8"));
}

TEST(CudaEmit, UnsupportedCasesSayWhy) {
  Function fn("u");
  Builder b(fn);
  // A q4_0 weight is decoded by the GEMV; a q4_0 x is refused.
  auto x = b.weight("x", T(DType::Q4_0, {1, 64}));
  b.result(b.matmul(x, b.weight("w", T(DType::F16, {32, 64}))));
  auto q = b.input("q", T(DType::F32, {1, 1, 640}));
  auto k = b.state("k", T(DType::F16, {16, 1, 640}));
  b.result(b.attention(q, k, k, b.input("pos", T(DType::I32, {1})), {1.0, 0, 0}));
  ASSERT_TRUE(ok(b.finish()));
  auto e0 = emitKernel(fn, fn.node(0), contiguousLayouts(fn, fn.node(0)));
  ASSERT_FALSE(static_cast<bool>(e0));
  std::string m0 = llvm::toString(e0.takeError());
  EXPECT_NE(m0.find("no CUDA kernel for 'matmul' with"), std::string::npos) << m0;
  EXPECT_NE(m0.find("q4_0"), std::string::npos) << m0;
  auto e1 = emitKernel(fn, fn.node(1), contiguousLayouts(fn, fn.node(1)));
  ASSERT_FALSE(static_cast<bool>(e1));
  EXPECT_NE(llvm::toString(e1.takeError()).find("no CUDA kernel for 'attention'"),
            std::string::npos);
  auto e2 = emitKernel(fn, fn.node(0), {});
  EXPECT_FALSE(static_cast<bool>(e2));
  llvm::consumeError(e2.takeError());
}

/// Row and elementwise kernels take at most four dims (like ggml); more is a
/// refusal that says so.
/// fused.attention_convert: a chunk's flash kernel stores rows of the
/// result's 16-bit type (Cfg::Y, kY 1 for f16, 2 for bf16; the entry's y a
/// Cfg::Y pointer), with sinks when the op has them; one query (the decode
/// kernel, f32 rows only) and f32 caches are refused with the reason.
TEST(CudaEmit, AttentionConvertStoresSixteenBitRows) {
  for (DType to : {DType::F16, DType::BF16}) {
    SCOPED_TRACE(dtypeName(to));
    auto ls = emitAll([&](Builder &b) {
      auto q = b.input("q", T(DType::F32, {65, 8, 128}));
      auto k = b.state("k_cache.0", TensorType(DType::F16, {4096, 2, 128}));
      auto v = b.state("v_cache.0", TensorType(DType::F16, {4096, 2, 128}));
      auto pos = b.input("positions", T(DType::I32, {65}));
      auto s = b.weight("sinks", T(DType::F32, {8}));
      b.result(b.create(op::FusedAttentionConvertArgs{.q = q,
                                                      .kCache = k,
                                                      .vCache = v,
                                                      .positions = pos,
                                                      .sinks = s,
                                                      .scale = 0.125,
                                                      .dtype = to}));
    });
    ASSERT_EQ(ls.size(), 1u);
    const KernelSpec &k = kernel(ls, 0);
    EXPECT_TRUE(contains(k, "using Y = " + ctypeOf(to) + ";"));
    EXPECT_TRUE(contains(k, std::string("kY = ") + (to == DType::F16 ? "1" : "2")));
    EXPECT_TRUE(contains(k, "Cfg::Y* y"));
    EXPECT_TRUE(contains(k, "kSinks = true"));
    EXPECT_EQ(k.grid[0], 2u); // 65 queries, 64 a block
  }
  for (auto [tokens, cache] : {std::pair{int64_t(1), DType::F16}, {int64_t(65), DType::F32}}) {
    Function fn("refused");
    Builder b(fn);
    auto q = b.input("q", T(DType::F32, {tokens, 8, 128}));
    auto k = b.state("k_cache.0", TensorType(cache, {4096, 2, 128}));
    auto v = b.state("v_cache.0", TensorType(cache, {4096, 2, 128}));
    auto pos = b.input("positions", T(DType::I32, {tokens}));
    b.result(b.create(op::FusedAttentionConvertArgs{
        .q = q, .kCache = k, .vCache = v, .positions = pos, .scale = 0.125, .dtype = DType::F16}));
    ASSERT_TRUE(ok(b.finish()));
    auto e = emitKernel(fn, fn.node(0), contiguousLayouts(fn, fn.node(0)));
    ASSERT_FALSE(static_cast<bool>(e));
    std::string m = llvm::toString(e.takeError());
    EXPECT_NE(m.find(tokens == 1 ? "writes f32 rows" : "cache dtype f32"), std::string::npos) << m;
  }
}

TEST(CudaEmit, FiveDimsAreRefusedWithAReason) {
  Function fn("five");
  Builder b(fn);
  auto x = b.input("x", T(DType::F32, {2, 2, 2, 2, 8}));
  b.result(b.rmsNorm(x, 1e-6));
  b.result(b.add(x, x));
  ASSERT_TRUE(ok(b.finish()));
  for (NodeId n : {NodeId(0), NodeId(1)}) {
    auto e = emitKernel(fn, fn.node(n), contiguousLayouts(fn, fn.node(n)));
    ASSERT_FALSE(static_cast<bool>(e));
    std::string m = llvm::toString(e.takeError());
    EXPECT_NE(m.find("at most"), std::string::npos) << m;
  }
}

// --- fused ops: the three families ------------------------------------------------

namespace {

/// emitAll for one fused node (the last one built): its launches, compiled.
std::vector<Launch> emitFused(const BuildFn &build) { return emitAll(build); }

const KernelSpec &only(const std::vector<Launch> &ls) {
  EXPECT_EQ(ls.size(), 1u);
  return kernel(ls, 0);
}

/// fused.matmul_id_sum_add of one token: x [1, k, K] f32, experts w [E, N, K],
/// ids and routing weights of k slots, an f32 residual of N.
BuildFn moeSumOf(DType w, int64_t E, int64_t N, int64_t K, int64_t k,
                 DType sw = DType::F32) {
  return [=](Builder &b) {
    b.result(b.create(op::FusedMatmulIdSumAddArgs{
        .x = b.input("h", T(DType::F32, {1, k, K})),
        .w = b.weight("w", T(w, {E, N, K})),
        .ids = b.input("ids", T(DType::I32, {1, k})),
        .weights = b.input("sw", T(sw, {1, k, 1})),
        .residual = b.input("r", T(DType::F32, {1, N}))}));
  };
}

/// The emitters' error for the last node `bf` builds ("emitted" where it is taken).
std::string refusal(const BuildFn &bf, const EmitOptions &o = {}) {
  Function fn("t");
  Builder b(fn);
  bf(b);
  EXPECT_FALSE(bool(b.finish()));
  const Node &node = fn.node(static_cast<NodeId>(fn.numNodes() - 1));
  auto launches = emitKernel(fn, node, contiguousLayouts(fn, node), o);
  if (launches)
    return std::string("emitted");
  return llvm::toString(launches.takeError());
}

} // namespace

TEST(CudaEmit, FusedElementwiseChainsUnaryMulReluSqrSoftcap) {
  for (OpKind chain : {OpKind::FusedAddChain, OpKind::FusedMulChain})
    for (DType dt : {DType::F32, DType::F16})
      for (int links : {2, 5, 8}) {
        auto ls = emitFused([&](Builder &b) {
          std::vector<ValueId> ops{b.input("x", T(dt, {7, 45}))};
          for (int i = 0; i < links; ++i)
            ops.push_back(b.weight("b" + std::to_string(i), T(dt, {7, 45})));
          b.result(b.create(chain, ops));
        });
        const KernelSpec &k = only(ls);
        EXPECT_EQ(k.params.size(), static_cast<size_t>(links) + 2);
        // f16 links round to f16 after every step, as the decomposition stores them.
        EXPECT_EQ(contains(k, std::string("fg::EwChain<") +
                                  (chain == OpKind::FusedAddChain ? "fg::BinAdd" : "fg::BinMul") +
                                  ", fg_f16"),
                  dt == DType::F16);
      }
  // A broadcast operand ([45] into [3, 45]).
  emitFused([](Builder &b) {
    auto x = b.input("x", T(DType::F32, {3, 45}));
    b.result(b.create(OpKind::FusedAddChain,
                      {x, b.weight("b0", T(DType::F32, {45})), b.weight("b1", T(DType::F32, {45}))}));
  });
  for (int act = 0; act < 3; ++act)
    for (DType dt : {DType::F32, DType::F16}) {
      auto ls = emitFused([&](Builder &b) {
        auto x = b.input("x", T(dt, {5, 130}));
        b.result(b.create(OpKind::FusedUnaryMul, {x, b.input("g", T(dt, {5, 130}))},
                          {{"act", Attribute::ofEnum(act)}}));
      });
      EXPECT_EQ(contains(only(ls), "fg::EwUnaryMul<fg::UnSoftplus"), act == 2);
    }
  for (DType dt : {DType::F32, DType::F16})
    emitFused([&](Builder &b) {
      b.result(b.create(OpKind::FusedReluSqr, {b.input("x", T(dt, {70001, 3}))}));
    });
  auto sc = emitFused([](Builder &b) {
    b.result(b.create(OpKind::FusedSoftcap, {b.input("x", T(DType::F32, {2, 1000}))},
                      {{"in_scale", Attribute::ofFloat(0.02)}, {"out_scale", Attribute::ofFloat(50)}}));
  });
  EXPECT_TRUE(contains(only(sc), "fg::EwSoftcap<"));
  EXPECT_TRUE(contains(only(sc), ", 1112014848, float>")); // 50.0f
}

TEST(CudaEmit, FusedMoeWeightedSumAnyK) {
  for (int64_t k : {1, 3, 8})
    for (bool scale : {false, true}) {
      auto ls = emitFused([&](Builder &b) {
        std::vector<ValueId> ops{b.input("experts", T(DType::F32, {3, k, 70})),
                                 b.input("weights", T(DType::F32, {3, k, 1}))};
        if (scale)
          ops.push_back(b.input("scale", T(DType::F32, {3, k, 1})));
        b.result(b.create(OpKind::FusedMoeWeightedSum, ops));
      });
      const KernelSpec &kk = only(ls);
      EXPECT_EQ(kk.params.size(), scale ? 4u : 3u);
      EXPECT_TRUE(contains(kk, "fg::EwMoeWeightedSum<" + std::to_string(k) + "LL"));
    }
  // With the residual (fused.moe_weighted_sum_add): the residual is the third
  // input, read at the output's position; the scale, if any, the fourth.
  for (int64_t k : {1, 8})
    for (bool scale : {false, true}) {
      auto ls = emitFused([&](Builder &b) {
        std::vector<ValueId> ops{b.input("experts", T(DType::F32, {3, k, 70})),
                                 b.input("weights", T(DType::F32, {3, k, 1})),
                                 b.input("residual", T(DType::F32, {3, 70}))};
        if (scale)
          ops.push_back(b.input("scale", T(DType::F32, {3, k, 1})));
        b.result(b.create(OpKind::FusedMoeWeightedSumAdd, ops));
      });
      const KernelSpec &kk = only(ls);
      EXPECT_EQ(kk.params.size(), scale ? 5u : 4u);
      EXPECT_EQ(kk.params[3], Param::operand(2));
      // Strides along j (0 where k = 1: a dim of one has none).
      std::string e = k > 1 ? "70LL" : "0LL", w = k > 1 ? "1LL" : "0LL",
                  sc = k > 1 && scale ? "1LL" : "0LL";
      EXPECT_TRUE(contains(kk, "fg::EwMoeWeightedSum<" + std::to_string(k) + "LL, " +
                                   (scale ? "true" : "false") + ", " + e + ", " + w + ", " + sc +
                                   ", true>"))
          << kk.source.substr(kk.source.find("fg::EwMoeWeightedSum"), 90);
    }
}

/// fused.matmul_id_sum_add (the expert down projection with the MoE sum and
/// the residual): the DP4A GEMV over the k slots' K-slices as one row of
/// k·K, each lane's expert from ids (gemv_dp4a.cuh, Dp4aMoeSum), every type
/// read lane by lane (a K-warp's span crosses experts), nothing loaded
/// before the programmatic-launch wait (until EarlyExperts.h switches a
/// launch), one block row; refused with its
/// reason where no DP4A GEMV takes it (the fusion is declined then).
TEST(CudaEmit, MatmulIdSumAddOnDp4a) {
  struct Case {
    DType w;
    int64_t E, N, K, k;
    const char *cfg;
  };
  const Case cases[] = {
      // W-moe's down projection: 8 slots of 768 = 24 k-steps, 3 K-warps.
      {DType::Q4_K, 128, 2048, 768, 8, "using D = fg::Dp4aQ4K;\n  static constexpr int kKWarps = 3, kRowWarps = 2, kRowUnroll = 2"},
      {DType::Q8_0, 9, 130, 768, 8, "using D = fg::Dp4aQ8_0;\n  static constexpr int kKWarps = 3, kRowWarps = 2, kRowUnroll = 1"},
      {DType::Q4_0, 6, 130, 1024, 3, "using D = fg::Dp4aQ4_0;\n  static constexpr int kKWarps = 1, kRowWarps = 8, kRowUnroll = 1"},
      {DType::Q6_K, 4, 130, 2048, 2, "using D = fg::Dp4aQ6K;\n  static constexpr int kKWarps = 2, kRowWarps = 4, kRowUnroll = 1"}};
  for (const Case &c : cases) {
    SCOPED_TRACE(std::string(dtypeName(c.w)) + " K " + std::to_string(c.K));
    auto ls = emitAll(moeSumOf(c.w, c.E, c.N, c.K, c.k));
    const KernelSpec &k = only(ls);
    EXPECT_EQ(k.form, KernelForm::Dp4aGemv);
    EXPECT_TRUE(contains(k, "fg::gemvDp4aMoeSum<CfgM>(")) << k.source.substr(k.source.size() - 600);
    EXPECT_TRUE(contains(k, c.cfg)) << k.source.substr(k.source.find("struct CfgD"), 300);
    EXPECT_TRUE(contains(k, "kSlotSteps = " + std::to_string(c.K / (c.w == DType::Q4_0 ? 512 : 256)) + ","));
    EXPECT_TRUE(contains(k, "kPrologueLoad = false"));
    // The early prologue only where the lowering switches it on (EarlyExperts.h).
    EXPECT_TRUE(contains(k, "kEarlyIds = false, kPrologueLoad = kEarlyIds, kSlotsShared = false;"));
    EXPECT_EQ(k.grid[1], 1u);
    const std::vector<Param> want = {Param::result(0),  Param::operand(0), Param::operand(1),
                                     Param::operand(2), Param::operand(3), Param::operand(4)};
    EXPECT_EQ(k.params, want);
  }
  // Refused: q5_K experts (neither the DP4A nor the float form), two tokens,
  // a slot that is not whole k-steps, q6_K rows that do not start 16-byte
  // aligned (768 weights: 630 bytes).
  EXPECT_NE(refusal(moeSumOf(DType::Q5_K, 4, 16, 256, 2)).find("it runs on the DP4A GEMV"), std::string::npos);
  EXPECT_NE(refusal(moeSumOf(DType::Q4_K, 4, 16, 384, 2)).find("whole 256-weight k-steps"), std::string::npos);
  EXPECT_NE(refusal(moeSumOf(DType::Q6_K, 4, 16, 768, 2)).find("16-byte aligned"), std::string::npos);
  EXPECT_NE(refusal([&](Builder &b) {
              b.result(b.create(op::FusedMatmulIdSumAddArgs{
                  .x = b.input("h", T(DType::F32, {2, 2, 256})),
                  .w = b.weight("w", T(DType::Q4_K, {4, 16, 256})),
                  .ids = b.input("ids", T(DType::I32, {2, 2})),
                  .weights = b.input("sw", T(DType::F32, {2, 2, 1})),
                  .residual = b.input("r", T(DType::F32, {2, 16}))}));
            }).find("takes one token"),
            std::string::npos);
}

/// fused.matmul_id_sum_add with f16, bf16 or f32 experts (EmitOptions::
/// moeSumFloat, on by default: kernels/moe_sum.cuh, a warp a row over
/// the k slots' rows end to end): W-moe's down projection, odd shapes (N =
/// 203, K = 264, three slots) and the demo's f32 experts, every one compiled
/// with NVRTC; a Cfg per shape, one block row of 8 warps, at most two blocks
/// an SM; refused where a slot's row is not whole 16-byte units, and with
/// the option off.
TEST(CudaEmit, MatmulIdSumAddFloatRows) {
  EXPECT_TRUE(EmitOptions{}.moeSumFloat);
  struct Case {
    DType w;
    int64_t E, N, K, k;
    const char *dec;
    unsigned grid;
  };
  const Case cases[] = {{DType::F16, 128, 2048, 768, 8, "fg::DecF16", 256},
                        {DType::BF16, 5, 203, 264, 3, "fg::DecBF16", 26},
                        {DType::F32, 8, 256, 128, 2, "fg::DecF32", 32},
                        {DType::F16, 4, 40000, 64, 1, "fg::DecF16", 264}};
  EmitOptions on;
  on.moeSumFloat = true;
  for (const Case &c : cases) {
    SCOPED_TRACE(std::string(dtypeName(c.w)) + " N " + std::to_string(c.N));
    auto ls = emitAll(moeSumOf(c.w, c.E, c.N, c.K, c.k), {}, on);
    const KernelSpec &k = only(ls);
    EXPECT_TRUE(contains(k, "const fg::MoeSumArgs<Cfg> ma{y, x, w, ids, sw, res};"));
    EXPECT_TRUE(contains(k, std::string("using Dec = ") + c.dec + ";"));
    EXPECT_TRUE(contains(k, llvm::formatv("kk = {0}, Kc = {1}, kWarps = 8", c.k, c.K).str()));
    EXPECT_TRUE(contains(k, "using R = float;"));
    EXPECT_EQ(k.grid[0], c.grid);
    EXPECT_EQ(k.grid[1], 1u);
    EXPECT_EQ(k.block[0], 256u);
    const std::vector<Param> want = {Param::result(0),  Param::operand(0), Param::operand(1),
                                     Param::operand(2), Param::operand(3), Param::operand(4)};
    EXPECT_EQ(k.params, want);
    // Nothing read before the programmatic-launch wait: the experts come from
    // before, and only the lowering may switch on the early prologue
    // (EarlyExperts.h).
    EXPECT_TRUE(contains(k, "static constexpr bool kEarlyIds = false;"));
    EXPECT_TRUE(contains(k, "fg::moeSumPrologue<Cfg>(ma);\n  fg_pdl_begin();\n  "
                            "fg::moeSumFloat<Cfg>(ma, pre);"));
  }
  // 16-bit routing weights (read past L1 by fg_ldcg's 16-bit forms), both
  // forms, compiled.
  only(emitAll(moeSumOf(DType::F16, 8, 256, 128, 2, DType::F16), {}, on));
  only(emitAll(moeSumOf(DType::Q4_K, 8, 256, 256, 2, DType::BF16)));
  // 260 f16 weights a row: 520 bytes, not whole 16-byte units.
  EXPECT_NE(refusal(moeSumOf(DType::F16, 4, 16, 260, 2), on).find("16-byte units"), std::string::npos);
  EmitOptions off;
  off.moeSumFloat = false;
  EXPECT_NE(refusal(moeSumOf(DType::F16, 4, 16, 256, 2), off).find("DP4A GEMV"), std::string::npos);
}

/// fused.rms_norm_matmul_topk_moe: a warp an expert over ceil(E / 2)
/// blocks of 2 warps (topk.cuh, routerTopk), the logits through its scratch
/// to the last block (a counter of its own), over a 16/32-bit router with
/// every gating form; the router's rows loaded before the programmatic-launch
/// wait when it is a graph weight, after it when a kernel computes it; any
/// arch; refused with its reason for two tokens, rows that are not whole
/// 16-byte units, and experts past its static shared memory.
TEST(CudaEmit, RmsNormMatmulTopkMoeGrid) {
  struct Case {
    DType w;
    int64_t E, L, k;
    TopkGating g;
    bool bias, renorm;
    double scale;
  };
  const Case cases[] = {{DType::F32, 128, 2048, 8, TopkGating::Softmax, false, true, 1.0},
                        {DType::F16, 288, 1000, 8, TopkGating::Sigmoid, true, true, 2.5},
                        {DType::BF16, 64, 512, 4, TopkGating::DelayedSoftmax, false, false, 1.0}};
  // computed: the router a kernel's result (router · 1), not a weight.
  auto build = [](const Case &c, int64_t tokens, bool computed = false) {
    return [=](Builder &b) {
      ValueId router = b.weight("router", T(c.w, {c.E, c.L}));
      if (computed)
        router = b.scale(router, 1.0);
      op::FusedRmsNormMatmulTopkMoeArgs a{.x = b.input("h", T(DType::F32, {tokens, c.L})),
                                          .normW = b.weight("g", T(DType::F32, {c.L})),
                                          .wRouter = router,
                                          .eps = 1e-6,
                                          .gating = c.g,
                                          .k = c.k,
                                          .renorm = c.renorm ? 1 : 0,
                                          .scale = c.scale};
      if (c.bias)
        a.bias = b.weight("bias", T(DType::F32, {c.E}));
      b.result(b.create(a));
    };
  };
  const std::string load = "fg::RouterRow<Cfg> held = fg::routerPrefetch<Cfg>(w);";
  for (const Case &c : cases) {
    SCOPED_TRACE(std::string(dtypeName(c.w)) + " E " + std::to_string(c.E));
    auto ls = emitAll(build(c, 1));
    const KernelSpec &k = only(ls);
    EXPECT_TRUE(contains(k, "fg::routerTopk<Cfg>("));
    EXPECT_FALSE(contains(k, "__cluster_dims__"));
    EXPECT_TRUE(contains(k, "E = " + std::to_string(c.E) + ", K = " + std::to_string(c.k) +
                                ", L = " + std::to_string(c.L) + ","));
    EXPECT_TRUE(contains(k, load + "\n  fg_pdl_begin();")) << "the router's rows before the wait";
    EXPECT_EQ(k.grid[0], static_cast<unsigned>((c.E + 1) / 2));
    EXPECT_EQ(k.block[0], 64u);
    EXPECT_EQ(k.params.size(), c.bias ? 9u : 8u);
    EXPECT_EQ(k.params[2], Param::result(2));
    EXPECT_EQ(k.params[3], Param::scratch());
    EXPECT_EQ(k.params[4], Param::counters());
    EXPECT_EQ(k.scratchBytes, static_cast<uint64_t>(c.E) * 4);
    EXPECT_EQ(k.counterBytes, 4u);
  }
  {
    // A computed router: its rows load after the wait (a kernel writes them).
    auto ls = emitAll(build(cases[0], 1, /*computed=*/true));
    const KernelSpec &k = only(ls);
    EXPECT_TRUE(contains(k, "fg_pdl_begin();\n  " + load)) << k.source.substr(k.source.size() - 400);
  }
  EmitOptions sm89;
  sm89.arch = "sm_89";
  EXPECT_EQ(refusal(build(cases[0], 1), sm89), "emitted");
  EXPECT_NE(refusal(build(cases[0], 2), {}).find("takes one f32 token"), std::string::npos);
  Case odd = cases[0];
  odd.L = 1001;
  EXPECT_NE(refusal(build(odd, 1), {}).find("whole aligned 16-byte units"), std::string::npos);
  Case big = cases[0];
  big.E = 4096;
  EXPECT_NE(refusal(build(big, 1), {}).find("(shared memory)"), std::string::npos);
}

TEST(CudaEmit, FusedNormRopeSetRowsRowAnchor) {
  for (int64_t rows : {1, 5, 37}) {
    emitFused([&](Builder &b) {
      auto x = b.input("x", T(DType::F32, {rows, 4096}));
      b.result(b.create(OpKind::FusedRmsNormMul, {x, b.weight("w", T(DType::F32, {4096}))},
                        {{"eps", Attribute::ofFloat(1e-6)}}));
    });
    auto ls = emitFused([&](Builder &b) {
      auto x = b.input("x", T(DType::F32, {rows, 100}));
      b.result(b.create(OpKind::FusedRmsNormMulAdd,
                        {x, b.weight("w", T(DType::F32, {100})), b.input("r", T(DType::F32, {rows, 100}))},
                        {{"eps", Attribute::ofFloat(1e-5)}}));
    });
    EXPECT_EQ(only(ls).params.size(), 4u);
  }
  // q-norm → rope: modes, partial rotation, freq factors, YaRN.
  struct RopeVariant {
    int mode;
    int64_t nDims, D;
    bool ff;
    double ext;
  };
  for (RopeVariant v : {RopeVariant{0, 64, 64, false, 0}, RopeVariant{1, 64, 64, false, 0},
                        RopeVariant{1, 32, 80, true, 1.0}, RopeVariant{0, 96, 128, false, 1.0}}) {
    auto ls = emitFused([&](Builder &b) {
      auto x = b.input("q", T(DType::F32, {3, 4, v.D}));
      std::vector<ValueId> ops{x, b.weight("q_norm", T(DType::F32, {v.D})),
                               b.input("positions", T(DType::I32, {3}))};
      if (v.ff)
        ops.push_back(b.weight("rope_freqs", T(DType::F32, {v.nDims / 2})));
      b.result(b.create(OpKind::FusedRmsNormMulRope, ops,
                        {{"eps", Attribute::ofFloat(1e-6)},
                         {"mode", Attribute::ofEnum(v.mode)},
                         {"n_dims", Attribute::ofInt(v.nDims)},
                         {"freq_scale", Attribute::ofFloat(v.ext != 0 ? 0.25 : 1.0)},
                         {"ext_factor", Attribute::ofFloat(v.ext)},
                         {"n_ctx_orig", Attribute::ofInt(v.ext != 0 ? 4096 : 0)}}));
    });
    const KernelSpec &k = only(ls);
    EXPECT_TRUE(contains(k, std::string("kYarn = ") + (v.ext != 0 ? "true" : "false")));
    EXPECT_TRUE(contains(k, "kNDims = " + std::to_string(v.nDims) + "LL"));
    EXPECT_TRUE(contains(k, "L = " + std::to_string(v.D) + "LL"));
    EXPECT_TRUE(contains(k, std::string("kNeox = ") + (v.mode == 1 ? "true" : "false")));
    EXPECT_TRUE(contains(k, std::string("kFF = ") + (v.ff ? "true" : "false")));
  }
  // k-norm → rope → KV cache, every cache dtype and index type; in place.
  for (DType cache : kFloats)
    for (DType idx : {DType::I32, DType::I64}) {
      auto ls = emitFused([&](Builder &b) {
        auto kc = b.state("k_cache.0", T(cache, {64, 2, 64}));
        auto pos = b.input("positions", T(idx, {3}));
        b.result(b.create(OpKind::FusedRmsNormMulRopeSetRows,
                          {kc, b.input("k", T(DType::F32, {3, 2, 64})),
                           b.weight("k_norm", T(DType::F32, {64})), pos, pos},
                          {{"eps", Attribute::ofFloat(1e-6)},
                           {"mode", Attribute::ofEnum(1)},
                           {"n_dims", Attribute::ofInt(64)}}));
      });
      const KernelSpec &k = only(ls);
      EXPECT_EQ(k.params,
                (std::vector<Param>{Param::result(0), Param::operand(1), Param::operand(2),
                                    Param::operand(3), Param::operand(4)}));
      // The cache has 64 rows; the value is stored in the cache's dtype.
      EXPECT_TRUE(contains(k, "fg::StoreSetRows<64LL"));
      EXPECT_TRUE(contains(k, "using Out = " + std::string(cache == DType::F32   ? "float"
                                                           : cache == DType::F16 ? "fg_f16"
                                                                                 : "fg_bf16")));
    }
  // rope → KV cache (f32 and f16 rows), with freq factors.
  for (DType x : {DType::F32, DType::F16}) {
    auto ls = emitFused([&](Builder &b) {
      auto kc = b.state("k_cache.0", T(DType::F16, {32, 2, 64}));
      auto pos = b.input("positions", T(DType::I32, {5}));
      b.result(b.create(OpKind::FusedRopeSetRows,
                        {kc, b.input("k", T(x, {5, 2, 64})), pos, pos,
                         b.weight("rope_freqs", T(DType::F32, {32}))},
                        {{"n_dims", Attribute::ofInt(64)}}));
    });
    EXPECT_EQ(only(ls).params.size(), 5u);
  }
}

/// fused.rope_attention: the decode kernel with q rotated as it loads
/// (kRope, the Rope struct of the rope rows, the freq factors as operand 4);
/// a prefill chunk, which the flash kernel would take, is refused.
TEST(CudaEmit, FusedRopeAttention) {
  auto build = [](int64_t tokens, RopeMode mode, bool ff) {
    return [=](Builder &b) {
      auto kc = b.state("k_cache.0", T(DType::F16, {256, 2, 128}));
      auto vc = b.state("v_cache.0", T(DType::F16, {256, 2, 128}));
      auto pos = b.input("positions", T(DType::I32, {tokens}));
      std::vector<ValueId> ops = {b.input("q", T(DType::F32, {tokens, 8, 128})), kc, vc, pos};
      if (ff)
        ops.push_back(b.weight("rope_freqs", T(DType::F32, {48})));
      b.result(b.create(OpKind::FusedRopeAttention, ops,
                        {{"scale", Attribute::ofFloat(0.088)},
                         {"mode", Attribute::ofEnum(static_cast<int64_t>(mode))},
                         {"n_dims", Attribute::ofInt(96)}}));
    };
  };
  for (RopeMode mode : {RopeMode::Normal, RopeMode::Neox})
    for (bool ff : {false, true}) {
      const std::vector<Launch> ls = emitFused(build(3, mode, ff));
      const KernelSpec &k = only(ls);
      EXPECT_TRUE(contains(k, "kRope = true"));
      EXPECT_TRUE(contains(k, "static constexpr long long kNDims = 96LL"));
      // 48 pair frequencies, the first theta^0 = 1.
      EXPECT_TRUE(contains(k, "fg_rope_freq[] = {(0x1p+0), "));
      llvm::StringRef table = llvm::StringRef(k.source).split("fg_rope_freq[] = {").second;
      EXPECT_EQ(table.split("};").first.count("), "), 48u);
      EXPECT_TRUE(contains(k, std::string("kNeox = ") + (mode == RopeMode::Neox ? "true" : "false")));
      EXPECT_TRUE(contains(k, std::string("kFF = ") + (ff ? "true" : "false")));
      EXPECT_EQ(k.params.size(), ff ? 8u : 7u);
      if (ff) {
        EXPECT_EQ(k.params.back(), Param::operand(4));
      }
    }
  // The plain attention compiles the rope out.
  auto plain = emitFused([](Builder &b) {
    auto kc = b.state("k_cache.0", T(DType::F16, {256, 2, 128}));
    auto vc = b.state("v_cache.0", T(DType::F16, {256, 2, 128}));
    b.result(b.attention(b.input("q", T(DType::F32, {1, 8, 128})), kc, vc,
                         b.input("positions", T(DType::I32, {1})), {0.088, 0, 0}));
  });
  EXPECT_TRUE(contains(only(plain), "kRope = false"));
  // 16 tokens: the flash prefill's size; no rope there.
  Function fn("t");
  Builder b(fn);
  build(16, RopeMode::Neox, false)(b);
  ASSERT_TRUE(ok(b.finish()));
  const Node &node = fn.node(static_cast<NodeId>(fn.numNodes() - 1));
  auto e = emitKernel(fn, node, contiguousLayouts(fn, node));
  ASSERT_FALSE(static_cast<bool>(e));
  std::string m = llvm::toString(e.takeError());
  EXPECT_NE(m.find("takes no rope"), std::string::npos) << m;
}

/// fused.rope_kv_attention: the decode kernel writes the token's K and V
/// rows (kWriteKv; the caches, operands 0 and 1, writable; the k and v rows
/// last) and reads q and k through one rope; y is result 2. Refused for more
/// than one token and for kv heads whose q heads take more than one chunk.
TEST(CudaEmit, FusedRopeKvAttention) {
  auto build = [](int64_t tokens, int64_t hq, int64_t ctx, DType cache, bool ff) {
    return [=](Builder &b) {
      auto kc = b.state("k_cache.0", T(cache, {ctx, 2, 128}));
      auto vc = b.state("v_cache.0", T(cache, {ctx, 2, 128}));
      std::vector<ValueId> ops = {kc,
                                  vc,
                                  b.input("q", T(DType::F32, {tokens, hq, 128})),
                                  b.input("k", T(DType::F32, {tokens, 2, 128})),
                                  b.input("v", T(DType::F32, {tokens, 2, 128})),
                                  b.input("positions", T(DType::I32, {tokens}))};
      if (ff)
        ops.push_back(b.weight("rope_freqs", T(DType::F32, {64})));
      ValueId kc1 = b.create(OpKind::FusedRopeKvAttention, ops,
                             {{"scale", Attribute::ofFloat(0.088)},
                              {"n_dims", Attribute::ofInt(128)}});
      const Function &fn = b.function();
      b.result(fn.node(fn.value(kc1).def).results[2]);
    };
  };
  // The register (cluster, 256 rows) and the staged (8192) forms, f16 with
  // and without freq factors; bf16 and f32 caches once each (NVRTC time).
  struct Form {
    DType cache;
    int64_t ctx;
    bool ff;
  };
  for (const Form &f : {Form{DType::F16, 256, false}, Form{DType::F16, 256, true},
                        Form{DType::F16, 8192, false}, Form{DType::F16, 8192, true},
                        Form{DType::BF16, 256, true}, Form{DType::F32, 8192, false}}) {
    const DType cache = f.cache;
    const int64_t ctx = f.ctx;
    const bool ff = f.ff;
    SCOPED_TRACE(std::string(dtypeName(cache)) + " ctx " + std::to_string(ctx) +
                 (ff ? " ff" : ""));
    const std::vector<Launch> ls = emitFused(build(1, 8, ctx, cache, ff));
    const KernelSpec &k = only(ls);
    EXPECT_TRUE(contains(k, "kWriteKv = true"));
    EXPECT_TRUE(contains(k, "kRope = true"));
    EXPECT_TRUE(contains(k, "Cfg::DecK::T* k, Cfg::DecV::T* v"));
    ASSERT_EQ(k.params.size(), ff ? 10u : 9u);
    EXPECT_EQ(k.params[0], Param::result(2));
    EXPECT_EQ(k.params[3], Param::operand(2));
    EXPECT_EQ(k.params[4], Param::operand(0));
    EXPECT_EQ(k.params[5], Param::operand(1));
    EXPECT_EQ(k.params[6], Param::operand(5));
    EXPECT_EQ(k.params[k.params.size() - 2], Param::operand(3));
    EXPECT_EQ(k.params.back(), Param::operand(4));
  }
  auto refusal = [&](int64_t tokens, int64_t hq) {
    Function fn("t");
    Builder b(fn);
    build(tokens, hq, 256, DType::F16, false)(b);
    EXPECT_TRUE(ok(b.finish()));
    const Node &node = fn.node(static_cast<NodeId>(fn.numNodes() - 1));
    auto e = emitKernel(fn, node, contiguousLayouts(fn, node));
    EXPECT_FALSE(static_cast<bool>(e));
    return e ? std::string() : llvm::toString(e.takeError());
  };
  EXPECT_NE(refusal(2, 8).find("2 tokens"), std::string::npos);
  EXPECT_NE(refusal(1, 32).find("chunks"), std::string::npos);
}

TEST(CudaEmit, FusedTopkMoeGatingsBiasRenormScale) {
  struct V {
    int gating;
    bool bias, renorm;
    double scale;
    int64_t T, E, k;
  };
  const V variants[] = {{0, false, false, 1, 1, 8, 2},    {0, true, true, 2.5, 3, 128, 8},
                        {1, true, true, 1, 37, 256, 8},   {2, false, true, 1.5, 5, 32, 4},
                        {2, true, false, 1, 1, 512, 1},   {3, false, false, 1, 2, 16, 4},
                        {3, false, false, 2.0, 40, 64, 2}};
  for (const V &v : variants) {
    auto ls = emitFused([&](Builder &b) {
      std::vector<ValueId> ops{b.input("logits", T(DType::F32, {v.T, v.E}))};
      if (v.bias)
        ops.push_back(b.weight("exp_probs_b", T(DType::F32, {v.E})));
      b.result(b.create(OpKind::FusedTopkMoe, ops,
                        {{"gating", Attribute::ofEnum(v.gating)},
                         {"k", Attribute::ofInt(v.k)},
                         {"renorm", Attribute::ofInt(v.renorm)},
                         {"scale", Attribute::ofFloat(v.scale)}}));
    });
    const KernelSpec &k = only(ls);
    std::vector<Param> want{Param::result(0), Param::result(1), Param::operand(0)};
    if (v.bias)
      want.push_back(Param::operand(1));
    EXPECT_EQ(k.params, want);
    // Up to 4 rows: one block reads every logit before writing (the results may alias).
    EXPECT_EQ(k.grid[0], v.T <= 4 ? 1u : static_cast<unsigned>(v.T));
    EXPECT_GE(k.block[0], static_cast<unsigned>(std::min<int64_t>(v.E, 512)));
    EXPECT_TRUE(contains(k, std::string("kRenorm = ") + (v.renorm ? "true" : "false")));
    const char *gates[] = {"fg::GateSoftmax", "fg::GateSigmoid", "fg::GateSqrtSoftplus",
                           "fg::GateDelayed"};
    EXPECT_TRUE(contains(k, std::string("using Gate = ") + gates[v.gating]));
    EXPECT_TRUE(contains(k, "fg::topkMoe<Cfg>"));
  }
}

TEST(CudaEmit, FusedGatedGemvEveryGluKind) {
  for (int kind = 0; kind < 4; ++kind)
    for (bool bias : {false, true}) {
      DType wt = kFloats[(kind + bias) % 3];
      int64_t M = kind % 2 ? 8 : 1;
      auto ls = emitFused([&](Builder &b) {
        std::vector<ValueId> ops{b.input("x", T(DType::F32, {M, 96})),
                                 b.weight("w_gate", T(wt, {77, 96})),
                                 b.weight("w_up", T(wt, {77, 96}))};
        if (bias) {
          ops.push_back(b.weight("b_gate", T(DType::F32, {77})));
          ops.push_back(b.weight("b_up", T(DType::F32, {77})));
        }
        b.result(b.create(OpKind::FusedGatedMatmul, ops,
                          {{"kind", Attribute::ofEnum(kind)},
                           {"alpha", Attribute::ofFloat(1.5)},
                           {"limit", Attribute::ofFloat(3.0)}}));
      });
      const KernelSpec &k = only(ls);
      EXPECT_EQ(k.params.size(), bias ? 6u : 4u);
      // The GLU epilogue carries the kind, alpha (1.5f) and limit (3.0f) as float bits.
      EXPECT_TRUE(contains(k, "fg::EpiGlu<" + std::to_string(kind) + ", 1069547520, 1077936128>"));
      EXPECT_TRUE(contains(k, "static constexpr int M = " + std::to_string(M)));
    }
  for (int kind = 0; kind < 4; ++kind)
    for (bool bias : {false, true}) {
      DType wt = kFloats[(kind + bias + 1) % 3];
      int64_t X = kind == 3 ? 2 : 1;
      auto ls = emitFused([&](Builder &b) {
        std::vector<ValueId> ops{b.input("x", T(DType::F32, {3, X, 64})),
                                 b.weight("gate_exps", T(wt, {8, 40, 64})),
                                 b.weight("up_exps", T(wt, {8, 40, 64})),
                                 b.input("ids", T(DType::I32, {3, 2}))};
        if (bias) {
          ops.push_back(b.weight("b_gate", T(DType::F32, {8, 40})));
          ops.push_back(b.weight("b_up", T(DType::F32, {8, 40})));
        }
        b.result(b.create(OpKind::FusedGatedMatmulId, ops,
                          {{"kind", Attribute::ofEnum(kind)},
                           {"alpha", Attribute::ofFloat(1.5)},
                           {"limit", Attribute::ofFloat(3.0)}}));
      });
      const KernelSpec &k = only(ls);
      EXPECT_EQ(k.params.size(), bias ? 7u : 5u);
      EXPECT_EQ(k.grid[1], 6u); // one grid row per (token, slot)
    }
  // More rows than the fused GEMV keeps accumulators for: a clear refusal.
  Function fn("big");
  Builder b(fn);
  auto x = b.input("x", T(DType::F32, {40, 32}));
  b.result(b.create(OpKind::FusedGatedMatmul,
                    {x, b.weight("g", T(DType::F32, {16, 32})), b.weight("u", T(DType::F32, {16, 32}))}));
  ASSERT_TRUE(ok(b.finish()));
  auto e = emitKernel(fn, fn.node(0), contiguousLayouts(fn, fn.node(0)));
  ASSERT_FALSE(static_cast<bool>(e));
  EXPECT_NE(llvm::toString(e.takeError()).find("no CUDA kernel for 'fused.gated_matmul'"),
            std::string::npos);
}

/// fused.matmul_multi: 2 or 3 segments (q, k, v) in one launch. Each segment
/// is a one-stream Cfg (Seg0..Seg2, its own N and weight), the tiles of
/// blockIdx.x are the segments' in order, and the launch passes one result
/// and one weight per segment. Odd shapes: q rows not a multiple of 16, K
/// not a multiple of 256 (and not of 8: the strided loads), T = 1, 2, 5; the
/// GGUF blocks of each segment are read by the plain matmul's decoder.
TEST(CudaEmit, MatmulMultiSegments) {
  struct Case {
    DType wt;
    int64_t M, K;
    unsigned segs;
  };
  const Case kCases[] = {{DType::F16, 1, 200, 3},  {DType::F16, 2, 200, 2}, {DType::F16, 5, 200, 3},
                         {DType::BF16, 1, 200, 3}, {DType::BF16, 5, 100, 2}, {DType::F32, 1, 200, 3},
                         {DType::F32, 2, 100, 3},  {DType::Q8_0, 1, 288, 3}, {DType::Q4_0, 2, 288, 2},
                         {DType::Q4_K, 1, 512, 3}, {DType::Q6_K, 5, 512, 3}};
  const int64_t kRows[] = {1000, 136, 136};
  for (const Case &c : kCases) {
    SCOPED_TRACE(std::string(dtypeName(c.wt)) + " M=" + std::to_string(c.M) +
                 " K=" + std::to_string(c.K) + " segs=" + std::to_string(c.segs));
    auto ls = emitAll([&](Builder &b) {
      std::vector<ValueId> ops{b.input("x", T(DType::F32, {c.M, c.K}))};
      for (unsigned s = 0; s < c.segs; ++s)
        ops.push_back(b.weight("w" + std::to_string(s), T(c.wt, {kRows[s], c.K})));
      b.result(b.create(OpKind::FusedMatmulMulti, ops));
    });
    const KernelSpec &k = only(ls);
    EXPECT_TRUE(contains(k, "fg::gemvMulti<Multi>"));
    EXPECT_EQ(k.form, KernelForm::MergedTensorCoreGemv); // what CudaTarget::cost charges
    EXPECT_TRUE(contains(k, "kSegs = " + std::to_string(c.segs)));
    EXPECT_TRUE(contains(k, "static constexpr int M = " + std::to_string(c.M)));
    for (unsigned s = 0; s < c.segs; ++s)
      EXPECT_TRUE(contains(k, "struct Seg" + std::to_string(s) + " {"));
    EXPECT_FALSE(contains(k, "struct Seg" + std::to_string(c.segs) + " {"));
    // Tiles of the same size for every segment (16 rows on the tensor cores).
    unsigned rows = contains(k, "kTensorCores = true") ? 16 : 4;
    unsigned tiles = 0;
    for (unsigned s = 0; s < c.segs; ++s)
      tiles += static_cast<unsigned>((kRows[s] + rows - 1) / rows);
    EXPECT_EQ(k.grid[0], tiles);
    EXPECT_EQ(k.grid[2], static_cast<unsigned>((c.M + 7) / 8));
    EXPECT_TRUE(contains(k, "kTiles0 = " + std::to_string((kRows[0] + rows - 1) / rows) + "LL"));
    std::vector<Param> want;
    for (unsigned s = 0; s < c.segs; ++s)
      want.push_back(Param::result(s));
    for (unsigned i = 0; i <= c.segs; ++i)
      want.push_back(Param::operand(i));
    EXPECT_EQ(k.params, want);
    if (isQuantized(c.wt)) {
      EXPECT_TRUE(contains(k, "kTensorCores = true"));
      const DTypeInfo &qi = dtypeInfo(c.wt);
      EXPECT_TRUE(contains(k, "w0_ld = " + std::to_string(c.K / qi.blockElems * qi.blockBytes) +
                                  "LL"));
    }
  }
  // Refusals: weights of two dtypes; more rows than the GEMV takes.
  auto refusal = [](std::vector<TensorType> types) {
    Function fn("r");
    Builder b(fn);
    std::vector<ValueId> ops;
    for (size_t i = 0; i < types.size(); ++i)
      ops.push_back(i ? b.weight("w" + std::to_string(i), types[i]) : b.input("x", types[i]));
    b.result(b.create(OpKind::FusedMatmulMulti, ops));
    EXPECT_TRUE(ok(b.finish()));
    auto e = emitKernel(fn, fn.node(0), contiguousLayouts(fn, fn.node(0)));
    EXPECT_FALSE(static_cast<bool>(e));
    return e ? std::string() : llvm::toString(e.takeError());
  };
  EXPECT_NE(refusal({T(DType::F32, {1, 64}), T(DType::F16, {8, 64}), T(DType::BF16, {8, 64})})
                .find("weights of different dtypes"),
            std::string::npos);
  EXPECT_NE(refusal({T(DType::F32, {9, 64}), T(DType::F16, {8, 64}), T(DType::F16, {8, 64})})
                .find("9 rows of x"),
            std::string::npos);
}

/// fused.matmul_add: the GEMV with the addend after its epilogue, a residual
/// per row (evenly spaced rows) or a bias shared by all rows (row stride 0).
TEST(CudaEmit, MatmulAddEpilogue) {
  for (bool residual : {true, false})
    for (DType wt : kFloats) {
      int64_t M = residual ? 3 : 1;
      auto ls = emitFused([&](Builder &b) {
        auto x = b.input("x", T(DType::F32, {M, 96}));
        auto w = b.weight("w", T(wt, {77, 96}));
        auto r = residual ? b.input("r", T(DType::F32, {M, 77})) : b.weight("b", T(DType::F32, {77}));
        b.result(b.create(OpKind::FusedMatmulAdd, {x, w, r}));
      });
      const KernelSpec &k = only(ls);
      EXPECT_EQ(k.params, (std::vector<Param>{Param::result(0), Param::operand(0),
                                              Param::operand(1), Param::operand(2)}));
      EXPECT_TRUE(contains(k, "kRes = true"));
      EXPECT_TRUE(contains(k, std::string("res_sm = ") + (residual ? "77LL" : "0LL")));
    }
  // Where cuBLAS would take the plain matmul (3+ rows over 64 MiB of 16-bit
  // weights) the fused op is the plain matmul's GEMM in its cuBLASLt form
  // (MatmulAddPrefillIsOneLtGemm).
  Function fn("big");
  Builder b(fn);
  auto x = b.input("x", T(DType::F32, {4, 8192}));
  b.result(b.create(OpKind::FusedMatmulAdd, {x, b.weight("w", T(DType::F16, {8192, 8192})),
                                             b.input("r", T(DType::F32, {4, 8192}))}));
  ASSERT_TRUE(ok(b.finish()));
  auto e = emitKernel(fn, fn.node(0), contiguousLayouts(fn, fn.node(0)));
  ASSERT_TRUE(static_cast<bool>(e)) << llvm::toString(e.takeError());
  ASSERT_FALSE(e->empty());
  const auto *g = std::get_if<CublasGemmSpec>(&e->back());
  ASSERT_NE(g, nullptr);
  EXPECT_TRUE(g->lt);
}

/// fused.matmul_add over more rows than the GEMV takes: the plain matmul's
/// launches (x converted to the weight's type in scratch unless it already
/// is; a q8_0 weight decoded to f16 in scratch first) with the GEMM in its
/// cuBLASLt form: C = the residual (operand 2, read), D = the result, alpha =
/// beta = 1, f32 C and D, ldc = the residual's row stride, ldd = N. No add
/// kernel. A bias shared by all rows is refused with its reason.
TEST(CudaEmit, MatmulAddPrefillIsOneLtGemm) {
  const int64_t N = 77, K = 96;
  for (DType wt : {DType::F16, DType::BF16, DType::F32, DType::Q8_0})
    for (bool xConverted : {false, true})
      for (int64_t M : {int64_t(9), int64_t(100)}) {
        SCOPED_TRACE(std::string(dtypeName(wt)) + (xConverted ? " x converted" : " x f32") +
                     " M " + std::to_string(M));
        DType xt = xConverted ? (wt == DType::Q8_0 ? DType::F16 : wt) : DType::F32;
        auto ls = emitAll([&](Builder &b) {
          auto x = b.input("x", T(xt, {M, K}));
          auto w = b.weight("w", T(wt, {N, K}));
          b.result(
              b.create(OpKind::FusedMatmulAdd, {x, w, b.input("r", T(DType::F32, {M, N}))}));
        });
        ASSERT_FALSE(ls.empty());
        size_t kernels = 0;
        for (const Launch &l : ls)
          kernels += std::holds_alternative<KernelSpec>(l);
        // A conversion of x where it is not yet in the GEMM's type, and the
        // decoding of a quantised weight.
        EXPECT_EQ(kernels, size_t(xt != (wt == DType::Q8_0 ? DType::F16 : wt)) +
                               size_t(wt == DType::Q8_0));
        ASSERT_EQ(ls.size(), kernels + 1);
        const auto *g = std::get_if<CublasGemmSpec>(&ls.back());
        ASSERT_NE(g, nullptr);
        EXPECT_TRUE(g->lt);
        EXPECT_EQ(g->name, "matmul_add_cublaslt");
        EXPECT_EQ(g->c.param, Param::operand(2));
        EXPECT_EQ(g->c.byteOffset, 0u);
        EXPECT_EQ(g->d.param, Param::result(0));
        EXPECT_EQ(g->alpha, 1.0f);
        EXPECT_EQ(g->beta, 1.0f);
        EXPECT_EQ(g->cType, DType::F32);
        EXPECT_EQ(g->m, N);
        EXPECT_EQ(g->n, M);
        EXPECT_EQ(g->k, K);
        EXPECT_EQ(g->ldc, N);
        EXPECT_EQ(g->ldd, N);
        EXPECT_EQ(g->aType, wt == DType::Q8_0 ? DType::F16 : wt);
        // x read in place when already in the GEMM's type, else from scratch.
        EXPECT_EQ(g->b.param, kernels > size_t(wt == DType::Q8_0) ? Param::scratch()
                                                                   : Param::operand(0));
      }
  // The residual's rows evenly spaced but strided (a view of every other
  // row): ldc is the stride, the offset in bytes.
  {
    Layout rl = Layout::contiguous({16, N});
    rl.strides = {2 * N, 1};
    rl.offset = N;
    auto ls = emitAll(
        [&](Builder &b) {
          auto x = b.input("x", T(DType::F16, {16, K}));
          auto w = b.weight("w", T(DType::F16, {N, K}));
          b.result(
              b.create(OpKind::FusedMatmulAdd, {x, w, b.input("r", T(DType::F32, {16, N}))}));
        },
        {Layout::contiguous({16, K}), Layout::contiguous({N, K}), rl});
    ASSERT_EQ(ls.size(), 1u);
    const auto &g = std::get<CublasGemmSpec>(ls.back());
    EXPECT_EQ(g.ldc, 2 * N);
    EXPECT_EQ(g.c.byteOffset, static_cast<uint64_t>(N * 4));
    EXPECT_EQ(g.ldd, N);
  }
  // A bias shared by all rows: refused (cuBLASLt's bias epilogue is not used).
  Function fn("bias");
  Builder b(fn);
  b.result(b.create(OpKind::FusedMatmulAdd, {b.input("x", T(DType::F32, {16, K})),
                                             b.weight("w", T(DType::F16, {N, K})),
                                             b.weight("b", T(DType::F32, {N}))}));
  ASSERT_TRUE(ok(b.finish()));
  auto e = emitKernel(fn, fn.node(0), contiguousLayouts(fn, fn.node(0)));
  ASSERT_FALSE(static_cast<bool>(e));
  EXPECT_NE(llvm::toString(e.takeError()).find("shared by the 16 rows of x"), std::string::npos);
}

/// The rms_norm prologue: the norm weight is the last parameter, the
/// weights follow x in the operands; the gated form keeps the GLU epilogue.
TEST(CudaEmit, RmsNormPrologue) {
  for (bool gated : {false, true}) {
    auto ls = emitFused([&](Builder &b) {
      auto x = b.input("x", T(DType::F32, {3, 96}));
      auto g = b.weight("g", T(DType::F32, {96}));
      auto w = b.weight("w", T(DType::F16, {77, 96}));
      if (gated)
        b.result(b.create(op::FusedRmsNormGatedMatmulArgs{
            .x = x, .normW = g, .wGate = w, .wUp = b.weight("u", T(DType::F16, {77, 96})),
            .eps = 1e-5}));
      else
        b.result(b.create(op::FusedRmsNormMatmulArgs{.x = x, .normW = g, .w = w, .eps = 1e-5}));
    });
    const KernelSpec &k = only(ls);
    std::vector<Param> want{Param::result(0), Param::operand(0), Param::operand(2)};
    if (gated)
      want.push_back(Param::operand(3));
    want.push_back(Param::operand(1));
    EXPECT_EQ(k.params, want);
    EXPECT_TRUE(contains(k, "kNorm = true"));
    EXPECT_TRUE(contains(k, "kNormEpsBits = 925353388")); // 1e-5f
    EXPECT_EQ(contains(k, "fg::EpiGlu<"), gated);
  }
}

/// The norm stored by the GEMV that reads it (fused.rms_norm_mul_matmul): y
/// is result 1 (the first parameter), the normalised row result 0 (the last,
/// after the norm weight); both work splits store it (the lanes over K for
/// float weights at T = 1, the tensor cores at T = 3 and for q4_K), never the DP4A form
/// (a q4_K router at T = 1 stays on gemv.cuh).
TEST(CudaEmit, RmsNormStoredRow) {
  const std::pair<DType, int64_t> cases[] = {
      {DType::F32, 1}, {DType::F16, 1}, {DType::Q4_K, 1}, {DType::F16, 3}};
  for (const auto &c : cases) {
    const DType w = c.first; // (clang 14 captures no structured binding)
    const int64_t tokens = c.second;
    SCOPED_TRACE(std::string(dtypeName(w)) + " T " + std::to_string(tokens));
    auto ls = emitFused([&](Builder &b) {
      b.result(b.create(op::FusedRmsNormMulMatmulArgs{.x = b.input("x", T(DType::F32, {tokens, 512})),
                                                       .normW = b.weight("g", T(DType::F32, {512})),
                                                       .w = b.weight("w", T(w, {128, 512})),
                                                       .eps = 1e-6}));
    });
    const KernelSpec &k = only(ls);
    const std::vector<Param> want{Param::result(1), Param::operand(0), Param::operand(2),
                                  Param::operand(1), Param::result(0)};
    EXPECT_EQ(k.params, want);
    EXPECT_TRUE(contains(k, "kNorm = true, kNormRow = true"));
    EXPECT_TRUE(contains(k, "fg::gemv<Cfg>(")) << "the DP4A GEMV stores no row";
    // Block-quantised weights dequantise into the tensor-core loop at any T.
    EXPECT_EQ(contains(k, "kTensorCores = true"), tokens == 3 || w == DType::Q4_K);
  }
}

/// Block-quantised weights (GGUF blocks read as stored) in every GEMV form:
/// dense T = 1 and 3 (K = 96 and 288: not multiples of 256 for the 32-element
/// blocks), the residual epilogue, gated with biases, expert-indexed and
/// gated expert-indexed. Each runs on the tensor cores with its decoder, the
/// weight offsets in bytes, and compiles for sm_90.
TEST(CudaEmit, QuantisedGemvEveryForm) {
  const DType kQuants[] = {DType::Q8_0, DType::Q4_0, DType::Q4_1, DType::Q4_K, DType::Q6_K};
  // q4_K blocks (144 bytes) keep every row 16-byte aligned: the whole-super-
  // block decoder (DecQ4_KW), one super-block per chunk.
  const char *kDecoders[] = {"fg::DecQ8_0", "fg::DecQ4_0", "fg::DecQ4_1", "fg::DecQ4_KW",
                             "fg::DecQ6_K"};
  for (int q = 0; q < 5; ++q) {
    SCOPED_TRACE(dtypeName(kQuants[q]));
    DType wt = kQuants[q];
    const DTypeInfo &qi = dtypeInfo(wt);
    int64_t K = qi.blockElems == 256 ? 512 : 288, rowBytes = K / qi.blockElems * qi.blockBytes;
    for (int64_t M : {1, 3}) {
      auto ls = emitAll([&](Builder &b) {
        auto x = b.input("x", T(DType::F32, {M, K}));
        auto w = b.weight("w", T(wt, {77, K}));
        if (M == 1)
          b.result(b.matmul(x, w));
        else
          b.result(b.create(OpKind::FusedMatmulAdd, {x, w, b.input("r", T(DType::F32, {M, 77}))}));
      });
      const KernelSpec &k = only(ls);
      EXPECT_TRUE(contains(k, std::string("using Dec0 = ") + kDecoders[q]));
      EXPECT_TRUE(contains(k, "kTensorCores = true"));
      EXPECT_TRUE(contains(k, "w0_ld = " + std::to_string(rowBytes) + "LL"));
      EXPECT_EQ(k.grid[0], (77u + 15) / 16);
    }
    auto g = emitAll([&](Builder &b) {
      b.result(b.create(OpKind::FusedGatedMatmul,
                        {b.input("x", T(DType::F32, {2, K})), b.weight("g", T(wt, {40, K})),
                         b.weight("u", T(wt, {40, K})), b.weight("bg", T(DType::F32, {40})),
                         b.weight("bu", T(DType::F32, {40}))}));
    });
    EXPECT_TRUE(contains(only(g), std::string("using Dec1 = ") + kDecoders[q]));
    auto e = emitAll([&](Builder &b) {
      auto x = b.input("x", T(DType::F32, {3, 1, K}));
      b.result(b.matmulId(x, b.weight("w", T(wt, {8, 45, K})), b.input("ids", T(DType::I32, {3, 2}))));
    });
    EXPECT_TRUE(contains(only(e), "w0_es = " + std::to_string(45 * rowBytes) + "LL"));
    EXPECT_EQ(only(e).grid[1], 6u);
    emitAll([&](Builder &b) {
      b.result(b.create(OpKind::FusedGatedMatmulId,
                        {b.input("x", T(DType::F32, {2, 1, K})), b.weight("g", T(wt, {8, 40, K})),
                         b.weight("u", T(wt, {8, 40, K})), b.input("ids", T(DType::I32, {2, 4}))}));
    });
  }
  // The narrow q4_K decoder on request (EmitOptions::gemvNarrowQuant, for
  // timing both), the opt-in form with the scales after the mma
  // (gemvWideScaled), and the wide one's variants by the options.
  for (int form = 0; form < 3; ++form) {
    SCOPED_TRACE(form);
    EmitOptions o;
    o.gemvDp4a = 0; // the tensor-core forms (9.4 MB would take DP4A by default)
    o.gemvNarrowQuant = form == 0;
    o.gemvWideScaled = form == 2;
    o.gemvWidePrefetch = 1;
    o.gemvWideWarpsPerSm = 16;
    auto ls = emitAll(
        [&](Builder &b) {
          b.result(b.matmul(b.input("x", T(DType::F32, {1, 4096})),
                            b.weight("w", T(DType::Q4_K, {4096, 4096}))));
        },
        {}, o);
    const KernelSpec &k = only(ls);
    const char *dec[] = {"using Dec0 = fg::DecQ4_K;", "using Dec0 = fg::DecQ4_KW;",
                         "using Dec0 = fg::DecQ4_KS;"};
    EXPECT_TRUE(contains(k, dec[form]));
    EXPECT_EQ(contains(k, "kPrefetch = true"), form != 0);
    // 256 blocks of 16 rows: 8 warps each stay within 132 x 16 warps (16
    // would not), and two blocks per SM asked for (16 warps per SM).
    EXPECT_EQ(contains(k, "__launch_bounds__(256, 2)"), form != 0);
  }
  // q4_0 rows of whole 512-weight groups and q8_0 rows of whole 256-weight
  // groups, 16-byte aligned, are read wide (DecQ4_0W, DecQ8_0W) in every
  // form; other K, or the narrow decoder on request, not.
  for (DType qt : {DType::Q4_0, DType::Q8_0})
  for (int64_t K : {1024, 288})
    for (bool narrow : {false, true}) {
      SCOPED_TRACE(std::string(dtypeName(qt)) + " " + std::to_string(K) + (narrow ? " narrow" : ""));
      EmitOptions o;
      o.gemvNarrowQuant = narrow;
      const bool wide = K == 1024 && !narrow;
      const std::string dec = std::string("using Dec0 = fg::") +
                              (qt == DType::Q4_0 ? "DecQ4_0" : "DecQ8_0") + (wide ? "W;" : ";");
      auto dense = emitAll(
          [&](Builder &b) {
            b.result(b.matmul(b.input("x", T(DType::F32, {3, K})),
                              b.weight("w", T(qt, {100, K}))));
          },
          {}, o);
      EXPECT_TRUE(contains(only(dense), dec));
      auto gated = emitAll(
          [&](Builder &b) {
            b.result(b.create(OpKind::FusedGatedMatmul,
                              {b.input("x", T(DType::F32, {1, K})),
                               b.weight("g", T(qt, {40, K})),
                               b.weight("u", T(qt, {40, K}))}));
          },
          {}, o);
      EXPECT_TRUE(contains(only(gated), dec));
      auto expert = emitAll(
          [&](Builder &b) {
            b.result(b.matmulId(b.input("x", T(DType::F32, {2, 1, K})),
                                b.weight("w", T(qt, {8, 45, K})),
                                b.input("ids", T(DType::I32, {2, 3}))));
          },
          {}, o);
      EXPECT_TRUE(contains(only(expert), dec));
    }
  // q6_K through the wide loop (EmitOptions::gemvWideQ6k, default), K a
  // multiple of 2048; dense and expert-indexed.
  for (bool on : {false, true}) {
    EmitOptions o;
    o.gemvWideQ6k = on;
    auto dense = emitAll(
        [&](Builder &b) {
          b.result(b.matmul(b.input("x", T(DType::F32, {1, 2048})),
                            b.weight("w", T(DType::Q6_K, {100, 2048}))));
        },
        {}, o);
    EXPECT_TRUE(contains(only(dense), on ? "using Dec0 = fg::DecQ6_KW;" : "using Dec0 = fg::DecQ6_K;"));
    auto expert = emitAll(
        [&](Builder &b) {
          b.result(b.matmulId(b.input("x", T(DType::F32, {2, 1, 2048})),
                              b.weight("w", T(DType::Q6_K, {4, 45, 2048})),
                              b.input("ids", T(DType::I32, {2, 3}))));
        },
        {}, o);
    EXPECT_TRUE(contains(only(expert), on ? "using Dec0 = fg::DecQ6_KW;" : "using Dec0 = fg::DecQ6_K;"));
  }
  // iq4_nl through the wide loop (EmitOptions::gemvWideIq4nl, default).
  for (bool on : {false, true}) {
    EmitOptions o;
    o.gemvWideIq4nl = on;
    auto ls = emitAll(
        [&](Builder &b) {
          b.result(b.create(OpKind::FusedGatedMatmul,
                            {b.input("x", T(DType::F32, {2, 1024})),
                             b.weight("g", T(DType::IQ4_NL, {40, 1024})),
                             b.weight("u", T(DType::IQ4_NL, {40, 1024}))}));
        },
        {}, o);
    EXPECT_TRUE(contains(only(ls), on ? "using Dec0 = fg::DecIQ4_NLW;" : "using Dec0 = fg::DecIQ4_NL;"));
  }
  // A q4_0 gate with a q4_K up (both wide types) keeps the narrow loop: the
  // wide loop walks both streams by one step size.
  auto mixed = emitAll([&](Builder &b) {
    b.result(b.create(OpKind::FusedGatedMatmul,
                      {b.input("x", T(DType::F32, {1, 1024})), b.weight("g", T(DType::Q4_0, {40, 1024})),
                       b.weight("u", T(DType::Q4_K, {40, 1024}))}));
  });
  EXPECT_TRUE(contains(only(mixed), "using Dec0 = fg::DecQ4_0;"));
  // x as one f16 (EmitOptions::gemvQuantXHalf, the default): the quantised
  // forms, wide (q4_K) and narrow (q8_0), take it and compile, and hi + lo on
  // request; 16-bit weights always keep hi + lo.
  for (bool half : {true, false})
    for (DType wt : {DType::Q4_K, DType::Q8_0, DType::F16}) {
      SCOPED_TRACE(std::string(dtypeName(wt)) + (half ? " half" : " hi + lo"));
      EmitOptions o;
      if (!half)
        o.gemvQuantXHalf = false;
      auto ls = emitAll(
          [&](Builder &b) {
            b.result(
                b.matmul(b.input("x", T(DType::F32, {2, 512})), b.weight("w", T(wt, {100, 512}))));
          },
          {}, o);
      EXPECT_EQ(contains(only(ls), "kXHalf = true"), half && wt != DType::F16);
    }
  // A quantised x is refused with a reason (only weights are decoded).
  Function fn("qx");
  Builder b(fn);
  b.result(b.matmul(b.weight("xq", T(DType::Q8_0, {1, 64})), b.weight("w", T(DType::F16, {8, 64}))));
  ASSERT_TRUE(ok(b.finish()));
  auto r = emitKernel(fn, fn.node(0), contiguousLayouts(fn, fn.node(0)));
  ASSERT_FALSE(static_cast<bool>(r));
  EXPECT_NE(llvm::toString(r.takeError()).find("block-quantised operand 0"), std::string::npos);
}

/// The q4_K GEMV at T = 1 on DP4A (EmitOptions::gemvDp4a, gemv_dp4a.cuh):
/// the K-warps cover every quarter super-block, up to 8 warps a block, a grid
/// of the blocks that fit 16 warps per SM; every dense form at T = 1
/// (plain, residual, gated with biases, f16 x, the norm prologue) takes it,
/// T = 2 and expert-indexed launches keep the tensor cores.
TEST(CudaEmit, Q4KDp4aGemv) {
  EmitOptions o;
  o.gemvDp4a = 2; // every eligible launch (the rule, 1, is checked below)
  struct Shape {
    int64_t N, K;
    const char *split;
    unsigned block, grid, perSm;
  };
  const Shape shapes[] = {
      {4096, 4096, "kKWarps = 2, kRowWarps = 4, kRowUnroll = 2", 256, 264, 2},
      {4096, 14336, "kKWarps = 7, kRowWarps = 1, kRowUnroll = 2", 224, 264, 2},
      {77, 1280, "kKWarps = 1, kRowWarps = 8, kRowUnroll = 2", 256, 5, 2}};
  for (const Shape &s : shapes) {
    SCOPED_TRACE(s.split);
    auto ls = emitAll(
        [&](Builder &b) {
          b.result(b.matmul(b.input("x", T(DType::F32, {1, s.K})),
                            b.weight("w", T(DType::Q4_K, {s.N, s.K}))));
        },
        {}, o);
    const KernelSpec &k = only(ls);
    EXPECT_TRUE(contains(k, "fg::gemvDp4a<CfgD>("));
    EXPECT_TRUE(contains(k, s.split));
    // Cfg::kWarps (the norm prologue's split) is the block's warps.
    EXPECT_TRUE(contains(k, "kWarps = " + std::to_string(s.block / 32) + ","));
    EXPECT_EQ(k.block[0], s.block);
    EXPECT_EQ(k.grid[0], s.grid);
    EXPECT_TRUE(contains(k, "__launch_bounds__(" + std::to_string(s.block) + ", " +
                                std::to_string(s.perSm) + ")"));
  }
  auto dp4a = [&](const BuildFn &build) {
    auto ls = emitAll(build, {}, o);
    return !ls.empty() && contains(kernel(ls, ls.size() - 1), "fg::gemvDp4a<CfgD>(");
  };
  EXPECT_TRUE(dp4a([](Builder &b) {
    b.result(b.create(OpKind::FusedMatmulAdd,
                      {b.input("x", T(DType::F32, {1, 512})), b.weight("w", T(DType::Q4_K, {77, 512})),
                       b.input("r", T(DType::F32, {1, 77}))}));
  }));
  EXPECT_TRUE(dp4a([](Builder &b) {
    b.result(b.create(OpKind::FusedGatedMatmul,
                      {b.input("x", T(DType::F32, {1, 512})), b.weight("g", T(DType::Q4_K, {40, 512})),
                       b.weight("u", T(DType::Q4_K, {40, 512})),
                       b.weight("bg", T(DType::F32, {40})), b.weight("bu", T(DType::F32, {40}))}));
  }));
  EXPECT_TRUE(dp4a([](Builder &b) {
    b.result(b.matmul(b.input("x", T(DType::F16, {1, 512})), b.weight("w", T(DType::Q4_K, {77, 512}))));
  }));
  for (bool gated : {false, true})
    EXPECT_TRUE(dp4a([&](Builder &b) {
      auto x = b.input("x", T(DType::F32, {1, 512}));
      auto g = b.weight("g", T(DType::F32, {512}));
      auto w = b.weight("w", T(DType::Q4_K, {77, 512}));
      if (gated)
        b.result(b.create(op::FusedRmsNormGatedMatmulArgs{
            .x = x, .normW = g, .wGate = w, .wUp = b.weight("u", T(DType::Q4_K, {77, 512})),
            .eps = 1e-5}));
      else
        b.result(b.create(op::FusedRmsNormMatmulArgs{.x = x, .normW = g, .w = w, .eps = 1e-5}));
    })) << gated;
  // q8_0 and q4_0 on DP4A too: their wide decoders' rows (q4_0: K a multiple
  // of 512, a 512-weight k-step, so one K-warp covers 4096), one row a warp,
  // read by whole warps (dense launches' default).
  struct TypeShape {
    DType w;
    int64_t K;
    const char *cfg;
  };
  const TypeShape typed[] = {
      {DType::Q8_0, 4096, "using D = fg::Dp4aWarpOf<fg::Dp4aQ8_0>;\n  static constexpr int kKWarps = 2, kRowWarps = 4, kRowUnroll = 1, kCombine = 4, kL2Ahead = 0, kStages = 0;"},
      {DType::Q4_0, 4096, "using D = fg::Dp4aWarpOf<fg::Dp4aQ4_0>;\n  static constexpr int kKWarps = 1, kRowWarps = 8, kRowUnroll = 1, kCombine = 1, kL2Ahead = 0, kStages = 0;"},
      {DType::Q4_0, 14336, "using D = fg::Dp4aWarpOf<fg::Dp4aQ4_0>;\n  static constexpr int kKWarps = 4, kRowWarps = 2, kRowUnroll = 1, kCombine = 4, kL2Ahead = 0, kStages = 0;"}};
  for (const TypeShape &ts : typed) {
    SCOPED_TRACE(std::string(dtypeName(ts.w)) + " K " + std::to_string(ts.K));
    auto ls = emitAll(
        [&](Builder &b) {
          b.result(b.matmul(b.input("x", T(DType::F32, {1, ts.K})), b.weight("w", T(ts.w, {1001, ts.K}))));
        },
        {}, o);
    EXPECT_TRUE(contains(only(ls), ts.cfg));
  }
  for (DType w : {DType::Q8_0, DType::Q4_0})
    EXPECT_TRUE(dp4a([&](Builder &b) {
      b.result(b.create(OpKind::FusedGatedMatmul,
                        {b.input("x", T(DType::F32, {1, 1024})), b.weight("g", T(w, {40, 1024})),
                         b.weight("u", T(w, {40, 1024}))}));
    })) << dtypeName(w);
  // Two rows of x, and q4_0 rows of a K that is not whole 512-weight groups
  // (below), keep their kernels.
  EXPECT_FALSE(dp4a([](Builder &b) {
    b.result(b.matmul(b.input("x", T(DType::F32, {2, 512})), b.weight("w", T(DType::Q4_K, {77, 512}))));
  }));
  // Expert-indexed: one grid row per (token, slot) pair, both streams.
  {
    auto ls = emitAll(
        [](Builder &b) {
          b.result(b.matmulId(b.input("x", T(DType::F32, {3, 1, 512})),
                              b.weight("w", T(DType::Q4_K, {8, 45, 512})),
                              b.input("ids", T(DType::I32, {3, 2}))));
        },
        {}, o);
    const KernelSpec &k = only(ls);
    EXPECT_TRUE(contains(k, "fg::gemvDp4a<CfgD>("));
    EXPECT_TRUE(contains(k, "kExpert = true"));
    EXPECT_EQ(k.grid[1], 6u);
    EXPECT_EQ(k.grid[0], 3u); // 45 rows in tiles of 16
  }
  auto gatedIdOf = [](DType w) {
    return [w](Builder &b) {
      b.result(b.create(OpKind::FusedGatedMatmulId,
                        {b.input("x", T(DType::F32, {2, 1, 512})), b.weight("g", T(w, {8, 40, 512})),
                         b.weight("u", T(w, {8, 40, 512})), b.input("ids", T(DType::I32, {2, 4}))}));
    };
  };
  EXPECT_TRUE(dp4a(gatedIdOf(DType::Q4_0)));
  // The rule takes expert-indexed launches (they have no prefetch prologue)
  // of q4_K, q8_0 and q4_0 (q4_0 only with x shared a block; 1 is the
  // default); 3 (the rule for dense launches only) none.
  o.gemvDp4a = 1;
  EXPECT_EQ(EmitOptions{}.gemvDp4a, 1);
  EXPECT_TRUE(dp4a(gatedIdOf(DType::Q4_K)));
  EXPECT_TRUE(dp4a(gatedIdOf(DType::Q8_0)));
  EXPECT_TRUE(dp4a(gatedIdOf(DType::Q4_0)));
  o.gemvDp4aShareX = false;
  EXPECT_FALSE(dp4a(gatedIdOf(DType::Q4_0)));
  EXPECT_TRUE(dp4a(gatedIdOf(DType::Q8_0)));
  o.gemvDp4aShareX = true;
  o.gemvDp4a = 3;
  EXPECT_FALSE(dp4a(gatedIdOf(DType::Q4_K)));
  for (DType w : {DType::Q4_K, DType::Q8_0, DType::Q4_0}) // 9.4, 17.8, 9.4 MB, dense
    EXPECT_TRUE(dp4a([w](Builder &b) {
      b.result(b.matmul(b.input("x", T(DType::F32, {1, 4096})), b.weight("w", T(w, {4096, 4096}))));
    })) << dtypeName(w);
  o.gemvDp4a = 2;
  EXPECT_FALSE(dp4a([](Builder &b) {
    b.result(b.matmul(b.input("x", T(DType::F32, {1, 768})), b.weight("w", T(DType::Q4_0, {77, 768}))));
  }));
  // q6_K on DP4A over DecQ6_KW's rows (K a multiple of 2048), one stream
  // and gated: by default read by whole warps (Dp4aQ6KWarp: 17 registers
  // of loads a row, so q4_K's warps and two tiles ahead: 8 warps a block at
  // K 2048, two blocks an SM); each lane its own bytes (gemvDp4aQ6kWarp
  // off: 33 registers a row, so half the warps, one block an SM, one tile).
  EXPECT_TRUE(dp4a([](Builder &b) {
    b.result(b.matmul(b.input("x", T(DType::F32, {1, 2048})), b.weight("w", T(DType::Q6_K, {77, 2048}))));
  }));
  EXPECT_TRUE(EmitOptions{}.gemvDp4aQ6kWarp);
  for (bool warp : {true, false}) {
    SCOPED_TRACE(warp ? "whole warps" : "lane by lane");
    EmitOptions ow = o;
    ow.gemvDp4aQ6kWarp = warp;
    auto ls = emitAll(
        [](Builder &b) {
          b.result(b.create(OpKind::FusedGatedMatmul,
                            {b.input("x", T(DType::F32, {1, 2048})), b.weight("g", T(DType::Q6_K, {40, 2048})),
                             b.weight("u", T(DType::Q6_K, {40, 2048}))}));
        },
        {}, ow);
    EXPECT_TRUE(contains(only(ls), std::string("using D = fg::") + (warp ? "Dp4aQ6KWarp" : "Dp4aQ6K") +
                                       ";\n  static constexpr int kKWarps = 1, kRowWarps = 8, "
                                       "kRowUnroll = 1, kCombine = 1, kL2Ahead = 0, kStages = 0;\n"
                                       "  static constexpr int kAhead = " + (warp ? "2;" : "1;")));
    EXPECT_TRUE(contains(only(ls), warp ? "__launch_bounds__(256, 2)" : "__launch_bounds__(256, 1)"));
  }
  EXPECT_FALSE(dp4a([](Builder &b) { // not whole 2048-weight groups: DecQ6_K's rows
    b.result(b.matmul(b.input("x", T(DType::F32, {1, 1280})), b.weight("w", T(DType::Q6_K, {77, 1280}))));
  }));
  // The rules take q6_K only with gemvDp4aQ6k (on by default; 14 MB, dense).
  {
    auto q6 = [](Builder &b) {
      b.result(b.matmul(b.input("x", T(DType::F32, {1, 4096})), b.weight("w", T(DType::Q6_K, {4096, 4096}))));
    };
    EmitOptions r; // the defaults: the rule (1), q6_K in it
    auto ruled = [&](const EmitOptions &eo) {
      auto ls = emitAll(q6, {}, eo);
      return contains(only(ls), "fg::gemvDp4a<CfgD>(");
    };
    EXPECT_TRUE(ruled(r));
    r.gemvDp4aQ6k = false;
    EXPECT_FALSE(ruled(r));
  }
  // The rule: weights above the prefetch prologue's limit (4 MiB) only.
  o.gemvDp4a = 1;
  EXPECT_FALSE(dp4a([](Builder &b) { // 2.4 MB
    b.result(b.matmul(b.input("x", T(DType::F32, {1, 4096})), b.weight("w", T(DType::Q4_K, {1024, 4096}))));
  }));
  EXPECT_TRUE(dp4a([](Builder &b) { // 9.4 MB
    b.result(b.matmul(b.input("x", T(DType::F32, {1, 4096})), b.weight("w", T(DType::Q4_K, {4096, 4096}))));
  }));
  // ... and above gemvDp4aMinWeightBytes (4 MiB by default, the prologue's
  // own limit): W-moe-12's q (4.7 MB) takes DP4A; at 8 MiB it keeps the
  // tensor cores, without the prologue.
  auto moeQ = [](Builder &b) { // 4.7 MB
    b.result(b.matmul(b.input("x", T(DType::F32, {1, 2048})), b.weight("w", T(DType::Q4_K, {4096, 2048}))));
  };
  EXPECT_EQ(EmitOptions{}.gemvDp4aMinWeightBytes, 4 << 20);
  EXPECT_TRUE(dp4a(moeQ));
  o.gemvDp4aMinWeightBytes = 8 << 20;
  EXPECT_FALSE(dp4a(moeQ));
  {
    auto ls = emitAll(moeQ, {}, o);
    EXPECT_TRUE(contains(kernel(ls, ls.size() - 1), "kPfBlocks = 0LL, kPfBytes = 0LL"));
  }
  o.gemvDp4aMinWeightBytes = 0;
  EXPECT_TRUE(dp4a(moeQ));
  // x quantised once a block (the default): the flag in the Cfg, and the
  // kernel compiles (q4_K: one run a row group; q4_0 at K 4096: pairs of runs).
  {
    EXPECT_TRUE(contains(only(emitAll(moeQ, {}, o)), "kShareX = true;"));
    EmitOptions so = o;
    so.gemvDp4aShareX = false;
    EXPECT_TRUE(contains(only(emitAll(moeQ, {}, so)), "kShareX = false;"));
    so.gemvDp4aShareX = true;
    so.gemvDp4aCombine = 4; // one K-warp (K 2048): nothing to combine, the Cfg says 1
    EXPECT_TRUE(contains(only(emitAll(moeQ, {}, so)), "kRowUnroll = 2, kCombine = 1, kL2Ahead = 0, kStages = 0;"));
    // One stream with two K-warps (K 4096): the combine's code path compiles.
    EXPECT_TRUE(contains(only(emitAll(
                             [](Builder &b) {
                               b.result(b.matmul(b.input("x", T(DType::F32, {1, 4096})),
                                                 b.weight("w", T(DType::Q4_K, {4096, 4096}))));
                             },
                             {}, so)),
                         "kKWarps = 2, kRowWarps = 4, kRowUnroll = 2, kCombine = 4, kL2Ahead = 0, kStages = 0;"));
    so.gemvDp4a = 2;
    for (DType w : {DType::Q4_K, DType::Q8_0, DType::Q4_0}) {
      auto ls = emitAll(
          [w](Builder &b) {
            b.result(b.create(OpKind::FusedGatedMatmul,
                              {b.input("x", T(DType::F32, {1, 4096})), b.weight("g", T(w, {300, 4096})),
                               b.weight("u", T(w, {300, 4096}))}));
          },
          {}, so);
      EXPECT_TRUE(contains(only(ls), "kShareX = true;")) << dtypeName(w);
    }
    // Tiles asked of L2 ahead (EmitOptions::gemvDp4aL2Ahead): in the Cfg,
    // and every type compiles with it, gated, expert-indexed (the prefetch
    // after the expert is read) and one stream.
    so.gemvDp4aL2Ahead = 2;
    for (DType w : {DType::Q4_K, DType::Q8_0, DType::Q4_0, DType::Q6_K}) {
      SCOPED_TRACE(dtypeName(w));
      EXPECT_TRUE(contains(only(emitAll(
                               [w](Builder &b) {
                                 b.result(b.create(OpKind::FusedGatedMatmul,
                                                   {b.input("x", T(DType::F32, {1, 2048})),
                                                    b.weight("g", T(w, {300, 2048})),
                                                    b.weight("u", T(w, {300, 2048}))}));
                               },
                               {}, so)),
                           "kL2Ahead = 2, kStages = 0;"));
      auto id = emitAll(
          [w](Builder &b) {
            b.result(b.matmulId(b.input("x", T(DType::F32, {3, 1, 2048})),
                                b.weight("w", T(w, {8, 45, 2048})),
                                b.input("ids", T(DType::I32, {3, 2}))));
          },
          {}, so);
      EXPECT_TRUE(contains(only(id), "kL2Ahead = 2, kStages = 0;"));
      EXPECT_TRUE(contains(only(id), "kExpert = true"));
    }
    so.gemvDp4aL2Ahead = 9; // clamped to 8
    EXPECT_TRUE(contains(only(emitAll(moeQ, {}, so)), "kL2Ahead = 8, kStages = 0;"));
    // The staged ring (EmitOptions::gemvDp4aStages): q4_K only, as many
    // stages as fit two 256-thread blocks an SM in 200 KiB (4 x 24 KiB at
    // 2 rows a warp), the ring as dynamic shared memory, no L2 tiles ahead.
    // q4_K read lane by lane: read by whole warps it takes no ring.
    so.gemvDp4aL2Ahead = 2;
    so.gemvDp4aStages = 8;
    so.gemvDp4aWarpLoad = false;
    auto dense = [](DType w) {
      return [w](Builder &b) {
        b.result(b.matmul(b.input("x", T(DType::F32, {1, 4096})), b.weight("w", T(w, {4096, 4096}))));
      };
    };
    const KernelSpec q4k = only(emitAll(dense(DType::Q4_K), {}, so));
    EXPECT_TRUE(contains(q4k, "kL2Ahead = 0, kStages = 4;\n  static constexpr int kAhead = 1;"));
    EXPECT_EQ(q4k.sharedBytes, 4u * 2 * 3 * 16 * 256); // stages x rows x units x 16 B x threads
    const KernelSpec q80 = only(emitAll(dense(DType::Q8_0), {}, so));
    EXPECT_TRUE(contains(q80, "kL2Ahead = 2, kStages = 0;"));
    EXPECT_EQ(q80.sharedBytes, 0u);
    // Rows read by whole warps: dense launches by default
    // (gemvDp4aWarpLoad), expert-indexed ones by the rule of
    // gemvDp4aWarpLoadExperts (-1: q8_0 only), every type at 1, none at 0.
    // The policy wraps the type's, and q4_K takes no ring with it.
    EXPECT_TRUE(EmitOptions{}.gemvDp4aWarpLoad);
    EXPECT_EQ(EmitOptions{}.gemvDp4aWarpLoadExperts, -1);
    so.gemvDp4aWarpLoad = true;
    auto experts8 = [](DType w) {
      return [w](Builder &b) {
        b.result(b.matmulId(b.input("x", T(DType::F32, {3, 1, 2048})), b.weight("w", T(w, {8, 45, 2048})),
                            b.input("ids", T(DType::I32, {3, 2}))));
      };
    };
    for (DType w : {DType::Q4_K, DType::Q8_0, DType::Q4_0}) {
      const KernelSpec k = only(emitAll(dense(w), {}, so));
      const std::string policy = w == DType::Q4_K ? "Dp4aQ4K" : w == DType::Q8_0 ? "Dp4aQ8_0" : "Dp4aQ4_0";
      EXPECT_TRUE(contains(k, "using D = fg::Dp4aWarpOf<fg::" + policy + ">;")) << dtypeName(w);
      EXPECT_TRUE(contains(k, "kStages = 0;")) << dtypeName(w);
      EXPECT_EQ(k.sharedBytes, 0u) << dtypeName(w);
      const std::string lanes = "using D = fg::" + policy + ";",
                        warps = "using D = fg::Dp4aWarpOf<fg::" + policy + ">;";
      EXPECT_TRUE(contains(only(emitAll(experts8(w), {}, so)), w == DType::Q8_0 ? warps : lanes))
          << dtypeName(w) << ": the rule";
      so.gemvDp4aWarpLoadExperts = 1;
      EXPECT_TRUE(contains(only(emitAll(experts8(w), {}, so)), warps)) << dtypeName(w);
      so.gemvDp4aWarpLoadExperts = 0;
      EXPECT_TRUE(contains(only(emitAll(experts8(w), {}, so)), lanes)) << dtypeName(w);
      so.gemvDp4aWarpLoadExperts = -1;
    }
    so.gemvDp4aWarpLoad = false;
    so.gemvDp4aStages = 0;
    so.gemvDp4aL2Ahead = 0;
    // Tiles held in registers ahead (EmitOptions::gemvDp4aAhead): the rule
    // (0) gives a dense q4_K launch two (and q6_K read by whole warps, the
    // default), expert-indexed ones and the other types one; an asked
    // number, clamped to 1..3, goes to every launch.
    EXPECT_TRUE(contains(only(emitAll(dense(DType::Q4_K), {}, so)), "kAhead = 2;"));
    EXPECT_TRUE(contains(only(emitAll(dense(DType::Q6_K), {}, so)), "kAhead = 2;"));
    so.gemvDp4aQ6kWarp = false;
    const KernelSpec experts = only(emitAll(
        [](Builder &b) {
          b.result(b.matmulId(b.input("x", T(DType::F32, {3, 1, 2048})),
                              b.weight("w", T(DType::Q4_K, {8, 45, 2048})),
                              b.input("ids", T(DType::I32, {3, 2}))));
        },
        {}, so));
    EXPECT_TRUE(contains(experts, "kExpert = true"));
    EXPECT_TRUE(contains(experts, "kAhead = 1;"));
    for (DType w : {DType::Q8_0, DType::Q4_0, DType::Q6_K})
      EXPECT_TRUE(contains(only(emitAll(dense(w), {}, so)), "kAhead = 1;")) << dtypeName(w);
    so.gemvDp4aQ6kWarp = true;
    so.gemvDp4aAhead = 5;
    EXPECT_TRUE(contains(only(emitAll(dense(DType::Q8_0), {}, so)), "kAhead = 3;"));
    so.gemvDp4aAhead = 1;
    EXPECT_TRUE(contains(only(emitAll(dense(DType::Q4_K), {}, so)), "kAhead = 1;"));
    so.gemvDp4aAhead = 0;
    // q6_K's own warps an SM and tiles ahead (gemvDp4aQ6kWarpTarget /
    // gemvDp4aQ6kAhead): half the blocks at 8 warps, 3 ahead; q4_K keeps its own.
    const unsigned q6Blocks = only(emitAll(dense(DType::Q6_K), {}, so)).grid[0];
    so.gemvDp4aQ6kWarpTarget = 8;
    so.gemvDp4aQ6kAhead = 3;
    const KernelSpec q6 = only(emitAll(dense(DType::Q6_K), {}, so));
    EXPECT_TRUE(contains(q6, "kAhead = 3;"));
    EXPECT_EQ(q6.grid[0] * 2, q6Blocks);
    EXPECT_TRUE(contains(only(emitAll(dense(DType::Q4_K), {}, so)), "kAhead = 2;")); // its rule
    EXPECT_TRUE(contains(only(emitAll(dense(DType::Q8_0), {}, so)), "kAhead = 1;"));
    so.gemvDp4aQ6kWarpTarget = 0;
    so.gemvDp4aQ6kAhead = 0;
    // q, k and v merged on DP4A (fused.rms_norm_matmul_multi): one Cfg a
    // segment over one split, the entry's pointers in the segments' order
    // and the norm weight last; the grid the resident blocks.
    auto merged = only(emitAll(
        [](Builder &b) {
          std::vector<ValueId> ops{b.input("x", T(DType::F32, {1, 4096})),
                                   b.weight("g", T(DType::F32, {4096})),
                                   b.weight("wq", T(DType::Q4_K, {4096, 4096})),
                                   b.weight("wk", T(DType::Q4_K, {1024, 4096})),
                                   b.weight("wv", T(DType::Q4_K, {1024, 4096}))};
          b.result(b.create(OpKind::FusedRmsNormMatmulMulti, ops,
                            {{"eps", Attribute::ofFloat(1e-5)}}));
        },
        {}, so));
    EXPECT_TRUE(contains(merged, "fg::gemvDp4aMulti<Multi>("));
    EXPECT_EQ(merged.form, KernelForm::Dp4aGemv); // not charged as the tensor-core merge
    EXPECT_TRUE(contains(merged, "struct Seg2D : Seg2"));
    EXPECT_TRUE(contains(merged, "kNorm = true"));
    EXPECT_TRUE(contains(merged, "kNormDeferred = true;")); // the default since the eighteenth session
    // The rstd deferred to the stores (EmitOptions::gemvDp4aNormDeferred):
    // in the Cfg, and it compiles where a K-warp holds all of K (q4_K K =
    // 1024), where K-warps meet in shared memory with x shared (4096) and
    // without it (q8_0 / q4_0 / q6_K at 14336: one row group), gated and merged.
    auto qk = [](Builder &b) {
      std::vector<ValueId> ops{b.input("x", T(DType::F32, {1, 4096})),
                               b.weight("g", T(DType::F32, {4096})),
                               b.weight("wq", T(DType::Q4_K, {4096, 4096})),
                               b.weight("wk", T(DType::Q4_K, {1024, 4096}))};
      b.result(b.create(OpKind::FusedRmsNormMatmulMulti, ops, {{"eps", Attribute::ofFloat(1e-5)}}));
    };
    for (bool deferred : {false, true}) {
      so.gemvDp4aNormDeferred = deferred;
      EXPECT_TRUE(contains(only(emitAll(qk, {}, so)),
                           deferred ? "kNormDeferred = true;" : "kNormDeferred = false;"));
    }
    for (auto [w, K] : {std::pair{DType::Q4_K, int64_t{1024}}, std::pair{DType::Q4_K, int64_t{4096}},
                        std::pair{DType::Q8_0, int64_t{14336}}, std::pair{DType::Q4_0, int64_t{14336}},
                        std::pair{DType::Q6_K, int64_t{14336}}}) {
      SCOPED_TRACE(std::string(dtypeName(w)) + " K " + std::to_string(K));
      for (bool gated : {false, true}) {
        const KernelSpec k = only(emitAll(
            [&, w = w, K = K](Builder &b) {
              std::vector<ValueId> ops{b.input("x", T(DType::F32, {1, K})),
                                       b.weight("g", T(DType::F32, {K})),
                                       b.weight("w0", T(w, {300, K}))};
              if (gated)
                ops.push_back(b.weight("w1", T(w, {300, K})));
              b.result(b.create(gated ? OpKind::FusedRmsNormGatedMatmul : OpKind::FusedRmsNormMatmul,
                                ops, {{"eps", Attribute::ofFloat(1e-5)}}));
            },
            {}, so));
        EXPECT_TRUE(contains(k, "kNorm = true")) << gated;
        EXPECT_TRUE(contains(k, "kNormDeferred = true;")) << gated;
      }
    }
    so.gemvDp4aNormDeferred = true; // the default
    // Each row's bias and addend loaded when its tile starts
    // (EmitOptions::gemvEarlyExtras): in the Cfg, and it compiles for
    // fused.matmul_add where K-warps combine every 4 tiles (q4_K K = 4096,
    // 14336), where one K-warp holds all of K (1024), and every tile
    // (FG_DEBUG_DP4A_COMBINE=1's form, q8_0), and for the gated GEMV's biases.
    so.gemvEarlyExtras = true;
    for (auto [w, K, combine] : {std::tuple{DType::Q4_K, int64_t{4096}, 4},
                                 std::tuple{DType::Q4_K, int64_t{14336}, 4},
                                 std::tuple{DType::Q4_K, int64_t{1024}, 4},
                                 std::tuple{DType::Q8_0, int64_t{4096}, 1}}) {
      SCOPED_TRACE(std::string(dtypeName(w)) + " K " + std::to_string(K));
      so.gemvDp4aCombine = combine;
      const KernelSpec k = only(emitAll(
          [&, w = w, K = K](Builder &b) {
            b.result(b.create(OpKind::FusedMatmulAdd, {b.input("x", T(DType::F32, {1, K})),
                                                       b.weight("w", T(w, {300, K})),
                                                       b.input("r", T(DType::F32, {1, 300}))}));
          },
          {}, so));
      EXPECT_TRUE(contains(k, "kRes = true"));
      EXPECT_TRUE(contains(k, "kEarlyExtras = true,"));
    }
    so.gemvDp4aCombine = EmitOptions{}.gemvDp4aCombine;
    // ... and on the other GEMV forms: lanes over K (f16 at T = 1), the
    // tensor cores (f16 at T = 5, q4_K at T = 3), with a residual or biases.
    for (auto [w, M] : {std::pair{DType::F16, int64_t{1}}, std::pair{DType::F16, int64_t{5}},
                        std::pair{DType::Q4_K, int64_t{3}}}) {
      SCOPED_TRACE(std::string(dtypeName(w)) + " M " + std::to_string(M));
      const KernelSpec k = only(emitAll(
          [&, w = w, M = M](Builder &b) {
            b.result(b.create(OpKind::FusedMatmulAdd, {b.input("x", T(DType::F32, {M, 512})),
                                                       b.weight("w", T(w, {300, 512})),
                                                       b.input("r", T(DType::F32, {M, 300}))}));
          },
          {}, so));
      EXPECT_TRUE(contains(k, "kEarlyExtras = true,"));
      EXPECT_FALSE(contains(k, "gemvDp4a<"));
    }
    // The gated GEMV's biases, lanes over K (f16) and DP4A (q4_K).
    for (auto [w, K] : {std::pair{DType::F16, int64_t{512}}, std::pair{DType::Q4_K, int64_t{2048}}}) {
      SCOPED_TRACE(dtypeName(w));
      const KernelSpec k = only(emitAll(
          [&, w = w, K = K](Builder &b) {
            b.result(b.create(OpKind::FusedGatedMatmul,
                              {b.input("x", T(DType::F32, {1, K})), b.weight("g", T(w, {300, K})),
                               b.weight("u", T(w, {300, K})), b.weight("bg", T(DType::F32, {300})),
                               b.weight("bu", T(DType::F32, {300}))}));
          },
          {}, so));
      EXPECT_TRUE(contains(k, "kBias = true"));
      EXPECT_TRUE(contains(k, "kEarlyExtras = true,"));
    }
    so.gemvEarlyExtras = false;

    EXPECT_EQ(merged.grid[0], 132u * 2);
    std::vector<Param> want{Param::result(0), Param::result(1), Param::result(2),
                            Param::operand(0), Param::operand(2), Param::operand(3),
                            Param::operand(4), Param::operand(1)};
    EXPECT_EQ(merged.params, want);
  }
  // ... and every launch when the prologues are off.
  o.pdlPrefetchBytes = 0;
  EXPECT_TRUE(dp4a([](Builder &b) {
    b.result(b.matmul(b.input("x", T(DType::F32, {1, 4096})), b.weight("w", T(DType::Q4_K, {1024, 4096}))));
  }));
  // K past 16384 (more than 8 K-warps) keeps the tensor cores.
  o.gemvDp4a = 2;
  EXPECT_FALSE(dp4a([](Builder &b) {
    b.result(b.matmul(b.input("x", T(DType::F32, {1, 16640})), b.weight("w", T(DType::Q4_K, {64, 16640}))));
  }));
  o.gemvDp4a = 0;
  EXPECT_FALSE(dp4a([](Builder &b) {
    b.result(b.matmul(b.input("x", T(DType::F32, {1, 4096})), b.weight("w", T(DType::Q4_K, {4096, 4096}))));
  }));
}


/// q5_0, q5_1, q5_k, q2_k, q3_k, iq4_nl and iq4_xs (decoders written in the fifth
/// session, first run on the H200 in the sixth): every GEMV form takes its
/// decoder (offsets in bytes) and compiles for sm_90, and get_rows gathers from
/// them.
TEST(CudaEmit, NewQuantTypesEveryForm) {
  const std::pair<DType, const char *> kTypes[] = {{DType::Q5_0, "fg::DecQ5_0"},
                                                   {DType::Q5_1, "fg::DecQ5_1"},
                                                   {DType::Q5_K, "fg::DecQ5_K"},
                                                   {DType::Q2_K, "fg::DecQ2_K"},
                                                   {DType::Q3_K, "fg::DecQ3_K"},
                                                   {DType::IQ4_NL, "fg::DecIQ4_NL"},
                                                   {DType::IQ4_XS, "fg::DecIQ4_XS"}};
  for (const auto &type : kTypes) {
    const DType wt = type.first; // not a structured binding: clang 14 cannot capture one
    const char *decoder = type.second;
    SCOPED_TRACE(dtypeName(wt));
    const std::string dec = std::string("using Dec0 = ") + decoder;
    const int64_t be = dtypeInfo(wt).blockElems;
    int64_t K = be == 256 ? 512 : 288, rowBytes = K / be * dtypeInfo(wt).blockBytes;
    auto dense = [&](Builder &b) {
      b.result(b.matmul(b.input("x", T(DType::F32, {1, K})), b.weight("w", T(wt, {77, K}))));
    };
    auto ls = emitAll(dense);
    const KernelSpec &k = only(ls);
    EXPECT_TRUE(contains(k, dec));
    EXPECT_TRUE(contains(k, "w0_ld = " + std::to_string(rowBytes) + "LL"));
    auto g = emitAll([&](Builder &b) {
      b.result(b.create(OpKind::FusedGatedMatmul,
                        {b.input("x", T(DType::F32, {3, K})), b.weight("g", T(wt, {40, K})),
                         b.weight("u", T(wt, {40, K}))}));
    });
    EXPECT_TRUE(contains(only(g), std::string("using Dec1 = ") + decoder));
    auto e = emitAll([&](Builder &b) {
      b.result(b.matmulId(b.input("x", T(DType::F32, {3, 1, K})), b.weight("w", T(wt, {8, 45, K})),
                          b.input("ids", T(DType::I32, {3, 2}))));
    });
    EXPECT_TRUE(contains(only(e), dec));
    auto r = emitAll([&](Builder &b) {
      b.result(b.getRows(b.weight("table", T(wt, {50, K})), b.input("ids", T(DType::I32, {3}))));
    });
    EXPECT_TRUE(contains(only(r), "fg::dequantRows<Cfg>"));
  }
}

/// Quantised rows decoded by kernels/dequant.cuh: get_rows of a [V, K] table
/// (ids gathered from device memory), and a prefill-sized matmul: the weight
/// decoded to f16 in scratch after x's f16 copy, then cuBLAS on f16.
TEST(CudaEmit, QuantisedGetRowsAndPrefillMatmul) {
  for (DType wt : {DType::Q8_0, DType::Q4_0, DType::Q4_1, DType::Q4_K, DType::Q6_K}) {
    SCOPED_TRACE(dtypeName(wt));
    int64_t K = dtypeInfo(wt).blockElems == 256 ? 512 : 96;
    auto g = emitAll([&](Builder &b) {
      b.result(b.getRows(b.weight("table", T(wt, {50, K})), b.input("ids", T(DType::I32, {3}))));
    });
    const KernelSpec &k = only(g);
    EXPECT_TRUE(contains(k, "fg::dequantRows<Cfg>"));
    EXPECT_TRUE(contains(k, "kGather = true"));
    EXPECT_EQ(k.params, (std::vector<Param>{Param::result(0), Param::operand(0), Param::operand(1)}));
    auto ls = emitAll([&](Builder &b) {
      auto x = b.input("x", T(DType::F32, {16, K}));
      b.result(b.matmul(x, b.weight("w", T(wt, {40, K}))));
    });
    ASSERT_EQ(ls.size(), 3u);
    const KernelSpec &deq = kernel(ls, 0);
    EXPECT_TRUE(contains(deq, "kGather = false"));
    EXPECT_EQ(deq.params, (std::vector<Param>{Param::scratch(), Param::operand(1)}));
    const auto &gemm = std::get<CublasGemmSpec>(ls[2]);
    EXPECT_EQ(gemm.aType, DType::F16);
    EXPECT_EQ(gemm.bType, DType::F16);
    uint64_t xBytes = (16 * K * 2 + 255) / 256 * 256;
    EXPECT_EQ(gemm.a.byteOffset, xBytes);
    EXPECT_EQ(gemm.scratchBytes, xBytes + 40 * K * 2);
    EXPECT_EQ(deq.scratchBytes, gemm.scratchBytes);
    EXPECT_EQ(deq.grid[0], unsigned((40 * (K / 32) * 4 + 255) / 256));
  }
}

/// fused.gated_gemm (a prefill chunk's gate|up, GatedGemm.cpp): the stacked
/// GEMM into scratch (T x 2N values of the result's 16-bit type, f32 with
/// EmitOptions::gatedGemmNarrowC off; C's leading dimension 2N, A the gate
/// weight with the up weight as a2 from row N) and the GLU reading the two
/// halves of each scratch row (offsets 0 and N, row stride 2N) by vector
/// loads into the 16-bit result; N % 4 != 0 keeps the scalar form. Quantised
/// weights are decoded into one stacked f16 matrix first.
TEST(CudaEmit, GatedGemmStacksGateAndUp) {
  for (auto [nb, tb, narrowb] :
       {std::tuple<int64_t, DType, bool>{96, DType::F16, true}, {50, DType::BF16, true},
        {96, DType::F16, false}, {50, DType::BF16, false}}) {
    const int64_t n = nb; // lambdas capture variables, not structured bindings (clang 14)
    const DType to = tb;
    const bool narrow = narrowb;
    SCOPED_TRACE(std::to_string(n) + (narrow ? " narrow C" : " f32 C"));
    EmitOptions eo;
    eo.gatedGemmNarrowC = narrow;
    const DType ct = narrow ? to : DType::F32;
    const uint64_t ce = narrow ? 2 : 4;
    auto ls = emitAll([&](Builder &b) {
      auto x = b.input("x", T(to, {37, 40}));
      auto wg = b.weight("wg", T(to, {n, 40}));
      auto wu = b.weight("wu", T(to, {n, 40}));
      b.result(b.create(OpKind::FusedGatedGemm, {x, wg, wu},
                        {{"kind", Attribute::ofInt(static_cast<int64_t>(GluKind::GeGLU))},
                         {"dtype", Attribute::ofDType(to)}}));
    }, {}, eo);
    ASSERT_EQ(ls.size(), 2u);
    const auto &g = std::get<CublasGemmSpec>(ls[0]);
    EXPECT_EQ(g.m, 2 * n);
    EXPECT_EQ(g.n, 37);
    EXPECT_EQ(g.k, 40);
    EXPECT_EQ(g.stackRows, n);
    EXPECT_EQ(g.lda, 40);
    EXPECT_EQ(g.ldc, 2 * n);
    EXPECT_EQ(g.aType, to);
    EXPECT_EQ(g.cType, ct);
    EXPECT_TRUE(g.a.param == Param::operand(1));
    EXPECT_TRUE(g.a2.param == Param::operand(2));
    EXPECT_TRUE(g.b.param == Param::operand(0));
    EXPECT_TRUE(g.c.param == Param::scratch());
    EXPECT_EQ(g.scratchBytes, uint64_t(37 * 2 * n) * ce);
    const KernelSpec &k = kernel(ls, 1);
    EXPECT_EQ(k.scratchBytes, g.scratchBytes);
    EXPECT_EQ(k.params,
              (std::vector<Param>{Param::result(0), Param::scratch(), Param::scratch()}));
    const std::string s2 = std::to_string(2 * n) + "LL, 1LL>";
    const std::string in = narrow ? ctypeOf(to) : "float";
    EXPECT_TRUE(contains(k, "fg::EwOp<" + in + ", 0LL, 0LL, 0LL, " + s2));
    EXPECT_TRUE(contains(k, "fg::EwOp<" + in + ", " + std::to_string(n) + "LL, 0LL, 0LL, " + s2));
    EXPECT_TRUE(contains(k, "using Out = " + ctypeOf(to) + ";"));
    EXPECT_TRUE(contains(k, "fg::EwGlu<" + std::to_string(static_cast<int>(GluKind::GeGLU))));
    EXPECT_TRUE(contains(k, n % 4 == 0 ? "kVec = true" : "kVec = false"));
  }
  // EmitOptions::gluGroups: the GLU's threads take that many groups of 4
  // (the grid shrinks by as much); compiled.
  {
    EmitOptions eo;
    eo.gluGroups = 4;
    auto gs = emitAll([&](Builder &b) {
      auto x = b.input("x", T(DType::F16, {37, 40}));
      auto wg = b.weight("wg", T(DType::F16, {96, 40}));
      auto wu = b.weight("wu", T(DType::F16, {96, 40}));
      b.result(b.create(OpKind::FusedGatedGemm, {x, wg, wu},
                        {{"dtype", Attribute::ofDType(DType::F16)}}));
    }, {}, eo);
    ASSERT_EQ(gs.size(), 2u);
    EXPECT_TRUE(contains(kernel(gs, 1), "kGroups = 4"));
    EXPECT_TRUE(contains(kernel(gs, 1), "kVec = true"));
  }
  // q4_K weights: gate's rows then up's decoded by one launch into one f16
  // matrix [2N, K] at the scratch's start, the GEMM over it (nothing to place: no a2), C
  // and the GLU's views after it.
  auto ls = emitAll([&](Builder &b) {
    auto x = b.input("x", T(DType::F16, {37, 256}));
    auto wg = b.weight("wg", T(DType::Q4_K, {96, 256}));
    auto wu = b.weight("wu", T(DType::Q4_K, {96, 256}));
    b.result(b.create(OpKind::FusedGatedGemm, {x, wg, wu},
                      {{"dtype", Attribute::ofDType(DType::F16)}}));
  });
  ASSERT_EQ(ls.size(), 3u);
  const uint64_t wBytes = 2 * 96 * 256 * 2; // 98304, a multiple of 256
  // One launch decodes both: rows 0..95 from gate, 96..191 from up (the pair form).
  const KernelSpec &deq = kernel(ls, 0);
  EXPECT_TRUE(contains(deq, "fg::dequantRows<Cfg>"));
  EXPECT_TRUE(contains(deq, "kPair = true"));
  EXPECT_TRUE(contains(deq, "R = 96LL"));
  EXPECT_EQ(deq.grid[0], unsigned((2 * 96 * (256 / 32) * 4 + 255) / 256));
  EXPECT_EQ(deq.params,
            (std::vector<Param>{Param::scratch(), Param::operand(1), Param::operand(2)}));
  const auto &g = std::get<CublasGemmSpec>(ls[1]);
  EXPECT_EQ(g.m, 192);
  EXPECT_EQ(g.stackRows, 0);
  EXPECT_EQ(g.aType, DType::F16);
  EXPECT_TRUE(g.a.param == Param::scratch());
  EXPECT_EQ(g.a.byteOffset, 0u);
  EXPECT_TRUE(g.c.param == Param::scratch());
  EXPECT_EQ(g.c.byteOffset, wBytes);
  // C in f16: the result's type and the decoded weights'.
  EXPECT_EQ(g.cType, DType::F16);
  EXPECT_EQ(g.scratchBytes, wBytes + 37 * 192 * 2);
  const KernelSpec &glu = kernel(ls, 2);
  const std::string h = ctypeOf(DType::F16);
  EXPECT_TRUE(contains(glu, "fg::EwOp<" + h + ", " + std::to_string(wBytes / 2) + "LL, 0LL, 0LL, 192LL, 1LL>"));
  EXPECT_TRUE(contains(glu, "fg::EwOp<" + h + ", " + std::to_string(wBytes / 2 + 96) + "LL, 0LL, 0LL, 192LL, 1LL>"));
  EXPECT_TRUE(contains(glu, "kVec = true"));
  EXPECT_EQ(glu.scratchBytes, g.scratchBytes);

  // An x whose rows are not evenly spaced (one row broadcast: stride 0) is
  // copied dense to the scratch's start first; C follows it, 256-aligned.
  Layout bcast;
  bcast.shape = {37, 40};
  bcast.strides = {0, 1};
  auto bl = emitAll(
      [&](Builder &b) {
        auto x = b.input("x", T(DType::F16, {37, 40}));
        auto wg = b.weight("wg", T(DType::F16, {96, 40}));
        auto wu = b.weight("wu", T(DType::F16, {96, 40}));
        b.result(b.create(OpKind::FusedGatedGemm, {x, wg, wu},
                          {{"dtype", Attribute::ofDType(DType::F16)}}));
      },
      {bcast, Layout::contiguous({96, 40}), Layout::contiguous({96, 40})});
  ASSERT_EQ(bl.size(), 3u);
  EXPECT_EQ(kernel(bl, 0).params, (std::vector<Param>{Param::scratch(), Param::operand(0)}));
  const auto &bg = std::get<CublasGemmSpec>(bl[1]);
  EXPECT_TRUE(bg.b.param == Param::scratch());
  EXPECT_EQ(bg.b.byteOffset, 0u);
  EXPECT_EQ(bg.ldb, 40);
  EXPECT_EQ(bg.stackRows, 96);
  EXPECT_EQ(bg.c.byteOffset, 3072u); // 37 x 40 x 2 = 2960 bytes, rounded up
  EXPECT_TRUE(contains(kernel(bl, 2), "fg::EwOp<" + h + ", 1536LL, 0LL, 0LL, 192LL, 1LL>"));
}

/// Coverage, checked once every test of the run has finished (a test
/// environment's TearDown: no dependence on test order): when the run was the
/// whole CudaEmit suite (ctest's fg_codegen_tests.whole_suite, or the binary
/// without a filter), every op of ir/Ops.def was emitted by some test, and
/// the compile count stays small. Single-test runs (gtest_discover_tests)
/// skip it.
class EveryOpIsCovered : public ::testing::Environment {
public:
  void TearDown() override {
    std::string filter = ::testing::GTEST_FLAG(filter);
    if (filter != "*" && filter != "CudaEmit.*")
      return;
    for (const OpInfo &op : allOps())
      EXPECT_TRUE(compiled().covered.count(op.kind)) << "no test emits '" << op.mnemonic << "'";
    // 290 before the fifth session's q4_K forms and five opt-in quantised
    // types (about 25 kernels more), 330 before the sixth's matmul_multi
    // segments (11) and wide q4_0 / q8_0 forms (6), 350 before the eighth's
    // two load forms of decode attention (14), the grouped GEMM's 32- and
    // 64-row tiles (10), the elementwise maps' opt-in forms and glu_convert
    // (~12), 395 before the 16-bit norm rows of rms_norm_mul_convert (6),
    // 401 before the tenth's prefetch prologues (2 GEMV, 2 attention
    // sources; the others share their default's) and moe_weighted_sum_add's
    // residual forms (4), 409 before the eleventh's rope_attention (4) and
    // quantised grouped expert GEMM (4 forms + 3 shapes, 2 kernels each, and
    // the GEMV it replaces, off), 428 before the twelfth's 64-wide k-step of
    // the grouped GEMM (10 16-bit forms, 1 quantised),
    // the deferred quantised decode (2) and 256-thread blocks (5 16-bit, 1
    // quantised), 470 before the thirteenth's DP4A GEMV (3 shapes, 6 forms,
    // the size rule with prologues off, and a K past its limit: 12; q8_0 and
    // q4_0: 3 shapes, 2 gated forms, 2 refused: 7; expert-indexed: 2), 494
    // before the fourteenth's rule for q4_K / q8_0 above 8 MiB and the
    // shared x quantisation and the combine every N tiles (3 types + 2) and
    // q6_K on DP4A (6), 512 before the fifteenth's tiles asked of L2 ahead
    // (4 types, gated and expert-indexed, and the clamp: 9) and the grouped
    // test's tensor-core GEMV (1), 525 before the seventeenth's tiles ahead
    // (3), deferred norm (11) and early biases and addends (7 forms), 545
    // before the eighteenth's attention cluster form (5 with its steps and
    // sm_89 checks), the deferred norm as the default (its form before, 1)
    // and q6_K's own warps and tiles ahead (1), 556 before the nineteenth's
    // rows read by whole warps (q6_K's lane form, 1; q4_K, q8_0 and q4_0,
    // 3, of which 2 share other tests' sources), 560 before the twentieth's
    // default of dense rows read by whole warps (the lane forms and the
    // expert-indexed whole-warp forms checked beside it, 5), 565 before the
    // twenty-first's fused.matmul_id_sum_add (4 types), 569 before its
    // fused.rms_norm_matmul_topk_moe (3 router forms), 572 before the
    // twenty-second's router over the whole grid (its rows loaded after the
    // wait for a computed router, and the sm_89 form: 2), 574 before the
    // twenty-fourth's early loads of decode attention (6 cache forms), the
    // kernels triggering before it (3), its 3-step cluster rule at D = 64
    // (2) and q loaded first (6 forms), 595 before the twenty-sixth's
    // fused.matmul_id_sum_add with float experts (f16, bf16, f32: 3; a
    // fourth shape shares a source), 598 before the twenty-eighth's
    // fused.gated_gemm (4 GLU forms, a q4_K pair decoder, a copy of x), 605
    // before the thirtieth's flash kernel with S's head-dim steps outer (4
    // forms), the GLU over f32 gate|up beside the 16-bit default (2), its
    // four groups a thread (1) and fused.attention_convert (f16, bf16), 614
    // before the thirty-first's grouped expert GEMM without its m-tile skip
    // (1), and its fragments by ldmatrix (3 forms, each with its routing
    // kernel, whose source carries the Cfg: 6), 615 once the thirty-second
    // made ldmatrix the only form, before its grouped GEMM over f16 x (2
    // forms with their routing kernels: 4), 619 before the thirty-third's
    // grouped GEMM on integer tensor cores (8 forms of q4_K, q5_K, q6_K,
    // q8_0 and q4_0 and the 4 it refuses, with their routing kernels: 42),
    // 667 once it became the default for q4_K / q5_K / q8_0 / q4_0 (other
    // tests' quantised experts compile both forms), 688 with the
    // thirty-fourth's flash prefill forms (three stages, split waits, 8
    // warps: 10; wgmma and its deferred wait: 10), 693 with the
    // thirty-sixth's fused.rope_kv_attention (6 forms; q first with a rope
    // changed no form's count), 697 with the thirty-seventh's wgmma cases
    // at head dim 128 only (three stages with the deferred wait and Dv 64 in
    // place of D = 64 and 80, which now keep mma.sync: 4), 705 with the
    // thirty-eighth's decode attention at W-moe's shape (3 load forms), a
    // ring that fits at one block an SM (2) and the tree merge (3), 707 with
    // that ring over 8192 rows (its 1000-row case keeps two blocks an SM
    // and register loads: 2), 709 with the thirty-ninth's 16-bit routing
    // weights of the expert down projection (one float, one DP4A form), 713
    // with the fortieth's stored norm row (fused.rms_norm_mul_matmul: f32,
    // f16 and q4_K on the lanes over K, f16 on the tensor cores): each
    // NVRTC compile is CI time.
    EXPECT_LE(compiled().compiles, 713u);
  }
};
[[maybe_unused]] ::testing::Environment *const kEveryOpIsCovered =
    ::testing::AddGlobalTestEnvironment(new EveryOpIsCovered);
