#include "runtime/Compare.h"

#include <cmath>

namespace fg {

double normalizedError(llvm::ArrayRef<float> out, llvm::ArrayRef<float> ref) {
  if (out.size() != ref.size())
    return INFINITY;
  double num = 0, den = 0;
  for (size_t i = 0; i < out.size(); ++i) {
    if (std::isnan(out[i]) || std::isnan(ref[i]))
      return INFINITY;
    double d = static_cast<double>(out[i]) - ref[i];
    num += d * d;
    den += static_cast<double>(ref[i]) * ref[i];
  }
  return den == 0 ? std::sqrt(num) : std::sqrt(num / den);
}

} // namespace fg
