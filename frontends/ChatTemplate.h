//===- ChatTemplate.h - a model's chat template, rendered in C++ --*- C++ -*-===//
//
//   Expected<ChatStyle> style = detectChatStyle(model.chatTemplate);
//   Expected<std::string> text = renderChat(*style, {{"user", "Hi"}}, opts);
//
// Models carry their chat template as a Jinja program (GGUF
// `tokenizer.chat_template`, HF `tokenizer_config.json` `chat_template`).
// fusegraph does not run Jinja: it recognises the template's family by markers
// in its text and renders text-only conversations (system, user and assistant
// messages; no tools) with a small renderer per family. The renderings are
// checked against jinja2 on the families' real templates
// (tests/unit/frontends/chat/: *.jinja fixtures, expected.json written by
// tests/models/gen_chat_fixtures.py with jinja2 as transformers renders them).
//
// Families (the marker that selects each, tried in this order):
//   llama3.1  `<|start_header_id|>` + `Cutting Knowledge Date` (3.1-3.3: the
//             system block with the template's fixed date)
//   llama3    `<|start_header_id|>` (3.0)
//   gemma3    `<start_of_turn>` + `first_user_prefix` (system text leads the
//             first user turn)
//   gemma     `<start_of_turn>` (gemma 1/2: no system role)
//   qwen3     `<|im_start|>` + `</think>` (reasoning stripped from history)
//   chatml    `<|im_start|>` (qwen2, qwen2.5, ...: the template's default
//             system message, if it has one)
//   phi3      `<|user|>` + `<|system|>` + `<|end|>` (phi 3.5)
//   llama2    `[INST]` + `<<SYS>>`
//   mistral-v3 `[INST]` + `[AVAILABLE_TOOLS]` (Nemo, v0.3: the system text
//             goes into the last user turn)
//   mistral   `[INST] ` + `Only user and assistant roles are supported!`
//             (v0.1: no system role)
// Anything else is an error saying which families are known. A conversation
// the template itself refuses (a system message for gemma 2, roles that do not
// alternate) is refused with the template's own message.
//
// `trim`/`strip` remove ASCII whitespace only (Python's also remove Unicode
// spaces such as U+00A0 at the ends of a message).
//
//===----------------------------------------------------------------------===//
#pragma once

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

#include <string>
#include <vector>

namespace fg {

enum class ChatFamily {
  Llama31,
  Llama3,
  Gemma3,
  Gemma,
  Qwen3,
  ChatML,
  Phi3,
  Llama2,
  MistralV3,
  Mistral,
};

/// `llama3.1`, `chatml`, ...
llvm::StringRef chatFamilyName(ChatFamily f);

/// A recognised template: its family and what the renderer takes from its text.
struct ChatStyle {
  ChatFamily family = ChatFamily::ChatML;
  /// chatml: the system message used when the conversation has none (qwen2's
  /// "You are a helpful assistant."); empty when the template has none.
  std::string defaultSystem;
  /// llama3.1: the template's fixed `date_string` ("26 Jul 2024").
  std::string date;
};

struct ChatMessage {
  std::string role; ///< system, user or assistant
  std::string content;
};

struct ChatRenderOptions {
  /// End with the assistant's header (the model answers next).
  bool addGenerationPrompt = true;
  /// The text of the model's BOS / EOS tokens, as the template's `bos_token`
  /// and `eos_token`. Leave bosToken empty when the tokenizer adds BOS itself.
  std::string bosToken, eosToken;
};

/// The family of `chatTemplate`, or an error listing the known families.
llvm::Expected<ChatStyle> detectChatStyle(llvm::StringRef chatTemplate);

/// Renders `messages` as the template would. Errors: no messages, a role the
/// family has no place for (`tool`), what the template itself raises.
llvm::Expected<std::string> renderChat(const ChatStyle &style,
                                       llvm::ArrayRef<ChatMessage> messages,
                                       const ChatRenderOptions &opts = {});

/// detectChatStyle + renderChat.
llvm::Expected<std::string> renderChat(llvm::StringRef chatTemplate,
                                       llvm::ArrayRef<ChatMessage> messages,
                                       const ChatRenderOptions &opts = {});

} // namespace fg
