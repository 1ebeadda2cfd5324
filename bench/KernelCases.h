//===- KernelCases.h - the kernel benchmark's cases, shapes and rotation -*- C++ -*-===//
//
// What fg_bench_kernels (bench/kernels.cpp) times, as data a CPU test can
// check: one case per kernel family × workload shape × weight dtype × T
// tokens, each a one-node Function, its bytes (the op table's cost rule) and
// how its operands rotate through buffers larger than L2.
//
//   family                  shapes (from frontends/models/Workloads)
//   matmul                  q, kv, o, gate_up, down, router (f32), lm_head  (W [N, K])
//   fused.gated_matmul      gate|up of the dense FFNs (two weight streams)
//   matmul_id               expert gate_up and down, k experts per token
//   fused.gated_matmul_id   expert gate|up
//   attention               decode over KV 1024 / 8192 / 32768 rows (f16 KV), and
//                           prefill chunks of 512 / 2048 tokens from position 0
//                           (shape "prefill", T = the chunk)
//   rms_norm, fused.rms_norm_mul   T rows of the hidden size
//
// Activations are f32 as the decoder blocks produce them; weights f16 and
// bf16 (the router stays f32, as DecoderBlocks declares it), and the GGUF
// block types (q4_k, q4_0, q8_0, q6_k, q4_1) at T = 1, 2, 8 on the W-dense
// and W-moe GEMV shapes, whose bytes (and so % of bandwidth) are the GGUF
// bytes. Header-only so tests/unit/bench can check the table without a GPU.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "frontends/models/Workloads.h"
#include "ir/Builder.h"
#include "ir/Diag.h"
#include "ir/OpTable.h"

#include "llvm/ADT/STLExtras.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <tuple>
#include <vector>

namespace fg::bench {

enum class KernelFamily {
  Matmul,
  GatedMatmul,
  MatmulId,
  GatedMatmulId,
  MatmulIdSumAdd,
  Attention,
  RmsNorm,
  RmsNormMul
};

inline const char *familyName(KernelFamily f) {
  switch (f) {
  case KernelFamily::Matmul:
    return "matmul";
  case KernelFamily::GatedMatmul:
    return "fused.gated_matmul";
  case KernelFamily::MatmulId:
    return "matmul_id";
  case KernelFamily::GatedMatmulId:
    return "fused.gated_matmul_id";
  case KernelFamily::MatmulIdSumAdd:
    return "fused.matmul_id_sum_add";
  case KernelFamily::Attention:
    return "attention";
  case KernelFamily::RmsNorm:
    return "rms_norm";
  case KernelFamily::RmsNormMul:
    return "fused.rms_norm_mul";
  }
  return "?";
}

/// One timed kernel: a family at one shape, dtype and token count.
struct KernelCase {
  KernelFamily family = KernelFamily::Matmul;
  std::string workload;     ///< w-dense, w-moe, w-tiny
  std::string shape;        ///< q+o, gate_up, kv1024, h4096, ...
  DType dtype = DType::F16; ///< weights (matmul families), KV (attention), f32 (rows)
  int64_t T = 1;            ///< tokens (rows of x, query rows)
  bool smoke = false;       ///< part of the --smoke subset

  int64_t n = 0, k = 0;                                   ///< matmul: W [n, k] (per expert)
  int64_t experts = 0, topK = 0;                          ///< expert families
  DType xDType = DType::F32; ///< expert families: x's dtype (f16: the gemm-inputs convert's)
  int64_t heads = 0, kvHeads = 0, headDim = 0, kvLen = 0; ///< attention
  int64_t hidden = 0;                                     ///< row kernels
  double eps = 1e-6;

  bool isExpert() const {
    return family == KernelFamily::MatmulId || family == KernelFamily::GatedMatmulId ||
           family == KernelFamily::MatmulIdSumAdd;
  }
  bool isMatmul() const {
    return family == KernelFamily::Matmul || family == KernelFamily::GatedMatmul || isExpert();
  }
  /// The cuBLAS figure exists for every matmul family with 16/32-bit weights
  /// (cuBLAS reads no GGUF blocks).
  bool hasCublas() const { return isMatmul() && !isQuantized(dtype); }

  /// `matmul/w-dense/gate_up/f16/T1` (the Google Benchmark name).
  std::string name() const {
    return std::string(familyName(family)) + "/" + workload + "/" + shape + "/" +
           std::string(dtypeName(dtype)) + "/T" + std::to_string(T);
  }
  /// `14336x4096`, `128x768x2048 top8`, `32/8x128 kv8192`, `4096`.
  std::string dims() const {
    auto s = [](int64_t v) { return std::to_string(v); };
    switch (family) {
    case KernelFamily::Matmul:
    case KernelFamily::GatedMatmul:
      return s(n) + "x" + s(k);
    case KernelFamily::MatmulId:
    case KernelFamily::GatedMatmulId:
    case KernelFamily::MatmulIdSumAdd:
      return s(experts) + "x" + s(n) + "x" + s(k) + " top" + s(topK);
    case KernelFamily::Attention:
      return s(heads) + "/" + s(kvHeads) + "x" + s(headDim) + " kv" + s(kvLen);
    case KernelFamily::RmsNorm:
    case KernelFamily::RmsNormMul:
      return s(hidden);
    }
    return "";
  }
};

/// The workloads the table is drawn from, with the Workloads.h name of each.
struct WorkloadRef {
  const char *label, *config;
};
inline constexpr WorkloadRef kKernelWorkloads[] = {
    {"w-dense", "w-dense"}, {"w-moe", "w-moe-12"}, {"w-tiny", "w-tiny"}};

inline constexpr int64_t kKernelTokens[] = {1, 2, 4, 8};
/// Block-quantised weight types of the GEMV cases, and their token counts.
inline constexpr DType kQuantWeightTypes[] = {
    DType::Q4_K, DType::Q4_0, DType::Q8_0,  DType::Q6_K,  DType::Q4_1,  DType::Q5_0,
    DType::Q5_1, DType::Q5_K, DType::Q2_K, DType::Q3_K, DType::IQ4_NL, DType::IQ4_XS};
inline constexpr int64_t kQuantTokens[] = {1, 2, 8};

/// Operands the benchmark rotates and fills with random values: float
/// operands and block-quantised weights (not indices).
inline bool isRotatedType(DType t) { return isFloat(t) || isQuantized(t); }
inline constexpr int64_t kAttentionKv[] = {1024, 8192, 32768};
/// Prefill attention cases: chunks of these many tokens from position 0.
inline constexpr int64_t kPrefillAttentionTokens[] = {512, 2048};
/// Prefill expert GEMM cases: one chunk of this many tokens, these weights.
inline constexpr int64_t kPrefillExpertTokens = 512;
/// (q5_K: the second type of the grouped GEMM on integer tensor cores,
/// FG_DEBUG_MOE_INT8=1.)
inline constexpr DType kPrefillExpertTypes[] = {DType::F16, DType::Q4_K, DType::Q5_K, DType::Q4_0,
                                                DType::Q6_K};

/// One GEMV weight shape of a decoder, named by the projections that have it.
struct GemvShape {
  std::string name;
  int64_t n = 0, k = 0;
  bool f32Only = false; ///< the MoE router is f32 in every workload
};

/// The dense matmul shapes of one decoder layer and its output, identical
/// shapes merged (`q+o` for Llama-3-8B, `q+kv+o` for w-tiny).
inline std::vector<GemvShape> gemvShapes(const DecoderConfig &c) {
  int64_t hd = c.resolvedHeadDim();
  std::vector<GemvShape> raw = {{"q", c.nHeads * hd, c.nEmbd},
                                {"kv", c.nKvHeads * hd, c.nEmbd},
                                {"o", c.nEmbd, c.nHeads * hd}};
  if (c.ffn == DecoderConfig::FfnKind::Dense) {
    raw.push_back({"gate_up", c.nFf, c.nEmbd});
    raw.push_back({"down", c.nEmbd, c.nFf});
  } else {
    raw.push_back({"router", c.nExperts, c.nEmbd, /*f32Only=*/true});
  }
  raw.push_back({"lm_head", c.vocab, c.nEmbd});
  std::vector<GemvShape> out;
  for (const GemvShape &s : raw) {
    auto same = llvm::find_if(out, [&](const GemvShape &o) {
      return o.n == s.n && o.k == s.k && o.f32Only == s.f32Only;
    });
    if (same != out.end())
      same->name += "+" + s.name;
    else
      out.push_back(s);
  }
  return out;
}

/// Every case, in the order they run. `smoke` marks a subset (T 1 and 8, f16,
/// the first shape of each family and workload) for a quick check.
inline llvm::Expected<std::vector<KernelCase>> kernelCases() {
  std::vector<KernelCase> out;
  const DType weightTypes[] = {DType::F16, DType::BF16};
  auto add = [&](KernelCase c, bool firstShape, int64_t maxT = INT64_MAX) {
    for (int64_t T : kKernelTokens) {
      if (T > maxT)
        continue;
      c.T = T;
      c.smoke = firstShape && (T == 1 || T == 8) && c.dtype != DType::BF16;
      out.push_back(c);
    }
  };
  // Quantised GEMVs: W-dense and W-moe shapes, T = 1, 2, 8 (never smoke).
  auto addQuant = [&](KernelCase c) {
    for (DType q : kQuantWeightTypes)
      for (int64_t T : kQuantTokens) {
        c.dtype = q;
        c.T = T;
        c.smoke = false;
        out.push_back(c);
      }
  };
  for (const WorkloadRef &w : kKernelWorkloads) {
    auto cfg = workloadConfig(w.config, WorkloadOptions{});
    if (!cfg)
      return cfg.takeError();
    const DecoderConfig &c = *cfg;
    int64_t hd = c.resolvedHeadDim();

    KernelCase base;
    base.workload = w.label;
    base.eps = c.normEps;

    // Dense GEMVs.
    bool first = true;
    for (const GemvShape &s : gemvShapes(c)) {
      for (DType dt : weightTypes) {
        KernelCase m = base;
        m.family = KernelFamily::Matmul;
        m.shape = s.name;
        m.dtype = s.f32Only ? DType::F32 : dt;
        m.n = s.n;
        m.k = s.k;
        add(m, first);
        if (s.f32Only)
          break;
      }
      first = false;
    }
    // The fused gate|up GEMV of a dense FFN.
    if (c.ffn == DecoderConfig::FfnKind::Dense)
      for (DType dt : weightTypes) {
        KernelCase g = base;
        g.family = KernelFamily::GatedMatmul;
        g.shape = "gate_up";
        g.dtype = dt;
        g.n = c.nFf;
        g.k = c.nEmbd;
        // 3+ rows over >= 64 MiB of 16-bit weights a stream: the emitter
        // refuses the fused GEMV there (each stream alone goes to cuBLAS,
        // which is faster: thirty-seventh session), so no such kernel exists.
        const bool cublasRows = g.n * g.k * 2 >= (int64_t(64) << 20);
        add(g, true, cublasRows ? 2 : INT64_MAX);
      }
    // Expert GEMVs: gate (= up) and down, and the fused gate|up.
    if (c.ffn == DecoderConfig::FfnKind::Moe) {
      struct ExpertShape {
        KernelFamily family;
        const char *name;
        int64_t n, k;
      };
      const ExpertShape shapes[] = {{KernelFamily::MatmulId, "gate_up", c.expertFf, c.nEmbd},
                                    {KernelFamily::MatmulId, "down", c.nEmbd, c.expertFf},
                                    {KernelFamily::GatedMatmulId, "gate_up", c.expertFf, c.nEmbd}};
      for (const ExpertShape &s : shapes)
        for (DType dt : weightTypes) {
          KernelCase e = base;
          e.family = s.family;
          e.shape = s.name;
          e.dtype = dt;
          e.n = s.n;
          e.k = s.k;
          e.experts = c.nExperts;
          e.topK = c.nExpertsUsed;
          add(e, std::string(s.name) == "gate_up");
        }
    }
    // Attention at the workload's head configuration (not w-tiny): a cache
    // of kvLen rows, the heads and KV type of the workload.
    auto attention = [&](std::string shape, int64_t kvLen) {
      KernelCase a = base;
      a.family = KernelFamily::Attention;
      a.shape = std::move(shape);
      a.dtype = c.kvDType;
      a.heads = c.nHeads;
      a.kvHeads = c.nKvHeads;
      a.headDim = hd;
      a.kvLen = kvLen;
      return a;
    };
    if (llvm::StringRef(w.label) != "w-tiny") {
      // Decode: T = 1..8 query rows over KV 1024 / 8192 / 32768.
      for (int64_t kv : kAttentionKv)
        add(attention("kv" + std::to_string(kv), kv), kv == kAttentionKv[0]);
      // Prefill (the flash kernel, attention_prefill.cuh): a chunk of T
      // tokens at positions 0 .. T − 1 over a cache of T rows, causal — the
      // launch a prefill of T tokens makes each layer, timed back to back in
      // a graph apart from the GEMMs around it (the twenty-ninth session saw
      // it 23-24 µs under Nsight Compute but 53-56 in W-dense's prefill
      // replay).
      for (int64_t t : kPrefillAttentionTokens) {
        KernelCase a = attention("prefill", t);
        a.T = t;
        out.push_back(a);
      }
    }
    // Row kernels at the hidden size.
    for (KernelFamily f : {KernelFamily::RmsNorm, KernelFamily::RmsNormMul}) {
      KernelCase r = base;
      r.family = f;
      r.shape = "h" + std::to_string(c.nEmbd);
      r.dtype = DType::F32;
      r.hidden = c.nEmbd;
      add(r, true);
    }
    // The same GEMV shapes with GGUF block weights (not w-tiny, not the router).
    if (llvm::StringRef(w.label) != "w-tiny") {
      for (const GemvShape &s : gemvShapes(c)) {
        if (s.f32Only)
          continue;
        KernelCase m = base;
        m.family = KernelFamily::Matmul;
        m.shape = s.name;
        m.n = s.n;
        m.k = s.k;
        addQuant(m);
      }
      if (c.ffn == DecoderConfig::FfnKind::Dense) {
        KernelCase g = base;
        g.family = KernelFamily::GatedMatmul;
        g.shape = "gate_up";
        g.n = c.nFf;
        g.k = c.nEmbd;
        addQuant(g);
      } else {
        // An expert case of `family` over W [n, k] per expert.
        auto expert = [&](KernelFamily family, const char *name, int64_t n, int64_t k) {
          KernelCase e = base;
          e.family = family;
          e.shape = name;
          e.n = n;
          e.k = k;
          e.experts = c.nExperts;
          e.topK = c.nExpertsUsed;
          return e;
        };
        addQuant(expert(KernelFamily::MatmulId, "gate_up", c.expertFf, c.nEmbd));
        addQuant(expert(KernelFamily::MatmulId, "down", c.nEmbd, c.expertFf));
        addQuant(expert(KernelFamily::GatedMatmulId, "gate_up", c.expertFf, c.nEmbd));
        // The down projection with the MoE sum and the residual in one launch
        // (fused.matmul_id_sum_add): T = 1 only, the types its DP4A form takes
        // at W-moe's K of 768 (q4_0's k-step is 512; q6_K's rows of 630 bytes
        // do not start 16-byte aligned).
        for (DType q : {DType::Q4_K, DType::Q8_0}) {
          KernelCase e = expert(KernelFamily::MatmulIdSumAdd, "down", c.nEmbd, c.expertFf);
          e.dtype = q;
          e.T = 1;
          out.push_back(e);
        }
        // Prefill's expert GEMMs (the grouped GEMM, issue 15): the fused
        // gate|up and the down projection of a 512-token chunk, each expert
        // given 32 of its 4096 (token, expert) pairs — the launches W-moe-12's
        // prefill spends most of its time in, timed apart from the workload
        // (whose quantised weights take a minute to build on the host).
        for (const KernelCase &p :
             {expert(KernelFamily::GatedMatmulId, "gate_up", c.expertFf, c.nEmbd),
              expert(KernelFamily::MatmulId, "down", c.nEmbd, c.expertFf)})
          for (DType q : kPrefillExpertTypes) {
            KernelCase e = p;
            e.dtype = q;
            e.T = kPrefillExpertTokens;
            out.push_back(e);
            // Block types again with x in f16, as the gemm-inputs pass gives
            // it with FG_DEBUG_MOE_HALF_X=1 (the kernel's 16-byte f16 loads
            // under the switch; element loads without it).
            if (isQuantized(q)) {
              e.shape += ".xf16";
              e.xDType = DType::F16;
              out.push_back(e);
            }
          }
      }
    }
  }
  // Shapes no variant rule was tuned on (issue 11, item 6): the GEMV's rule
  // must stay within 5 % of the best variant there (fg_bench_kernels --gemv-*).
  struct Unseen {
    const char *name;
    int64_t n, k;
  };
  for (Unseen u : {Unseen{"3584to18944", 18944, 3584}, Unseen{"5120to13824", 13824, 5120},
                   Unseen{"18944to3584", 3584, 18944}}) {
    KernelCase m;
    m.workload = "unseen";
    m.family = KernelFamily::Matmul;
    m.shape = u.name;
    m.dtype = DType::F16;
    m.n = u.n;
    m.k = u.k;
    add(m, false);
  }
  return out;
}

/// Builds the case's one node into `fn` (arguments: activations and indices
/// as inputs, weights as weights, the KV cache as state). Expert cases get
/// ids [T, topK]; attention a cache of exactly kvLen rows and positions
/// kvLen − T … kvLen − 1, so every row of the cache is live.
inline llvm::Error buildCaseFunction(const KernelCase &c, Function &fn) {
  Builder b(fn);
  const DType f32 = DType::F32;
  switch (c.family) {
  case KernelFamily::Matmul: {
    ValueId x = b.input("x", {f32, {c.T, c.k}});
    b.result(b.matmul(x, b.weight("w", {c.dtype, {c.n, c.k}}), "y"));
    break;
  }
  case KernelFamily::GatedMatmul: {
    ValueId x = b.input("x", {f32, {c.T, c.k}});
    ValueId g = b.weight("w_gate", {c.dtype, {c.n, c.k}});
    ValueId u = b.weight("w_up", {c.dtype, {c.n, c.k}});
    b.result(b.create(op::FusedGatedMatmulArgs{.x = x, .wGate = g, .wUp = u}, "y"));
    break;
  }
  case KernelFamily::MatmulId:
  case KernelFamily::GatedMatmulId: {
    // gate/up: x [T, 1, K] (one row shared by the k slots); down: [T, k, K].
    bool down = c.shape == "down";
    ValueId x = b.input("x", {c.xDType, {c.T, down ? c.topK : 1, c.k}});
    ValueId ids = b.input("ids", {DType::I32, {c.T, c.topK}});
    if (c.family == KernelFamily::MatmulId) {
      b.result(b.matmulId(x, b.weight("w_exps", {c.dtype, {c.experts, c.n, c.k}}), ids, "y"));
    } else {
      ValueId g = b.weight("w_gate_exps", {c.dtype, {c.experts, c.n, c.k}});
      ValueId u = b.weight("w_up_exps", {c.dtype, {c.experts, c.n, c.k}});
      b.result(
          b.create(op::FusedGatedMatmulIdArgs{.x = x, .wGate = g, .wUp = u, .ids = ids}, "y"));
    }
    break;
  }
  case KernelFamily::MatmulIdSumAdd: {
    ValueId x = b.input("x", {f32, {c.T, c.topK, c.k}});
    ValueId ids = b.input("ids", {DType::I32, {c.T, c.topK}});
    b.result(b.create(op::FusedMatmulIdSumAddArgs{
                          .x = x,
                          .w = b.weight("w_exps", {c.dtype, {c.experts, c.n, c.k}}),
                          .ids = ids,
                          .weights = b.input("weights", {f32, {c.T, c.topK, 1}}),
                          .residual = b.input("residual", {f32, {c.T, c.n}})},
                      "y"));
    break;
  }
  case KernelFamily::Attention: {
    ValueId q = b.input("q", {f32, {c.T, c.heads, c.headDim}});
    ValueId kc = b.state("k_cache", {c.dtype, {c.kvLen, c.kvHeads, c.headDim}});
    ValueId vc = b.state("v_cache", {c.dtype, {c.kvLen, c.kvHeads, c.headDim}});
    ValueId pos = b.input("positions", {DType::I32, {c.T}});
    Builder::AttentionParams p;
    p.scale = 1.0 / std::sqrt(static_cast<double>(c.headDim));
    b.result(b.attention(q, kc, vc, pos, p, std::nullopt, "y"));
    break;
  }
  case KernelFamily::RmsNorm: {
    ValueId x = b.input("x", {f32, {c.T, c.hidden}});
    b.result(b.rmsNorm(x, c.eps, "y"));
    break;
  }
  case KernelFamily::RmsNormMul: {
    ValueId x = b.input("x", {f32, {c.T, c.hidden}});
    ValueId w = b.weight("w", {f32, {c.hidden}});
    b.result(b.create(op::FusedRmsNormMulArgs{.x = x, .w = w, .eps = c.eps}, "y"));
    break;
  }
  }
  if (auto e = b.finish())
    return e;
  if (fn.numNodes() != 1)
    return makeError("kernel case " + c.name() + " built " + std::to_string(fn.numNodes()) +
                     " nodes, expected one");
  return llvm::Error::success();
}

/// The cuBLAS comparison for the dense families, as one matmul node: the
/// same x and W for `matmul`, W = gate|up stacked [2N, K] for the fused gated
/// GEMV (one GEMM streaming both matrices). Expert families have none (they
/// are timed with cublasGemmBatchedEx directly).
inline llvm::Error buildCublasFunction(const KernelCase &c, Function &fn) {
  assert(!c.isExpert() && c.isMatmul() && "only dense matmul families have a cuBLAS node");
  Builder b(fn);
  int64_t rows = c.family == KernelFamily::GatedMatmul ? 2 * c.n : c.n;
  ValueId x = b.input("x", {DType::F32, {c.T, c.k}});
  b.result(b.matmul(x, b.weight("w", {c.dtype, {rows, c.k}}), "y"));
  return b.finish();
}

/// Bytes the node moves: the op table's cost rule (operands read once,
/// results written once; matmul_id counts only the T·k selected experts).
inline double caseBytes(const Function &fn) {
  const Node &n = fn.node(0);
  llvm::SmallVector<TensorType, 6> ops, res;
  for (ValueId v : n.operands)
    ops.push_back(fn.type(v));
  for (ValueId v : n.results)
    res.push_back(fn.type(v));
  return opCost(n.kind, ops, n.attrs, res).bytes;
}

struct RotationOptions {
  double minBytes = 256.0 * (1 << 20); ///< bytes a full rotation touches (L2: 60 MB on the H200)
  int64_t minLaunches = 64;            ///< launches per CUDA graph (at least 20)
  int64_t maxSlots = 4096;             ///< cap on the rotation (tiny row kernels)
};

/// How a case's operands rotate. Launch i of the graph uses slot i % slots:
/// every float operand has one copy per slot, except expert weights, whose
/// slot picks a disjoint set of experts (copy slot / setsPerCopy, set slot %
/// setsPerCopy) so fewer copies suffice. Index operands (ids, positions) are
/// not rotated, but each slot has its own ids.
struct Rotation {
  int64_t slots = 2;
  int64_t setsPerCopy = 1; ///< expert cases: E / (T·k) disjoint expert sets per copy
  int64_t launches = 0;    ///< per graph: a multiple of slots, >= minLaunches
  double touchedBytes = 0; ///< rotated bytes one launch reads
  /// Bytes the rotation cycles through (slots × touchedBytes); below the
  /// target only when maxSlots capped it.
  double footprintBytes() const { return static_cast<double>(slots) * touchedBytes; }
  /// Copies of operand `i` (of `fn`'s node) that must be allocated; 1 for index operands.
  int64_t copiesOf(const KernelCase &c, const Function &fn, unsigned i) const {
    if (!isRotatedType(fn.type(fn.node(0).operands[i]).dtype))
      return 1;
    return isExpertWeight(c, fn, i) ? (slots + setsPerCopy - 1) / setsPerCopy : slots;
  }
  /// Which copy of operand `i` slot `slot` uses.
  int64_t copyFor(const KernelCase &c, const Function &fn, unsigned i, int64_t slot) const {
    if (!isRotatedType(fn.type(fn.node(0).operands[i]).dtype))
      return 0;
    return isExpertWeight(c, fn, i) ? slot / setsPerCopy : slot;
  }
  /// The stacked expert matrices [E, N, K] of an expert case (operands after x).
  static bool isExpertWeight(const KernelCase &c, const Function &fn, unsigned i) {
    const TensorType &t = fn.type(fn.node(0).operands[i]);
    return c.isExpert() && i > 0 && isRotatedType(t.dtype) && t.rank() == 3 &&
           t.shape[0] == c.experts;
  }
};

inline Rotation planRotation(const KernelCase &c, const Function &fn,
                             const RotationOptions &o = {}) {
  Rotation r;
  const Node &n = fn.node(0);
  int64_t pairs = c.T * c.topK;
  for (unsigned i = 0; i < n.operands.size(); ++i) {
    const TensorType &t = fn.type(n.operands[i]);
    if (!isRotatedType(t.dtype))
      continue;
    double bytes = static_cast<double>(t.bytes());
    if (Rotation::isExpertWeight(c, fn, i))
      bytes *= static_cast<double>(pairs) / static_cast<double>(c.experts);
    r.touchedBytes += bytes;
  }
  if (c.isExpert())
    r.setsPerCopy = std::max<int64_t>(1, c.experts / std::max<int64_t>(1, pairs));
  double need = r.touchedBytes > 0 ? std::ceil(o.minBytes / r.touchedBytes) : 2;
  r.slots = std::clamp<int64_t>(static_cast<int64_t>(need), 2, std::max<int64_t>(2, o.maxSlots));
  int64_t launches = std::max<int64_t>({o.minLaunches, 20, r.slots});
  r.launches = (launches + r.slots - 1) / r.slots * r.slots;
  return r;
}

/// The ids each slot of an expert case feeds: T·k distinct experts (distinct
/// across tokens too, so the op table's bytes are exactly the bytes read);
/// slot s takes set s % S of copy s / S's fixed random permutation of the
/// experts, so the slots that share a weight copy touch disjoint experts.
inline std::vector<std::vector<int32_t>> expertIds(const KernelCase &c, const Rotation &rot) {
  int64_t pairs = c.T * c.topK, S = rot.setsPerCopy;
  std::mt19937_64 rng(0x5eed + static_cast<uint64_t>(c.T));
  std::vector<std::vector<int32_t>> perms;
  std::vector<std::vector<int32_t>> out(static_cast<size_t>(rot.slots));
  for (int64_t slot = 0; slot < rot.slots; ++slot) {
    size_t copy = static_cast<size_t>(slot / S);
    while (perms.size() <= copy) {
      std::vector<int32_t> p(static_cast<size_t>(c.experts));
      for (size_t e = 0; e < p.size(); ++e)
        p[e] = static_cast<int32_t>(e);
      std::shuffle(p.begin(), p.end(), rng);
      perms.push_back(std::move(p));
    }
    for (int64_t j = 0; j < pairs; ++j)
      out[static_cast<size_t>(slot)].push_back(
          perms[copy][static_cast<size_t>(((slot % S) * pairs + j) % c.experts)]);
  }
  return out;
}

} // namespace fg::bench
