//===- StepTrace.cpp - CUPTI records -> launches -> Chrome trace JSON ------===//
#include "runtime/StepTrace.h"

#include "ir/Diag.h"
#include "runtime/BenchLoop.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/Support/FormatVariadic.h"

#include <algorithm>
#include <deque>
#include <map>

namespace fg {

llvm::Expected<std::vector<LaunchSpan>> matchKernelRecords(const CompiledEntry &entry,
                                                           std::vector<KernelRecord> records) {
  std::stable_sort(records.begin(), records.end(),
                   [](const KernelRecord &a, const KernelRecord &b) { return a.start < b.start; });
  std::vector<uint64_t> ns = chargedTimes(records);
  std::map<std::string, std::deque<size_t>, std::less<>> bySymbol;
  std::deque<size_t> gemms;
  for (size_t i = 0; i < entry.launches.size(); ++i) {
    const LaunchRecord &l = entry.launches[i];
    if (l.kind == LaunchRecord::Kind::Gemm)
      gemms.push_back(i);
    else
      bySymbol[l.symbol].push_back(i);
  }
  std::vector<LaunchSpan> spans(entry.launches.size());
  size_t unmatched = 0;
  std::map<std::string, size_t, std::less<>> strayNames; // records without a launch, by name
  std::vector<size_t> stray; // records whose name no launch left has, in start order
  auto charge = [&](size_t launch, size_t r) {
    LaunchSpan &s = spans[launch];
    s.ms += static_cast<double>(ns[r]) / 1e6;
    s.startNs = s.kernels ? std::min(s.startNs, records[r].start) : records[r].start;
    s.endNs = std::max(s.endNs, records[r].end);
    ++s.kernels;
  };
  for (size_t r = 0; r < records.size(); ++r) {
    auto it = bySymbol.find(records[r].name);
    size_t launch;
    if (it != bySymbol.end() && !it->second.empty()) {
      launch = it->second.front();
      it->second.pop_front();
    } else if (!gemms.empty()) {
      // cuBLAS's kernels: those in a row (until one of ours) are one call.
      launch = gemms.front();
      bool nextIsOurs = r + 1 < records.size() && bySymbol.count(records[r + 1].name);
      if (nextIsOurs)
        gemms.pop_front();
    } else {
      stray.push_back(r);
      continue;
    }
    charge(launch, r);
  }
  // By shape: the launches still without a record, in launch order, take
  // the stray records of their grid and block, in start order.
  if (!stray.empty()) {
    std::vector<size_t> left;
    for (auto &[sym, q] : bySymbol)
      left.insert(left.end(), q.begin(), q.end());
    llvm::sort(left);
    std::vector<bool> taken(left.size(), false);
    for (size_t r : stray) {
      const KernelRecord &k = records[r];
      size_t j = 0;
      for (; j < left.size(); ++j) {
        const LaunchRecord &l = entry.launches[left[j]];
        if (!taken[j] && std::equal(l.grid, l.grid + 3, k.grid) &&
            std::equal(l.block, l.block + 3, k.block))
          break;
      }
      if (j == left.size()) {
        ++unmatched;
        ++strayNames[k.name];
        continue;
      }
      taken[j] = true;
      charge(left[j], r);
      spans[left[j]].byShape = true;
      std::deque<size_t> &q = bySymbol.find(entry.launches[left[j]].symbol)->second;
      q.erase(std::find(q.begin(), q.end(), left[j]));
    }
  }
  size_t missing = 0;
  for (auto &[sym, q] : bySymbol)
    missing += q.size();
  if (missing || unmatched) {
    // Which names, so that a renamed or substituted kernel can be told
    // apart from a dropped record (up to 3 of each side, with counts).
    auto names = [](const auto &counted) {
      std::string out;
      size_t shown = 0;
      for (const auto &[name, n] : counted) {
        if (n == 0)
          continue;
        if (shown++ == 3) {
          out += ", ...";
          break;
        }
        out += (out.empty() ? "" : ", ") + name + " x" + std::to_string(n);
      }
      return out;
    };
    std::map<std::string, size_t, std::less<>> missingNames;
    for (auto &[sym, q] : bySymbol)
      missingNames[sym] = q.size();
    std::string detail;
    if (missing)
      detail += "; without a record: " + names(missingNames);
    if (unmatched)
      detail += "; without a launch: " + names(strayNames);
    return makeError("kernel trace of entry '" + entry.name + "': " +
                     std::to_string(records.size()) + " kernel records for " +
                     std::to_string(entry.launches.size()) + " launches (" +
                     std::to_string(missing) + " launches without a record, " +
                     std::to_string(unmatched) + " records without a launch" + detail + ")");
  }
  return spans;
}

namespace {

std::string jsonString(llvm::StringRef s) {
  std::string out = "\"";
  for (char c : s) {
    switch (c) {
    case '"': out += "\\\""; break;
    case '\\': out += "\\\\"; break;
    case '\n': out += "\\n"; break;
    case '\t': out += "\\t"; break;
    default:
      if (static_cast<unsigned char>(c) < 0x20)
        out += llvm::formatv("\\u{0:x-4}", static_cast<unsigned>(c)).str();
      else
        out += c;
    }
  }
  return out + "\"";
}

std::string num(double v) { return llvm::formatv("{0:f3}", v).str(); }

} // namespace

std::string chromeTraceJson(const Function &fn, llvm::ArrayRef<Executor::LaunchTime> launches,
                            int64_t kvRows, llvm::StringRef title) {
  // Launches with a span, by start; each on the first track free at its start.
  std::vector<size_t> order;
  for (size_t i = 0; i < launches.size(); ++i)
    if (launches[i].endNs > launches[i].startNs)
      order.push_back(i);
  llvm::stable_sort(order, [&](size_t a, size_t b) {
    return launches[a].startNs < launches[b].startNs;
  });
  uint64_t t0 = order.empty() ? 0 : launches[order.front()].startNs;
  std::vector<uint64_t> trackEnd;
  std::vector<std::string> events;
  for (size_t i : order) {
    const Executor::LaunchTime &l = launches[i];
    size_t track = 0;
    while (track < trackEnd.size() && trackEnd[track] > l.startNs)
      ++track;
    if (track == trackEnd.size())
      trackEnd.push_back(0);
    trackEnd[track] = l.endNs;
    const Node *node = l.node < fn.numNodes() ? &fn.node(l.node) : nullptr;
    std::string op = node ? std::string(mnemonic(node->kind)) : std::string("input check");
    std::string name = l.gemm ? "cuBLAS GEMM (" + op + ")" : l.symbol;
    double us = static_cast<double>(l.endNs - l.startNs) / 1e3;
    double bytes = node ? nodeBytes(fn, *node, kvRows) : 0;
    std::string e = "{\"name\": " + jsonString(name) + ", \"cat\": " + jsonString(op) +
                    ", \"ph\": \"X\", \"pid\": 1, \"tid\": " + std::to_string(track + 1) +
                    ", \"ts\": " + num(static_cast<double>(l.startNs - t0) / 1e3) +
                    ", \"dur\": " + num(us) + ", \"args\": {\"launch\": " + std::to_string(i) +
                    ", \"op\": " + jsonString(op);
    if (node) {
      const Value &root = fn.value(node->result());
      e += ", \"node\": " + jsonString(root.name.empty() ? "%" + std::to_string(node->result())
                                                         : "%" + root.name);
      e += ", \"fused_group\": " +
           (node->info().has(kFused) ? jsonString(op) : std::string("null"));
    }
    e += ", \"bytes\": " + llvm::formatv("{0:f0}", bytes).str() + ", \"us\": " + num(us) +
         ", \"GB/s\": " + num(us > 0 ? bytes / us / 1e3 : 0) +
         ", \"charged_us\": " + num(static_cast<double>(l.ms) * 1e3) + "}}";
    events.push_back(std::move(e));
  }
  std::string out = "{\"displayTimeUnit\": \"ns\", \"traceEvents\": [\n";
  out += "{\"name\": \"process_name\", \"ph\": \"M\", \"pid\": 1, \"args\": {\"name\": " +
         jsonString(title) + "}}";
  for (size_t t = 0; t < trackEnd.size(); ++t)
    out += ",\n{\"name\": \"thread_name\", \"ph\": \"M\", \"pid\": 1, \"tid\": " +
           std::to_string(t + 1) + ", \"args\": {\"name\": " +
           jsonString(t == 0 ? std::string("kernels") : "overlapping " + std::to_string(t)) +
           "}}";
  for (const std::string &e : events)
    out += ",\n" + e;
  return out + "\n]}\n";
}

} // namespace fg
