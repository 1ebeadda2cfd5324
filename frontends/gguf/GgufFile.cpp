//===- GgufFile.cpp - a bounds-checked GGUF (v2, v3) reader ----------------===//
#include "frontends/gguf/GgufFile.h"

#include "ir/Checked.h"
#include "ir/Diag.h"
#include "ir/ReadFile.h"

#include "llvm/ADT/Twine.h"

#include <cstring>
#include <limits>

namespace fg {

namespace {

constexpr uint32_t kMagic = 0x46554747; // "GGUF" little-endian
constexpr int kMaxArrayDepth = 4;
constexpr uint32_t kMaxDims = 4;

std::string hex(uint64_t v) {
  static const char digits[] = "0123456789abcdef";
  std::string s;
  do {
    s.insert(s.begin(), digits[v & 15]);
    v >>= 4;
  } while (v);
  return "0x" + s;
}

/// Reads little-endian scalars and strings, never past `end`.
class Cursor {
public:
  Cursor(const GgufFile &f, const uint8_t *begin, const uint8_t *end)
      : f_(f), begin_(begin), p_(begin), end_(end) {}

  uint64_t offset() const { return static_cast<uint64_t>(p_ - begin_); }
  uint64_t remaining() const { return static_cast<uint64_t>(end_ - p_); }

  template <typename T> llvm::Error read(T &out, const llvm::Twine &what) {
    if (remaining() < sizeof(T))
      return truncated(what);
    std::memcpy(&out, p_, sizeof(T));
    p_ += sizeof(T);
    return llvm::Error::success();
  }

  llvm::Error readString(std::string &out, const llvm::Twine &what) {
    uint64_t len = 0;
    if (auto e = read(len, what))
      return e;
    if (len > remaining())
      return f_.error(what + " at offset " + llvm::Twine(offset() - 8) + " claims " +
                      llvm::Twine(len) + " bytes but only " + llvm::Twine(remaining()) +
                      " remain (truncated or corrupt file)");
    out.assign(reinterpret_cast<const char *>(p_), len);
    p_ += len;
    return llvm::Error::success();
  }

  llvm::Error truncated(const llvm::Twine &what) const {
    return f_.error("truncated file: " + what + " at offset " + llvm::Twine(offset()) +
                    " runs past the end (" + llvm::Twine(offset() + remaining()) + " bytes)");
  }

private:
  const GgufFile &f_;
  const uint8_t *begin_, *p_, *end_;
};

/// Smallest encoded size of one value of `t` (for sanity checks on counts).
uint64_t minSize(GgufType t) {
  switch (t) {
  case GgufType::U8:
  case GgufType::I8:
  case GgufType::Bool:
    return 1;
  case GgufType::U16:
  case GgufType::I16:
    return 2;
  case GgufType::U32:
  case GgufType::I32:
  case GgufType::F32:
    return 4;
  case GgufType::U64:
  case GgufType::I64:
  case GgufType::F64:
  case GgufType::String:
    return 8;
  case GgufType::Array:
    return 12;
  }
  return 1;
}

bool validType(uint32_t t) { return t <= static_cast<uint32_t>(GgufType::F64); }

llvm::Error readValue(Cursor &c, const GgufFile &f, GgufType type, GgufValue &v,
                      const std::string &key, int depth) {
  v.type = type;
  std::string what = "value of '" + key + "'";
  auto readInt = [&](auto tag) -> llvm::Error {
    decltype(tag) x{};
    if (auto e = c.read(x, what))
      return e;
    v.i = static_cast<int64_t>(x);
    v.u = static_cast<uint64_t>(x);
    return llvm::Error::success();
  };
  switch (type) {
  case GgufType::U8:
    return readInt(uint8_t{});
  case GgufType::I8:
    return readInt(int8_t{});
  case GgufType::U16:
    return readInt(uint16_t{});
  case GgufType::I16:
    return readInt(int16_t{});
  case GgufType::U32:
    return readInt(uint32_t{});
  case GgufType::I32:
    return readInt(int32_t{});
  case GgufType::U64:
    return readInt(uint64_t{});
  case GgufType::I64:
    return readInt(int64_t{});
  case GgufType::Bool: {
    uint8_t b = 0;
    if (auto e = c.read(b, what))
      return e;
    if (b > 1)
      return f.error("metadata key '" + key + "': bool value " + llvm::Twine(b) +
                     " is neither 0 nor 1");
    v.i = b;
    v.u = b;
    return llvm::Error::success();
  }
  case GgufType::F32: {
    float x = 0;
    if (auto e = c.read(x, what))
      return e;
    v.f = x;
    return llvm::Error::success();
  }
  case GgufType::F64:
    return c.read(v.f, what);
  case GgufType::String:
    return c.readString(v.s, what);
  case GgufType::Array: {
    if (depth >= kMaxArrayDepth)
      return f.error("metadata key '" + key + "': arrays nested deeper than " +
                     llvm::Twine(kMaxArrayDepth));
    uint32_t et = 0;
    uint64_t n = 0;
    if (auto e = c.read(et, what + " (array type)"))
      return e;
    if (!validType(et))
      return f.error("metadata key '" + key + "': unknown array element type " + llvm::Twine(et));
    if (auto e = c.read(n, what + " (array length)"))
      return e;
    v.elemType = static_cast<GgufType>(et);
    if (n > c.remaining() / minSize(v.elemType))
      return f.error("metadata key '" + key + "': array of " + llvm::Twine(n) + " " +
                     ggufTypeName(v.elemType) + " does not fit in the " +
                     llvm::Twine(c.remaining()) + " bytes left (truncated or corrupt file)");
    v.elems.resize(n);
    for (uint64_t j = 0; j < n; ++j)
      if (auto e = readValue(c, f, v.elemType, v.elems[j], key, depth + 1))
        return e;
    return llvm::Error::success();
  }
  }
  return f.error("metadata key '" + key + "': unknown value type " +
                 llvm::Twine(static_cast<uint32_t>(type)));
}

} // namespace

llvm::StringRef ggufTypeName(GgufType t) {
  switch (t) {
  case GgufType::U8:
    return "u8";
  case GgufType::I8:
    return "i8";
  case GgufType::U16:
    return "u16";
  case GgufType::I16:
    return "i16";
  case GgufType::U32:
    return "u32";
  case GgufType::I32:
    return "i32";
  case GgufType::F32:
    return "f32";
  case GgufType::Bool:
    return "bool";
  case GgufType::String:
    return "string";
  case GgufType::Array:
    return "array";
  case GgufType::U64:
    return "u64";
  case GgufType::I64:
    return "i64";
  case GgufType::F64:
    return "f64";
  }
  return "unknown";
}

bool GgufValue::isInteger() const {
  switch (type) {
  case GgufType::U8:
  case GgufType::I8:
  case GgufType::U16:
  case GgufType::I16:
  case GgufType::U32:
  case GgufType::I32:
  case GgufType::U64:
  case GgufType::I64:
    return true;
  default:
    return false;
  }
}

std::optional<int64_t> GgufValue::asInt() const {
  if (type == GgufType::U64 && u > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
    return std::nullopt;
  if (isInteger() || type == GgufType::Bool)
    return i;
  return std::nullopt;
}

std::optional<double> GgufValue::asFloat() const {
  if (isFloat())
    return f;
  if (isInteger())
    return type == GgufType::U64 ? static_cast<double>(u) : static_cast<double>(i);
  return std::nullopt;
}

std::optional<DType> dtypeFromGgml(uint32_t t) {
  switch (t) {
  case 0:
    return DType::F32;
  case 1:
    return DType::F16;
  case 2:
    return DType::Q4_0;
  case 3:
    return DType::Q4_1;
  case 6:
    return DType::Q5_0;
  case 7:
    return DType::Q5_1;
  case 8:
    return DType::Q8_0;
  case 10:
    return DType::Q2_K;
  case 11:
    return DType::Q3_K;
  case 12:
    return DType::Q4_K;
  case 13:
    return DType::Q5_K;
  case 14:
    return DType::Q6_K;
  case 20:
    return DType::IQ4_NL;
  case 23:
    return DType::IQ4_XS;
  case 30:
    return DType::BF16;
  default:
    return std::nullopt;
  }
}

std::string ggmlTypeName(uint32_t t) {
  static const char *names[] = {"f32",   "f16",   "q4_0",    "q4_1",   "q4_2",    "q4_3",  "q5_0",
                                "q5_1",  "q8_0",  "q8_1",    "q2_K",   "q3_K",    "q4_K",  "q5_K",
                                "q6_K",  "q8_K",  "iq2_xxs", "iq2_xs", "iq3_xxs", "iq1_s", "iq4_nl",
                                "iq3_s", "iq2_s", "iq4_xs",  "i8",     "i16",     "i32",   "i64",
                                "f64",   "iq1_m", "bf16"};
  if (t < sizeof(names) / sizeof(names[0]))
    return names[t];
  return "type " + std::to_string(t);
}

std::string supportedGgmlTypes() {
  std::string list;
  for (uint32_t t = 0; t < 64; ++t)
    if (dtypeFromGgml(t))
      list += (list.empty() ? "" : ", ") + ggmlTypeName(t);
  return list;
}

llvm::Error GgufFile::error(const llvm::Twine &msg) const { return makeError(path_, Loc{}, msg); }

llvm::Expected<std::unique_ptr<GgufFile>> GgufFile::open(llvm::StringRef path) {
  std::unique_ptr<GgufFile> f(new GgufFile());
  f->path_ = path.str();
  auto buf = readRegularFile(path);
  if (!buf)
    return f->error("cannot read: " + llvm::toString(buf.takeError()));
  f->buf_ = std::shared_ptr<const llvm::MemoryBuffer>(std::move(*buf));
  if (auto e = f->parse())
    return e;
  return f;
}

llvm::Error GgufFile::parse() {
  const auto *begin = reinterpret_cast<const uint8_t *>(buf_->getBufferStart());
  const uint64_t size = buf_->getBufferSize();
  Cursor c(*this, begin, begin + size);

  uint32_t magic = 0;
  if (size < 4)
    return error("not a GGUF file: " + llvm::Twine(size) + " bytes, too short for the magic");
  if (auto e = c.read(magic, "magic"))
    return e;
  if (magic != kMagic)
    return error("not a GGUF file: bad magic " + hex(magic) + " (expected \"GGUF\")");
  if (auto e = c.read(version_, "version"))
    return e;
  if (version_ != 2 && version_ != 3)
    return error("unsupported GGUF version " + llvm::Twine(version_) + " (supported: 2 and 3)");
  uint64_t nTensors = 0, nKv = 0;
  if (auto e = c.read(nTensors, "tensor count"))
    return e;
  if (auto e = c.read(nKv, "metadata count"))
    return e;
  // Every key-value takes at least 12 bytes and every tensor info 24.
  if (nKv > c.remaining() / 12)
    return error("metadata count " + llvm::Twine(nKv) + " cannot fit in a " + llvm::Twine(size) +
                 "-byte file (truncated or corrupt file)");
  if (nTensors > c.remaining() / 24)
    return error("tensor count " + llvm::Twine(nTensors) + " cannot fit in a " + llvm::Twine(size) +
                 "-byte file (truncated or corrupt file)");

  for (uint64_t k = 0; k < nKv; ++k) {
    std::string key;
    if (auto e = c.readString(key, "metadata key #" + llvm::Twine(k)))
      return e;
    uint32_t type = 0;
    if (auto e = c.read(type, "type of metadata key '" + key + "'"))
      return e;
    if (!validType(type))
      return error("metadata key '" + key + "': unknown value type " + llvm::Twine(type));
    GgufValue v;
    if (auto e = readValue(c, *this, static_cast<GgufType>(type), v, key, 0))
      return e;
    if (meta_.count(key))
      return error("metadata key '" + key + "' appears twice");
    meta_[key] = std::move(v);
  }

  if (const GgufValue *a = meta("general.alignment")) {
    std::optional<int64_t> al = a->asInt();
    if (!a->isInteger() || !al || *al <= 0 || (*al & (*al - 1)))
      return error("metadata key 'general.alignment' must be a positive power of two");
    alignment_ = static_cast<uint64_t>(*al);
  }

  struct Pending {
    uint64_t rel;
    uint32_t ggmlType;
  };
  std::vector<Pending> pending;
  for (uint64_t t = 0; t < nTensors; ++t) {
    GgufTensorInfo info;
    if (auto e = c.readString(info.name, "name of tensor #" + llvm::Twine(t)))
      return e;
    std::string what = "tensor '" + info.name + "'";
    uint32_t nDims = 0;
    if (auto e = c.read(nDims, what + " dim count"))
      return e;
    if (nDims < 1 || nDims > kMaxDims)
      return error(what + " has " + llvm::Twine(nDims) + " dims (expected 1 to 4)");
    uint64_t ne[kMaxDims] = {};
    for (uint32_t d = 0; d < nDims; ++d)
      if (auto e = c.read(ne[d], what + " dims"))
        return e;
    uint32_t ggmlType = 0;
    uint64_t rel = 0;
    if (auto e = c.read(ggmlType, what + " type"))
      return e;
    if (auto e = c.read(rel, what + " offset"))
      return e;
    std::optional<DType> dt = dtypeFromGgml(ggmlType);
    if (!dt)
      return error(what + " has unsupported dtype " + ggmlTypeName(ggmlType) + " (supported: " +
                   supportedGgmlTypes() + ")");
    info.dtype = *dt;
    for (uint32_t d = 0; d < nDims; ++d) {
      uint64_t n = ne[nDims - 1 - d];
      if (n == 0 || n > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
        return error(what + " has an invalid dim " + llvm::Twine(n));
      info.shape.push_back(static_cast<int64_t>(n));
    }
    const DTypeInfo &di = dtypeInfo(info.dtype);
    if (ne[0] % static_cast<uint64_t>(di.blockElems))
      return error(what + ": row length " + llvm::Twine(ne[0]) + " is not a multiple of the " +
                   std::string(di.name) + " block size " + llvm::Twine(di.blockElems));
    std::optional<int64_t> bytes = checkedBytes(info.dtype, info.shape);
    if (!bytes)
      return error(what + " " + std::string(di.name) + shapeStr(info.shape) +
                   ": its size overflows (corrupt dims)");
    info.bytes = static_cast<uint64_t>(*bytes);
    if (rel % alignment_)
      return error(what + ": data offset " + llvm::Twine(rel) + " is not a multiple of the " +
                   "alignment " + llvm::Twine(alignment_) + " (misaligned)");
    if (tensorIndex_.count(info.name))
      return error("tensor '" + info.name + "' appears twice");
    tensorIndex_[info.name] = tensors_.size();
    tensors_.push_back(std::move(info));
    pending.push_back({rel, ggmlType});
  }

  uint64_t headerEnd = c.offset();
  dataOffset_ = (headerEnd + alignment_ - 1) / alignment_ * alignment_;
  for (size_t t = 0; t < tensors_.size(); ++t) {
    GgufTensorInfo &info = tensors_[t];
    uint64_t rel = pending[t].rel;
    if (dataOffset_ > size || rel > size - dataOffset_ || info.bytes > size - dataOffset_ - rel)
      return error("tensor '" + info.name + "': data [" + llvm::Twine(dataOffset_ + rel) + ", +" +
                   llvm::Twine(info.bytes) + ") lies past the end of the " + llvm::Twine(size) +
                   "-byte file (truncated or out of bounds)");
    info.offset = dataOffset_ + rel;
  }
  return llvm::Error::success();
}

const GgufValue *GgufFile::meta(llvm::StringRef key) const {
  auto it = meta_.find(key);
  return it == meta_.end() ? nullptr : &it->second;
}

llvm::Expected<std::optional<int64_t>> GgufFile::optInt(llvm::StringRef key) const {
  const GgufValue *v = meta(key);
  if (!v)
    return std::optional<int64_t>();
  std::optional<int64_t> i = v->asInt();
  if (!i)
    return error("metadata key '" + key + "' is a " + ggufTypeName(v->type) +
                 ", expected an integer");
  return i;
}

llvm::Expected<std::optional<double>> GgufFile::optFloat(llvm::StringRef key) const {
  const GgufValue *v = meta(key);
  if (!v)
    return std::optional<double>();
  std::optional<double> d = v->asFloat();
  if (!d)
    return error("metadata key '" + key + "' is a " + ggufTypeName(v->type) +
                 ", expected a number");
  return d;
}

llvm::Expected<int64_t> GgufFile::getInt(llvm::StringRef key) const {
  auto v = optInt(key);
  if (!v)
    return v.takeError();
  if (!*v)
    return error("missing metadata key '" + key + "'");
  return **v;
}

llvm::Expected<double> GgufFile::getFloat(llvm::StringRef key) const {
  auto v = optFloat(key);
  if (!v)
    return v.takeError();
  if (!*v)
    return error("missing metadata key '" + key + "'");
  return **v;
}

llvm::Expected<std::string> GgufFile::getString(llvm::StringRef key) const {
  const GgufValue *v = meta(key);
  if (!v)
    return error("missing metadata key '" + key + "'");
  if (v->type != GgufType::String)
    return error("metadata key '" + key + "' is a " + ggufTypeName(v->type) +
                 ", expected a string");
  return v->s;
}

const GgufTensorInfo *GgufFile::tensor(llvm::StringRef name) const {
  auto it = tensorIndex_.find(name);
  return it == tensorIndex_.end() ? nullptr : &tensors_[it->second];
}

llvm::ArrayRef<uint8_t> GgufFile::data(const GgufTensorInfo &t) const {
  const auto *base = reinterpret_cast<const uint8_t *>(buf_->getBufferStart());
  return {base + t.offset, static_cast<size_t>(t.bytes)};
}

} // namespace fg
