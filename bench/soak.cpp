//===- soak.cpp - many decode steps of one replayed graph, checked bit for bit -===//
//
// The long-run check of issue 10: a workload's decode entry replayed as one
// CUDA graph for N steps with teacher-forced tokens (a fixed pseudo-random id
// per position) and positions cycling through the whole KV cache; the state
// is reset at the start of every pass over the cache. Because every pass
// feeds the same inputs from the same (zero) state, the logits at a fixed
// position must equal the first pass's bit for bit; host RSS and free device
// memory are read at the start and the end and must not move.
//
//   fg_bench_soak --workload w-tiny --steps 100000 [--ctx 1024] [--check-pos 100]
//
// Prints one summary line; exits 1 on a mismatch or growth, 0 without a GPU
// (with a skip line).
//
//===----------------------------------------------------------------------===//
#include "codegen/cuda/Compile.h"
#include "frontends/models/Workloads.h"
#include "runtime/Executor.h"

#include <cuda_runtime.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

using namespace fg;

namespace {

/// Resident set size of this process in bytes (Linux /proc/self/statm).
int64_t rssBytes() {
  FILE *f = std::fopen("/proc/self/statm", "r");
  if (!f)
    return -1;
  long pages = 0, resident = 0;
  int n = std::fscanf(f, "%ld %ld", &pages, &resident);
  std::fclose(f);
  return n == 2 ? static_cast<int64_t>(resident) * 4096 : -1;
}

int64_t deviceFreeBytes() {
  size_t freeB = 0, total = 0;
  return cudaMemGetInfo(&freeB, &total) == cudaSuccess ? static_cast<int64_t>(freeB) : -1;
}

/// The teacher-forced token at position p (same every pass).
int32_t tokenAt(int64_t p, int64_t vocab) {
  uint64_t h = static_cast<uint64_t>(p) * 0x9E3779B97F4A7C15ull;
  h ^= h >> 29;
  return static_cast<int32_t>(h % static_cast<uint64_t>(vocab));
}

int usage(const char *argv0) {
  std::fprintf(stderr,
               "usage: %s --workload W [--steps N] [--ctx N] [--check-pos P]\n"
               "  replays the decode graph N steps, positions cycling through ctx, state reset\n"
               "  each pass; logits at position P must equal the first pass's bit for bit\n",
               argv0);
  return 2;
}

} // namespace

int main(int argc, char **argv) {
  std::string workload;
  int64_t steps = 10000, ctx = 1024, checkPos = 100;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto next = [&]() -> const char * { return i + 1 < argc ? argv[++i] : nullptr; };
    const char *v = nullptr;
    if (a == "--workload" && (v = next()))
      workload = v;
    else if (a == "--steps" && (v = next()))
      steps = std::atoll(v);
    else if (a == "--ctx" && (v = next()))
      ctx = std::atoll(v);
    else if (a == "--check-pos" && (v = next()))
      checkPos = std::atoll(v);
    else
      return usage(argv[0]);
  }
  if (workload.empty() || steps < 1 || ctx < 2 || checkPos < 0 || checkPos >= ctx)
    return usage(argv[0]);
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    std::printf("fg_bench_soak: no CUDA device, skipping\n");
    return 0;
  }

  WorkloadOptions wo;
  wo.ctx = ctx;
  auto g = buildWorkload(workload, wo);
  if (!g) {
    std::fprintf(stderr, "fg_bench_soak: %s\n", llvm::toString(g.takeError()).c_str());
    return 1;
  }
  CompileOptions co;
  co.ctx = ctx;
  co.source = workload;
  auto plan = compile(*g, co);
  if (!plan) {
    std::fprintf(stderr, "fg_bench_soak: %s\n", llvm::toString(plan.takeError()).c_str());
    return 1;
  }
  ExecOptions eo;
  eo.device = ExecOptions::Device::Cuda;
  eo.mode = ExecOptions::Mode::Graph;
  auto exec = Executor::create(*plan, eo);
  if (!exec) {
    std::fprintf(stderr, "fg_bench_soak: %s\n", llvm::toString(exec.takeError()).c_str());
    return 1;
  }
  const Function *fn = exec->entry("decode");
  if (!fn) {
    std::fprintf(stderr, "fg_bench_soak: no decode entry\n");
    return 1;
  }
  int64_t vocab = 0;
  if (ValueId v = fn->lookup("token_embd"); v != kNoValue)
    vocab = fn->type(v).shape[0];
  if (vocab <= 0) {
    std::fprintf(stderr, "fg_bench_soak: cannot find the vocabulary (token_embd)\n");
    return 1;
  }

  std::vector<float> first;
  int64_t passes = 0, checked = 0, mismatches = 0, rssStart = -1, devStart = -1;
  auto t0 = std::chrono::steady_clock::now();
  for (int64_t s = 0; s < steps; ++s) {
    int64_t pos = s % ctx;
    if (pos == 0) {
      exec->resetState();
      ++passes;
    }
    int32_t tok = tokenAt(pos, vocab), p32 = static_cast<int32_t>(pos);
    llvm::Error e = exec->setInput("tokens", llvm::ArrayRef<int32_t>(tok));
    if (!e)
      e = exec->setInput("positions", llvm::ArrayRef<int32_t>(p32));
    if (!e)
      e = exec->run("decode");
    if (e) {
      std::fprintf(stderr, "fg_bench_soak: step %lld: %s\n", static_cast<long long>(s),
                   llvm::toString(std::move(e)).c_str());
      return 1;
    }
    if (s == 0) { // after the first step: allocations and graph instantiation done
      rssStart = rssBytes();
      devStart = deviceFreeBytes();
    }
    if (pos != checkPos)
      continue;
    auto logits = exec->outputFloats("logits");
    if (!logits) {
      std::fprintf(stderr, "fg_bench_soak: %s\n", llvm::toString(logits.takeError()).c_str());
      return 1;
    }
    ++checked;
    if (first.empty())
      first.assign(logits->begin(), logits->end());
    else if (logits->size() != first.size() ||
             std::memcmp(logits->data(), first.data(), first.size() * sizeof(float)) != 0)
      ++mismatches;
  }
  double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  int64_t rssEnd = rssBytes(), devEnd = deviceFreeBytes();
  // Host RSS may settle by a few pages (allocator, driver); device memory must not move.
  bool grew = (rssStart > 0 && rssEnd - rssStart > (8ll << 20)) ||
              (devStart >= 0 && devEnd >= 0 && devEnd < devStart);
  std::printf("fg_bench_soak %s: %lld steps in %.1f s (%.3f ms/step), %lld passes over ctx %lld, "
              "logits at position %lld checked %lld times: %lld mismatches; host RSS %.1f -> "
              "%.1f MiB; device free %.1f -> %.1f MiB\n",
              workload.c_str(), static_cast<long long>(steps), secs, 1e3 * secs / steps,
              static_cast<long long>(passes), static_cast<long long>(ctx),
              static_cast<long long>(checkPos), static_cast<long long>(checked),
              static_cast<long long>(mismatches), rssStart / 1048576.0, rssEnd / 1048576.0,
              devStart / 1048576.0, devEnd / 1048576.0);
  return mismatches || grew ? 1 : 0;
}
