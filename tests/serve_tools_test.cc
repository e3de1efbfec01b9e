// Tools in `duet serve` (core/serve/tool_calls.cc and the request, message
// and response parts of serve_openai.cc), without a server or a model: the
// tools and tool_choice read, the grammar a forced call gets, the calls read
// back from an answer however it is cut into pieces, and the response JSON.
// The template side is chat_template_test's; a model answering through them
// is serve_test.py's ServeTools.
#include <gtest/gtest.h>

#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "chat_messages.h"
#include "grammar.h"
#include "grammar_link.h"
#include "grammar_matcher.h"
#include "serve_openai.h"
#include "tool_calls.h"

namespace duet::serve {
namespace {

using nlohmann::json;
using Syntax = ChatTemplate::ToolSyntax;

constexpr const char* kWeather =
    R"({"type": "function", "function": {"name": "get_weather", "description": "Weather.",
        "parameters": {"type": "object", "properties": {"unit": {"enum": ["C", "F"]},
        "city": {"type": "string"}}, "required": ["city", "unit"]}}})";
constexpr const char* kTime = R"({"type": "function", "function": {"name": "get_time"}})";

ServedModel model(Syntax syntax) {
  ServedModel m;
  m.id = "tiny";
  m.n_vocab = 100;
  m.tool_syntax = syntax;
  return m;
}

CompletionRequest chat(const std::string& fields, Syntax syntax = Syntax::kHermes) {
  return parse_completion_request(
      Endpoint::kChatCompletions,
      R"({"messages": [{"role": "user", "content": "x"}], )" + fields + "}", model(syntax));
}

ApiError refusal(const std::string& fields, Syntax syntax = Syntax::kHermes) {
  try {
    chat(fields, syntax);
  } catch (const ApiError& e) {
    return e;
  }
  ADD_FAILURE() << "accepted: " << fields;
  return {};
}

std::string tools(const std::string& list) { return R"("tools": [)" + list + "]"; }

TEST(ServeTools, ToolsAndToolChoiceAreRead) {
  const CompletionRequest r = chat(tools(std::string(kWeather) + ", " + kTime));
  EXPECT_EQ(r.tools.names, (std::vector<std::string>{"get_weather", "get_time"}));
  EXPECT_EQ(r.tools.choice, ToolChoice::kAuto);
  EXPECT_TRUE(r.tools.offered());
  // The schema keeps its key order (unit before city), as sent.
  EXPECT_LT(r.tools.tools.find("\"unit\""), r.tools.tools.find("\"city\""));
  EXPECT_TRUE(r.settings.grammar.empty());  // hermes + auto: the model chooses freely

  const CompletionRequest named =
      chat(tools(kWeather) +
           R"(, "tool_choice": {"type": "function", "function": {"name": "get_weather"}},
          "parallel_tool_calls": false)");
  EXPECT_EQ(named.tools.choice, ToolChoice::kNamed);
  EXPECT_EQ(named.tools.named, "get_weather");
  EXPECT_FALSE(named.tools.parallel);
  EXPECT_EQ(named.settings.grammar.at("prefix"), "<tool_call>\n");
  EXPECT_EQ(named.settings.grammar.at("suffix"), "\n</tool_call>");

  const CompletionRequest none = chat(tools(kWeather) + R"(, "tool_choice": "none")");
  EXPECT_FALSE(none.tools.offered());
  EXPECT_TRUE(none.settings.grammar.empty());
  EXPECT_FALSE(chat(R"("tool_choice": "none")").tools.offered());
}

TEST(ServeTools, RefusalsNameTheField) {
  EXPECT_EQ(refusal(R"("tools": {})").param, "tools");
  EXPECT_EQ(refusal(tools(R"({"type": "code_interpreter"})")).param, "tools[0]");
  EXPECT_EQ(refusal(tools(R"({"type": "function", "function": {}})")).param,
            "tools[0].function.name");
  EXPECT_EQ(
      refusal(tools(R"({"type": "function", "function": {"name": "f", "parameters": 3}})")).param,
      "tools[0].function.parameters");
  EXPECT_EQ(refusal(tools(R"({"type": "function", "function": {"name": "f", "x": 1}})")).param,
            "tools[0].function.x");
  EXPECT_EQ(refusal(tools(std::string(kTime) + ", " + kTime)).param, "tools[1].function.name");
  EXPECT_EQ(refusal(tools(kTime) + R"(, "tool_choice": "always")").param, "tool_choice");
  const ApiError unknown =
      refusal(tools(kTime) + R"(, "tool_choice": {"type": "function", "function": {"name": "g"}})");
  EXPECT_EQ(unknown.param, "tool_choice");
  EXPECT_NE(unknown.message.find("get_time"), std::string::npos) << unknown.message;
  EXPECT_EQ(refusal(R"("tool_choice": "required")").param, "tool_choice");  // no tools
  EXPECT_EQ(refusal(R"("tools": [], "tool_choice": "required")").param, "tool_choice");
  EXPECT_EQ(refusal(tools(kTime) + R"(, "parallel_tool_calls": 1)").param, "parallel_tool_calls");
  // A template that cannot take tools refuses them, but not tool_choice none.
  const ApiError builtin = refusal(tools(kTime), Syntax::kNone);
  EXPECT_EQ(builtin.param, "tools");
  EXPECT_NE(builtin.message.find("model.chat_template"), std::string::npos) << builtin.message;
  EXPECT_NO_THROW(chat(tools(kTime) + R"(, "tool_choice": "none")", Syntax::kNone));
  // A forced call and response_format both constrain the answer.
  EXPECT_EQ(refusal(tools(kTime) + R"(, "tool_choice": "required",
                    "response_format": {"type": "json_object"})")
                .param,
            "response_format");
  // /v1/completions takes no tools.
  try {
    parse_completion_request(Endpoint::kCompletions,
                             std::string(R"({"prompt": "x", )") + tools(kTime) + "}",
                             model(Syntax::kHermes));
    ADD_FAILURE() << "completions took tools";
  } catch (const ApiError& e) {
    EXPECT_EQ(e.param, "tools");
  }
}

TEST(ServeTools, MessagesCarryCallsAndResults) {
  const CompletionRequest r =
      parse_completion_request(Endpoint::kChatCompletions,
                               R"({"messages": [{"role": "user", "content": "w?"},
          {"role": "assistant", "content": null, "tool_calls": [{"id": "c1", "type": "function",
           "function": {"name": "get_weather", "arguments": "{\"city\": \"Oslo\"}"}}]},
          {"role": "tool", "tool_call_id": "c1", "name": "get_weather", "content": "3 C"}]})",
                               model(Syntax::kHermes));
  ASSERT_EQ(r.messages.size(), 3u);
  const json calls = json::parse(r.messages[1].tool_calls);
  EXPECT_EQ(calls[0]["id"], "c1");
  EXPECT_EQ(calls[0]["function"]["name"], "get_weather");
  EXPECT_EQ(json::parse(calls[0]["function"]["arguments"].get<std::string>())["city"], "Oslo");
  EXPECT_EQ(r.messages[1].content, "");
  EXPECT_EQ(r.messages[2].role, "tool");
  EXPECT_EQ(r.messages[2].tool_call_id, "c1");
  EXPECT_EQ(r.messages[2].name, "get_weather");
  EXPECT_EQ(r.messages[2].content, "3 C");

  const auto refused = [](const std::string& messages) {
    try {
      parse_completion_request(Endpoint::kChatCompletions, R"({"messages": )" + messages + "}",
                               model(Syntax::kHermes));
    } catch (const ApiError& e) {
      return e.param;
    }
    return std::string("(accepted)");
  };
  EXPECT_EQ(refused(R"([{"role": "tool", "content": "3 C"}])"), "messages[0]");
  EXPECT_EQ(refused(R"([{"role": "user", "content": "x", "tool_calls": [{"function": {}}]}])"),
            "messages[0].tool_calls");
  EXPECT_EQ(refused(R"([{"role": "assistant", "tool_calls": [{"type": "function",
                    "function": {"name": "f", "arguments": "{oops"}}]}])"),
            "messages[0].tool_calls[0].function.arguments");
  EXPECT_EQ(
      refused(R"([{"role": "assistant", "tool_calls": [{"function": {"arguments": "{}"}}]}])"),
      "messages[0].tool_calls[0].function.name");
  EXPECT_EQ(refused(R"([{"role": "assistant", "content": "x", "function_call": {}}])"),
            "messages[0].function_call");
  // What clients dump: nulls for keys not used, an empty list of calls.
  const CompletionRequest dumped = parse_completion_request(
      Endpoint::kChatCompletions,
      R"({"messages": [{"role": "user", "content": "x", "name": null, "tool_call_id": null},
                       {"role": "assistant", "content": "y", "function_call": null,
                        "tool_calls": []},
                       {"role": "user", "content": "z"}]})",
      model(Syntax::kHermes));
  ASSERT_EQ(dumped.messages.size(), 3u);
  EXPECT_EQ(dumped.messages[1].tool_calls, "");
}

// Feeds `text` to a reader in pieces of `size` bytes, then finishes it.
ToolCallReader::Output read_in_pieces(Syntax syntax, const std::string& text, size_t size) {
  ToolCallReader reader(syntax);
  ToolCallReader::Output all;
  const auto take = [&all](ToolCallReader::Output out) {
    all.content += out.content;
    for (ToolCall& c : out.calls) all.calls.push_back(std::move(c));
  };
  for (size_t at = 0; at < text.size(); at += size) take(reader.feed(text.substr(at, size)));
  take(reader.finish());
  EXPECT_EQ(reader.called(), !all.calls.empty());
  return all;
}

TEST(ServeTools, HermesCallsAreReadHoweverTheTextIsCut) {
  const std::string text =
      "Let me look.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": "
      "\"Oslo\"}}\n</tool_call>\n<tool_call>\n{\"name\": \"get_time\", \"parameters\": "
      "\"{}\"}\n</tool_call>\n";
  for (size_t size : {1, 2, 3, 5, 11, 1000}) {
    SCOPED_TRACE(size);
    const ToolCallReader::Output out = read_in_pieces(Syntax::kHermes, text, size);
    EXPECT_EQ(out.content, "Let me look.");
    ASSERT_EQ(out.calls.size(), 2u);
    EXPECT_EQ(out.calls[0].name, "get_weather");
    EXPECT_EQ(json::parse(out.calls[0].arguments), json::parse(R"({"city": "Oslo"})"));
    EXPECT_EQ(out.calls[1].name, "get_time");
    EXPECT_EQ(out.calls[1].arguments, "{}");
    EXPECT_EQ(out.calls[0].id.size(), 29u);  // "call_" and 24 hex digits
    EXPECT_NE(out.calls[0].id, out.calls[1].id);
  }
}

TEST(ServeTools, HermesTextThatIsNoCallStaysContent) {
  for (size_t size : {1, 4, 1000}) {
    SCOPED_TRACE(size);
    // A lone '<' and a block whose body is not a call.
    EXPECT_EQ(read_in_pieces(Syntax::kHermes, "a < b <tool", size).content, "a < b <tool");
    const ToolCallReader::Output bad =
        read_in_pieces(Syntax::kHermes, "x<tool_call>{\"args\": 1}</tool_call>", size);
    EXPECT_TRUE(bad.calls.empty());
    EXPECT_EQ(bad.content, "x<tool_call>{\"args\": 1}</tool_call>");
    // A block cut off by the token limit is a call when its body is whole.
    const ToolCallReader::Output cut = read_in_pieces(
        Syntax::kHermes, "<tool_call>\n{\"name\": \"f\", \"arguments\": {}}\n", size);
    ASSERT_EQ(cut.calls.size(), 1u);
    EXPECT_EQ(cut.content, "");
    EXPECT_EQ(read_in_pieces(Syntax::kHermes, "<tool_call>\n{\"name\": \"f\"", size).content,
              "<tool_call>\n{\"name\": \"f\"");
    // Whitespace is content when no call follows, also before a block
    // that is none.
    EXPECT_EQ(read_in_pieces(Syntax::kHermes, "Hi \n", size).content, "Hi \n");
    EXPECT_EQ(
        read_in_pieces(Syntax::kHermes, "like this:\n<tool_call>oops</tool_call>", size).content,
        "like this:\n<tool_call>oops</tool_call>");
    // The closing tag inside a JSON string is the arguments' text; the
    // arguments keep the model's order.
    const ToolCallReader::Output tag = read_in_pieces(
        Syntax::kHermes,
        "<tool_call>{\"name\": \"f\", \"arguments\": {\"z\": \"s='</tool_call>'\", \"a\": "
        "1}}</tool_call>",
        size);
    ASSERT_EQ(tag.calls.size(), 1u);
    EXPECT_EQ(tag.calls[0].arguments, "{\"z\":\"s='</tool_call>'\",\"a\":1}");
    EXPECT_EQ(tag.content, "");
  }
  // Nesting no request may send is no call (the model can be made to write
  // it; reading it would recurse once per level).
  const std::string deep =
      "<tool_call>{\"name\": \"f\", \"arguments\": {\"a\": " + std::string(100000, '[') +
      std::string(100000, ']') + "}}</tool_call>";
  const ToolCallReader::Output out = read_in_pieces(Syntax::kHermes, deep, 4096);
  EXPECT_TRUE(out.calls.empty());
  EXPECT_EQ(out.content, deep);
  EXPECT_TRUE(read_in_pieces(
                  Syntax::kJson,
                  "{\"tool_calls\": " + std::string(300, '[') + std::string(300, ']') + "}", 100000)
                  .calls.empty());
}

TEST(ServeTools, HermesContentStreamsAheadOfTheAnswersEnd) {
  ToolCallReader reader(Syntax::kHermes);
  EXPECT_EQ(reader.feed("Hello, wor").content, "Hello, wor");
  EXPECT_EQ(reader.feed("ld <tool").content, "ld");  // " <tool" may begin a call
  EXPECT_EQ(reader.feed("s are").content, " <tools are");
}

TEST(ServeTools, JsonAnswersAreCallsOrAResponse) {
  const ToolCallReader::Output calls = read_in_pieces(
      Syntax::kJson,
      R"({"tool_calls": [{"name": "get_time", "arguments": {}}, {"name": "get_weather",
          "arguments": {"city": "Rome"}}]})",
      7);
  ASSERT_EQ(calls.calls.size(), 2u);
  EXPECT_EQ(calls.calls[1].name, "get_weather");
  EXPECT_EQ(calls.content, "");
  const ToolCallReader::Output answer =
      read_in_pieces(Syntax::kJson, R"({"response": "It is sunny."})", 3);
  EXPECT_TRUE(answer.calls.empty());
  EXPECT_EQ(answer.content, "It is sunny.");
  // Anything else is content as written, a bad call included.
  EXPECT_EQ(read_in_pieces(Syntax::kJson, "plain", 2).content, "plain");
  const std::string bad = R"({"tool_calls": [{"name": "f", "arguments": {}}, {"arguments": {}}]})";
  const ToolCallReader::Output mixed = read_in_pieces(Syntax::kJson, bad, 1000);
  EXPECT_TRUE(mixed.calls.empty());
  EXPECT_EQ(mixed.content, bad);
  // Nothing is told before the end.
  ToolCallReader reader(Syntax::kJson);
  EXPECT_EQ(reader.feed(R"({"response": "x"})").content, "");
}

TEST(ServeTools, Llama3AnswersAreOneCallOrStreamedText) {
  for (size_t size : {1, 3, 1000}) {
    SCOPED_TRACE(size);
    const ToolCallReader::Output call =
        read_in_pieces(Syntax::kLlama3,
                       "\n{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Oslo\"}}", size);
    ASSERT_EQ(call.calls.size(), 1u);
    EXPECT_EQ(call.calls[0].name, "get_weather");
    EXPECT_EQ(call.content, "");
    const ToolCallReader::Output tagged = read_in_pieces(
        Syntax::kLlama3, "<|python_tag|>{\"name\": \"f\", \"parameters\": {}}", size);
    ASSERT_EQ(tagged.calls.size(), 1u);
    EXPECT_EQ(tagged.calls[0].arguments, "{}");
    // JSON that is no call, and a tag's look-alike, are content as written.
    EXPECT_EQ(read_in_pieces(Syntax::kLlama3, "{\"city\": 1}", size).content, "{\"city\": 1}");
    EXPECT_EQ(read_in_pieces(Syntax::kLlama3, "<|pyt", size).content, "<|pyt");
    EXPECT_EQ(read_in_pieces(Syntax::kLlama3, "  ", size).content, "  ");
  }
  // Text streams as it comes, once its first character shows it is no call.
  ToolCallReader reader(Syntax::kLlama3);
  EXPECT_EQ(reader.feed(" ").content, "");
  EXPECT_EQ(reader.feed("It is").content, " It is");
  EXPECT_EQ(reader.feed(" {sunny}").content, " {sunny}");
  EXPECT_EQ(reader.finish().content, "");
  EXPECT_FALSE(reader.called());
}

TEST(ServeTools, ForcedCallsGetASchemaOfTheToolsCalls) {
  const CompletionRequest required =
      chat(tools(std::string(kWeather) + ", " + kTime) + R"(, "tool_choice": "required")");
  const json call = json::parse(required.settings.grammar.at("json_schema"));
  ASSERT_EQ(call["anyOf"].size(), 2u);
  EXPECT_EQ(call["anyOf"][0]["properties"]["name"]["const"], "get_weather");
  EXPECT_EQ(call["anyOf"][0]["properties"]["arguments"]["required"], json({"city", "unit"}));
  // A function without parameters takes the empty object.
  EXPECT_EQ(call["anyOf"][1]["properties"]["arguments"]["additionalProperties"], false);
  EXPECT_EQ(call["anyOf"][1]["required"], json({"name", "arguments"}));

  // Under json: calls or a response for auto; one call when not parallel.
  const json auto_schema =
      json::parse(chat(tools(kTime), Syntax::kJson).settings.grammar.at("json_schema"));
  ASSERT_EQ(auto_schema["anyOf"].size(), 2u);
  EXPECT_EQ(auto_schema["anyOf"][0]["properties"]["tool_calls"]["minItems"], 1);
  EXPECT_FALSE(auto_schema["anyOf"][0]["properties"]["tool_calls"].contains("maxItems"));
  EXPECT_EQ(auto_schema["anyOf"][1]["required"], json({"response"}));
  const CompletionRequest single = chat(
      tools(kTime) + R"(, "tool_choice": "required", "parallel_tool_calls": false)", Syntax::kJson);
  const json one = json::parse(single.settings.grammar.at("json_schema"));
  EXPECT_EQ(one["properties"]["tool_calls"]["maxItems"], 1);
  EXPECT_EQ(single.settings.grammar.count("prefix"), 0u);

  // Under llama3: one object with "parameters", and nothing forced for auto.
  const CompletionRequest llama =
      chat(tools(kWeather) + R"(, "tool_choice": "required")", Syntax::kLlama3);
  const json object = json::parse(llama.settings.grammar.at("json_schema"));
  EXPECT_EQ(object["required"], json({"name", "parameters"}));
  EXPECT_EQ(object["properties"]["name"]["const"], "get_weather");
  EXPECT_EQ(llama.settings.grammar.count("prefix"), 0u);
  EXPECT_TRUE(chat(tools(kWeather), Syntax::kLlama3).settings.grammar.empty());
}

TEST(ServeTools, ResponsesCarryTheCalls) {
  const Completed c{"chatcmpl-1", 0, "tiny"};
  Choice choice;
  choice.tool_calls = {{"call_1", "get_time", "{}"}};
  const json body = completion_json(Endpoint::kChatCompletions, c, {&choice, 1}, {3, 4});
  const json& message = body["choices"][0]["message"];
  EXPECT_TRUE(message["content"].is_null());
  EXPECT_EQ(message["tool_calls"][0]["id"], "call_1");
  EXPECT_EQ(message["tool_calls"][0]["type"], "function");
  EXPECT_EQ(message["tool_calls"][0]["function"]["arguments"], "{}");
  EXPECT_EQ(body["choices"][0]["finish_reason"], "tool_calls");
  choice.finish = FinishReason::kLength;  // cut short: its reason stays
  EXPECT_EQ(completion_json(Endpoint::kChatCompletions, c, {&choice, 1},
                            {3, 4})["choices"][0]["finish_reason"],
            "length");
  Choice plain;
  plain.text = "hi";
  const json answer = completion_json(Endpoint::kChatCompletions, c, {&plain, 1}, {3, 4});
  EXPECT_EQ(answer["choices"][0]["message"]["content"], "hi");
  EXPECT_FALSE(answer["choices"][0]["message"].contains("tool_calls"));

  // Streamed: each call whole, numbered on; then the finish says tool_calls.
  const std::string event = stream_tool_calls_event(c, 0, 1, choice.tool_calls);
  const json chunk = json::parse(event.substr(6));  // after "data: "
  const json& delta = chunk["choices"][0]["delta"]["tool_calls"][0];
  EXPECT_EQ(delta["index"], 1);
  EXPECT_EQ(delta["function"]["name"], "get_time");
  const json finish = json::parse(
      stream_finish_event(Endpoint::kChatCompletions, c, 0, FinishReason::kStop, true).substr(6));
  EXPECT_EQ(finish["choices"][0]["finish_reason"], "tool_calls");
}

// Whether the grammar link's options `grammar` (tool_grammar's) allow `text`.
bool allows(const std::map<std::string, std::string>& grammar, const std::string& text) {
  Options options("request.grammar");
  for (const auto& [key, value] : grammar) options.set(key, value);
  const duet::grammar::Grammar g =
      duet::grammar::parse_gbnf(duet::grammar::grammar_text(options), "test");
  const duet::grammar::Matcher m(g);
  duet::grammar::MatchState s = m.start();
  return m.advance(s, text) && m.accepting(s);
}

// A tool's own definitions and references (a pydantic model holding
// another: $defs, "#" for recursion) keep their meaning inside the schema of
// several tools, where references resolve against its root (a review found
// "#/$defs/X" refused and "#" pointing at the whole call).
TEST(ServeTools, ForcedCallsKeepEachToolsReferences) {
  const std::string nested = R"({"type": "function", "function": {"name": "save",
      "parameters": {"$defs": {"Item": {"type": "object", "properties": {"n": {"type": "integer"}},
                                        "required": ["n"]}},
                     "type": "object",
                     "properties": {"item": {"$ref": "#/$defs/Item"},
                                    "next": {"anyOf": [{"$ref": "#"}, {"type": "null"}]}},
                     "required": ["item", "next"]}}})";
  for (const Syntax syntax : {Syntax::kHermes, Syntax::kLlama3}) {
    SCOPED_TRACE(static_cast<int>(syntax));
    const CompletionRequest r =
        chat(tools(nested + ", " + kTime) + R"(, "tool_choice": "required")", syntax);
    const std::string args = syntax == Syntax::kHermes ? "arguments" : "parameters";
    const std::string before = syntax == Syntax::kHermes ? "<tool_call>\n" : "";
    const std::string after = syntax == Syntax::kHermes ? "\n</tool_call>" : "";
    const auto call = [&](const std::string& name, const std::string& value) {
      return before + R"({"name": ")" + name + R"(", ")" + args + R"(": )" + value + "}" + after;
    };
    EXPECT_TRUE(
        allows(r.settings.grammar,
               call("save", R"({"item": {"n": 1}, "next": {"item": {"n": 2}, "next": null}})")));
    EXPECT_TRUE(allows(r.settings.grammar, call("get_time", "{}")));
    EXPECT_FALSE(allows(r.settings.grammar, call("save", R"({"item": {"n": "x"}, "next": null})")));
    // "#" is the parameters, not the whole call.
    EXPECT_FALSE(allows(r.settings.grammar,
                        call("save", R"({"item": {"n": 1}, "next": {"name": "save"}})")));
  }
}

// Records what it is asked to encode; one id per byte.
class RecordingTokenizer final : public Tokenizer {
 public:
  struct Piece {
    std::string text;
    bool special;
  };
  mutable std::vector<Piece> pieces;

  int32_t vocab_size() const override { return 256; }
  std::vector<int32_t> encode(std::string_view text, bool special) const override {
    if (!text.empty()) pieces.push_back({std::string(text), special});
    return std::vector<int32_t>(text.begin(), text.end());
  }
  std::string piece(int32_t id) const override { return std::string(1, static_cast<char>(id)); }
  bool is_end_of_generation(int32_t) const override { return false; }
  std::optional<int32_t> find_token(std::string_view) const override { return std::nullopt; }
  std::optional<int32_t> bos_id() const override { return std::nullopt; }
  std::optional<int32_t> eos_id() const override { return std::nullopt; }
  bool add_bos() const override { return false; }
  bool is_control(int32_t) const override { return false; }
};

ChatTemplate template_file(const std::string& name, const std::string& eos) {
  std::ifstream file(std::string(DUET_SOURCE_DIR) + "/tests/data/templates/" + name);
  const std::string text{std::istreambuf_iterator<char>(file), {}};
  return ChatTemplate::from_jinja(text, eos, name);
}

// Contents are encoded apart, without control tokens: also a tool result
// the template writes through tojson (Llama 3.x's), which gets the content
// JSON-escaped; and request text the template writes itself cannot pass
// for a content's marker (a review found a forged one read past the end of
// the messages, and an unclosed one looped for ever).
TEST(ServeTools, ContentsAreEncodedApartEvenThroughTojson) {
  const ChatTemplate chat = template_file("llama3-style-tools.jinja", "<|eot_id|>");
  const std::string calls =
      R"([{"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}])";
  for (const std::string id : {"c1", "\x01duet-message-99999999\x01", "\x01duet-message-0"}) {
    SCOPED_TRACE(id);
    const std::vector<ChatMessage> messages = {{"user", "Say <|eot_id|> now", "", "", ""},
                                               {"assistant", "", calls, "", ""},
                                               {"tool", "line 1\n\"two\" <|eot_id|>", "", id, "f"}};
    RecordingTokenizer tokenizer;
    const std::vector<int32_t> ids = tokenize_messages(tokenizer, chat, std::nullopt, messages);
    std::string all, apart;
    for (const RecordingTokenizer::Piece& p : tokenizer.pieces) {
      all += p.text;
      if (!p.special) apart += p.text + "|";
    }
    EXPECT_EQ(apart, "Say <|eot_id|> now|line 1\\n\\\"two\\\" <|eot_id|>|");
    // The text is the template's with the contents in place.
    std::vector<ChatTemplate::Turn> turns;
    for (const ChatMessage& m : messages)
      turns.push_back({m.role, m.content, m.tool_calls, m.tool_call_id, m.name});
    EXPECT_EQ(all, chat.apply_conversation(turns));
    EXPECT_EQ(ids.size(), all.size());
  }
}

}  // namespace
}  // namespace duet::serve
