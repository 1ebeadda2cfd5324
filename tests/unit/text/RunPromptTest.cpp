//===- RunPromptTest.cpp - `fusegraph run MODEL --prompt TEXT` end to end --===//
//
// tests/text/gen_text_models.py writes a tiny llama (random weights) whose
// vocabulary is the llama3 fixture tokenizer's, as an HF folder (with
// tokenizer.json) and as GGUF (with tokenizer.ggml.* metadata). `run --prompt`
// must feed exactly the tokenizer's ids and print, as text, exactly the decode
// of the ids it generated (those printed with --verbose), stopping at end of
// generation. Skips without Python and its packages.
//
//===----------------------------------------------------------------------===//
#include "text/Tokenizer.h"

#include "llvm/ADT/Hashing.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/Process.h"
#include "llvm/Support/Program.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <mutex>
#include <string>
#include <vector>

using namespace fg;
using namespace fg::text;

namespace {

/// The models' folder (made once per content of the scripts), or "" with `why`.
std::string textModels(std::string &why) {
  static std::once_flag once;
  static std::string dir, reason;
  std::call_once(once, [] {
    std::string src = std::string(FG_SOURCE_DIR) + "/tests/";
    std::string key;
    for (const char *s : {"text/gen_text_models.py", "text/gen_tokenizers.py", "models/gen_models.py",
                          "text/fixtures/llama3/tokenizer.json"}) {
      auto b = llvm::MemoryBuffer::getFile(src + s);
      if (!b) {
        reason = std::string("cannot read ") + s;
        return;
      }
      key += llvm::utohexstr(llvm::hash_value((*b)->getBuffer()));
    }
    llvm::SmallString<256> tmp;
    llvm::sys::path::system_temp_directory(true, tmp);
    std::string final = (tmp + "/fusegraph-text-models-" +
                         llvm::utohexstr(llvm::hash_value(key)))
                            .str();
    if (llvm::sys::fs::exists(final + "/llama3-text.gguf")) {
      dir = final;
      return;
    }
    const char *py = std::getenv("FG_PYTHON");
    auto exe = llvm::sys::findProgramByName(py ? py : "python3");
    if (!exe) {
      reason = "no python3 on PATH";
      return;
    }
    std::string work = final + ".tmp." + std::to_string(llvm::sys::Process::getProcessId());
    std::string log = work + ".log", script = src + "text/gen_text_models.py";
    llvm::StringRef args[] = {*exe, script, work};
    llvm::Optional<llvm::StringRef> redirects[] = {llvm::None, llvm::StringRef(log),
                                                   llvm::StringRef(log)};
    int rc = llvm::sys::ExecuteAndWait(*exe, args, llvm::None, redirects);
    auto out = llvm::MemoryBuffer::getFile(log);
    std::string msg = out ? (*out)->getBuffer().trim().str() : "";
    llvm::sys::fs::remove(log);
    if (rc != 0) {
      reason = rc == 3 ? msg : "gen_text_models.py failed: " + msg;
      return;
    }
    if (llvm::sys::fs::rename(work, final))
      llvm::sys::fs::remove_directories(work);
    dir = final;
  });
  why = reason;
  return dir;
}

std::string fusegraph() {
  std::string self = llvm::sys::fs::getMainExecutable(nullptr, nullptr);
  llvm::SmallString<256> p(llvm::sys::path::parent_path(llvm::sys::path::parent_path(self)));
  llvm::sys::path::append(p, "fusegraph");
  return llvm::sys::fs::can_execute(p) ? p.str().str() : "";
}

/// Runs fusegraph; stdout (stderr appended after a marker line when `withErr`).
std::string run(const std::vector<std::string> &args, int &rc, bool withErr = false) {
  std::string bin = fusegraph();
  llvm::SmallString<128> out, err;
  llvm::sys::fs::createTemporaryFile("fg-run", "out", out);
  llvm::sys::fs::createTemporaryFile("fg-run", "err", err);
  std::vector<llvm::StringRef> argv = {bin};
  for (const std::string &a : args)
    argv.push_back(a);
  llvm::Optional<llvm::StringRef> redirects[] = {llvm::None, llvm::StringRef(out),
                                                 llvm::StringRef(err)};
  rc = llvm::sys::ExecuteAndWait(bin, argv, llvm::None, redirects, 300);
  auto o = llvm::MemoryBuffer::getFile(out), e = llvm::MemoryBuffer::getFile(err);
  std::string text = o ? (*o)->getBuffer().str() : "";
  if (withErr && e)
    text += "--- stderr\n" + (*e)->getBuffer().str();
  llvm::sys::fs::remove(out);
  llvm::sys::fs::remove(err);
  return text;
}

/// The rest of the line of stdout that starts with `prefix`.
std::string line(llvm::StringRef out, llvm::StringRef prefix) {
  llvm::SmallVector<llvm::StringRef, 16> lines;
  out.split(lines, '\n');
  for (llvm::StringRef l : lines)
    if (l.startswith(prefix))
      return l.drop_front(prefix.size()).str();
  return "<no line '" + prefix.str() + "'>";
}

std::vector<int32_t> parseIds(llvm::StringRef s, char sep) {
  std::vector<int32_t> ids;
  llvm::SmallVector<llvm::StringRef, 32> parts;
  s.split(parts, sep, -1, false);
  for (llvm::StringRef p : parts) {
    int32_t v;
    if (!p.trim().getAsInteger(10, v))
      ids.push_back(v);
  }
  return ids;
}

class RunPrompt : public testing::TestWithParam<const char *> {};

/// The prompt is the tokenizer's ids; the text printed is the decode of the
/// generated ids (up to an end-of-generation token, which is not printed).
TEST_P(RunPrompt, TextIsTheDecodeOfTheGeneratedIds) {
  if (fusegraph().empty())
    GTEST_SKIP() << "no fusegraph binary beside the tests";
  std::string why, dir = textModels(why);
  if (dir.empty())
    GTEST_SKIP() << why;
  std::string model = dir + "/" + GetParam();
  llvm::Expected<Tokenizer> tok = Tokenizer::forModel(model);
  ASSERT_TRUE(bool(tok)) << llvm::toString(tok.takeError());
  const std::string prompt = "Hello world, the quick brown fox: 東京 😀";
  int rc;
  std::string out = run({"run", model, "--prompt", prompt, "--steps", "20", "--ctx", "64",
                         "--prefill", "16", "--verbose"},
                        rc);
  ASSERT_EQ(rc, 0) << out;
  auto want = tok->encode(prompt);
  ASSERT_TRUE(bool(want));
  EXPECT_EQ(want->front(), tok->bos());
  EXPECT_EQ(parseIds(line(out, "prompt: "), ','), *want) << out;
  std::vector<int32_t> generated = parseIds(line(out, "tokens: "), ' ');
  ASSERT_FALSE(generated.empty()) << out;
  bool stopped = tok->isEndOfGeneration(generated.back());
  if (stopped) {
    EXPECT_EQ(line(out, "stopped at end of sequence (token "),
              std::to_string(generated.back()) + ")");
    generated.pop_back();
  } else {
    EXPECT_EQ(generated.size(), 20u);
  }
  for (int32_t id : generated)
    EXPECT_FALSE(tok->isEndOfGeneration(id)) << "generation goes on after end of sequence";
  EXPECT_EQ(line(out, "text: "), tok->decode(generated)) << out;
}

INSTANTIATE_TEST_SUITE_P(Files, RunPrompt, testing::Values("llama3-text-hf", "llama3-text.gguf"),
                         [](const auto &info) {
                           return std::string(info.param).find("gguf") != std::string::npos
                                      ? std::string("gguf")
                                      : std::string("hf");
                         });

/// A plan finds the tokenizer of the model it was compiled from; --prompt and
/// --prompt-ids together, and a model without a tokenizer, are errors.
TEST(RunPromptCli, PlanAndErrors) {
  if (fusegraph().empty())
    GTEST_SKIP() << "no fusegraph binary beside the tests";
  std::string why, dir = textModels(why);
  if (dir.empty())
    GTEST_SKIP() << why;
  llvm::SmallString<128> plan;
  llvm::sys::fs::createTemporaryFile("fg-text", "plan", plan);
  int rc;
  std::string out = run({"compile", dir + "/llama3-text.gguf", "--ctx", "64", "--prefill", "16",
                         "-o", std::string(plan)},
                        rc, true);
  ASSERT_EQ(rc, 0) << out;
  out = run({"run", std::string(plan), "--prompt", "Hello", "--steps", "3"}, rc, true);
  EXPECT_EQ(rc, 0) << out;
  auto tok = Tokenizer::forModel(dir + "/llama3-text.gguf");
  ASSERT_TRUE(bool(tok));
  auto ids = tok->encode("Hello");
  ASSERT_TRUE(bool(ids));
  std::string want;
  for (size_t i = 0; i < ids->size(); ++i)
    want += (i ? "," : "") + std::to_string((*ids)[i]);
  EXPECT_EQ(line(out, "prompt: "), want);
  llvm::sys::fs::remove(plan);

  out = run({"run", "demo", "--prompt", "hi"}, rc, true);
  EXPECT_EQ(rc, 1);
  EXPECT_NE(out.find("'demo' has no tokenizer"), std::string::npos) << out;
  out = run({"run", "demo", "--prompt", "hi", "--prompt-ids", "1"}, rc, true);
  EXPECT_EQ(rc, 2);
  EXPECT_NE(out.find("give --prompt or --prompt-ids, not both"), std::string::npos) << out;
}

} // namespace
