//===- FuzzUtil.h - helpers shared by the fuzz targets -----------*- C++ -*-===//
//
// Each fuzz target is one file defining LLVMFuzzerTestOneInput. It is linked
// twice: with libFuzzer (fg_fuzz_<name>, clang with -DFG_FUZZ=ON) and with
// Replay.cpp (fg_replay_<name>, any compiler), which replays corpus files in
// ctest. A target must not leak state from one input to the next and must
// treat every llvm::Error as an expected outcome: only crashes, sanitizer
// reports, hangs and broken invariants (trap) are findings.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "frontends/Frontend.h"

#include "llvm/ADT/SmallString.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/Process.h"

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

namespace fg::fuzz {

/// A per-process scratch folder under the temp directory (created once,
/// removed at exit); files written there are overwritten by the next input.
inline const std::string &scratchDir() {
  static const std::string dir = [] {
    llvm::SmallString<256> p;
    llvm::sys::path::system_temp_directory(/*ErasedOnReboot=*/true, p);
    llvm::sys::path::append(p, "fg-fuzz-" + std::to_string(llvm::sys::Process::getProcessId()));
    llvm::sys::fs::create_directories(p);
    std::string d = p.str().str();
    static std::string atExitDir = d;
    std::atexit([] { llvm::sys::fs::remove_directories(atExitDir); });
    return d;
  }();
  return dir;
}

/// Writes `bytes` to scratchDir()/name (replacing it) and returns the path.
inline std::string writeScratch(llvm::StringRef name, llvm::StringRef bytes) {
  std::string path = scratchDir() + "/" + name.str();
  std::FILE *f = std::fopen(path.c_str(), "wb");
  if (!f)
    std::abort(); // the harness cannot run at all: not a finding about the input
  if (!bytes.empty() && std::fwrite(bytes.data(), 1, bytes.size(), f) != bytes.size())
    std::abort();
  std::fclose(f);
  return path;
}

/// Consumes an error (hostile input is expected to fail cleanly).
template <typename T> void drop(llvm::Expected<T> &e) {
  if (!e)
    llvm::consumeError(e.takeError());
}
inline void drop(llvm::Error e) { llvm::consumeError(std::move(e)); }

/// Loads a model file or folder the way `fusegraph compile` does (ctx 256, one
/// prefill bucket of 8), then reads every weight's bytes, so a bounds check that
/// lets a tensor past the end of its file shows up. Errors are expected.
inline void loadModelAndReadWeights(const std::string &path) {
  ModelOptions opts;
  opts.ctx = 256;
  opts.prefill = {8};
  llvm::Expected<LoadedModel> m = loadModelWithWeights(path, opts);
  if (!m) {
    llvm::consumeError(m.takeError());
    return;
  }
  volatile uint8_t sum = 0;
  for (const WeightEntry &w : m->weights.entries())
    for (uint8_t b : w.bytes())
      sum = sum + b;
  (void)sum;
}

/// A broken invariant the harness checks (e.g. print(parse(s)) != s): a
/// finding, reported on stderr, then a trap so libFuzzer saves the input.
[[noreturn]] inline void fail(const char *what, llvm::StringRef detail = {}) {
  std::fprintf(stderr, "fuzz invariant broken: %s\n%.*s\n", what,
               static_cast<int>(std::min<size_t>(detail.size(), 4000)), detail.data());
  __builtin_trap();
}

} // namespace fg::fuzz
