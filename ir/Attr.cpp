#include "ir/Attr.h"

#include <charconv>
#include <cmath>
#include <cstring>

namespace fg {

bool Attribute::equals(const Attribute &o, AttrKind kind) const {
  switch (kind) {
  case AttrKind::Float:
    // Bitwise equality keeps -0.0 and NaN payloads distinct, like the printer.
    return std::memcmp(&f, &o.f, sizeof f) == 0;
  case AttrKind::Ints:
    return ints == o.ints;
  case AttrKind::Int:
  case AttrKind::Enum:
  case AttrKind::DType:
    return i == o.i;
  }
  return false;
}

std::string printFloat(double v) {
  if (std::isnan(v))
    return "nan";
  if (std::isinf(v))
    return v < 0 ? "-inf" : "inf";
  char buf[64];
  auto [end, ec] = std::to_chars(buf, buf + sizeof buf, v);
  (void)ec;
  std::string s(buf, end);
  // Keep floats recognisable as floats: "1" -> "1.0".
  if (s.find_first_of(".eEn") == std::string::npos)
    s += ".0";
  return s;
}

std::string printAttr(const Attribute &a, const AttrSpec &spec) {
  switch (spec.kind) {
  case AttrKind::Int:
    return std::to_string(a.i);
  case AttrKind::Float:
    return printFloat(a.f);
  case AttrKind::Ints: {
    std::string s = "[";
    for (size_t k = 0; k < a.ints.size(); ++k) {
      if (k)
        s += ", ";
      s += std::to_string(a.ints[k]);
    }
    return s + "]";
  }
  case AttrKind::Enum:
    return std::string(spec.words[static_cast<size_t>(a.i)]);
  case AttrKind::DType:
    return std::string(dtypeName(static_cast<DType>(a.i)));
  }
  return "";
}

} // namespace fg
