//===- Safetensors.cpp - safetensors files and Hugging Face folders -------===//
#include "frontends/safetensors/Safetensors.h"

#include "ir/Checked.h"
#include "ir/Diag.h"
#include "ir/ReadFile.h"

#include "llvm/ADT/Twine.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstring>
#include <limits>
#include <map>

namespace fg {

using Json = nlohmann::json;

namespace {

llvm::Error fileError(llvm::StringRef path, const llvm::Twine &msg) {
  return makeError(path, Loc{}, msg);
}

llvm::Expected<std::shared_ptr<const llvm::MemoryBuffer>> mapFile(llvm::StringRef path) {
  auto buf = readRegularFile(path);
  if (!buf)
    return fileError(path, "cannot read: " + llvm::toString(buf.takeError()));
  return std::shared_ptr<const llvm::MemoryBuffer>(std::move(*buf));
}

/// config.json and the shard index are small; anything larger is not one.
constexpr uint64_t kMaxJsonBytes = uint64_t(64) << 20;
/// The safetensors format caps its JSON header at 100 MB.
constexpr uint64_t kMaxHeaderBytes = 100'000'000;

llvm::Expected<std::unique_ptr<llvm::MemoryBuffer>> readJsonFile(llvm::StringRef path) {
  ReadFileOptions o;
  o.maxBytes = kMaxJsonBytes;
  o.what = "JSON";
  auto buf = readRegularFile(path, o);
  if (!buf)
    return fileError(path, "cannot read: " + llvm::toString(buf.takeError()));
  return buf;
}

/// Parses `text` with exceptions off; an error naming `path` when malformed.
llvm::Expected<Json> parseJson(llvm::StringRef text, llvm::StringRef path) {
  Json j = Json::parse(text.begin(), text.end(), nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded())
    return fileError(path, "malformed JSON");
  return j;
}

} // namespace

std::optional<DType> dtypeFromSafetensors(llvm::StringRef name) {
  if (name == "F32")
    return DType::F32;
  if (name == "F16")
    return DType::F16;
  if (name == "BF16")
    return DType::BF16;
  return std::nullopt;
}

// --- one file -------------------------------------------------------------------

llvm::Expected<SafetensorsFile> SafetensorsFile::open(llvm::StringRef path) {
  auto mapped = mapFile(path);
  if (!mapped)
    return mapped.takeError();
  std::shared_ptr<const llvm::MemoryBuffer> buf = *mapped;
  const uint64_t size = buf->getBufferSize();
  if (size < 8)
    return fileError(path, "truncated file: " + llvm::Twine(size) +
                               " bytes, too short for the 8-byte header size");
  uint64_t headerSize = 0;
  std::memcpy(&headerSize, buf->getBufferStart(), 8);
  if (headerSize > size - 8)
    return fileError(path, "truncated file: the header claims " + llvm::Twine(headerSize) +
                               " bytes but only " + llvm::Twine(size - 8) + " follow");
  if (headerSize > kMaxHeaderBytes)
    return fileError(path, "the header claims " + llvm::Twine(headerSize) +
                               " bytes; safetensors headers are at most " +
                               llvm::Twine(kMaxHeaderBytes) + " (corrupt file?)");
  llvm::StringRef text(buf->getBufferStart() + 8, headerSize);
  auto header = parseJson(text, path);
  if (!header)
    return fileError(path, "the header is not valid JSON (not a safetensors file?)");
  if (!header->is_object())
    return fileError(path, "the header is not a JSON object");

  SafetensorsFile f;
  f.path_ = path.str();
  const uint64_t dataStart = 8 + headerSize, dataSize = size - dataStart;
  // Sorted by name, so the order does not depend on the JSON library.
  std::map<std::string, const Json *> entries;
  for (auto it = header->begin(); it != header->end(); ++it)
    if (it.key() != "__metadata__")
      entries[it.key()] = &it.value();
  for (auto &[name, entry] : entries) {
    const Json &e = *entry;
    std::string what = "tensor '" + name + "'";
    if (!e.is_object())
      return fileError(path, what + ": header entry is not an object");
    auto dt = e.find("dtype"), sh = e.find("shape"), off = e.find("data_offsets");
    if (dt == e.end() || !dt->is_string())
      return fileError(path, what + ": missing or non-string \"dtype\"");
    if (sh == e.end() || !sh->is_array())
      return fileError(path, what + ": missing or non-array \"shape\"");
    if (off == e.end() || !off->is_array() || off->size() != 2 || !(*off)[0].is_number_unsigned() ||
        !(*off)[1].is_number_unsigned())
      return fileError(path, what + ": \"data_offsets\" must be two non-negative integers");
    std::string dtName = dt->get<std::string>();
    std::optional<DType> dtype = dtypeFromSafetensors(dtName);
    if (!dtype)
      return fileError(path,
                       what + " has unsupported dtype " + dtName + " (supported: F32, F16, BF16)");
    SafetensorsTensor t;
    t.name = name;
    t.file = f.path_;
    t.dtype = *dtype;
    for (const Json &d : *sh) {
      if (!d.is_number_unsigned())
        return fileError(path, what + ": shape entries must be non-negative integers");
      uint64_t n = d.get<uint64_t>();
      if (n > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
        return fileError(path, what + ": shape overflows");
      t.shape.push_back(static_cast<int64_t>(n));
    }
    std::optional<int64_t> bytes = checkedBytes(t.dtype, t.shape);
    if (!bytes)
      return fileError(path, what + ": shape overflows");
    uint64_t b = (*off)[0].get<uint64_t>(), en = (*off)[1].get<uint64_t>();
    t.bytes = static_cast<uint64_t>(*bytes);
    if (b > en || en - b != t.bytes)
      return fileError(path, what + ": data_offsets [" + llvm::Twine(b) + ", " + llvm::Twine(en) +
                                 ") span " + llvm::Twine(en - b) + " bytes but " +
                                 std::string(dtypeName(t.dtype)) + shapeStr(t.shape) + " needs " +
                                 llvm::Twine(t.bytes));
    if (en > dataSize)
      return fileError(path, what + ": data [" + llvm::Twine(b) + ", " + llvm::Twine(en) +
                                 ") lies past the end of the " + llvm::Twine(dataSize) +
                                 "-byte data section (truncated or out of bounds)");
    t.offset = dataStart + b;
    t.mapping = buf;
    f.index_[name] = f.tensors_.size();
    f.tensors_.push_back(std::move(t));
  }
  return f;
}

const SafetensorsTensor *SafetensorsFile::tensor(llvm::StringRef name) const {
  auto it = index_.find(name);
  return it == index_.end() ? nullptr : &tensors_[it->second];
}

// --- config.json ------------------------------------------------------------------

struct HfConfig::Impl {
  std::shared_ptr<Json> root;
  const Json *node = nullptr;

  /// The value at a dotted path, or null when absent or JSON null.
  const Json *find(llvm::StringRef key) const {
    const Json *cur = node;
    while (!key.empty()) {
      auto [head, rest] = key.split('.');
      if (!cur->is_object())
        return nullptr;
      auto it = cur->find(head.str());
      if (it == cur->end())
        return nullptr;
      cur = &*it;
      key = rest;
    }
    return cur->is_null() ? nullptr : cur;
  }
};

HfConfig::HfConfig() : impl_(std::make_unique<Impl>()) {}
HfConfig::~HfConfig() = default;
HfConfig::HfConfig(HfConfig &&) noexcept = default;
HfConfig &HfConfig::operator=(HfConfig &&) noexcept = default;

llvm::Error HfConfig::error(const llvm::Twine &msg) const { return fileError(path_, msg); }

llvm::Expected<HfConfig> HfConfig::parse(llvm::StringRef text, llvm::StringRef path) {
  auto j = parseJson(text, path);
  if (!j)
    return j.takeError();
  if (!j->is_object())
    return fileError(path, "expected a JSON object");
  HfConfig c;
  c.path_ = path.str();
  c.impl_->root = std::make_shared<Json>(std::move(*j));
  c.impl_->node = c.impl_->root.get();
  return c;
}

llvm::Expected<HfConfig> HfConfig::open(llvm::StringRef path) {
  auto buf = readJsonFile(path);
  if (!buf)
    return buf.takeError();
  return parse((*buf)->getBuffer(), path);
}

std::optional<HfConfig> HfConfig::sub(llvm::StringRef key) const {
  const Json *j = impl_->find(key);
  if (!j || !j->is_object())
    return std::nullopt;
  HfConfig c;
  c.path_ = path_;
  c.impl_->root = impl_->root;
  c.impl_->node = j;
  return c;
}

bool HfConfig::has(llvm::StringRef key) const { return impl_->find(key) != nullptr; }

llvm::Expected<std::optional<int64_t>> HfConfig::optInt(llvm::StringRef key) const {
  const Json *j = impl_->find(key);
  if (!j)
    return std::optional<int64_t>();
  if (j->is_number_integer())
    return std::optional<int64_t>(j->get<int64_t>());
  if (j->is_number_float()) {
    double d = j->get<double>();
    if (d == static_cast<double>(static_cast<int64_t>(d)))
      return std::optional<int64_t>(static_cast<int64_t>(d));
  }
  return error("key '" + key + "' must be an integer");
}

llvm::Expected<std::optional<double>> HfConfig::optFloat(llvm::StringRef key) const {
  const Json *j = impl_->find(key);
  if (!j)
    return std::optional<double>();
  if (!j->is_number())
    return error("key '" + key + "' must be a number");
  return std::optional<double>(j->get<double>());
}

llvm::Expected<std::optional<std::string>> HfConfig::optString(llvm::StringRef key) const {
  const Json *j = impl_->find(key);
  if (!j)
    return std::optional<std::string>();
  if (!j->is_string())
    return error("key '" + key + "' must be a string");
  return std::optional<std::string>(j->get<std::string>());
}

llvm::Expected<std::optional<bool>> HfConfig::optBool(llvm::StringRef key) const {
  const Json *j = impl_->find(key);
  if (!j)
    return std::optional<bool>();
  if (!j->is_boolean())
    return error("key '" + key + "' must be true or false");
  return std::optional<bool>(j->get<bool>());
}

llvm::Expected<std::optional<std::vector<std::string>>>
HfConfig::optStrings(llvm::StringRef key) const {
  const Json *j = impl_->find(key);
  if (!j)
    return std::optional<std::vector<std::string>>();
  if (!j->is_array())
    return error("key '" + key + "' must be a list");
  std::vector<std::string> out;
  for (const Json &e : *j) {
    if (!e.is_string())
      return error("key '" + key + "' must be a list of strings");
    out.push_back(e.get<std::string>());
  }
  return std::optional<std::vector<std::string>>(std::move(out));
}

llvm::Expected<std::optional<std::vector<int64_t>>> HfConfig::optInts(llvm::StringRef key) const {
  const Json *j = impl_->find(key);
  if (!j)
    return std::optional<std::vector<int64_t>>();
  if (!j->is_array())
    return error("key '" + key + "' must be a list");
  std::vector<int64_t> out;
  for (const Json &e : *j) {
    if (!e.is_number_integer())
      return error("key '" + key + "' must be a list of integers");
    out.push_back(e.get<int64_t>());
  }
  return std::optional<std::vector<int64_t>>(std::move(out));
}

template <typename T>
static llvm::Expected<T> required(llvm::Expected<std::optional<T>> v, const HfConfig &c,
                                  llvm::StringRef key) {
  if (!v)
    return v.takeError();
  if (!*v)
    return c.error("missing key '" + key + "'");
  return std::move(**v);
}

llvm::Expected<int64_t> HfConfig::getInt(llvm::StringRef key) const {
  return required(optInt(key), *this, key);
}
llvm::Expected<double> HfConfig::getFloat(llvm::StringRef key) const {
  return required(optFloat(key), *this, key);
}
llvm::Expected<std::string> HfConfig::getString(llvm::StringRef key) const {
  return required(optString(key), *this, key);
}
llvm::Expected<bool> HfConfig::getBool(llvm::StringRef key) const {
  return required(optBool(key), *this, key);
}

// --- folders -------------------------------------------------------------------------

llvm::Expected<HfCheckpoint> HfCheckpoint::open(llvm::StringRef folder) {
  HfCheckpoint ck;
  ck.folder_ = folder.str();
  llvm::SmallString<256> configPath(folder), indexPath(folder), single(folder);
  llvm::sys::path::append(configPath, "config.json");
  llvm::sys::path::append(indexPath, "model.safetensors.index.json");
  llvm::sys::path::append(single, "model.safetensors");
  auto config = HfConfig::open(configPath);
  if (!config)
    return config.takeError();
  ck.config_ = std::move(*config);

  std::vector<std::string> shards;
  std::map<std::string, std::string> weightMap;
  if (llvm::sys::fs::exists(indexPath)) {
    auto buf = readJsonFile(indexPath);
    if (!buf)
      return buf.takeError();
    auto j = parseJson((*buf)->getBuffer(), indexPath);
    if (!j)
      return j.takeError();
    auto wm = j->find("weight_map");
    if (!j->is_object() || wm == j->end() || !wm->is_object())
      return fileError(indexPath, "missing object \"weight_map\"");
    for (auto it = wm->begin(); it != wm->end(); ++it) {
      if (!it.value().is_string())
        return fileError(indexPath, "weight_map entry '" + it.key() + "' is not a file name");
      std::string shard = it.value().get<std::string>();
      if (shard.empty() || shard.find('/') != std::string::npos || shard == "..")
        return fileError(indexPath, "weight_map entry '" + it.key() + "' names file '" + shard +
                                        "' outside the folder");
      weightMap[it.key()] = shard;
      if (std::find(shards.begin(), shards.end(), shard) == shards.end())
        shards.push_back(shard);
    }
    std::sort(shards.begin(), shards.end());
  } else if (llvm::sys::fs::exists(single)) {
    shards.push_back("model.safetensors");
  } else {
    return fileError(folder, "no model.safetensors or model.safetensors.index.json in the folder");
  }

  for (const std::string &shard : shards) {
    llvm::SmallString<256> p(folder);
    llvm::sys::path::append(p, shard);
    auto f = SafetensorsFile::open(p);
    if (!f)
      return f.takeError();
    size_t fi = ck.files_.size();
    for (size_t t = 0; t < f->tensors().size(); ++t) {
      const std::string &name = f->tensors()[t].name;
      if (ck.index_.count(name))
        return fileError(p, "tensor '" + name + "' is also in another shard");
      ck.index_[name] = {fi, t};
    }
    ck.files_.push_back(std::move(*f));
  }
  for (auto &[name, shard] : weightMap) {
    const SafetensorsTensor *t = ck.tensor(name);
    if (!t)
      return fileError(indexPath,
                       "tensor '" + name + "' is listed in weight_map but not in '" + shard + "'");
    if (llvm::sys::path::filename(t->file) != shard)
      return fileError(indexPath, "tensor '" + name + "' is listed in '" + shard +
                                      "' but found in '" + t->file + "'");
  }
  return ck;
}

const SafetensorsTensor *HfCheckpoint::tensor(llvm::StringRef name) const {
  auto it = index_.find(name);
  if (it == index_.end())
    return nullptr;
  return &files_[it->second.first].tensors()[it->second.second];
}

std::vector<std::string> HfCheckpoint::tensorNames() const {
  std::vector<std::string> out;
  for (const auto &e : index_)
    out.push_back(e.getKey().str());
  std::sort(out.begin(), out.end());
  return out;
}

} // namespace fg
