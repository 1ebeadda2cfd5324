//===- Parser.h - read .fg text ----------------------------------*- C++ -*-===//
#pragma once

#include "ir/Graph.h"

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

namespace fg {

/// Parses `.fg` text and verifies it. Errors are one line:
/// `file:line:col: error: expected ..., got ...`.
llvm::Expected<Graph> parseGraph(llvm::StringRef text, llvm::StringRef filename = "<input>");
/// Reads and parses a file (the error names the file when it cannot be read).
llvm::Expected<Graph> parseGraphFile(llvm::StringRef path);

} // namespace fg
