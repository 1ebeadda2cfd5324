//===- ModelChat.cpp - chat template, BOS/EOS texts and stop ids -----------===//
#include "frontends/ModelChat.h"

#include "frontends/ChatTemplate.h"

#include "frontends/gguf/GgufFile.h"
#include "ir/Diag.h"
#include "ir/ReadFile.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"

#include <nlohmann/json.hpp>

using namespace llvm;
using Json = nlohmann::json;

namespace fg {

namespace {

void addStop(ModelChatInfo &info, int64_t id) {
  if (id >= 0 && id <= INT32_MAX && !is_contained(info.eosIds, static_cast<int32_t>(id)))
    info.eosIds.push_back(static_cast<int32_t>(id));
}

Expected<ModelChatInfo> fromGguf(StringRef path) {
  Expected<std::unique_ptr<GgufFile>> f = GgufFile::open(path);
  if (!f)
    return f.takeError();
  ModelChatInfo info;
  const GgufFile &g = **f;
  if (const GgufValue *t = g.meta("tokenizer.chat_template")) {
    if (t->type != GgufType::String)
      return g.error("tokenizer.chat_template is " + ggufTypeName(t->type) + ", expected a string");
    info.chatTemplate = t->s;
  }
  const GgufValue *tokens = g.meta("tokenizer.ggml.tokens");
  auto tokenText = [&](int64_t id) -> std::string {
    if (!tokens || tokens->type != GgufType::Array || id < 0 ||
        id >= static_cast<int64_t>(tokens->elems.size()))
      return "";
    return tokens->elems[id].s;
  };
  for (StringRef key : {"tokenizer.ggml.eos_token_id", "tokenizer.ggml.eot_token_id",
                        "tokenizer.ggml.eom_token_id"}) {
    Expected<std::optional<int64_t>> id = g.optInt(key);
    if (!id)
      return id.takeError();
    if (!*id)
      continue;
    addStop(info, **id);
    if (key == "tokenizer.ggml.eos_token_id")
      info.eosToken = tokenText(**id);
  }
  Expected<std::optional<int64_t>> bos = g.optInt("tokenizer.ggml.bos_token_id");
  if (!bos)
    return bos.takeError();
  if (*bos)
    info.bosToken = tokenText(**bos);
  return info;
}

/// The JSON in `path`, or null when the file does not exist.
Expected<Json> readJsonIfAny(const Twine &path) {
  std::string p = path.str();
  if (!sys::fs::exists(p))
    return Json();
  ReadFileOptions o;
  o.maxBytes = uint64_t(64) << 20;
  o.what = "JSON";
  auto buf = readRegularFile(p, o);
  if (!buf)
    return makeError(p, Loc{}, "cannot read: " + toString(buf.takeError()));
  StringRef text = (*buf)->getBuffer();
  Json j = Json::parse(text.begin(), text.end(), nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded())
    return makeError(p, Loc{}, "malformed JSON");
  return j;
}

/// "text" or {"content": "text"}.
std::string tokenString(const Json &j) {
  if (j.is_string())
    return j.get<std::string>();
  if (j.is_object() && j.contains("content") && j["content"].is_string())
    return j["content"].get<std::string>();
  return "";
}

/// Adds `eos_token_id` of `j` (an id or a list of ids); whether it had one.
bool addStops(ModelChatInfo &info, const Json &j) {
  if (!j.is_object() || !j.contains("eos_token_id"))
    return false;
  const Json &e = j["eos_token_id"];
  if (e.is_number_integer())
    addStop(info, e.get<int64_t>());
  else if (e.is_array())
    for (const Json &v : e)
      if (v.is_number_integer())
        addStop(info, v.get<int64_t>());
  return !info.eosIds.empty();
}

Expected<ModelChatInfo> fromHf(StringRef dir) {
  ModelChatInfo info;
  Expected<Json> tc = readJsonIfAny(dir + "/tokenizer_config.json");
  if (!tc)
    return tc.takeError();
  if (tc->is_object()) {
    const Json &t = *tc;
    if (t.contains("chat_template")) {
      const Json &c = t["chat_template"];
      if (c.is_string())
        info.chatTemplate = c.get<std::string>();
      else if (c.is_array())
        for (const Json &named : c)
          if (named.is_object() && named.value("name", "") == "default" &&
              named.contains("template") && named["template"].is_string())
            info.chatTemplate = named["template"].get<std::string>();
    }
    if (t.contains("bos_token"))
      info.bosToken = tokenString(t["bos_token"]);
    if (t.contains("eos_token"))
      info.eosToken = tokenString(t["eos_token"]);
  }
  // Newer folders keep the template in its own file.
  SmallString<256> jinja(dir);
  sys::path::append(jinja, "chat_template.jinja");
  if (info.chatTemplate.empty() && sys::fs::exists(jinja)) {
    auto buf = readRegularFile(jinja);
    if (!buf)
      return makeError(jinja, Loc{}, "cannot read: " + toString(buf.takeError()));
    info.chatTemplate = (*buf)->getBuffer().str();
  }
  Expected<Json> gen = readJsonIfAny(dir + "/generation_config.json");
  if (!gen)
    return gen.takeError();
  if (!addStops(info, *gen)) {
    Expected<Json> cfg = readJsonIfAny(dir + "/config.json");
    if (!cfg)
      return cfg.takeError();
    addStops(info, *cfg);
  }
  return info;
}

} // namespace

Expected<ModelChatInfo> readModelChatInfo(StringRef path) {
  if (sys::fs::is_directory(path))
    return fromHf(path);
  if (sys::path::extension(path).equals_insensitive(".gguf"))
    return fromGguf(path);
  return ModelChatInfo{};
}

Expected<std::string> renderUserPrompt(const ModelChatInfo &info, StringRef userText,
                                       bool tokenizerAddsBos) {
  if (info.chatTemplate.empty())
    return makeError("the model has no chat template (GGUF tokenizer.chat_template, HF "
                     "tokenizer_config.json chat_template); give the prompt without --chat");
  ChatRenderOptions o;
  o.addGenerationPrompt = true;
  o.bosToken = tokenizerAddsBos ? "" : info.bosToken;
  o.eosToken = info.eosToken;
  return renderChat(info.chatTemplate, ChatMessage{"user", userText.str()}, o);
}

} // namespace fg
