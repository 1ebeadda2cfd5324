//===- KernelModules.cpp - kernel sources -> NVRTC modules ----------------===//
#include "codegen/cuda/KernelModules.h"

#include <atomic>
#include <map>
#include <optional>
#include <thread>

namespace fg::cuda {

llvm::Expected<std::vector<uint32_t>> buildModules(const KernelSources &ks, llvm::StringRef arch,
                                                   const NvrtcOptions &nvrtc, const LogSink &log,
                                                   CompiledProgram &prog, ModuleStats &stats) {
  const auto &sources = ks.sources;
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
  if (log)
    log(LogLevel::Progress,
        "compiling " + std::to_string(unique.size()) + " kernels with NVRTC for " + arch.str());
  std::vector<std::optional<llvm::Expected<CompiledModule>>> results(unique.size());
  {
    unsigned workers = std::max(1u, std::thread::hardware_concurrency());
    std::atomic<size_t> next{0};
    std::vector<std::thread> pool;
    for (unsigned w = 0; w < std::min<size_t>(workers, unique.size()); ++w)
      pool.emplace_back([&] {
        for (size_t i = next++; i < unique.size(); i = next++)
          results[i].emplace(compileCuda(unique[i]->second, unique[i]->first, arch, nvrtc));
      });
    for (std::thread &t : pool)
      t.join();
  }
  for (size_t i = 0; i < results.size(); ++i) {
    llvm::Expected<CompiledModule> &compiled = *results[i];
    if (!compiled) {
      llvm::Error err = compiled.takeError();
      for (size_t k = i + 1; k < results.size(); ++k)
        if (!*results[k])
          llvm::consumeError(results[k]->takeError());
      return makeError("kernel " + unique[i]->first +
                       " failed to compile: " + llvm::toString(std::move(err)));
    }
    KernelImage img;
    img.name = unique[i]->first;
    img.cubin.assign(compiled->cubin.begin(), compiled->cubin.end());
    img.ptx = compiled->ptx;
    stats.cacheHits += compiled->cacheHit;
    prog.modules.push_back(std::move(img));
  }
  stats.modules = static_cast<unsigned>(prog.modules.size());
  for (size_t e = 0; e < prog.entries.size() && e < ks.sourceOfLaunch.size(); ++e) {
    auto &launches = prog.entries[e].launches;
    for (size_t l = 0; l < launches.size(); ++l)
      if (ks.sourceOfLaunch[e][l] != ~size_t(0))
        launches[l].module = moduleOfSourceIndex[ks.sourceOfLaunch[e][l]];
  }
  return moduleOfSourceIndex;
}

} // namespace fg::cuda
