//===- fusegraph.cpp - the Python module `fusegraph` (nanobind) -----------===//
//
//   import fusegraph as fg
//   plan = fg.compile("demo", ctx=256, prefill=[16])      # fg::compile
//   ex = fg.Executor(plan, device="cpu")                   # fg::Session over fg::Executor
//   logits = ex.step([5], [0])                             # numpy.ndarray f32 [1, vocab], a copy
//   tokens = ex.generate([5, 17, 42], steps=8)             # fg::Session::generate
//
// The one translation unit of the tree built with RTTI and exceptions on
// (nanobind needs both): every llvm::Error the library returns becomes a
// `fusegraph.Error` (a RuntimeError) carrying the library's message, here and
// nowhere else. Library code never sees a C++ exception: Python callbacks
// (sampler, on_token) run inside the library's loop, so a Python exception
// they raise is kept, the loop is stopped with an llvm::Error or `false`, and
// the exception is raised again once the library has returned.
//
// Results are copies. step() returns the logits as a new NumPy array: the
// executor's host rows are freed by its next run (an aliasing view would
// dangle, not merely go stale), and the copy (vocab x 4 bytes) costs
// microseconds next to a step. On the CUDA device, device_logits() hands out
// the logits where the arena keeps them, through DLPack without a copy
// (torch.from_dlpack). That memory is overwritten by the next step, so the
// DeviceLogits object refuses to be converted once another step, reset or
// generate has run; a tensor already made from it aliases the arena and
// shows the next step's values (clone() to keep one). The tensor keeps the
// executor alive, so its memory is never freed under it.
//
//===----------------------------------------------------------------------===//
#include "codegen/cuda/Compile.h"
#include "frontends/Frontend.h"
#include "ir/OpTable.h"
#include "ir/Printer.h"
#include "passes/fusion/FusionReport.h"
#include "runtime/DeviceMemory.h"
#include "runtime/Executor.h"
#include "runtime/Plan.h"
#include "runtime/ProgramIO.h"
#include "runtime/Session.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringSet.h"

#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <algorithm>
#include <map>
#include <optional>
#include <random>
#include <stdexcept>

namespace nb = nanobind;
using namespace nb::literals;
using llvm::ArrayRef;
using llvm::Expected;
using llvm::StringRef;

namespace {

/// What the library returned as an llvm::Error; `fusegraph.Error` in Python.
struct FgError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

void check(llvm::Error e) {
  if (e)
    throw FgError(llvm::toString(std::move(e)));
}

template <class T> T unwrap(Expected<T> v) {
  if (!v)
    throw FgError(llvm::toString(v.takeError()));
  return std::move(*v);
}

using FloatArray = nb::ndarray<nb::numpy, float>;

/// A NumPy array owning a copy of `values`, of shape `shape`.
FloatArray toNumpy(ArrayRef<float> values, ArrayRef<int64_t> shape) {
  auto *copy = new std::vector<float>(values.begin(), values.end());
  nb::capsule owner(copy, [](void *p) noexcept { delete static_cast<std::vector<float> *>(p); });
  std::vector<size_t> dims(shape.begin(), shape.end());
  return FloatArray(copy->data(), dims.size(), dims.data(), owner);
}

std::vector<int32_t> toInt32(const std::vector<int64_t> &values, const char *what) {
  std::vector<int32_t> out;
  out.reserve(values.size());
  for (size_t i = 0; i < values.size(); ++i) {
    int64_t v = values[i];
    if (v < INT32_MIN || v > INT32_MAX)
      throw FgError(std::string(what) + "[" + std::to_string(i) + "] = " + std::to_string(v) +
                    " does not fit in 32 bits (token ids and positions are int32)");
    out.push_back(static_cast<int32_t>(v));
  }
  return out;
}

std::string deviceWord(fg::ExecOptions::Device d) { return fg::deviceName(d).str(); }

//===----------------------------------------------------------------------===//
// compile
//===----------------------------------------------------------------------===//

fg::Plan compileModel(const std::string &model, std::optional<int64_t> ctx,
                      std::optional<std::vector<int64_t>> prefill, bool fusion,
                      const std::vector<std::string> &disableFusion, const std::string &kvDType,
                      const std::string &arch, bool cuda, bool allLogits,
                      const std::string &kernelCacheDir) {
  StringRef path(model);
  if (path.endswith(".plan"))
    throw FgError("'" + model + "' is a compiled plan: load it with fusegraph.Plan.load");
  const bool fgText = path.endswith(".fg");
  if (fgText && (ctx || prefill))
    throw FgError("'" + model +
                  "' brings its own entries and ctx; ctx= and prefill= apply to "
                  "model files and 'demo'");
  std::optional<fg::DType> kv = fg::parseDType(kvDType);
  if (!kv || (*kv != fg::DType::F16 && *kv != fg::DType::BF16 && *kv != fg::DType::F32))
    throw FgError("unknown kv_dtype '" + kvDType + "' (f16, bf16 or f32)");
  std::vector<std::string> patterns = fg::fusionPatternNames();
  for (const std::string &name : disableFusion)
    if (!llvm::is_contained(patterns, name))
      throw FgError("unknown fusion pattern '" + name +
                    "' in disable_fusion; the patterns are: " + llvm::join(patterns, ", "));

  fg::ModelOptions mo;
  if (ctx)
    mo.ctx = *ctx;
  if (prefill)
    mo.prefill = *prefill;
  mo.kvDType = *kv;
  mo.allLogits = allLogits;
  fg::CompileOptions co;
  co.fusion = fusion;
  co.disableFusion = disableFusion;
  co.arch = arch;
  co.ctx = fgText ? 0 : mo.ctx; // a .fg file's ctx is the range of its positions
  co.kvDType = *kv;
  co.source = model;
  co.cuda = cuda;
  co.kernelCacheDir = kernelCacheDir;

  nb::gil_scoped_release release;
  fg::LoadedModel loaded = unwrap(fg::loadModelWithWeights(path, mo));
  // Weights from model files are recipes over their ranges; computed ones are
  // copied (as tools/Model.cpp hands them to compile).
  for (const fg::WeightEntry &w : loaded.weights.entries()) {
    fg::ExternalWeight x;
    x.name = w.name;
    x.type = w.type;
    x.recipe = w.recipe;
    x.bytes = w.data;
    co.weights.push_back(std::move(x));
  }
  return unwrap(fg::compile(loaded.graph, co));
}

//===----------------------------------------------------------------------===//
// The fusion report and the program facts (what `fusegraph inspect --json`
// shows; tests/test_fusegraph.py checks them against its output)
//===----------------------------------------------------------------------===//

/// The node a fusion root (`%name`) names in `entry` of the plan's graph.
std::optional<int64_t> rootNode(const fg::Graph &g, StringRef entry, StringRef root) {
  const fg::Function *fn = g.lookup(entry);
  if (!fn || !root.startswith("%"))
    return std::nullopt;
  fg::ValueId v = fn->lookup(root.drop_front());
  if (v == fg::kNoValue || fn->value(v).isArgument())
    return std::nullopt;
  return static_cast<int64_t>(fn->value(v).def);
}

struct FusionApplied {
  std::string entry, pattern;
  int64_t count = 0;
  std::vector<std::string> roots;            ///< `%name` of each fused node's root value
  std::vector<std::optional<int64_t>> nodes; ///< their node ids in the plan's graph
};

struct FusionRefusal {
  std::string entry, pattern, root, reason;
  std::optional<int64_t> node;
};

struct PyFusionReport {
  std::vector<FusionApplied> applied;
  std::vector<FusionRefusal> refused;
  int64_t splitBack = 0;
};

/// The plan's fusion report; nullopt when the plan recorded none.
std::optional<PyFusionReport> fusionReport(const fg::Plan &plan) {
  const fg::PlanSection *section = plan.section("fusion");
  if (!section)
    return std::nullopt;
  fg::FusionReport report = unwrap(fg::FusionReport::parse(section->bytes));
  PyFusionReport out;
  for (const fg::FusionReport::Applied &a : report.applied) {
    FusionApplied x{a.entry, a.pattern, a.count, a.roots, {}};
    for (const std::string &r : a.roots)
      x.nodes.push_back(rootNode(plan.graph(), a.entry, r));
    out.applied.push_back(std::move(x));
  }
  for (const fg::FusionReport::Refusal &r : report.refused)
    out.refused.push_back(
        {r.entry, r.pattern, r.root, r.reason, rootNode(plan.graph(), r.entry, r.root)});
  out.splitBack = report.splitBack;
  return out;
}

nb::object optionalInt(const std::optional<int64_t> &v) {
  return v ? nb::object(nb::int_(*v)) : nb::object(nb::none());
}

nb::dict optionsFacts(const fg::PlanOptions &o) {
  nb::dict d;
  d["ctx"] = o.ctx;
  d["prefill"] = nb::cast(o.prefill);
  d["arch"] = o.arch;
  d["fusion"] = o.fusion;
  d["disable_fusion"] = nb::cast(o.disableFusion);
  d["kv_dtype"] = std::string(fg::dtypeName(o.kvDType));
  d["source"] = o.source;
  return d;
}

nb::dict entryFacts(const fg::Function &fn) {
  nb::dict d;
  d["name"] = fn.name().str();
  d["role"] = fg::entryRoleName(fn.contract().role).str();
  d["tokens"] = fn.contract().tokens;
  nb::list inputs, bindings, results;
  for (const fg::Argument &a : fn.arguments()) {
    if (a.role != fg::ArgRole::Input)
      continue;
    const fg::Value &v = fn.value(a.value);
    inputs.append(v.name + ": " + v.type.str());
    if (a.bind.empty())
      continue;
    nb::dict b;
    b["input"] = v.name;
    b["kind"] = fg::bindKindName(a.bind.kind).str();
    if (a.bind.hasRange()) {
      b["lo"] = a.bind.lo;
      b["hi"] = a.bind.hi;
    }
    bindings.append(b);
  }
  for (fg::ValueId r : fn.results())
    results.append(fn.value(r).name + ": " + fn.type(r).str());
  std::map<std::string, int64_t> opCounts;
  double flops = 0, bytes = 0;
  for (const fg::Node &n : fn.nodes()) {
    ++opCounts[std::string(fg::mnemonic(n.kind))];
    llvm::SmallVector<fg::TensorType, 4> in, out;
    for (fg::ValueId v : n.operands)
      in.push_back(fn.type(v));
    for (fg::ValueId v : n.results)
      out.push_back(fn.type(v));
    fg::Cost c = fg::opCost(n.kind, in, n.attrs, out);
    flops += c.flops;
    bytes += c.bytes;
  }
  nb::dict counts;
  for (const auto &kv : opCounts)
    counts[kv.first.c_str()] = kv.second;
  d["inputs"] = inputs;
  d["bindings"] = bindings;
  d["results"] = results;
  d["ops"] = static_cast<int64_t>(fn.nodes().size());
  d["op_counts"] = counts;
  d["flops"] = flops;
  d["bytes"] = bytes;
  return d;
}

nb::object fusionFacts(const fg::Plan &plan) {
  std::optional<PyFusionReport> r = fusionReport(plan);
  if (!r)
    return nb::none();
  nb::list applied, refused;
  for (const FusionApplied &a : r->applied) {
    nb::dict d;
    d["entry"] = a.entry;
    d["pattern"] = a.pattern;
    d["count"] = a.count;
    d["roots"] = nb::cast(a.roots);
    nb::list nodes;
    for (const std::optional<int64_t> &n : a.nodes)
      nodes.append(optionalInt(n));
    d["nodes"] = nodes;
    applied.append(d);
  }
  for (const FusionRefusal &x : r->refused) {
    nb::dict d;
    d["entry"] = x.entry;
    d["pattern"] = x.pattern;
    d["root"] = x.root;
    d["node"] = optionalInt(x.node);
    d["reason"] = x.reason;
    refused.append(d);
  }
  nb::dict d;
  d["applied"] = applied;
  d["refused"] = refused;
  d["split_back"] = r->splitBack;
  return d;
}

nb::object programFacts(const fg::Plan &plan) {
  const fg::PlanSection *section = plan.section("program");
  if (!section)
    return nb::none();
  fg::CompiledProgram prog = unwrap(fg::decodeProgram(section->bytes));
  std::vector<std::string> symbols;
  nb::list entries, modules;
  for (const fg::CompiledEntry &e : prog.entries) {
    int64_t kernels = 0, gemms = 0;
    nb::list launches;
    for (const fg::LaunchRecord &l : e.launches) {
      bool gemm = l.kind == fg::LaunchRecord::Kind::Gemm;
      ++(gemm ? gemms : kernels);
      if (!gemm && !llvm::is_contained(symbols, l.symbol))
        symbols.push_back(l.symbol);
      nb::dict d;
      d["kind"] = gemm ? "cublas" : "kernel";
      d["node"] =
          optionalInt(l.node == fg::kNoNode ? std::nullopt : std::optional<int64_t>(l.node));
      d["op"] = l.node == fg::kNoNode ? std::string(fg::nodelessLaunchName(&l - &e.launches[0]))
                                      : std::string(fg::mnemonic(l.op));
      d["what"] = l.what;
      if (!gemm)
        d["symbol"] = l.symbol;
      nb::list deps;
      for (uint32_t dep : l.deps)
        deps.append(static_cast<int64_t>(dep));
      d["deps"] = deps;
      launches.append(d);
    }
    nb::dict d;
    d["name"] = e.name;
    d["arena_bytes"] = static_cast<int64_t>(e.arenaBytes);
    d["peak_live_bytes"] = static_cast<int64_t>(e.peakLiveBytes);
    d["kernel_launches"] = kernels;
    d["cublas_calls"] = gemms;
    d["launches"] = launches;
    entries.append(d);
  }
  for (const fg::KernelImage &m : prog.modules) {
    nb::dict d;
    d["name"] = m.name;
    d["cubin_bytes"] = static_cast<int64_t>(m.cubin.size());
    d["ptx_bytes"] = static_cast<int64_t>(m.ptx.size());
    modules.append(d);
  }
  nb::dict d;
  d["arch"] = prog.arch;
  d["ctx"] = prog.ctx;
  d["kernels"] = static_cast<int64_t>(symbols.size());
  d["workspace_bytes"] = static_cast<int64_t>(prog.workspaceBytes);
  d["init_module"] = prog.initModule;
  d["modules"] = modules;
  d["entries"] = entries;
  return d;
}

nb::dict planFacts(const fg::Plan &plan) {
  nb::dict d;
  d["format"] =
      std::to_string(fg::Plan::kFormatMajor) + "." + std::to_string(fg::Plan::kFormatMinor);
  d["cuda_runtime_version"] = static_cast<int64_t>(plan.cudaRuntimeVersion());
  d["nvrtc_version"] = static_cast<int64_t>(plan.nvrtcVersion());
  d["options"] = optionsFacts(plan.options());
  nb::list entries;
  struct Totals {
    int64_t values = 0, bytes = 0;
  } weights, state;
  llvm::StringSet<> seen; // weights and state are shared by name between entries
  for (const fg::Function &fn : plan.graph().functions()) {
    entries.append(entryFacts(fn));
    for (const fg::Argument &a : fn.arguments()) {
      const fg::Value &v = fn.value(a.value);
      if (a.role == fg::ArgRole::Input || !seen.insert(v.name).second)
        continue;
      Totals &t = a.role == fg::ArgRole::Weight ? weights : state;
      ++t.values;
      t.bytes += v.type.bytes();
    }
  }
  d["entries"] = entries;
  nb::dict w, s;
  w["values"] = weights.values;
  w["bytes"] = weights.bytes;
  s["values"] = state.values;
  s["bytes"] = state.bytes;
  d["weights"] = w;
  d["state"] = s;
  // Device memory once loaded (inspect's `memory`): the program's weight
  // slots as uploaded (else the graph's), the KV state, the largest arena.
  fg::DeviceMemory m = fg::deviceMemory(nullptr, weights.bytes, state.bytes);
  if (const fg::PlanSection *p = plan.section("program")) {
    llvm::Expected<fg::CompiledProgram> prog = fg::decodeProgram(p->bytes);
    if (prog)
      m = fg::deviceMemory(&*prog, weights.bytes, state.bytes);
    else
      llvm::consumeError(prog.takeError());
  }
  nb::dict mem;
  mem["weight_bytes"] = m.weights;
  mem["state_bytes"] = m.state;
  mem["arena_bytes"] = m.arena;
  mem["workspace_bytes"] = m.workspace;
  mem["total_bytes"] = m.total();
  d["memory"] = mem;
  d["fusions"] = fusionFacts(plan);
  d["cuda"] = programFacts(plan);
  nb::list passes;
  for (const fg::PlanPassRecord &p : plan.passes()) {
    nb::dict x;
    x["name"] = p.name;
    x["changed"] = p.changed;
    passes.append(x);
  }
  d["passes"] = passes;
  return d;
}

//===----------------------------------------------------------------------===//
// Executor: a Session over an fg::Executor
//===----------------------------------------------------------------------===//

class PyExecutor {
public:
  PyExecutor(const fg::Plan &plan, const std::string &device, const std::string &mode) {
    if (device == "cpu")
      opts_.device = fg::ExecOptions::Device::Cpu;
    else if (device == "cuda")
      opts_.device = fg::ExecOptions::Device::Cuda;
    else if (device == "auto")
      opts_.device = fg::cudaDeviceAvailable() && plan.section("program")
                         ? fg::ExecOptions::Device::Cuda
                         : fg::ExecOptions::Device::Cpu;
    else
      throw FgError("device must be 'cpu', 'cuda' or 'auto', got '" + device + "'");
    if (mode == "graph")
      opts_.mode = fg::ExecOptions::Mode::Graph;
    else if (mode == "eager")
      opts_.mode = fg::ExecOptions::Mode::Eager;
    else
      throw FgError("mode must be 'graph' or 'eager', got '" + mode + "'");
    if (opts_.device == fg::ExecOptions::Device::Cuda && !fg::cudaDeviceAvailable())
      throw FgError("device 'cuda' asked for, but no CUDA device can be used by this process");

    nb::gil_scoped_release release;
    fg::Executor exec = unwrap(fg::Executor::create(plan, opts_));
    // A decoder plan (a `decode` entry returning logits) gets a Session, which
    // generate() drives; any other plan only steps.
    fg::SessionOptions so; // the sampler is set by each generate()
    so.onToken = [this](int32_t token) { return onToken(token); };
    Expected<fg::Session> s = fg::Session::create(std::move(exec), std::move(so));
    if (s) {
      session_.emplace(std::move(*s));
      exec_ = &session_->executor();
      return;
    }
    noSession_ = llvm::toString(s.takeError());
    plain_.emplace(unwrap(fg::Executor::create(plan, opts_))); // the session took the first
    exec_ = &*plain_;
  }
  PyExecutor(const PyExecutor &) = delete; // the session's callbacks point here

  /// Marks the executor busy for one call (only touched with the GIL held). A
  /// second call meanwhile — another thread while the GIL is released, or a
  /// generate() callback calling back in — is refused: an fg::Executor is not
  /// thread-safe, and a step inside generate() would corrupt its conversation.
  struct Busy {
    explicit Busy(bool &flag) : flag(flag) {
      if (flag)
        throw FgError("this Executor is busy (a call from another thread, or from a "
                      "generate() callback, while a step, reset or generate runs)");
      flag = true;
    }
    ~Busy() { flag = false; }
    bool &flag;
  };

  fg::Executor &exec() { return *exec_; }
  const fg::Executor &exec() const { return *exec_; }

  /// The entry that takes `n` tokens: the decode entry for one, else the
  /// prefill bucket of size n.
  std::string entryFor(size_t n) const {
    std::vector<std::string> takes;
    for (const std::string &name : exec().entries()) {
      const fg::Function *fn = exec().entry(name);
      const fg::EntryContract &c = fn->contract();
      if (c.role == fg::EntryRole::Other)
        continue;
      if (static_cast<size_t>(c.tokens) == n)
        return name;
      takes.push_back(name + " takes " + std::to_string(c.tokens));
    }
    if (takes.empty())
      throw FgError("this plan's entries have no roles; give entry= (the entries are: " +
                    llvm::join(exec().entries(), ", ") + ")");
    throw FgError("no entry takes " + std::to_string(n) + " tokens (" + llvm::join(takes, ", ") +
                  "); pad to a prefill bucket, give entry=, or use generate()");
  }

  /// Runs one entry; returns its `logits` result (else its first) as a copy.
  FloatArray step(const std::vector<int64_t> &tokens, const std::vector<int64_t> &positions,
                  std::optional<std::string> entry) {
    Busy busy(busy_);
    std::vector<int32_t> t = toInt32(tokens, "tokens"), p = toInt32(positions, "positions");
    std::string name = entry ? *entry : entryFor(t.size());
    const fg::Function *fn = exec().entry(name);
    if (!fn)
      throw FgError("no entry named '" + name +
                    "'; the entries are: " + llvm::join(exec().entries(), ", "));
    ++generation_;
    rawSteps_ = true;
    {
      nb::gil_scoped_release release;
      check(exec().setInput("tokens", t));
      check(exec().setInput("positions", p));
      check(exec().run(name));
    }
    std::string result = resultName(*fn);
    ArrayRef<float> values = unwrap(exec().outputFloats(result));
    fg::ValueId r = fn->lookup(result);
    return toNumpy(values, fn->type(r).shape);
  }

  /// The name of the result step() returns: `logits`, else the first.
  static std::string resultName(const fg::Function &fn) {
    for (fg::ValueId r : fn.results())
      if (fn.value(r).name == "logits")
        return "logits";
    if (fn.results().empty())
      throw FgError("entry '" + fn.name().str() + "' returns nothing");
    return fn.value(fn.results().front()).name;
  }

  void reset() {
    Busy busy(busy_);
    resetConversation();
  }

  void resetConversation() {
    ++generation_;
    rawSteps_ = false;
    if (session_)
      session_->reset();
    else
      exec().resetState();
  }

  fg::Session &session() {
    if (!session_)
      throw FgError("generate() needs a decoder plan: " + noSession_);
    return *session_;
  }

  std::vector<int32_t> generate(const std::vector<int64_t> &prompt, int64_t steps,
                                nb::object sampler, nb::object onTok, bool resetFirst,
                                const std::vector<int64_t> &forced,
                                std::optional<double> temperature, int64_t topK, double topP,
                                double minP, std::optional<uint64_t> seed) {
    Busy busy(busy_);
    fg::Session &s = session();
    // The built-in sampler (fg::SamplingOptions: greedy by default; drawn on
    // the CUDA device with no row copied) unless a Python one is given.
    const bool filtered = topK != 0 || topP != 1.0 || minP != 0.0;
    const bool custom = sampler.is_valid() && !sampler.is_none();
    if (custom && (filtered || temperature))
      throw FgError("give either sample= or temperature/top_k/top_p/min_p, not both");
    fg::SamplingOptions so;
    so.temperature = temperature ? *temperature : (filtered ? 1.0 : 0.0);
    so.topK = topK;
    so.topP = topP;
    so.minP = minP;
    so.seed = seed ? *seed : std::random_device{}();
    fg::Sampler hook;
    if (custom)
      hook = [this](ArrayRef<float> logits) { return sample(logits); };
    if (llvm::Error e = s.setSampling(so, std::move(hook)))
      throw FgError(llvm::toString(std::move(e)));
    if (!resetFirst && rawSteps_)
      throw FgError("step() has changed the KV cache since the session last ran; call "
                    "generate(..., reset=True) or reset() first");
    std::vector<int32_t> p = toInt32(prompt, "prompt"), f = toInt32(forced, "forced");
    if (resetFirst)
      resetConversation();
    ++generation_;
    sampler_ = std::move(sampler);
    onToken_ = std::move(onTok);
    Expected<std::vector<int32_t>> tokens = [&] {
      nb::gil_scoped_release release;
      return s.generate(p, steps, f);
    }();
    sampler_ = nb::object();
    onToken_ = nb::object();
    if (pending_) { // a callback raised: that exception, not the library's echo of it
      if (!tokens)
        llvm::consumeError(tokens.takeError());
      nb::python_error e = std::move(*pending_);
      pending_.reset();
      throw e;
    }
    return unwrap(std::move(tokens));
  }

  FloatArray lastLogits() {
    ArrayRef<float> l = session().lastLogits();
    if (l.empty())
      throw FgError("nothing has been fed since the last reset");
    int64_t shape[2] = {1, static_cast<int64_t>(l.size())};
    return toNumpy(l, shape);
  }

  nb::dict stats() {
    const fg::SessionStats &st = session().stats();
    nb::dict d;
    d["prompt_tokens"] = st.promptTokens;
    d["prompt_runs"] = st.promptRuns;
    d["prompt_ms"] = st.promptMs;
    d["decode_steps"] = st.decodeSteps;
    d["decode_ms"] = st.decodeMs;
    return d;
  }

  bool isDecoder() const { return session_.has_value(); }
  std::string device() const { return deviceWord(opts_.device); }
  uint64_t generation() const { return generation_; }

private:
  Expected<int32_t> sample(ArrayRef<float> logits) {
    if (!sampler_.is_valid() || sampler_.is_none())
      return fg::greedyToken(logits);
    nb::gil_scoped_acquire gil;
    try {
      int64_t shape[1] = {static_cast<int64_t>(logits.size())};
      nb::object r = sampler_(toNumpy(logits, shape));
      int64_t t;
      if (!nb::try_cast(r, t))
        return fg::makeError(llvm::Twine("the sampler returned ") + nb::repr(r).c_str() +
                             ", not a token id");
      if (t < 0 || t >= static_cast<int64_t>(logits.size()))
        return fg::makeError("the sampler returned token " + llvm::Twine(t) + ", outside [0, " +
                             llvm::Twine(logits.size()) + ")");
      return static_cast<int32_t>(t);
    } catch (nb::python_error &e) {
      pending_.emplace(std::move(e));
      return fg::makeError("the sampler raised");
    }
  }

  bool onToken(int32_t token) {
    if (!onToken_.is_valid() || onToken_.is_none())
      return true;
    nb::gil_scoped_acquire gil;
    try {
      nb::object r = onToken_(token);
      return r.is_none() || PyObject_IsTrue(r.ptr()) == 1;
    } catch (nb::python_error &e) {
      pending_.emplace(std::move(e));
      return false;
    }
  }

  fg::ExecOptions opts_;
  std::optional<fg::Session> session_; ///< decoder plans
  std::optional<fg::Executor> plain_;  ///< other plans
  fg::Executor *exec_ = nullptr;       ///< the session's executor, else plain_
  std::string noSession_;              ///< why there is no session
  /// Counts runs (step, generate, reset): a DeviceLogits view is valid only
  /// for the generation it was made in.
  uint64_t generation_ = 0;
  bool rawSteps_ = false; ///< step() ran since the session's last reset
  bool busy_ = false;     ///< a step, reset or generate is running (read with the GIL)
  nb::object sampler_, onToken_;
  std::optional<nb::python_error> pending_;
};

/// The logits of one step where the device keeps them (DLPack, no copy).
struct DeviceLogits {
  nb::object owner; ///< the Python Executor: the arena lives as long as it does
  uint64_t generation = 0;

  PyExecutor &exec() const { return nb::cast<PyExecutor &>(owner); }
  bool valid() const { return exec().generation() == generation; }

  nb::object array() const {
    if (!valid())
      throw FgError("these device logits were overwritten by a later step, reset or generate "
                    "(a DeviceLogits is valid until the next one; clone the tensor to keep it)");
    PyExecutor &ex = exec();
    fg::Executor &e = ex.exec();
    fg::Executor::DeviceOutput out = unwrap(e.deviceOutput("logits"));
    if (out.type.dtype != fg::DType::F32)
      throw FgError("the logits are " + out.type.str() + ", not f32");
    std::vector<size_t> shape(out.type.shape.begin(), out.type.shape.end());
    nb::ndarray<nb::array_api, float> a(const_cast<void *>(out.data), shape.size(), shape.data(),
                                        owner, /*strides=*/nullptr, nb::dtype<float>(),
                                        nb::device::cuda::value, out.device);
    return nb::cast(a, nb::rv_policy::reference); // no copy: `owner` keeps the arena
  }
};

} // namespace

NB_MODULE(fusegraph, m) {
  m.doc() = "fusegraph: compile decoder models into plans and run them (CPU reference, CUDA)";
  nb::exception<FgError>(m, "Error", PyExc_RuntimeError);

  m.def("compile", &compileModel, "model"_a, nb::kw_only(), "ctx"_a = nb::none(),
        "prefill"_a = nb::none(), "fusion"_a = true,
        "disable_fusion"_a = std::vector<std::string>(), "kv_dtype"_a = "f16", "arch"_a = "sm_90",
        "cuda"_a = true, "all_logits"_a = false, "kernel_cache_dir"_a = "",
        "Loads MODEL ('demo', a .fg file, a .gguf file or a Hugging Face folder) and compiles "
        "it into a Plan (fg::compile). ctx (default 4096) and prefill (default [64]) shape model "
        "files; a .fg file brings its own. cuda=False skips CUDA code generation (a plan only the "
        "CPU reference runs). all_logits: prefill entries return every row. Raises "
        "fusegraph.Error with the library's message.");
  m.def("fusion_patterns", &fg::fusionPatternNames,
        "Every fusion pattern name (what disable_fusion= takes), by decreasing benefit.");
  m.def("cuda_available", &fg::cudaDeviceAvailable,
        "True when a CUDA device can be used by this process.");

  nb::class_<FusionApplied>(m, "FusionApplied", "Fusions of one pattern applied in one entry.")
      .def_ro("entry", &FusionApplied::entry)
      .def_ro("pattern", &FusionApplied::pattern)
      .def_ro("count", &FusionApplied::count)
      .def_ro("roots", &FusionApplied::roots, "the fused nodes' root values ('%name')")
      .def_ro("nodes", &FusionApplied::nodes, "their node ids in the plan's graph (or None)")
      .def("__repr__", [](const FusionApplied &a) {
        return "FusionApplied(" + a.entry + ", " + a.pattern + " x" + std::to_string(a.count) + ")";
      });
  nb::class_<FusionRefusal>(m, "FusionRefusal", "A fusion candidate declined, with the reason.")
      .def_ro("entry", &FusionRefusal::entry)
      .def_ro("pattern", &FusionRefusal::pattern)
      .def_ro("root", &FusionRefusal::root)
      .def_ro("node", &FusionRefusal::node)
      .def_ro("reason", &FusionRefusal::reason)
      .def("__repr__", [](const FusionRefusal &r) {
        return "FusionRefusal(" + r.entry + ", " + r.pattern + " at " + r.root + ": " + r.reason +
               ")";
      });
  nb::class_<PyFusionReport>(m, "FusionReport")
      .def_ro("applied", &PyFusionReport::applied)
      .def_ro("refused", &PyFusionReport::refused)
      .def_ro("split_back", &PyFusionReport::splitBack, "fused nodes the overlap proof split back")
      .def(
          "count",
          [](const PyFusionReport &r, const std::string &pattern) {
            int64_t n = 0;
            for (const FusionApplied &a : r.applied)
              if (a.pattern == pattern)
                n += a.count;
            return n;
          },
          "pattern"_a, "Fusions of PATTERN applied, over every entry.");

  nb::class_<fg::Plan>(m, "Plan", "A compiled model (fg::Plan): what an Executor runs.")
      .def_static(
          "load", [](const std::string &path) { return unwrap(fg::Plan::load(path)); }, "path"_a,
          "Reads a .plan file.")
      .def(
          "save", [](const fg::Plan &p, const std::string &path) { check(p.save(path)); }, "path"_a,
          "Writes the plan (atomically).")
      .def_prop_ro("entries", &fg::Plan::entries)
      .def_prop_ro("options", [](const fg::Plan &p) { return optionsFacts(p.options()); })
      .def_prop_ro("has_cuda_program",
                   [](const fg::Plan &p) { return p.section("program") != nullptr; })
      .def_prop_ro(
          "ir", [](const fg::Plan &p) { return fg::printToString(p.graph()); },
          "the final graph as .fg text")
      .def("fusion_report", &fusionReport,
           "What fusion applied and refused (with reasons); None when the plan recorded none.")
      .def("facts", &planFacts,
           "The program facts `fusegraph inspect --json` shows, as dicts and lists (options, "
           "entries, weights and state totals, fusions, the CUDA program, passes).")
      .def("__repr__", [](const fg::Plan &p) {
        return "Plan(" + p.options().source + ", entries=[" + llvm::join(p.entries(), ", ") + "])";
      });

  nb::class_<DeviceLogits>(m, "DeviceLogits",
                           "The logits of the last step in device memory, for "
                           "torch.from_dlpack without a copy; valid until the next step.")
      .def_prop_ro("valid", &DeviceLogits::valid)
      .def("__dlpack__",
           [](const DeviceLogits &d, nb::kwargs kw) { return d.array().attr("__dlpack__")(**kw); })
      .def("__dlpack_device__",
           [](const DeviceLogits &d) { return d.array().attr("__dlpack_device__")(); });

  nb::class_<PyExecutor>(m, "Executor",
                         "Runs a Plan on the CPU reference or the CUDA device; generate() "
                         "drives the library's Session (prompt, prefill buckets, decode).")
      .def(nb::init<const fg::Plan &, const std::string &, const std::string &>(), "plan"_a,
           "device"_a = "auto", "mode"_a = "graph",
           "device: 'cpu', 'cuda' or 'auto' (cuda when a device is present and the plan has a "
           "CUDA program). mode (CUDA): 'graph' replays a CUDA graph, 'eager' launches.")
      .def("step", &PyExecutor::step, "tokens"_a, "positions"_a, "entry"_a = nb::none(),
           "Runs the entry that takes len(tokens) tokens (decode for one, prefill_N for N) "
           "at POSITIONS and returns its logits as a new float32 NumPy array [rows, vocab] "
           "(a copy: it stays valid). Updates the KV cache.")
      .def(
          "device_logits",
          [](nb::object self) {
            PyExecutor &ex = nb::cast<PyExecutor &>(self);
            DeviceLogits d{self, ex.generation()};
            d.array(); // errors now (CPU device, nothing run), not at conversion
            return d;
          },
          "The last step's logits in device memory (DLPack, CUDA only): "
          "torch.from_dlpack(ex.device_logits()). Aliases the arena: the next step overwrites "
          "it, and the DeviceLogits refuses conversion after it.")
      .def("reset", &PyExecutor::reset, "Clears the KV cache and the conversation.")
      .def("generate", &PyExecutor::generate, "prompt"_a, "steps"_a, nb::kw_only(),
           "sample"_a = nb::none(), "on_token"_a = nb::none(), "reset"_a = true,
           "forced"_a = std::vector<int64_t>(), "temperature"_a = nb::none(), "top_k"_a = 0,
           "top_p"_a = 1.0, "min_p"_a = 0.0, "seed"_a = nb::none(),
           "Feeds PROMPT (token ids) through the prefill buckets, then generates STEPS tokens "
           "(fg::Session::generate) and returns them: greedily, or drawn with temperature / "
           "top_k / top_p / min_p and seed (fg::SamplingOptions: the temperature is 1 when "
           "only a filter is given; no seed is a random one; on the CUDA device the token is "
           "picked or drawn on the device, no logits row copied), or picked by "
           "sample(logits) -> id. on_token(id) streams them (return False to stop). "
           "reset=False continues the conversation of the last generate().")
      .def_prop_ro("last_logits", &PyExecutor::lastLogits, nb::rv_policy::move,
                   "the logits row of the last token generate() fed (a copy)")
      .def_prop_ro("stats", &PyExecutor::stats, "what the last generate() did, with timings")
      .def_prop_ro("position", [](PyExecutor &e) { return e.session().position(); })
      .def_prop_ro("history",
                   [](PyExecutor &e) {
                     ArrayRef<int32_t> h = e.session().history();
                     return std::vector<int32_t>(h.begin(), h.end());
                   })
      .def_prop_ro("vocab", [](PyExecutor &e) { return e.session().vocab(); })
      .def_prop_ro("ctx", [](const PyExecutor &e) { return e.exec().ctx(); })
      .def_prop_ro("entries", [](const PyExecutor &e) { return e.exec().entries(); })
      .def_prop_ro("device", &PyExecutor::device)
      .def_prop_ro("is_decoder", &PyExecutor::isDecoder);
}
