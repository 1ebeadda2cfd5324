//===- Main.cpp - fusegraph_gpu_tests' entry point --------------------------===//
//
// gtest_main's, except that argv[0] becomes this executable's path: a
// threadsafe death test (GpuInputCheck.DeviceFaultIsSticky: the child must
// start CUDA afresh, so it re-executes the binary) execs argv[0], and a
// binary called by its bare name from $PATH would not be found.
//
//===----------------------------------------------------------------------===//
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <unistd.h>

int main(int argc, char **argv) {
  static std::string self;
  if (argc > 0 && !std::strchr(argv[0], '/')) {
    char buf[4096];
    const ssize_t n = readlink("/proc/self/exe", buf, sizeof buf - 1);
    if (n > 0) {
      self.assign(buf, static_cast<size_t>(n));
      argv[0] = self.data();
    }
  }
  testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
