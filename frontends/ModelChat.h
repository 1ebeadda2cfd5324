//===- ModelChat.h - what a model file says about chatting -------*- C++ -*-===//
//
//   Expected<ModelChatInfo> info = readModelChatInfo("model.gguf");
//   so.stopTokens = info->eosIds;                       // runtime/Session.h
//   renderChat(info->chatTemplate, messages, opts);     // frontends/ChatTemplate.h
//
// Read cheaply from the model's metadata, no weights touched:
//  - GGUF: `tokenizer.chat_template`; stop ids from
//    `tokenizer.ggml.eos_token_id`, `.eot_token_id` and `.eom_token_id`;
//    the BOS / EOS texts from `tokenizer.ggml.tokens` at the bos/eos ids.
//  - Hugging Face folder: `chat_template.jinja` or `tokenizer_config.json`'s
//    `chat_template` (a string, or a list of {name, template}: "default");
//    stop ids from `generation_config.json`'s `eos_token_id` (one id or a
//    list), else config.json's; BOS / EOS texts from tokenizer_config.json's
//    `bos_token` / `eos_token` (a string or {"content": ...}).
// Anything else (demo, workloads, .fg) has none of these: an empty answer.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

#include <cstdint>
#include <string>
#include <vector>

namespace fg {

struct ModelChatInfo {
  std::string chatTemplate; ///< empty: the model has none
  std::string bosToken, eosToken;
  std::vector<int32_t> eosIds; ///< the generation stops at any of them
};

/// Errors: a model file that cannot be read, metadata of the wrong type,
/// malformed JSON.
llvm::Expected<ModelChatInfo> readModelChatInfo(llvm::StringRef modelPath);

/// `run --chat`: `userText` as one user message in the model's chat template,
/// with the generation prompt, ready for the tokenizer. The template's BOS
/// text is left out when the tokenizer adds BOS itself (`tokenizerAddsBos`),
/// so the prompt does not start with two. Errors: a model without a chat
/// template, a template of no known family (frontends/ChatTemplate.h).
llvm::Expected<std::string> renderUserPrompt(const ModelChatInfo &info, llvm::StringRef userText,
                                             bool tokenizerAddsBos);

} // namespace fg
