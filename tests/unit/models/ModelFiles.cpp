//===- ModelFiles.cpp - small model files for the frontend tests ----------===//
#include "ModelFiles.h"

#include "llvm/ADT/Hashing.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/Process.h"
#include "llvm/Support/Program.h"

#include <cstdlib>
#include <fstream>
#include <mutex>

namespace fg::test {

std::string generatedModels(std::string &why) {
  static std::once_flag once;
  static std::string dir, reason;
  std::call_once(once, [] {
    // Files written elsewhere (the GPU machine has no `gguf` package: the
    // bundle carries the few files its tests read, docs/TESTING.md).
    if (const char *given = std::getenv("FG_MODEL_DIR"); given && *given) {
      if (llvm::sys::fs::exists(std::string(given) + "/prompt.txt"))
        dir = given;
      else
        reason = std::string("FG_MODEL_DIR=") + given + " has no prompt.txt";
      return;
    }
    std::string script = std::string(FG_SOURCE_DIR) + "/tests/models/gen_models.py";
    auto text = llvm::MemoryBuffer::getFile(script);
    if (!text) {
      reason = "cannot read " + script;
      return;
    }
    llvm::SmallString<256> tmp;
    llvm::sys::path::system_temp_directory(/*ErasedOnReboot=*/true, tmp);
    std::string final =
        (tmp + "/fusegraph-models-" + llvm::utohexstr(llvm::hash_value((*text)->getBuffer())))
            .str();
    if (llvm::sys::fs::exists(final + "/prompt.txt")) {
      dir = final;
      return;
    }
    const char *py = std::getenv("FG_PYTHON");
    std::string python = py ? py : "python3";
    auto exe = llvm::sys::findProgramByName(python);
    if (!exe) {
      reason = "no " + python + " on PATH";
      return;
    }
    std::string work = final + ".tmp." + std::to_string(llvm::sys::Process::getProcessId());
    std::string log = work + ".log";
    llvm::StringRef args[] = {*exe, script, work};
    llvm::Optional<llvm::StringRef> redirects[] = {llvm::None, llvm::StringRef(log),
                                                   llvm::StringRef(log)};
    int rc = llvm::sys::ExecuteAndWait(*exe, args, llvm::None, redirects);
    auto out = llvm::MemoryBuffer::getFile(log);
    std::string msg = out ? (*out)->getBuffer().trim().str() : std::string();
    llvm::sys::fs::remove(log);
    if (rc == 3) {
      reason = msg;
      return;
    }
    if (rc != 0) {
      reason = "gen_models.py failed (" + std::to_string(rc) + "): " + msg;
      return;
    }
    if (llvm::sys::fs::rename(work, final))
      llvm::sys::fs::remove_directories(work); // another process won the race
    dir = final;
  });
  why = reason;
  return dir;
}

llvm::Error bindWeights(ReferenceInterpreter &interp, const ModelWeights &weights) {
  for (const WeightEntry &w : weights.entries()) {
    if (auto e = interp.bindWeight(w.name, HostTensor{w.type, w.bytes()}))
      return e;
  }
  return llvm::Error::success();
}

std::string tempPath(llvm::StringRef suffix) {
  llvm::SmallString<256> p;
  int fd = -1;
  if (llvm::sys::fs::createTemporaryFile("fg-models", suffix.drop_front(), fd, p))
    return "";
  llvm::sys::Process::SafelyCloseFileDescriptor(fd);
  return p.str().str();
}

void writeFile(const std::string &path, const std::vector<uint8_t> &bytes) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f.write(reinterpret_cast<const char *>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
}

std::vector<uint8_t> readFile(const std::string &path) {
  std::ifstream f(path, std::ios::binary);
  return std::vector<uint8_t>(std::istreambuf_iterator<char>(f), {});
}

std::string fusegraphBinary() {
  std::string self = llvm::sys::fs::getMainExecutable(nullptr, nullptr);
  llvm::SmallString<256> p(llvm::sys::path::parent_path(llvm::sys::path::parent_path(self)));
  llvm::sys::path::append(p, "fusegraph");
  return llvm::sys::fs::can_execute(p) ? p.str().str() : "";
}

std::string runCli(llvm::ArrayRef<std::string> args, int &rc, unsigned seconds) {
  std::string bin = fusegraphBinary();
  std::string out = tempPath(".txt"), err = tempPath(".txt");
  std::vector<llvm::StringRef> argv = {bin};
  for (const std::string &a : args)
    argv.push_back(a);
  llvm::Optional<llvm::StringRef> redirects[] = {llvm::None, llvm::StringRef(out),
                                                 llvm::StringRef(err)};
  rc = llvm::sys::ExecuteAndWait(bin, argv, llvm::None, redirects, seconds);
  std::vector<uint8_t> o = readFile(out), e = readFile(err);
  llvm::sys::fs::remove(out);
  llvm::sys::fs::remove(err);
  return std::string(o.begin(), o.end()) + std::string(e.begin(), e.end());
}

} // namespace fg::test
