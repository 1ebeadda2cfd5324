//===- Plan.cpp - plan file writer and reader -----------------------------===//
#include "runtime/Plan.h"

#include "ir/Diag.h"
#include "ir/Parser.h"
#include "ir/Printer.h"
#include "ir/ReadFile.h"

#include "llvm/ADT/SmallString.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/CRC.h"
#include "llvm/Support/Endian.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/raw_ostream.h"

#include <algorithm>
#include <cstdio>
#include <cstring>

using namespace llvm;

namespace fg {

namespace {

constexpr size_t kHeaderSize = 32;
constexpr size_t kEntrySize = 40;
constexpr size_t kIdSize = 16;
constexpr size_t kCrcOffset = 24;

void put16(std::string &s, uint16_t v) {
  char b[2];
  support::endian::write16le(b, v);
  s.append(b, 2);
}
void put32(std::string &s, uint32_t v) {
  char b[4];
  support::endian::write32le(b, v);
  s.append(b, 4);
}
void put64(std::string &s, uint64_t v) {
  char b[8];
  support::endian::write64le(b, v);
  s.append(b, 8);
}
uint16_t get16(StringRef s, size_t at) { return support::endian::read16le(s.data() + at); }
uint32_t get32(StringRef s, size_t at) { return support::endian::read32le(s.data() + at); }
uint64_t get64(StringRef s, size_t at) { return support::endian::read64le(s.data() + at); }

template <typename T> std::string joinInts(ArrayRef<T> v) {
  std::string s;
  for (size_t i = 0; i < v.size(); ++i)
    s += (i ? "," : "") + std::to_string(v[i]);
  return s;
}

/// `key value` lines; values run to the end of the line.
std::string writeMeta(const PlanOptions &o, ArrayRef<PlanPassRecord> passes) {
  std::string s;
  raw_string_ostream os(s);
  os << "ctx " << o.ctx << "\n";
  os << "prefill " << joinInts<int64_t>(o.prefill) << "\n";
  os << "arch " << o.arch << "\n";
  os << "fusion " << (o.fusion ? 1 : 0) << "\n";
  os << "disable_fusion " << join(o.disableFusion, ",") << "\n";
  if (!o.enableFusion.empty())
    os << "enable_fusion " << join(o.enableFusion, ",") << "\n";
  os << "kv_dtype " << dtypeName(o.kvDType) << "\n";
  os << "source " << o.source << "\n";
  for (const PlanPassRecord &p : passes)
    os << "pass " << p.name << " " << (p.changed ? 1 : 0) << "\n";
  return os.str();
}

Error readMeta(StringRef text, StringRef file, PlanOptions &o,
               std::vector<PlanPassRecord> &passes) {
  auto bad = [&](StringRef line) {
    return makeError(file + ": corrupt plan: bad meta line '" + line + "'");
  };
  SmallVector<StringRef, 16> lines;
  text.split(lines, '\n', -1, /*KeepEmpty=*/false);
  for (StringRef line : lines) {
    auto [key, value] = line.split(' ');
    if (key == "ctx") {
      if (value.getAsInteger(10, o.ctx))
        return bad(line);
    } else if (key == "prefill") {
      o.prefill.clear();
      SmallVector<StringRef, 4> parts;
      value.split(parts, ',', -1, false);
      for (StringRef p : parts) {
        int64_t n;
        if (p.getAsInteger(10, n))
          return bad(line);
        o.prefill.push_back(n);
      }
    } else if (key == "arch") {
      o.arch = value.str();
    } else if (key == "fusion") {
      o.fusion = value == "1";
    } else if (key == "disable_fusion") {
      o.disableFusion.clear();
      SmallVector<StringRef, 4> parts;
      value.split(parts, ',', -1, false);
      for (StringRef p : parts)
        o.disableFusion.push_back(p.str());
    } else if (key == "enable_fusion") {
      o.enableFusion.clear();
      SmallVector<StringRef, 4> parts;
      value.split(parts, ',', -1, false);
      for (StringRef p : parts)
        o.enableFusion.push_back(p.str());
    } else if (key == "kv_dtype") {
      std::optional<DType> kv = parseDType(std::string_view(value.data(), value.size()));
      if (!kv)
        return bad(line);
      o.kvDType = *kv;
    } else if (key == "last_logits_only") {
      // Plans before issue 12 recorded a flag that changed nothing (their
      // prefill entries return every row, as their IR says): ignored.
    } else if (key == "source") {
      o.source = value.str();
    } else if (key == "pass") {
      SmallVector<StringRef, 3> parts;
      value.split(parts, ' ');
      PlanPassRecord r;
      double seconds = 0; // plans before byte-reproducibility carried a wall time
      if (parts.size() < 2 || parts.size() > 3 ||
          (parts.size() == 3 && parts[2].getAsDouble(seconds)))
        return bad(line);
      r.name = parts[0].str();
      r.changed = parts[1] == "1";
      passes.push_back(std::move(r));
    }
    // Unknown keys come from a newer minor version: ignored.
  }
  return Error::success();
}

} // namespace

bool PlanOptions::operator==(const PlanOptions &o) const {
  return ctx == o.ctx && prefill == o.prefill && arch == o.arch && fusion == o.fusion &&
         disableFusion == o.disableFusion && enableFusion == o.enableFusion && kvDType == o.kvDType && source == o.source;
}

Plan::Plan(Graph graph, PlanOptions options, std::vector<PlanPassRecord> passes,
           uint32_t cudaRuntimeVersion, uint32_t nvrtcVersion, std::vector<PlanSection> sections)
    : graph_(std::move(graph)), options_(std::move(options)), passes_(std::move(passes)),
      cudaRuntimeVersion_(cudaRuntimeVersion), nvrtcVersion_(nvrtcVersion),
      sections_(std::move(sections)) {
  for (const PlanSection &s : sections_) {
    assert(s.id != "ir" && s.id != "meta" && "ir and meta are written by the plan itself");
    assert(s.id.size() < kIdSize && "section ids are short");
    assert(s.checked <= s.bytes.size() && "the checked prefix lies inside the section");
    (void)s;
  }
}

const PlanSection *Plan::section(StringRef id) const {
  for (const PlanSection &s : sections_)
    if (s.id == id)
      return &s;
  return nullptr;
}

std::vector<std::string> Plan::entries() const {
  std::vector<std::string> names;
  for (const Function &fn : graph_.functions())
    names.push_back(fn.name().str());
  return names;
}

std::string Plan::serialize() const {
  std::vector<PlanSection> sections;
  std::string ir = printToString(graph_), meta = writeMeta(options_, passes_);
  sections.push_back({"ir", ir, ir.size()});
  sections.push_back({"meta", meta, meta.size()});
  sections.insert(sections.end(), sections_.begin(), sections_.end());

  std::string out;
  out.append(kMagic, sizeof(kMagic));
  put16(out, kFormatMajor);
  put16(out, kFormatMinor);
  put32(out, cudaRuntimeVersion_);
  put32(out, nvrtcVersion_);
  put32(out, static_cast<uint32_t>(sections.size()));
  put32(out, 0); // crc, filled below
  put32(out, 0); // reserved
  assert(out.size() == kHeaderSize && "header layout");

  uint64_t offset = kHeaderSize + kEntrySize * sections.size();
  for (const PlanSection &s : sections) {
    assert(s.id.size() < kIdSize && "section ids are short");
    std::string id = s.id;
    id.resize(kIdSize, '\0');
    out += id;
    put64(out, offset);
    put64(out, s.bytes.size());
    put64(out, s.checked);
    offset += s.bytes.size();
  }
  size_t tableEnd = out.size();
  for (const PlanSection &s : sections)
    out += s.bytes;

  // Header and table, then each section's checked prefix, in file order.
  uint32_t crc = crc32(0, arrayRefFromStringRef(StringRef(out).take_front(tableEnd)));
  size_t at = tableEnd;
  for (const PlanSection &s : sections) {
    crc = crc32(crc, arrayRefFromStringRef(StringRef(out).substr(at, s.checked)));
    at += s.bytes.size();
  }
  char b[4];
  support::endian::write32le(b, crc);
  std::memcpy(&out[kCrcOffset], b, 4);
  return out;
}

Error Plan::save(StringRef path) const {
  std::string bytes = serialize();
  SmallString<256> model(path);
  model += ".tmp-%%%%%%";
  int fd;
  SmallString<256> tmp;
  if (std::error_code ec = sys::fs::createUniqueFile(model, fd, tmp))
    return makeError(path + ": cannot write plan: " + ec.message());
  {
    raw_fd_ostream os(fd, /*shouldClose=*/true);
    os << bytes;
    os.close();
    if (os.has_error()) {
      std::string msg = os.error().message();
      os.clear_error();
      sys::fs::remove(tmp);
      return makeError(path + ": cannot write plan: " + msg);
    }
  }
  if (std::error_code ec = sys::fs::rename(tmp, path)) {
    sys::fs::remove(tmp);
    return makeError(path + ": cannot write plan: " + ec.message());
  }
  return Error::success();
}

Expected<Plan> Plan::load(StringRef path) {
  auto buf = readRegularFile(path);
  if (!buf)
    return makeError(path + ": cannot read plan: " + toString(buf.takeError()));
  return deserialize((*buf)->getBuffer(), path);
}

Expected<Plan> Plan::deserialize(StringRef bytes, StringRef name) {
  StringRef magic(kMagic, sizeof(kMagic));
  if (!bytes.startswith(magic.take_front(std::min(bytes.size(), magic.size()))) || bytes.empty())
    return makeError(name + ": not a fusegraph plan (bad magic)");
  if (bytes.size() < kHeaderSize)
    return makeError(name + ": truncated plan (" + Twine(bytes.size()) +
                     " bytes, the header alone takes " + Twine(kHeaderSize) + ")");
  uint16_t major = get16(bytes, 8), minor = get16(bytes, 10);
  if (major > kFormatMajor)
    return makeError(name + ": plan format " + Twine(major) + ".x is newer than this fusegraph (" +
                     Twine(kFormatMajor) + ".x)");
  if (major < kFormatMajor)
    return makeError(name + ": plan format " + Twine(major) + "." + Twine(minor) +
                     " is too old for this fusegraph (" + Twine(kFormatMajor) +
                     ".x); compile the model again");
  uint32_t cudart = get32(bytes, 12), nvrtc = get32(bytes, 16);
  uint32_t count = get32(bytes, 20), storedCrc = get32(bytes, kCrcOffset);
  uint64_t tableEnd = kHeaderSize + uint64_t(kEntrySize) * count;
  if (tableEnd > bytes.size())
    return makeError(name + ": truncated plan (section table runs past the end of the file)");

  struct Entry {
    std::string id;
    uint64_t offset, size, checked;
  };
  std::vector<Entry> table;
  for (uint32_t i = 0; i < count; ++i) {
    size_t at = kHeaderSize + kEntrySize * i;
    StringRef id = bytes.substr(at, kIdSize);
    id = id.take_until([](char c) { return c == '\0'; });
    Entry e{id.str(), get64(bytes, at + 16), get64(bytes, at + 24), get64(bytes, at + 32)};
    if (e.offset < tableEnd || e.offset > bytes.size() || e.size > bytes.size() - e.offset)
      return makeError(name + ": truncated plan (section '" + e.id +
                       "' runs past the end of the file)");
    for (const Entry &prev : table)
      if (prev.id == e.id)
        return makeError(name + ": corrupt plan (two sections named '" + e.id + "')");
    if (e.checked > e.size)
      return makeError(name + ": corrupt plan (section '" + e.id +
                       "' checks more bytes than it holds)");
    table.push_back(std::move(e));
  }

  std::string header = bytes.take_front(tableEnd).str();
  std::memset(&header[kCrcOffset], 0, 4);
  uint32_t crc = crc32(0, arrayRefFromStringRef(header));
  // Sections in file order, as the writer checksummed them.
  std::vector<const Entry *> order;
  for (const Entry &e : table)
    order.push_back(&e);
  std::sort(order.begin(), order.end(),
            [](const Entry *a, const Entry *b) { return a->offset < b->offset; });
  for (const Entry *e : order)
    crc = crc32(crc, arrayRefFromStringRef(bytes.substr(e->offset, e->checked)));
  if (crc != storedCrc)
    return makeError(name + ": corrupt plan (checksum mismatch: stored " + utohexstr(storedCrc) +
                     ", computed " + utohexstr(crc) + ")");

  auto section = [&](StringRef id) -> Expected<StringRef> {
    for (const Entry &e : table)
      if (e.id == id)
        return bytes.substr(e.offset, e.size);
    return makeError(name + ": corrupt plan (no '" + id + "' section)");
  };
  Expected<StringRef> ir = section("ir");
  if (!ir)
    return ir.takeError();
  Expected<StringRef> meta = section("meta");
  if (!meta)
    return meta.takeError();

  Expected<Graph> graph = parseGraph(*ir, (name + ":ir").str());
  if (!graph)
    return makeError(name +
                     ": corrupt plan (its IR does not parse: " + toString(graph.takeError()) + ")");
  PlanOptions options;
  std::vector<PlanPassRecord> passes;
  if (Error e = readMeta(*meta, name, options, passes))
    return e;
  std::vector<PlanSection> extra;
  for (const Entry &e : table)
    if (e.id != "ir" && e.id != "meta")
      extra.push_back({e.id, bytes.substr(e.offset, e.size).str(), e.checked});
  return Plan(std::move(*graph), std::move(options), std::move(passes), cudart, nvrtc,
              std::move(extra));
}

std::string cudaVersionStr(uint32_t v) {
  if (v == 0)
    return "unknown";
  return std::to_string(v / 1000) + "." + std::to_string((v % 1000) / 10);
}

} // namespace fg
