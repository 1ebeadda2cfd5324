//===- Unicode.cpp - UTF-8, NFC, GPT-2's byte map, PCRE2 split regexes -----===//
#define PCRE2_CODE_UNIT_WIDTH 8
#include "text/Model.h"

#include "ir/Diag.h"

#include "llvm/ADT/Twine.h"

#include <pcre2.h>
#include <unicode/unorm2.h>
#include <unicode/ustring.h>

using namespace llvm;

namespace fg::text {

// The split patterns as the families' tokenizer.json files write them (and
// llama.cpp's llama-vocab.cpp for the same `tokenizer.ggml.pre` names).
const char *const kLlama3SplitPattern =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
const char *const kQwen2SplitPattern =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
const char *const kGpt2SplitPattern =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

size_t utf8Length(unsigned char lead) {
  if (lead < 0x80)
    return 1;
  if ((lead & 0xE0) == 0xC0)
    return 2;
  if ((lead & 0xF0) == 0xE0)
    return 3;
  if ((lead & 0xF8) == 0xF0)
    return 4;
  return 1;
}

/// The length of the valid UTF-8 sequence at `i`, 0 when invalid; `prefix`
/// set when the bytes end inside a sequence that is valid so far.
static size_t validSequence(StringRef s, size_t i, bool &prefix) {
  prefix = false;
  unsigned char c = s[i];
  if (c < 0x80)
    return 1;
  size_t n;
  uint32_t cp, min;
  if (c >= 0xC2 && c <= 0xDF)
    n = 2, cp = c & 0x1F, min = 0x80;
  else if ((c & 0xF0) == 0xE0)
    n = 3, cp = c & 0x0F, min = 0x800;
  else if (c >= 0xF0 && c <= 0xF4)
    n = 4, cp = c & 0x07, min = 0x10000;
  else
    return 0;
  for (size_t k = 1; k < n; ++k) {
    if (i + k >= s.size()) {
      prefix = true;
      return 0;
    }
    unsigned char cc = s[i + k];
    if ((cc & 0xC0) != 0x80)
      return 0;
    cp = (cp << 6) | (cc & 0x3F);
    // Reject overlong forms, surrogates and > U+10FFFF as early as possible.
    if (k == 1) {
      if (n == 3 && c == 0xE0 && cc < 0xA0)
        return 0;
      if (n == 3 && c == 0xED && cc >= 0xA0)
        return 0;
      if (n == 4 && c == 0xF0 && cc < 0x90)
        return 0;
      if (n == 4 && c == 0xF4 && cc >= 0x90)
        return 0;
    }
  }
  return cp >= min ? n : 0;
}

std::optional<size_t> firstInvalidUtf8(StringRef s) {
  for (size_t i = 0; i < s.size();) {
    bool prefix;
    size_t n = validSequence(s, i, prefix);
    if (n == 0)
      return i;
    i += n;
  }
  return std::nullopt;
}

std::string toValidUtf8(StringRef s) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size();) {
    bool prefix;
    size_t n = validSequence(s, i, prefix);
    if (n) {
      out.append(s.data() + i, n);
      i += n;
      continue;
    }
    out += "\xEF\xBF\xBD"; // U+FFFD for the maximal invalid subpart
    size_t skip = 1;
    // A truncated but valid-so-far sequence is one subpart.
    size_t want = utf8Length(static_cast<unsigned char>(s[i]));
    while (skip < want && i + skip < s.size()) {
      bool p;
      validSequence(s.substr(i, skip + 1), 0, p);
      if (!p)
        break; // s[i, i + skip] is no longer the start of a valid sequence
      ++skip;
    }
    i += skip;
  }
  return out;
}

size_t completeUtf8Prefix(StringRef s) {
  // Look back at most 3 bytes for a lead byte whose sequence is cut short.
  for (size_t back = 1; back <= 3 && back <= s.size(); ++back) {
    size_t i = s.size() - back;
    unsigned char c = s[i];
    if ((c & 0xC0) == 0x80)
      continue; // a continuation byte: keep looking for its lead
    bool prefix;
    validSequence(s, i, prefix);
    return prefix ? i : s.size();
  }
  return s.size();
}

uint32_t decodeUtf8(StringRef s, size_t &len) {
  unsigned char c = s[0];
  len = std::min(utf8Length(c), s.size());
  if (len == 1)
    return c;
  uint32_t cp = c & (0xFF >> (len + 1));
  for (size_t k = 1; k < len; ++k)
    cp = (cp << 6) | (static_cast<unsigned char>(s[k]) & 0x3F);
  return cp;
}

static void appendUtf8(std::string &out, uint32_t cp) {
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

namespace {
/// GPT-2's bytes_to_unicode: printable Latin-1 bytes stand for themselves,
/// the others for U+0100 upwards in byte order.
struct ByteMap {
  std::array<std::string, 256> toChar;
  std::array<int, 324> toByte; // code points < 324
  ByteMap() {
    toByte.fill(-1);
    int next = 256;
    for (int b = 0; b < 256; ++b) {
      bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE);
      uint32_t cp = printable ? b : next++;
      appendUtf8(toChar[b], cp);
      toByte[cp] = b;
    }
  }
};
const ByteMap &byteMap() {
  static const ByteMap m;
  return m;
}
} // namespace

const std::array<std::string, 256> &byteToUnicode() { return byteMap().toChar; }

int unicodeToByte(uint32_t cp) { return cp < 324 ? byteMap().toByte[cp] : -1; }

Expected<std::string> nfc(StringRef s) {
  UErrorCode err = U_ZERO_ERROR;
  const UNormalizer2 *norm = unorm2_getNFCInstance(&err);
  if (U_FAILURE(err))
    return makeError(Twine("ICU has no NFC normalizer: ") + u_errorName(err));
  int32_t n16 = 0;
  u_strFromUTF8(nullptr, 0, &n16, s.data(), static_cast<int32_t>(s.size()), &err);
  if (err != U_BUFFER_OVERFLOW_ERROR && U_FAILURE(err))
    return makeError(Twine("NFC: ") + u_errorName(err));
  err = U_ZERO_ERROR;
  std::vector<UChar> in(n16 + 1);
  u_strFromUTF8(in.data(), n16 + 1, nullptr, s.data(), static_cast<int32_t>(s.size()), &err);
  if (unorm2_isNormalized(norm, in.data(), n16, &err) && U_SUCCESS(err))
    return s.str();
  err = U_ZERO_ERROR;
  int32_t outLen = unorm2_normalize(norm, in.data(), n16, nullptr, 0, &err);
  err = U_ZERO_ERROR;
  std::vector<UChar> out(outLen + 1);
  unorm2_normalize(norm, in.data(), n16, out.data(), outLen + 1, &err);
  if (U_FAILURE(err))
    return makeError(Twine("NFC: ") + u_errorName(err));
  int32_t n8 = 0;
  u_strToUTF8(nullptr, 0, &n8, out.data(), outLen, &err);
  err = U_ZERO_ERROR;
  std::string r(n8, '\0');
  u_strToUTF8(r.data(), n8 + 1, nullptr, out.data(), outLen, &err);
  if (U_FAILURE(err) && err != U_STRING_NOT_TERMINATED_WARNING)
    return makeError(Twine("NFC: ") + u_errorName(err));
  return r;
}

// --- PCRE2 ------------------------------------------------------------------------

Expected<std::shared_ptr<SplitRegex>> SplitRegex::compile(StringRef pattern) {
  int errCode = 0;
  PCRE2_SIZE errOffset = 0;
  pcre2_code *code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(),
                                   PCRE2_UTF | PCRE2_UCP, &errCode, &errOffset, nullptr);
  if (!code) {
    PCRE2_UCHAR msg[256];
    pcre2_get_error_message(errCode, msg, sizeof msg);
    return makeError("split regex '" + pattern + "' at offset " + Twine(errOffset) + ": " +
                     reinterpret_cast<const char *>(msg));
  }
  pcre2_jit_compile(code, PCRE2_JIT_COMPLETE); // the interpreter stays when JIT is unavailable
  std::shared_ptr<SplitRegex> r(new SplitRegex());
  r->pattern_ = pattern.str();
  r->code_ = code;
  return r;
}

SplitRegex::~SplitRegex() { pcre2_code_free(static_cast<pcre2_code *>(code_)); }

Error SplitRegex::split(StringRef text, std::vector<StringRef> &out) const {
  auto *code = static_cast<pcre2_code *>(code_);
  pcre2_match_data *md = pcre2_match_data_create_from_pattern(code, nullptr);
  if (!md)
    return makeError("out of memory for PCRE2 match data");
  auto subject = reinterpret_cast<PCRE2_SPTR>(text.data());
  size_t pos = 0, gapStart = 0;
  Error err = Error::success();
  while (pos < text.size()) {
    int rc = pcre2_match(code, subject, text.size(), pos, PCRE2_NO_UTF_CHECK, md, nullptr);
    if (rc == PCRE2_ERROR_NOMATCH)
      break;
    if (rc < 0) {
      PCRE2_UCHAR msg[256];
      pcre2_get_error_message(rc, msg, sizeof msg);
      err = makeError(Twine("split regex: ") + reinterpret_cast<const char *>(msg));
      break;
    }
    PCRE2_SIZE *ov = pcre2_get_ovector_pointer(md);
    size_t b = ov[0], e = ov[1];
    if (e == b) { // an empty match: step over one character
      pos = b + utf8Length(static_cast<unsigned char>(text[b]));
      continue;
    }
    if (b > gapStart)
      out.push_back(text.slice(gapStart, b));
    out.push_back(text.slice(b, e));
    pos = gapStart = e;
  }
  if (gapStart < text.size())
    out.push_back(text.substr(gapStart));
  pcre2_match_data_free(md);
  return err;
}

} // namespace fg::text
