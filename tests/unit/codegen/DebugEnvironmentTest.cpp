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
#include <optional>
#include <string>
#include <utility>
#include <vector>

using namespace fg;

namespace {

/// Sets (a null value: unsets) variables for one scope and restores what was
/// there after (unset, or the value the environment had).
struct Env {
  std::vector<std::pair<std::string, std::optional<std::string>>> saved;
  explicit Env(std::vector<std::pair<const char *, const char *>> vars) {
    for (auto [n, v] : vars) {
      const char *old = std::getenv(n);
      saved.emplace_back(n, old ? std::optional<std::string>(old) : std::nullopt);
      if (v)
        ::setenv(n, v, 1);
      else
        ::unsetenv(n);
    }
  }
  Env(const Env &) = delete;
  Env &operator=(const Env &) = delete;
  ~Env() {
    for (const auto &[n, v] : saved) {
      if (v)
        ::setenv(n.c_str(), v->c_str(), 1);
      else
        ::unsetenv(n.c_str());
    }
  }
};

/// The switches the tests below read, unset for the test (an exported one
/// would otherwise decide what "unset" means).
const std::vector<std::pair<const char *, const char *>> kCleared = {
    {"FG_DEBUG_FLASH_KEYS", nullptr},
    {"FG_DEBUG_MOE_SKIP_ROWS", nullptr},
    {"FG_DEBUG_MOE_ROWS", nullptr},
    {"FG_DEBUG_FLASH_STAGES", nullptr},
    {"FG_DEBUG_MOE_HALF_X", nullptr},
    {"FG_DEBUG_MOE_INT8", nullptr},
    {"FG_DEBUG_FLASH_WARPS", nullptr},
    {"FG_DEBUG_FLASH_SPLIT_WAIT", nullptr}};

TEST(DebugEnvironment, SwitchesSetTheirOptions) {
  Env clean(kCleared);
  cuda::EmitOptions o;
  {
    Env env({{"FG_DEBUG_FLASH_KEYS", "32"},
             {"FG_DEBUG_MOE_SKIP_ROWS", "0"},
             {"FG_DEBUG_MOE_ROWS", "64"},
             {"FG_DEBUG_FLASH_STAGES", "1"},
             {"FG_DEBUG_MOE_HALF_X", "1"},
             {"FG_DEBUG_MOE_INT8", "0"},
             {"FG_DEBUG_FLASH_WARPS", "8"},
             {"FG_DEBUG_FLASH_SPLIT_WAIT", "1"}});
    cuda::applyDebugEnvironment(o);
  }
  EXPECT_EQ(o.attentionPrefillWarps, 8);
  EXPECT_TRUE(o.attentionPrefillSplitWait);
  EXPECT_EQ(o.attentionPrefillKeys, 32);
  EXPECT_FALSE(o.groupedExpertSkipRows);
  EXPECT_EQ(o.groupedExpertRows, 64);
  EXPECT_EQ(o.attentionPrefillStages, 1);
  EXPECT_TRUE(o.groupedExpertHalfX);
  EXPECT_EQ(o.groupedExpertInt8, 0);
}

TEST(DebugEnvironment, UnsetOrOutOfRangeKeepsWhatWasThere) {
  Env clean(kCleared);
  cuda::EmitOptions o;
  o.attentionPrefillKeys = 32; // as a flag would have set it
  o.groupedExpertRows = 32;
  {
    Env env({{"FG_DEBUG_MOE_ROWS", "48"},
             {"FG_DEBUG_FLASH_STAGES", "7"},
             {"FG_DEBUG_FLASH_WARPS", "6"}});
    cuda::applyDebugEnvironment(o);
  }
  const cuda::EmitOptions d;
  EXPECT_EQ(o.attentionPrefillKeys, 32);
  EXPECT_EQ(o.groupedExpertRows, 32);
  EXPECT_EQ(o.attentionPrefillStages, d.attentionPrefillStages);
  EXPECT_EQ(o.attentionPrefillWarps, d.attentionPrefillWarps);
  EXPECT_EQ(o.groupedExpertSkipRows, d.groupedExpertSkipRows);
}

} // namespace
