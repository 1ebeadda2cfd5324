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
  std::vector<std::string> ins;
  std::string params = "unsigned *status";
  std::string ptrs;
  for (const IoBinding &b : entry.inputs) {
    if (!b.bind.hasRange())
      continue;
    std::string i = std::to_string(ins.size());
    ins.push_back("fg::CheckIn<" + ctype(b.type.dtype) + ", " + ilit(b.type.numElements()) +
                  ", " + ilit(b.bind.lo) + ", " + ilit(b.bind.hi) + ", " +
                  (b.bind.kind == BindKind::Positions ? "true" : "false") + ">");
    params += ", void *in" + i;
    ptrs += std::string(ptrs.empty() ? "" : ", ") + "in" + i;
  }
  if (ins.empty())
    return std::nullopt;
  std::string body = kernelSource("check.cuh").str() + "\nstruct Cfg {\n  using Ins = fg::CheckList<" +
                     llvm::join(ins, ", ") + ">;\n};\n" +
                     kernelEntry(kCheckThreads, params,
                                 "void *const in[] = {" + ptrs +
                                     "};\n  fg::checkInputs<Cfg>(status, in);");
  KernelSpec k = finishSpec("check_inputs", body);
  return std::make_pair(k.name, k.source);
}

void addInputCheck(CompiledEntry &entry, KernelSources &sources) {
  std::optional<std::pair<std::string, std::string>> kernel = inputCheckKernel(entry);
  if (!kernel)
    return;
  LaunchRecord check;
  check.kind = LaunchRecord::Kind::Kernel;
  check.symbol = kernel->first;
  check.block[0] = kCheckThreads;
  check.args.push_back({BufferSpace::Status, 0, 0});
  for (const IoBinding &b : entry.inputs)
    if (b.bind.hasRange())
      check.args.push_back(b.where);
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
