//===- Lower.cpp - Graph -> CompiledProgram: the lowering driver ----------===//
//
// Per entry, in order, each step in its own file:
//   1. layouts                  ValueLayouts.h
//   2. emission (and scratch)   EmitNodes.h
//   3. memory plan + its proof  ProvenPlan.h     (the plan written is the plan proven)
//   4. launch records + deps    LaunchSchedule.h
//      GEMV tails               GemvTails.h    (one-token rows run by their GEMV)
//      and the input check      InputCheck.h   (first launch: token ids, positions)
// then, for the whole program:
//   5. the weight init module   WeightInitModule.h
//   6. NVRTC modules            KernelModules.h
//
//===----------------------------------------------------------------------===//
#include "codegen/cuda/Lower.h"

#include "codegen/cuda/CudaTarget.h"
#include "codegen/cuda/EmitNodes.h"
#include "codegen/cuda/GemmPairs.h"
#include "codegen/cuda/GemvTails.h"
#include "codegen/cuda/GreedyToken.h"
#include "codegen/cuda/InputCheck.h"
#include "codegen/cuda/KernelModules.h"
#include "codegen/cuda/LaunchSchedule.h"
#include "codegen/cuda/ProvenPlan.h"
#include "codegen/cuda/EarlyExperts.h"
#include "codegen/cuda/RoutingHeads.h"
#include "codegen/cuda/ValueLayouts.h"
#include "codegen/cuda/WeightInitModule.h"
#include "runtime/WorkspaceSlots.h"

namespace fg::cuda {

namespace {

/// EmitOptions::debugDropOps: each kernel launch of a listed op folded into
/// the launch before it (timing only: its work is not done).
void dropOpsForTiming(CompiledEntry &entry, KernelSources &sources, llvm::StringRef ops) {
  llvm::SmallVector<llvm::StringRef> names;
  ops.split(names, ',', -1, false);
  std::vector<uint32_t> into(entry.launches.size());
  bool any = false;
  for (uint32_t j = 0; j < into.size(); ++j) {
    into[j] = j;
    const LaunchRecord &r = entry.launches[j];
    if (j == 0 || r.kind != LaunchRecord::Kind::Kernel || r.node == kNoNode ||
        !llvm::is_contained(names, llvm::StringRef(mnemonic(r.op))))
      continue;
    into[j] = into[j - 1]; // the host of the launch before (itself, or its own host)
    any = true;
  }
  if (any)
    dropMergedLaunches(entry, sources, into);
}

} // namespace

llvm::Expected<CompiledProgram> lowerGraph(const Graph &g, const LowerOptions &opts,
                                           LowerStats *statsOut) {
  CompiledProgram prog;
  prog.arch = opts.emit.arch;
  prog.workspaceBytes = opts.cublasWorkspaceBytes;
  SlotTables tables(prog);
  KernelSources sources;
  LowerStats stats;
  CudaTarget target(opts.emit);
  ProvenPlanOptions planOpts;
  planOpts.target = &target;
  planOpts.testHook = opts.testPlanHook;

  for (const Function &fn : g.functions()) {
    // Declare every weight and state in argument order, so tables are stable.
    for (const Argument &a : fn.arguments())
      if (a.role != ArgRole::Input)
        tables.slot(fn, a);
    llvm::Expected<std::vector<Layout>> layouts = computeLayouts(fn);
    if (!layouts)
      return layouts.takeError();
    llvm::Expected<std::vector<NodeCode>> code = emitNodes(fn, *layouts, opts.emit);
    if (!code)
      return code.takeError();
    llvm::Expected<ProvenPlan> proven = planAndProve(fn, *code, planOpts);
    if (!proven)
      return proven.takeError();
    CompiledEntry entry;
    if (llvm::Error e = scheduleLaunches(fn, *layouts, *code, *proven, tables, sources, entry,
                                         opts.workspaceSlots))
      return e;
    // A pair runs on one workspace slot where it ran on two: the slots are
    // assigned again over the merged list (edges only where they run out).
    if (opts.emit.gemmPairs && pairSiblingGemms(entry, sources, prog.weights) > 0)
      if (auto slots = assignWorkspaceSlots(entry.launches, opts.workspaceSlots, true); !slots)
        return slots.takeError();
    if (opts.emit.gemvTails || opts.emit.gemvLocalTails || opts.emit.gemvStoreTails) {
      llvm::Expected<unsigned> merged =
          mergeGemvTails(fn, *layouts, *code, *proven, opts.emit, tables, sources, entry);
      if (!merged)
        return merged.takeError();
    }
    if (opts.emit.routingHeads) {
      llvm::Expected<unsigned> merged =
          mergeRoutingHeads(fn, *layouts, *code, *proven, opts.emit, tables, sources, entry);
      if (!merged)
        return merged.takeError();
    }
    if (opts.emit.earlyExperts)
      if (llvm::Expected<unsigned> n = markEarlyExperts(fn, *proven, opts.emit.earlyRankedMinGatedBytes, tables,
                                                              sources, entry); !n)
        return n.takeError();
    if (!opts.emit.debugDropOps.empty())
      dropOpsForTiming(entry, sources, opts.emit.debugDropOps);
    addInputCheck(entry, sources, tables, opts.emit.checkGathers);
    addGreedyToken(entry, sources, tables, opts.emit.greedyThreads, opts.emit.greedyPerThread);
    for (const LaunchRecord &l : entry.launches)
      ++(l.kind == LaunchRecord::Kind::Gemm ? stats.gemms : stats.kernels);
    stats.arenaBytes = std::max<uint64_t>(stats.arenaBytes, entry.arenaBytes);
    stats.peakLiveBytes = std::max<uint64_t>(stats.peakLiveBytes, entry.peakLiveBytes);
    prog.entries.push_back(std::move(entry));
  }

  // Weights with an initialiser are generated on the device by one more module.
  size_t initSource = ~size_t(0);
  if (needsInitModule(prog)) {
    initSource = sources.sources.size();
    sources.sources.emplace_back("fg_init", initModuleSource(initialisedBlockTypes(prog)));
  }
  ModuleStats ms;
  llvm::Expected<std::vector<uint32_t>> moduleOfSource =
      buildModules(sources, opts.emit.arch, opts.nvrtc, opts.log, prog, ms, opts.progress);
  if (!moduleOfSource)
    return moduleOfSource.takeError();
  stats.modules = ms.modules;
  stats.cacheHits = ms.cacheHits;
  if (initSource != ~size_t(0))
    prog.initModule = static_cast<int32_t>((*moduleOfSource)[initSource]);

  prog.ctx = opts.ctx;
  if (statsOut)
    *statsOut = stats;
  return prog;
}

} // namespace fg::cuda
