//===- InputCheck.cpp - the device-side check of an entry's inputs --------===//
#include "codegen/cuda/InputCheck.h"

#include "codegen/cuda/EmitterCommon.h"
#include "codegen/cuda/KernelSources.h"

#include "llvm/ADT/StringExtras.h"

namespace fg::cuda {

using namespace detail;

/// One block checks every value (a few thousand at most: a prefill chunk).
constexpr unsigned kCheckThreads = 256;

std::optional<std::pair<std::string, std::string>> inputCheckKernel(const CompiledEntry &entry) {
  std::vector<std::string> ins, dst, src;
  std::string params = "unsigned *status, unsigned *mirror";
  for (const IoBinding &b : entry.inputs) {
    if (!b.bind.hasRange())
      continue;
    std::string i = std::to_string(ins.size());
    ins.push_back("fg::CheckIn<" + ctype(b.type.dtype) + ", " + ilit(b.type.numElements()) + ", " +
                  ilit(b.bind.lo) + ", " + ilit(b.bind.hi) + ", " +
                  (b.bind.kind == BindKind::Positions ? "true" : "false") +
                  (b.bind.kind == BindKind::Tokens ? ", true" : "") + ">");
    dst.push_back("in" + i);
    src.push_back("src" + i);
  }
  if (ins.empty())
    return std::nullopt;
  for (const std::string &d : dst)
    params += ", void *" + d;
  for (const std::string &s : src)
    params += ", const void *" + s;
  std::string body = kernelSource("check.cuh").str() +
                     "\nstruct Cfg {\n  using Ins = fg::CheckList<" + llvm::join(ins, ", ") +
                     ">;\n};\n" +
                     kernelEntry(kCheckThreads, params,
                                 "void *const in[] = {" + llvm::join(dst, ", ") +
                                     "};\n  const void *const src[] = {" + llvm::join(src, ", ") +
                                     "};\n  fg::checkInputs<Cfg>(status, mirror, in, src);");
  KernelSpec k = finishSpec("check_inputs", body);
  return std::make_pair(k.name, k.source);
}

void addInputCheck(CompiledEntry &entry, KernelSources &sources, SlotTables &tables) {
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
}

} // namespace fg::cuda
