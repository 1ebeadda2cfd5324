//===- NvrtcTest.cpp - NVRTC compilation and the kernel cache -------------===//
#include "codegen/cuda/KernelSources.h"
#include "codegen/cuda/Nvrtc.h"

#include "llvm/ADT/SmallString.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/raw_ostream.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

using namespace fg::cuda;

namespace {

const char *kSource = R"(extern "C" __global__ void fg_test_axpy(float* y, const float* x) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  y[i] = 2.0f * x[i] + y[i];
}
)";

/// A fresh cache directory under the build tree, so the first compile is a miss.
std::string freshCacheDir() {
  llvm::SmallString<256> cwd, dir;
  EXPECT_FALSE(llvm::sys::fs::current_path(cwd));
  llvm::sys::path::append(cwd, "fg-nvrtc-test-%%%%%%");
  EXPECT_FALSE(llvm::sys::fs::createUniqueDirectory(cwd, dir));
  return std::string(dir.str());
}

bool contains(const std::vector<char> &blob, llvm::StringRef s) {
  return llvm::StringRef(blob.data(), blob.size()).contains(s);
}

} // namespace

TEST(Nvrtc, CompilesToCubinAndPtx) {
  NvrtcOptions o;
  o.useCache = false;
  auto m = compileCuda(kSource, "axpy", "sm_90", o);
  ASSERT_TRUE(static_cast<bool>(m)) << llvm::toString(m.takeError());
  EXPECT_FALSE(m->cacheHit);
  EXPECT_FALSE(m->cubin.empty());
  EXPECT_EQ(llvm::StringRef(m->cubin.data(), 4), "\x7f" "ELF");
  EXPECT_TRUE(contains(m->cubin, "fg_test_axpy"));
  EXPECT_NE(m->ptx.find(".entry fg_test_axpy"), std::string::npos);
  EXPECT_NE(m->ptx.find("sm_90"), std::string::npos);
  EXPECT_GT(nvrtcVersionNumber(), 11000u);
}

TEST(Nvrtc, CompileErrorCarriesTheLog) {
  NvrtcOptions o;
  o.useCache = false;
  auto m = compileCuda("extern \"C\" __global__ void k() { undeclared_thing = 1; }", "broken",
                       "sm_90", o);
  ASSERT_FALSE(static_cast<bool>(m));
  std::string msg = llvm::toString(m.takeError());
  EXPECT_NE(msg.find("broken"), std::string::npos) << msg;
  EXPECT_NE(msg.find("undeclared_thing"), std::string::npos) << msg;
  EXPECT_NE(msg.find("sm_90"), std::string::npos) << msg;
}

/// A source that starts with kArchSpecificMarker compiles for the
/// arch-specific target (sm_90 -> sm_90a: wgmma compiles there and not for
/// sm_90); other sources, suffixed architectures and virtual ones are left
/// as they are.
TEST(Nvrtc, ArchSpecificSourcesCompileForTheSuffixedTarget) {
  const std::string wg = std::string(kArchSpecificMarker) +
                         R"(extern "C" __global__ void fg_test_fence() {
  asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
}
)";
  EXPECT_EQ(architectureFor(wg, "sm_90"), "sm_90a");
  EXPECT_EQ(architectureFor(wg, "sm_90a"), "sm_90a");
  EXPECT_EQ(architectureFor(wg, "compute_90"), "compute_90");
  EXPECT_EQ(architectureFor(kSource, "sm_90"), "sm_90");
  NvrtcOptions o;
  o.useCache = false;
  auto m = compileCuda(wg, "fence", "sm_90", o);
  ASSERT_TRUE(static_cast<bool>(m)) << llvm::toString(m.takeError());
  EXPECT_NE(m->ptx.find("sm_90a"), std::string::npos);
  EXPECT_NE(m->ptx.find("wgmma.fence"), std::string::npos);
  // Without the marker the same instruction is refused for sm_90.
  auto plain = compileCuda(llvm::StringRef(wg).drop_front(kArchSpecificMarker.size()), "fence",
                           "sm_90", o);
  EXPECT_FALSE(static_cast<bool>(plain));
  if (!plain)
    llvm::consumeError(plain.takeError());
}

TEST(Nvrtc, VirtualArchitectureIsRefused) {
  NvrtcOptions o;
  o.useCache = false;
  auto m = compileCuda(kSource, "axpy", "compute_90", o);
  ASSERT_FALSE(static_cast<bool>(m));
  EXPECT_NE(llvm::toString(m.takeError()).find("real architecture"), std::string::npos);
}

TEST(Nvrtc, CacheHitsMissesAndRebuildsCorruptEntries) {
  NvrtcOptions o;
  o.cacheDir = freshCacheDir();
  NvrtcCacheStats s0 = nvrtcCacheStats();

  auto first = compileCuda(kSource, "axpy", "sm_90", o);
  ASSERT_TRUE(static_cast<bool>(first)) << llvm::toString(first.takeError());
  EXPECT_FALSE(first->cacheHit);
  std::string path = cachePath(kSource, "sm_90", o);
  EXPECT_TRUE(llvm::StringRef(path).startswith(o.cacheDir));
  ASSERT_TRUE(llvm::sys::fs::exists(path));

  auto second = compileCuda(kSource, "axpy", "sm_90", o);
  ASSERT_TRUE(static_cast<bool>(second)) << llvm::toString(second.takeError());
  EXPECT_TRUE(second->cacheHit);
  EXPECT_EQ(second->cubin, first->cubin);
  EXPECT_EQ(second->ptx, first->ptx);

  // Different options, source or arch: a different key, a miss.
  NvrtcOptions o2 = o;
  o2.flags.push_back("-lineinfo");
  EXPECT_NE(cachePath(kSource, "sm_90", o2), path);
  auto third = compileCuda(kSource, "axpy", "sm_90", o2);
  ASSERT_TRUE(static_cast<bool>(third)) << llvm::toString(third.takeError());
  EXPECT_FALSE(third->cacheHit);
  EXPECT_NE(cachePath(std::string(kSource) + "\n", "sm_90", o), path);
  EXPECT_NE(cachePath(kSource, "sm_100", o), path);

  // Corrupt the entry (flip a payload byte): ignored, rebuilt, rewritten.
  {
    auto buf = llvm::MemoryBuffer::getFile(path, false, false);
    ASSERT_TRUE(static_cast<bool>(buf));
    std::string bytes = (*buf)->getBuffer().str();
    bytes[bytes.size() / 2] ^= 0x5a;
    std::error_code ec;
    llvm::raw_fd_ostream os(path, ec);
    ASSERT_FALSE(ec);
    os << bytes;
  }
  auto fourth = compileCuda(kSource, "axpy", "sm_90", o);
  ASSERT_TRUE(static_cast<bool>(fourth)) << llvm::toString(fourth.takeError());
  EXPECT_FALSE(fourth->cacheHit);
  EXPECT_EQ(fourth->cubin, first->cubin);
  // A truncated entry is a miss too.
  {
    std::error_code ec;
    llvm::raw_fd_ostream os(path, ec);
    ASSERT_FALSE(ec);
    os << "FGKCACH1";
  }
  auto fifth = compileCuda(kSource, "axpy", "sm_90", o);
  ASSERT_TRUE(static_cast<bool>(fifth));
  EXPECT_FALSE(fifth->cacheHit);
  // ... and the rebuilt entry hits again.
  auto sixth = compileCuda(kSource, "axpy", "sm_90", o);
  ASSERT_TRUE(static_cast<bool>(sixth));
  EXPECT_TRUE(sixth->cacheHit);

  NvrtcCacheStats s1 = nvrtcCacheStats();
  EXPECT_EQ(s1.hits - s0.hits, 2u);
  EXPECT_EQ(s1.misses - s0.misses, 4u);
  EXPECT_EQ(s1.rejected - s0.rejected, 2u);
  llvm::sys::fs::remove_directories(o.cacheDir);
}

TEST(Nvrtc, CacheDirComesFromOptionThenEnvironment) {
  NvrtcOptions o;
  o.cacheDir = "/some/dir";
  EXPECT_EQ(resolveCacheDir(o), "/some/dir");
  o.cacheDir.clear();
  ::setenv("FG_KERNEL_CACHE", "/env/dir", 1);
  EXPECT_EQ(resolveCacheDir(o), "/env/dir");
  ::unsetenv("FG_KERNEL_CACHE");
  EXPECT_NE(resolveCacheDir(o).find(".cache/fusegraph/kernels"), std::string::npos);
}

/// q4_K / q5_K sub-block scales decode by one byte permute and f16x2
/// arithmetic (gemv.cuh, fg_k4_scale_min): no f16 -> f32 conversion and no
/// integer conversion in the compiled form (the first form had two of each
/// per unit; the GPU tests check the values).
TEST(Nvrtc, K4ScaleDecodeIsBytePermuteAndHalfMath) {
  std::string src = kernelSource("common.cuh").str() + kernelSource("gemv.cuh").str() + R"(
extern "C" __global__ void fg_test_k4(unsigned* out, const unsigned* in) {
  unsigned sc2, mn2;
  fg::fg_k4_scale_min(in[0], in[1], in[2], in[3], (int)in[4], sc2, mn2);
  out[0] = sc2;
  out[1] = mn2;
}
)";
  NvrtcOptions o;
  o.useCache = false;
  auto k4 = compileCuda(src, "k4", "sm_90", o);
  ASSERT_TRUE(static_cast<bool>(k4)) << llvm::toString(k4.takeError());
  EXPECT_EQ(k4->ptx.find("cvt.f32.f16"), std::string::npos);
  EXPECT_EQ(k4->ptx.find("cvt.rn.f32.u32"), std::string::npos);
  EXPECT_NE(k4->ptx.find("prmt.b32"), std::string::npos);
}
