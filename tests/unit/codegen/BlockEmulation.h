//===- BlockEmulation.h - one CUDA thread block on host threads -*- C++ -*-===//
//
// Enough of CUDA's device language to run a block-level kernel function
// (kernels/*.cuh) on this machine, which has no GPU — or a whole kernel whose
// blocks never wait for each other (runGrid: one block after another) —
// with no inline PTX: every thread of the block is a std::thread; __syncthreads is a barrier of all of them, warp
// shuffles exchange through a per-warp slot array between two barriers of
// the warp's 32 threads, shared-memory atomics are std::atomic_ref, and
// `__shared__` variables are function statics (one per template
// instantiation, shared by the block's threads). A __syncthreads reached by
// some threads only (divergent) hangs here as it would be undefined there:
// runBlock's caller gives it a time limit.
//
//   fg::emu::runBlock(256, [&] { result = fg::sampleRow<Cfg>(...); });
//   fg::emu::runGrid(blocks, 256, [&] { fg::greedyToken<Cfg>(...); });
//
// Include it before the .cuh file. Only what the included kernels use.
//
//===----------------------------------------------------------------------===//
#pragma once

// The kernels' `#pragma unroll` is unknown to the host compiler: the test's
// sources build with -Wno-unknown-pragmas (tests/CMakeLists.txt).

#include <atomic>
#include <barrier>
#include <bit>
#include <cmath>
#include <math.h>
#include <cstdint>
#include <cstring>
#include <functional>
#include <limits>
#include <memory>
#include <thread>
#include <vector>

#define __device__
#define __forceinline__ inline
#define __shared__ static
#define FG_INF std::numeric_limits<float>::infinity()

namespace fg::emu {

struct Dim3 {
  unsigned x = 0, y = 0, z = 0;
};

struct Block {
  explicit Block(unsigned n) : threads(n), all(n) {
    for (unsigned w = 0; w < (n + 31) / 32; ++w)
      warps.push_back(std::make_unique<std::barrier<>>(std::min(32u, n - 32 * w)));
    slots.resize(n);
  }
  unsigned threads;
  std::barrier<> all;
  std::vector<std::unique_ptr<std::barrier<>>> warps;
  std::vector<uint64_t> slots;
};

inline thread_local Block *block = nullptr;
inline thread_local Dim3 tid, bid, gdim, bdim;

/// Runs `body` on `threads` host threads as block `blockIndex` of a grid of
/// `blocks` (threadIdx.x = 0..).
inline void runBlock(unsigned threads, const std::function<void()> &body, unsigned blockIndex = 0,
                     unsigned blocks = 1) {
  Block b(threads);
  std::vector<std::thread> ts;
  for (unsigned t = 0; t < threads; ++t)
    ts.emplace_back([&b, &body, t, threads, blockIndex, blocks] {
      block = &b;
      tid = {t, 0, 0};
      bid = {blockIndex, 0, 0};
      gdim = {blocks, 1, 1};
      bdim = {threads, 1, 1};
      body();
    });
  for (std::thread &t : ts)
    t.join();
}

/// A one-dimensional grid, its blocks one after another (kernels whose blocks
/// never wait for one another: a ticket's last block may, as it is last).
inline void runGrid(unsigned blocks, unsigned threads, const std::function<void()> &body) {
  for (unsigned b = 0; b < blocks; ++b)
    runBlock(threads, body, b, blocks);
}

template <class T> uint64_t bitsOf(T v) {
  static_assert(sizeof(T) <= 8);
  uint64_t u = 0;
  std::memcpy(&u, &v, sizeof(T));
  return u;
}
template <class T> T fromBits(uint64_t u) {
  T v;
  std::memcpy(&v, &u, sizeof(T));
  return v;
}

/// The value of lane `src` of this warp (own value when src is outside it).
template <class T> T exchange(T v, int src) {
  const unsigned lane = tid.x % 32, w = tid.x / 32;
  block->slots[tid.x] = bitsOf(v);
  block->warps[w]->arrive_and_wait();
  const bool inside = src >= 0 && src < 32 && 32 * w + unsigned(src) < block->threads;
  T r = inside ? fromBits<T>(block->slots[32 * w + unsigned(src)]) : v;
  block->warps[w]->arrive_and_wait();
  (void)lane;
  return r;
}

/// Every lane's `v` of this warp (one exchange for all lanes: votes and
/// matches).
template <class T> std::vector<T> gather(T v) {
  const unsigned w = tid.x / 32, n = std::min(32u, block->threads - 32 * w);
  block->slots[tid.x] = bitsOf(v);
  block->warps[w]->arrive_and_wait();
  std::vector<T> all(n);
  for (unsigned l = 0; l < n; ++l)
    all[l] = fromBits<T>(block->slots[32 * w + l]);
  block->warps[w]->arrive_and_wait();
  return all;
}

} // namespace fg::emu

#define threadIdx (::fg::emu::tid)
#define blockIdx (::fg::emu::bid)
#define gridDim (::fg::emu::gdim)
#define blockDim (::fg::emu::bdim)

inline void __syncthreads() { fg::emu::block->all.arrive_and_wait(); }
template <class T> T __shfl_xor_sync(unsigned, T v, int o) {
  return fg::emu::exchange(v, int(threadIdx.x % 32) ^ o);
}
template <class T> T __shfl_up_sync(unsigned, T v, int o) {
  return fg::emu::exchange(v, int(threadIdx.x % 32) - o);
}
inline int __any_sync(unsigned, int pred) {
  int any = 0;
  for (int p : fg::emu::gather(pred))
    any |= p != 0;
  return any;
}
/// The lanes of this warp whose `v` equals this lane's.
inline unsigned __match_any_sync(unsigned, unsigned v) {
  const std::vector<unsigned> all = fg::emu::gather(v);
  unsigned m = 0;
  for (size_t l = 0; l < all.size(); ++l)
    m |= (all[l] == v ? 1u : 0u) << l;
  return m;
}
inline int __ffs(int x) { return x == 0 ? 0 : std::countr_zero(unsigned(x)) + 1; }
inline int __popc(unsigned x) { return std::popcount(x); }
template <class T> T atomicAdd(T *p, T v) { return std::atomic_ref<T>(*p).fetch_add(v); }
template <class T> T atomicOr(T *p, T v) { return std::atomic_ref<T>(*p).fetch_or(v); }
template <class T> T atomicExch(T *p, T v) { return std::atomic_ref<T>(*p).exchange(v); }
template <class T> T atomicMax(T *p, T v) {
  std::atomic_ref<T> a(*p);
  T old = a.load();
  while (old < v && !a.compare_exchange_weak(old, v)) {
  }
  return old;
}
inline void __threadfence() { std::atomic_thread_fence(std::memory_order_seq_cst); }
inline void __threadfence_system() { std::atomic_thread_fence(std::memory_order_seq_cst); }
inline unsigned __float_as_uint(float f) { return std::bit_cast<unsigned>(f); }
template <class A, class B> auto min(A a, B b) { return a < b ? a : b; }
template <class A, class B> auto max(A a, B b) { return a < b ? b : a; }
// expf, exp, fabs: the C library's (<math.h>), as CUDA's are by those names.
