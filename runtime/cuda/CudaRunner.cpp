#include "runtime/cuda/CudaRunner.h"
#include "runtime/cuda/CublasLt.h"
#include "runtime/cuda/CudaErrors.h"
#include "runtime/cuda/KernelTrace.h"

#include "ir/InitFormula.h"
#include "runtime/InputCheck.h"
#include "runtime/StepTrace.h"
#include "runtime/WeightLoad.h"
#include "runtime/WeightProgress.h"
#include "runtime/WorkspaceSlots.h"
#include "runtime/reference/Interpreter.h"

#include "llvm/Support/FormatVariadic.h"

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <map>
#include <string_view>

namespace fg {

namespace {

struct EntryState {
  const CompiledEntry *entry = nullptr;
  std::vector<void *> kernels; ///< per launch (null for gemm)
  /// Per launch: the prepared cuBLASLt call of a GEMM of the Lt form, else null.
  std::vector<std::unique_ptr<LtGemm>> lt;
  /// Per launch: the cuBLAS workspace slot of a GEMM (runtime/WorkspaceSlots.h), else -1.
  std::vector<int> workspaceSlot;
  std::vector<bool> hasInput;
  /// Pinned host staging for all inputs (mapped: the device reads it):
  /// setInput writes here. The input check copies the inputs it takes as
  /// BufferSpace::Staging arguments into their arena slots itself; the
  /// others (`streamCopied`) are copied on the stream before each run (or by
  /// memcpy nodes with FG_GRAPH_COPIES=1).
  void *pinned = nullptr;
  void *pinnedDevice = nullptr; ///< `pinned` as the device addresses it
  std::vector<size_t> pinnedOffset;
  std::vector<bool> streamCopied; ///< per input: not copied by a kernel of the entry
  cudaGraphExec_t exec = nullptr;
  cudaGraph_t graph = nullptr;

  /// Destroys the entry's CUDA graph (built again at its next graph run).
  void dropGraph() {
    if (exec)
      cudaGraphExecDestroy(exec);
    if (graph)
      cudaGraphDestroy(graph);
    exec = nullptr;
    graph = nullptr;
  }
};

} // namespace

struct CudaRunner::Impl {
  const CompiledProgram &prog;
  LogSink log;
  cudaStream_t stream = nullptr;
  cudaStream_t captureStream = nullptr;
  cublasHandle_t cublas = nullptr;
  cublasLtHandle_t cublasLt = nullptr; ///< GEMMs of the Lt form; share `workspace`'s slots
  cudaEvent_t start = nullptr, stop = nullptr;
  /// Enqueued steps not yet awaited (CudaRunner::enqueue), oldest first: the
  /// event recorded after the step, its number (the input check's count,
  /// kStatusWordSeq; 0 for an entry without the check) and its entry.
  struct Flight {
    cudaEvent_t done = nullptr;
    uint32_t seq = 0;
    const EntryState *es = nullptr;
  };
  std::deque<Flight> flights;
  std::vector<cudaEvent_t> freeEvents;   ///< recycled Flight::done events
  cudaEvent_t lastDone = nullptr;        ///< the previous awaited step's event (device ms)
  uint32_t seqIssued = 0;                ///< the number of the newest enqueued checked step
  std::vector<cudaEvent_t> launchEvents; ///< profiled eager runs: one per launch boundary
  std::vector<cudaLibrary_t> libraries;
  std::vector<void *> weights, state;
  /// Every weight slot, one after another (weightOffsets, runtime/Program.h):
  /// weights[i] points into it.
  void *weightBlock = nullptr;
  void *arena = nullptr;
  void *workspace = nullptr; ///< cuBLAS workspaces: slots x prog.workspaceBytes
  void *counters = nullptr;  ///< BufferSpace::Counters (prog.counterBytes), zero between runs
  /// The input check's status words (kStatusBytes): mapped pinned host
  /// memory, written by the device at every checked step and read by the
  /// host after it synchronised, with no copy in between.
  uint32_t *statusHost = nullptr;
  void *status = nullptr; ///< statusHost as the device addresses it
  std::map<std::string, EntryState, std::less<>> entries;
  bool programmatic = true; ///< programmatic edges between kernel nodes of a graph
  /// Traced graph runs (setProfileLaunches): each cuBLAS call also waits for
  /// the previous one, so CUPTI's library kernel records attribute to calls.
  bool chainGemms = false;
  /// FG_GRAPH_COPIES=1: a graph run copies its inputs, records its events
  /// and copies the status back inside the graph (one call per step: host
  /// time per W-dense step 45 -> 9 us). Off by default: in the one run that
  /// measured it (H200, fourth session) the steps of that build were slower
  /// on the device (W-dense 4.15 -> 4.63 ms, unfused too), with or without the
  /// extra nodes, and the cause was not found before the session's GPU time
  /// ran out; the default keeps the graph the previous build measured (kernel
  /// nodes only), copies and events on the stream around the launch.
  bool graphCopies = [] {
    const char *v = std::getenv("FG_GRAPH_COPIES");
    return v && std::string_view(v) == "1";
  }();
  bool tracing = false; ///< KernelTrace started by a profiled graph run
  /// The token launches' draw settings as last set (setTokenPick), written
  /// again after resetState zeroes the counters; none: never set (greedy).
  std::optional<DeviceSampleParams> tokenPick;
  /// Where they live in the counters: the last argument of a token launch
  /// that takes them (codegen/cuda/GreedyToken.h); none in older plans.
  bool drawing() const { return tokenPick && tokenPick->mode == 1; }
  /// The dynamic shared memory of launch `i`: its record's, but the token
  /// launch's (a draw's, codegen/cuda/GreedyToken.cpp) only while drawing,
  /// so that a greedy step's token blocks, resident early under
  /// programmatic launch, hold none of it.
  uint32_t sharedFor(const CompiledEntry &e, size_t i) const {
    const LaunchRecord &l = e.launches[i];
    const bool tokenLaunch =
        i + 1 == e.launches.size() && l.node == kNoNode && l.args.size() == 6;
    return tokenLaunch && !drawing() ? 0 : l.sharedBytes;
  }
  std::optional<uint64_t> tokenPickOffset() const {
    for (const CompiledEntry &e : prog.entries)
      if (e.launches.size() >= 2 && e.launches.back().node == kNoNode &&
          e.launches.back().args.size() == 6 &&
          e.launches.back().args[5].space == BufferSpace::Counters)
        return e.launches.back().args[5].offset;
    return std::nullopt;
  }
  llvm::Error writeTokenPick() {
    std::optional<uint64_t> at = tokenPickOffset();
    if (!tokenPick || !at || !counters)
      return llvm::Error::success();
    // On the runner's stream (non-blocking: a copy on the legacy stream
    // would not be ordered before its next step), waited for (the source is
    // pageable host memory).
    if (auto e = cudaCheck(cudaMemcpyAsync(static_cast<char *>(counters) + *at, &*tokenPick,
                                           sizeof(DeviceSampleParams), cudaMemcpyHostToDevice,
                                           stream),
                           "writing the draw settings"))
      return e;
    return cudaCheck(cudaStreamSynchronize(stream), "writing the draw settings");
  }

  explicit Impl(const CompiledProgram &p) : prog(p) {}

  ~Impl() {
    if (tracing)
      KernelTrace::stop();
    for (auto &[name, e] : entries) {
      e.dropGraph();
      if (e.pinned)
        cudaFreeHost(e.pinned);
    }
    cudaFree(weightBlock);
    for (void *p : state)
      cudaFree(p);
    cudaFree(arena);
    cudaFree(workspace);
    cudaFree(counters);
    if (statusHost)
      cudaFreeHost(statusHost);
    for (cudaLibrary_t l : libraries)
      cudaLibraryUnload(l);
    entries.clear(); // the Lt descriptors before their handle
    if (cublasLt)
      cublasLtDestroy(cublasLt);
    if (cublas)
      cublasDestroy(cublas);
    if (start)
      cudaEventDestroy(start);
    if (stop)
      cudaEventDestroy(stop);
    for (cudaEvent_t ev : launchEvents)
      cudaEventDestroy(ev);
    for (const Flight &f : flights)
      cudaEventDestroy(f.done);
    for (cudaEvent_t ev : freeEvents)
      cudaEventDestroy(ev);
    if (lastDone)
      cudaEventDestroy(lastDone);
    if (stream)
      cudaStreamDestroy(stream);
    if (captureStream)
      cudaStreamDestroy(captureStream);
  }

  /// The device address of `r`; staging references need the entry (`es`).
  void *address(const BufferRef &r, const EntryState *es = nullptr) const {
    char *base = nullptr;
    switch (r.space) {
    case BufferSpace::Arena:
      base = static_cast<char *>(arena);
      break;
    case BufferSpace::Weight:
      base = static_cast<char *>(weights[r.index]);
      break;
    case BufferSpace::State:
      base = static_cast<char *>(state[r.index]);
      break;
    case BufferSpace::Workspace:
      base = static_cast<char *>(workspace);
      break;
    case BufferSpace::Counters:
      base = static_cast<char *>(counters);
      break;
    case BufferSpace::Status:
      base = static_cast<char *>(status);
      break;
    case BufferSpace::Staging: // ProgramIO checked the index
      assert(es && "a staging reference resolves against its entry");
      base = static_cast<char *>(es->pinnedDevice) + es->pinnedOffset[r.index];
      break;
    }
    return base + r.offset;
  }

  llvm::Expected<EntryState *> lookup(llvm::StringRef name) {
    auto it = entries.find(name);
    if (it != entries.end())
      return &it->second;
    std::string known;
    for (auto &[n, e] : entries)
      known += (known.empty() ? "" : ", ") + n;
    return makeError("no entry '" + name + "' in this plan (entries: " + known + ")");
  }

  LtPointers ltPointers(const GemmDesc &g) const {
    return {address(g.a), address(g.b), address(g.c), address(g.d)};
  }

  /// The workspace of slot `slot` (workspaceBytes each, one allocation).
  void *workspaceOf(int slot) const {
    return workspace ? static_cast<char *>(workspace) +
                           static_cast<uint64_t>(std::max(slot, 0)) * prog.workspaceBytes
                     : nullptr;
  }

  /// Launch `i` of the entry, a GEMM: cublasLtMatmul when it is of the Lt
  /// form (prepared at load), else cublasGemmEx, each in the workspace slot
  /// the plan's edges give it (GEMMs that may run at the same time never
  /// share one: runtime/WorkspaceSlots.h).
  llvm::Error launchGemm(const EntryState &es, size_t i, cudaStream_t s) {
    const LaunchRecord &l = es.entry->launches[i];
    const GemmDesc &g = l.gemm;
    void *ws = workspaceOf(es.workspaceSlot[i]);
    if (g.lt) {
      assert(es.lt[i] && "a GEMM of the Lt form is prepared when the plan loads");
      return es.lt[i]->run(cublasLt, ltPointers(g), ws, prog.workspaceBytes, s, l.what);
    }
    if (auto e = cublasCheck(cublasSetStream(cublas, s), "cublasSetStream"))
      return e;
    // cublasSetStream drops a user workspace; without one cuBLAS allocates
    // inside the capture, which a child graph node refuses.
    if (ws)
      if (auto e = cublasCheck(cublasSetWorkspace(cublas, ws, prog.workspaceBytes),
                               "cublasSetWorkspace"))
        return e;
    if (g.batch > 1)
      return cublasCheck(
          cublasGemmStridedBatchedEx(
              cublas, g.transA ? CUBLAS_OP_T : CUBLAS_OP_N, g.transB ? CUBLAS_OP_T : CUBLAS_OP_N,
              static_cast<int>(g.m), static_cast<int>(g.n), static_cast<int>(g.k), &g.alpha,
              address(g.a), cudaTypeOf(g.aType), static_cast<int>(g.lda),
              static_cast<long long>(g.strideA), address(g.b), cudaTypeOf(g.bType),
              static_cast<int>(g.ldb), static_cast<long long>(g.strideB), &g.beta, address(g.c),
              cudaTypeOf(g.cType), static_cast<int>(g.ldc), static_cast<long long>(g.strideC),
              g.batch, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
          l.what);
    return cublasCheck(
        cublasGemmEx(
            cublas, g.transA ? CUBLAS_OP_T : CUBLAS_OP_N, g.transB ? CUBLAS_OP_T : CUBLAS_OP_N,
            static_cast<int>(g.m), static_cast<int>(g.n), static_cast<int>(g.k), &g.alpha,
            address(g.a), cudaTypeOf(g.aType), static_cast<int>(g.lda), address(g.b),
            cudaTypeOf(g.bType), static_cast<int>(g.ldb), &g.beta, address(g.c),
            cudaTypeOf(g.cType), static_cast<int>(g.ldc), CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
        l.what);
  }

  llvm::Error launch(EntryState &es, size_t i, cudaStream_t s) {
    const LaunchRecord &l = es.entry->launches[i];
    if (l.kind == LaunchRecord::Kind::Gemm)
      return launchGemm(es, i, s);
    std::vector<void *> ptrs(l.args.size());
    std::vector<void *> argv(l.args.size());
    for (size_t a = 0; a < l.args.size(); ++a) {
      ptrs[a] = address(l.args[a], &es);
      argv[a] = &ptrs[a];
    }
    return cudaCheck(cudaLaunchKernel(es.kernels[i], dim3(l.grid[0], l.grid[1], l.grid[2]),
                                      dim3(l.block[0], l.block[1], l.block[2]), argv.data(),
                                      sharedFor(*es.entry, i), s),
                     "launch of " + l.what);
  }

  /// Builds the entry's CUDA graph from the DAG: kernels as kernel nodes,
  /// cuBLAS calls captured into child graphs, edges from `deps`. An edge
  /// between two kernels is programmatic when `programmatic` is set: the
  /// dependent kernel is scheduled once every block of its predecessor has
  /// passed fg_pdl_begin (common.cuh) and waits there for the predecessor to
  /// finish, so its launch overlaps the predecessor's body. Programmatic
  /// edges join kernel nodes only, and only in entries without a cuBLAS call:
  /// with cuBLAS child graphs in the same graph, a cuBLAS call started before
  /// the kernel feeding it had written its result (caught by
  /// FG_DEBUG_PDL_DELAY_NS on the prefill entries, although the edges into
  /// the calls were full ones), so such entries keep full edges throughout.
  llvm::Error buildGraph(EntryState &es) {
    if (auto e = cudaCheck(cudaGraphCreate(&es.graph, 0), "cudaGraphCreate"))
      return e;
    const auto &launches = es.entry->launches;
    bool programmatic =
        this->programmatic && std::none_of(launches.begin(), launches.end(), [](const auto &l) {
          return l.kind == LaunchRecord::Kind::Gemm;
        });
    // FG_GRAPH_COPIES=1: the copies of the inputs the input check does not
    // copy itself and the start event come first, the stop event last, all
    // inside the graph. (The status words need no copy: the input check
    // writes them to host memory.)
    const CompiledEntry &ce = *es.entry;
    std::vector<cudaGraphNode_t> copies;
    for (size_t i = 0; graphCopies && i < ce.inputs.size(); ++i) {
      if (!es.streamCopied[i]) // the input check copies it
        continue;
      copies.emplace_back();
      if (auto e =
              cudaCheck(cudaGraphAddMemcpyNode1D(
                            &copies.back(), es.graph, nullptr, 0, address(ce.inputs[i].where),
                            static_cast<char *>(es.pinned) + es.pinnedOffset[i],
                            static_cast<size_t>(ce.inputs[i].type.bytes()), cudaMemcpyHostToDevice),
                        "graph copy of input " + ce.inputs[i].name))
        return e;
    }
    cudaGraphNode_t startNode = nullptr, stopNode = nullptr;
    if (graphCopies)
      if (auto e = cudaCheck(cudaGraphAddEventRecordNode(&startNode, es.graph, copies.data(),
                                                         copies.size(), start),
                             "graph start event"))
        return e;
    std::vector<cudaGraphNode_t> nodes(launches.size());
    std::vector<bool> hasSuccessor(launches.size(), false);
    std::vector<cudaGraphNode_t> from, to;
    std::vector<cudaGraphEdgeData> edges;
    int64_t lastGemm = -1;
    for (size_t i = 0; i < launches.size(); ++i) {
      const LaunchRecord &l = launches[i];
      bool isKernel = l.kind != LaunchRecord::Kind::Gemm;
      size_t edgesBefore = from.size();
      if (l.deps.empty() && startNode) { // a root: after the copies (a full edge)
        from.push_back(startNode);
        edges.push_back(cudaGraphEdgeData{});
      }
      if (!isKernel && chainGemms && lastGemm >= 0 &&
          std::find(l.deps.begin(), l.deps.end(), static_cast<uint32_t>(lastGemm)) ==
              l.deps.end()) {
        from.push_back(nodes[static_cast<size_t>(lastGemm)]); // a full edge
        edges.push_back(cudaGraphEdgeData{});
        hasSuccessor[static_cast<size_t>(lastGemm)] = true;
      }
      if (!isKernel)
        lastGemm = static_cast<int64_t>(i);
      for (uint32_t d : l.deps) {
        hasSuccessor[d] = true;
        cudaGraphEdgeData ed{};
        if (programmatic && isKernel && launches[d].kind != LaunchRecord::Kind::Gemm) {
          ed.from_port = cudaGraphKernelNodePortProgrammatic;
          ed.type = cudaGraphDependencyTypeProgrammatic;
        }
        from.push_back(nodes[d]);
        edges.push_back(ed);
      }
      to.resize(from.size());
      cudaGraphNode_t *self = &nodes[i];
      if (!isKernel) {
        cudaGraph_t child = nullptr;
        if (auto e =
                cudaCheck(cudaStreamBeginCapture(captureStream, cudaStreamCaptureModeThreadLocal),
                          "capture of " + l.what))
          return e;
        llvm::Error err = launchGemm(es, i, captureStream);
        cudaError_t ce = cudaStreamEndCapture(captureStream, &child);
        if (err)
          return err;
        if (auto e = cudaCheck(ce, "capture of " + l.what))
          return e;
        cudaError_t ae = cudaGraphAddChildGraphNode(self, es.graph, nullptr, 0, child);
        cudaGraphDestroy(child);
        if (auto e = cudaCheck(ae, "graph node for " + l.what))
          return e;
      } else {
        std::vector<void *> ptrs(l.args.size()), argv(l.args.size());
        for (size_t a = 0; a < l.args.size(); ++a) {
          ptrs[a] = address(l.args[a], &es);
          argv[a] = &ptrs[a];
        }
        cudaKernelNodeParams p{};
        p.func = es.kernels[i];
        p.gridDim = dim3(l.grid[0], l.grid[1], l.grid[2]);
        p.blockDim = dim3(l.block[0], l.block[1], l.block[2]);
        p.sharedMemBytes = sharedFor(*es.entry, i);
        p.kernelParams = argv.data();
        if (auto e = cudaCheck(cudaGraphAddKernelNode(self, es.graph, nullptr, 0, &p),
                               "graph node for " + l.what))
          return e;
      }
      std::fill(to.begin() + static_cast<std::ptrdiff_t>(edgesBefore), to.end(), *self);
    }
    if (!from.empty())
      if (auto e = cudaCheck(
              cudaGraphAddDependencies(es.graph, from.data(), to.data(), edges.data(), from.size()),
              "graph edges"))
        return e;
    std::vector<cudaGraphNode_t> sinks;
    for (size_t i = 0; i < launches.size(); ++i)
      if (!hasSuccessor[i])
        sinks.push_back(nodes[i]);
    if (!graphCopies) {
      // FG_DEBUG_GRAPH_DEVICE_LAUNCH=1 (timing only): instantiate for device
      // launch (kernel nodes only), to measure whether the host's launch of
      // such a graph costs less.
      const char *dl = std::getenv("FG_DEBUG_GRAPH_DEVICE_LAUNCH");
      if (dl && std::string_view(dl) == "1" && programmatic)
        return cudaCheck(
            cudaGraphInstantiateWithFlags(&es.exec, es.graph, cudaGraphInstantiateFlagDeviceLaunch),
            "cudaGraphInstantiate for device launch");
      return cudaCheck(cudaGraphInstantiate(&es.exec, es.graph, 0), "cudaGraphInstantiate");
    }
    if (sinks.empty())
      sinks.push_back(startNode);
    if (auto e = cudaCheck(
            cudaGraphAddEventRecordNode(&stopNode, es.graph, sinks.data(), sinks.size(), stop),
            "graph stop event"))
      return e;
    return cudaCheck(cudaGraphInstantiate(&es.exec, es.graph, 0), "cudaGraphInstantiate");
  }

  /// Device time charged to each launch of one traced graph replay
  /// (chargedTimes: from the later of its start and the end of what ran
  /// before it, to its end), ms. Kernel records map to launches by symbol,
  /// in start order; records of other kernels (cuBLAS's) go to the earliest
  /// cuBLAS call not yet passed.
  static llvm::Error checkInputsSet(const EntryState &es) {
    const CompiledEntry &ce = *es.entry;
    for (size_t i = 0; i < ce.inputs.size(); ++i)
      if (!es.hasInput[i])
        return makeError("input '" + ce.inputs[i].name + "' of entry '" + ce.name +
                         "' was not set");
    return llvm::Error::success();
  }

  /// The copies from the pinned staging, on the stream, of the inputs no
  /// kernel of the entry copies itself (none for a decoder's entries: the
  /// input check copies tokens and positions).
  llvm::Error copyInputs(EntryState &es) {
    const CompiledEntry &ce = *es.entry;
    for (size_t i = 0; i < ce.inputs.size(); ++i)
      if (es.streamCopied[i])
        if (auto e = cudaCheck(cudaMemcpyAsync(address(ce.inputs[i].where),
                                               static_cast<char *>(es.pinned) + es.pinnedOffset[i],
                                               static_cast<size_t>(ce.inputs[i].type.bytes()),
                                               cudaMemcpyHostToDevice, stream),
                               "copy of input " + ce.inputs[i].name))
          return e;
    return llvm::Error::success();
  }

  /// Waits until the newest enqueued step no longer needs the staging: its
  /// input check has counted it (read its staging), or, for an entry without
  /// the check (its inputs copied on the stream), the step has finished.
  llvm::Error waitStagingRead() {
    if (flights.empty())
      return llvm::Error::success();
    const Flight &f = flights.back();
    if (f.seq == 0)
      return cudaCheck(cudaEventSynchronize(f.done), "waiting for a step");
    const volatile uint32_t *w = statusHost;
    auto counted = [&] { return static_cast<int32_t>(w[kStatusWordSeq] - f.seq) >= 0; };
    for (uint64_t spin = 1;; ++spin) {
      if (counted())
        return llvm::Error::success();
      if (spin % 1024 == 0) { // a fault would leave the count behind for ever
        cudaError_t q = cudaEventQuery(f.done);
        if (q == cudaSuccess)
          return counted() ? llvm::Error::success()
                           : makeError("a step finished without its input check counting it");
        if (q != cudaErrorNotReady)
          return cudaCheck(q, "waiting for a step's input check");
      }
    }
  }

  /// Whether `es` starts with the input check (it writes the status words).
  static bool checksInputs(const EntryState &es) {
    return !es.entry->launches.empty() && es.entry->launches.front().node == kNoNode;
  }

  /// After the step synchronised: the input check's verdict, an
  /// InputRangeError naming the input, index and value, or success.
  llvm::Error statusError(const EntryState &es) const {
    if (!checksInputs(es) || statusHost[0] == 0)
      return llvm::Error::success();
    std::vector<const IoBinding *> checked;
    for (const IoBinding &b : es.entry->inputs)
      if (b.bind.hasRange())
        checked.push_back(&b);
    uint32_t which = statusHost[0] - 1;
    if (which >= checked.size())
      return makeError("the input check of entry '" + es.entry->name + "' reported input " +
                       llvm::Twine(which) + " of " + llvm::Twine(checked.size()));
    const IoBinding &b = *checked[which];
    int64_t value = static_cast<int64_t>(static_cast<uint64_t>(statusHost[2]) |
                                         (static_cast<uint64_t>(statusHost[3]) << 32));
    return llvm::make_error<InputRangeError>(b.name, statusHost[1], value, b.bind.lo, b.bind.hi);
  }
};

/// Generates an initialised weight on the device (program.initModule).
/// Returns false when it cannot (no module, quantised dtype): then the host
/// materialises it.
static llvm::Expected<bool> initOnDevice(CudaRunner::Impl &m, const TensorSlot &slot, void *p) {
  // The formula of ir/InitFormula.h, in the module codegen built from it.
  InitFormulaArgs f = initFormulaArgs(slot.init);
  std::optional<std::string> symbol = initKernelSymbol(slot.type.dtype);
  if (m.prog.initModule < 0 || f.kind == fg_init::None || !symbol)
    return false;
  cudaKernel_t kernel = nullptr;
  const bool quantized = isQuantized(slot.type.dtype);
  // Block-quantised weights on the device too (the host's quantiser,
  // ir/QuantizeBlock.h, compiled into the init module): the default since
  // GpuWeightInit.QuantisedBlocksEqualTheHosts passed on the H200 (thirty-
  // third session); W-moe-12 q4_K's weights took the host over 100 s.
  // FG_DEBUG_DEVICE_QUANT_INIT=0 makes them on the host.
  if (quantized) {
    const char *on = std::getenv("FG_DEBUG_DEVICE_QUANT_INIT");
    if (on && std::string_view(on) == "0")
      return false;
  }
  if (cudaError_t err =
          cudaLibraryGetKernel(&kernel, m.libraries[m.prog.initModule], symbol->c_str());
      err != cudaSuccess) {
    // A plan compiled before the init module made quantised blocks: the
    // host makes them (the same quantiser, ir/QuantizeBlock.h).
    if (quantized) {
      (void)cudaGetLastError();
      return false;
    }
    return cudaCheck(err, "looking up kernel " + llvm::Twine(*symbol));
  }
  unsigned long long n = static_cast<unsigned long long>(slot.type.numElements());
  unsigned long long seed = f.seed;
  int kind = f.kind;
  double a = f.a, b = f.b;
  void *args[] = {&p, &n, &kind, &seed, &a, &b};
  // A thread an element, or a block of a quantised type.
  unsigned long long units = quantized ? n / dtypeInfo(slot.type.dtype).blockElems : n;
  unsigned blocks = static_cast<unsigned>(std::min<unsigned long long>((units + 255) / 256, 65535));
  if (auto e = cudaCheck(cudaLaunchKernel(reinterpret_cast<void *>(kernel),
                                          dim3(std::max(blocks, 1u)), dim3(256), args, 0, m.stream),
                         "initialising " + slot.name))
    return e;
  return true;
}

bool CudaRunner::deviceAvailable() {
  int n = 0;
  return cudaGetDeviceCount(&n) == cudaSuccess && n > 0;
}

CudaRunner::CudaRunner(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
CudaRunner::~CudaRunner() = default;

llvm::Expected<std::unique_ptr<CudaRunner>> CudaRunner::create(const CompiledProgram &prog,
                                                               LogSink log, ProgressSink progress) {
  if (!deviceAvailable())
    return makeError("no CUDA device is available");
  auto impl = std::make_unique<Impl>(prog);
  impl->log = std::move(log);
  Impl &m = *impl;
  if (auto e = cudaCheck(cudaStreamCreateWithFlags(&m.stream, cudaStreamNonBlocking), "stream"))
    return e;
  if (auto e =
          cudaCheck(cudaStreamCreateWithFlags(&m.captureStream, cudaStreamNonBlocking), "stream"))
    return e;
  if (auto e = cudaCheck(cudaEventCreate(&m.start), "event"))
    return e;
  if (auto e = cudaCheck(cudaEventCreate(&m.stop), "event"))
    return e;
  if (auto e = cublasCheck(cublasCreate(&m.cublas), "cublasCreate"))
    return e;
  bool anyLt = false;
  for (const CompiledEntry &ce : prog.entries)
    for (const LaunchRecord &l : ce.launches)
      anyLt |= l.kind == LaunchRecord::Kind::Gemm && l.gemm.lt;
  if (anyLt)
    if (auto e = cublasCheck(cublasLtCreate(&m.cublasLt), "cublasLtCreate"))
      return e;

  for (const KernelImage &img : prog.modules) {
    cudaLibrary_t lib = nullptr;
    const void *code = img.cubin.empty() ? static_cast<const void *>(img.ptx.c_str())
                                         : static_cast<const void *>(img.cubin.data());
    if (auto e =
            cudaCheck(cudaLibraryLoadData(&lib, code, nullptr, nullptr, 0, nullptr, nullptr, 0),
                      "loading kernel module " + img.name))
      return e;
    m.libraries.push_back(lib);
  }

  // Weights share one allocation, in table order (plans rely on the
  // placement: weightFollows); state slots get one each.
  uint64_t weightTotal = 0;
  const std::vector<uint64_t> weightAt = weightOffsets(prog.weights, &weightTotal);
  if (auto e = cudaCheck(cudaMalloc(&m.weightBlock, weightTotal ? weightTotal : 1),
                         llvm::formatv("allocating the weights ({0} bytes in {1} slots)",
                                       weightTotal, prog.weights.size())
                             .str()))
    return e;
  auto upload = [&](const TensorSlot &slot, std::vector<void *> &into, bool zero) -> llvm::Error {
    void *p = nullptr;
    size_t bytes = static_cast<size_t>(slot.type.bytes());
    if (zero) {
      if (auto e = cudaCheck(cudaMalloc(&p, bytes ? bytes : 1), "allocating " + slot.name))
        return e;
    } else {
      p = static_cast<char *>(m.weightBlock) + weightAt[into.size()];
    }
    into.push_back(p);
    if (zero)
      return cudaCheck(cudaMemset(p, 0, bytes), "zeroing " + slot.name);
    if (slot.hasSource()) {
      // From the model files by the slot's recipe (dequantised by its
      // convert step), or the plan's embedded bytes.
      llvm::Expected<std::vector<uint8_t>> host = loadSlotBytes(slot);
      if (!host)
        return host.takeError();
      assert(host->size() == bytes && "loadSlotBytes gives the slot's bytes");
      return cudaCheck(cudaMemcpy(p, host->data(), bytes, cudaMemcpyHostToDevice),
                       "uploading " + slot.name);
    }
    llvm::Expected<bool> onDevice = initOnDevice(m, slot, p);
    if (!onDevice)
      return onDevice.takeError();
    if (*onDevice)
      return llvm::Error::success();
    // No device kernel for it (no init module; a quantised dtype with
    // FG_DEBUG_DEVICE_QUANT_INIT=0, or a plan older than the quantised
    // initialisers): the host materialises it with the same formula.
    HostTensor t;
    if (auto e = materializeInit(slot.init, slot.type, t))
      return e;
    return cudaCheck(cudaMemcpy(p, t.data.data(), bytes, cudaMemcpyHostToDevice),
                     "uploading " + slot.name);
  };
  WeightProgress weightProgress(progress, prog.weightBytes());
  for (const TensorSlot &w : prog.weights) {
    if (auto e = upload(w, m.weights, false))
      return e;
    weightProgress.add(static_cast<uint64_t>(w.type.bytes()));
  }
  for (const TensorSlot &s : prog.state)
    if (auto e = upload(s, m.state, true))
      return e;

  uint64_t arenaBytes = 256;
  for (const CompiledEntry &ce : prog.entries)
    arenaBytes = std::max(arenaBytes, ce.arenaBytes);
  if (auto e = cudaCheck(cudaMalloc(&m.arena, arenaBytes), "allocating the arena"))
    return e;
  // Zeroed once, so no kernel ever reads undefined bytes: compute-sanitizer
  // initcheck saw fused.rms_norm_mul_rope read arena bytes no kernel had
  // written in the fourth session's suite (GpuPrefillThenDecode.F16*, 16-byte
  // loads of a few lanes); the values reach no result (every row is checked
  // against the CPU reference), and the source is not pinned down yet.
  if (auto e = cudaCheck(cudaMemset(m.arena, 0, arenaBytes), "clearing the arena"))
    return e;
  // The input check's status words (zero: no step has failed its check), in
  // host memory the device writes.
  if (auto e = cudaCheck(cudaHostAlloc(reinterpret_cast<void **>(&m.statusHost), kStatusBytes,
                                       cudaHostAllocMapped),
                         "pinned status words"))
    return e;
  std::memset(m.statusHost, 0, kStatusBytes);
  if (auto e = cudaCheck(cudaHostGetDevicePointer(&m.status, m.statusHost, 0),
                         "the device address of the status words"))
    return e;
  if (prog.counterBytes) {
    if (auto e = cudaCheck(cudaMalloc(&m.counters, prog.counterBytes), "launch counters"))
      return e;
    if (auto e = cudaCheck(cudaMemset(m.counters, 0, prog.counterBytes), "launch counters"))
      return e;
  }
  // One workspace per slot the entries' GEMMs rotate through (a plan from
  // before the slots chains its GEMMs: one).
  std::vector<std::vector<int>> slotsOfEntry;
  unsigned workspaceSlots = 1;
  for (const CompiledEntry &ce : prog.entries) {
    llvm::Expected<std::vector<int>> slots = workspaceSlotsOf(ce.launches, kWorkspaceSlots);
    if (!slots)
      return makeError("entry '" + ce.name + "': " + llvm::toString(slots.takeError()));
    workspaceSlots = std::max(workspaceSlots, workspaceSlotsUsed(*slots));
    slotsOfEntry.push_back(std::move(*slots));
  }
  if (prog.workspaceBytes) {
    if (auto e = cudaCheck(cudaMalloc(&m.workspace, workspaceSlots * prog.workspaceBytes),
                           "cuBLAS workspace"))
      return e;
    if (auto e = cublasCheck(cublasSetWorkspace(m.cublas, m.workspace, prog.workspaceBytes),
                             "cublasSetWorkspace"))
      return e;
  }

  for (size_t ei = 0; ei < prog.entries.size(); ++ei) {
    const CompiledEntry &ce = prog.entries[ei];
    EntryState es;
    es.entry = &ce;
    es.workspaceSlot = std::move(slotsOfEntry[ei]);
    for (const LaunchRecord &l : ce.launches) {
      void *k = nullptr;
      if (l.kind == LaunchRecord::Kind::Kernel) {
        if (l.module >= m.libraries.size())
          return makeError("launch " + l.what + " names a missing kernel module");
        cudaKernel_t kernel = nullptr;
        if (auto e =
                cudaCheck(cudaLibraryGetKernel(&kernel, m.libraries[l.module], l.symbol.c_str()),
                          "looking up kernel " + l.symbol))
          return e;
        // Static + dynamic shared memory above 48 KiB must be asked for per
        // kernel (the static part is the kernel's own, unknown here: ask for
        // every kernel with dynamic shared memory).
        if (l.sharedBytes > 0)
          if (auto e = cudaCheck(cudaFuncSetAttribute(reinterpret_cast<const void *>(kernel),
                                                      cudaFuncAttributeMaxDynamicSharedMemorySize,
                                                      static_cast<int>(l.sharedBytes)),
                                 "raising the shared memory of " + l.symbol))
            return e;
        k = reinterpret_cast<void *>(kernel);
      }
      es.kernels.push_back(k);
      // The Lt form's descriptors and algorithm, before any capture: the
      // buffers' addresses (and so their alignment) are fixed from here on.
      std::unique_ptr<LtGemm> lt;
      if (l.kind == LaunchRecord::Kind::Gemm && l.gemm.lt) {
        llvm::Expected<std::unique_ptr<LtGemm>> p =
            LtGemm::prepare(m.cublasLt, l.gemm, m.ltPointers(l.gemm), prog.workspaceBytes, l.what);
        if (!p)
          return p.takeError();
        lt = std::move(*p);
      }
      es.lt.push_back(std::move(lt));
    }
    size_t total = 0;
    for (const IoBinding &in : ce.inputs) {
      es.pinnedOffset.push_back(total);
      total += (static_cast<size_t>(in.type.bytes()) + 255) / 256 * 256;
    }
    es.hasInput.assign(ce.inputs.size(), false);
    es.streamCopied.assign(ce.inputs.size(), true);
    for (const LaunchRecord &l : ce.launches)
      for (const BufferRef &a : l.args)
        if (a.space == BufferSpace::Staging)
          es.streamCopied[a.index] = false;
    if (total) {
      if (auto e = cudaCheck(cudaHostAlloc(&es.pinned, total, cudaHostAllocMapped),
                             "pinned input staging"))
        return e;
      if (auto e = cudaCheck(cudaHostGetDevicePointer(&es.pinnedDevice, es.pinned, 0),
                             "the device address of the input staging"))
        return e;
    }
    m.entries.emplace(ce.name, std::move(es));
  }
  if (auto e = cudaCheck(cudaDeviceSynchronize(), "loading the plan"))
    return e;
  return std::unique_ptr<CudaRunner>(new CudaRunner(std::move(impl)));
}

llvm::Error CudaRunner::setInput(llvm::StringRef entry, llvm::StringRef name, const void *data,
                                 size_t bytes) {
  auto es = impl_->lookup(entry);
  if (!es)
    return es.takeError();
  if (auto e = impl_->waitStagingRead())
    return e;
  const CompiledEntry &ce = *(*es)->entry;
  for (size_t i = 0; i < ce.inputs.size(); ++i) {
    if (ce.inputs[i].name != name)
      continue;
    size_t want = static_cast<size_t>(ce.inputs[i].type.bytes());
    if (bytes != want)
      return makeError("input '" + name + "' of entry '" + entry + "' takes " + llvm::Twine(want) +
                       " bytes (" + ce.inputs[i].type.str() + "), got " + llvm::Twine(bytes));
    std::memcpy(static_cast<char *>((*es)->pinned) + (*es)->pinnedOffset[i], data, bytes);
    (*es)->hasInput[i] = true;
    return llvm::Error::success();
  }
  return makeError("entry '" + entry + "' has no input '" + name + "'");
}

llvm::Error CudaRunner::enqueue(llvm::StringRef entry, bool useGraph) {
  auto esOr = impl_->lookup(entry);
  if (!esOr)
    return esOr.takeError();
  EntryState &es = **esOr;
  Impl &m = *impl_;
  if (m.flights.size() >= 2)
    return makeError("two steps are in flight: await one before enqueueing another");
  if (auto e = m.checkInputsSet(es))
    return e;
  if (useGraph && !es.exec)
    if (auto e = m.buildGraph(es))
      return e;
  if (m.flights.empty()) // the device's count is current: nothing runs
    m.seqIssued = m.statusHost[kStatusWordSeq];
  auto t = std::chrono::steady_clock::now();
  if (!useGraph || !m.graphCopies)
    if (auto e = m.copyInputs(es))
      return e;
  if (useGraph) {
    if (auto e = cudaCheck(cudaGraphLaunch(es.exec, m.stream), "graph launch of " + entry))
      return e;
  } else {
    for (size_t i = 0; i < es.entry->launches.size(); ++i)
      if (auto e = m.launch(es, i, m.stream))
        return e;
  }
  lastHostLaunchMs_ =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t).count();
  Impl::Flight f;
  f.es = &es;
  f.seq = Impl::checksInputs(es) ? ++m.seqIssued : 0;
  if (!m.freeEvents.empty()) {
    f.done = m.freeEvents.back();
    m.freeEvents.pop_back();
  } else if (auto e = cudaCheck(cudaEventCreate(&f.done), "event")) {
    return e;
  }
  if (auto e = cudaCheck(cudaEventRecord(f.done, m.stream), "event")) {
    m.freeEvents.push_back(f.done);
    return e;
  }
  m.flights.push_back(f);
  return llvm::Error::success();
}

llvm::Expected<std::optional<int32_t>> CudaRunner::awaitGreedy() {
  Impl &m = *impl_;
  if (m.flights.empty())
    return makeError("no step is in flight");
  Impl::Flight f = m.flights.front();
  m.flights.pop_front();
  cudaError_t err = cudaEventSynchronize(f.done);
  lastGpuMs_ = 0; // the device time between the ends of consecutive awaited steps
  if (err == cudaSuccess && m.lastDone)
    cudaEventElapsedTime(&lastGpuMs_, m.lastDone, f.done);
  if (m.lastDone)
    m.freeEvents.push_back(m.lastDone);
  m.lastDone = f.done;
  if (auto e = cudaCheck(err, "running entry " + f.es->entry->name +
                                  " (rerun with --debug-sync to name the kernel)"))
    return e;
  // The input check's verdict is the newest step's: read it when this one is.
  if (m.flights.empty())
    if (auto e = m.statusError(*f.es))
      return e;
  const std::vector<LaunchRecord> &ls = f.es->entry->launches;
  if (ls.size() < 2 || ls.back().node != kNoNode || f.seq == 0)
    return std::optional<int32_t>();
  const uint32_t r = f.seq & 1u;
  const uint32_t *w = m.statusHost;
  if (w[kStatusWordRing + 2 * r + 1] != 1)
    return std::optional<int32_t>();
  return std::optional<int32_t>(static_cast<int32_t>(w[kStatusWordRing + 2 * r]));
}

size_t CudaRunner::stepsInFlight() const { return impl_->flights.size(); }

llvm::Error CudaRunner::run(llvm::StringRef entry, bool useGraph) {
  while (!impl_->flights.empty()) // a synchronous step after pipelined ones
    if (auto t = awaitGreedy(); !t)
      return t.takeError();
  auto esOr = impl_->lookup(entry);
  if (!esOr)
    return esOr.takeError();
  EntryState &es = **esOr;
  Impl &m = *impl_;
  if (useGraph && !es.exec)
    if (auto e = m.buildGraph(es))
      return e;
  lastLaunchMs_.clear();
  lastLaunchSpans_.clear();
  size_t nLaunches = es.entry->launches.size();
  bool profile = profileLaunches_ && !useGraph;
  bool trace = profileLaunches_ && useGraph;
  if (trace) {
    if (!m.tracing) {
      if (auto e = KernelTrace::start())
        return e;
      m.tracing = true;
    }
    if (auto old = KernelTrace::take(); !old) // drop what ran before this step
      return old.takeError();
  }
  while (profile && m.launchEvents.size() < nLaunches + 1) {
    cudaEvent_t ev = nullptr;
    if (auto e = cudaCheck(cudaEventCreate(&ev), "event"))
      return e;
    m.launchEvents.push_back(ev);
  }
  if (auto e = m.checkInputsSet(es))
    return e;
  // Host time: the step's own calls — the copies of inputs no kernel copies
  // (none for a decoder's entries) and the cudaGraphLaunch, or every eager
  // launch. The runner's timing events around a graph launch (its own
  // measurement, not the step's work) are left out.
  using Clock = std::chrono::steady_clock;
  auto since = [](Clock::time_point t) {
    return std::chrono::duration<double, std::milli>(Clock::now() - t).count();
  };
  double hostMs = 0;
  const bool onStream = !useGraph || !m.graphCopies;
  if (useGraph) {
    if (onStream) {
      auto t = Clock::now();
      if (auto e = m.copyInputs(es))
        return e;
      hostMs += since(t);
      if (auto e = cudaCheck(cudaEventRecord(m.start, m.stream), "event"))
        return e;
    }
    // With FG_GRAPH_COPIES=1 the graph also copies the other inputs and
    // records the events itself (buildGraph).
    auto t = Clock::now();
    if (auto e = cudaCheck(cudaGraphLaunch(es.exec, m.stream), "graph launch of " + entry))
      return e;
    hostMs += since(t);
    if (onStream)
      if (auto e = cudaCheck(cudaEventRecord(m.stop, m.stream), "event"))
        return e;
  } else {
    auto t = Clock::now();
    if (auto e = m.copyInputs(es))
      return e;
    if (auto e = cudaCheck(cudaEventRecord(m.start, m.stream), "event"))
      return e;
    if (profile)
      if (auto e = cudaCheck(cudaEventRecord(m.launchEvents[0], m.stream), "event"))
        return e;
    for (size_t i = 0; i < nLaunches; ++i) {
      if (auto e = m.launch(es, i, m.stream))
        return e;
      if (profile)
        if (auto e = cudaCheck(cudaEventRecord(m.launchEvents[i + 1], m.stream), "event"))
          return e;
    }
    if (auto e = cudaCheck(cudaEventRecord(m.stop, m.stream), "event"))
      return e;
    hostMs = since(t);
  }
  lastHostLaunchMs_ = hostMs;
  if (auto e =
          cudaCheck(cudaStreamSynchronize(m.stream),
                    "running entry " + entry + " (rerun with --debug-sync to name the kernel)"))
    return e;
  cudaEventElapsedTime(&lastGpuMs_, m.start, m.stop);
  if (profile) {
    lastLaunchMs_.assign(nLaunches, 0.0f);
    for (size_t i = 0; i < nLaunches; ++i)
      cudaEventElapsedTime(&lastLaunchMs_[i], m.launchEvents[i], m.launchEvents[i + 1]);
  }
  if (trace) {
    auto records = KernelTrace::take();
    if (!records)
      return records.takeError();
    auto spans = matchKernelRecords(*es.entry, std::move(*records));
    if (!spans)
      return spans.takeError();
    lastLaunchMs_.clear();
    for (const LaunchSpan &s : *spans)
      lastLaunchMs_.push_back(static_cast<float>(s.ms));
    lastLaunchSpans_ = std::move(*spans);
  }
  return m.statusError(es);
}

llvm::Error CudaRunner::runDebugSync(llvm::StringRef entry) {
  lastLaunchMs_.clear();
  while (!impl_->flights.empty())
    if (auto t = awaitGreedy(); !t)
      return t.takeError();
  auto esOr = impl_->lookup(entry);
  if (!esOr)
    return esOr.takeError();
  EntryState &es = **esOr;
  Impl &m = *impl_;
  if (auto e = m.copyInputs(es))
    return e;
  for (size_t i = 0; i < es.entry->launches.size(); ++i) {
    if (auto e = m.launch(es, i, m.stream))
      return e;
    if (auto e = cudaCheck(cudaStreamSynchronize(m.stream),
                           "launch " + llvm::Twine(i) + " (" + es.entry->launches[i].what + ")"))
      return e;
  }
  return m.statusError(es);
}

std::optional<int32_t> CudaRunner::greedyToken(llvm::StringRef entry) const {
  auto it = impl_->entries.find(entry);
  if (it == impl_->entries.end())
    return std::nullopt;
  const std::vector<LaunchRecord> &ls = it->second.entry->launches;
  // The greedy launch is the last one and has no node (the input check, the
  // other launch without one, is the first).
  if (ls.size() < 2 || ls.back().node != kNoNode)
    return std::nullopt;
  const uint32_t *w = impl_->statusHost;
  if (w[kStatusWordGreedyOk] != 1)
    return std::nullopt;
  return static_cast<int32_t>(w[kStatusWordGreedy]);
}

llvm::Expected<bool> CudaRunner::setTokenPick(const DeviceSampleParams &params) {
  if (!impl_->tokenPickOffset())
    return false;
  while (!impl_->flights.empty()) // their launches read the settings
    if (auto t = awaitGreedy(); !t)
      return t.takeError();
  // Drawing or not changes the token launch's shared memory: the graphs are
  // built again at their next run.
  const bool wasDrawing = impl_->drawing();
  impl_->tokenPick = params;
  if (impl_->drawing() != wasDrawing)
    for (auto &[name, es] : impl_->entries)
      es.dropGraph();
  if (auto e = impl_->writeTokenPick())
    return e;
  return true;
}

llvm::Error CudaRunner::readOutput(llvm::StringRef entry, llvm::StringRef name,
                                   std::vector<uint8_t> &out) {
  // The newest enqueued step's results (the runner's stream is not the
  // default one, so the copy alone would not wait for it).
  if (auto e = cudaCheck(cudaStreamSynchronize(impl_->stream), "waiting for the step"))
    return e;
  auto es = impl_->lookup(entry);
  if (!es)
    return es.takeError();
  for (const IoBinding &o : (*es)->entry->outputs) {
    if (o.name != name)
      continue;
    out.resize(static_cast<size_t>(o.type.bytes()));
    return cudaCheck(
        cudaMemcpy(out.data(), impl_->address(o.where), out.size(), cudaMemcpyDeviceToHost),
        "reading output " + name);
  }
  return makeError("entry '" + entry + "' has no output '" + name + "'");
}

llvm::Expected<const void *> CudaRunner::outputAddress(llvm::StringRef entry,
                                                       llvm::StringRef name) {
  auto es = impl_->lookup(entry);
  if (!es)
    return es.takeError();
  for (const IoBinding &o : (*es)->entry->outputs)
    if (o.name == name)
      return static_cast<const void *>(impl_->address(o.where));
  return makeError("entry '" + entry + "' has no output '" + name + "'");
}

void CudaRunner::setProfileLaunches(bool on) {
  if (profileLaunches_ == on)
    return;
  profileLaunches_ = on;
  impl_->chainGemms = on; // graphs built from here on; the old ones go
  for (auto &[name, es] : impl_->entries)
    es.dropGraph();
}

void CudaRunner::setProgrammaticLaunch(bool on) {
  if (impl_->programmatic == on)
    return;
  impl_->programmatic = on;
  for (auto &[name, es] : impl_->entries)
    es.dropGraph();
}

llvm::Error CudaRunner::resetState() {
  while (!impl_->flights.empty()) // their KV rows go too
    if (auto t = awaitGreedy(); !t)
      return t.takeError();
  for (size_t i = 0; i < impl_->prog.state.size(); ++i)
    if (auto e = cudaCheck(
            cudaMemset(impl_->state[i], 0, static_cast<size_t>(impl_->prog.state[i].type.bytes())),
            "resetting state"))
      return e;
  if (impl_->counters)
    if (auto e = cudaCheck(cudaMemset(impl_->counters, 0, impl_->prog.counterBytes),
                           "resetting launch counters"))
      return e;
  if (auto e = cudaCheck(cudaDeviceSynchronize(), "resetting state"))
    return e;
  // The status words start again from zero with their device mirror (in the
  // counters: kernels/check.cuh), so the step count the input check writes
  // stays the one the host compares against.
  if (impl_->statusHost)
    std::memset(impl_->statusHost, 0, kStatusBytes);
  return impl_->writeTokenPick(); // the counters held them too
}

} // namespace fg
