//===- Progress.h - the CLI's progress line on stderr ------------*- C++ -*-===//
//
// Draws the library's progress reports (ir/Progress.h) as one line on stderr
// that rewrites itself ("\r") when stderr is a terminal. A finished task leaves
// its last line; redirected to a file or a pipe, only that line is written, and
// only for a task that took a second or more.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "ir/Progress.h"

namespace fg::cli {

/// The sink that draws on stderr (finished slow tasks only when it is not a
/// terminal).
ProgressSink stderrProgress();
/// Clears a half-drawn progress line before other output goes to stderr.
void clearProgressLine();

} // namespace fg::cli
