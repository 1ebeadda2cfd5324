//===- Program.h - a compiled program: what the runtime executes -*- C++ -*-===//
//
// The contract between codegen (which writes it) and the runtime (which
// runs it without any compiler): kernel images, the weight and state tables,
// and per entry the launch DAG over buffers addressed as (space, index,
// byte offset). Stored in the plan file. A launch names the IR node it
// computes by index (in its entry's function of the plan's graph) and op
// kind, as data; `what` is only for messages.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "ir/Graph.h"
#include "ir/Quantize.h"
#include "ir/WeightRecipe.h"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace fg {

/// Which allocation a pointer argument lives in.
enum class BufferSpace : uint8_t {
  Arena,     ///< the per-executor activation arena (inputs, results, temporaries)
  Weight,    ///< weights[index]
  State,     ///< state[index]
  Workspace, ///< the cuBLAS workspace
  Counters,  ///< per-launch counters, zeroed at load, left zero by their kernels
  Status,    ///< the runner's status words (the input check's result; InputStatus)
  /// The entry's pinned host staging of input `index` (what setInput wrote),
  /// read by the device: the input check copies its inputs from here into
  /// their arena slots, so a step needs no copy on the stream.
  Staging,
};

/// What an entry's input check (its first launch, when any input has a
/// range) leaves in the status words after a step:
///   [0] 0 when every checked value was in range, else 1 + the index of the
///       first bad input in CompiledEntry::inputs,
///   [1] the element index of its first bad value,
///   [2], [3] the bad value as an i64, low word first.
/// A bad step writes no state: the check sets every position of the step to
/// -1, which set_rows skips and attention reads no rows for; a token id out of
/// range gathers zeros. So the caller can continue with good inputs.
/// Words 4 and 5 belong to an entry's greedy-token launch (its last launch
/// when that has no node; codegen/cuda/GreedyToken.h): the first argmax of the
/// last row of its `logits`, and 1 when that is the greedy token (0: the row
/// holds a NaN or only -inf; sample the row on the host).
constexpr unsigned kStatusWordGreedy = 4, kStatusWordGreedyOk = 5;
/// Word 6 counts the checked steps (the input check adds one once it has
/// read its staging: the host may then stage the next step); words 8 + 2r
/// and 9 + 2r hold the greedy (token, ok) of the step whose count has parity
/// r. A token staged as kFedToken is the previous step's greedy token, taken
/// by the input check on the device (kernels/check.cuh, common.cuh).
constexpr unsigned kStatusWordSeq = 6, kStatusWordRing = 8;
constexpr int32_t kFedToken = INT32_MIN;
constexpr uint64_t kStatusBytes = 16 * sizeof(uint32_t);

/// What a greedy-token launch draws instead of the argmax when mode is 1
/// (kernels/sample.cuh SampleParams, the same layout): one range of the
/// program's counters (zero at load: greedy), the launch's last argument,
/// written by the runner (Executor::setTokenPick). The draw's counter is
/// (epoch << 32) | (the last row's position + 1) (runtime/Sampler.h).
struct DeviceSampleParams {
  uint32_t mode = 0; ///< 0: greedy, 1: draw
  uint32_t topK = 0;
  double temperature = 0, topP = 1, minP = 0;
  uint64_t seed = 0, epoch = 0;
};
static_assert(sizeof(DeviceSampleParams) == 48, "kernels/sample.cuh SampleParams");
/// The most candidates the device sorts for a draw (kernels/sample.cuh
/// kCap): a draw whose sorted candidates are more (a top-k past this that
/// cuts; top-p without top-k over a flat distribution) leaves status word 5
/// at kStatusDrawOnHost and the host draws from the row.
constexpr uint32_t kDeviceSampleCandidates = 2048;
constexpr uint32_t kStatusDrawOnHost = 2;

/// What the launch at `index` of an entry is when it has no node: the input
/// check (the first launch) or the greedy token (the last).
inline const char *nodelessLaunchName(size_t index) {
  return index == 0 ? "input check" : "greedy token";
}

struct BufferRef {
  BufferSpace space = BufferSpace::Arena;
  uint32_t index = 0;  ///< weight/state table index; 0 otherwise
  uint64_t offset = 0; ///< bytes
  bool operator==(const BufferRef &o) const {
    return space == o.space && index == o.index && offset == o.offset;
  }
};

/// One NVRTC-compiled module (cubin for the plan's arch, PTX as a fallback).
struct KernelImage {
  std::string name;
  std::vector<uint8_t> cubin;
  std::string ptx;
};

/// The shape of one GEMM in cuBLAS's own (column-major) terms, f32 compute:
///   cublasGemmEx (lt false):  C = alpha·op(A)·op(B) + beta·C
///   cublasLtMatmul (lt true): D = alpha·op(A)·op(B) + beta·C, C read, D
///                             written (m×n, leading dimension ldd, type cType)
/// op = transpose when trans*. The Lt form is fused.matmul_add over prefill
/// rows: C is the residual and D the result, two buffers (never aliased), so
/// the residual is neither copied into the result first nor overwritten.
/// The emitter's CublasGemmSpec (operands as node parameters) and the plan's
/// GemmDesc (operands as buffers) share it.
struct GemmShape {
  bool transA = true, transB = false;
  int64_t m = 0, n = 0, k = 0;
  DType aType = DType::F32, bType = DType::F32, cType = DType::F32;
  int64_t lda = 0, ldb = 0, ldc = 0;
  float alpha = 1, beta = 0;
  bool lt = false; ///< cublasLtMatmul with a separate D
  int64_t ldd = 0; ///< D's leading dimension (lt only)
  /// A strided batch (cublasGemmStridedBatchedEx; plain form only): `batch`
  /// GEMMs of this shape, the i-th reading A + i·strideA, B + i·strideB and
  /// writing C + i·strideC (elements of each operand's type). Two sibling
  /// GEMMs of one x — a prefill chunk's k and v projections — become one
  /// launch (codegen/cuda/GemmPairs.cpp). 1: a single GEMM.
  int32_t batch = 1;
  int64_t strideA = 0, strideB = 0, strideC = 0;
};

/// One operand as cuBLAS reads it: column-major `rows` × `cols` with leading
/// dimension `ld` (every column but the last spans ld elements).
struct GemmExtent {
  int64_t rows = 0, cols = 0, ld = 0;
  /// Elements from the first to one past the last (one batch member).
  uint64_t elems() const { return static_cast<uint64_t>((cols - 1) * ld + rows); }
};
/// op(A) is m×k: A is stored k×m when transposed.
inline GemmExtent extentA(const GemmShape &g) {
  return {g.transA ? g.k : g.m, g.transA ? g.m : g.k, g.lda};
}
/// op(B) is k×n: B is stored n×k when transposed.
inline GemmExtent extentB(const GemmShape &g) {
  return {g.transB ? g.n : g.k, g.transB ? g.k : g.n, g.ldb};
}
/// C (and the Lt form's D, with ldd) is m×n.
inline GemmExtent extentC(const GemmShape &g) { return {g.m, g.n, g.ldc}; }

/// A GEMM launch of the plan: its shape and buffers (offsets already include
/// each operand's byte offset). `d` is used by the Lt form only.
struct GemmDesc : GemmShape {
  BufferRef a, b, c, d;
};

struct LaunchRecord {
  enum class Kind : uint8_t { Kernel, Gemm };
  Kind kind = Kind::Kernel;
  // Kernel
  uint32_t module = 0;
  std::string symbol;
  uint32_t grid[3] = {1, 1, 1};
  uint32_t block[3] = {1, 1, 1};
  uint32_t sharedBytes = 0;
  std::vector<BufferRef> args; ///< pointer arguments, in order
  // Gemm
  GemmDesc gemm;
  /// Earlier launches of the same entry that must finish first (the DAG).
  std::vector<uint32_t> deps;
  /// The node this launch computes: its index in the entry's function (the
  /// plan's final graph) and its op. Profiles and rooflines group by these.
  /// kNoNode (ir/Graph.h) for the entry's input check, which computes none.
  uint32_t node = 0;
  OpKind op = OpKind{};
  /// What this launch computes, for messages only: "%q.3 = rope (line 12)".
  std::string what;
  /// How its GEMVs read x: quantised to int8 by the DP4A kernels, which the
  /// CPU reference reproduces on request (ExecOptions::cpuActQuant).
  ActQuant actQuant = ActQuant::Exact;
};

/// A named input or output of an entry and where it lives in the arena.
struct IoBinding {
  std::string name;
  TensorType type;
  BufferRef where;
  /// Inputs: the graph's binding (kind, value range the input check enforces).
  InputBinding bind;
};

struct CompiledEntry {
  std::string name;
  uint64_t arenaBytes = 0;
  uint64_t peakLiveBytes = 0; ///< the planner's peak of simultaneously live arena bytes
  std::vector<IoBinding> inputs, outputs;
  std::vector<LaunchRecord> launches;
};

/// The launches of `e` whose GEMVs quantise x to int8 (the DP4A kernels:
/// LaunchRecord::actQuant not Exact).
inline size_t quantisedXLaunches(const CompiledEntry &e) {
  size_t n = 0;
  for (const LaunchRecord &l : e.launches)
    n += l.actQuant != ActQuant::Exact;
  return n;
}

/// A weight or state tensor shared by every entry.
struct TensorSlot {
  TensorSlot() = default;
  TensorSlot(std::string name, TensorType type, WeightInit init = {},
             std::vector<uint8_t> bytes = {})
      : name(std::move(name)), type(std::move(type)), init(std::move(init)),
        bytes(std::move(bytes)) {}

  std::string name;
  TensorType type;
  WeightInit init;            ///< how to produce the bytes without a recipe or bytes
  std::vector<uint8_t> bytes; ///< embedded bytes (computed weights: rope factors), or empty
  /// A weight from model file(s) (CompileOptions::weights): how its bytes are
  /// made from file ranges at load time (loadSlotBytes); its result is `type`.
  /// A plain mapped weight is one source and no step; a quantised weight the
  /// GPU program sees as f16 ends in convert(f16).
  WeightRecipe recipe;

  bool hasSource() const { return !recipe.empty() || !bytes.empty(); }
};

/// A weight whose bytes a model frontend provides (CompileOptions::weights):
/// a recipe over model-file ranges (absolute paths, sizes recorded), or, for
/// the few computed ones, their bytes.
struct ExternalWeight {
  std::string name;           ///< the graph's weight value name
  TensorType type;            ///< dtype and shape the recipe (or bytes) give
  WeightRecipe recipe;        ///< from model files; empty when embedded
  std::vector<uint8_t> bytes; ///< embedded: type.bytes() bytes
};

struct CompiledProgram {
  std::string arch; ///< "sm_90"
  std::vector<KernelImage> modules;
  std::vector<TensorSlot> weights, state;
  std::vector<CompiledEntry> entries;
  uint64_t workspaceBytes = 0; ///< one cuBLAS workspace; the runner allocates one per slot
  uint64_t counterBytes = 0;   ///< BufferSpace::Counters, zeroed at load and by resetState
  int64_t ctx = 0;             ///< KV rows; positions at or past it are refused
  /// Module holding `fg_init_<dtype>(void *out, u64 n, int kind, u64 seed,
  /// double a, double b)` (initKernelSymbol): generates initialised weights on
  /// the device with the one formula of ir/InitFormula.h (kind, a, b as
  /// runtime/reference initFormulaArgs gives them); -1: none (weights are
  /// materialised on the host with the same formula).
  int32_t initModule = -1;

  /// Device bytes of the weight table (what CudaRunner allocates and fills:
  /// each slot's type, which a recipe's result equals).
  uint64_t weightBytes() const {
    uint64_t n = 0;
    for (const TensorSlot &w : weights)
      n += static_cast<uint64_t>(w.type.bytes());
    return n;
  }
};

/// Where the CUDA runner places weight slots: one allocation, the slots one
/// after another in table order, each at an offset that is a multiple of
/// kWeightAlign (slot i + 1 starts at slot i's offset plus its bytes rounded
/// up). Plans rely on it: a GEMM over two weights stacked row on row
/// (fused.gated_gemm) reads them as one matrix where weightFollows says the
/// second starts where the first ends.
constexpr uint64_t kWeightAlign = 256;

/// Byte offset of each weight slot in the runner's allocation, and the total.
inline std::vector<uint64_t> weightOffsets(const std::vector<TensorSlot> &weights,
                                           uint64_t *total = nullptr) {
  std::vector<uint64_t> at;
  uint64_t next = 0;
  for (const TensorSlot &w : weights) {
    at.push_back(next);
    uint64_t bytes = static_cast<uint64_t>(w.type.bytes());
    next += (bytes + kWeightAlign - 1) / kWeightAlign * kWeightAlign;
  }
  if (total)
    *total = next;
  return at;
}

/// Whether weight slot `b` starts on the byte after weight slot `a` ends.
inline bool weightFollows(const std::vector<TensorSlot> &weights, uint32_t a, uint32_t b) {
  return a < weights.size() && b == a + 1 && b < weights.size() &&
         static_cast<uint64_t>(weights[a].type.bytes()) % kWeightAlign == 0;
}

/// The init module's kernel for weights of `dtype` ("fg_init_f32",
/// "fg_init_q4_k", ...): every float and integer dtype has one, a
/// block-quantised dtype where the program initialises one of its weights
/// (codegen initialisedBlockTypes; a thread a block, n still elements).
inline std::optional<std::string> initKernelSymbol(DType dtype) {
  return "fg_init_" + std::string(dtypeName(dtype));
}

} // namespace fg
