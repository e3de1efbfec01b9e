// The OpenAI request mapping of `duet serve` (core/serve/serve_openai.cc),
// without a server or a model: which field each refusal names, what is
// accepted, and where the fields land in the request's settings.
#include "serve_openai.h"

#include <gtest/gtest.h>

#include <string>

namespace duet::serve {
namespace {

// A chain of logit_bias, temperature written in the shorthand form
// (`- temperature: 0`, so its option is "value"), top_p with its option
// named (`- top_p: {p: 0.9}`) and top_k with none.
ServedModel model(bool strict = false) {
  ServedModel m;
  m.id = "tiny";
  m.n_vocab = 100;
  m.strict_fields = strict;
  for (const char* name : {"logit_bias", "temperature", "top_p", "top_k"}) {
    SamplerLink link;
    link.name = name;
    if (link.name == "temperature") link.options.set("value", "0");
    if (link.name == "top_p") link.options.set("p", "0.9");
    m.chain.push_back(link);
  }
  return m;
}

// The ApiError `body` gets on `endpoint`; fails the test when none is thrown.
ApiError refusal(const std::string& body, Endpoint endpoint = Endpoint::kCompletions,
                 bool strict = false) {
  try {
    parse_completion_request(endpoint, body, model(strict));
  } catch (const ApiError& e) {
    return e;
  }
  ADD_FAILURE() << "accepted: " << body;
  return {};
}

// Pieces "a", "é" split over two tokens (0xC3, 0xA9), "b".
std::string piece_of(int32_t id) {
  switch (id) {
    case 1:
      return "a";
    case 2:
      return "\xC3";
    case 3:
      return "\xA9";
    default:
      return "b";
  }
}

TEST(ServeOpenAi, RefusalsNameTheField) {
  EXPECT_EQ(refusal("{").code, "invalid_json");
  EXPECT_EQ(refusal("{").param, "");
  // nlohmann throws out_of_range, not parse_error, for a number beyond a
  // double (found by serve_request_fuzz).
  EXPECT_EQ(refusal(R"({"prompt": "x", "max_tokens": 1e999})").code, "invalid_json");
  EXPECT_EQ(refusal(R"({"prompt": 1})").param, "prompt");
  EXPECT_EQ(refusal(R"({"prompt": ""})").param, "prompt");
  EXPECT_EQ(refusal(R"({"prompt": [1, 100]})").param, "prompt");        // id outside the vocabulary
  EXPECT_EQ(refusal(R"({"prompt": "x", "min_p": 3})").param, "min_p");  // no min_p link
  EXPECT_EQ(refusal(R"({"prompt": "x", "temperature": "warm"})").param, "temperature");
  EXPECT_EQ(refusal(R"({"prompt": "x", "max_tokens": 1.5})").param, "max_tokens");
  EXPECT_EQ(refusal(R"({"prompt": "x", "seed": -1})").param, "seed");
  EXPECT_EQ(refusal(R"({"prompt": "x", "logit_bias": {"07": 1}})").param, "logit_bias.07");
  EXPECT_EQ(refusal(R"({"prompt": "x", "logit_bias": {"7": -101}})").param, "logit_bias.7");
  // /v1/completions counts alternatives; chat takes a boolean and top_logprobs.
  EXPECT_EQ(refusal(R"({"prompt": "x", "logprobs": true})").param, "logprobs");
  EXPECT_EQ(refusal(R"({"prompt": "x", "logprobs": 21})").param, "logprobs");
  EXPECT_EQ(refusal(R"({"prompt": "x", "top_logprobs": 2})", Endpoint::kCompletions, true).code,
            "unknown_field");
  EXPECT_EQ(refusal(R"({"messages": [], "logprobs": 3})", Endpoint::kChatCompletions).param,
            "logprobs");
  EXPECT_EQ(refusal(R"({"messages": [], "top_logprobs": 2})", Endpoint::kChatCompletions).param,
            "top_logprobs");  // without "logprobs": true
  EXPECT_EQ(refusal(R"({"messages": [], "logprobs": true, "top_logprobs": -1})",
                    Endpoint::kChatCompletions)
                .param,
            "top_logprobs");
  EXPECT_EQ(refusal(R"({"prompt": "x", "n": 0})").param, "n");
  EXPECT_EQ(refusal(R"({"prompt": "x", "n": 65})").param, "n");
  EXPECT_EQ(refusal(R"({"prompt": ["x", "y"], "n": 33})").param, "n");  // 66 choices
  EXPECT_EQ(refusal(R"({"prompt": ["x", ""]})").param, "prompt");
  EXPECT_EQ(refusal(R"({"prompt": ["x", 3]})").param, "prompt");
  EXPECT_EQ(refusal(R"({"prompt": []})").param, "prompt");
  EXPECT_EQ(refusal(R"({"prompt": "x", "best_of": 2})").code, "unsupported_value");
  EXPECT_EQ(refusal(R"({"prompt": "x", "stream": "yes"})").param, "stream");
  EXPECT_EQ(refusal(R"({"prompt": "x", "messages": []})", Endpoint::kCompletions, true).code,
            "unknown_field");
  EXPECT_EQ(refusal(R"({"messages": [{"role": "user", "content": "x", "name": 3}]})",
                    Endpoint::kChatCompletions)
                .param,
            "messages[0].name");
  EXPECT_EQ(refusal(R"({"messages": [{"role": "user", "content": "x", "tool_call_id": "a"}]})",
                    Endpoint::kChatCompletions)
                .param,
            "messages[0].tool_call_id");
  EXPECT_EQ(
      refusal(R"({"messages": [{"role": "user", "content": null}]})", Endpoint::kChatCompletions)
          .param,
      "messages[0].content");  // null only for the assistant
  EXPECT_EQ(refusal(R"({"messages": [{"role": "user", "content": [{"type": "image_url"}]}]})",
                    Endpoint::kChatCompletions)
                .param,
            "messages[0].content[0].type");
  EXPECT_EQ(refusal(R"({"messages": [{"role": "user", "content": [{"type": "text"}]}]})",
                    Endpoint::kChatCompletions)
                .param,
            "messages[0].content[0]");
  EXPECT_EQ(refusal(R"({"prompt": "x", "ignore_eos": 1})").param, "ignore_eos");
  EXPECT_EQ(refusal(R"({"prompt": "x", "min_tokens": -1})").param, "min_tokens");
  EXPECT_EQ(refusal(R"({"prompt": "x", "max_tokens": 4, "min_tokens": 5})").param, "min_tokens");
  EXPECT_EQ(refusal(R"({"prompt": "x", "modalities": ["audio"]})").code, "unsupported_value");
  EXPECT_EQ(refusal(R"({"prompt": "x", "stream": true, "stream_options": {"x": 1}})",
                    Endpoint::kCompletions, true)
                .param,
            "stream_options.x");
  EXPECT_EQ(refusal(R"({"messages": [], "max_tokens": 2, "max_completion_tokens": 3})",
                    Endpoint::kChatCompletions)
                .param,
            "max_completion_tokens");
  EXPECT_EQ(
      refusal(R"({"messages": [], "max_completion_tokens": 0})", Endpoint::kChatCompletions).param,
      "max_completion_tokens");
  const ApiError other = refusal(R"({"prompt": "x", "model": "gpt-4"})");
  EXPECT_EQ(other.status, 404);
  EXPECT_EQ(other.code, "model_not_found");
  EXPECT_EQ(refusal(R"({"temperature": 1})").code, "missing_field");
}

// 400,000 nested arrays (a 1 MiB body) crashed the server: printing the
// value for its error message recursed once per level.
TEST(ServeOpenAi, DeepNestingIsRefusedBeforeAnythingRecursesOverIt) {
  const auto nested = [](size_t depth) {
    return R"({"prompt": "x", "n": )" + std::string(depth, '[') + std::string(depth, ']') + "}";
  };
  const ApiError deep = refusal(nested(400000));
  EXPECT_EQ(deep.code, "invalid_json");
  EXPECT_NE(deep.message.find("nested 400001 deep, more than the 256"), std::string::npos)
      << deep.message;
  EXPECT_EQ(refusal(nested(255)).param, "n");  // within the bound: the field's own error
  // Brackets inside strings are text.
  EXPECT_NO_THROW(parse_completion_request(
      Endpoint::kCompletions, R"({"prompt": ")" + std::string(1000, '[') + R"(\"["})", model()));
}

TEST(ServeOpenAi, FieldsLandInTheSettings) {
  const CompletionRequest r = parse_completion_request(
      Endpoint::kCompletions,
      R"({"model": "tiny", "prompt": "hi", "max_tokens": 5, "seed": 9, "stop": "\n",
          "temperature": 0.5, "logit_bias": {"3": -100}, "stream": true,
          "stream_options": {"include_usage": true}, "n": 1, "user": "u", "top_p": null})",
      model());
  ASSERT_EQ(r.prompts.size(), 1u);
  EXPECT_EQ(r.prompts[0].text, "hi");
  EXPECT_EQ(r.settings.max_new_tokens, 5);
  EXPECT_EQ(r.settings.seed, 9u);
  ASSERT_TRUE(r.settings.stop.has_value());
  EXPECT_EQ(*r.settings.stop, std::vector<std::string>{"\n"});
  EXPECT_EQ(r.settings.sampler.at("temperature").at("value"), "0.5");
  EXPECT_EQ(r.settings.sampler.at("logit_bias").at("3"), "-100");
  EXPECT_EQ(r.settings.sampler.count("top_p"), 0u);  // null is left out
  EXPECT_TRUE(r.stream);
  EXPECT_TRUE(r.include_usage);

  const CompletionRequest ids =
      parse_completion_request(Endpoint::kCompletions, R"({"prompt": [1, 2, 99]})", model());
  ASSERT_EQ(ids.prompts.size(), 1u);
  EXPECT_EQ(ids.prompts[0].ids, (std::vector<int32_t>{1, 2, 99}));
  // Several prompts, text and ids mixed, each with n choices.
  const CompletionRequest several = parse_completion_request(
      Endpoint::kCompletions, R"({"prompt": ["a", [5, 6], "b"], "n": 3})", model());
  ASSERT_EQ(several.prompts.size(), 3u);
  EXPECT_EQ(several.prompts[1].ids, (std::vector<int32_t>{5, 6}));
  EXPECT_EQ(several.prompts[2].text, "b");
  EXPECT_EQ(several.n, 3);

  const CompletionRequest c = parse_completion_request(
      Endpoint::kChatCompletions,
      R"({"messages": [{"role": "user", "content": "x"}], "max_completion_tokens": 4})", model());
  ASSERT_EQ(c.messages.size(), 1u);
  EXPECT_EQ(c.messages[0].content, "x");
  EXPECT_EQ(c.settings.max_new_tokens, 4);
  EXPECT_FALSE(c.settings.top_logprobs.has_value());
}

// A link's primary option replaces the pipeline's whichever way either
// spells it: the link's name for it or the shorthand "value".
TEST(ServeOpenAi, SamplerOptionsReplaceThePipelinesWhicheverWaySpelt) {
  const auto sampler = [](const std::string& fields) {
    return parse_completion_request(Endpoint::kCompletions, R"({"prompt": "x", )" + fields + "}",
                                    model())
        .settings.sampler;
  };
  EXPECT_EQ(sampler(R"("sampler": {"temperature": {"t": 0.5}})"),
            (SamplerOverrides{{"temperature", {{"value", "0.5"}}}}));
  EXPECT_EQ(sampler(R"("sampler": {"top_p": {"value": 0.5}})"),
            (SamplerOverrides{{"top_p", {{"p", "0.5"}}}}));
  EXPECT_EQ(sampler(R"("sampler": {"top_k": {"k": 5}})"),
            (SamplerOverrides{{"top_k", {{"k", "5"}}}}));
  EXPECT_EQ(sampler(R"("top_k": 5)"), (SamplerOverrides{{"top_k", {{"k", "5"}}}}));
  EXPECT_EQ(sampler(R"("top_p": 0.5)"), (SamplerOverrides{{"top_p", {{"p", "0.5"}}}}));
  EXPECT_EQ(sampler(R"("temperature": 0.5)"),
            (SamplerOverrides{{"temperature", {{"value", "0.5"}}}}));
  // Other options are left as named.
  EXPECT_EQ(sampler(R"("sampler": {"top_p": {"min_keep": 2}})"),
            (SamplerOverrides{{"top_p", {{"min_keep", "2"}}}}));
}

// Fields the server does not use: accepted and listed, unless strict.
TEST(ServeOpenAi, UnknownFieldsAreListedNotRefused) {
  const CompletionRequest r = parse_completion_request(
      Endpoint::kChatCompletions,
      R"({"messages": [{"role": "user", "content": "x"}], "user": "u", "store": false,
          "parallel_tool_calls": true, "frobnicate": 1, "stream": true,
          "stream_options": {"include_usage": true, "continuous_usage_stats": true, "zz": 0}})",
      model());
  // parallel_tool_calls is read (tools), not ignored.
  EXPECT_EQ(r.ignored_fields, (std::vector<std::string>{"frobnicate", "store", "user",
                                                        "stream_options.continuous_usage_stats",
                                                        "stream_options.zz"}));
  EXPECT_EQ(r.unknown_fields, (std::vector<std::string>{"frobnicate", "stream_options.zz"}));
  EXPECT_TRUE(r.include_usage);
  const ApiError strict =
      refusal(R"({"prompt": "x", "temprature": 1})", Endpoint::kCompletions, true);
  EXPECT_EQ(strict.code, "unknown_field");
  EXPECT_NE(strict.message.find("did you mean 'temperature'"), std::string::npos) << strict.message;
  // The documented ignored fields are accepted even when strict.
  EXPECT_NO_THROW(parse_completion_request(
      Endpoint::kCompletions, R"({"prompt": "x", "user": "u", "store": true})", model(true)));
}

// The message shapes of newer clients and benchmarks.
TEST(ServeOpenAi, MessagesTakeTextPartsDeveloperNamesAndNullAssistantContent) {
  const CompletionRequest r =
      parse_completion_request(Endpoint::kChatCompletions,
                               R"({"messages": [{"role": "developer", "content": "Be brief."},
                       {"role": "user", "name": "ann",
                        "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]},
                       {"role": "assistant", "content": null},
                       {"role": "user", "content": []}],
          "max_completion_tokens": 7, "ignore_eos": true, "min_tokens": 3,
          "modalities": ["text"]})",
                               model());
  ASSERT_EQ(r.messages.size(), 4u);
  EXPECT_EQ(r.messages[0].role, "system");
  EXPECT_EQ(r.messages[1].content, "a\nb");
  EXPECT_EQ(r.messages[2].content, "");
  EXPECT_EQ(r.messages[3].content, "");
  EXPECT_EQ(r.settings.max_new_tokens, 7);
  EXPECT_TRUE(r.settings.ignore_end_of_generation);
  EXPECT_EQ(r.settings.min_new_tokens, 3);
}

TEST(ServeOpenAi, EchoAsksForPromptLogprobsWithLogprobsOnly) {
  const auto parse = [](const std::string& body, Endpoint e = Endpoint::kCompletions) {
    return parse_completion_request(e, body, model());
  };
  const CompletionRequest plain = parse(R"({"prompt": "x", "echo": true})");
  EXPECT_TRUE(plain.echo);
  EXPECT_FALSE(plain.settings.prompt_logprobs);
  const CompletionRequest scored = parse(R"({"prompt": "x", "echo": true, "logprobs": 0})");
  EXPECT_TRUE(scored.settings.prompt_logprobs);
  EXPECT_TRUE(parse(R"({"prompt": "x", "echo": true, "stream": true})").echo);
  const ApiError streamed =
      refusal(R"({"prompt": "x", "echo": true, "logprobs": 1, "stream": true})");
  EXPECT_EQ(streamed.param, "echo");
  EXPECT_EQ(streamed.code, "unsupported_value");
  EXPECT_EQ(refusal(R"({"prompt": "x", "echo": 1})").param, "echo");
  EXPECT_EQ(refusal(R"({"messages": [], "echo": true})", Endpoint::kChatCompletions).code,
            "unsupported_value");
}

TEST(ServeOpenAi, PromptLogprobsStartWithANullForTheFirstToken) {
  // Prompt "a", "\xC3", "\xA9" (é split in two): the second and third scored.
  const std::vector<int32_t> prompt = {1, 2, 3};
  const std::vector<TokenLogprobs> entries = {{{2, -0.5f}, {{2, -0.5f}}}, {{3, -0.25f}, {}}};
  int64_t offset = 0;
  nlohmann::json j = prompt_logprobs_json(prompt, entries, piece_of, offset);
  EXPECT_EQ(j.at("token_logprobs"), nlohmann::json::parse("[null, -0.5, -0.25]"));
  EXPECT_EQ(j.at("top_logprobs")[0], nullptr);
  EXPECT_EQ(j.at("text_offset"), nlohmann::json::parse("[0, 1, 2]"));
  EXPECT_EQ(j.at("tokens")[0], "a");
  // The generated tokens follow, offsets counted on.
  const std::vector<TokenLogprobs> generated = {{{4, -1.0f}, {}}};
  append_logprobs(j, logprobs_json(Endpoint::kCompletions, generated, piece_of, offset));
  EXPECT_EQ(j.at("token_logprobs"), nlohmann::json::parse("[null, -0.5, -0.25, -1.0]"));
  EXPECT_EQ(j.at("text_offset"), nlohmann::json::parse("[0, 1, 2, 2]"));
  EXPECT_EQ(j.at("tokens")[3], "b");
}

TEST(ServeOpenAi, UsageIsOnTheUsageChunkOnly) {
  const Completed c{"chatcmpl-1", 0, "tiny"};
  const auto parse = [](const std::string& event) {
    EXPECT_EQ(event.rfind("data: ", 0), 0u);
    return nlohmann::json::parse(event.substr(6));
  };
  const nlohmann::json finish =
      parse(stream_finish_event(Endpoint::kChatCompletions, c, 2, FinishReason::kLength));
  EXPECT_FALSE(finish.contains("usage")) << finish;
  EXPECT_EQ(finish.at("choices")[0].at("finish_reason"), "length");
  EXPECT_EQ(finish.at("choices")[0].at("index"), 2);
  const nlohmann::json usage =
      parse(stream_usage_event(Endpoint::kChatCompletions, c, Usage{3, 2}));
  EXPECT_TRUE(usage.at("choices").empty());
  EXPECT_EQ(
      usage.at("usage"),
      nlohmann::json::parse(R"({"prompt_tokens": 3, "completion_tokens": 2, "total_tokens": 5})"));
}

TEST(ServeOpenAi, LogprobsFieldsSetTheirCount) {
  const auto top = [](Endpoint e, const std::string& body) {
    return parse_completion_request(e, body, model()).settings.top_logprobs;
  };
  EXPECT_EQ(top(Endpoint::kCompletions, R"({"prompt": "x", "logprobs": 0})"), 0);
  EXPECT_EQ(top(Endpoint::kCompletions, R"({"prompt": "x", "logprobs": 20})"), 20);
  EXPECT_EQ(top(Endpoint::kCompletions, R"({"prompt": "x", "logprobs": null})"), std::nullopt);
  EXPECT_EQ(top(Endpoint::kCompletions, R"({"prompt": "x", "logprobs": false})"), std::nullopt);
  EXPECT_EQ(top(Endpoint::kChatCompletions, R"({"messages": [], "logprobs": true})"), 0);
  EXPECT_EQ(top(Endpoint::kChatCompletions, R"({"messages": [], "logprobs": false})"),
            std::nullopt);
  EXPECT_EQ(
      top(Endpoint::kChatCompletions, R"({"messages": [], "logprobs": true, "top_logprobs": 4})"),
      4);
}

TEST(ServeOpenAi, CompletionLogprobsListTokensOffsetsAndAlternatives) {
  const std::vector<TokenLogprobs> entries = {
      {{1, -0.5f}, {{1, -0.5f}, {4, -1.5f}}},
      {{2, -0.25f}, {{4, -0.125f}, {1, -3.0f}}},  // the chosen one is not among the best
      {{3, -1.0f}, {}},
  };
  int64_t offset = 7;
  const nlohmann::json j = logprobs_json(Endpoint::kCompletions, entries, piece_of, offset);
  EXPECT_EQ(j.at("token_logprobs"), nlohmann::json::parse("[-0.5, -0.25, -1.0]"));
  EXPECT_EQ(j.at("text_offset"), nlohmann::json::parse("[7, 8, 9]"));
  EXPECT_EQ(offset, 9);  // the continuation byte starts no character
  EXPECT_EQ(j.at("top_logprobs")[0], nlohmann::json::parse(R"({"a": -0.5, "b": -1.5})"));
  EXPECT_EQ(j.at("top_logprobs")[1].size(), 3u);  // b, a and the chosen one
  EXPECT_EQ(j.at("top_logprobs")[2].size(), 1u);
  // Two lone bytes print alike (U+FFFD): one key, the more likely one's.
  const std::vector<TokenLogprobs> split = {{{2, -0.5f}, {{3, -0.25f}, {2, -0.5f}}}};
  const nlohmann::json k = logprobs_json(Endpoint::kCompletions, split, piece_of, offset);
  EXPECT_EQ(k.at("top_logprobs")[0], nlohmann::json::parse(R"({"\ufffd": -0.25})"));
  EXPECT_EQ(j.at("tokens")[0], "a");
}

TEST(ServeOpenAi, ChatLogprobsCarryEachTokensBytes) {
  const std::vector<TokenLogprobs> entries = {{{2, -0.25f}, {{4, -0.125f}, {2, -0.25f}}}};
  int64_t offset = 0;
  const nlohmann::json j = logprobs_json(Endpoint::kChatCompletions, entries, piece_of, offset);
  const nlohmann::json& first = j.at("content").at(0);
  EXPECT_EQ(first.at("bytes"), nlohmann::json::parse("[195]"));
  EXPECT_EQ(first.at("logprob"), -0.25);
  ASSERT_EQ(first.at("top_logprobs").size(), 2u);  // exactly the top ones
  EXPECT_EQ(first.at("top_logprobs")[0].at("token"), "b");
  EXPECT_EQ(first.at("top_logprobs")[1].at("bytes"), nlohmann::json::parse("[195]"));
  // The lone byte is not UTF-8: the response's text shows U+FFFD, bytes keep it.
  EXPECT_NE(dump(j).find("\"token\":\"\xEF\xBF\xBD\""), std::string::npos) << dump(j);
}

TEST(ServeOpenAi, SamplerErrorsAtSubmitNameTheRequestField) {
  RequestSettings s;
  s.sampler["temperature"]["value"] = "-1";
  const ApiError e =
      refused_error(Error(ErrorKind::kConfig,
                          "components.sampler.chain[1].temperature.value: -1 is out of range"),
                    s);
  EXPECT_EQ(e.status, 400);
  EXPECT_EQ(e.param, "temperature");
  EXPECT_EQ(e.message.rfind("temperature: ", 0), 0u);
  const ApiError long_prompt =
      refused_error(Error(ErrorKind::kInputRejected,
                          "prompt: 9000 tokens, and the KV cache holds 8192 positions"),
                    s);
  EXPECT_EQ(long_prompt.param, "prompt");
  EXPECT_EQ(long_prompt.code, "context_length_exceeded");
  EXPECT_EQ(refused_error(Error(ErrorKind::kInternal, "boom"), s).status, 500);
}

}  // namespace
}  // namespace duet::serve
