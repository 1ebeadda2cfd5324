//===- GgufTokenizerTest.cpp - tokenizer.ggml.* metadata, good and bad ----===//
//
// Small GGUF files written here (metadata only): the rules on tiny
// vocabularies, and every way the metadata can be wrong gives an error naming
// the file and the key, never a crash.
//
//===----------------------------------------------------------------------===//
#include "text/Tokenizer.h"

#include "llvm/Support/FileSystem.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <unistd.h>
#include <fstream>
#include <string>
#include <vector>

using namespace fg::text;

namespace {

/// A GGUF v3 writer for metadata (no tensors).
class GgufBytes {
public:
  GgufBytes &str(const std::string &key, const std::string &v) {
    keyHead(key, 8);
    putStr(v);
    return *this;
  }
  GgufBytes &u32(const std::string &key, uint32_t v) {
    keyHead(key, 4);
    put(v);
    return *this;
  }
  GgufBytes &boolean(const std::string &key, bool v) {
    keyHead(key, 7);
    body_.push_back(v ? 1 : 0);
    return *this;
  }
  GgufBytes &strs(const std::string &key, const std::vector<std::string> &v) {
    keyHead(key, 9);
    put<uint32_t>(8);
    put<uint64_t>(v.size());
    for (const std::string &s : v)
      putStr(s);
    return *this;
  }
  GgufBytes &i32s(const std::string &key, const std::vector<int32_t> &v) {
    keyHead(key, 9);
    put<uint32_t>(5);
    put<uint64_t>(v.size());
    for (int32_t x : v)
      put(x);
    return *this;
  }
  GgufBytes &f32s(const std::string &key, const std::vector<float> &v) {
    keyHead(key, 9);
    put<uint32_t>(6);
    put<uint64_t>(v.size());
    for (float x : v)
      put(x);
    return *this;
  }
  /// Writes the file; returns its path.
  std::string write() const {
    std::vector<char> out = {'G', 'G', 'U', 'F'};
    auto add = [&](auto v) {
      const char *p = reinterpret_cast<const char *>(&v);
      out.insert(out.end(), p, p + sizeof v);
    };
    add(uint32_t(3));
    add(uint64_t(0));
    add(uint64_t(n_));
    out.insert(out.end(), body_.begin(), body_.end());
    while (out.size() % 32)
      out.push_back(0);
    llvm::SmallString<128> path;
    int fd;
    llvm::sys::fs::createTemporaryFile("fg-tok", "gguf", fd, path);
    ::close(fd);
    std::ofstream(path.c_str(), std::ios::binary).write(out.data(), out.size());
    return path.str().str();
  }

private:
  template <typename T> void put(T v) {
    const char *p = reinterpret_cast<const char *>(&v);
    body_.insert(body_.end(), p, p + sizeof v);
  }
  void putStr(const std::string &s) {
    put<uint64_t>(s.size());
    body_.insert(body_.end(), s.begin(), s.end());
  }
  void keyHead(const std::string &key, uint32_t type) {
    ++n_;
    putStr(key);
    put(type);
  }
  std::vector<char> body_;
  uint64_t n_ = 0;
};

GgufBytes gpt2(const std::vector<std::string> &tokens, const std::vector<std::string> &merges) {
  GgufBytes g;
  g.str("general.architecture", "llama")
      .str("tokenizer.ggml.model", "gpt2")
      .str("tokenizer.ggml.pre", "gpt2")
      .strs("tokenizer.ggml.tokens", tokens)
      .strs("tokenizer.ggml.merges", merges);
  return g;
}

std::string errorOf(const GgufBytes &g) {
  std::string path = g.write();
  llvm::Expected<Tokenizer> t = Tokenizer::fromGgufPath(path);
  llvm::sys::fs::remove(path);
  if (t)
    return "<no error>";
  std::string msg = llvm::toString(t.takeError());
  EXPECT_NE(msg.find(path), std::string::npos) << "the error names the file: " << msg;
  return msg;
}

Tokenizer load(const GgufBytes &g) {
  std::string path = g.write();
  llvm::Expected<Tokenizer> t = Tokenizer::fromGgufPath(path);
  llvm::sys::fs::remove(path);
  if (!t) {
    ADD_FAILURE() << llvm::toString(t.takeError());
    std::abort();
  }
  return std::move(*t);
}

std::vector<int32_t> enc(const Tokenizer &t, const std::string &s) {
  EncodeOptions o;
  o.addSpecial = false;
  llvm::Expected<std::vector<int32_t>> ids = t.encode(s, o);
  if (!ids) {
    ADD_FAILURE() << llvm::toString(ids.takeError());
    return {};
  }
  return *ids;
}

/// Byte-level BPE: merges by rank, the gpt2 split keeps " b" apart from "a".
TEST(GgufTokenizer, Gpt2MergesByRank) {
  // Ġ is the byte-level stand-in for a space.
  Tokenizer t = load(gpt2({"a", "b", "ab", "Ġ", "Ġb", "abab"}, {"a b", "Ġ b"}));
  EXPECT_EQ(enc(t, "ab"), (std::vector<int32_t>{2}));
  EXPECT_EQ(enc(t, "ba"), (std::vector<int32_t>{1, 0}));
  EXPECT_EQ(enc(t, "abab"), (std::vector<int32_t>{2, 2})); // no merge to "abab", no ignore_merges
  EXPECT_EQ(enc(t, "a b"), (std::vector<int32_t>{0, 4}));
  EXPECT_EQ(t.decode({0, 4}), "a b");
}

/// SentencePiece (llama): the merged piece with the highest score wins, a
/// character outside the vocabulary is <unk> without byte tokens.
TEST(GgufTokenizer, LlamaMergesByScore) {
  GgufBytes g;
  // "▁ab" can come from ▁a+b (score -1) or ▁+ab (-5): the tokens are scored,
  // not the pairs, so whichever pair forms first decides: ab (-2) beats ▁a (-3).
  g.str("general.architecture", "llama")
      .str("tokenizer.ggml.model", "llama")
      .strs("tokenizer.ggml.tokens", {"<unk>", "<s>", "</s>", "\xE2\x96\x81", "a", "b", "ab",
                                      "\xE2\x96\x81" "a", "\xE2\x96\x81" "ab"})
      .f32s("tokenizer.ggml.scores", {0, 0, 0, -10, -10, -10, -2, -3, -1})
      .i32s("tokenizer.ggml.token_type", {2, 3, 3, 1, 1, 1, 1, 1, 1})
      .u32("tokenizer.ggml.bos_token_id", 1)
      .u32("tokenizer.ggml.eos_token_id", 2);
  Tokenizer t = load(g);
  EXPECT_EQ(enc(t, "ab"), (std::vector<int32_t>{8}));
  EXPECT_EQ(enc(t, "abc"), (std::vector<int32_t>{8, 0})); // c: no byte token -> <unk>
  auto withBos = t.encode("a");
  ASSERT_TRUE(bool(withBos));
  EXPECT_EQ(*withBos, (std::vector<int32_t>{1, 7})); // add_bos_token defaults to true for llama
  EXPECT_TRUE(t.isEndOfGeneration(2));
  EXPECT_EQ(t.decode({1, 8}, /*skipSpecial=*/true), "ab");
}

TEST(GgufTokenizer, BadMetadataIsAnError) {
  GgufBytes none;
  none.str("general.architecture", "llama");
  EXPECT_NE(errorOf(none).find("no tokenizer metadata"), std::string::npos);

  GgufBytes bert;
  bert.str("tokenizer.ggml.model", "bert").strs("tokenizer.ggml.tokens", {"a"});
  EXPECT_NE(errorOf(bert).find("tokenizer model 'bert' is not supported"), std::string::npos);

  GgufBytes pre;
  pre.str("tokenizer.ggml.model", "gpt2")
      .str("tokenizer.ggml.pre", "falcon")
      .strs("tokenizer.ggml.tokens", {"a"})
      .strs("tokenizer.ggml.merges", {});
  EXPECT_NE(errorOf(pre).find("'tokenizer.ggml.pre' = 'falcon' is not supported (supported: "
                              "llama-bpe, qwen2, default, gpt2)"),
            std::string::npos);

  EXPECT_NE(errorOf(gpt2({"a", "b"}, {"a b"})).find("merge 0 'a b' names a piece not in"),
            std::string::npos);

  GgufBytes bos = gpt2({"a", "b", "ab"}, {"a b"});
  bos.u32("tokenizer.ggml.bos_token_id", 99);
  EXPECT_NE(errorOf(bos).find("'tokenizer.ggml.bos_token_id' = 99 is outside the vocabulary of 3"),
            std::string::npos);

  GgufBytes types = gpt2({"a", "b", "ab"}, {"a b"});
  types.i32s("tokenizer.ggml.token_type", {1, 1});
  EXPECT_NE(errorOf(types).find("has 2 entries for 3 tokens"), std::string::npos);

  GgufBytes ints;
  ints.str("tokenizer.ggml.model", "gpt2").i32s("tokenizer.ggml.tokens", {1, 2});
  EXPECT_NE(errorOf(ints).find("'tokenizer.ggml.tokens' must be an array of string"),
            std::string::npos);

  GgufBytes empty = gpt2({}, {});
  EXPECT_NE(errorOf(empty).find("the vocabulary is empty"), std::string::npos);
}

} // namespace
