//===- Load.cpp - tokenizers from GGUF metadata and tokenizer.json ---------===//
//
// GGUF (llama.cpp's keys):
//   tokenizer.ggml.model    "llama" (SentencePiece, merged by score) | "gpt2" (byte-level BPE)
//   tokenizer.ggml.pre      the split regex of a gpt2 model: llama-bpe (llama3,
//                           ignore_merges), qwen2 (with NFC, as its tokenizer.json),
//                           default / gpt2
//   tokenizer.ggml.tokens / scores / token_type / merges ("a b")
//   tokenizer.ggml.{bos,eos,unknown,eot,eom}_token_id, add_bos_token,
//   add_eos_token, add_space_prefix (gemma: false)
// tokenizer.json: model BPE (vocab, merges as "a b" or [a, b], byte_fallback,
// fuse_unk, unk_token, ignore_merges); normalizer NFC, Prepend("▁"),
// Replace(" " -> "▁"), Sequence; pre_tokenizer Split(Regex, Isolated),
// ByteLevel, Metaspace (split = false), Sequence; added_tokens; a
// TemplateProcessing post-processor's BOS / EOS; decoder Strip (leading space).
//
//===----------------------------------------------------------------------===//
#include "text/Model.h"

#include "frontends/gguf/GgufFile.h"
#include "ir/Diag.h"
#include "ir/ReadFile.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"

#include <nlohmann/json.hpp>

using namespace llvm;
using Json = nlohmann::json;

namespace fg::text {

using Model = Tokenizer::Model;

namespace {

constexpr StringLiteral kSpace = "\xE2\x96\x81"; // U+2581

Error ggufError(const GgufFile &f, const Twine &msg) { return f.error(msg); }

/// A GGUF array of `want` elements, or an error naming the key.
Expected<const GgufValue *> ggufArray(const GgufFile &f, StringRef key, GgufType want,
                                      bool required) {
  const GgufValue *v = f.meta(key);
  if (!v) {
    if (required)
      return ggufError(f, "no '" + key + "' (the model has no tokenizer metadata)");
    return nullptr;
  }
  if (v->type != GgufType::Array)
    return ggufError(f, "'" + key + "' must be an array, got " + ggufTypeName(v->type));
  bool ok = v->elemType == want ||
            (want == GgufType::I32 && (v->elemType == GgufType::U32 || v->elemType == GgufType::I8 ||
                                       v->elemType == GgufType::U8 || v->elemType == GgufType::I16 ||
                                       v->elemType == GgufType::U16 || v->elemType == GgufType::I64));
  if (!ok)
    return ggufError(f, "'" + key + "' must be an array of " + ggufTypeName(want) + ", got " +
                            ggufTypeName(v->elemType));
  return v;
}

Expected<int32_t> ggufTokenId(const GgufFile &f, StringRef key, size_t vocab) {
  Expected<std::optional<int64_t>> v = f.optInt(key);
  if (!v)
    return v.takeError();
  if (!*v)
    return -1;
  // llama.cpp writes -1 (as u32: 4294967295) for "none".
  if (**v < 0 || **v == 0xFFFFFFFFll)
    return -1;
  if (static_cast<uint64_t>(**v) >= vocab)
    return ggufError(f, "'" + key + "' = " + Twine(**v) + " is outside the vocabulary of " +
                            Twine(vocab) + " tokens");
  return static_cast<int32_t>(**v);
}

Expected<bool> ggufBool(const GgufFile &f, StringRef key, bool dflt) {
  Expected<std::optional<int64_t>> v = f.optInt(key);
  if (!v)
    return v.takeError();
  return *v ? **v != 0 : dflt;
}

Error setSplit(Model &m, StringRef name, ArrayRef<const char *> patterns) {
  m.splitName = name.str();
  for (const char *p : patterns) {
    auto re = SplitRegex::compile(p);
    if (!re)
      return re.takeError();
    m.splits.push_back(std::move(*re));
  }
  return Error::success();
}

TokenAttr attrFromGguf(int64_t t) {
  switch (t) {
  case 2:
    return TokenAttr::Unknown;
  case 3:
    return TokenAttr::Control;
  case 4:
    return TokenAttr::UserDefined;
  case 5:
    return TokenAttr::Unused;
  case 6:
    return TokenAttr::Byte;
  default:
    return TokenAttr::Normal;
  }
}

} // namespace

Expected<Tokenizer> Tokenizer::fromGguf(const GgufFile &f) {
  const GgufValue *modelKey = f.meta("tokenizer.ggml.model");
  if (!modelKey)
    return ggufError(f, "no tokenizer metadata ('tokenizer.ggml.model'); give token ids with "
                        "--prompt-ids");
  Expected<std::string> kind = f.getString("tokenizer.ggml.model");
  if (!kind)
    return kind.takeError();
  auto m = std::make_shared<Model>();
  if (*kind == "llama") {
    m->kind = Model::Kind::SentencePiece;
    m->mergeBy = Model::MergeBy::Score;
    m->byteFallback = true;
    m->source = "gguf llama";
  } else if (*kind == "gpt2") {
    m->kind = Model::Kind::ByteLevel;
    m->mergeBy = Model::MergeBy::Rank;
    m->source = "gguf gpt2";
  } else {
    return ggufError(f, "tokenizer model '" + *kind +
                            "' is not supported (supported: llama, gpt2)");
  }
  auto tokens = ggufArray(f, "tokenizer.ggml.tokens", GgufType::String, true);
  if (!tokens)
    return tokens.takeError();
  for (const GgufValue &v : (*tokens)->elems)
    m->pieces.push_back(v.s);
  const size_t n = m->pieces.size();
  auto types = ggufArray(f, "tokenizer.ggml.token_type", GgufType::I32, false);
  if (!types)
    return types.takeError();
  m->attrs.assign(n, TokenAttr::Normal);
  if (*types) {
    if ((*types)->elems.size() != n)
      return ggufError(f, "'tokenizer.ggml.token_type' has " + Twine((*types)->elems.size()) +
                              " entries for " + Twine(n) + " tokens");
    for (size_t i = 0; i < n; ++i)
      m->attrs[i] = attrFromGguf((*types)->elems[i].asInt().value_or(1));
  }
  if (m->kind == Model::Kind::SentencePiece) {
    auto scores = ggufArray(f, "tokenizer.ggml.scores", GgufType::F32, false);
    if (!scores)
      return scores.takeError();
    if (*scores) {
      if ((*scores)->elems.size() != n)
        return ggufError(f, "'tokenizer.ggml.scores' has " + Twine((*scores)->elems.size()) +
                                " entries for " + Twine(n) + " tokens");
      for (const GgufValue &v : (*scores)->elems)
        m->scores.push_back(static_cast<float>(v.f));
    }
    Expected<bool> prefix = ggufBool(f, "tokenizer.ggml.add_space_prefix", true);
    if (!prefix)
      return prefix.takeError();
    m->spacePrefix = m->stripLeadingSpace = *prefix;
  } else {
    Expected<std::string> pre = std::string("default");
    if (f.meta("tokenizer.ggml.pre"))
      pre = f.getString("tokenizer.ggml.pre");
    if (!pre)
      return pre.takeError();
    Error e = Error::success();
    if (*pre == "llama-bpe" || *pre == "llama3" || *pre == "llama-v3") {
      e = setSplit(*m, "llama3", {kLlama3SplitPattern});
      m->ignoreMerges = true;
    } else if (*pre == "qwen2") {
      e = setSplit(*m, "qwen2", {kQwen2SplitPattern});
      m->nfc = true;
    } else if (*pre == "default" || *pre == "gpt2" || *pre == "gpt-2") {
      e = setSplit(*m, "gpt2", {kGpt2SplitPattern});
    } else {
      return ggufError(f, "pre-tokenizer 'tokenizer.ggml.pre' = '" + *pre +
                              "' is not supported (supported: llama-bpe, qwen2, default, gpt2)");
    }
    if (e)
      return e;
  }
  if (Error e = m->finish())
    return ggufError(f, toString(std::move(e)));
  if (m->kind == Model::Kind::ByteLevel) {
    auto merges = ggufArray(f, "tokenizer.ggml.merges", GgufType::String, true);
    if (!merges)
      return merges.takeError();
    int32_t rank = 0;
    for (const GgufValue &v : (*merges)->elems) {
      auto [a, b] = StringRef(v.s).split(' ');
      int32_t ia = m->lookup(a), ib = m->lookup(b), ij = m->lookup((a + b).str());
      if (ia < 0 || ib < 0 || ij < 0)
        return ggufError(f, "merge " + Twine(rank) + " '" + v.s + "' names a piece not in the "
                                "vocabulary");
      m->merges.try_emplace((uint64_t(uint32_t(ia)) << 32) | uint32_t(ib), rank, ij);
      ++rank;
    }
  }
  auto id = [&](StringRef key, int32_t &out) -> Error {
    Expected<int32_t> v = ggufTokenId(f, key, n);
    if (!v)
      return v.takeError();
    out = *v;
    return Error::success();
  };
  int32_t eot = -1, eom = -1;
  if (Error e = id("tokenizer.ggml.bos_token_id", m->bos))
    return e;
  if (Error e = id("tokenizer.ggml.eos_token_id", m->eos))
    return e;
  if (Error e = id("tokenizer.ggml.unknown_token_id", m->unk))
    return e;
  if (Error e = id("tokenizer.ggml.eot_token_id", eot))
    return e;
  if (Error e = id("tokenizer.ggml.eom_token_id", eom))
    return e;
  if (m->unk < 0 && m->kind == Model::Kind::SentencePiece)
    m->unk = m->lookup("<unk>");
  Expected<bool> addBos =
      ggufBool(f, "tokenizer.ggml.add_bos_token", m->kind == Model::Kind::SentencePiece);
  Expected<bool> addEos = ggufBool(f, "tokenizer.ggml.add_eos_token", false);
  if (!addBos)
    return addBos.takeError();
  if (!addEos)
    return addEos.takeError();
  m->addBos = *addBos;
  m->addEos = *addEos;
  if (Error e = m->finish())
    return ggufError(f, toString(std::move(e)));
  for (int32_t t : {eot, eom})
    if (t >= 0 && !llvm::is_contained(m->eog, t))
      m->eog.push_back(t);
  return Tokenizer(std::move(m));
}

Expected<Tokenizer> Tokenizer::fromGgufPath(StringRef path) {
  Expected<std::unique_ptr<GgufFile>> f = GgufFile::open(path);
  if (!f)
    return f.takeError();
  return fromGguf(**f);
}

// --- tokenizer.json --------------------------------------------------------------

namespace {

struct HfLoader {
  StringRef name;
  Model &m;

  Error error(const Twine &msg) const { return makeError(name, Loc{}, msg); }

  static const Json *field(const Json &j, const char *key) {
    if (!j.is_object())
      return nullptr;
    auto it = j.find(key);
    return it == j.end() || it->is_null() ? nullptr : &*it;
  }
  static std::string str(const Json *j) { return j && j->is_string() ? j->get<std::string>() : ""; }
  static bool flag(const Json &j, const char *key, bool dflt) {
    const Json *v = field(j, key);
    return v && v->is_boolean() ? v->get<bool>() : dflt;
  }

  Error normalizer(const Json &n) {
    std::string type = str(field(n, "type"));
    if (type == "Sequence") {
      const Json *list = field(n, "normalizers");
      if (!list || !list->is_array())
        return error("normalizer Sequence without 'normalizers'");
      for (const Json &x : *list)
        if (Error e = normalizer(x))
          return e;
      return Error::success();
    }
    if (type == "NFC") {
      m.nfc = true;
      return Error::success();
    }
    if (type == "Prepend" && str(field(n, "prepend")) == kSpace) {
      m.spacePrefix = true;
      return Error::success();
    }
    if (type == "Replace") {
      const Json *pat = field(n, "pattern");
      if (pat && str(field(*pat, "String")) == " " && str(field(n, "content")) == kSpace) {
        m.kind = Model::Kind::SentencePiece;
        return Error::success();
      }
    }
    return error("normalizer '" + type + "' is not supported (supported: NFC, Prepend(\"▁\"), "
                 "Replace(\" \" -> \"▁\"), Sequence)");
  }

  Error preTokenizer(const Json &p) {
    std::string type = str(field(p, "type"));
    if (type == "Sequence") {
      const Json *list = field(p, "pretokenizers");
      if (!list || !list->is_array())
        return error("pre_tokenizer Sequence without 'pretokenizers'");
      for (const Json &x : *list)
        if (Error e = preTokenizer(x))
          return e;
      return Error::success();
    }
    if (type == "Split") {
      const Json *pat = field(p, "pattern");
      std::string re = pat ? str(field(*pat, "Regex")) : "";
      if (re.empty() || str(field(p, "behavior")) != "Isolated" || flag(p, "invert", false))
        return error("pre_tokenizer Split is supported with a Regex pattern, behavior Isolated "
                     "and invert false");
      auto r = SplitRegex::compile(re);
      if (!r)
        return error(toString(r.takeError()));
      m.splits.push_back(std::move(*r));
      m.splitName = re == kLlama3SplitPattern  ? "llama3"
                    : re == kQwen2SplitPattern ? "qwen2"
                                               : "tokenizer.json regex";
      return Error::success();
    }
    if (type == "ByteLevel") {
      m.kind = Model::Kind::ByteLevel;
      if (flag(p, "add_prefix_space", false))
        return error("pre_tokenizer ByteLevel with add_prefix_space is not supported");
      if (flag(p, "use_regex", true)) {
        auto r = SplitRegex::compile(kGpt2SplitPattern);
        if (!r)
          return r.takeError();
        m.splits.push_back(std::move(*r));
        m.splitName = "gpt2";
      }
      return Error::success();
    }
    if (type == "Metaspace") {
      if (str(field(p, "replacement")) != kSpace || flag(p, "split", true))
        return error("pre_tokenizer Metaspace is supported with replacement \"▁\" and "
                     "split false");
      m.kind = Model::Kind::SentencePiece;
      std::string scheme = str(field(p, "prepend_scheme"));
      m.spacePrefix = scheme != "never";
      m.spacePrefixFirstOnly = scheme == "first";
      return Error::success();
    }
    return error("pre_tokenizer '" + type + "' is not supported (supported: Split, ByteLevel, "
                 "Metaspace, Sequence)");
  }

  /// BOS / EOS from a TemplateProcessing's single template (inside a Sequence too).
  void postProcessor(const Json &p) {
    std::string type = str(field(p, "type"));
    if (type == "Sequence") {
      if (const Json *list = field(p, "processors"); list && list->is_array())
        for (const Json &x : *list)
          postProcessor(x);
      return;
    }
    if (type != "TemplateProcessing")
      return;
    const Json *single = field(p, "single");
    if (!single || !single->is_array() || single->empty())
      return;
    auto special = [&](const Json &item) -> int32_t {
      const Json *s = field(item, "SpecialToken");
      return s ? m.lookup(str(field(*s, "id"))) : -1;
    };
    if (int32_t b = special(single->front()); b >= 0) {
      m.bos = b;
      m.addBos = true;
    }
    if (single->size() > 1)
      if (int32_t e = special(single->back()); e >= 0) {
        m.eos = e;
        m.addEos = true;
      }
  }

  void decoder(const Json &d) {
    std::string type = str(field(d, "type"));
    if (type == "Sequence") {
      if (const Json *list = field(d, "decoders"); list && list->is_array())
        for (const Json &x : *list)
          decoder(x);
      return;
    }
    if (type == "Strip" && str(field(d, "content")) == " ") {
      const Json *start = field(d, "start");
      m.stripLeadingSpace = start && start->is_number_integer() && start->get<int64_t>() >= 1;
    }
    if (type == "Metaspace") // the decoder twin of the Metaspace pre-tokenizer
      m.stripLeadingSpace = str(field(d, "prepend_scheme")) != "never";
  }

  Error load(const Json &j) {
    const Json *model = field(j, "model");
    if (!model || !model->is_object())
      return error("no 'model' object");
    std::string type = str(field(*model, "type"));
    if (type != "BPE")
      return error("model type '" + type + "' is not supported (supported: BPE)");
    const Json *vocab = field(*model, "vocab");
    if (!vocab || !vocab->is_object())
      return error("model has no 'vocab' object");
    int64_t maxId = -1;
    for (auto it = vocab->begin(); it != vocab->end(); ++it) {
      if (!it.value().is_number_integer() || it.value().get<int64_t>() < 0 ||
          it.value().get<int64_t>() > (int64_t(1) << 24))
        return error("vocab entry '" + it.key() + "' has no valid id");
      maxId = std::max(maxId, it.value().get<int64_t>());
    }
    const Json *added = field(j, "added_tokens");
    if (added && added->is_array())
      for (const Json &a : *added) {
        const Json *id = field(a, "id");
        if (!id || !id->is_number_integer() || id->get<int64_t>() < 0 ||
            id->get<int64_t>() > (int64_t(1) << 24))
          return error("an added token has no valid id");
        maxId = std::max(maxId, id->get<int64_t>());
      }
    m.pieces.assign(maxId + 1, std::string());
    m.attrs.assign(maxId + 1, TokenAttr::Unused);
    for (auto it = vocab->begin(); it != vocab->end(); ++it) {
      int64_t id = it.value().get<int64_t>();
      m.pieces[id] = it.key();
      m.attrs[id] = TokenAttr::Normal;
    }
    if (added && added->is_array())
      for (const Json &a : *added) {
        int64_t id = field(a, "id")->get<int64_t>();
        m.pieces[id] = str(field(a, "content"));
        m.attrs[id] = flag(a, "special", false) ? TokenAttr::Control : TokenAttr::UserDefined;
      }
    m.byteFallback = flag(*model, "byte_fallback", false);
    m.fuseUnk = flag(*model, "fuse_unk", false);
    m.ignoreMerges = flag(*model, "ignore_merges", false);
    if (const Json *n = field(j, "normalizer"))
      if (Error e = normalizer(*n))
        return e;
    if (const Json *p = field(j, "pre_tokenizer"))
      if (Error e = preTokenizer(*p))
        return e;
    if (m.kind == Model::Kind::ByteLevel && m.splitName.empty())
      m.splitName = "no";
    if (m.kind == Model::Kind::SentencePiece && !m.splits.empty())
      return error("a split regex with a SentencePiece-style model is not supported");
    if (m.kind == Model::Kind::ByteLevel && (m.spacePrefix || m.byteFallback))
      return error("byte-level BPE with a space prefix or byte fallback is not supported");
    if (Error e = m.finish())
      return error(toString(std::move(e)));
    if (const Json *d = field(j, "decoder"))
      decoder(*d);
    if (const Json *p = field(j, "post_processor"))
      postProcessor(*p); // after finish(): it looks the BOS / EOS pieces up
    if (m.eos >= 0 && !llvm::is_contained(m.eog, m.eos))
      m.eog.push_back(m.eos);
    // <0xXX> pieces of a byte-fallback vocabulary are byte tokens.
    for (int b = 0; b < 256; ++b)
      if (m.byteFallback && m.byteIds[b] >= 0)
        m.attrs[m.byteIds[b]] = TokenAttr::Byte;
    std::string unk = str(field(*model, "unk_token"));
    if (!unk.empty()) {
      m.unk = m.lookup(unk);
      if (m.unk < 0)
        return error("unk_token '" + unk + "' is not in the vocabulary");
    }
    const Json *merges = field(*model, "merges");
    if (merges && !merges->is_array())
      return error("model 'merges' is not an array");
    int32_t rank = 0;
    if (merges)
      for (const Json &x : *merges) {
        std::string a, b;
        if (x.is_string()) {
          auto [l, r] = StringRef(x.get_ref<const std::string &>()).split(' ');
          a = l.str();
          b = r.str();
        } else if (x.is_array() && x.size() == 2 && x[0].is_string() && x[1].is_string()) {
          a = x[0].get<std::string>();
          b = x[1].get<std::string>();
        } else {
          return error("merge " + Twine(rank) + " is neither \"a b\" nor [a, b]");
        }
        int32_t ia = m.lookup(a), ib = m.lookup(b), ij = m.lookup(a + b);
        if (ia < 0 || ib < 0 || ij < 0)
          return error("merge " + Twine(rank) + " ('" + a + "', '" + b +
                       "') names a piece not in the vocabulary");
        m.merges.try_emplace((uint64_t(uint32_t(ia)) << 32) | uint32_t(ib), rank, ij);
        ++rank;
      }
    return Error::success();
  }
};

} // namespace

Expected<Tokenizer> Tokenizer::fromHfJson(StringRef text, StringRef name) {
  Json j = Json::parse(text.begin(), text.end(), nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded())
    return makeError(name, Loc{}, "malformed JSON");
  auto m = std::make_shared<Model>();
  m->source = "tokenizer.json";
  HfLoader l{name, *m};
  if (Error e = l.load(j))
    return e;
  return Tokenizer(std::move(m));
}

Expected<Tokenizer> Tokenizer::fromHfJsonPath(StringRef path) {
  ReadFileOptions o;
  o.maxBytes = uint64_t(256) << 20;
  o.what = "a tokenizer.json";
  auto buf = readRegularFile(path, o);
  if (!buf)
    return makeError(path, Loc{}, "cannot read: " + toString(buf.takeError()));
  return fromHfJson((*buf)->getBuffer(), path);
}

/// End-of-sequence ids from an HF folder's config.json / generation_config.json.
static void addHfEos(Model &m, StringRef folder) {
  for (const char *file : {"generation_config.json", "config.json"}) {
    SmallString<256> p(folder);
    sys::path::append(p, file);
    ReadFileOptions o;
    o.maxBytes = uint64_t(16) << 20;
    auto buf = readRegularFile(p, o);
    if (!buf) {
      consumeError(buf.takeError());
      continue;
    }
    Json j = Json::parse((*buf)->getBuffer().begin(), (*buf)->getBuffer().end(), nullptr, false);
    if (!j.is_object() || !j.contains("eos_token_id"))
      continue;
    const Json &e = j["eos_token_id"];
    auto add = [&](const Json &v) {
      if (!v.is_number_integer())
        return;
      int64_t id = v.get<int64_t>();
      if (id < 0 || id >= static_cast<int64_t>(m.pieces.size()))
        return;
      if (m.eos < 0)
        m.eos = static_cast<int32_t>(id);
      if (!llvm::is_contained(m.eog, id))
        m.eog.push_back(static_cast<int32_t>(id));
    };
    if (e.is_array())
      for (const Json &v : e)
        add(v);
    else
      add(e);
  }
}

Expected<Tokenizer> Tokenizer::forModel(StringRef model) {
  if (sys::fs::is_directory(model)) {
    SmallString<256> p(model);
    sys::path::append(p, "tokenizer.json");
    if (!sys::fs::exists(p))
      return makeError(model, Loc{}, "the folder has no tokenizer.json; give token ids with "
                                     "--prompt-ids");
    Expected<Tokenizer> t = fromHfJsonPath(p);
    if (!t)
      return t.takeError();
    auto m = std::make_shared<Model>(*t->m_);
    addHfEos(*m, model);
    return Tokenizer(std::move(m));
  }
  if (model.endswith(".gguf"))
    return fromGgufPath(model);
  if (model.endswith(".json"))
    return fromHfJsonPath(model);
  return makeError("'" + model + "' has no tokenizer (built-in models, workloads and .fg files "
                   "carry none; a .gguf file or a Hugging Face folder with tokenizer.json does); "
                   "give token ids with --prompt-ids");
}

} // namespace fg::text
