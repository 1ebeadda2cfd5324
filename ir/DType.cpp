#include "ir/DType.h"

#include <iterator>

namespace fg {

static const DTypeInfo kDTypes[] = {
#define FG_DTYPE(Kind, name, blockElems, blockBytes, flags)                    \
  {name, blockElems, blockBytes, flags},
#include "ir/DTypes.def"
};

const DTypeInfo &dtypeInfo(DType t) { return kDTypes[static_cast<int>(t)]; }

std::optional<DType> parseDType(std::string_view name) {
  for (int i = 0, e = static_cast<int>(std::size(kDTypes)); i != e; ++i)
    if (kDTypes[i].name == name)
      return static_cast<DType>(i);
  return std::nullopt;
}

} // namespace fg
