//===- Progress.cpp - the CLI's progress line on stderr --------------------===//
#include "tools/Progress.h"

#include "llvm/Support/Process.h"
#include "llvm/Support/raw_ostream.h"

#include <chrono>
#include <mutex>

using namespace llvm;

namespace fg::cli {

namespace {

struct Line {
  std::mutex mutex;
  bool drawn = false; ///< a line without its newline is on the terminal
  std::chrono::steady_clock::time_point last{};
};

Line &line() {
  static Line l;
  return l;
}

} // namespace

void clearProgressLine() {
  Line &l = line();
  std::lock_guard<std::mutex> lock(l.mutex);
  if (!l.drawn)
    return;
  errs() << "\r\033[K";
  l.drawn = false;
}

ProgressSink stderrProgress() {
  // Redirected (a log, a pipe): only a task that ran a second or more leaves
  // its last line, so a log still says where a long run spent its time
  // ("loading weights 4144.5/4144.5 MiB, 95.3 MB/s") and quick commands
  // stay silent.
  if (!sys::Process::StandardErrIsDisplayed())
    return [](const Progress &p) {
      if (p.total == 0 || p.done < p.total || p.seconds < 1.0)
        return;
      errs() << "fusegraph: " << progressText(p) << "\n";
    };
  return [](const Progress &p) {
    if (p.total == 0)
      return;
    Line &l = line();
    std::lock_guard<std::mutex> lock(l.mutex);
    bool finished = p.done >= p.total;
    auto now = std::chrono::steady_clock::now();
    // At most ten redraws a second; the last one always.
    if (!finished && l.drawn && now - l.last < std::chrono::milliseconds(100))
      return;
    l.last = now;
    errs() << "\r\033[Kfusegraph: " << progressText(p);
    if (finished)
      errs() << "\n";
    l.drawn = !finished;
    errs().flush();
  };
}

} // namespace fg::cli
