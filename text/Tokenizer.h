//===- Tokenizer.h - text <-> token ids from a model's own metadata -*- C++ -*-===//
//
//   auto tok = fg::text::Tokenizer::forModel("model.gguf");   // or an HF folder
//   auto ids = tok->encode("Hello", {});                      // BOS as the model says
//   std::string s = tok->decode(*ids);
//   fg::text::StreamDecoder sd(*tok);  out << sd.push(id);    // whole UTF-8 only
//
// Two model kinds cover the families fusegraph loads (Families.def):
//  - SentencePiece-style BPE (GGUF `llama`; tokenizer.json BPE with byte_fallback
//    and a Prepend/Replace normalizer): spaces become U+2581, an optional space
//    prefix (gemma: none), pieces merged by score (GGUF) or merge rank (HF),
//    characters outside the vocabulary as <0xXX> byte tokens.
//  - byte-level BPE (GGUF `gpt2`; tokenizer.json BPE with a ByteLevel
//    pre-tokenizer): the text is split by the family's regex (PCRE2, UTF + UCP;
//    llama3, qwen2, gpt2), each piece's bytes mapped to GPT-2's printable
//    alphabet, then merged by rank; `ignore_merges` (llama3) takes a piece that
//    is a whole vocabulary entry as is. qwen2's NFC normalizer runs first (ICU).
// Special (control) tokens are split out of the text before anything else only
// when EncodeOptions::parseSpecial asks; by default their text is tokenized as
// ordinary text. User-defined (non-special added) tokens are always split out,
// as in `tokenizers`.
//
// The ids equal those of the Hugging Face `tokenizers` library on the same
// tokenizer (tests/unit/text, fixtures from tests/text/gen_tokenizers.py).
// Errors are llvm::Error; nothing prints.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace fg {
class GgufFile;
}

namespace fg::text {

/// What a token is (GGUF `tokenizer.ggml.token_type`, tokenizer.json added_tokens).
enum class TokenAttr : uint8_t {
  Normal = 1,
  Unknown = 2,
  Control = 3,     ///< special: <s>, <|eot_id|>; split out only when asked
  UserDefined = 4, ///< added, not special: always split out
  Unused = 5,
  Byte = 6, ///< <0xXX> byte fallback
};

struct EncodeOptions {
  /// Prepend BOS (and append EOS) as the tokenizer's metadata says
  /// (`add_bos_token`; tokenizer.json's TemplateProcessing).
  bool addSpecial = true;
  /// Recognise special tokens written in the text (`<|im_start|>`); off by
  /// default: user text never produces control tokens unless asked.
  bool parseSpecial = false;
};

class Tokenizer {
public:
  struct Model; // the loaded vocabulary and rules (Tokenizer.cpp)

  /// From GGUF `tokenizer.ggml.*` metadata (model `llama` or `gpt2`).
  static llvm::Expected<Tokenizer> fromGguf(const GgufFile &file);
  static llvm::Expected<Tokenizer> fromGgufPath(llvm::StringRef path);
  /// From a Hugging Face tokenizer.json (its text; `name` for messages).
  static llvm::Expected<Tokenizer> fromHfJson(llvm::StringRef json, llvm::StringRef name);
  static llvm::Expected<Tokenizer> fromHfJsonPath(llvm::StringRef path);
  /// The tokenizer of a model: a .gguf file's metadata, an HF folder's
  /// tokenizer.json (end-of-sequence ids also from its config.json and
  /// generation_config.json), or a tokenizer.json file. Errors say why none
  /// exists (built-in models, workloads, .fg files).
  static llvm::Expected<Tokenizer> forModel(llvm::StringRef model);

  /// Text (UTF-8) -> ids. Errors: text that is not valid UTF-8, a character
  /// with no token and no byte fallback.
  llvm::Expected<std::vector<int32_t>> encode(llvm::StringRef text,
                                              const EncodeOptions &opts = {}) const;
  /// Ids -> text; invalid UTF-8 from byte tokens becomes U+FFFD. Special
  /// tokens print as their text unless `skipSpecial`. Out-of-range ids are
  /// skipped.
  std::string decode(llvm::ArrayRef<int32_t> ids, bool skipSpecial = false) const;
  /// The bytes one token stands for (no space-prefix stripping).
  std::string tokenBytes(int32_t id) const;

  int64_t vocabSize() const;
  llvm::StringRef tokenText(int32_t id) const; ///< as stored in the vocabulary
  TokenAttr attr(int32_t id) const;
  int32_t bos() const; ///< -1 when none
  int32_t eos() const; ///< -1 when none
  /// End of generation: EOS, EOT/EOM and the control tokens named like
  /// <|eot_id|>, <|im_end|>, <end_of_turn>, <|endoftext|>.
  bool isEndOfGeneration(int32_t id) const;
  /// "gguf llama", "hf byte-level bpe (llama3 regex)": for messages.
  std::string describe() const;
  /// Whether decode() drops one leading space of the text (a space prefix).
  bool stripsLeadingSpace() const;

  explicit Tokenizer(std::shared_ptr<const Model> m) : m_(std::move(m)) {}

private:
  std::shared_ptr<const Model> m_;
};

/// Turns a stream of generated ids into text as it comes, holding back an
/// incomplete UTF-8 sequence (a byte token, a split emoji) until it completes;
/// the text of all push() results plus flush() equals decode(all ids).
class StreamDecoder {
public:
  explicit StreamDecoder(const Tokenizer &tok, bool skipSpecial = false)
      : tok_(tok), skipSpecial_(skipSpecial) {}
  /// The text that is complete after `id` (possibly empty).
  std::string push(int32_t id);
  /// What is left (an incomplete sequence becomes U+FFFD).
  std::string flush();

private:
  const Tokenizer &tok_;
  bool skipSpecial_;
  bool first_ = true;
  std::string pending_;
};

/// What `run --prompt` streams: generated ids in, text out as it completes,
/// stopping at the end of generation (whose token is not written).
class TextStream {
public:
  TextStream(const Tokenizer &tok, std::function<void(llvm::StringRef)> write)
      : tok_(tok), decoder_(tok), write_(std::move(write)) {}
  /// Writes the text complete after `id`; false (nothing written) when `id`
  /// ends the generation.
  bool push(int32_t id);
  /// Writes what is held back.
  void flush();
  /// The end-of-generation token that stopped the stream, -1 if none.
  int32_t stoppedAt() const { return stoppedAt_; }

private:
  const Tokenizer &tok_;
  StreamDecoder decoder_;
  std::function<void(llvm::StringRef)> write_;
  int32_t stoppedAt_ = -1;
};

/// Bytes -> valid UTF-8: each maximal invalid subsequence becomes U+FFFD.
std::string toValidUtf8(llvm::StringRef bytes);
/// The length of the longest prefix of `bytes` that does not end inside an
/// incomplete (but so far valid) UTF-8 sequence.
size_t completeUtf8Prefix(llvm::StringRef bytes);

} // namespace fg::text
