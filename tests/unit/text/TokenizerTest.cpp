//===- TokenizerTest.cpp - ids equal to Hugging Face tokenizers, per family --===//
//
// tests/text/fixtures/<family>/ holds a tokenizer trained with `tokenizers`
// (tokenizer.json), its GGUF twin (tokenizer.gguf, written with the `gguf`
// package) and the ids `tokenizers` gives for a multilingual corpus
// (expected.json); tests/text/gen_tokenizers.py writes all three. Both files of
// each family must give exactly those ids, with special tokens kept as text,
// parsed, and without BOS, and decode them back to the same text.
//
//===----------------------------------------------------------------------===//
#include "text/Tokenizer.h"

#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Program.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cstdlib>
#include <string>
#include <vector>

using namespace fg;
using namespace fg::text;
using Json = nlohmann::json;

namespace {

std::string fixtures() { return std::string(FG_SOURCE_DIR) + "/tests/text/fixtures"; }

struct Case {
  std::string family, file; // file: tokenizer.json | tokenizer.gguf
};

void PrintTo(const Case &c, std::ostream *os) { *os << c.family << "/" << c.file; }

std::string caseName(const testing::TestParamInfo<Case> &info) {
  return info.param.family + (llvm::StringRef(info.param.file).endswith(".gguf") ? "_gguf" : "_json");
}

Tokenizer load(const Case &c) {
  std::string path = fixtures() + "/" + c.family + "/" + c.file;
  llvm::Expected<Tokenizer> t = llvm::StringRef(c.file).endswith(".gguf")
                                    ? Tokenizer::fromGgufPath(path)
                                    : Tokenizer::fromHfJsonPath(path);
  if (!t) {
    ADD_FAILURE() << llvm::toString(t.takeError());
    std::abort();
  }
  return std::move(*t);
}

Json expected(const std::string &family) {
  auto buf = llvm::MemoryBuffer::getFile(fixtures() + "/" + family + "/expected.json");
  EXPECT_TRUE(bool(buf)) << family;
  if (!buf)
    return Json();
  return Json::parse((*buf)->getBuffer().begin(), (*buf)->getBuffer().end());
}

std::vector<int32_t> ids(const Json &j) { return j.get<std::vector<int32_t>>(); }

class FamilyTokenizer : public testing::TestWithParam<Case> {};

/// Encoding gives the ids of `tokenizers` for every text of the corpus: special
/// tokens kept as text (the default), parsed when asked, and without BOS/EOS.
TEST_P(FamilyTokenizer, EncodeMatchesHuggingFace) {
  Tokenizer tok = load(GetParam());
  Json want = expected(GetParam().family);
  ASSERT_TRUE(want.contains("texts"));
  ASSERT_GE(want["texts"].size(), 30u);
  for (const Json &c : want["texts"]) {
    std::string text = c["text"];
    SCOPED_TRACE("text: \"" + text + "\"");
    llvm::Expected<std::vector<int32_t>> plain = tok.encode(text);
    ASSERT_TRUE(bool(plain)) << llvm::toString(plain.takeError());
    EXPECT_EQ(*plain, ids(c["ids"]));
    EncodeOptions special;
    special.parseSpecial = true;
    llvm::Expected<std::vector<int32_t>> parsed = tok.encode(text, special);
    ASSERT_TRUE(bool(parsed)) << llvm::toString(parsed.takeError());
    EXPECT_EQ(*parsed, ids(c["ids_parse_special"]));
    EncodeOptions bare;
    bare.addSpecial = false;
    llvm::Expected<std::vector<int32_t>> noBos = tok.encode(text, bare);
    ASSERT_TRUE(bool(noBos)) << llvm::toString(noBos.takeError());
    EXPECT_EQ(*noBos, ids(c["ids_no_bos"]));
  }
}

/// Decoding gives the text of `tokenizers` (special tokens printed, or
/// skipped), and a streaming decoder fed one id at a time gives the same text.
TEST_P(FamilyTokenizer, DecodeAndStreamMatchHuggingFace) {
  Tokenizer tok = load(GetParam());
  Json want = expected(GetParam().family);
  for (const Json &c : want["texts"]) {
    std::string text = c["text"];
    SCOPED_TRACE("text: \"" + text + "\"");
    std::vector<int32_t> plain = ids(c["ids"]);
    EXPECT_EQ(tok.decode(plain), c["decoded"].get<std::string>());
    EXPECT_EQ(tok.decode(ids(c["ids_parse_special"]), /*skipSpecial=*/true),
              c["decoded_skip_special"].get<std::string>());
    StreamDecoder sd(tok);
    std::string streamed;
    for (int32_t id : plain) {
      std::string piece = sd.push(id);
      // Every piece is whole UTF-8 (an incomplete sequence is held back).
      EXPECT_EQ(toValidUtf8(piece), piece);
      streamed += piece;
    }
    streamed += sd.flush();
    EXPECT_EQ(streamed, tok.decode(plain));
  }
}

/// BOS, EOS and the end-of-generation set come from the metadata.
TEST_P(FamilyTokenizer, SpecialTokenIds) {
  Tokenizer tok = load(GetParam());
  const std::string &f = GetParam().family;
  auto id = [&](llvm::StringRef text) {
    for (int32_t i = 0; i < tok.vocabSize(); ++i)
      if (tok.tokenText(i) == text)
        return i;
    return -1;
  };
  if (f == "llama3") {
    EXPECT_EQ(tok.bos(), id("<|begin_of_text|>"));
    EXPECT_TRUE(tok.isEndOfGeneration(id("<|eot_id|>")));
    EXPECT_TRUE(tok.isEndOfGeneration(id("<|end_of_text|>")));
  } else if (f == "qwen2") {
    EXPECT_EQ(tok.bos(), -1);
    EXPECT_TRUE(tok.isEndOfGeneration(id("<|im_end|>")));
    EXPECT_TRUE(tok.isEndOfGeneration(id("<|endoftext|>")));
  } else if (f == "llama2") {
    EXPECT_EQ(tok.bos(), id("<s>"));
    EXPECT_TRUE(tok.isEndOfGeneration(id("</s>")));
  } else if (f == "gpt2") {
    EXPECT_EQ(tok.bos(), -1);
    EXPECT_TRUE(tok.isEndOfGeneration(id("<|endoftext|>")));
  } else {
    EXPECT_EQ(tok.bos(), id("<bos>"));
    EXPECT_TRUE(tok.isEndOfGeneration(id("<end_of_turn>")));
  }
  EXPECT_GE(tok.bos() >= 0 ? tok.bos() : 0, 0);
  EXPECT_FALSE(tok.isEndOfGeneration(id("a") >= 0 ? id("a") : id("Ġa")));
  EXPECT_EQ(tok.attr(tok.eos() >= 0 ? tok.eos() : 0), tok.eos() >= 0 ? TokenAttr::Control
                                                                      : tok.attr(0));
}

std::vector<Case> allCases() {
  std::vector<Case> cs;
  for (const char *f : {"llama3", "qwen2", "llama2", "gemma", "gpt2"})
    for (const char *file : {"tokenizer.json", "tokenizer.gguf"})
      cs.push_back({f, file});
  return cs;
}

INSTANTIATE_TEST_SUITE_P(Families, FamilyTokenizer, testing::ValuesIn(allCases()), caseName);

Tokenizer family(const char *f, const char *file = "tokenizer.gguf") { return load({f, file}); }

/// ignore_merges (llama3): a piece that is a whole vocabulary entry with no
/// merge path to it is one token; the same vocabulary without the flag
/// (qwen2's rules, no entry) splits it.
TEST(Tokenizer, IgnoreMergesTakesWholeVocabularyEntries) {
  Tokenizer llama3 = family("llama3");
  EncodeOptions bare;
  bare.addSpecial = false;
  auto one = llama3.encode(" supercalifragilistic", bare);
  ASSERT_TRUE(bool(one));
  ASSERT_EQ(one->size(), 1u);
  EXPECT_EQ(llama3.tokenText((*one)[0]), "Ġsupercalifragilistic");
  auto qwen = family("qwen2").encode(" supercalifragilistic", bare);
  ASSERT_TRUE(bool(qwen));
  EXPECT_GT(qwen->size(), 1u);
}

/// gemma's add_space_prefix = false: no U+2581 before the first word; llama2
/// adds one (and decode drops it again).
TEST(Tokenizer, SpacePrefixFollowsMetadata) {
  EncodeOptions bare;
  bare.addSpecial = false;
  auto g = family("gemma").encode("Hello", bare);
  auto l = family("llama2").encode("Hello", bare);
  ASSERT_TRUE(bool(g) && bool(l));
  Tokenizer gemma = family("gemma"), llama2 = family("llama2");
  EXPECT_FALSE(gemma.tokenText(g->front()).startswith("\xE2\x96\x81"));
  EXPECT_TRUE(llama2.tokenText(l->front()).startswith("\xE2\x96\x81"));
  EXPECT_EQ(llama2.decode(*l), "Hello");
  EXPECT_EQ(gemma.decode(*g), "Hello");
}

/// Characters outside the vocabulary become <0xXX> byte tokens (byte
/// fallback), and decode joins the bytes back into the character.
TEST(Tokenizer, ByteFallback) {
  Tokenizer t = family("llama2");
  EncodeOptions bare;
  bare.addSpecial = false;
  auto ids = t.encode("\xF0\x9F\xA6\x80", bare); // U+1F980, not in the corpus
  ASSERT_TRUE(bool(ids));
  ASSERT_EQ(ids->size(), 5u); // ▁ then four bytes
  for (size_t i = 1; i < 5; ++i)
    EXPECT_EQ(t.attr((*ids)[i]), TokenAttr::Byte);
  EXPECT_EQ(t.tokenText((*ids)[1]), "<0xF0>");
  EXPECT_EQ(t.decode(*ids), "\xF0\x9F\xA6\x80");
}

/// The streaming decoder holds back an incomplete UTF-8 sequence until its
/// last byte arrives, then gives the whole character.
TEST(Tokenizer, StreamHoldsBackIncompleteUtf8) {
  Tokenizer t = family("llama2");
  EncodeOptions bare;
  bare.addSpecial = false;
  auto ids = t.encode("a\xF0\x9F\xA6\x80z", bare);
  ASSERT_TRUE(bool(ids));
  StreamDecoder sd(t);
  std::vector<std::string> pieces;
  for (int32_t id : *ids)
    pieces.push_back(sd.push(id));
  std::string joined;
  for (const std::string &p : pieces)
    joined += p;
  joined += sd.flush();
  EXPECT_EQ(joined, "a\xF0\x9F\xA6\x80z");
  // The three ids carrying F0, 9F, A6 give nothing; the one with 80 the emoji.
  int empty = 0;
  for (const std::string &p : pieces)
    empty += p.empty();
  EXPECT_GE(empty, 3);
  bool whole = false;
  for (const std::string &p : pieces)
    whole |= llvm::StringRef(p).contains("\xF0\x9F\xA6\x80");
  EXPECT_TRUE(whole);
  // Cut short for good, the held bytes come out as U+FFFD.
  StreamDecoder cut(t);
  ASSERT_EQ(t.tokenText((*ids)[1]), "<0xF0>");
  std::string out = cut.push((*ids)[1]);
  out += cut.push((*ids)[2]);
  EXPECT_EQ(out, "");
  EXPECT_EQ(cut.flush(), "\xEF\xBF\xBD");
}

/// Special tokens are never parsed out of user text unless asked.
TEST(Tokenizer, SpecialTokensOnlyWhenAsked) {
  Tokenizer t = family("qwen2", "tokenizer.json");
  auto plain = t.encode("<|im_start|>");
  EncodeOptions special;
  special.parseSpecial = true;
  auto parsed = t.encode("<|im_start|>", special);
  ASSERT_TRUE(bool(plain) && bool(parsed));
  EXPECT_GT(plain->size(), 1u);
  for (int32_t id : *plain)
    EXPECT_NE(t.attr(id), TokenAttr::Control);
  ASSERT_EQ(parsed->size(), 1u);
  EXPECT_EQ(t.tokenText((*parsed)[0]), "<|im_start|>");
  EXPECT_EQ(t.attr((*parsed)[0]), TokenAttr::Control);
}

TEST(Tokenizer, InvalidUtf8IsAnError) {
  Tokenizer t = family("llama3");
  auto r = t.encode("ok \xC3\x28 bad");
  ASSERT_FALSE(bool(r));
  EXPECT_NE(llvm::toString(r.takeError()).find("not valid UTF-8 (byte 3)"), std::string::npos);
}

TEST(Tokenizer, Utf8Helpers) {
  EXPECT_EQ(completeUtf8Prefix("ab\xE2\x82"), 2u);
  EXPECT_EQ(completeUtf8Prefix("ab\xE2\x82\xAC"), 5u);
  EXPECT_EQ(completeUtf8Prefix("ab\xFF"), 3u); // invalid, not incomplete: nothing to wait for
  EXPECT_EQ(toValidUtf8("a\xE2\x82z"), "a\xEF\xBF\xBDz");
  EXPECT_EQ(toValidUtf8("a\xC0\xAFz"), "a\xEF\xBF\xBD\xEF\xBF\xBDz");
}

/// Models without a tokenizer say so and point at --prompt-ids.
TEST(Tokenizer, ModelsWithoutTokenizer) {
  for (const char *m : {"demo", "w-tiny", "model.fg"}) {
    auto t = Tokenizer::forModel(m);
    ASSERT_FALSE(bool(t));
    std::string msg = llvm::toString(t.takeError());
    EXPECT_NE(msg.find("has no tokenizer"), std::string::npos) << msg;
    EXPECT_NE(msg.find("--prompt-ids"), std::string::npos) << msg;
  }
  // A folder without tokenizer.json.
  auto t = Tokenizer::forModel(fixtures());
  ASSERT_FALSE(bool(t));
  EXPECT_NE(llvm::toString(t.takeError()).find("no tokenizer.json"), std::string::npos);
}

/// Unsupported tokenizer descriptions are errors naming what is supported.
TEST(Tokenizer, UnsupportedHfModelIsAnError) {
  auto t = Tokenizer::fromHfJson(R"({"model": {"type": "Unigram", "vocab": []}})", "t.json");
  ASSERT_FALSE(bool(t));
  EXPECT_NE(llvm::toString(t.takeError()).find("model type 'Unigram' is not supported"),
            std::string::npos);
  auto bad = Tokenizer::fromHfJson("{", "t.json");
  ASSERT_FALSE(bool(bad));
  EXPECT_NE(llvm::toString(bad.takeError()).find("t.json: error: malformed JSON"),
            std::string::npos);
  auto merge = Tokenizer::fromHfJson(
      R"({"model": {"type": "BPE", "vocab": {"a": 0, "b": 1}, "merges": ["a b"]}})", "t.json");
  ASSERT_FALSE(bool(merge));
  EXPECT_NE(llvm::toString(merge.takeError()).find("merge 0 ('a', 'b') names a piece not in"),
            std::string::npos);
}

/// The expected ids are what `tokenizers` gives today: gen_tokenizers.py
/// --check recomputes them (skips without Python or the package).
TEST(Tokenizer, FixturesRegenerateWithHuggingFace) {
  const char *py = std::getenv("FG_PYTHON");
  auto exe = llvm::sys::findProgramByName(py ? py : "python3");
  if (!exe)
    GTEST_SKIP() << "no python3 on PATH";
  std::string script = std::string(FG_SOURCE_DIR) + "/tests/text/gen_tokenizers.py";
  llvm::SmallString<128> log;
  llvm::sys::fs::createTemporaryFile("fg-tok", "log", log);
  std::string dir = fixtures();
  llvm::StringRef args[] = {*exe, script, "--check", dir};
  llvm::Optional<llvm::StringRef> redirects[] = {llvm::None, llvm::StringRef(log),
                                                 llvm::StringRef(log)};
  int rc = llvm::sys::ExecuteAndWait(*exe, args, llvm::None, redirects);
  auto out = llvm::MemoryBuffer::getFile(log);
  std::string msg = out ? (*out)->getBuffer().trim().str() : "";
  llvm::sys::fs::remove(log);
  if (rc == 3)
    GTEST_SKIP() << msg;
  EXPECT_EQ(rc, 0) << msg;
}

} // namespace
