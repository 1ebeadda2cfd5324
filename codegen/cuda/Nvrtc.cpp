//===- Nvrtc.cpp - NVRTC compilation and the on-disk kernel cache ---------===//
//
// Cache entry layout (little-endian):
//   char magic[8] = "FGKCACH1", u64 cubinSize, u64 ptxSize, u64 xxhash64(cubin ++ ptx),
//   cubin bytes, ptx bytes.
// Anything that does not parse or whose checksum differs is a miss.
//
//===----------------------------------------------------------------------===//
#include "codegen/cuda/Nvrtc.h"

#include "llvm/ADT/SmallString.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/Process.h"
#include "llvm/Support/SHA1.h"
#include "llvm/Support/raw_ostream.h"
#include "llvm/Support/xxhash.h"

#include <nvrtc.h>

#include <atomic>
#include <cstring>

namespace fg::cuda {
namespace {

std::atomic<uint64_t> gHits{0}, gMisses{0}, gRejected{0};

constexpr char kMagic[8] = {'F', 'G', 'K', 'C', 'A', 'C', 'H', '1'};
constexpr size_t kHeaderBytes = 32;

llvm::Error err(const llvm::Twine &msg) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(), msg);
}

std::vector<std::string> allFlags(llvm::StringRef arch, const NvrtcOptions &o) {
  std::vector<std::string> f{"--gpu-architecture=" + arch.str(), "-std=c++17"};
  f.insert(f.end(), o.flags.begin(), o.flags.end());
  // Debug build of every kernel: FG_DEBUG_PDL_DELAY_NS=N sleeps N ns after
  // each kernel's programmatic-launch trigger (common.cuh, fg_pdl_begin), so
  // a kernel that read its inputs before waiting would fail the GPU tests.
  if (auto d = llvm::sys::Process::GetEnv("FG_DEBUG_PDL_DELAY_NS"); d && !d->empty()) {
    unsigned ns = 0;
    if (!llvm::StringRef(*d).getAsInteger(10, ns) && ns > 0)
      f.push_back("-DFG_PDL_DELAY_NS=" + std::to_string(ns) + "u");
  }
  // FG_DEBUG_PDL_NO_TRIGGER=1: no early griddepcontrol.launch_dependents
  // (dependents launch when every block has exited).
  if (auto d = llvm::sys::Process::GetEnv("FG_DEBUG_PDL_NO_TRIGGER"); d && *d == "1")
    f.push_back("-DFG_PDL_NO_TRIGGER");
  // FG_DEBUG_ATTN_STAMPS=1: decode attention prints its phases (attention.cuh).
  if (auto d = llvm::sys::Process::GetEnv("FG_DEBUG_ATTN_STAMPS"); d && *d == "1")
    f.push_back("-DFG_ATTN_STAMPS");
  // FG_DEBUG_STATUS_FENCE=0: the input check and the greedy token end
  // without __threadfence_system after their status words (for timing:
  // check.cuh says why they may).
  if (auto d = llvm::sys::Process::GetEnv("FG_DEBUG_STATUS_FENCE"); d && *d == "0")
    f.push_back("-DFG_NO_STATUS_FENCE");
  // FG_DEBUG_PDL_EARLY_TRIGGER=1: the trigger before the wait (for timing).
  if (auto d = llvm::sys::Process::GetEnv("FG_DEBUG_PDL_EARLY_TRIGGER"); d && *d == "1")
    f.push_back("-DFG_PDL_EARLY_TRIGGER");
  return f;
}

void putU64(std::string &s, uint64_t v) {
  for (int i = 0; i < 8; ++i)
    s.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}
uint64_t getU64(const char *p) {
  uint64_t v = 0;
  for (int i = 0; i < 8; ++i)
    v |= static_cast<uint64_t>(static_cast<unsigned char>(p[i])) << (8 * i);
  return v;
}

uint64_t payloadHash(llvm::StringRef cubin, llvm::StringRef ptx) {
  return llvm::xxHash64(cubin) ^ (llvm::xxHash64(ptx) * 0x9E3779B97F4A7C15ull);
}

/// Reads an entry; false when absent or corrupt.
bool readEntry(const std::string &path, CompiledModule &m, bool &corrupt) {
  corrupt = false;
  auto buf = llvm::MemoryBuffer::getFile(path, /*IsText=*/false, /*RequiresNullTerminator=*/false);
  if (!buf)
    return false;
  llvm::StringRef data = (*buf)->getBuffer();
  corrupt = true;
  if (data.size() < kHeaderBytes || std::memcmp(data.data(), kMagic, 8) != 0)
    return false;
  uint64_t cubinSize = getU64(data.data() + 8), ptxSize = getU64(data.data() + 16);
  uint64_t hash = getU64(data.data() + 24);
  if (cubinSize == 0 || cubinSize > data.size() || ptxSize > data.size() ||
      kHeaderBytes + cubinSize + ptxSize != data.size())
    return false;
  llvm::StringRef cubin = data.substr(kHeaderBytes, cubinSize);
  llvm::StringRef ptx = data.substr(kHeaderBytes + cubinSize, ptxSize);
  if (payloadHash(cubin, ptx) != hash)
    return false;
  corrupt = false;
  m.cubin.assign(cubin.begin(), cubin.end());
  m.ptx = ptx.str();
  return true;
}

/// Best effort: a cache that cannot be written is not an error.
void writeEntry(const std::string &path, const CompiledModule &m) {
  llvm::StringRef dir = llvm::sys::path::parent_path(path);
  if (llvm::sys::fs::create_directories(dir))
    return;
  llvm::StringRef cubin(m.cubin.data(), m.cubin.size());
  std::string blob(kMagic, 8);
  putU64(blob, cubin.size());
  putU64(blob, m.ptx.size());
  putU64(blob, payloadHash(cubin, m.ptx));
  blob.append(cubin.begin(), cubin.end());
  blob += m.ptx;

  llvm::SmallString<256> tmp;
  int fd = -1;
  if (llvm::sys::fs::createUniqueFile(path + ".tmp-%%%%%%%%", fd, tmp))
    return;
  {
    llvm::raw_fd_ostream os(fd, /*shouldClose=*/true);
    os.write(blob.data(), blob.size());
    os.close();
    if (os.has_error()) {
      os.clear_error();
      llvm::sys::fs::remove(tmp);
      return;
    }
  }
  if (llvm::sys::fs::rename(tmp, path))
    llvm::sys::fs::remove(tmp);
}

std::string nvrtcError(nvrtcResult r) { return nvrtcGetErrorString(r); }

} // namespace

namespace {
/// FG_DUMP_KERNELS=DIR writes every kernel source compiled (or found in the
/// cache) to DIR/<name>.cu, to read or diff what the code generator made.
/// Best effort: a folder that cannot be written is skipped silently.
void dumpSource(llvm::StringRef source, llvm::StringRef name) {
  auto dir = llvm::sys::Process::GetEnv("FG_DUMP_KERNELS");
  if (!dir || dir->empty() || llvm::sys::fs::create_directories(*dir))
    return;
  llvm::SmallString<256> p(*dir);
  llvm::sys::path::append(p, name + ".cu");
  std::error_code ec;
  llvm::raw_fd_ostream os(p, ec);
  if (!ec)
    os << source;
}
} // namespace

uint32_t nvrtcVersionNumber() {
  int major = 0, minor = 0;
  if (nvrtcVersion(&major, &minor) != NVRTC_SUCCESS)
    return 0;
  return static_cast<uint32_t>(major * 1000 + minor * 10);
}

NvrtcCacheStats nvrtcCacheStats() { return {gHits.load(), gMisses.load(), gRejected.load()}; }

std::string resolveCacheDir(const NvrtcOptions &o) {
  if (!o.cacheDir.empty())
    return o.cacheDir;
  if (auto env = llvm::sys::Process::GetEnv("FG_KERNEL_CACHE"); env && !env->empty())
    return *env;
  llvm::SmallString<256> home;
  if (!llvm::sys::path::home_directory(home))
    home = llvm::sys::path::get_separator().str() + "tmp";
  llvm::sys::path::append(home, ".cache", "fusegraph", "kernels");
  return std::string(home.str());
}

std::string cachePath(llvm::StringRef source, llvm::StringRef arch, const NvrtcOptions &o) {
  llvm::SHA1 h;
  auto field = [&](llvm::StringRef s) {
    std::string len = std::to_string(s.size()) + ":";
    h.update(len);
    h.update(s);
  };
  const std::string a = architectureFor(source, arch);
  field(source);
  field(a);
  for (const std::string &f : allFlags(a, o))
    field(f);
  field(std::to_string(nvrtcVersionNumber()));
  std::string hex = llvm::toHex(h.final(), /*LowerCase=*/true);
  llvm::SmallString<256> p(resolveCacheDir(o));
  llvm::sys::path::append(p, hex.substr(0, 2), hex + ".fgk");
  return std::string(p.str());
}

llvm::Error checkArch(llvm::StringRef arch) {
  llvm::StringRef rest = arch;
  bool prefixed = rest.consume_front("sm_") || rest.consume_front("compute_");
  llvm::StringRef digits = rest.take_while([](char c) { return c >= '0' && c <= '9'; });
  llvm::StringRef suffix = rest.drop_front(digits.size());
  if (prefixed && !digits.empty() && suffix.size() <= 1 &&
      llvm::all_of(suffix, [](char c) { return c >= 'a' && c <= 'z'; }))
    return llvm::Error::success();
  return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                 "unknown GPU architecture '" + arch +
                                     "' (expected sm_NN or compute_NN, e.g. sm_90)");
}

int archNumber(llvm::StringRef arch) {
  if (llvm::Error e = checkArch(arch)) {
    llvm::consumeError(std::move(e));
    return 0;
  }
  llvm::StringRef rest = arch;
  if (!rest.consume_front("sm_"))
    rest.consume_front("compute_");
  unsigned n = 0;
  rest.take_while([](char c) { return c >= '0' && c <= '9'; }).getAsInteger(10, n);
  return static_cast<int>(n);
}

std::string architectureFor(llvm::StringRef source, llvm::StringRef arch) {
  if (!source.startswith(kArchSpecificMarker) || !arch.startswith("sm_") ||
      !llvm::isDigit(arch.back()))
    return arch.str();
  return arch.str() + "a";
}

llvm::Expected<CompiledModule> compileCuda(llvm::StringRef source, llvm::StringRef name,
                                           llvm::StringRef requested, const NvrtcOptions &o) {
  const std::string archName = architectureFor(source, requested);
  const llvm::StringRef arch = archName;
  CompiledModule m;
  m.name = name.str();
  dumpSource(source, name);
  std::string path;
  if (o.useCache) {
    path = cachePath(source, arch, o);
    bool corrupt = false;
    if (readEntry(path, m, corrupt)) {
      ++gHits;
      m.cacheHit = true;
      return m;
    }
    if (corrupt)
      ++gRejected;
  }
  ++gMisses;

  std::string src = source.str(), file = name.str() + ".cu";
  nvrtcProgram prog;
  if (nvrtcResult r = nvrtcCreateProgram(&prog, src.c_str(), file.c_str(), 0, nullptr, nullptr);
      r != NVRTC_SUCCESS)
    return err("nvrtc: cannot create program '" + name + "': " + nvrtcError(r));
  struct Destroy {
    nvrtcProgram &p;
    ~Destroy() { nvrtcDestroyProgram(&p); }
  } destroy{prog};

  std::vector<std::string> flags = allFlags(arch, o);
  std::vector<const char *> argv;
  for (const std::string &f : flags)
    argv.push_back(f.c_str());
  nvrtcResult cr = nvrtcCompileProgram(prog, static_cast<int>(argv.size()), argv.data());

  size_t logSize = 0;
  if (nvrtcGetProgramLogSize(prog, &logSize) == NVRTC_SUCCESS && logSize > 1) {
    m.log.resize(logSize);
    if (nvrtcGetProgramLog(prog, m.log.data()) != NVRTC_SUCCESS)
      m.log.clear();
    while (!m.log.empty() && (m.log.back() == '\0' || m.log.back() == '\n'))
      m.log.pop_back();
  }
  if (cr != NVRTC_SUCCESS)
    return err("nvrtc: compiling kernel '" + name + "' for " + arch + " failed (" +
               nvrtcError(cr) + "):\n" + m.log);

  size_t cubinSize = 0;
  if (nvrtcResult r = nvrtcGetCUBINSize(prog, &cubinSize); r != NVRTC_SUCCESS || cubinSize == 0)
    return err("nvrtc: no cubin for kernel '" + name + "' (is '" + arch +
               "' a real architecture such as sm_90?): " + nvrtcError(r));
  m.cubin.resize(cubinSize);
  if (nvrtcResult r = nvrtcGetCUBIN(prog, m.cubin.data()); r != NVRTC_SUCCESS)
    return err("nvrtc: cannot read cubin of '" + name + "': " + nvrtcError(r));

  size_t ptxSize = 0;
  if (nvrtcGetPTXSize(prog, &ptxSize) == NVRTC_SUCCESS && ptxSize > 1) {
    m.ptx.resize(ptxSize);
    if (nvrtcGetPTX(prog, m.ptx.data()) != NVRTC_SUCCESS)
      m.ptx.clear();
    while (!m.ptx.empty() && m.ptx.back() == '\0')
      m.ptx.pop_back();
  }

  if (o.useCache)
    writeEntry(path, m);
  return m;
}

} // namespace fg::cuda
