// The test build keeps assert() live (CMake option FG_ASSERTS, on by default,
// strips -DNDEBUG from RelWithDebInfo): these tests prove it, and that a
// misspelt attribute or capture name stops the program with its message
// instead of reading past a table.
#include "ir/Graph.h"
#include "ir/OpTable.h"
#include "passes/fusion/Pattern.h"

#include <gtest/gtest.h>

using namespace fg;

/// The tests and CI run with asserts compiled in.
TEST(Asserts, LiveInTheTestBuild) {
#ifdef NDEBUG
  FAIL() << "NDEBUG is defined: the tests are meant to run with asserts (-DFG_ASSERTS=ON)";
#endif
}

#ifndef NDEBUG
/// An attribute name the op does not declare fails loudly (ir/OpTable.cpp attrIndex).
TEST(AssertsDeathTest, UnknownAttributeName) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_DEATH((void)opInfo(OpKind::RmsNorm).attrIndex("epsilon"),
               "op has no attribute of this name");
  EXPECT_EQ(opInfo(OpKind::RmsNorm).attrIndex("eps"), 0u);
}

/// A capture name the pattern did not bind fails loudly (passes/fusion/Pattern.h Match::get).
TEST(AssertsDeathTest, UnknownCaptureName) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  fusion::Match m;
  m.values["x"] = 3;
  EXPECT_EQ(m.get("x"), 3u);
  EXPECT_DEATH((void)m.get("y"), "no capture of this name");
}
#endif
