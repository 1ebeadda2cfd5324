//===- Tokenizer.cpp - encode (special split, pre-tokenize, BPE) and decode -===//
//
// encode(text):
//   1. split out added tokens (user-defined always, control ones when
//      parseSpecial), longest match first;
//   2. each text segment: SentencePiece: spaces -> U+2581 (and the prefix);
//      byte-level: NFC when asked, the split regexes, bytes -> GPT-2 characters;
//   3. each piece: BPE over its characters, merging the best pair first
//      (lowest rank, or highest score of the merged piece; ties: leftmost),
//      then byte fallback (or <unk>) for what is not in the vocabulary;
//   4. BOS / EOS as the metadata says.
//
//===----------------------------------------------------------------------===//
#include "text/Model.h"

#include "ir/Diag.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FormatVariadic.h"

#include <algorithm>
#include <queue>

using namespace llvm;

namespace fg::text {

using Model = Tokenizer::Model;

static bool isEogName(StringRef s) {
  static const char *const kNames[] = {"</s>",          "<eos>",         "<|endoftext|>",
                                       "<|end_of_text|>", "<|eot_id|>",  "<|eom_id|>",
                                       "<|im_end|>",    "<end_of_turn>", "<|end|>"};
  return llvm::is_contained(kNames, s);
}

Error Model::finish() {
  if (pieces.empty())
    return makeError("the vocabulary is empty");
  if (attrs.size() < pieces.size())
    attrs.resize(pieces.size(), TokenAttr::Normal);
  ids.clear();
  for (size_t i = 0; i < pieces.size(); ++i)
    ids.try_emplace(pieces[i], static_cast<int32_t>(i));
  byteIds.fill(-1);
  for (int b = 0; b < 256; ++b) {
    int32_t id = lookup(formatv("<0x{0:X-2}>", b).str());
    if (id >= 0 && attrs[id] != TokenAttr::Normal && attrs[id] != TokenAttr::Byte)
      id = -1;
    byteIds[b] = id;
  }
  for (auto &bucket : splitTokens)
    bucket.clear();
  for (size_t i = 0; i < pieces.size(); ++i) {
    TokenAttr a = attrs[i];
    if ((a != TokenAttr::Control && a != TokenAttr::UserDefined) || pieces[i].empty())
      continue;
    splitTokens[static_cast<unsigned char>(pieces[i][0])].push_back(
        {pieces[i], static_cast<int32_t>(i), a == TokenAttr::UserDefined});
  }
  for (auto &bucket : splitTokens)
    llvm::stable_sort(bucket, [](const SplitToken &a, const SplitToken &b) {
      return a.text.size() > b.text.size();
    });
  auto addEog = [&](int32_t id) {
    if (id >= 0 && id < static_cast<int32_t>(pieces.size()) && !llvm::is_contained(eog, id))
      eog.push_back(id);
  };
  addEog(eos);
  for (size_t i = 0; i < pieces.size(); ++i)
    if (attrs[i] == TokenAttr::Control && isEogName(pieces[i]))
      addEog(static_cast<int32_t>(i));
  return Error::success();
}

namespace {

/// BPE over the characters of one piece.
class Merger {
public:
  explicit Merger(const Model &m) : m_(m) {}

  void run(StringRef word, std::vector<int32_t> &out) {
    if (m_.ignoreMerges) {
      int32_t whole = m_.lookup(word);
      if (whole >= 0) {
        out.push_back(whole);
        return;
      }
    }
    syms_.clear();
    for (size_t i = 0; i < word.size();) {
      size_t n = std::min(utf8Length(static_cast<unsigned char>(word[i])), word.size() - i);
      Sym s;
      s.text = word.substr(i, n);
      s.id = m_.lookup(s.text);
      s.prev = static_cast<int>(syms_.size()) - 1;
      s.next = static_cast<int>(syms_.size()) + 1;
      syms_.push_back(s);
      i += n;
    }
    if (syms_.empty())
      return;
    syms_.back().next = -1;
    queue_ = {};
    for (int i = 0; i + 1 < static_cast<int>(syms_.size()); ++i)
      tryPair(i, i + 1);
    while (!queue_.empty()) {
      Cand c = queue_.top();
      queue_.pop();
      Sym &l = syms_[c.left];
      if (l.text.empty() || l.next != c.right)
        continue;
      Sym &r = syms_[c.right];
      if (l.text.size() + r.text.size() != c.bytes)
        continue; // stale: one side grew since
      l.text = StringRef(l.text.data(), c.bytes);
      l.id = c.merged;
      l.next = r.next;
      if (r.next >= 0)
        syms_[r.next].prev = c.left;
      r.text = StringRef();
      if (l.prev >= 0)
        tryPair(l.prev, c.left);
      if (l.next >= 0)
        tryPair(c.left, l.next);
    }
    bool lastUnk = false;
    for (int i = 0; i >= 0; i = syms_[i].next) {
      const Sym &s = syms_[i];
      if (s.id >= 0) {
        out.push_back(s.id);
        lastUnk = false;
        continue;
      }
      if (m_.byteFallback && llvm::all_of(s.text, [&](char ch) {
            return m_.byteIds[static_cast<unsigned char>(ch)] >= 0;
          })) {
        for (char ch : s.text)
          out.push_back(m_.byteIds[static_cast<unsigned char>(ch)]);
        lastUnk = false;
        continue;
      }
      if (m_.unk < 0) {
        missing_ = s.text;
        continue;
      }
      if (!(m_.fuseUnk && lastUnk))
        out.push_back(m_.unk);
      lastUnk = true;
    }
  }
  /// A character with no token, no byte fallback and no <unk> (empty if none).
  StringRef missing() const { return missing_; }

private:
  struct Sym {
    StringRef text;
    int32_t id = -1;
    int prev = -1, next = -1;
  };
  struct Cand {
    double priority; ///< lower is better
    int left, right;
    size_t bytes;
    int32_t merged;
  };
  struct Worse {
    bool operator()(const Cand &a, const Cand &b) const {
      if (a.priority != b.priority)
        return a.priority > b.priority;
      return a.left > b.left;
    }
  };

  void tryPair(int left, int right) {
    const Sym &l = syms_[left], &r = syms_[right];
    if (l.id < 0 || r.id < 0)
      return;
    Cand c{0, left, right, l.text.size() + r.text.size(), -1};
    if (m_.mergeBy == Model::MergeBy::Rank) {
      auto it = m_.merges.find((uint64_t(uint32_t(l.id)) << 32) | uint32_t(r.id));
      if (it == m_.merges.end())
        return;
      c.priority = it->second.first;
      c.merged = it->second.second;
    } else {
      std::string joined = (l.text + r.text).str();
      int32_t id = m_.lookup(joined);
      if (id < 0 || (m_.attrs[id] != TokenAttr::Normal && m_.attrs[id] != TokenAttr::UserDefined))
        return;
      c.priority = -static_cast<double>(m_.scores.empty() ? 0.f : m_.scores[id]);
      c.merged = id;
    }
    queue_.push(c);
  }

  const Model &m_;
  std::vector<Sym> syms_;
  std::priority_queue<Cand, std::vector<Cand>, Worse> queue_;
  StringRef missing_;
};

/// One segment of text between split-out tokens, or a token.
struct Segment {
  StringRef text;
  int32_t token = -1;
};

void splitSpecial(const Model &m, StringRef text, bool parseSpecial,
                  std::vector<Segment> &out) {
  size_t start = 0;
  for (size_t i = 0; i < text.size();) {
    const Model::SplitToken *hit = nullptr;
    for (const Model::SplitToken &t : m.splitTokens[static_cast<unsigned char>(text[i])]) {
      if (!t.always && !parseSpecial)
        continue;
      if (text.substr(i).startswith(t.text)) {
        hit = &t;
        break;
      }
    }
    if (!hit) {
      ++i;
      continue;
    }
    if (i > start)
      out.push_back({text.slice(start, i), -1});
    out.push_back({StringRef(), hit->id});
    i += hit->text.size();
    start = i;
  }
  if (start < text.size())
    out.push_back({text.substr(start), -1});
}

} // namespace

Expected<std::vector<int32_t>> Tokenizer::encode(StringRef text, const EncodeOptions &opts) const {
  const Model &m = *m_;
  if (std::optional<size_t> bad = firstInvalidUtf8(text))
    return makeError("the text is not valid UTF-8 (byte " + Twine(*bad) + ")");
  std::vector<int32_t> out;
  if (opts.addSpecial && m.addBos && m.bos >= 0)
    out.push_back(m.bos);
  std::vector<Segment> segments;
  splitSpecial(m, text, opts.parseSpecial, segments);
  Merger merger(m);
  const std::array<std::string, 256> &bytes = byteToUnicode();
  bool firstSegment = true;
  for (const Segment &seg : segments) {
    if (seg.token >= 0) {
      out.push_back(seg.token);
      firstSegment = false;
      continue;
    }
    std::string normalized;
    StringRef s = seg.text;
    if (m.nfc) {
      Expected<std::string> n = nfc(s);
      if (!n)
        return n.takeError();
      normalized = std::move(*n);
      s = normalized;
    }
    if (m.kind == Model::Kind::SentencePiece) {
      std::string spm;
      if (m.spacePrefix && !s.empty() && (!m.spacePrefixFirstOnly || firstSegment))
        spm = "\xE2\x96\x81";
      for (char c : s) {
        if (c == ' ')
          spm += "\xE2\x96\x81";
        else
          spm += c;
      }
      merger.run(spm, out);
    } else {
      std::vector<StringRef> pieces{s};
      for (const auto &re : m.splits) {
        std::vector<StringRef> next;
        for (StringRef p : pieces)
          if (Error e = re->split(p, next))
            return e;
        pieces = std::move(next);
      }
      std::string mapped;
      for (StringRef p : pieces) {
        mapped.clear();
        for (char c : p)
          mapped += bytes[static_cast<unsigned char>(c)];
        merger.run(mapped, out);
      }
    }
    firstSegment = false;
    if (!merger.missing().empty())
      return makeError("the text has a character ('" + merger.missing() +
                       "') with no token, no byte fallback and no <unk>");
  }
  if (opts.addSpecial && m.addEos && m.eos >= 0)
    out.push_back(m.eos);
  return out;
}

std::string Tokenizer::tokenBytes(int32_t id) const {
  const Model &m = *m_;
  if (id < 0 || id >= static_cast<int32_t>(m.pieces.size()))
    return "";
  const std::string &p = m.pieces[id];
  switch (m.attrs[id]) {
  case TokenAttr::Byte: {
    unsigned v = 0;
    if (p.size() == 6 && StringRef(p).startswith("<0x") && !StringRef(p).substr(3, 2).getAsInteger(16, v))
      return std::string(1, static_cast<char>(v));
    return p;
  }
  case TokenAttr::Control:
  case TokenAttr::Unknown:
  case TokenAttr::Unused:
    return p;
  case TokenAttr::Normal:
  case TokenAttr::UserDefined:
    break;
  }
  if (m.kind == Model::Kind::SentencePiece) {
    std::string out;
    StringRef s = p;
    while (!s.empty()) {
      if (s.startswith("\xE2\x96\x81")) {
        out += ' ';
        s = s.drop_front(3);
      } else {
        out += s.front();
        s = s.drop_front();
      }
    }
    return out;
  }
  if (m.attrs[id] == TokenAttr::UserDefined)
    return p;
  // Byte-level: each character stands for one byte; others are kept.
  std::string out;
  StringRef s = p;
  while (!s.empty()) {
    if (firstInvalidUtf8(s.take_front(utf8Length(static_cast<unsigned char>(s[0]))))) {
      out += s.front();
      s = s.drop_front();
      continue;
    }
    size_t len;
    uint32_t cp = decodeUtf8(s, len);
    int b = unicodeToByte(cp);
    if (b >= 0)
      out += static_cast<char>(b);
    else
      out.append(s.data(), len);
    s = s.drop_front(len);
  }
  return out;
}

static bool isSkipped(TokenAttr a) {
  return a == TokenAttr::Control || a == TokenAttr::Unknown || a == TokenAttr::Unused;
}

std::string Tokenizer::decode(ArrayRef<int32_t> ids, bool skipSpecial) const {
  std::string raw;
  for (int32_t id : ids) {
    if (id < 0 || id >= vocabSize())
      continue;
    if (skipSpecial && isSkipped(attr(id)))
      continue;
    raw += tokenBytes(id);
  }
  if (m_->stripLeadingSpace && !raw.empty() && raw[0] == ' ')
    raw.erase(0, 1);
  return toValidUtf8(raw);
}

std::string StreamDecoder::push(int32_t id) {
  if (id < 0 || id >= tok_.vocabSize())
    return "";
  if (skipSpecial_ && isSkipped(tok_.attr(id)))
    return "";
  pending_ += tok_.tokenBytes(id);
  if (first_ && !pending_.empty()) {
    first_ = false;
    if (tok_.stripsLeadingSpace() && pending_[0] == ' ')
      pending_.erase(0, 1);
  }
  size_t n = completeUtf8Prefix(pending_);
  std::string out = toValidUtf8(StringRef(pending_).take_front(n));
  pending_.erase(0, n);
  return out;
}

std::string StreamDecoder::flush() {
  std::string out = toValidUtf8(pending_);
  pending_.clear();
  return out;
}

bool TextStream::push(int32_t id) {
  if (tok_.isEndOfGeneration(id)) {
    stoppedAt_ = id;
    return false;
  }
  std::string piece = decoder_.push(id);
  if (!piece.empty())
    write_(piece);
  return true;
}

void TextStream::flush() {
  std::string rest = decoder_.flush();
  if (!rest.empty())
    write_(rest);
}

int64_t Tokenizer::vocabSize() const { return static_cast<int64_t>(m_->pieces.size()); }
StringRef Tokenizer::tokenText(int32_t id) const {
  return id >= 0 && id < vocabSize() ? StringRef(m_->pieces[id]) : StringRef();
}
TokenAttr Tokenizer::attr(int32_t id) const {
  return id >= 0 && id < vocabSize() ? m_->attrs[id] : TokenAttr::Unused;
}
int32_t Tokenizer::bos() const { return m_->bos; }
int32_t Tokenizer::eos() const { return m_->eos; }
bool Tokenizer::isEndOfGeneration(int32_t id) const { return llvm::is_contained(m_->eog, id); }
bool Tokenizer::stripsLeadingSpace() const { return m_->stripLeadingSpace; }
std::string Tokenizer::describe() const {
  const Model &m = *m_;
  std::string s = m.source + (m.kind == Model::Kind::SentencePiece ? " (SentencePiece-style BPE"
                                                                     : " (byte-level BPE");
  if (m.kind == Model::Kind::ByteLevel)
    s += ", " + m.splitName + " split";
  if (m.kind == Model::Kind::SentencePiece)
    s += m.spacePrefix ? ", space prefix" : ", no space prefix";
  if (m.byteFallback)
    s += ", byte fallback";
  if (m.ignoreMerges)
    s += ", ignore_merges";
  if (m.nfc)
    s += ", NFC";
  return s + ", " + std::to_string(m.pieces.size()) + " tokens)";
}

} // namespace fg::text
