// loadModel: option validation and the dispatch on the model path.
#include "frontends/Frontend.h"

#include "llvm/ADT/SmallString.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/raw_ostream.h"

#include <gtest/gtest.h>

using namespace fg;

namespace {

std::string loadError(llvm::StringRef path, const ModelOptions &opts = {}) {
  auto g = loadModel(path, opts);
  if (g)
    return "<no error>";
  return llvm::toString(g.takeError());
}

/// A fresh temporary directory, removed at the end of the test.
struct TempDir {
  llvm::SmallString<128> path;
  TempDir() {
    std::error_code ec = llvm::sys::fs::createUniqueDirectory("fg-frontend-test", path);
    EXPECT_FALSE(ec) << ec.message();
  }
  ~TempDir() { llvm::sys::fs::remove_directories(path); }
  std::string file(llvm::StringRef name, llvm::StringRef contents) const {
    llvm::SmallString<128> p(path);
    llvm::sys::path::append(p, name);
    std::error_code ec;
    llvm::raw_fd_ostream os(p, ec);
    EXPECT_FALSE(ec) << ec.message();
    os << contents;
    return std::string(p);
  }
};

} // namespace

/// ctx, prefill sizes and the kv dtype are validated with messages naming the option.
TEST(Frontend, OptionErrors) {
  ModelOptions o;
  o.ctx = 0;
  EXPECT_EQ(loadError("demo", o), "invalid option: ctx must be >= 1, got 0");
  o = ModelOptions();
  o.prefill = {0};
  EXPECT_EQ(loadError("demo", o), "invalid option: prefill size 0 must be in [1, ctx = 4096]");
  o.ctx = 32;
  o.prefill = {16, 64};
  EXPECT_EQ(loadError("demo", o), "invalid option: prefill size 64 must be in [1, ctx = 32]");
  o.prefill = {8, 8};
  EXPECT_EQ(loadError("demo", o), "invalid option: prefill size 8 is listed twice");
  o.prefill = {8};
  o.kvDType = DType::Q8_0;
  EXPECT_EQ(loadError("demo", o),
            "invalid option: kv cache dtype must be f16, bf16 or f32, got q8_0");
  // No prefill buckets: decode only.
  o.kvDType = DType::F16;
  o.prefill = {};
  auto g = loadModel("demo", o);
  ASSERT_TRUE(bool(g)) << llvm::toString(g.takeError());
  ASSERT_EQ(g->functions().size(), 1u);
  EXPECT_EQ(g->functions()[0].name(), "decode");
}

/// Missing files are named; broken GGUF files and HF folders name the file and
/// what is wrong (tests/unit/models covers every case); unknown formats and
/// folders without config.json say what is expected.
TEST(Frontend, PathErrors) {
  EXPECT_EQ(loadError("/no/such/model.fg"), "model '/no/such/model.fg' does not exist");
  EXPECT_EQ(loadError(""), "no model given: expected a .fg file, a .gguf file, a folder with "
                           "config.json, or 'demo'");
  TempDir dir;
  std::string gguf = dir.file("m.gguf", "GGUF");
  EXPECT_EQ(loadError(gguf), gguf + ": error: truncated file: version at offset 4 runs past the "
                                    "end (4 bytes)");
  std::string txt = dir.file("m.txt", "hello");
  EXPECT_EQ(loadError(txt), "'" + txt +
                                "': unknown model format (expected a .fg file, a .gguf "
                                "file, a folder with config.json, or 'demo')");
  std::string folder(dir.path);
  EXPECT_EQ(loadError(folder), "'" + folder +
                                   "' is a folder without config.json; expected a .fg "
                                   "file, a .gguf file, a folder with config.json, or 'demo'");
  dir.file("config.json", "{}");
  EXPECT_EQ(loadError(folder), folder + ": error: no model.safetensors or "
                                        "model.safetensors.index.json in the folder");
}

/// A .fg file goes through the parser: a syntax error comes back with file:line:col.
TEST(Frontend, FgFileErrorsCarryLocation) {
  TempDir dir;
  std::string bad = dir.file("bad.fg", "graph @decode() {\n  %x = nope(\n}\n");
  std::string err = loadError(bad);
  EXPECT_EQ(err.rfind(bad + ":", 0), 0u) << err;
  EXPECT_NE(err.find("error:"), std::string::npos) << err;
}
