//===- RobustnessTest.cpp - random text round trips, mutated tokenizer files -===//
#include "text/Model.h" // nfc()
#include "text/Tokenizer.h"

#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"

#include <gtest/gtest.h>

#include <fstream>
#include <random>
#include <string>
#include <unistd.h>
#include <vector>

using namespace fg::text;

namespace {

std::string fixture(const std::string &family, const std::string &file) {
  return std::string(FG_SOURCE_DIR) + "/tests/text/fixtures/" + family + "/" + file;
}

void appendUtf8(std::string &out, uint32_t cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

/// Random valid UTF-8: ASCII (spaces and newlines often), Latin, combining
/// marks, CJK, emoji, and any scalar value now and then.
std::string randomText(std::mt19937 &rng, size_t chars) {
  static const uint32_t kPicks[] = {' ', ' ', '\n', '\t', '\r', 'a', 'e', 'Z', '7', '\'', '.',
                                    0xE9, 0x301, 0x4E2D, 0x6771, 0x1F600, 0x1F680, 0x2581, 0xA0};
  std::string s;
  for (size_t i = 0; i < chars; ++i) {
    uint32_t r = rng() % 10;
    uint32_t cp;
    if (r < 5)
      cp = kPicks[rng() % (sizeof kPicks / sizeof kPicks[0])];
    else if (r < 8)
      cp = 0x20 + rng() % 0x5F;
    else {
      cp = rng() % 0x110000;
      if (cp >= 0xD800 && cp < 0xE000)
        cp = 0xFFFD;
    }
    appendUtf8(s, cp);
  }
  return s;
}

class Family : public testing::TestWithParam<const char *> {};

/// decode(encode(text)) == text for random text (byte-level BPE and byte
/// fallback lose nothing; the space prefix is dropped again), and streaming
/// one id at a time gives the same text. What the tokenizers change on
/// purpose, as `tokenizers` does: qwen2 normalises to NFC, and a U+2581 in the
/// text of a SentencePiece model is a space once decoded.
TEST_P(Family, RandomTextRoundTrips) {
  llvm::Expected<Tokenizer> t = Tokenizer::fromGgufPath(fixture(GetParam(), "tokenizer.gguf"));
  ASSERT_TRUE(bool(t)) << llvm::toString(t.takeError());
  std::mt19937 rng(1234);
  for (int iter = 0; iter < 200; ++iter) {
    std::string text = randomText(rng, 1 + rng() % 60);
    EncodeOptions o;
    o.addSpecial = false;
    llvm::Expected<std::vector<int32_t>> ids = t->encode(text, o);
    ASSERT_TRUE(bool(ids)) << llvm::toString(ids.takeError());
    std::string family = GetParam();
    if (family == "qwen2") {
      llvm::Expected<std::string> n = fg::text::nfc(text);
      ASSERT_TRUE(bool(n));
      text = *n;
    }
    if (family == "llama2" || family == "gemma")
      for (size_t at; (at = text.find("\xE2\x96\x81")) != std::string::npos;)
        text.replace(at, 3, " ");
    ASSERT_EQ(t->decode(*ids), text) << "iteration " << iter;
    StreamDecoder sd(*t);
    std::string streamed;
    for (int32_t id : *ids)
      streamed += sd.push(id);
    streamed += sd.flush();
    ASSERT_EQ(streamed, text) << "iteration " << iter;
  }
}

INSTANTIATE_TEST_SUITE_P(Fixtures, Family, testing::Values("llama3", "qwen2", "llama2", "gemma", "gpt2"));

/// A long text with no spaces (one SentencePiece word) encodes in reasonable
/// time: the merge loop is a priority queue, not a rescan per merge.
TEST(TokenizerRobustness, LongWord) {
  llvm::Expected<Tokenizer> t = Tokenizer::fromGgufPath(fixture("llama2", "tokenizer.gguf"));
  ASSERT_TRUE(bool(t));
  std::string text;
  for (int i = 0; i < 20000; ++i)
    text += "abcdefghij"[i % 10];
  llvm::Expected<std::vector<int32_t>> ids = t->encode(text);
  ASSERT_TRUE(bool(ids));
  EXPECT_EQ(t->decode(*ids, /*skipSpecial=*/true), text);
}

/// Flipped bytes in tokenizer.json and tokenizer.gguf load or fail with an
/// error; what loads encodes and decodes without crashing (the ASan build
/// checks the reads).
TEST(TokenizerRobustness, MutatedFilesNeverCrash) {
  std::mt19937 rng(99);
  int loaded = 0, refused = 0;
  for (const char *family : {"llama3", "llama2"})
    for (const char *file : {"tokenizer.json", "tokenizer.gguf"}) {
      auto buf = llvm::MemoryBuffer::getFile(fixture(family, file));
      ASSERT_TRUE(bool(buf));
      std::string orig = (*buf)->getBuffer().str();
      bool gguf = llvm::StringRef(file).endswith(".gguf");
      for (int iter = 0; iter < 60; ++iter) {
        std::string bytes = orig;
        int flips = 1 + rng() % 4;
        for (int k = 0; k < flips; ++k) {
          size_t at = rng() % bytes.size();
          bytes[at] = static_cast<char>(rng() % 3 == 0 ? bytes[at] ^ 0x80 : rng());
        }
        if (rng() % 8 == 0)
          bytes.resize(rng() % bytes.size());
        llvm::Expected<Tokenizer> t = [&]() -> llvm::Expected<Tokenizer> {
          if (!gguf)
            return Tokenizer::fromHfJson(bytes, "mutated.json");
          llvm::SmallString<128> path;
          int fd;
          llvm::sys::fs::createTemporaryFile("fg-mut", "gguf", fd, path);
          ::close(fd);
          std::ofstream(path.c_str(), std::ios::binary).write(bytes.data(), bytes.size());
          auto r = Tokenizer::fromGgufPath(path);
          llvm::sys::fs::remove(path);
          return r;
        }();
        if (!t) {
          EXPECT_FALSE(llvm::toString(t.takeError()).empty());
          ++refused;
          continue;
        }
        ++loaded;
        EncodeOptions o;
        o.parseSpecial = true;
        for (const char *text : {"Hello world", "東京 😀 <s> <|eot_id|>", "  \n\t x"}) {
          llvm::Expected<std::vector<int32_t>> ids = t->encode(text, o);
          if (!ids) {
            llvm::consumeError(ids.takeError());
            continue;
          }
          for (int32_t id : *ids)
            EXPECT_TRUE(id >= 0 && id < t->vocabSize());
          (void)t->decode(*ids);
        }
      }
    }
  EXPECT_GT(loaded + refused, 0);
}

} // namespace
