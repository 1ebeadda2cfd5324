//===- InputCheck.cpp - input values outside their binding's range --------===//
#include "runtime/InputCheck.h"

#include "llvm/Support/raw_ostream.h"

namespace fg {

char InputRangeError::ID = 0;

void InputRangeError::log(llvm::raw_ostream &os) const {
  os << "input '" << input_ << "'[" << index_ << "] = " << value_ << " is outside [" << lo_ << ", "
     << hi_ << ")";
}

llvm::Error checkInputRange(llvm::StringRef input, const InputBinding &bind,
                            llvm::ArrayRef<int32_t> values) {
  if (!bind.hasRange())
    return llvm::Error::success();
  for (size_t i = 0; i < values.size(); ++i)
    if (values[i] < bind.lo || values[i] >= bind.hi)
      return llvm::make_error<InputRangeError>(input.str(), static_cast<int64_t>(i), values[i],
                                               bind.lo, bind.hi);
  return llvm::Error::success();
}

} // namespace fg
