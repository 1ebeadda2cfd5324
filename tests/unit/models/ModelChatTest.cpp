//===- ModelChatTest.cpp - chat template and stop ids from model files ----===//
#include "ModelFiles.h"

#include "frontends/ModelChat.h"

#include "llvm/Support/FileSystem.h"

#include <gtest/gtest.h>

#include <fstream>

namespace fg {
namespace {

template <typename T> std::string errorText(llvm::Expected<T> &v) {
  return v ? std::string("(no error)") : llvm::toString(v.takeError());
}

/// A GGUF with metadata only (no tensors): the tokenizer keys a chat needs.
std::vector<uint8_t> tokenizerGguf(bool withEot) {
  test::Bytes b;
  const std::vector<std::string> tokens = {"<unk>", "<|begin_of_text|>", "hi", "<|end_of_text|>",
                                           "<|eot_id|>"};
  b.put<uint32_t>(0x46554747).put<uint32_t>(3).put<uint64_t>(0).put<uint64_t>(withEot ? 5 : 4);
  b.str("tokenizer.chat_template").put<uint32_t>(8).str("{{ '<|start_header_id|>' }}");
  b.str("tokenizer.ggml.bos_token_id").put<uint32_t>(4).put<uint32_t>(1);
  b.str("tokenizer.ggml.eos_token_id").put<uint32_t>(4).put<uint32_t>(3);
  if (withEot)
    b.str("tokenizer.ggml.eot_token_id").put<uint32_t>(4).put<uint32_t>(4);
  b.str("tokenizer.ggml.tokens").put<uint32_t>(9).put<uint32_t>(8).put<uint64_t>(tokens.size());
  for (const std::string &t : tokens)
    b.str(t);
  return b.b;
}

/// GGUF: the template, BOS/EOS texts by id, eos + eot ids as stops.
TEST(ModelChat, FromGguf) {
  std::string path = test::tempPath(".gguf");
  test::writeFile(path, tokenizerGguf(true));
  llvm::Expected<ModelChatInfo> info = readModelChatInfo(path);
  ASSERT_TRUE(bool(info)) << errorText(info);
  EXPECT_EQ(info->chatTemplate, "{{ '<|start_header_id|>' }}");
  EXPECT_EQ(info->bosToken, "<|begin_of_text|>");
  EXPECT_EQ(info->eosToken, "<|end_of_text|>");
  EXPECT_EQ(info->eosIds, (std::vector<int32_t>{3, 4}));
  test::writeFile(path, tokenizerGguf(false));
  info = readModelChatInfo(path);
  ASSERT_TRUE(bool(info)) << errorText(info);
  EXPECT_EQ(info->eosIds, (std::vector<int32_t>{3}));
  llvm::sys::fs::remove(path);
}

void writeText(const std::string &path, const std::string &text) {
  std::ofstream(path) << text;
}

/// HF: tokenizer_config.json's template (or the named "default"),
/// generation_config.json's eos list before config.json's id.
TEST(ModelChat, FromHfFolder) {
  llvm::SmallString<128> dir;
  ASSERT_FALSE(llvm::sys::fs::createUniqueDirectory("fg-chat", dir));
  std::string d = dir.str().str();
  writeText(d + "/config.json", R"({"eos_token_id": 2})");
  writeText(d + "/tokenizer_config.json",
            R"({"bos_token": {"content": "<s>"}, "eos_token": "</s>",
                "chat_template": [{"name": "tool_use", "template": "T"},
                                  {"name": "default", "template": "{{ '[INST]' }}"}]})");
  llvm::Expected<ModelChatInfo> info = readModelChatInfo(d);
  ASSERT_TRUE(bool(info)) << errorText(info);
  EXPECT_EQ(info->chatTemplate, "{{ '[INST]' }}");
  EXPECT_EQ(info->bosToken, "<s>");
  EXPECT_EQ(info->eosToken, "</s>");
  EXPECT_EQ(info->eosIds, (std::vector<int32_t>{2}));
  writeText(d + "/generation_config.json", R"({"eos_token_id": [128001, 128008, 128009]})");
  info = readModelChatInfo(d);
  ASSERT_TRUE(bool(info)) << errorText(info);
  EXPECT_EQ(info->eosIds, (std::vector<int32_t>{128001, 128008, 128009}));
  writeText(d + "/tokenizer_config.json", "{not json");
  info = readModelChatInfo(d);
  EXPECT_NE(errorText(info).find("tokenizer_config.json: error: malformed JSON"), std::string::npos)
      << errorText(info);
  // No chat metadata at all: an empty answer, not an error.
  llvm::Expected<ModelChatInfo> demo = readModelChatInfo("demo");
  ASSERT_TRUE(bool(demo));
  EXPECT_TRUE(demo->chatTemplate.empty() && demo->eosIds.empty());
  llvm::sys::fs::remove_directories(d);
}

} // namespace
} // namespace fg
