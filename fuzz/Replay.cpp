//===- Replay.cpp - replay fuzz inputs without libFuzzer ------------------===//
//
//   fg_replay_<target> [--pending FILE] [--timeout S] [--rss-mb N] PATH...
//
// Runs the target's LLVMFuzzerTestOneInput on every file under each PATH
// (folders recursively), each in a forked child so one crash does not hide
// the others. A child that exits non-zero, dies from a signal, runs longer
// than --timeout seconds (default 60) or grows past --rss-mb resident
// megabytes (default 2048) fails its input. This is how ctest replays the
// seed corpus and fuzz/corpus/<target>/ (crash-* regression inputs) in every
// build, with or without sanitizers.
//
// --pending names inputs known to fail until a fix on another branch lands,
// one per line: `<target>/<file name>  reason` (`#` starts a comment). Their
// failure is expected (XFAIL); one that passes is reported (XPASS: delete its
// line once it passes in every build) without failing the run, because some
// fail only under a sanitizer (signed overflow is silent without UBSan). They
// get at most 5 s (several hang until their fix).
//
//===----------------------------------------------------------------------===//
#include "llvm/ADT/SmallString.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"

#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>
#include <vector>

#ifndef FG_FUZZ_TARGET
#error "FG_FUZZ_TARGET (the target's corpus name) must be defined"
#endif

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

namespace {

void collect(llvm::StringRef path, std::vector<std::string> &out) {
  if (!llvm::sys::fs::is_directory(path)) {
    out.push_back(path.str());
    return;
  }
  std::error_code ec;
  for (llvm::sys::fs::recursive_directory_iterator it(path, ec), end; it != end && !ec;
       it.increment(ec)) {
    if (llvm::sys::fs::is_regular_file(it->path()))
      out.push_back(it->path());
  }
}

/// `<target>/<file name>` -> reason, for this target's lines of the pending list.
llvm::StringMap<std::string> readPending(llvm::StringRef file) {
  llvm::StringMap<std::string> pending;
  auto buf = llvm::MemoryBuffer::getFile(file);
  if (!buf) {
    std::fprintf(stderr, "replay: cannot read %s\n", file.str().c_str());
    std::exit(2);
  }
  llvm::SmallVector<llvm::StringRef, 32> lines;
  (*buf)->getBuffer().split(lines, '\n');
  for (llvm::StringRef line : lines) {
    line = line.split('#').first.trim();
    if (line.empty())
      continue;
    auto [name, reason] = line.split(' ');
    auto [target, base] = name.split('/');
    if (target == FG_FUZZ_TARGET)
      pending[base] = reason.trim().str();
  }
  return pending;
}

long residentMb(pid_t pid) {
  std::string path = "/proc/" + std::to_string(pid) + "/statm";
  std::FILE *f = std::fopen(path.c_str(), "r");
  if (!f)
    return 0;
  long size = 0, rss = 0;
  if (std::fscanf(f, "%ld %ld", &size, &rss) != 2)
    rss = 0;
  std::fclose(f);
  return rss * (sysconf(_SC_PAGESIZE) / 1024) / 1024;
}

/// Runs one input in a child; "" when it passed, else what went wrong.
std::string runOne(const std::string &file, int timeoutS, long rssMb) {
  auto buf = llvm::MemoryBuffer::getFile(file, /*IsText=*/false, /*RequiresNullTerminator=*/false);
  if (!buf)
    return "cannot read: " + buf.getError().message();
  std::fflush(stdout);
  std::fflush(stderr);
  pid_t pid = fork();
  if (pid < 0)
    return std::string("fork failed: ") + std::strerror(errno);
  if (pid == 0) {
    // A copy, so ASan sees the input's exact extent (as libFuzzer gives it).
    llvm::StringRef b = (*buf)->getBuffer();
    std::vector<uint8_t> data(b.begin(), b.end());
    auto *p = new uint8_t[data.size() + 1];
    std::copy(data.begin(), data.end(), p);
    LLVMFuzzerTestOneInput(p, data.size());
    delete[] p;
    std::exit(0); // not _exit: LeakSanitizer checks at exit, as libFuzzer does per input
  }
  auto start = std::chrono::steady_clock::now();
  int status = 0;
  std::string killed;
  for (;;) {
    pid_t r = waitpid(pid, &status, WNOHANG);
    if (r == pid)
      break;
    if (r < 0)
      return std::string("waitpid failed: ") + std::strerror(errno);
    double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    long mb = residentMb(pid);
    if (killed.empty() && s > timeoutS)
      killed = "timeout (more than " + std::to_string(timeoutS) + " s)";
    if (killed.empty() && mb > rssMb)
      killed = "out of memory (" + std::to_string(mb) + " MB resident, limit " +
               std::to_string(rssMb) + " MB)";
    if (!killed.empty())
      kill(pid, SIGKILL);
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  if (!killed.empty())
    return killed;
  if (WIFEXITED(status))
    return WEXITSTATUS(status) == 0 ? "" : "exit status " + std::to_string(WEXITSTATUS(status));
  if (WIFSIGNALED(status))
    return std::string("killed by signal ") + std::to_string(WTERMSIG(status)) + " (" +
           strsignal(WTERMSIG(status)) + ")";
  return "unknown wait status";
}

} // namespace

int main(int argc, char **argv) {
  std::vector<std::string> files;
  llvm::StringMap<std::string> pending;
  int timeoutS = 60;
  long rssMb = 2048;
  for (int i = 1; i < argc; ++i) {
    llvm::StringRef a = argv[i];
    if ((a == "--pending" || a == "--timeout" || a == "--rss-mb") && i + 1 < argc) {
      llvm::StringRef v = argv[++i];
      if (a == "--pending")
        pending = readPending(v);
      else if (a == "--timeout")
        timeoutS = std::atoi(v.str().c_str());
      else
        rssMb = std::atol(v.str().c_str());
      continue;
    }
    if (a.startswith("-")) {
      std::fprintf(stderr, "usage: %s [--pending FILE] [--timeout S] [--rss-mb N] PATH...\n",
                   argv[0]);
      return 2;
    }
    if (!llvm::sys::fs::exists(a)) { // e.g. model seeds without Python's gguf package
      std::printf("replay: %s does not exist; skipped\n", argv[i]);
      continue;
    }
    collect(a, files);
  }
  std::sort(files.begin(), files.end());
  unsigned passed = 0, xfail = 0, xpass = 0, failed = 0;
  for (const std::string &f : files) {
    std::string base = llvm::sys::path::filename(f).str();
    auto it = pending.find(base);
    bool expectFail = it != pending.end();
    // A pending input is expected to fail, often by hanging: 5 s is enough to tell.
    std::string why = runOne(f, expectFail ? std::min(timeoutS, 5) : timeoutS, rssMb);
    if (why.empty() && !expectFail) {
      ++passed;
      continue;
    }
    if (expectFail) {
      if (why.empty()) {
        ++xpass;
        std::printf("XPASS %s: passes; once it passes in every build, delete '%s/%s' from "
                    "fuzz/pending.txt\n",
                    f.c_str(), FG_FUZZ_TARGET, base.c_str());
      } else {
        ++xfail;
        std::printf("XFAIL %s: %s (pending: %s)\n", f.c_str(), why.c_str(), it->second.c_str());
      }
      continue;
    }
    ++failed;
    std::printf("FAIL %s: %s\n", f.c_str(), why.c_str());
  }
  std::printf("replay %s: %zu inputs, %u passed, %u failed; pending: %u still fail, %u pass\n",
              FG_FUZZ_TARGET, files.size(), passed, failed, xfail, xpass);
  if (files.empty()) {
    std::printf("replay: no inputs\n");
    return 1;
  }
  return failed ? 1 : 0;
}
