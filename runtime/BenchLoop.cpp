//===- BenchLoop.cpp - timed decode steps, ideal bytes, kernel families ---===//
#include "runtime/BenchLoop.h"
#include "runtime/Program.h"

#include "ir/OpTable.h"

#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringMap.h"

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <map>

namespace fg {

namespace {

/// Follows view-like producers and in-place state updaters to the value that
/// owns the bytes `v` lives in.
ValueId storageOf(const Function &fn, ValueId v) {
  while (const Node *p = fn.producer(v)) {
    ValueId next = p->info().has(kViewLike) ? p->operands[0] : fn.updatedOperand(v);
    if (next == kNoValue)
      break;
    v = next;
  }
  return v;
}

/// The op table's cost of `n` (the one byte model) with kvRows live KV rows.
Cost costOf(const Function &fn, const Node &n, int64_t kvRows) {
  llvm::SmallVector<TensorType, 6> in, out;
  for (ValueId v : n.operands)
    in.push_back(fn.type(v));
  for (ValueId v : n.results)
    out.push_back(fn.type(v));
  CostContext ctx;
  ctx.kvRows = kvRows;
  return opCost(n.kind, in, n.attrs, out, ctx);
}

/// Nodes whose flops are GEMM work (a fused matmul counts its epilogue too).
bool isMatmulLike(OpKind k) {
  return k == OpKind::MatMul || k == OpKind::MatMulId || k == OpKind::FusedGatedMatmul ||
         k == OpKind::FusedGatedMatmulId || k == OpKind::FusedMatmulAdd ||
         k == OpKind::FusedMatmulMulti || k == OpKind::FusedRmsNormMatmul ||
         k == OpKind::FusedRmsNormMulMatmul ||
         k == OpKind::FusedRmsNormGatedMatmul || k == OpKind::FusedRmsNormMatmulMulti ||
         k == OpKind::FusedMatmulIdSumAdd || k == OpKind::FusedGatedGemm;
}

} // namespace

double nodeBytes(const Function &fn, const Node &n, int64_t kvRows) {
  return costOf(fn, n, kvRows).bytes;
}

StepFlops stepFlops(const Function &fn, int64_t kvRows) {
  StepFlops out;
  for (const Node &n : fn.nodes()) {
    double f = costOf(fn, n, kvRows).flops;
    out.total += f;
    if (isMatmulLike(n.kind))
      out.matmul += f;
  }
  return out;
}

StepBytes idealStepBytes(const Function &fn, int64_t kvRows) {
  StepBytes out;
  // Per weight argument: the most bytes any one node reads of it (a weight
  // used several times is read once in the ideal).
  llvm::DenseMap<ValueId, double> weightBytes;
  for (const Node &n : fn.nodes()) {
    Cost c = costOf(fn, n, kvRows);
    for (unsigned i = 0; i < n.operands.size(); ++i) {
      ValueId root = storageOf(fn, n.operands[i]);
      const Argument *a = fn.argumentOf(root);
      if (!a || c.operandBytes[i] == 0)
        continue;
      if (a->role == ArgRole::Weight) {
        double &w = weightBytes[root];
        w = std::min(static_cast<double>(fn.type(root).bytes()), std::max(w, c.operandBytes[i]));
      } else if (a->role == ArgRole::State) {
        // An in-place update writes its rows (all of operandBytes unless
        // the cost says which part: a fused op may also read the state).
        double written = 0;
        if (i < n.info().numUpdatedStates())
          written = i < c.updatedBytes.size() ? c.updatedBytes[i] : c.operandBytes[i];
        out.kvWrite += written;
        out.kvRead += c.operandBytes[i] - written;
      }
    }
  }
  for (const auto &[v, bytes] : weightBytes)
    out.weights += bytes;
  for (const Argument &a : fn.arguments())
    if (a.role == ArgRole::Input)
      out.io += static_cast<double>(fn.type(a.value).bytes());
  for (ValueId r : fn.results())
    out.io += static_cast<double>(fn.type(r).bytes());
  return out;
}

// --- the timed step ---------------------------------------------------------------------

llvm::Expected<StepDriver> StepDriver::create(Executor &exec, const StepLoopOptions &opts) {
  const Function *fn = exec.entry(opts.entry);
  if (!fn) {
    std::string known;
    for (const std::string &e : exec.entries())
      known += (known.empty() ? "" : ", ") + e;
    return makeError("no entry '" + opts.entry + "' to time (entries: " + known + ")");
  }
  StepDriver d(exec, opts);
  // Token ids stay inside the tokens binding's range, else token_embd's rows.
  bool vocabBound = false;
  for (const Argument &a : fn->arguments())
    if (a.role == ArgRole::Input && a.bind.kind == BindKind::Tokens && a.bind.hasRange()) {
      d.vocab_ = std::max<int64_t>(1, a.bind.hi);
      vocabBound = true;
    }
  for (const Argument &a : fn->arguments()) {
    const Value &v = fn->value(a.value);
    if (a.role == ArgRole::Weight && v.name == "token_embd" && !v.type.shape.empty() &&
        !vocabBound)
      d.vocab_ = std::max<int64_t>(1, v.type.shape[0]);
    if (a.role != ArgRole::Input)
      continue;
    if (!isInteger(v.type.dtype))
      return makeError("entry '" + opts.entry + "' input '" + v.name + "' is " + v.type.str() +
                       "; only integer inputs can be fed");
    // The bindings say which input is which; a graph written without them
    // (old .fg text) is fed by the ABI's names.
    bool unbound = a.bind.kind == BindKind::Other && !a.bind.hasRange();
    bool tokens = a.bind.kind == BindKind::Tokens || (unbound && v.name == "tokens");
    bool positions = a.bind.kind == BindKind::Positions || (unbound && v.name == "positions");
    if (tokens || positions) {
      (tokens ? d.tokensInput_ : d.positionsInput_) = v.name;
      d.tokens_ = std::max<int64_t>(1, v.type.numElements());
    } else {
      d.otherInputs_.push_back(v.name);
      d.otherSizes_.push_back(v.type.numElements());
      d.otherRanges_.push_back(a.bind.hasRange() ? std::pair{a.bind.lo, a.bind.hi}
                                                 : std::pair<int64_t, int64_t>{0, 0});
    }
  }
  d.pos_ = opts.startPosition;
  if (exec.ctx() > 0 && d.pos_ + d.tokens_ > exec.ctx())
    return makeError("start position " + std::to_string(d.pos_) + " + " +
                     std::to_string(d.tokens_) + " tokens does not fit the KV cache (ctx = " +
                     std::to_string(exec.ctx()) + "); compile with a larger ctx");
  return d;
}

llvm::Error StepDriver::setInputs() {
  if (exec_->ctx() > 0 && pos_ + tokens_ > exec_->ctx())
    pos_ = opts_.startPosition;
  std::vector<int32_t> tokens(static_cast<size_t>(tokens_)), positions(tokens.size());
  for (size_t t = 0; t < tokens.size(); ++t) {
    int64_t p = pos_ + static_cast<int64_t>(t);
    positions[t] = static_cast<int32_t>(p);
    tokens[t] = static_cast<int32_t>((p * 31 + 7) % vocab_);
  }
  if (!tokensInput_.empty())
    if (auto e = exec_->setInput(tokensInput_, tokens))
      return e;
  if (!positionsInput_.empty())
    if (auto e = exec_->setInput(positionsInput_, positions))
      return e;
  for (size_t i = 0; i < otherInputs_.size(); ++i) {
    std::vector<int32_t> v(static_cast<size_t>(otherSizes_[i]));
    // 0, 1, 2, ... (modulo the input's bound range, when it has one).
    const auto [lo, hi] = otherRanges_[i];
    for (size_t k = 0; k < v.size(); ++k)
      v[k] = static_cast<int32_t>(hi > lo ? lo + static_cast<int64_t>(k) % (hi - lo)
                                          : static_cast<int64_t>(k));
    if (auto e = exec_->setInput(otherInputs_[i], v))
      return e;
  }
  if (opts_.advance)
    pos_ += tokens_;
  return llvm::Error::success();
}

llvm::Error StepDriver::warmup() {
  for (int64_t i = 0; i < opts_.warmup; ++i) {
    if (auto e = setInputs())
      return e;
    if (auto e = exec_->run(opts_.entry))
      return e;
  }
  return llvm::Error::success();
}

llvm::Expected<StepSample> StepDriver::step() {
  auto t0 = std::chrono::steady_clock::now();
  if (auto e = setInputs())
    return e;
  if (auto e = exec_->run(opts_.entry))
    return e;
  StepSample s;
  s.wallMs =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  s.gpuMs = exec_->lastGpuMs();
  s.hostLaunchMs = exec_->lastHostLaunchMs();
  return s;
}

double median(std::vector<double> values) {
  if (values.empty())
    return 0;
  std::sort(values.begin(), values.end());
  return values[values.size() / 2];
}

StepSummary summarize(llvm::ArrayRef<StepSample> samples) {
  StepSummary s;
  std::vector<double> wall, gpu, host;
  for (const StepSample &x : samples) {
    wall.push_back(x.wallMs);
    gpu.push_back(x.gpuMs);
    host.push_back(x.hostLaunchMs);
  }
  s.steps = static_cast<int64_t>(samples.size());
  if (!wall.empty()) {
    s.wallMinMs = *std::min_element(wall.begin(), wall.end());
    s.wallMaxMs = *std::max_element(wall.begin(), wall.end());
  }
  s.wallMs = median(std::move(wall));
  s.gpuMs = median(std::move(gpu));
  s.hostLaunchMs = median(std::move(host));
  return s;
}

llvm::Expected<std::vector<StepSample>> timeSteps(Executor &exec, const StepLoopOptions &opts) {
  auto d = StepDriver::create(exec, opts);
  if (!d)
    return d.takeError();
  if (auto e = d->warmup())
    return e;
  std::vector<StepSample> out;
  for (int64_t i = 0; i < opts.steps; ++i) {
    auto s = d->step();
    if (!s)
      return s.takeError();
    out.push_back(*s);
  }
  return out;
}

// --- kernel families ----------------------------------------------------------------------

std::string launchFamily(OpKind op, bool gemm) {
  std::string f(mnemonic(op));
  return gemm ? f + " [cublas]" : f;
}

std::vector<FamilyTime> familyBreakdown(const Function &fn,
                                        llvm::ArrayRef<std::vector<Executor::LaunchTime>> runs,
                                        int64_t kvRows) {
  std::map<std::string, FamilyTime> byFamily;
  if (runs.empty())
    return {};
  const std::vector<Executor::LaunchTime> &first = runs.front();
  std::vector<const Node *> counted;
  for (size_t i = 0; i < first.size(); ++i) {
    const Executor::LaunchTime &l = first[i];
    std::string fam =
        l.node != kNoNode ? launchFamily(l.op, l.gemm) : std::string(nodelessLaunchName(i));
    FamilyTime &f = byFamily[fam];
    f.family = fam;
    ++f.launches;
    f.byShape += l.byShape ? 1 : 0;
    double ms = 0;
    int n = 0;
    for (const auto &run : runs)
      if (i < run.size()) {
        ms += run[i].ms;
        ++n;
      }
    f.ms += n ? ms / n : 0;
    // The launch record names its node by index in the plan's final function.
    const Node *node = l.node < fn.numNodes() ? &fn.node(l.node) : nullptr;
    if (node && !llvm::is_contained(counted, node)) {
      counted.push_back(node);
      f.bytes += nodeBytes(fn, *node, kvRows);
    }
  }
  std::vector<FamilyTime> out;
  for (auto &[name, f] : byFamily)
    out.push_back(f);
  std::stable_sort(out.begin(), out.end(),
                   [](const FamilyTime &a, const FamilyTime &b) { return a.ms > b.ms; });
  return out;
}

TracedSpan tracedSpan(llvm::ArrayRef<std::vector<Executor::LaunchTime>> runs) {
  TracedSpan out;
  for (const std::vector<Executor::LaunchTime> &run : runs) {
    uint64_t first = UINT64_MAX, last = 0;
    double busy = 0;
    for (const Executor::LaunchTime &l : run) {
      busy += l.ms;
      if (l.endNs > l.startNs) {
        first = std::min(first, l.startNs);
        last = std::max(last, l.endNs);
      }
    }
    if (last <= first) // no device clocks: not a traced replay
      continue;
    out.spanMs += static_cast<double>(last - first) / 1e6;
    out.busyMs += busy;
    ++out.runs;
  }
  if (out.runs) {
    out.spanMs /= static_cast<double>(out.runs);
    out.busyMs /= static_cast<double>(out.runs);
  }
  return out;
}

llvm::Expected<std::vector<FamilyTime>>
profileFamilies(Executor &exec, const StepLoopOptions &opts, int runs, int64_t kvRows,
                TracedSpan *span, std::vector<Executor::LaunchTime> *firstRun) {
  auto d = StepDriver::create(exec, opts);
  if (!d)
    return d.takeError();
  if (auto e = d->warmup())
    return e;
  std::vector<std::vector<Executor::LaunchTime>> times;
  for (int r = 0; r < runs; ++r) {
    auto s = d->step();
    if (!s)
      return s.takeError();
    times.push_back(exec.lastLaunchTimes());
    if (times.back().empty())
      return makeError("no per-launch times: profile with a CUDA executor and "
                       "ExecOptions::profileLaunches");
  }
  if (span)
    *span = tracedSpan(times);
  if (firstRun)
    *firstRun = times.front();
  return familyBreakdown(*exec.entry(opts.entry), times, kvRows);
}

} // namespace fg
