//===- ChatTemplateTest.cpp - the C++ renderer against jinja2's renderings ===//
//
// tests/unit/frontends/chat/: the models' chat_template strings (*.jinja), the
// conversations (conversations.json) and what jinja2 renders for each pair
// (expected.json, written by tests/models/gen_chat_fixtures.py, which ctest
// also runs with --check when jinja2 is installed).
//
//===----------------------------------------------------------------------===//
#include "frontends/ChatTemplate.h"

#include "llvm/ADT/StringMap.h"
#include "llvm/Support/MemoryBuffer.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp> // not llvm/Support/JSON.h: clang 14 cannot compile it as C++20

using namespace fg;
using namespace llvm;

namespace {

const std::string kDir = std::string(FG_SOURCE_DIR) + "/tests/unit/frontends/chat/";

std::string readText(const std::string &path) {
  auto buf = MemoryBuffer::getFile(path);
  EXPECT_TRUE(bool(buf)) << path;
  return buf ? (*buf)->getBuffer().str() : std::string();
}

using Json = nlohmann::json;

Json readJson(const std::string &path) {
  std::string text = readText(path);
  Json j = Json::parse(text, nullptr, /*allow_exceptions=*/false);
  EXPECT_FALSE(j.is_discarded()) << path << " is not JSON";
  return j;
}

template <typename T> std::string errorText(Expected<T> &v) {
  return v ? std::string("(no error)") : toString(v.takeError());
}

/// The family each fixture must be detected as.
const StringMap<StringRef> &expectedFamilies() {
  static const StringMap<StringRef> m = {
      {"llama3.1", "llama3.1"}, {"llama3", "llama3"},      {"gemma3", "gemma3"},
      {"gemma2", "gemma"},      {"qwen3", "qwen3"},        {"qwen2", "chatml"},
      {"qwen2.5", "chatml"},    {"phi3.5", "phi3"},        {"llama2", "llama2"},
      {"mistral-nemo", "mistral-v3"}, {"mistral-v0.1", "mistral"}};
  return m;
}

/// Every fixture template x conversation renders as jinja2 renders it, and
/// what the template refuses (a system message for gemma 2, roles that do not
/// alternate) is refused with the template's message.
TEST(ChatTemplate, MatchesJinja2OnTheFamiliesTemplates) {
  Json expected = readJson(kDir + "expected.json");
  Json convs = readJson(kDir + "conversations.json");
  ASSERT_TRUE(expected.is_object() && convs.is_object());
  int checked = 0, refusals = 0;
  for (const auto &[name, entry] : expected.items()) {
    SCOPED_TRACE(name);
    std::string tmpl = readText(kDir + name + ".jinja");
    Expected<ChatStyle> style = detectChatStyle(tmpl);
    ASSERT_TRUE(bool(style)) << errorText(style);
    EXPECT_EQ(chatFamilyName(style->family), expectedFamilies().lookup(name));
    ChatRenderOptions opts;
    opts.bosToken = entry["bos_token"].get<std::string>();
    opts.eosToken = entry["eos_token"].get<std::string>();
    for (const auto &[conv, result] : entry["cases"].items()) {
      SCOPED_TRACE(conv);
      const Json &in = convs[conv];
      opts.addGenerationPrompt = in["add_generation_prompt"].get<bool>();
      std::vector<ChatMessage> messages;
      for (const Json &m : in["messages"])
        messages.push_back({m["role"].get<std::string>(), m["content"].get<std::string>()});
      Expected<std::string> got = renderChat(*style, messages, opts);
      if (result.contains("text")) {
        ASSERT_TRUE(bool(got)) << errorText(got);
        EXPECT_EQ(*got, result["text"].get<std::string>());
      } else {
        std::string err = errorText(got);
        EXPECT_NE(err.find(result["error"].get<std::string>()), std::string::npos) << err;
        ++refusals;
      }
      ++checked;
    }
  }
  EXPECT_EQ(expected.size(), expectedFamilies().size());
  EXPECT_GE(checked, 80);
  EXPECT_GE(refusals, 5);
}

/// chatml takes the template's default system message (qwen2's, qwen2.5's)
/// or none; llama3.1 takes the template's date.
TEST(ChatTemplate, DetailsReadFromTheTemplate) {
  Expected<ChatStyle> q2 = detectChatStyle(readText(kDir + "qwen2.jinja"));
  Expected<ChatStyle> q25 = detectChatStyle(readText(kDir + "qwen2.5.jinja"));
  ASSERT_TRUE(q2 && q25);
  EXPECT_EQ(q2->defaultSystem, "You are a helpful assistant.");
  EXPECT_EQ(q25->defaultSystem, "You are Qwen, created by Alibaba Cloud. You are a helpful assistant.");
  Expected<ChatStyle> plain = detectChatStyle(
      "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' + message['content'] "
      "+ '<|im_end|>' + '\\n'}}{% endfor %}");
  ASSERT_TRUE(bool(plain));
  EXPECT_EQ(plain->defaultSystem, "");
  Expected<std::string> r = renderChat(*plain, {{"user", "x"}});
  ASSERT_TRUE(bool(r));
  EXPECT_EQ(*r, "<|im_start|>user\nx<|im_end|>\n<|im_start|>assistant\n");
  Expected<ChatStyle> l = detectChatStyle(
      "<|start_header_id|> Cutting Knowledge Date {%- set date_string = \"01 Feb 2025\" %}");
  ASSERT_TRUE(bool(l));
  EXPECT_EQ(l->date, "01 Feb 2025");
}

TEST(ChatTemplate, Refusals) {
  Expected<ChatStyle> s = detectChatStyle("{{ messages[0]['content'] }}<|weird|>");
  EXPECT_EQ(errorText(s),
            "the model's chat template is none of the families fusegraph renders (llama3.1, "
            "llama3, gemma3, gemma, qwen3, chatml, phi3, llama2, mistral-v3, mistral); it begins "
            "'{{ messages[0]['content'] }}<|weird|>'");
  Expected<std::string> none = renderChat(readText(kDir + "qwen2.jinja"), {});
  EXPECT_EQ(errorText(none), "chat template: no messages to render");
  Expected<std::string> tool = renderChat(readText(kDir + "llama3.jinja"), {{"tool", "42"}});
  EXPECT_EQ(errorText(tool), "chat template: role 'tool' is not rendered by fusegraph's llama3 "
                             "renderer (system, user and assistant only)");
}

} // namespace
