//===- Diag.h - errors with locations, and the log sink ---------*- C++ -*-===//
#pragma once

#include "ir/Graph.h"
#include "ir/Progress.h"

#include "llvm/ADT/StringRef.h"
#include "llvm/ADT/Twine.h"
#include "llvm/Support/Error.h"

#include <functional>

namespace fg {

/// An error with a message a user can act on.
inline llvm::Error makeError(const llvm::Twine &msg) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(), msg);
}

/// `file:line:col: error: msg` (location parts omitted when unknown).
inline llvm::Error makeError(llvm::StringRef file, Loc loc, const llvm::Twine &msg) {
  std::string where = file.empty() ? std::string("<input>") : file.str();
  if (loc.valid())
    where += ":" + std::to_string(loc.line) + ":" + std::to_string(loc.col);
  return makeError(where + ": error: " + msg);
}

enum class LogLevel { Info, Verbose, Progress };

/// Libraries never print: they hand messages to a sink the caller provides.
using LogSink = std::function<void(LogLevel, llvm::StringRef)>;


} // namespace fg
