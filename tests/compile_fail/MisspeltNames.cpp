// Compiled (syntax only) by ctest once per FG_CASE (tests/CMakeLists.txt,
// CompileFail.*): case 0 spells every name right and must compile; each other
// case misspells one name, or leaves out a required field, and must fail with
// an error naming it. Attributes, captures and builder fields are typed, so a
// typo is a compile error, not a run-time lookup that asserts.
#include "ir/Builder.h"
#include "ir/OpViews.h"
#include "passes/fusion/Pattern.h"

using namespace fg;

double readEps(const Node &n) {
#if FG_CASE == 1
  return op::RmsNorm(n).epsilon(); // misspelt attribute accessor
#else
  return op::RmsNorm(n).eps();
#endif
}

ValueId readCapture(const fusion::Match &m) {
#if FG_CASE == 2
  return m.get(fusion::Cap::nrom); // misspelt capture
#else
  return m.get(fusion::Cap::norm);
#endif
}

ValueId build(Builder &b, ValueId x) {
#if FG_CASE == 3
  return b.create(op::RmsNormArgs{.x = x, .epsilon = 1e-6}); // misspelt builder field
#elif FG_CASE == 4
  return b.create(op::RmsNormArgs{.x = x}); // required attribute left out
#else
  return b.create(op::RmsNormArgs{.x = x, .eps = 1e-6});
#endif
}
