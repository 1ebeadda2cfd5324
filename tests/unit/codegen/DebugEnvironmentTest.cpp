//===- DebugEnvironmentTest.cpp - FG_DEBUG_* switches over EmitOptions -----===//
//
// cuda::applyDebugEnvironment is what compile() and the kernel benchmark
// both apply before emitting (the benchmark ignored the switches until the
// thirty-first session, so a switched form timed as the default there). A
// switch that is set changes its option, one out of range or unset leaves
// the option as it was, and the function only writes what is set. CPU only.
//
//===----------------------------------------------------------------------===//
#include "codegen/cuda/Kernel.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <string>
#include <utility>
#include <vector>

using namespace fg;

namespace {

/// Sets variables for one scope and unsets them after.
struct Env {
  std::vector<std::string> names;
  explicit Env(std::vector<std::pair<const char *, const char *>> vars) {
    for (auto [n, v] : vars) {
      ::setenv(n, v, 1);
      names.emplace_back(n);
    }
  }
  ~Env() {
    for (const std::string &n : names)
      ::unsetenv(n.c_str());
  }
};

TEST(DebugEnvironment, SwitchesSetTheirOptions) {
  cuda::EmitOptions o;
  {
    Env env({{"FG_DEBUG_FLASH_KEYS", "32"},
             {"FG_DEBUG_MOE_SKIP_ROWS", "0"},
             {"FG_DEBUG_MOE_ROWS", "64"},
             {"FG_DEBUG_FLASH_STAGES", "1"}});
    cuda::applyDebugEnvironment(o);
  }
  EXPECT_EQ(o.attentionPrefillKeys, 32);
  EXPECT_FALSE(o.groupedExpertSkipRows);
  EXPECT_EQ(o.groupedExpertRows, 64);
  EXPECT_EQ(o.attentionPrefillStages, 1);
}

TEST(DebugEnvironment, UnsetOrOutOfRangeKeepsWhatWasThere) {
  cuda::EmitOptions o;
  o.attentionPrefillKeys = 32; // as a flag would have set it
  o.groupedExpertRows = 32;
  {
    Env env({{"FG_DEBUG_MOE_ROWS", "48"}, {"FG_DEBUG_FLASH_STAGES", "7"}});
    cuda::applyDebugEnvironment(o);
  }
  const cuda::EmitOptions d;
  EXPECT_EQ(o.attentionPrefillKeys, 32);
  EXPECT_EQ(o.groupedExpertRows, 32);
  EXPECT_EQ(o.attentionPrefillStages, d.attentionPrefillStages);
  EXPECT_EQ(o.groupedExpertSkipRows, d.groupedExpertSkipRows);
}

} // namespace
