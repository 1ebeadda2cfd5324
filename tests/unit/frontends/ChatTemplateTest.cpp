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
#include "llvm/Support/JSON.h"
#include "llvm/Support/MemoryBuffer.h"

#include <gtest/gtest.h>

using namespace fg;
using namespace llvm;

namespace {

const std::string kDir = std::string(FG_SOURCE_DIR) + "/tests/unit/frontends/chat/";

std::string readText(const std::string &path) {
  auto buf = MemoryBuffer::getFile(path);
  EXPECT_TRUE(bool(buf)) << path;
  return buf ? (*buf)->getBuffer().str() : std::string();
}

json::Value readJson(const std::string &path) {
  Expected<json::Value> v = json::parse(readText(path));
  EXPECT_TRUE(bool(v)) << path << ": " << (v ? "" : toString(v.takeError()));
  return v ? std::move(*v) : json::Value(nullptr);
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
  json::Value expected = readJson(kDir + "expected.json");
  json::Value convs = readJson(kDir + "conversations.json");
  ASSERT_TRUE(expected.getAsObject() && convs.getAsObject());
  int checked = 0, refusals = 0;
  for (const auto &[name, entry] : *expected.getAsObject()) {
    SCOPED_TRACE(name.str());
    std::string tmpl = readText(kDir + name.str() + ".jinja");
    Expected<ChatStyle> style = detectChatStyle(tmpl);
    ASSERT_TRUE(bool(style)) << errorText(style);
    EXPECT_EQ(chatFamilyName(style->family), expectedFamilies().lookup(name));
    const json::Object &e = *entry.getAsObject();
    ChatRenderOptions opts;
    opts.bosToken = e.getString("bos_token")->str();
    opts.eosToken = e.getString("eos_token")->str();
    for (const auto &[conv, result] : *e.getObject("cases")) {
      SCOPED_TRACE(conv.str());
      const json::Object &in = *convs.getAsObject()->getObject(conv);
      opts.addGenerationPrompt = *in.getBoolean("add_generation_prompt");
      std::vector<ChatMessage> messages;
      for (const json::Value &m : *in.getArray("messages"))
        messages.push_back({m.getAsObject()->getString("role")->str(),
                            m.getAsObject()->getString("content")->str()});
      Expected<std::string> got = renderChat(*style, messages, opts);
      const json::Object &r = *result.getAsObject();
      if (Optional<StringRef> text = r.getString("text")) {
        ASSERT_TRUE(bool(got)) << errorText(got);
        EXPECT_EQ(*got, text->str());
      } else {
        std::string err = errorText(got);
        EXPECT_NE(err.find(r.getString("error")->str()), std::string::npos) << err;
        ++refusals;
      }
      ++checked;
    }
  }
  EXPECT_EQ(expected.getAsObject()->size(), expectedFamilies().size());
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
