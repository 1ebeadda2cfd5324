//===- ReadFile.h - read only regular files, of a sane size ------*- C++ -*-===//
//
// Every reader of user files (.fg text, GGUF, safetensors, config.json, plans)
// opens them here: the file is opened (links followed), fstat'ed, and refused
// unless it is a regular file, so a link to /dev/zero or /dev/urandom, a FIFO
// or a folder is one clean error instead of a read that never ends. The size
// the stat reports is the size that is mapped or read, and a file larger
// than `maxBytes` is refused before anything is allocated.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"
#include "llvm/Support/MemoryBuffer.h"

#include <cstdint>
#include <limits>
#include <memory>

namespace fg {

struct ReadFileOptions {
  /// Refuse larger files ("is N bytes; at most M are read as <what>").
  uint64_t maxBytes = std::numeric_limits<uint64_t>::max();
  /// What the file is, for the size message ("a config", "a .fg file").
  llvm::StringRef what = "this file";
  bool requiresNullTerminator = false;
};

/// The contents of regular file `path` (mapped when large). The error is the
/// bare reason (the system's message, "not a regular file (a character
/// device)", "the file is N bytes; ..."); callers say which file and what for.
llvm::Expected<std::unique_ptr<llvm::MemoryBuffer>>
readRegularFile(llvm::StringRef path, const ReadFileOptions &opts = {});

/// The size of regular file `path`; the same errors as readRegularFile.
llvm::Expected<uint64_t> regularFileSize(llvm::StringRef path);

} // namespace fg
