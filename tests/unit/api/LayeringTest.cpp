//===- LayeringTest.cpp - scripts/check-layering.sh as a ctest -------------===//
#include "llvm/ADT/SmallString.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/raw_ostream.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <string>

using namespace llvm;

namespace {

/// Runs the script on `root`; returns its exit status and fills `out`.
int checkLayering(StringRef root, std::string &out) {
  std::string cmd = "bash " FG_SOURCE_DIR "/scripts/check-layering.sh '" + root.str() + "' 2>&1";
  FILE *p = popen(cmd.c_str(), "r");
  if (!p)
    return -1;
  char buf[512];
  while (fgets(buf, sizeof(buf), p))
    out += buf;
  int status = pclose(p);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

void writeFile(StringRef root, StringRef rel, StringRef text) {
  SmallString<128> path(root);
  sys::path::append(path, rel);
  ASSERT_FALSE(sys::fs::create_directories(sys::path::parent_path(path)));
  std::error_code ec;
  raw_fd_ostream os(path, ec);
  ASSERT_FALSE(ec);
  os << text;
}

} // namespace

/// The repository's includes all point down the floors.
TEST(Layering, RepositoryIncludesPointDown) {
  std::string out;
  EXPECT_EQ(checkLayering(FG_SOURCE_DIR, out), 0) << out;
  EXPECT_NE(out.find("check-layering: ok"), std::string::npos) << out;
}

/// The script does fail: runtime including passes, ir including runtime and
/// codegen including tools are each reported with file and line; allowed
/// includes (codegen -> passes, system headers) are not.
TEST(Layering, ViolationsAreReported) {
  SmallString<128> root;
  ASSERT_FALSE(sys::fs::createUniqueDirectory("fg-layering", root));
  writeFile(root, "ir/A.h",
            "#include \"ir/B.h\"\n#include <vector>\n#include \"runtime/Plan.h\"\n");
  writeFile(root, "runtime/R.cpp", "#include \"ir/Graph.h\"\n#include \"passes/Passes.h\"\n");
  writeFile(root, "codegen/cuda/C.cpp",
            "#include \"passes/Passes.h\"\n#include \"llvm/Support/Error.h\"\n"
            "  #  include \"tools/Flags.h\"\n");
  std::string out;
  EXPECT_EQ(checkLayering(root, out), 1) << out;
  EXPECT_NE(out.find("ir/A.h:3: ir/ may not include \"runtime/Plan.h\""), std::string::npos) << out;
  EXPECT_NE(out.find("runtime/R.cpp:2: runtime/ may not include \"passes/Passes.h\""),
            std::string::npos)
      << out;
  EXPECT_NE(out.find("codegen/cuda/C.cpp:3: codegen/ may not include \"tools/Flags.h\""),
            std::string::npos)
      << out;
  EXPECT_NE(out.find("3 include(s) point up or sideways"), std::string::npos) << out;
  sys::fs::remove_directories(root);
}
