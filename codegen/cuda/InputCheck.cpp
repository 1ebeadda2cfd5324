//===- InputCheck.cpp - the device-side check of an entry's inputs --------===//
#include "codegen/cuda/InputCheck.h"

#include "codegen/cuda/EmitterCommon.h"
#include "codegen/cuda/KernelSources.h"

#include "llvm/ADT/StringExtras.h"

namespace fg::cuda {

using namespace detail;

/// One block checks every value (a few thousand at most: a prefill chunk).
constexpr unsigned kCheckThreads = 256;

namespace {

/// The check's policy struct (named `cfg`), entry parameters and body over
/// `entry`'s checked inputs, their parameters named `<prefix>in<i>` and
/// `<prefix>src<i>`; none when no input has a range.
struct CheckParts {
  std::string cfg, params, body;
};
std::optional<CheckParts> checkParts(const CompiledEntry &entry, llvm::StringRef prefix,
                                     llvm::StringRef cfg) {
  std::vector<std::string> ins, dst, src;
  for (const IoBinding &b : entry.inputs) {
    if (!b.bind.hasRange())
      continue;
    std::string i = std::to_string(ins.size());
    ins.push_back("fg::CheckIn<" + ctype(b.type.dtype) + ", " + ilit(b.type.numElements()) + ", " +
                  ilit(b.bind.lo) + ", " + ilit(b.bind.hi) + ", " +
                  (b.bind.kind == BindKind::Positions ? "true" : "false") +
                  (b.bind.kind == BindKind::Tokens ? ", true" : "") + ">");
    dst.push_back(prefix.str() + "in" + i);
    src.push_back(prefix.str() + "src" + i);
  }
  if (ins.empty())
    return std::nullopt;
  CheckParts p;
  p.cfg = "struct " + cfg.str() + " {\n  using Ins = fg::CheckList<" + llvm::join(ins, ", ") +
          ">;\n};\n";
  p.params = "unsigned *status, unsigned *mirror";
  for (const std::string &d : dst)
    p.params += ", void *" + d;
  for (const std::string &s : src)
    p.params += ", const void *" + s;
  p.body = "void *const in[] = {" + llvm::join(dst, ", ") + "};\n  const void *const src[] = {" +
           llvm::join(src, ", ") + "};\n  fg::checkInputs<" + cfg.str() +
           ">(status, mirror, in, src);";
  return p;
}

/// Takes the entry's gather of its token's embedding row into the check
/// launch (EmitOptions::checkGathers): a get_rows launch (one grid-stride
/// call: the elementwise ewMap, or dequantRows for a quantised table) that
/// waits for the check alone and reads a
/// weight table at exactly the checked one-element `tokens` input's arena
/// slot. The
/// merged kernel is one block of the check's threads: the check, a barrier
/// (the ids it copied into their slot are visible to the whole block), then
/// the gather over all its elements. The order the plan proved holds: the
/// gather still runs after the check has written the ids, and every launch
/// that waited for either now waits for the merged one; no launch ran beside
/// the check (every launch waited for it), so none runs beside the gather
/// that did not before. Returns the launches removed (0 or 1).
unsigned mergeCheckGather(CompiledEntry &entry, KernelSources &sources) {
  // One token's row (a decode step: a few thousand values for the block);
  // a prefill's rows keep their own grid.
  const IoBinding *tokens = nullptr;
  for (const IoBinding &b : entry.inputs)
    if (b.bind.kind == BindKind::Tokens && b.bind.hasRange() && b.type.numElements() == 1)
      tokens = &b;
  std::vector<size_t> &sourceOf = sources.sourceOfLaunch.back();
  if (!tokens || entry.launches.empty() || entry.launches.front().node != kNoNode)
    return 0;
  for (uint32_t j = 1; j < entry.launches.size(); ++j) {
    const LaunchRecord &g = entry.launches[j];
    if (g.kind != LaunchRecord::Kind::Kernel || g.node == kNoNode || g.op != OpKind::GetRows ||
        g.deps != std::vector<uint32_t>{0} || g.args.size() != 3 || !(g.args[2] == tokens->where) ||
        g.args[1].space != BufferSpace::Weight || g.grid[1] != 1 || g.grid[2] != 1 ||
        g.sharedBytes != 0)
      continue;
    const std::string &src = sources.sources[sourceOf[j]].second;
    const std::string common = commonHeader().str();
    const std::optional<EntrySplice> at = entrySplice(src, g.symbol);
    if (!at || src.compare(0, common.size(), common) != 0)
      continue;
    // The body: one grid-stride call (a float table's ewMap, a quantised
    // one's dequantRows), so one block covers every element, and nothing
    // after it.
    size_t call = std::string::npos;
    for (const char *head : {"fg::ewMap<Cfg>(", "fg::dequantRows<Cfg>("})
      if (call == std::string::npos)
        call = src.find(head, at->open);
    const size_t end = call == std::string::npos ? call : src.find(");", call);
    if (end == std::string::npos || end > at->close ||
        src.find_first_not_of(" \n", end + 2) != at->close + 1) // the body's closing brace
      continue;
    std::optional<CheckParts> check = checkParts(entry, "fg_", "FgCheckCfg");
    if (!check)
      return 0;
    const std::string gatherParams = src.substr(at->params, at->open - at->params);
    const std::string body =
        src.substr(common.size(), at->entry - common.size()) + kernelSource("check.cuh").str() +
        "\n" + check->cfg +
        kernelEntry(kCheckThreads, check->params + ", " + gatherParams,
                    check->body + "\n  __syncthreads(); // the ids copied, then their rows\n  " +
                        src.substr(call, end + 2 - call));
    KernelSpec k = finishSpec("check_inputs", body);
    LaunchRecord &c = entry.launches.front();
    c.symbol = k.name;
    c.args.insert(c.args.end(), g.args.begin(), g.args.end());
    c.what += " + " + g.what;
    sources.sources[sourceOf[0]] = {k.name, k.source};
    std::vector<uint32_t> into(entry.launches.size());
    for (uint32_t i = 0; i < into.size(); ++i)
      into[i] = i == j ? 0 : i;
    dropMergedLaunches(entry, sources, into);
    return 1;
  }
  return 0;
}

} // namespace

std::optional<std::pair<std::string, std::string>> inputCheckKernel(const CompiledEntry &entry) {
  std::optional<CheckParts> p = checkParts(entry, "", "Cfg");
  if (!p)
    return std::nullopt;
  KernelSpec k = finishSpec("check_inputs", kernelSource("check.cuh").str() + "\n" + p->cfg +
                                                kernelEntry(kCheckThreads, p->params, p->body));
  return std::make_pair(k.name, k.source);
}

void addInputCheck(CompiledEntry &entry, KernelSources &sources, SlotTables &tables,
                   bool gather) {
  std::optional<std::pair<std::string, std::string>> kernel = inputCheckKernel(entry);
  if (!kernel)
    return;
  LaunchRecord check;
  check.kind = LaunchRecord::Kind::Kernel;
  check.symbol = kernel->first;
  check.block[0] = kCheckThreads;
  check.args.push_back({BufferSpace::Status, 0, 0});
  check.args.push_back({BufferSpace::Counters, 0, tables.statusMirror()});
  for (const IoBinding &b : entry.inputs)
    if (b.bind.hasRange())
      check.args.push_back(b.where);
  for (size_t i = 0; i < entry.inputs.size(); ++i)
    if (entry.inputs[i].bind.hasRange())
      check.args.push_back({BufferSpace::Staging, static_cast<uint32_t>(i), 0});
  check.node = kNoNode;
  check.what = "the input check of @" + entry.name;
  for (LaunchRecord &l : entry.launches) {
    for (uint32_t &d : l.deps)
      ++d;
    if (l.deps.empty())
      l.deps.push_back(0);
  }
  entry.launches.insert(entry.launches.begin(), std::move(check));
  std::vector<size_t> &sourceOfLaunch = sources.sourceOfLaunch.back();
  sourceOfLaunch.insert(sourceOfLaunch.begin(), sources.sources.size());
  sources.sources.emplace_back(kernel->first, kernel->second);
  if (gather)
    mergeCheckGather(entry, sources);
}

} // namespace fg::cuda
