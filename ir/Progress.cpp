//===- Progress.cpp - the text of a progress report -----------------------===//
#include "ir/Progress.h"

#include "llvm/Support/FormatVariadic.h"

namespace fg {

std::string progressText(const Progress &p) {
  std::string s = p.task.str() + " ";
  if (p.unit == "bytes") {
    constexpr double kMiB = 1024.0 * 1024.0;
    s += llvm::formatv("{0:f1}/{1:f1} MiB", p.done / kMiB, p.total / kMiB).str();
    if (p.seconds > 0)
      s += llvm::formatv(", {0:f1} MB/s", p.done / 1e6 / p.seconds).str();
    return s;
  }
  s += std::to_string(p.done) + "/" + std::to_string(p.total);
  if (p.unit != "kernels")
    s += " " + p.unit.str();
  if (p.unit == "kernels")
    s += " (" + std::to_string(p.cached) + " from the cache)";
  if (p.unit == "tokens" && p.seconds > 0)
    s += llvm::formatv(", {0:f1} tokens/s", p.done / p.seconds).str();
  else
    s += llvm::formatv(", {0:f1} s", p.seconds).str();
  return s;
}

} // namespace fg
