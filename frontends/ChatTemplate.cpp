//===- ChatTemplate.cpp - chat families detected by markers, rendered -----===//
#include "frontends/ChatTemplate.h"

#include "ir/Diag.h"

#include "llvm/ADT/STLExtras.h"

#include <optional>

using namespace llvm;

namespace fg {

namespace {

constexpr const char *kAlternate = "Conversation roles must alternate user/assistant/user/assistant/...";

/// Python's str.strip() for ASCII whitespace.
StringRef trim(StringRef s) { return s.trim(" \t\n\r\v\f"); }

/// Unescapes a Jinja string literal's body (\n, \t, \', \", \\).
std::string unescape(StringRef s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] != '\\' || i + 1 == s.size()) {
      out += s[i];
      continue;
    }
    char c = s[++i];
    out += c == 'n' ? '\n' : c == 't' ? '\t' : c;
  }
  return out;
}

/// chatml: the literal after `<|im_start|>system` + a newline (escaped or
/// not) up to `<|im_end|>`, when it is plain text (no quote, no `+`: not an
/// expression such as `+ messages[0]['content']`).
std::string defaultSystemOf(StringRef t) {
  static constexpr StringRef kStart = "<|im_start|>system";
  for (size_t at = t.find(kStart); at != StringRef::npos; at = t.find(kStart, at + 1)) {
    StringRef rest = t.substr(at + kStart.size());
    if (rest.consume_front("\\n") || rest.consume_front("\n")) {
      size_t end = rest.find("<|im_end|>");
      if (end == StringRef::npos)
        continue;
      StringRef body = rest.take_front(end);
      if (body.empty() || body.find_first_of("'\"+{}") != StringRef::npos)
        continue;
      return unescape(body);
    }
  }
  return "";
}

/// llama3.1: the fallback `date_string = "26 Jul 2024"`.
std::string dateOf(StringRef t) {
  static constexpr StringRef kSet = "date_string = \"";
  size_t at = t.find(kSet);
  if (at == StringRef::npos)
    return "26 Jul 2024";
  StringRef rest = t.substr(at + kSet.size());
  return rest.take_until([](char c) { return c == '"'; }).str();
}

Error templateError(const Twine &msg) { return makeError("chat template: " + msg); }

/// (role == user) must alternate with the index parity, starting at user.
Error checkAlternates(ArrayRef<ChatMessage> ms, StringRef message = kAlternate) {
  for (size_t i = 0; i < ms.size(); ++i)
    if ((ms[i].role == "user") != (i % 2 == 0))
      return templateError(message);
  return Error::success();
}

Error checkRoles(ArrayRef<ChatMessage> ms, ChatFamily f) {
  for (const ChatMessage &m : ms)
    if (m.role != "system" && m.role != "user" && m.role != "assistant")
      return templateError("role '" + m.role + "' is not rendered by fusegraph's " +
                           chatFamilyName(f) + " renderer (system, user and assistant only)");
  return Error::success();
}

std::string llama3(const ChatStyle &s, ArrayRef<ChatMessage> ms, const ChatRenderOptions &o) {
  std::string out = o.bosToken;
  auto header = [](StringRef role) {
    return "<|start_header_id|>" + role.str() + "<|end_header_id|>\n\n";
  };
  if (s.family == ChatFamily::Llama31) {
    StringRef system;
    if (!ms.empty() && ms[0].role == "system") {
      system = trim(ms[0].content);
      ms = ms.drop_front();
    }
    out += header("system") + "Cutting Knowledge Date: December 2023\nToday Date: " + s.date +
           "\n\n" + system.str() + "<|eot_id|>";
  }
  for (const ChatMessage &m : ms)
    out += header(m.role) + trim(m.content).str() + "<|eot_id|>";
  if (o.addGenerationPrompt)
    out += header("assistant");
  return out;
}

Expected<std::string> gemma(const ChatStyle &s, ArrayRef<ChatMessage> ms,
                            const ChatRenderOptions &o) {
  std::string prefix;
  if (ms[0].role == "system") {
    if (s.family == ChatFamily::Gemma)
      return templateError("System role not supported");
    prefix = ms[0].content + "\n\n";
    ms = ms.drop_front();
  }
  if (Error e = checkAlternates(ms))
    return e;
  std::string out = o.bosToken;
  for (size_t i = 0; i < ms.size(); ++i)
    out += "<start_of_turn>" + std::string(ms[i].role == "assistant" ? "model" : ms[i].role) +
           "\n" + (i == 0 ? prefix : "") + trim(ms[i].content).str() + "<end_of_turn>\n";
  if (o.addGenerationPrompt)
    out += "<start_of_turn>model\n";
  return out;
}

std::string chatml(const ChatStyle &s, ArrayRef<ChatMessage> ms, const ChatRenderOptions &o) {
  std::string out;
  auto turn = [](StringRef role, StringRef text) {
    return "<|im_start|>" + role.str() + "\n" + text.str() + "<|im_end|>\n";
  };
  if (ms[0].role != "system" && !s.defaultSystem.empty())
    out += turn("system", s.defaultSystem);
  for (const ChatMessage &m : ms)
    out += turn(m.role, m.content);
  if (o.addGenerationPrompt)
    out += "<|im_start|>assistant\n";
  return out;
}

/// qwen3: history reasoning (`<think>...</think>`) is dropped before the last
/// user message; an assistant turn after it keeps (or gets an empty) block.
std::string qwen3(ArrayRef<ChatMessage> ms, const ChatRenderOptions &o) {
  std::string out;
  if (ms[0].role == "system")
    out += "<|im_start|>system\n" + ms[0].content + "<|im_end|>\n";
  int64_t lastQuery = static_cast<int64_t>(ms.size()) - 1;
  for (int64_t i = lastQuery; i >= 0; --i) {
    StringRef c = ms[i].content;
    if (ms[i].role == "user" && !(c.startswith("<tool_response>") && c.endswith("</tool_response>"))) {
      lastQuery = i;
      break;
    }
  }
  for (int64_t i = 0; i < static_cast<int64_t>(ms.size()); ++i) {
    const ChatMessage &m = ms[i];
    if (m.role == "user" || (m.role == "system" && i > 0)) {
      out += "<|im_start|>" + m.role + "\n" + m.content + "<|im_end|>\n";
      continue;
    }
    if (m.role != "assistant")
      continue;
    StringRef content = m.content, reasoning;
    size_t close = content.find("</think>");
    if (close != StringRef::npos) {
      // split('</think>')[-1].lstrip('\n'); split('</think>')[0].rstrip('\n')
      //   .split('<think>')[-1].lstrip('\n')
      content = StringRef(m.content).substr(StringRef(m.content).rfind("</think>") + 8).ltrim('\n');
      StringRef before = StringRef(m.content).take_front(close).rtrim('\n');
      size_t open = before.rfind("<think>");
      reasoning = (open == StringRef::npos ? before : before.substr(open + 7)).ltrim('\n');
    }
    const bool last = i + 1 == static_cast<int64_t>(ms.size());
    if (i > lastQuery && (last || !reasoning.empty()))
      out += "<|im_start|>assistant\n<think>\n" + reasoning.trim('\n').str() + "\n</think>\n\n" +
             content.ltrim('\n').str();
    else
      out += "<|im_start|>assistant\n" + content.str();
    out += "<|im_end|>\n";
  }
  if (o.addGenerationPrompt)
    out += "<|im_start|>assistant\n";
  return out;
}

std::string phi3(ArrayRef<ChatMessage> ms, const ChatRenderOptions &o) {
  std::string out;
  for (const ChatMessage &m : ms) {
    if (m.role == "system" && m.content.empty())
      continue;
    out += "<|" + m.role + "|>\n" + m.content + "<|end|>\n";
  }
  out += o.addGenerationPrompt ? "<|assistant|>\n" : o.eosToken;
  return out;
}

Expected<std::string> llama2(ArrayRef<ChatMessage> ms, const ChatRenderOptions &o) {
  std::string system;
  bool hasSystem = ms[0].role == "system";
  if (hasSystem) {
    system = ms[0].content;
    ms = ms.drop_front();
  }
  if (Error e = checkAlternates(ms))
    return e;
  std::string out;
  for (size_t i = 0; i < ms.size(); ++i) {
    std::string content = ms[i].content;
    if (i == 0 && hasSystem)
      content = "<<SYS>>\n" + system + "\n<</SYS>>\n\n" + content;
    if (ms[i].role == "user")
      out += o.bosToken + "[INST] " + trim(content).str() + " [/INST]";
    else
      out += " " + trim(content).str() + " " + o.eosToken;
  }
  return out;
}

Expected<std::string> mistral(ArrayRef<ChatMessage> ms, const ChatRenderOptions &o) {
  if (Error e = checkAlternates(ms))
    return e;
  std::string out = o.bosToken;
  for (const ChatMessage &m : ms)
    out += m.role == "user" ? "[INST] " + m.content + " [/INST]" : m.content + o.eosToken;
  return out;
}

/// Nemo / v3: the system text goes before the last message when it is a
/// user message (and nowhere otherwise).
Expected<std::string> mistralV3(ArrayRef<ChatMessage> ms, const ChatRenderOptions &o) {
  std::optional<std::string> system;
  if (ms[0].role == "system") {
    system = ms[0].content;
    ms = ms.drop_front();
  }
  if (Error e = checkAlternates(ms, "After the optional system message, conversation roles must "
                                    "alternate user/assistant/user/assistant/..."))
    return e;
  std::string out = o.bosToken;
  for (size_t i = 0; i < ms.size(); ++i) {
    if (ms[i].role == "assistant") {
      out += ms[i].content + o.eosToken;
      continue;
    }
    bool last = i + 1 == ms.size();
    out += "[INST]" + (last && system ? *system + "\n\n" : std::string()) + ms[i].content +
           "[/INST]";
  }
  return out;
}

} // namespace

StringRef chatFamilyName(ChatFamily f) {
  switch (f) {
  case ChatFamily::Llama31:
    return "llama3.1";
  case ChatFamily::Llama3:
    return "llama3";
  case ChatFamily::Gemma3:
    return "gemma3";
  case ChatFamily::Gemma:
    return "gemma";
  case ChatFamily::Qwen3:
    return "qwen3";
  case ChatFamily::ChatML:
    return "chatml";
  case ChatFamily::Phi3:
    return "phi3";
  case ChatFamily::Llama2:
    return "llama2";
  case ChatFamily::MistralV3:
    return "mistral-v3";
  case ChatFamily::Mistral:
    return "mistral";
  }
  return "?";
}

Expected<ChatStyle> detectChatStyle(StringRef t) {
  auto has = [&](StringRef marker) { return t.contains(marker); };
  ChatStyle s;
  if (has("<|start_header_id|>") && has("Cutting Knowledge Date")) {
    s.family = ChatFamily::Llama31;
    s.date = dateOf(t);
  } else if (has("<|start_header_id|>")) {
    s.family = ChatFamily::Llama3;
  } else if (has("<start_of_turn>") && has("first_user_prefix")) {
    s.family = ChatFamily::Gemma3;
  } else if (has("<start_of_turn>")) {
    s.family = ChatFamily::Gemma;
  } else if (has("<|im_start|>") && has("</think>")) {
    s.family = ChatFamily::Qwen3;
  } else if (has("<|im_start|>")) {
    s.family = ChatFamily::ChatML;
    s.defaultSystem = defaultSystemOf(t);
  } else if (has("<|user|>") && has("<|system|>") && has("<|end|>")) {
    s.family = ChatFamily::Phi3;
  } else if (has("[INST]") && has("<<SYS>>")) {
    s.family = ChatFamily::Llama2;
  } else if (has("[INST]") && has("[AVAILABLE_TOOLS]")) {
    s.family = ChatFamily::MistralV3;
  } else if (has("[INST] ") && has("Only user and assistant roles are supported!")) {
    s.family = ChatFamily::Mistral;
  } else {
    StringRef first = t.trim().take_until([](char c) { return c == '\n'; });
    return makeError("the model's chat template is none of the families fusegraph renders "
                     "(llama3.1, llama3, gemma3, gemma, qwen3, chatml, phi3, llama2, mistral-v3, "
                     "mistral); it begins '" +
                     first.take_front(60) + (first.size() > 60 ? "...'" : "'"));
  }
  return s;
}

Expected<std::string> renderChat(const ChatStyle &s, ArrayRef<ChatMessage> ms,
                                 const ChatRenderOptions &o) {
  if (ms.empty())
    return makeError("chat template: no messages to render");
  if (Error e = checkRoles(ms, s.family))
    return e;
  switch (s.family) {
  case ChatFamily::Llama31:
  case ChatFamily::Llama3:
    return llama3(s, ms, o);
  case ChatFamily::Gemma3:
  case ChatFamily::Gemma:
    return gemma(s, ms, o);
  case ChatFamily::Qwen3:
    return qwen3(ms, o);
  case ChatFamily::ChatML:
    return chatml(s, ms, o);
  case ChatFamily::Phi3:
    return phi3(ms, o);
  case ChatFamily::Llama2:
    return llama2(ms, o);
  case ChatFamily::MistralV3:
    return mistralV3(ms, o);
  case ChatFamily::Mistral:
    return mistral(ms, o);
  }
  return makeError("chat template: unknown family");
}

Expected<std::string> renderChat(StringRef chatTemplate, ArrayRef<ChatMessage> ms,
                                 const ChatRenderOptions &o) {
  Expected<ChatStyle> s = detectChatStyle(chatTemplate);
  if (!s)
    return s.takeError();
  return renderChat(*s, ms, o);
}

} // namespace fg
