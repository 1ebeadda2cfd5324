//===- Safetensors.h - safetensors files and Hugging Face folders -*- C++ -*-===//
//
//   u64 header_size | header JSON {"name": {"dtype", "shape", "data_offsets"}, "__metadata__"}
//   | tensor data (offsets relative to its start)
//
// A Hugging Face folder holds config.json and either model.safetensors or
// shards listed by model.safetensors.index.json ("weight_map"). Files are
// memory-mapped; every header entry is checked against the mapped size.
// JSON is parsed by nlohmann-json with exceptions off.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "ir/DType.h"
#include "ir/Type.h"

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"
#include "llvm/Support/MemoryBuffer.h"

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace fg {

struct SafetensorsTensor {
  std::string name;
  std::string file; ///< the shard holding it
  DType dtype = DType::F32;
  Shape shape;         ///< outermost first, as in the header
  uint64_t offset = 0; ///< absolute, in `file`
  uint64_t bytes = 0;
  std::shared_ptr<const llvm::MemoryBuffer> mapping;

  llvm::ArrayRef<uint8_t> data() const {
    return {reinterpret_cast<const uint8_t *>(mapping->getBufferStart()) + offset,
            static_cast<size_t>(bytes)};
  }
};

/// One .safetensors file.
class SafetensorsFile {
public:
  static llvm::Expected<SafetensorsFile> open(llvm::StringRef path);
  llvm::StringRef path() const { return path_; }
  llvm::ArrayRef<SafetensorsTensor> tensors() const { return tensors_; }
  const SafetensorsTensor *tensor(llvm::StringRef name) const;

private:
  std::string path_;
  std::vector<SafetensorsTensor> tensors_;
  llvm::StringMap<size_t> index_;
};

/// config.json, read through dotted key paths ("rope_scaling.factor").
class HfConfig {
public:
  static llvm::Expected<HfConfig> open(llvm::StringRef path);
  static llvm::Expected<HfConfig> parse(llvm::StringRef text, llvm::StringRef path);
  HfConfig();
  ~HfConfig();
  HfConfig(HfConfig &&) noexcept;
  HfConfig &operator=(HfConfig &&) noexcept;

  llvm::StringRef path() const { return path_; }
  /// Present and not null.
  bool has(llvm::StringRef key) const;
  llvm::Expected<int64_t> getInt(llvm::StringRef key) const;
  llvm::Expected<double> getFloat(llvm::StringRef key) const;
  llvm::Expected<std::string> getString(llvm::StringRef key) const;
  llvm::Expected<bool> getBool(llvm::StringRef key) const;
  /// Absent or null: nullopt; present with the wrong type: an error.
  llvm::Expected<std::optional<int64_t>> optInt(llvm::StringRef key) const;
  llvm::Expected<std::optional<double>> optFloat(llvm::StringRef key) const;
  llvm::Expected<std::optional<std::string>> optString(llvm::StringRef key) const;
  llvm::Expected<std::optional<bool>> optBool(llvm::StringRef key) const;
  /// A list of strings (e.g. "layer_types"), or an integer list as strings.
  llvm::Expected<std::optional<std::vector<std::string>>> optStrings(llvm::StringRef key) const;
  /// A list of integers ("mlp_only_layers").
  llvm::Expected<std::optional<std::vector<int64_t>>> optInts(llvm::StringRef key) const;
  /// A view of the object at `key` (e.g. "text_config"), or null when absent.
  std::optional<HfConfig> sub(llvm::StringRef key) const;

  llvm::Error error(const llvm::Twine &msg) const;

private:
  struct Impl;
  std::string path_;
  std::unique_ptr<Impl> impl_;
};

/// A Hugging Face model folder: config.json plus its safetensors shards.
class HfCheckpoint {
public:
  static llvm::Expected<HfCheckpoint> open(llvm::StringRef folder);
  llvm::StringRef folder() const { return folder_; }
  const HfConfig &config() const { return config_; }
  const SafetensorsTensor *tensor(llvm::StringRef name) const;
  /// Every tensor name, in a stable (sorted) order.
  std::vector<std::string> tensorNames() const;
  size_t tensorCount() const { return index_.size(); }

private:
  std::string folder_;
  HfConfig config_;
  std::vector<SafetensorsFile> files_;
  llvm::StringMap<std::pair<size_t, size_t>> index_; ///< name → (file, tensor)
};

/// "F32", "F16", "BF16" → our dtype.
std::optional<DType> dtypeFromSafetensors(llvm::StringRef name);

} // namespace fg
