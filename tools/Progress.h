//===- Progress.h - the CLI's progress line on stderr ------------*- C++ -*-===//
//
// Draws the library's progress reports (ir/Progress.h) as one line on stderr
// that rewrites itself ("\r"), only when stderr is a terminal: redirected to a
// file or a pipe, it stays silent. A finished task leaves its last line.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "ir/Progress.h"

namespace fg::cli {

/// The sink that draws on stderr (a no-op when stderr is not a terminal).
ProgressSink stderrProgress();
/// Clears a half-drawn progress line before other output goes to stderr.
void clearProgressLine();

} // namespace fg::cli
