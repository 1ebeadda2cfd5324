//===- LowerError.h - errors of lowering, located at a node --------*- C++ -*-===//
#pragma once

#include "ir/Diag.h"
#include "ir/Graph.h"
#include "passes/memory/LaunchDag.h"

#include "llvm/ADT/Twine.h"
#include "llvm/Support/Error.h"

namespace fg::cuda {

/// "@decode: rope %q (line 12): <msg>"
inline llvm::Error nodeError(const Function &fn, const Node &n, const llvm::Twine &msg) {
  std::string what = "@" + fn.name().str() + ": " + std::string(n.info().mnemonic);
  if (!n.results.empty())
    what += " %" + valueLabel(fn, n.result()).substr(1);
  if (n.loc.valid())
    what += " (line " + std::to_string(n.loc.line) + ")";
  return makeError(what + ": " + msg);
}

} // namespace fg::cuda
