//===- Progress.h - how far long work got, reported to the caller -*- C++ -*-===//
//
// Compiling kernels, loading weights and prefill take seconds to minutes on a
// real model. The library reports how far they got through a ProgressSink in
// its options (CompileOptions, ExecOptions) and never draws anything; the
// CLI draws a progress line on a terminal (tools/Progress.h).
//
//===----------------------------------------------------------------------===//
#pragma once

#include "llvm/ADT/StringRef.h"

#include <cstdint>
#include <functional>
#include <string>

namespace fg {

/// How far a long piece of work got, for a progress line the caller draws
/// (the CLI: tools/Progress.h). Reported after each piece and once at the end
/// (done == total); the library never draws.
struct Progress {
  llvm::StringRef task; ///< "compiling kernels", "loading weights", "prefill"
  uint64_t done = 0, total = 0;
  llvm::StringRef unit;  ///< "kernels", "bytes", "tokens"
  uint64_t cached = 0;   ///< of `done`, how many came from a cache (kernels)
  double seconds = 0;    ///< since the task started
};
using ProgressSink = std::function<void(const Progress &)>;

/// One line for `p`: "compiling kernels 12/32 (10 from the cache), 0.8 s",
/// "loading weights 120.0/512.0 MiB, 850.3 MB/s", "prefill 64/120 tokens,
/// 530.1 tokens/s".
std::string progressText(const Progress &p);

} // namespace fg
