// The test build keeps assert() live (CMake option FG_ASSERTS, on by default,
// strips -DNDEBUG from RelWithDebInfo): these tests prove it, and that a
// typed view of the wrong op stops the program with its message instead of
// reading past an attribute list.
#include "ir/Graph.h"
#include "ir/OpTable.h"
#include "ir/OpViews.h"

#include <gtest/gtest.h>

using namespace fg;

/// The tests and CI run with asserts compiled in.
TEST(Asserts, LiveInTheTestBuild) {
#ifdef NDEBUG
  FAIL() << "NDEBUG is defined: the tests are meant to run with asserts (-DFG_ASSERTS=ON)";
#endif
}

#ifndef NDEBUG
/// A typed view of a node of another op fails loudly (ir/OpViews.h OpView):
/// a programming error, not a user's. (Misspelt attribute and capture names
/// do not compile at all: tests/unit/ir/OpViewsTest.cpp.)
TEST(AssertsDeathTest, ViewOfAnotherOp) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  Node n;
  n.kind = OpKind::Rope;
  n.attrs = defaultAttrs(OpKind::Rope);
  EXPECT_DEATH((void)op::RmsNorm(n), "a typed view of another op");
  EXPECT_EQ(op::Rope(n).theta(), 10000.0);
}
#endif
