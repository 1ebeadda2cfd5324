//===- ModelChatTest.cpp - chat template and stop ids from model files ----===//
#include "ModelFiles.h"

#include "frontends/ModelChat.h"

#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"

#include <algorithm>

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

/// --chat's text: the user message in the template, BOS left to a tokenizer
/// that adds it; a model without a template is refused.
TEST(ModelChat, UserPrompt) {
  ModelChatInfo info;
  info.chatTemplate = "{{ bos_token }}...<|start_header_id|>...<|eot_id|>";
  info.bosToken = "<|begin_of_text|>";
  llvm::Expected<std::string> p = renderUserPrompt(info, " Hi! ", /*tokenizerAddsBos=*/false);
  ASSERT_TRUE(bool(p)) << errorText(p);
  EXPECT_EQ(*p, "<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\nHi!<|eot_id|>"
                "<|start_header_id|>assistant<|end_header_id|>\n\n");
  p = renderUserPrompt(info, "Hi!", /*tokenizerAddsBos=*/true);
  ASSERT_TRUE(bool(p)) << errorText(p);
  EXPECT_EQ(p->rfind("<|start_header_id|>user", 0), 0u) << *p;
  info.chatTemplate.clear();
  p = renderUserPrompt(info, "Hi!", false);
  EXPECT_EQ(errorText(p), "the model has no chat template (GGUF tokenizer.chat_template, HF "
                          "tokenizer_config.json chat_template); give the prompt without --chat");
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

namespace fg {
namespace {

/// The token ids after "tokens: " in run's output.
std::vector<int32_t> tokensOf(const std::string &out) {
  std::vector<int32_t> ids;
  size_t at = out.find("\ntokens: ");
  if (at == std::string::npos)
    return ids;
  llvm::StringRef line = llvm::StringRef(out).substr(at + 9).take_until([](char c) { return c == '\n'; });
  llvm::SmallVector<llvm::StringRef, 16> parts;
  line.split(parts, ' ', -1, false);
  for (llvm::StringRef p : parts)
    ids.push_back(std::stoi(p.str()));
  return ids;
}

/// `run` on an HF folder stops at the eos ids of its generation_config.json
/// (not with --ignore-eos); --seed reproduces a sampled run.
TEST(CliChat, StopsAtTheModelsEosAndSeedsRepeat) {
  if (test::fusegraphBinary().empty())
    GTEST_SKIP() << "no fusegraph binary beside the tests";
  std::string why, dir = test::generatedModels(why);
  if (dir.empty())
    GTEST_SKIP() << "model files not generated: " << why;
  std::string from = dir + "/llama3-hf";
  llvm::SmallString<256> to;
  ASSERT_FALSE(llvm::sys::fs::createUniqueDirectory("fg-chat-eos", to));
  std::error_code ec;
  for (llvm::sys::fs::directory_iterator it(from, ec), end; it != end && !ec; it.increment(ec))
    ASSERT_FALSE(llvm::sys::fs::copy_file(it->path(), to + "/" + llvm::sys::path::filename(it->path())));
  std::string model = to.str().str();
  const std::vector<std::string> base = {"run", model, "--device", "cpu", "--ctx", "32",
                                         "--prefill", "4", "--prompt-ids", "3,17,42", "--steps", "6"};
  int rc = -1;
  std::string out = test::runCli(base, rc);
  ASSERT_EQ(rc, 0) << out;
  std::vector<int32_t> all = tokensOf(out);
  ASSERT_EQ(all.size(), 6u) << out;
  size_t k = 1; // the first token not seen before it
  while (k < all.size() && std::find(all.begin(), all.begin() + k, all[k]) != all.begin() + k)
    ++k;
  ASSERT_LT(k, all.size()) << out;
  // An id past the vocabulary is dropped with a warning, the others stop.
  writeText(model + "/generation_config.json",
            "{\"eos_token_id\": [99999, " + std::to_string(all[k]) + "]}");
  out = test::runCli(base, rc);
  ASSERT_EQ(rc, 0) << out;
  EXPECT_NE(out.find("warning: end-of-sequence id 99999 of "), std::string::npos) << out;
  EXPECT_EQ(tokensOf(out), std::vector<int32_t>(all.begin(), all.begin() + k + 1)) << out;
  EXPECT_NE(out.find("stopped at end of sequence (token " + std::to_string(all[k]) + ")"),
            std::string::npos)
      << out;
  std::vector<std::string> ignore = base;
  ignore.push_back("--ignore-eos");
  out = test::runCli(ignore, rc);
  ASSERT_EQ(rc, 0) << out;
  EXPECT_EQ(tokensOf(out), all) << out;
  // Sampling: the seed is printed and repeats the run.
  std::vector<std::string> sampled = ignore;
  for (const char *a : {"--temperature", "1.3", "--top-k", "20", "--seed", "77"})
    sampled.push_back(a);
  std::string a = test::runCli(sampled, rc);
  ASSERT_EQ(rc, 0) << a;
  EXPECT_NE(a.find("sampling: temperature 1.3, top-k 20, seed 77"), std::string::npos) << a;
  std::string b = test::runCli(sampled, rc);
  ASSERT_EQ(rc, 0) << b;
  EXPECT_EQ(tokensOf(a), tokensOf(b));
  EXPECT_EQ(tokensOf(a).size(), 6u);
  llvm::sys::fs::remove_directories(model);
}

} // namespace
} // namespace fg
