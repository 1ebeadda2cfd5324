#include "codegen/cuda/Lower.h"

#include "passes/memory/BufferPlan.h"
#include "passes/memory/LaunchDag.h"

#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringMap.h"

#include <future>
#include <map>
#include <thread>

namespace fg::cuda {
namespace {

/// One node's emitted launches plus the layouts they were emitted for.
struct NodeCode {
  std::vector<Launch> launches;
  uint64_t scratchBytes = 0;
};

llvm::Error locate(const Function &fn, const Node &n, const llvm::Twine &msg) {
  std::string what = "@" + fn.name().str() + ": " + std::string(n.info().mnemonic);
  if (!n.results.empty())
    what += " %" + valueLabel(fn, n.result()).substr(1);
  if (n.loc.valid())
    what += " (line " + std::to_string(n.loc.line) + ")";
  return makeError(what + ": " + msg);
}

std::string describe(const Function &fn, const Node &n) {
  std::string s;
  for (size_t r = 0; r < n.results.size(); ++r)
    s += (r ? ", " : "") + valueLabel(fn, n.results[r]);
  s += " = " + std::string(n.info().mnemonic);
  if (n.loc.valid())
    s += " (line " + std::to_string(n.loc.line) + ")";
  return s;
}

/// The program's weight/state tables, shared by name across entries.
struct Tables {
  llvm::StringMap<uint32_t> weightIndex, stateIndex;
  CompiledProgram *prog;

  uint32_t slot(const Function &fn, const Argument &a) {
    const Value &v = fn.value(a.value);
    auto &index = a.role == ArgRole::Weight ? weightIndex : stateIndex;
    auto &list = a.role == ArgRole::Weight ? prog->weights : prog->state;
    auto it = index.find(v.name);
    if (it != index.end())
      return it->second;
    uint32_t i = static_cast<uint32_t>(list.size());
    list.push_back({v.name, v.type, a.init, {}});
    index[v.name] = i;
    return i;
  }
};

class EntryLowering {
public:
  EntryLowering(const Function &fn, const LowerOptions &opts, Tables &tables)
      : fn_(fn), opts_(opts), tables_(tables) {}

  llvm::Error run(CompiledEntry &out, std::vector<std::pair<std::string, std::string>> &sources,
                  std::vector<std::vector<size_t>> &sourceOfLaunch, LowerStats &stats);

private:
  llvm::Error computeLayouts();
  llvm::Expected<BufferRef> bufferOf(ValueId v);

  const Function &fn_;
  const LowerOptions &opts_;
  Tables &tables_;
  std::vector<Layout> layout_; ///< per value, relative to its storage root
  std::vector<NodeCode> code_; ///< per node
  std::optional<LaunchDag> dag_;
  std::optional<BufferPlan> plan_;
};

llvm::Error EntryLowering::computeLayouts() {
  layout_.assign(fn_.numValues(), Layout{});
  for (const Argument &a : fn_.arguments())
    layout_[a.value] = Layout::contiguous(fn_.type(a.value).shape);
  for (const Node &n : fn_.nodes()) {
    if (n.info().has(kViewLike)) {
      auto l = viewLayout(n, layout_[n.operands[0]]);
      if (!l)
        return locate(fn_, n, "this view of a non-contiguous value cannot be expressed with "
                              "strides; insert a cont before it");
      layout_[n.result()] = *l;
      continue;
    }
    for (ValueId r : n.results)
      layout_[r] = Layout::contiguous(fn_.type(r).shape);
  }
  return llvm::Error::success();
}

llvm::Expected<BufferRef> EntryLowering::bufferOf(ValueId v) {
  ValueId root = storageRoot(fn_, v);
  if (const Argument *a = fn_.argumentOf(root)) {
    if (a->role == ArgRole::Weight)
      return BufferRef{BufferSpace::Weight, tables_.slot(fn_, *a), 0};
    if (a->role == ArgRole::State)
      return BufferRef{BufferSpace::State, tables_.slot(fn_, *a), 0};
  }
  const Placement &p = plan_->at(root);
  if (p.loc != Location::Arena)
    return makeError("internal: " + valueLabel(fn_, v) + " has no arena placement");
  return BufferRef{BufferSpace::Arena, 0, static_cast<uint64_t>(p.offset)};
}

llvm::Error EntryLowering::run(CompiledEntry &out,
                               std::vector<std::pair<std::string, std::string>> &sources,
                               std::vector<std::vector<size_t>> &sourceOfLaunch,
                               LowerStats &stats) {
  if (auto e = computeLayouts())
    return e;

  // 1. Emit every node (scratch sizes are needed by the planner).
  code_.resize(fn_.numNodes());
  for (NodeId id = 0; id < fn_.numNodes(); ++id) {
    const Node &n = fn_.node(id);
    if (!launchesWork(n))
      continue;
    std::vector<Layout> operandLayouts;
    for (ValueId o : n.operands)
      operandLayouts.push_back(layout_[o]);
    auto launches = emitKernel(fn_, n, operandLayouts, opts_.emit);
    if (!launches)
      return locate(fn_, n, llvm::toString(launches.takeError()));
    code_[id].launches = std::move(*launches);
    for (const Launch &l : code_[id].launches)
      code_[id].scratchBytes = std::max<uint64_t>(
          code_[id].scratchBytes, std::visit([](const auto &s) { return s.scratchBytes; }, l));
  }

  // 2. Plan memory over the launch DAG.
  auto dag = LaunchDag::build(fn_);
  if (!dag)
    return dag.takeError();
  dag_.emplace(std::move(*dag));
  MemoryPlanOptions mopts;
  mopts.scratchBytes = [this](const Function &, NodeId n) {
    return static_cast<int64_t>(code_[n].scratchBytes);
  };
  auto plan = planMemory(fn_, *dag_, mopts);
  if (!plan)
    return plan.takeError();
  plan_.emplace(std::move(*plan));
  out.name = fn_.name().str();
  out.arenaBytes = static_cast<uint64_t>(plan_->arenaBytes);
  out.peakLiveBytes = static_cast<uint64_t>(plan_->peakLiveBytes);
  stats.arenaBytes = std::max<uint64_t>(stats.arenaBytes, out.arenaBytes);
  stats.peakLiveBytes = std::max<uint64_t>(stats.peakLiveBytes, plan_->peakLiveBytes);

  // 3. Inputs and outputs.
  for (const Argument &a : fn_.arguments()) {
    if (a.role != ArgRole::Input)
      continue;
    auto where = bufferOf(a.value);
    if (!where)
      return where.takeError();
    out.inputs.push_back({fn_.value(a.value).name, fn_.type(a.value), *where});
  }
  for (ValueId r : fn_.results()) {
    if (!layout_[r].isContiguous() || fn_.argumentOf(storageRoot(fn_, r)))
      return makeError("@" + fn_.name() + ": result " + valueLabel(fn_, r) +
                       " must be a dense computed value (add a cont)");
    auto where = bufferOf(r);
    if (!where)
      return where.takeError();
    out.outputs.push_back({fn_.value(r).name, fn_.type(r), *where});
  }

  // 4. Launch records, with DAG dependencies: a node's first launch waits for
  // the last launch of each predecessor node; its own launches run in order.
  std::vector<int64_t> lastRecordOfLaunch(dag_->launches().size(), -1);
  // cuBLAS calls share the one workspace: they must not run concurrently, so
  // each waits for the previous one (an extra edge, never a missing one).
  int64_t lastGemm = -1;
  for (LaunchId lid = 0; lid < dag_->launches().size(); ++lid) {
    const LaunchNode &ln = dag_->launch(lid);
    const Node &n = fn_.node(ln.node);
    NodeCode &nc = code_[ln.node];
    std::vector<uint32_t> deps;
    for (LaunchId p : ln.preds)
      if (lastRecordOfLaunch[p] >= 0)
        deps.push_back(static_cast<uint32_t>(lastRecordOfLaunch[p]));
    auto resolve = [&](const Param &p) -> llvm::Expected<BufferRef> {
      switch (p.kind) {
      case Param::Kind::Operand:
        return bufferOf(n.operands[p.index]);
      case Param::Kind::Result:
        return bufferOf(n.results[p.index]);
      case Param::Kind::Scratch:
        return BufferRef{BufferSpace::Arena, 0,
                         static_cast<uint64_t>(plan_->scratch[ln.node].offset)};
      }
      return makeError("bad param");
    };
    for (size_t k = 0; k < nc.launches.size(); ++k) {
      LaunchRecord rec;
      rec.what = describe(fn_, n);
      rec.deps = deps;
      if (const auto *ks = std::get_if<KernelSpec>(&nc.launches[k])) {
        rec.kind = LaunchRecord::Kind::Kernel;
        rec.symbol = ks->name;
        for (int d = 0; d < 3; ++d) {
          rec.grid[d] = ks->grid[d];
          rec.block[d] = ks->block[d];
        }
        rec.sharedBytes = ks->sharedBytes;
        for (const Param &p : ks->params) {
          auto ref = resolve(p);
          if (!ref)
            return ref.takeError();
          rec.args.push_back(*ref);
        }
        // Modules are numbered after all entries are lowered.
        size_t src = sources.size();
        sources.emplace_back(ks->name, ks->source);
        sourceOfLaunch.back().push_back(src);
        ++stats.kernels;
      } else {
        const auto &g = std::get<CublasGemmSpec>(nc.launches[k]);
        rec.kind = LaunchRecord::Kind::Gemm;
        GemmDesc &d = rec.gemm;
        d.transA = g.transA;
        d.transB = g.transB;
        d.m = g.m;
        d.n = g.n;
        d.k = g.k;
        d.aType = g.aType;
        d.bType = g.bType;
        d.cType = g.cType;
        d.lda = g.lda;
        d.ldb = g.ldb;
        d.ldc = g.ldc;
        d.alpha = g.alpha;
        d.beta = g.beta;
        for (auto [from, to] : {std::pair{&g.a, &d.a}, std::pair{&g.b, &d.b}, std::pair{&g.c, &d.c}}) {
          auto ref = resolve(from->param);
          if (!ref)
            return ref.takeError();
          *to = *ref;
          to->offset += from->byteOffset;
        }
        sourceOfLaunch.back().push_back(~size_t(0));
        ++stats.gemms;
        if (lastGemm >= 0 && !llvm::is_contained(rec.deps, static_cast<uint32_t>(lastGemm)))
          rec.deps.push_back(static_cast<uint32_t>(lastGemm));
        lastGemm = static_cast<int64_t>(out.launches.size());
      }
      out.launches.push_back(std::move(rec));
      deps = {static_cast<uint32_t>(out.launches.size() - 1)};
    }
    if (!nc.launches.empty())
      lastRecordOfLaunch[lid] = static_cast<int64_t>(out.launches.size() - 1);
    else if (!ln.preds.empty()) {
      // A node without launches (cannot happen for launching nodes) forwards deps.
      lastRecordOfLaunch[lid] = deps.empty() ? -1 : deps.front();
    }
  }
  return llvm::Error::success();
}

/// Device-side weight initialisation: the same formula as the reference's
/// initValue (splitmix64, Box–Muller in f64), rounded to the weight's dtype.
constexpr const char *kInitSource = R"cuda(
typedef unsigned long long u64;
__device__ __forceinline__ u64 splitmix64(u64 x) {
  u64 z = x + 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}
// kind: 1 normal(a = mean, b = std), 2 uniform(a = min, b = max), 3 constant(a)
__device__ __forceinline__ float initValue(int kind, u64 seed, double a, double b, u64 i) {
  u64 h = splitmix64(seed ^ (0x9E3779B97F4A7C15ull * i));
  if (kind == 1) {
    double u1 = ((double)(h >> 32) + 0.5) * 0x1p-32;
    double u2 = (double)(h & 0xFFFFFFFFull) * 0x1p-32;
    double z = sqrt(-2.0 * log(u1)) * cos(2.0 * 3.141592653589793 * u2);
    return (float)(a + b * z);
  }
  if (kind == 2)
    return (float)(a + (b - a) * ((double)(h >> 11) * 0x1p-53));
  return (float)a;
}
extern "C" __global__ void fg_init_f32(float *out, u64 n, int kind, u64 seed, double a, double b) {
  for (u64 i = blockIdx.x * (u64)blockDim.x + threadIdx.x; i < n; i += (u64)gridDim.x * blockDim.x)
    out[i] = initValue(kind, seed, a, b, i);
}
extern "C" __global__ void fg_init_f16(unsigned short *out, u64 n, int kind, u64 seed, double a, double b) {
  for (u64 i = blockIdx.x * (u64)blockDim.x + threadIdx.x; i < n; i += (u64)gridDim.x * blockDim.x) {
    unsigned short h;
    asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(initValue(kind, seed, a, b, i)));
    out[i] = h;
  }
}
extern "C" __global__ void fg_init_bf16(unsigned short *out, u64 n, int kind, u64 seed, double a, double b) {
  for (u64 i = blockIdx.x * (u64)blockDim.x + threadIdx.x; i < n; i += (u64)gridDim.x * blockDim.x) {
    unsigned short h;
    asm("cvt.rn.bf16.f32 %0, %1;" : "=h"(h) : "f"(initValue(kind, seed, a, b, i)));
    out[i] = h;
  }
}
)cuda";

} // namespace

llvm::Expected<CompiledProgram> lowerGraph(const Graph &g, const LowerOptions &opts,
                                           LowerStats *statsOut) {
  CompiledProgram prog;
  prog.arch = opts.emit.arch;
  prog.workspaceBytes = opts.cublasWorkspaceBytes;
  Tables tables{{}, {}, &prog};
  LowerStats stats;

  std::vector<std::pair<std::string, std::string>> sources; // (symbol, source)
  std::vector<std::vector<size_t>> sourceOfLaunch;          // per entry, per launch
  for (const Function &fn : g.functions()) {
    // Declare every weight and state in argument order, so tables are stable.
    for (const Argument &a : fn.arguments())
      if (a.role != ArgRole::Input)
        tables.slot(fn, a);
    CompiledEntry entry;
    sourceOfLaunch.emplace_back();
    EntryLowering lowering(fn, opts, tables);
    if (auto e = lowering.run(entry, sources, sourceOfLaunch, stats))
      return e;
    prog.entries.push_back(std::move(entry));
  }

  // Weights with an initialiser are generated on the device by one more module.
  bool anyInit = false;
  for (const TensorSlot &w : prog.weights)
    anyInit |= w.init.kind == WeightInit::Kind::Normal ||
               w.init.kind == WeightInit::Kind::Uniform ||
               w.init.kind == WeightInit::Kind::Constant;
  size_t initSource = ~size_t(0);
  if (anyInit) {
    initSource = sources.size();
    sources.emplace_back("fg_init", kInitSource);
  }

  // Dedupe sources; compile each unique one (in parallel) into a module.
  std::map<std::string, uint32_t> moduleOfSource;
  std::vector<const std::pair<std::string, std::string> *> unique;
  std::vector<uint32_t> moduleOfSourceIndex(sources.size());
  for (size_t i = 0; i < sources.size(); ++i) {
    auto [it, inserted] =
        moduleOfSource.emplace(sources[i].second, static_cast<uint32_t>(unique.size()));
    if (inserted)
      unique.push_back(&sources[i]);
    moduleOfSourceIndex[i] = it->second;
  }
  if (opts.log)
    opts.log(LogLevel::Progress, "compiling " + std::to_string(unique.size()) +
                                     " kernels with NVRTC for " + opts.emit.arch);
  std::vector<llvm::Expected<CompiledModule>> compiled;
  compiled.reserve(unique.size());
  {
    unsigned workers = std::max(1u, std::thread::hardware_concurrency());
    std::vector<std::optional<llvm::Expected<CompiledModule>>> results(unique.size());
    std::atomic<size_t> next{0};
    std::vector<std::thread> pool;
    for (unsigned w = 0; w < std::min<size_t>(workers, unique.size()); ++w)
      pool.emplace_back([&] {
        for (size_t i = next++; i < unique.size(); i = next++)
          results[i].emplace(compileCuda(unique[i]->second, unique[i]->first, opts.emit.arch,
                                         opts.nvrtc));
      });
    for (std::thread &t : pool)
      t.join();
    for (auto &r : results)
      compiled.push_back(std::move(*r));
  }
  for (size_t i = 0; i < compiled.size(); ++i) {
    if (!compiled[i]) {
      llvm::Error err = compiled[i].takeError();
      for (size_t k = i + 1; k < compiled.size(); ++k)
        if (!compiled[k])
          llvm::consumeError(compiled[k].takeError());
      return makeError("kernel " + unique[i]->first + " failed to compile: " +
                       llvm::toString(std::move(err)));
    }
    KernelImage img;
    img.name = unique[i]->first;
    img.cubin.assign(compiled[i]->cubin.begin(), compiled[i]->cubin.end());
    img.ptx = compiled[i]->ptx;
    stats.cacheHits += compiled[i]->cacheHit;
    prog.modules.push_back(std::move(img));
  }
  stats.modules = static_cast<unsigned>(prog.modules.size());
  for (size_t e = 0; e < prog.entries.size(); ++e) {
    auto &launches = prog.entries[e].launches;
    for (size_t l = 0; l < launches.size(); ++l)
      if (sourceOfLaunch[e][l] != ~size_t(0))
        launches[l].module = moduleOfSourceIndex[sourceOfLaunch[e][l]];
  }

  if (initSource != ~size_t(0))
    prog.initModule = static_cast<int32_t>(moduleOfSourceIndex[initSource]);
  prog.ctx = opts.ctx;
  if (!prog.ctx && !prog.state.empty() && prog.state.front().type.rank() > 0)
    prog.ctx = prog.state.front().type.shape[0];
  if (statsOut)
    *statsOut = stats;
  return prog;
}

} // namespace fg::cuda
