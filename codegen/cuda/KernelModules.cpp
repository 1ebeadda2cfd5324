//===- KernelModules.cpp - kernel sources -> NVRTC modules ----------------===//
#include "codegen/cuda/KernelModules.h"

#include "llvm/Support/FileSystem.h"

#include <atomic>
#include <chrono>
#include <map>
#include <mutex>
#include <optional>
#include <thread>

namespace fg::cuda {

llvm::Expected<std::vector<uint32_t>> buildModules(const KernelSources &ks, llvm::StringRef arch,
                                                   const NvrtcOptions &nvrtc, const LogSink &log,
                                                   CompiledProgram &prog, ModuleStats &stats,
                                                   const ProgressSink &progress) {
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
  // How many the disk cache holds already (a corrupt entry is rebuilt, so
  // this can be one high; the progress and the stats count what happened).
  size_t inCache = 0;
  if (nvrtc.useCache)
    for (const auto *src : unique)
      inCache += llvm::sys::fs::exists(cachePath(src->second, arch, nvrtc));
  if (log)
    log(LogLevel::Progress, "compiling " + std::to_string(unique.size()) + " kernels for " +
                                arch.str() + " (" + std::to_string(inCache) +
                                " from the cache, " + std::to_string(unique.size() - inCache) +
                                " with NVRTC)");
  std::vector<std::optional<llvm::Expected<CompiledModule>>> results(unique.size());
  std::mutex progressMutex;
  uint64_t done = 0, cached = 0;
  auto t0 = std::chrono::steady_clock::now();
  auto report = [&](llvm::Expected<CompiledModule> &m) {
    if (!progress)
      return;
    std::lock_guard<std::mutex> lock(progressMutex);
    ++done;
    cached += static_cast<bool>(m) && m->cacheHit;
    Progress p;
    p.task = "compiling kernels";
    p.unit = "kernels";
    p.done = done;
    p.total = unique.size();
    p.cached = cached;
    p.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    progress(p);
  };
  {
    unsigned workers = std::max(1u, std::thread::hardware_concurrency());
    std::atomic<size_t> next{0};
    std::vector<std::thread> pool;
    for (unsigned w = 0; w < std::min<size_t>(workers, unique.size()); ++w)
      pool.emplace_back([&] {
        for (size_t i = next++; i < unique.size(); i = next++)
        {
          results[i].emplace(compileCuda(unique[i]->second, unique[i]->first, arch, nvrtc));
          report(*results[i]);
        }
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
