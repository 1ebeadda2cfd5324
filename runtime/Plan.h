//===- Plan.h - a compiled model, serialisable -------------------*- C++ -*-===//
//
// A Plan is what `fg::compile` produces and what an Executor runs: the final
// Graph (after every pass), the options it was compiled with, what each pass
// did, and (in later issues) kernels and embedded weights. It is immutable
// once built and can be saved to / loaded from a `.plan` file.
//
// File format 1.0 (little-endian):
//
//   header   (32 bytes)  "FGPLAN\0\0", u16 major, u16 minor, u32 cudart version,
//                        u32 nvrtc version, u32 section count, u32 crc32, u32 reserved
//   table    (40 bytes per section)  char id[16] (NUL padded), u64 offset,
//                        u64 size, u64 checked (leading bytes under the checksum)
//   sections "ir": the printed Graph (re-parsed and verified on load)
//            "meta": compile options and pass records, `key value` lines
//            others (e.g. "program" from codegen) are carried as bytes
//
// The crc32 covers the header (with the crc field zeroed), the table and the
// first `checked` bytes of every section: a section ending in bulk weight
// bytes sets checked to where they start. A reader refuses a newer major
// version; it keeps sections it does not know as bytes, so a newer minor
// version stays readable.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "ir/Graph.h"

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

#include <cstdint>
#include <string>
#include <vector>

namespace fg {

/// What the plan was compiled with (recorded so `inspect` can show it and a
/// runtime can check what it was given).
struct PlanOptions {
  int64_t ctx = 4096;                     ///< KV cache rows (positions must be < ctx)
  std::vector<int64_t> prefill;           ///< prefill bucket sizes (entries prefill_N)
  std::string arch = "sm_90";             ///< target GPU architecture
  bool fusion = true;                     ///< fusion passes enabled
  std::vector<std::string> disableFusion; ///< fusion patterns turned off by name
  std::vector<std::string> enableFusion;  ///< off-by-default patterns turned on by name
  DType kvDType = DType::F16;             ///< KV cache element type
  std::string source;                     ///< the model path or name it came from

  bool operator==(const PlanOptions &o) const;
  bool operator!=(const PlanOptions &o) const { return !(*this == o); }
};

/// What one pass did during compilation. No wall time: a plan is a function
/// of its inputs, byte for byte (`compile --timing` prints pass times).
struct PlanPassRecord {
  std::string name;
  bool changed = false;
  bool operator==(const PlanPassRecord &o) const {
    return name == o.name && changed == o.changed;
  }
};

/// A section other than "ir" and "meta", kept as bytes.
struct PlanSection {
  std::string id; ///< at most 15 characters
  std::string bytes;
  uint64_t checked = 0; ///< leading bytes covered by the checksum (the rest is bulk)
};

class Plan {
public:
  static constexpr uint16_t kFormatMajor = 1;
  static constexpr uint16_t kFormatMinor = 0;
  static constexpr char kMagic[8] = {'F', 'G', 'P', 'L', 'A', 'N', '\0', '\0'};

  /// Builds a plan (codegen/cuda/Compile.cpp does this; tests may too).
  Plan(Graph graph, PlanOptions options, std::vector<PlanPassRecord> passes = {},
       uint32_t cudaRuntimeVersion = 0, uint32_t nvrtcVersion = 0,
       std::vector<PlanSection> sections = {});

  const Graph &graph() const { return graph_; }
  const PlanOptions &options() const { return options_; }
  llvm::ArrayRef<PlanPassRecord> passes() const { return passes_; }
  /// CUDART_VERSION / NVRTC version (major*1000 + minor*10) the plan was built
  /// with; 0 when unknown.
  uint32_t cudaRuntimeVersion() const { return cudaRuntimeVersion_; }
  uint32_t nvrtcVersion() const { return nvrtcVersion_; }
  /// Extra sections (codegen's "program", ...), in file order.
  llvm::ArrayRef<PlanSection> sections() const { return sections_; }
  /// The extra section `id`, or null.
  const PlanSection *section(llvm::StringRef id) const;
  /// Entry names in graph order (`decode`, `prefill_64`, ...).
  std::vector<std::string> entries() const;

  /// Writes the plan atomically (a temporary file in the same folder, then a rename).
  llvm::Error save(llvm::StringRef path) const;
  /// Serialises to bytes (what save writes).
  std::string serialize() const;

  /// Reads a plan; corrupt, truncated, foreign and newer-major files are
  /// errors that name the file.
  static llvm::Expected<Plan> load(llvm::StringRef path);
  /// Reads a plan from bytes; `name` is used in error messages.
  static llvm::Expected<Plan> deserialize(llvm::StringRef bytes, llvm::StringRef name);

private:
  Graph graph_;
  PlanOptions options_;
  std::vector<PlanPassRecord> passes_;
  uint32_t cudaRuntimeVersion_ = 0;
  uint32_t nvrtcVersion_ = 0;
  std::vector<PlanSection> sections_;
};

/// "13.0" for 13000; "unknown" for 0.
std::string cudaVersionStr(uint32_t v);

} // namespace fg
