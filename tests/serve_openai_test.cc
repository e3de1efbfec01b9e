// The OpenAI request mapping of `duet serve` (core/serve/serve_openai.cc),
// without a server or a model: which field each refusal names, what is
// accepted, and where the fields land in the request's settings.
#include "serve_openai.h"

#include <gtest/gtest.h>

#include <string>

namespace duet::serve {
namespace {

ServedModel model() {
  ServedModel m;
  m.id = "tiny";
  m.n_vocab = 100;
  for (const char* name : {"logit_bias", "temperature", "top_p"}) {
    SamplerLink link;
    link.name = name;
    m.chain.push_back(link);
  }
  return m;
}

// The ApiError `body` gets on `endpoint`; fails the test when none is thrown.
ApiError refusal(const std::string& body, Endpoint endpoint = Endpoint::kCompletions) {
  try {
    parse_completion_request(endpoint, body, model());
  } catch (const ApiError& e) {
    return e;
  }
  ADD_FAILURE() << "accepted: " << body;
  return {};
}

TEST(ServeOpenAi, RefusalsNameTheField) {
  EXPECT_EQ(refusal("{").code, "invalid_json");
  EXPECT_EQ(refusal("{").param, "");
  // nlohmann throws out_of_range, not parse_error, for a number beyond a
  // double (found by serve_request_fuzz).
  EXPECT_EQ(refusal(R"({"prompt": "x", "max_tokens": 1e999})").code, "invalid_json");
  EXPECT_EQ(refusal(R"({"prompt": 1})").param, "prompt");
  EXPECT_EQ(refusal(R"({"prompt": ""})").param, "prompt");
  EXPECT_EQ(refusal(R"({"prompt": ["a", "b"]})").param, "prompt");
  EXPECT_EQ(refusal(R"({"prompt": [1, 100]})").param, "prompt");        // id outside the vocabulary
  EXPECT_EQ(refusal(R"({"prompt": "x", "top_k": 3})").param, "top_k");  // no top_k link
  EXPECT_EQ(refusal(R"({"prompt": "x", "temperature": "warm"})").param, "temperature");
  EXPECT_EQ(refusal(R"({"prompt": "x", "max_tokens": 1.5})").param, "max_tokens");
  EXPECT_EQ(refusal(R"({"prompt": "x", "seed": -1})").param, "seed");
  EXPECT_EQ(refusal(R"({"prompt": "x", "logit_bias": {"07": 1}})").param, "logit_bias.07");
  EXPECT_EQ(refusal(R"({"prompt": "x", "logit_bias": {"7": -101}})").param, "logit_bias.7");
  // /v1/completions counts alternatives; chat takes a boolean and top_logprobs.
  EXPECT_EQ(refusal(R"({"prompt": "x", "logprobs": true})").param, "logprobs");
  EXPECT_EQ(refusal(R"({"prompt": "x", "logprobs": 21})").param, "logprobs");
  EXPECT_EQ(refusal(R"({"prompt": "x", "top_logprobs": 2})").code, "unknown_field");
  EXPECT_EQ(refusal(R"({"messages": [], "logprobs": 3})", Endpoint::kChatCompletions).param,
            "logprobs");
  EXPECT_EQ(refusal(R"({"messages": [], "top_logprobs": 2})", Endpoint::kChatCompletions).param,
            "top_logprobs");  // without "logprobs": true
  EXPECT_EQ(refusal(R"({"messages": [], "logprobs": true, "top_logprobs": -1})",
                    Endpoint::kChatCompletions)
                .param,
            "top_logprobs");
  EXPECT_EQ(refusal(R"({"prompt": "x", "n": 2})").code, "unsupported_value");
  EXPECT_EQ(refusal(R"({"prompt": "x", "stream": "yes"})").param, "stream");
  EXPECT_EQ(refusal(R"({"prompt": "x", "messages": []})").code, "unknown_field");
  EXPECT_EQ(refusal(R"({"messages": [{"role": "user", "content": "x", "name": "a"}]})",
                    Endpoint::kChatCompletions)
                .param,
            "messages[0].name");
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

TEST(ServeOpenAi, FieldsLandInTheSettings) {
  const CompletionRequest r = parse_completion_request(
      Endpoint::kCompletions,
      R"({"model": "tiny", "prompt": "hi", "max_tokens": 5, "seed": 9, "stop": "\n",
          "temperature": 0.5, "logit_bias": {"3": -100}, "stream": true,
          "stream_options": {"include_usage": true}, "n": 1, "user": "u", "top_p": null})",
      model());
  EXPECT_EQ(r.prompt, "hi");
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
  EXPECT_EQ(ids.prompt_ids, (std::vector<int32_t>{1, 2, 99}));

  const CompletionRequest c = parse_completion_request(
      Endpoint::kChatCompletions,
      R"({"messages": [{"role": "user", "content": "x"}], "max_completion_tokens": 4})", model());
  ASSERT_EQ(c.messages.size(), 1u);
  EXPECT_EQ(c.messages[0].content, "x");
  EXPECT_EQ(c.settings.max_new_tokens, 4);
  EXPECT_FALSE(c.settings.top_logprobs.has_value());
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
