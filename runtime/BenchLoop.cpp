//===- BenchLoop.cpp - timed decode steps, ideal bytes, kernel families ---===//
#include "runtime/BenchLoop.h"

#include "ir/OpTable.h"

#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringMap.h"

#include <algorithm>
#include <chrono>
#include <map>

namespace fg {

namespace {

/// Follows view-like producers and in-place state updaters to the value that
/// owns the bytes `v` lives in.
ValueId storageOf(const Function &fn, ValueId v) {
  while (const Node *p = fn.producer(v)) {
    if (!p->info().has(kViewLike) && !p->info().has(kUpdatesState))
      break;
    v = p->operands[0];
  }
  return v;
}

std::optional<unsigned> operandIndex(const Node &n, std::string_view name) {
  llvm::ArrayRef<std::string_view> names = n.info().operandNames;
  for (unsigned i = 0; i < names.size() && i < n.operands.size(); ++i)
    if (names[i] == name && n.operands[i] != kNoValue)
      return i;
  return std::nullopt;
}

/// Bytes of one row of a [rows, ...] tensor.
double rowBytes(const TensorType &t) {
  if (t.shape.empty() || t.shape[0] == 0)
    return static_cast<double>(t.bytes());
  return static_cast<double>(t.bytes()) / static_cast<double>(t.shape[0]);
}

/// The fraction of weight operand `i` of `n` that `n` reads (see the header).
double weightFraction(const Function &fn, const Node &n, unsigned i) {
  const TensorType &w = fn.type(storageOf(fn, n.operands[i]));
  if (w.shape.empty() || w.shape[0] <= 0)
    return 1;
  double rows = static_cast<double>(w.shape[0]);
  if (n.kind == OpKind::GetRows && i == 0) {
    if (auto idx = operandIndex(n, "indices"))
      return std::min(1.0, static_cast<double>(fn.type(n.operands[*idx]).numElements()) / rows);
  }
  if (auto ids = operandIndex(n, "ids"); ids && *ids != i)
    return std::min(1.0, static_cast<double>(fn.type(n.operands[*ids]).numElements()) / rows);
  return 1;
}

/// Rows a state updater writes (|indices|; the source's rows when absent).
double rowsWritten(const Function &fn, const Node &n) {
  if (auto idx = operandIndex(n, "indices"))
    return static_cast<double>(fn.type(n.operands[*idx]).numElements());
  return 1;
}

enum class Access { Weight, KvRead, KvWrite, Other };

/// Bytes operand `i` of `n` moves, and what kind of access it is.
double operandBytes(const Function &fn, const Node &n, unsigned i, int64_t kvRows, Access &kind) {
  ValueId v = n.operands[i];
  ValueId root = storageOf(fn, v);
  const Argument *a = fn.argumentOf(root);
  const TensorType &rt = fn.type(root);
  if (a && a->role == ArgRole::Weight) {
    kind = Access::Weight;
    return weightFraction(fn, n, i) * static_cast<double>(rt.bytes());
  }
  if (a && a->role == ArgRole::State) {
    if (n.info().has(kUpdatesState) && i == 0) {
      kind = Access::KvWrite;
      return rowsWritten(fn, n) * rowBytes(rt);
    }
    kind = Access::KvRead;
    double rows = rt.shape.empty() ? 1 : std::min<double>(static_cast<double>(kvRows),
                                                          static_cast<double>(rt.shape[0]));
    return rows * rowBytes(rt);
  }
  kind = Access::Other;
  return static_cast<double>(fn.type(v).bytes());
}

} // namespace

double nodeBytes(const Function &fn, const Node &n, int64_t kvRows) {
  if (n.info().has(kViewLike))
    return 0;
  double total = 0;
  for (unsigned i = 0; i < n.operands.size(); ++i) {
    if (n.operands[i] == kNoValue)
      continue;
    Access kind;
    total += operandBytes(fn, n, i, kvRows, kind);
  }
  for (size_t r = 0; r < n.results.size(); ++r) {
    if (r == 0 && n.info().has(kUpdatesState))
      continue; // written in place: counted with operand 0
    total += static_cast<double>(fn.type(n.results[r]).bytes());
  }
  return total;
}

StepBytes idealStepBytes(const Function &fn, int64_t kvRows) {
  StepBytes out;
  llvm::DenseMap<ValueId, double> weightFrac; // per weight argument: the largest fraction read
  for (const Node &n : fn.nodes()) {
    if (n.info().has(kViewLike))
      continue;
    for (unsigned i = 0; i < n.operands.size(); ++i) {
      if (n.operands[i] == kNoValue)
        continue;
      Access kind;
      double bytes = operandBytes(fn, n, i, kvRows, kind);
      if (kind == Access::Weight) {
        double &f = weightFrac[storageOf(fn, n.operands[i])];
        f = std::max(f, weightFraction(fn, n, i));
      } else if (kind == Access::KvRead) {
        out.kvRead += bytes;
      } else if (kind == Access::KvWrite) {
        out.kvWrite += bytes;
      }
    }
  }
  for (const auto &[v, f] : weightFrac)
    out.weights += f * static_cast<double>(fn.type(v).bytes());
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
  for (const Argument &a : fn->arguments()) {
    const Value &v = fn->value(a.value);
    if (a.role == ArgRole::Weight && v.name == "token_embd" && !v.type.shape.empty())
      d.vocab_ = std::max<int64_t>(1, v.type.shape[0]);
    if (a.role != ArgRole::Input)
      continue;
    if (!isInteger(v.type.dtype))
      return makeError("entry '" + opts.entry + "' input '" + v.name + "' is " + v.type.str() +
                       "; only integer inputs can be fed");
    if (v.name == "tokens" || v.name == "positions")
      d.tokens_ = std::max<int64_t>(1, v.type.numElements());
    else {
      d.otherInputs_.push_back(v.name);
      d.otherSizes_.push_back(v.type.numElements());
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
  const Function *fn = exec_->entry(opts_.entry);
  if (fn->lookup("tokens") != kNoValue)
    if (auto e = exec_->setInput("tokens", tokens))
      return e;
  if (fn->lookup("positions") != kNoValue)
    if (auto e = exec_->setInput("positions", positions))
      return e;
  for (size_t i = 0; i < otherInputs_.size(); ++i) {
    std::vector<int32_t> v(static_cast<size_t>(otherSizes_[i]));
    for (size_t k = 0; k < v.size(); ++k)
      v[k] = static_cast<int32_t>(k);
    if (auto e = exec_->setInput(otherInputs_[i], v))
      return e;
  }
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
    std::string fam = launchFamily(l.op, l.gemm);
    FamilyTime &f = byFamily[fam];
    f.family = fam;
    ++f.launches;
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

llvm::Expected<std::vector<FamilyTime>> profileFamilies(Executor &exec,
                                                        const StepLoopOptions &opts, int runs,
                                                        int64_t kvRows) {
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
      return makeError("no per-launch times: profile with a CUDA executor in eager mode and "
                       "ExecOptions::profileLaunches");
  }
  return familyBreakdown(*exec.entry(opts.entry), times, kvRows);
}

} // namespace fg
