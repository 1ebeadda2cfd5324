//===- Compile.cpp - Graph -> Plan ----------------------------------------===//
#include "codegen/cuda/Compile.h"

#include "codegen/cuda/CudaTarget.h"
#include "codegen/cuda/Lower.h"
#include "codegen/cuda/Nvrtc.h"
#include "codegen/cuda/QuantWeights.h"
#include "ir/Verifier.h"
#include "runtime/ProgramIO.h"
#include "runtime/WeightLoad.h"

#include "passes/Passes.h"
#include "passes/fusion/FusionReport.h"

#include <cuda_runtime_api.h>
#include <nvrtc.h>

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/Support/Process.h"

#include <cstdlib>
#include <optional>

using namespace llvm;

namespace fg {

uint32_t buildCudaRuntimeVersion() { return CUDART_VERSION; }

uint32_t buildNvrtcVersion() {
  // NVRTC has no version macro; ask the library linked in (needs no driver).
  int major = 0, minor = 0;
  if (nvrtcVersion(&major, &minor) != NVRTC_SUCCESS)
    return 0;
  return static_cast<uint32_t>(major * 1000 + minor * 10);
}

std::string compilePipeline(const CompileOptions &opts) {
  if (!opts.pipeline.empty())
    return opts.pipeline;
  // Cleanup, the GEMM inputs' conversions as ops (unless --gemm-x-inside),
  // then fusion (which plans memory and proves its groups safe), then a last
  // dce for what fusion left unused. `fuse` honours --no-fusion. The
  // glu_convert, rms_norm_mul_convert and attention_convert patterns (on by
  // default) fuse those conversions into the GLUs, norms and attentions that
  // produce them, so while one of them is enabled gemm-inputs runs first;
  // without them the conversions come after fusion (the order before the
  // ninth session).
  FusionOptions fusion;
  fusion.enabled = opts.fusion;
  fusion.disabled = opts.disableFusion;
  fusion.optIn = opts.enableFusion;
  if (opts.gemmInputConverts && foldsGemmInputConverts(fusion))
    return defaultPipeline().str() + ",gemm-inputs,fuse,dce";
  return defaultPipeline().str() + ",fuse" + (opts.gemmInputConverts ? ",gemm-inputs" : "") +
         ",dce";
}

namespace {

/// A debugging switch's whole number in [lo, hi], or nothing (unset, empty
/// or out of range).
std::optional<int> envInt(const char *name, int lo, int hi) {
  if (auto v = llvm::sys::Process::GetEnv(name); v && !v->empty())
    if (int n = std::atoi(v->c_str()); n >= lo && n <= hi)
      return n;
  return std::nullopt;
}

/// The KV context: the end of the positions inputs' range (their binding,
/// [0, ctx)), the same in every entry; 0 when no input is bound to positions.
Expected<int64_t> graphCtx(const Graph &g) {
  int64_t ctx = 0;
  for (const Function &fn : g.functions())
    for (const Argument &a : fn.arguments()) {
      if (a.role != ArgRole::Input || a.bind.kind != BindKind::Positions || !a.bind.hasRange())
        continue;
      if (ctx && a.bind.hi != ctx)
        return makeError("@" + fn.name() + ": positions are bound to [" + Twine(a.bind.lo) +
                         ", " + Twine(a.bind.hi) + ") but another entry's to [0, " + Twine(ctx) +
                         "); every entry shares one KV cache");
      ctx = a.bind.hi;
    }
  return ctx;
}

/// N of every prefill entry (role prefill), in graph order.
std::vector<int64_t> graphPrefill(const Graph &g) {
  std::vector<int64_t> buckets;
  for (const Function &fn : g.functions())
    if (fn.contract().role == EntryRole::Prefill)
      buckets.push_back(fn.contract().tokens);
  return buckets;
}

/// Retypes to f16 (and the views of them) the quantised weights that
/// `external` provides and that some node cannot read as stored: the GPU
/// program dequantises those at load time (the fallback). Every other
/// quantised weight stays in its GGUF type, read natively by the GEMV
/// (cuda::readsQuantizedNatively). Returns "name (why)" per retyped weight.
/// A quantised weight with an initialiser (a workload's, a .fg file's) is not
/// retyped (its f16 copy would not hold the reference's values): a reader
/// that cannot take it is an error that names the weight, the reason and what
/// to do, before any kernel is emitted.
Expected<std::vector<std::string>>
retypeQuantisedWeights(Graph &g, const StringMap<const ExternalWeight *> &external,
                       const cuda::EmitOptions &emit) {
  // Pass 1: which weights (by name, over every entry) have a consumer that
  // cannot read them quantised. Views are followed to their readers.
  // A view is read natively only when its rows are still whole contiguous
  // blocks (the decoders walk the blocks of a row: unit stride along K, every
  // offset and outer stride a whole number of blocks); any other view makes
  // its weight the fallback, like a reader without a decoder.
  StringMap<std::string> fallback;
  for (Function &fn : g.functions()) {
    std::vector<int32_t> root(fn.numValues(), -1); // weight argument a value views
    std::vector<std::optional<cuda::Layout>> layout(fn.numValues());
    for (const Argument &a : fn.arguments()) {
      const Value &v = fn.value(a.value);
      if (a.role == ArgRole::Weight && isQuantized(v.type.dtype)) {
        root[a.value] = static_cast<int32_t>(a.value);
        layout[a.value] = cuda::Layout::contiguous(v.type.shape);
      }
    }
    auto wholeBlocks = [&](const cuda::Layout &l, DType t) {
      const int64_t be = dtypeInfo(t).blockElems;
      if (l.shape.empty() || l.strides.back() != 1 || l.shape.back() % be != 0 || l.offset % be != 0)
        return false;
      for (size_t d = 0; d + 1 < l.strides.size(); ++d)
        if (l.strides[d] % be != 0)
          return false;
      return true;
    };
    for (const Node &n : fn.nodes()) {
      bool view = n.info().has(kViewLike);
      for (unsigned i = 0; i < n.operands.size(); ++i) {
        int32_t r = root[n.operands[i]];
        if (r < 0)
          continue;
        if (view && i == 0) {
          std::optional<cuda::Layout> l;
          if (layout[n.operands[i]])
            l = cuda::viewLayout(n, *layout[n.operands[i]]);
          for (ValueId res : n.results) {
            root[res] = r;
            layout[res] = l;
          }
          continue;
        }
        std::string why;
        const std::optional<cuda::Layout> &l = layout[n.operands[i]];
        bool native = cuda::readsQuantizedNatively(fn, n, i, emit, &why);
        if (native && (!l || !wholeBlocks(*l, fn.value(static_cast<ValueId>(r)).type.dtype))) {
          native = false;
          why = "'" + std::string(n.info().mnemonic) + "' reads a view whose rows are not whole " +
                "contiguous blocks";
        }
        if (!native) {
          const Value &w = fn.value(static_cast<ValueId>(r));
          if (!external.count(w.name))
            return createStringError(
                inconvertibleErrorCode(),
                "@" + fn.name() + ": weight '" + w.name + "' (" + w.type.str() +
                    ", an initialiser) has no CUDA reader: " + why +
                    "; the GPU reads block-quantised weights in place (GEMV, expert GEMV, "
                    "get_rows over rows of whole blocks) and dequantises only file weights "
                    "for other readers; run it on the CPU (--device cpu) or keep the weight "
                    "in f16/f32");
          if (!fallback.count(w.name))
            fallback[w.name] = why;
        }
      }
    }
  }
  // Pass 2: retype them (and their views) in every entry.
  std::vector<std::string> names;
  for (Function &fn : g.functions()) {
    std::vector<bool> retyped(fn.numValues(), false);
    for (const Argument &a : fn.arguments()) {
      Value &v = fn.value(a.value);
      if (a.role != ArgRole::Weight || !isQuantized(v.type.dtype) || !fallback.count(v.name))
        continue;
      std::string label = v.name + " (" + fallback[v.name] + ")";
      v.type.dtype = DType::F16;
      retyped[a.value] = true;
      if (!is_contained(names, label))
        names.push_back(label);
    }
    for (const Node &n : fn.nodes())
      if (n.info().has(kViewLike) && !n.operands.empty() && retyped[n.operands[0]])
        for (ValueId r : n.results) {
          fn.value(r).type.dtype = DType::F16;
          retyped[r] = true;
        }
  }
  return names;
}

/// Points weight slot `s` at its external recipe (or bytes); an error when
/// they do not fit. A quantised weight the graph retyped to f16 gets a last
/// convert(f16) step: dequantised at load time.
Error fillWeightSlot(TensorSlot &s, const ExternalWeight &w) {
  if (w.type.shape != s.type.shape ||
      (w.type.dtype != s.type.dtype && !(isQuantized(w.type.dtype) && s.type.dtype == DType::F16)))
    return makeError("weight '" + s.name + "' is " + s.type.str() + " in the graph but its " +
                     (w.recipe.empty() ? "embedded bytes are " : "recipe gives ") + w.type.str());
  s.bytes = w.bytes;
  s.recipe = w.recipe;
  if (w.type.dtype != s.type.dtype)
    s.recipe.steps.push_back(RecipeStep::convert(s.type.dtype));
  if (Error e = checkSlot(s))
    return makeError("weight " + toString(std::move(e)));
  return Error::success();
}

} // namespace

namespace cuda {

void applyDebugEnvironment(EmitOptions &emit) {
  // A debugging switch (like FG_DEBUG_PDL_*): q4_K through the previous,
  // narrow GEMV decoder, to time both in one run.
  if (auto v = llvm::sys::Process::GetEnv("FG_DEBUG_GEMV_NARROW_QUANT"); v && *v == "1")
    emit.gemvNarrowQuant = true;
  // The same for the opt-in q4_K form with the scales after the mma.
  if (auto v = llvm::sys::Process::GetEnv("FG_DEBUG_GEMV_WIDE_SCALED"); v && *v == "1")
    emit.gemvWideScaled = true;
  // The wide GEMVs' warp rule's target (warps per SM), for timing rules.
  if (auto v = llvm::sys::Process::GetEnv("FG_DEBUG_GEMV_WIDE_WARP_TARGET"))
    if (int64_t n = std::atoll(v->c_str()); n > 0)
      emit.gemvWideWarpTarget = n;
  // iq4_nl and q6_K through the wide loop (default) or, with 0, the narrow one.
  if (auto v = llvm::sys::Process::GetEnv("FG_DEBUG_GEMV_WIDE_IQ4NL"))
    emit.gemvWideIq4nl = *v != "0";
  if (auto v = llvm::sys::Process::GetEnv("FG_DEBUG_GEMV_WIDE_Q6K"))
    emit.gemvWideQ6k = *v != "0";
  // The prefill flash kernel with q and P as hi + lo (0) or one half each (1,
  // the default).
  if (auto v = llvm::sys::Process::GetEnv("FG_DEBUG_FLASH_HALF"); v && !v->empty())
    emit.attentionPrefillHalf = *v != "0";
  if (auto n = envInt("FG_DEBUG_GREEDY_THREADS", 32, 1024); n && *n % 32 == 0)
    emit.greedyThreads = static_cast<unsigned>(*n);
  if (auto n = envInt("FG_DEBUG_GREEDY_PER_THREAD", 1, 1024))
    emit.greedyPerThread = static_cast<unsigned>(*n);
  if (auto v = llvm::sys::Process::GetEnv("FG_DEBUG_CHECK_GATHER"); v && !v->empty())
    emit.checkGathers = *v != "0";
  if (auto n = envInt("FG_DEBUG_FLASH_MIN_BLOCKS", 1, 16))
    emit.attentionPrefillMinBlocks = static_cast<unsigned>(*n);
  emit.attentionPrefillStages =
      envInt("FG_DEBUG_FLASH_STAGES", 1, 3).value_or(emit.attentionPrefillStages);
  if (auto v = llvm::sys::Process::GetEnv("FG_DEBUG_FLASH_SPLIT_WAIT"); v && !v->empty())
    emit.attentionPrefillSplitWait = *v != "0";
  if (auto n = envInt("FG_DEBUG_FLASH_WARPS", 4, 8); n && (*n == 4 || *n == 8))
    emit.attentionPrefillWarps = *n;
  if (auto v = llvm::sys::Process::GetEnv("FG_DEBUG_FLASH_WGMMA"); v && !v->empty())
    emit.attentionPrefillWgmma = *v != "0";
  if (auto v = llvm::sys::Process::GetEnv("FG_DEBUG_FLASH_WG_DEFER"); v && !v->empty())
    emit.attentionPrefillWgDefer = *v != "0";
  emit.ropeHeads = envInt("FG_DEBUG_ROPE_HEADS", 1, 16).value_or(emit.ropeHeads);
  if (auto n = envInt("FG_DEBUG_PDL_PREFETCH_MB", 0, 1024))
    emit.pdlPrefetchBytes = static_cast<int64_t>(*n) << 20;
  if (auto v = llvm::sys::Process::GetEnv("FG_DEBUG_GROUPED_QUANT"); v && !v->empty())
    emit.groupedExpertQuant = *v != "0";
  if (auto n = envInt("FG_DEBUG_PDL_PREFETCH_MAX_MB", 0, 1 << 20))
    emit.pdlPrefetchMaxWeightBytes = static_cast<int64_t>(*n) << 20;
  if (auto v = llvm::sys::Process::GetEnv("FG_DEBUG_PDL_PREFETCH_ATTN"); v && !v->empty())
    emit.pdlPrefetchAttention = *v != "0";
  if (auto v = llvm::sys::Process::GetEnv("FG_DEBUG_FLASH_KS_OUTER"); v && !v->empty())
    emit.attentionPrefillKsOuter = *v != "0";
  if (auto n = envInt("FG_DEBUG_FLASH_KEYS", 32, 64); n && (*n == 32 || *n == 64))
    emit.attentionPrefillKeys = *n;
  // Decode attention's forms (EmitOptions::attention*).
  emit.attentionStages = envInt("FG_DEBUG_ATTN_STAGES", 0, 8).value_or(emit.attentionStages);
  emit.attentionSteps = envInt("FG_DEBUG_ATTN_STEPS", 1, 4).value_or(emit.attentionSteps);
  emit.attentionBlocksPerSm =
      envInt("FG_DEBUG_ATTN_BLOCKS_PER_SM", 1, 16).value_or(emit.attentionBlocksPerSm);
  emit.attentionMinTiles = envInt("FG_DEBUG_ATTN_MIN_TILES", 1, 64).value_or(emit.attentionMinTiles);
  emit.attentionMergeGroup =
      envInt("FG_DEBUG_ATTN_MERGE_GROUP", -1, 64).value_or(emit.attentionMergeGroup);
  emit.attentionMergeUnroll =
      envInt("FG_DEBUG_ATTN_MERGE_UNROLL", 1, 32).value_or(emit.attentionMergeUnroll);
  if (auto n = envInt("FG_DEBUG_ATTN_REG_MAX_LIVE", 0, 1 << 30))
    emit.attentionRegMaxLive = *n;
  emit.attentionCluster = envInt("FG_DEBUG_ATTN_CLUSTER", 0, 8).value_or(emit.attentionCluster);
  if (auto n = envInt("FG_DEBUG_ATTN_CLUSTER_WARPS", 4, 8); n && (*n == 4 || *n == 8))
    emit.attentionClusterWarps = static_cast<int>(*n);
  emit.attentionClusterSteps =
      envInt("FG_DEBUG_ATTN_CLUSTER_STEPS", 0, 4).value_or(emit.attentionClusterSteps);
  if (auto v = llvm::sys::Process::GetEnv("FG_DEBUG_ATTN_EARLY"); v && !v->empty())
    emit.attentionEarlyLoads = *v != "0";
  if (auto v = llvm::sys::Process::GetEnv("FG_DEBUG_GEMV_TAILS"); v && !v->empty())
    emit.gemvTails = *v != "0";
  if (auto v = llvm::sys::Process::GetEnv("FG_DEBUG_GEMV_LOCAL_TAILS"); v && !v->empty())
    emit.gemvLocalTails = *v != "0";
  if (auto v = llvm::sys::Process::GetEnv("FG_DEBUG_GEMV_STORE_TAILS"); v && !v->empty())
    emit.gemvStoreTails = *v != "0";
  if (auto v = llvm::sys::Process::GetEnv("FG_DEBUG_STORE_TAIL_EARLY"); v && !v->empty())
    emit.gemvStoreTailEarly = *v != "0";
  if (auto v = llvm::sys::Process::GetEnv("FG_DEBUG_GEMM_PAIRS"); v && !v->empty())
    emit.gemmPairs = *v != "0";
  if (auto v = llvm::sys::Process::GetEnv("FG_DEBUG_GATED_GEMM_NARROW"); v && !v->empty())
    emit.gatedGemmNarrowC = *v != "0";
  emit.gluGroups = envInt("FG_DEBUG_GLU_GROUPS", 1, 8).value_or(emit.gluGroups);
  if (auto v = llvm::sys::Process::GetEnv("FG_DEBUG_ROUTING_HEADS"); v && !v->empty())
    emit.routingHeads = *v != "0";
  if (auto v = llvm::sys::Process::GetEnv("FG_DEBUG_DROP_OPS"))
    emit.debugDropOps = *v;
  if (auto v = llvm::sys::Process::GetEnv("FG_DEBUG_STORE_TAIL_NO_ANGLE"); v && !v->empty())
    emit.debugStoreTailNoAngle = *v != "0";
  if (auto v = llvm::sys::Process::GetEnv("FG_DEBUG_HEAD_RANKS_LOGITS"); v && !v->empty())
    emit.routingHeadRanksLogits = *v != "0";
  if (auto v = llvm::sys::Process::GetEnv("FG_DEBUG_EARLY_EXPERTS"); v && !v->empty())
    emit.earlyExperts = *v != "0";
  if (auto v = llvm::sys::Process::GetEnv("FG_DEBUG_EARLY_RANKED"); v && !v->empty())
    emit.earlyRankedMinGatedBytes = *v != "0" ? 0 : -1;
  if (std::optional<int> mb = envInt("FG_DEBUG_EARLY_RANKED_MIN_MB", 0, 1 << 20))
    emit.earlyRankedMinGatedBytes = static_cast<int64_t>(*mb) << 20;
  // Every trigger before its wait (timing only, Nvrtc.cpp) voids early
  // experts' proof (EarlyExperts.h): off.
  if (auto v = llvm::sys::Process::GetEnv("FG_DEBUG_PDL_EARLY_TRIGGER"); v && *v == "1")
    emit.earlyExperts = false;
  if (auto v = llvm::sys::Process::GetEnv("FG_DEBUG_MOE_SUM_FLOAT"); v && !v->empty())
    emit.moeSumFloat = *v != "0";
  if (auto v = llvm::sys::Process::GetEnv("FG_DEBUG_ATTN_Q_FIRST"); v && !v->empty())
    emit.attentionQFirst = *v != "0";
  if (auto v = llvm::sys::Process::GetEnv("FG_DEBUG_ATTN_CLUSTER_ASYNC"); v && !v->empty())
    emit.attentionClusterAsync = *v != "0";
  if (auto v = llvm::sys::Process::GetEnv("FG_DEBUG_PDL_ATTN_TRIGGER"); v && !v->empty())
    emit.pdlTriggerBeforeAttention = *v != "0";
  // The elementwise maps' opt-in forms and the grouped expert GEMM's tiles.
  emit.elementwiseIlp = envInt("FG_DEBUG_EW_ILP", 1, 8).value_or(emit.elementwiseIlp);
  if (auto v = llvm::sys::Process::GetEnv("FG_DEBUG_EW_VEC"); v && !v->empty())
    emit.elementwiseVector = *v != "0";
  if (auto n = envInt("FG_DEBUG_MOE_ROWS", 32, 64); n && (*n == 32 || *n == 64))
    emit.groupedExpertRows = *n;
  if (auto n = envInt("FG_DEBUG_MOE_KT", 32, 64); n && (*n == 32 || *n == 64))
    emit.groupedExpertKT = *n;
  if (auto n = envInt("FG_DEBUG_MOE_THREADS", 128, 256); n && (*n == 128 || *n == 256))
    emit.groupedExpertThreads = *n;
  if (auto n = envInt("FG_DEBUG_MOE_QDEFER", 0, 1))
    emit.groupedExpertQuantDeferred = *n;
  if (auto v = llvm::sys::Process::GetEnv("FG_DEBUG_MOE_SKIP_ROWS"); v && !v->empty())
    emit.groupedExpertSkipRows = *v != "0";
  if (auto v = llvm::sys::Process::GetEnv("FG_DEBUG_MOE_HALF_X"); v && !v->empty())
    emit.groupedExpertHalfX = *v != "0";
  if (auto n = envInt("FG_DEBUG_MOE_INT8", 0, 2))
    emit.groupedExpertInt8 = static_cast<int>(*n);
  if (auto n = envInt("FG_DEBUG_MOE_QROW", 0, 1))
    emit.groupedExpertQuantRowUnits = static_cast<int>(*n);
  // And x split hi + lo in the quantised GEMVs (the form before x as one f16).
  // The q4_K GEMV at T = 1 on DP4A (EmitOptions::gemvDp4a) and its shape.
  emit.gemvDp4a = static_cast<int>(envInt("FG_DEBUG_GEMV_DP4A", 0, 3).value_or(emit.gemvDp4a));
  emit.gemvDp4aUnroll =
      static_cast<int>(envInt("FG_DEBUG_DP4A_UNROLL", 1, 4).value_or(emit.gemvDp4aUnroll));
  emit.gemvDp4aWarpTarget = envInt("FG_DEBUG_DP4A_WARPS", 4, 32).value_or(emit.gemvDp4aWarpTarget);
  emit.gemvDp4aQ6kWarpTarget =
      envInt("FG_DEBUG_DP4A_Q6K_WARPS", 4, 32).value_or(emit.gemvDp4aQ6kWarpTarget);
  emit.gemvDp4aQ6kAhead =
      static_cast<int>(envInt("FG_DEBUG_DP4A_Q6K_AHEAD", 1, 3).value_or(emit.gemvDp4aQ6kAhead));
  if (auto n = envInt("FG_DEBUG_DP4A_MIN_MB", 0, 1 << 20))
    emit.gemvDp4aMinWeightBytes = int64_t(*n) << 20;
  emit.gemvDp4aCombine =
      static_cast<int>(envInt("FG_DEBUG_DP4A_COMBINE", 1, 16).value_or(emit.gemvDp4aCombine));
  if (auto n = envInt("FG_DEBUG_DP4A_Q6K", 0, 1))
    emit.gemvDp4aQ6k = *n == 1;
  if (auto n = envInt("FG_DEBUG_DP4A_Q6K_WARP", 0, 1))
    emit.gemvDp4aQ6kWarp = *n == 1;
  if (auto n = envInt("FG_DEBUG_DP4A_WARP_LOAD", 0, 1))
    emit.gemvDp4aWarpLoad = *n == 1;
  if (auto n = envInt("FG_DEBUG_DP4A_WARP_LOAD_EXPERTS", 0, 1))
    emit.gemvDp4aWarpLoadExperts = static_cast<int>(*n);
  if (auto n = envInt("FG_DEBUG_DP4A_SHARE_X", 0, 1))
    emit.gemvDp4aShareX = *n == 1;
  emit.gemvDp4aL2Ahead =
      static_cast<int>(envInt("FG_DEBUG_DP4A_L2_AHEAD", 0, 8).value_or(emit.gemvDp4aL2Ahead));
  emit.gemvDp4aStages =
      static_cast<int>(envInt("FG_DEBUG_DP4A_STAGES", 0, 8).value_or(emit.gemvDp4aStages));
  emit.gemvDp4aAhead =
      static_cast<int>(envInt("FG_DEBUG_DP4A_AHEAD", 0, 3).value_or(emit.gemvDp4aAhead));
  if (auto n = envInt("FG_DEBUG_DP4A_NORM_DEFERRED", 0, 1))
    emit.gemvDp4aNormDeferred = *n == 1;
  if (auto n = envInt("FG_DEBUG_GEMV_EARLY_EXTRAS", 0, 1))
    emit.gemvEarlyExtras = *n == 1;
  if (auto n = envInt("FG_DEBUG_DP4A_PROLOGUE", 0, 1))
    emit.gemvDp4aPrologueLoad = *n == 1;
  if (auto v = llvm::sys::Process::GetEnv("FG_DEBUG_GEMV_X_HALF"); v && *v == "0")
    emit.gemvQuantXHalf = false;
}

} // namespace cuda

Expected<Plan> compile(const Graph &g, const CompileOptions &opts) {
  if (Error e = verifyGraph(g))
    return e;
  if (opts.cuda)
    if (Error e = cuda::checkArch(opts.arch))
      return e;
  Expected<int64_t> ctxOr = graphCtx(g);
  if (!ctxOr)
    return ctxOr.takeError();
  int64_t fromGraph = *ctxOr;
  if (opts.ctx > 0 && fromGraph > 0 && opts.ctx != fromGraph)
    return makeError("the model's positions are bound to [0, " + Twine(fromGraph) +
                     ") (its KV cache rows) but ctx " + Twine(opts.ctx) +
                     " was requested; build the model with that ctx");

  Graph work = g;
  StringMap<const ExternalWeight *> external;
  for (const ExternalWeight &w : opts.weights)
    external[w.name] = &w;
  if (opts.cuda) {
    cuda::EmitOptions probe;
    probe.arch = opts.arch;
    auto retypedOr = retypeQuantisedWeights(work, external, probe);
    if (!retypedOr)
      return retypedOr.takeError();
    std::vector<std::string> retyped = std::move(*retypedOr);
    if (!retyped.empty() && opts.log)
      opts.log(LogLevel::Verbose,
               "compile: " + std::to_string(retyped.size()) +
                   " quantised weights have a reader without a native kernel and are "
                   "dequantised to f16 at load time: " +
                   join(retyped.begin(), retyped.begin() + std::min<size_t>(retyped.size(), 4),
                        ", ") +
                   (retyped.size() > 4 ? ", ..." : ""));
    if (!retyped.empty())
      if (Error e = verifyGraph(work))
        return e;
  }
  std::string pipeline = compilePipeline(opts);
  PassOptions passOpts = opts.passOptions;
  if (!passOpts.sink)
    passOpts.sink = opts.log;
  // The passes ask the target for kernel facts (token limits, aliasing, scratch, cost).
  cuda::EmitOptions emit;
  emit.arch = opts.arch;
  if (opts.attentionPrefillMinTokens > 0)
    emit.attentionPrefillMinTokens = opts.attentionPrefillMinTokens;
  cuda::applyDebugEnvironment(emit);
  // The cost model's factors with their FG_DEBUG_ overrides (the norm
  // prologue's and the tensor-core merged GEMV's slowdowns), for timing the
  // rules' alternatives.
  cuda::CudaTarget target(emit, cuda::costModelFromEnv());
  passOpts.target = &target;
  FusionOptions fusion;
  fusion.target = &target;
  fusion.enabled = opts.fusion;
  fusion.disabled = opts.disableFusion;
  fusion.optIn = opts.enableFusion;
  fusion.debug = opts.debugFusion;
  FusionReport report;
  passOpts.fusionOptions = &fusion;
  passOpts.fusionReport = &report;
  PassManager pm(std::move(passOpts));
  if (!pipeline.empty())
    if (Error e = pm.addPipeline(pipeline))
      return e;
  if (opts.log)
    opts.log(LogLevel::Verbose, "compile: pipeline '" + pipeline + "'");
  if (Error e = pm.run(work))
    return e;

  PlanOptions po;
  po.ctx = opts.ctx > 0 ? opts.ctx : (fromGraph > 0 ? fromGraph : 4096);
  po.prefill = graphPrefill(work);
  po.arch = opts.arch;
  po.fusion = opts.fusion;
  po.disableFusion = opts.disableFusion;
  po.enableFusion = opts.enableFusion;
  po.kvDType = opts.kvDType;
  po.source = opts.source;

  std::vector<PlanPassRecord> records;
  for (const PassRecord &r : pm.records())
    records.push_back({r.name, r.changed});

  std::vector<PlanSection> sections;
  // What fusion did, for `inspect`: applied (with each fused node's root) and
  // refused (with the reason), as records (FusionReport::serialize).
  sections.push_back({"fusion", report.serialize(), 0});
  sections.back().checked = sections.back().bytes.size();
  if (opts.cuda) {
    cuda::LowerOptions lo;
    lo.emit = emit;
    lo.testPlanHook = opts.testPlanHook;
    lo.nvrtc.cacheDir = opts.kernelCacheDir;
    lo.ctx = po.ctx;
    lo.log = opts.log;
    lo.progress = opts.progress;
    if (auto n = envInt("FG_DEBUG_WORKSPACE_SLOTS", 1, static_cast<int>(kWorkspaceSlots)))
      lo.workspaceSlots = static_cast<unsigned>(*n);
    cuda::LowerStats stats;
    Expected<CompiledProgram> prog = cuda::lowerGraph(work, lo, &stats);
    if (!prog)
      return prog.takeError();
    for (TensorSlot &s : prog->weights)
      if (const ExternalWeight *w = external.lookup(s.name))
        if (Error e = fillWeightSlot(s, *w))
          return e;
    if (opts.log)
      opts.log(LogLevel::Verbose,
               "codegen: " + std::to_string(stats.kernels) + " kernel launches, " +
                   std::to_string(stats.gemms) + " cuBLAS calls, " +
                   std::to_string(stats.modules) + " modules (" +
                   std::to_string(stats.cacheHits) + " from the kernel cache), arena " +
                   std::to_string(stats.arenaBytes) + " bytes");
    EncodedProgram enc = encodeProgram(*prog);
    sections.push_back({"program", std::move(enc.bytes), enc.bulkOffset});
  } else if (!external.empty()) {
    // No CUDA program: the CPU reference reads the weight table from here.
    std::vector<TensorSlot> slots;
    StringMap<bool> seen;
    for (const Function &fn : work.functions())
      for (const Argument &a : fn.arguments()) {
        const Value &v = fn.value(a.value);
        const ExternalWeight *w = external.lookup(v.name);
        if (a.role != ArgRole::Weight || !w || !seen.insert({v.name, true}).second)
          continue;
        slots.push_back({v.name, v.type, a.init, {}});
        if (Error e = fillWeightSlot(slots.back(), *w))
          return e;
      }
    EncodedProgram enc = encodeWeightTable(slots);
    sections.push_back({"weights", std::move(enc.bytes), enc.bulkOffset});
  }
  return Plan(std::move(work), std::move(po), std::move(records), buildCudaRuntimeVersion(),
              buildNvrtcVersion(), std::move(sections));
}

} // namespace fg
