//===- Flags.h - the fusegraph command line's small flag parser --*- C++ -*-===//
//
// Each subcommand declares its flags; `--flag=v` and `--flag v` both work,
// booleans take no value, anything not starting with `-` is positional. An
// unknown flag is a usage error (exit 2); `--help` prints the subcommand's help.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"
#include "llvm/Support/raw_ostream.h"

#include <string>
#include <vector>

namespace fg::cli {

/// Exit codes: 0 ok, 1 an error from the library, 2 a usage error.
enum ExitCode { kOk = 0, kFailed = 1, kUsage = 2 };

class Flags {
public:
  /// `usage` is the one-line synopsis after "usage: fusegraph ".
  Flags(std::string command, std::string usage, std::string summary);

  /// A boolean flag (`--stats`).
  void flag(std::string name, std::string help);
  /// A flag with a value (`--steps N`); `def` is shown in the help.
  void option(std::string name, std::string metavar, std::string help, std::string def = "");

  /// Parses `args` (after the subcommand). On a usage error prints
  /// `fusegraph: error: ...` to stderr and returns false with code kUsage;
  /// after --help prints help to stdout and returns false with code kOk.
  bool parse(llvm::ArrayRef<const char *> args, int &exitCode);

  bool has(llvm::StringRef name) const { return values_.count(name) != 0; }
  /// The last value given, or `def`.
  std::string get(llvm::StringRef name, llvm::StringRef def = "") const;
  /// Every value given, comma-separated lists split.
  std::vector<std::string> list(llvm::StringRef name) const;
  /// Parses an integer flag; prints a usage error and returns false on bad text.
  bool getInt(llvm::StringRef name, int64_t def, int64_t &out, int &exitCode) const;
  /// Parses a comma-separated integer list.
  bool getInts(llvm::StringRef name, std::vector<int64_t> &out, int &exitCode) const;

  const std::vector<std::string> &positional() const { return positional_; }
  /// Reports a usage error for this subcommand (returns kUsage).
  int usageError(const llvm::Twine &msg) const;
  void printHelp(llvm::raw_ostream &os) const;

private:
  struct Spec {
    std::string name, metavar, help, def;
    bool takesValue;
  };
  const Spec *find(llvm::StringRef name) const;

  std::string command_, usage_, summary_;
  std::vector<Spec> specs_;
  llvm::StringMap<std::vector<std::string>> values_;
  std::vector<std::string> positional_;
};

/// " (did you mean PREFIX<candidate>?)" for the candidate nearest `word` by
/// edit distance when it is close enough to be a typo, else "".
std::string didYouMean(llvm::StringRef word, llvm::ArrayRef<std::string> candidates,
                       llvm::StringRef prefix = "");

/// Prints a library error as one line per message: messages that already
/// carry `file:line:col: error:` as they are, others as `fusegraph: error: msg`.
/// Returns kFailed.
int reportError(llvm::Error e);

} // namespace fg::cli
