//===- Model.h - a tokenizer's vocabulary and rules (text/ internal) -*- C++ -*-===//
//
// What the loaders (LoadGguf.cpp, LoadHf.cpp) fill and Tokenizer.cpp runs.
// Unicode helpers (Unicode.cpp): UTF-8 checks, NFC (ICU), GPT-2's byte <->
// character map and the PCRE2 split regexes of the byte-level families.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "text/Tokenizer.h"

#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringMap.h"

#include <array>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace fg::text {

/// A compiled PCRE2 pattern (UTF + UCP, JIT when available).
class SplitRegex {
public:
  static llvm::Expected<std::shared_ptr<SplitRegex>> compile(llvm::StringRef pattern);
  ~SplitRegex();
  /// Splits `text` (valid UTF-8) into the matches and the gaps between them
  /// (tokenizers' Split with behavior Isolated), appending to `out`.
  llvm::Error split(llvm::StringRef text, std::vector<llvm::StringRef> &out) const;
  const std::string &pattern() const { return pattern_; }

private:
  SplitRegex() = default;
  std::string pattern_;
  void *code_ = nullptr; ///< pcre2_code_8
};

/// The split patterns of the pre-tokenizers fusegraph knows by name (GGUF
/// `tokenizer.ggml.pre`).
extern const char *const kLlama3SplitPattern;
extern const char *const kQwen2SplitPattern;
extern const char *const kGpt2SplitPattern;

/// The byte offset of the first invalid UTF-8 sequence, nullopt when valid.
std::optional<size_t> firstInvalidUtf8(llvm::StringRef s);
/// The byte length of the UTF-8 sequence that starts with `lead` (1 for a
/// stray byte).
size_t utf8Length(unsigned char lead);
/// NFC of valid UTF-8 (ICU).
llvm::Expected<std::string> nfc(llvm::StringRef s);
/// GPT-2's bytes_to_unicode: byte -> the UTF-8 of its printable stand-in.
const std::array<std::string, 256> &byteToUnicode();
/// The inverse: the stand-in character's code point -> byte, -1 when none.
int unicodeToByte(uint32_t codePoint);
/// Decodes one UTF-8 sequence at `s` (valid), returning the code point and
/// advancing `len`.
uint32_t decodeUtf8(llvm::StringRef s, size_t &len);

struct Tokenizer::Model {
  enum class Kind { SentencePiece, ByteLevel };
  enum class MergeBy { Rank, Score };
  Kind kind = Kind::ByteLevel;
  MergeBy mergeBy = MergeBy::Rank;
  std::string source; ///< for describe(): "gguf llama", "tokenizer.json byte-level BPE"

  std::vector<std::string> pieces;
  std::vector<float> scores; ///< MergeBy::Score
  std::vector<TokenAttr> attrs;
  llvm::StringMap<int32_t> ids;
  /// (left id << 32 | right id) -> (rank, merged id). MergeBy::Rank.
  llvm::DenseMap<uint64_t, std::pair<int32_t, int32_t>> merges;

  bool byteFallback = false;
  bool fuseUnk = false;
  bool ignoreMerges = false;
  bool nfc = false;
  /// SentencePiece: prepend U+2581 to each non-empty text segment (or only to
  /// the first segment of the text with `spacePrefixFirstOnly`).
  bool spacePrefix = false;
  bool spacePrefixFirstOnly = false;
  bool stripLeadingSpace = false; ///< decode drops one leading space
  std::vector<std::shared_ptr<SplitRegex>> splits;
  std::string splitName; ///< "llama3", "qwen2", "gpt2", "tokenizer.json"

  int32_t bos = -1, eos = -1, unk = -1;
  bool addBos = false, addEos = false;
  llvm::SmallVector<int32_t, 4> eog;
  std::array<int32_t, 256> byteIds; ///< <0xXX> tokens, -1 when absent

  /// Tokens split out of the text before pre-tokenising, longest first,
  /// bucketed by first byte; `always` for user-defined ones.
  struct SplitToken {
    std::string text;
    int32_t id;
    bool always;
  };
  std::array<std::vector<SplitToken>, 256> splitTokens;

  int32_t lookup(llvm::StringRef piece) const {
    auto it = ids.find(piece);
    return it == ids.end() ? -1 : it->second;
  }
  /// After pieces, attrs (and scores) are set: builds ids (a piece listed
  /// twice keeps its first id), byteIds, the split tokens and the
  /// end-of-generation set. Error: an empty vocabulary.
  llvm::Error finish();
};

} // namespace fg::text
