//===- Compile.cpp - Graph -> Plan ----------------------------------------===//
#include "codegen/cuda/Compile.h"

#include "codegen/cuda/Lower.h"
#include "ir/Verifier.h"
#include "runtime/ProgramIO.h"

#include "passes/Passes.h"
#include "passes/fusion/FusionReport.h"

#include <cuda_runtime_api.h>
#include <nvrtc.h>

#include "llvm/ADT/StringExtras.h"

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
  // Cleanup, then fusion (which plans memory and proves its groups safe),
  // then a last dce for what fusion left unused. `fuse` honours --no-fusion.
  return defaultPipeline().str() + ",fuse,dce";
}

namespace {

/// Rows of the first `k_cache.*` state argument (the KV context), or 0.
int64_t graphCtx(const Graph &g) {
  for (const Function &fn : g.functions())
    for (const Argument &a : fn.arguments()) {
      const Value &v = fn.value(a.value);
      if (a.role == ArgRole::State && StringRef(v.name).startswith("k_cache.") &&
          v.type.rank() >= 1)
        return v.type.shape[0];
    }
  return 0;
}

/// N of every `prefill_N` entry, in graph order.
std::vector<int64_t> graphPrefill(const Graph &g) {
  std::vector<int64_t> buckets;
  for (const Function &fn : g.functions()) {
    int64_t n;
    if (fn.name().startswith("prefill_") && !fn.name().drop_front(8).getAsInteger(10, n))
      buckets.push_back(n);
  }
  return buckets;
}

} // namespace

Expected<Plan> compile(const Graph &g, const CompileOptions &opts) {
  if (Error e = verifyGraph(g))
    return e;
  int64_t fromGraph = graphCtx(g);
  if (opts.ctx > 0 && fromGraph > 0 && opts.ctx != fromGraph)
    return makeError("the model's KV cache has " + Twine(fromGraph) + " rows but ctx " +
                     Twine(opts.ctx) + " was requested; build the model with that ctx");

  Graph work = g;
  std::string pipeline = compilePipeline(opts);
  PassOptions passOpts = opts.passOptions;
  if (!passOpts.sink)
    passOpts.sink = opts.log;
  FusionOptions fusion;
  fusion.enabled = opts.fusion;
  fusion.disabled = opts.disableFusion;
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
  po.kvDtype = opts.kvDtype;
  po.lastLogitsOnly = opts.lastLogitsOnly;
  po.source = opts.source;

  std::vector<PlanPassRecord> records;
  for (const PassRecord &r : pm.records())
    records.push_back({r.name, r.changed, r.seconds});

  std::vector<PlanSection> sections;
  {
    // What fusion did, for `inspect` (text: one line per pattern, then refusals).
    std::string text;
    llvm::raw_string_ostream os(text);
    report.print(os);
    sections.push_back({"fusion", std::move(os.str()), 0});
    sections.back().checked = sections.back().bytes.size();
  }
  if (opts.cuda) {
    cuda::LowerOptions lo;
    lo.emit.arch = opts.arch;
    lo.nvrtc.cacheDir = opts.kernelCacheDir;
    lo.ctx = po.ctx;
    lo.log = opts.log;
    cuda::LowerStats stats;
    Expected<CompiledProgram> prog = cuda::lowerGraph(work, lo, &stats);
    if (!prog)
      return prog.takeError();
    if (opts.log)
      opts.log(LogLevel::Verbose,
               "codegen: " + std::to_string(stats.kernels) + " kernel launches, " +
                   std::to_string(stats.gemms) + " cuBLAS calls, " +
                   std::to_string(stats.modules) + " modules (" +
                   std::to_string(stats.cacheHits) + " from the kernel cache), arena " +
                   std::to_string(stats.arenaBytes) + " bytes");
    EncodedProgram enc = encodeProgram(*prog);
    sections.push_back({"program", std::move(enc.bytes), enc.bulkOffset});
  }
  return Plan(std::move(work), std::move(po), std::move(records), buildCudaRuntimeVersion(),
              buildNvrtcVersion(), std::move(sections));
}

} // namespace fg
