#include "serve_openai.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>

#include "duet/app/suggest.h"
#include "request_fields.h"

namespace duet::serve {
namespace {

using nlohmann::json;

// Fields accepted and not used: they ask nothing of the answer's text
// (bookkeeping, routing, or options of features duet serve does not have).
// Listed in the response's Duet-Ignored-Fields header.
const std::vector<std::string> kIgnoredKeys = {"user",
                                               "store",
                                               "metadata",
                                               "service_tier",
                                               "prompt_cache_key",
                                               "safety_identifier",
                                               "reasoning_effort"};
// Fields accepted only with the value that means "off".
const std::vector<std::string> kDefaultOnlyKeys = {"best_of", "echo",        "suffix",
                                                   "tools",   "tool_choice", "modalities"};

[[noreturn]] void fail(const std::string& param, const std::string& message,
                       const std::string& code = "invalid_value") {
  throw ApiError{400, message, "invalid_request_error", param, code};
}

std::vector<std::string> known_keys(Endpoint endpoint) {
  std::vector<std::string> keys = {"model",    "stream", "stream_options",  "logit_bias",
                                   "logprobs", "n",      "response_format", "grammar"};
  keys.push_back(endpoint == Endpoint::kCompletions ? "prompt" : "messages");
  if (endpoint == Endpoint::kChatCompletions) {
    for (const char* key : {"max_completion_tokens", "top_logprobs", "parallel_tool_calls"})
      keys.push_back(key);
  }
  for (const auto* list : {&request_setting_keys(), &kIgnoredKeys, &kDefaultOnlyKeys})
    keys.insert(keys.end(), list->begin(), list->end());
  return keys;
}

bool contains(const std::vector<std::string>& list, const std::string& key) {
  return std::find(list.begin(), list.end(), key) != list.end();
}

// n, best_of, echo, logprobs...: only the value that asks for nothing more.
void check_default_only(const std::string& key, const json& v) {
  bool off = false;
  std::string want;
  if (key == "best_of") {
    off = v.is_number_integer() && v.get<int64_t>() == 1;
    want = "1 (use n for several choices)";
  } else if (key == "echo") {
    off = v.is_boolean() && !v.get<bool>();
    want = "false";
  } else if (key == "tool_choice") {
    off = v.is_string() && v.get<std::string>() == "none";
    want = "\"none\" (/v1/chat/completions takes tools)";
  } else if (key == "modalities") {
    off = v == json::array({"text"});
    want = "[\"text\"]";
  } else if (key == "tools") {
    want = "absent (/v1/chat/completions takes tools)";
  } else {  // suffix
    want = "absent";
  }
  if (!off) {
    fail(key,
         key + ": " + dump(v) + " is not supported by duet serve; accepted: " + want +
             " (or leave it out)",
         "unsupported_value");
  }
}

// The grammar that forces the calls tool_choice asks for (tool_grammar),
// on a template that can take tools; whether there is one.
bool read_tool_grammar(const ToolRequest& tools, ChatTemplate::ToolSyntax syntax,
                       RequestSettings& s) {
  if (!tools.offered()) return false;
  if (syntax == ChatTemplate::ToolSyntax::kNone) {
    fail("tools",
         "tools: the model's chat template cannot take tools (a builtin format, or a template "
         "that writes tools in a syntax Duet does not read); set model.chat_template in the "
         "pipeline YAML to a Jinja template (docs/serve.md, \"Tools\"), or leave tools out",
         "unsupported_value");
  }
  std::map<std::string, std::string> grammar = tool_grammar(tools, syntax);
  if (grammar.empty()) return false;
  if (!s.grammar.empty()) {
    fail(s.grammar.count("gbnf") != 0 ? "grammar" : "response_format",
         "response_format (or grammar) and tools with tool_choice both constrain the answer; "
         "give one of them");
  }
  s.grammar = std::move(grammar);
  return true;
}

void read_logit_bias(const json& v, const ServedModel& model, RequestSettings& s) {
  if (!v.is_object())
    fail("logit_bias",
         "logit_bias: expected an object of token id to bias, such as {\"13\": -100}");
  if (std::none_of(model.chain.begin(), model.chain.end(),
                   [](const SamplerLink& l) { return l.name == "logit_bias"; })) {
    fail("logit_bias",
         "logit_bias: the pipeline's sampler chain has no 'logit_bias' link; add '- logit_bias: "
         "{}' to components.sampler.chain to take biases from requests");
  }
  for (const auto& [key, bias] : v.items()) {
    const std::string where = "logit_bias." + key;
    int32_t id = -1;
    const auto [end, ec] = std::from_chars(key.data(), key.data() + key.size(), id);
    if (ec != std::errc() || end != key.data() + key.size() || id < 0 || id >= model.n_vocab ||
        std::to_string(id) != key) {
      fail(where, where + ": the key must be a token id in [0, " +
                      std::to_string(model.n_vocab - 1) + "] written in decimal");
    }
    if (!bias.is_number() || !std::isfinite(bias.get<double>()) || bias.get<double>() < -100 ||
        bias.get<double>() > 100) {
      fail(where, where + ": " + dump(bias) + " is not a number in [-100, 100]");
    }
    s.sampler["logit_bias"][key] = bias.dump();
  }
}

// Token ids `v` (an array of integers) at `where`, each in the vocabulary.
std::vector<int32_t> read_ids(const json& v, const ServedModel& model, const std::string& where) {
  std::vector<int32_t> ids;
  for (size_t i = 0; i < v.size(); ++i) {
    const json& t = v[i];
    if (!t.is_number_integer() || t.get<int64_t>() < 0 || t.get<int64_t>() >= model.n_vocab) {
      fail("prompt", where + "[" + std::to_string(i) + "]: " + dump(t) +
                         " is not a token id in [0, " + std::to_string(model.n_vocab - 1) + "]");
    }
    ids.push_back(static_cast<int32_t>(t.get<int64_t>()));
  }
  return ids;
}

// A string, token ids, or an array of either (several prompts).
void read_prompt(const json& v, const ServedModel& model, CompletionRequest& out) {
  const auto text = [&](const json& t, const std::string& where) {
    if (t.get<std::string>().empty()) fail("prompt", where + " is empty; give some text");
    out.prompts.push_back({t.get<std::string>(), {}});
  };
  const char* expected =
      "prompt: expected a string, an array of token ids, or an array of several of either";
  if (v.is_string()) {
    text(v, "prompt");
  } else if (v.is_array() && !v.empty() && v[0].is_number()) {
    out.prompts.push_back({"", read_ids(v, model, "prompt")});
  } else if (v.is_array() && !v.empty()) {
    for (size_t i = 0; i < v.size(); ++i) {
      const std::string where = "prompt[" + std::to_string(i) + "]";
      if (v[i].is_string()) {
        text(v[i], where);
      } else if (v[i].is_array() && !v[i].empty()) {
        out.prompts.push_back({"", read_ids(v[i], model, where)});
      } else {
        fail("prompt", std::string(expected) + "; " + where + " is " + v[i].type_name());
      }
    }
  } else {
    fail("prompt", std::string(expected) + ", got " +
                       (v.is_array() ? std::string("an empty array") : v.type_name()));
  }
}

// An integer in [0, kMaxTopLogprobs] for `field`.
int32_t read_logprob_count(const json& v, const char* field) {
  if (!v.is_number_integer() || v.get<int64_t>() < 0 || v.get<int64_t>() > kMaxTopLogprobs) {
    fail(field, std::string(field) + ": " + dump(v) + " is not an integer in [0, " +
                    std::to_string(kMaxTopLogprobs) + "]");
  }
  return static_cast<int32_t>(v.get<int64_t>());
}

// /v1/completions: "logprobs": N alternatives. /v1/chat/completions:
// "logprobs": true, with "top_logprobs": N (0 when left out).
void read_logprobs(Endpoint endpoint, const json& object, RequestSettings& s) {
  if (endpoint == Endpoint::kCompletions) {
    if (!object.contains("logprobs")) return;
    const json& v = object.at("logprobs");
    if (v.is_boolean() && !v.get<bool>()) return;  // as some clients send "off"
    s.top_logprobs = read_logprob_count(v, "logprobs");
    return;
  }
  bool wanted = false;
  if (object.contains("logprobs")) {
    const json& v = object.at("logprobs");
    if (!v.is_boolean()) fail("logprobs", "logprobs: expected true or false, got " + dump(v));
    wanted = v.get<bool>();
  }
  if (object.contains("top_logprobs")) {
    const int32_t n = read_logprob_count(object.at("top_logprobs"), "top_logprobs");
    if (!wanted) fail("top_logprobs", "top_logprobs: only with \"logprobs\": true");
    s.top_logprobs = n;
  } else if (wanted) {
    s.top_logprobs = 0;
  }
}

// Code points in `text`, counting a piece's stray bytes of a split
// character as they come (continuation bytes count nothing).
int64_t code_points(const std::string& text) {
  int64_t n = 0;
  for (unsigned char c : text) n += (c & 0xC0) != 0x80;
  return n;
}

// `text` with every byte that is not part of valid UTF-8 replaced by U+FFFD,
// as dump() prints it.
std::string printable(const std::string& text) {
  return json::parse(json(text).dump(-1, ' ', false, json::error_handler_t::replace))
      .get<std::string>();
}

json piece_bytes(const std::string& piece) {
  json bytes = json::array();
  for (unsigned char c : piece) bytes.push_back(static_cast<int>(c));
  return bytes;
}

// An option of stream_options that changes nothing here: vLLM's
// continuous_usage_stats (usage on every chunk) is listed as ignored.
const std::vector<std::string> kIgnoredStreamOptions = {"continuous_usage_stats"};

void read_stream_options(const json& object, bool strict, CompletionRequest& out) {
  if (object.contains("stream")) {
    const json& v = object.at("stream");
    if (!v.is_boolean()) fail("stream", "stream: expected true or false, got " + dump(v));
    out.stream = v.get<bool>();
  }
  if (!object.contains("stream_options")) return;
  const json& v = object.at("stream_options");
  if (!out.stream) fail("stream_options", "stream_options: only with \"stream\": true");
  if (!v.is_object()) fail("stream_options", "stream_options: expected an object");
  for (const auto& [key, value] : v.items()) {
    const std::string field = "stream_options." + key;
    if (key != "include_usage") {
      const bool known = contains(kIgnoredStreamOptions, key);
      if (strict && !known) fail(field, field + ": unknown option; the one known is include_usage");
      out.ignored_fields.push_back(field);
      if (!known) out.unknown_fields.push_back(field);
      continue;
    }
    if (!value.is_boolean())
      fail("stream_options.include_usage", "stream_options.include_usage: expected true or false");
    out.include_usage = value.get<bool>();
  }
}

json error_json(const ApiError& e) {
  return {{"error",
           {{"message", e.message},
            {"type", e.type},
            {"param", e.param.empty() ? json(nullptr) : json(e.param)},
            {"code", e.code.empty() ? json(nullptr) : json(e.code)}}}};
}

std::string event(const json& j) { return "data: " + dump(j) + "\n\n"; }

json chunk_base(Endpoint endpoint, const Completed& c) {
  return {
      {"id", c.id},
      {"object", endpoint == Endpoint::kCompletions ? "text_completion" : "chat.completion.chunk"},
      {"created", c.created},
      {"model", c.model}};
}

// "stop", "length" or "tool_calls" as the API names a finish reason.
const char* api_finish_reason(FinishReason reason, bool called) {
  if (reason == FinishReason::kLength) return "length";
  return called ? "tool_calls" : "stop";
}

json tool_call_json(const ToolCall& call) {
  return {{"id", call.id},
          {"type", "function"},
          {"function", {{"name", call.name}, {"arguments", call.arguments}}}};
}

// {"prompt_tokens", "completion_tokens", "total_tokens"}.
json usage_json(const Usage& u) {
  return {{"prompt_tokens", u.prompt_tokens},
          {"completion_tokens", u.completion_tokens},
          {"total_tokens", u.prompt_tokens + u.completion_tokens}};
}

// The field a refusal's message starts with: "messages[2]: ...", "prompt: ...".
std::string leading_field(const std::string& message) {
  size_t end = 0;
  while (end < message.size() &&
         (std::isalnum(static_cast<unsigned char>(message[end])) || message[end] == '_' ||
          message[end] == '[' || message[end] == ']' || message[end] == '.'))
    ++end;
  const std::string field = message.substr(0, end);
  if (field.rfind("messages", 0) == 0 || field == "prompt") return field;
  return "";
}

}  // namespace

std::string dump(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

CompletionRequest parse_completion_request(Endpoint endpoint, std::string_view body,
                                           const ServedModel& model) {
  CompletionRequest out;
  out.endpoint = endpoint;
  json object;
  try {
    object = parse_request_object(body);
  } catch (const FieldError& e) {
    fail(e.param, "the request body: " + e.message, "invalid_json");
  }
  // An explicit null is the same as leaving the field out, as the API has it.
  for (auto it = object.begin(); it != object.end();) {
    it = it->is_null() ? object.erase(it) : std::next(it);
  }
  const std::vector<std::string> known = known_keys(endpoint);
  for (const auto& [key, value] : object.items()) {
    if (contains(kIgnoredKeys, key)) out.ignored_fields.push_back(key);
    if (contains(known, key)) continue;
    if (!model.strict_fields) {
      out.ignored_fields.push_back(key);
      out.unknown_fields.push_back(key);
      continue;
    }
    const std::string hint = did_you_mean(key, known);  // "; did you mean 'x'?" or ""
    fail(key,
         "unknown field '" + key + "'" +
             (hint.empty() ? "; the fields duet serve takes are listed in docs/serve.md" : hint),
         "unknown_field");
  }
  if (object.contains("model")) {
    const json& v = object.at("model");
    if (!v.is_string()) fail("model", "model: expected a string, got " + dump(v));
    if (v.get<std::string>() != model.id) {
      throw ApiError{404,
                     "model: '" + v.get<std::string>() +
                         "' is not served here; this server runs '" + model.id +
                         "' (GET /v1/models)",
                     "invalid_request_error", "model", "model_not_found"};
    }
  }
  for (const std::string& key : kDefaultOnlyKeys) {
    // /v1/completions echoes the prompt (read below); chat has no echo, and
    // takes tools.
    if (key == "echo" && endpoint == Endpoint::kCompletions) continue;
    if ((key == "tools" || key == "tool_choice") && endpoint == Endpoint::kChatCompletions)
      continue;
    if (object.contains(key)) check_default_only(key, object.at(key));
  }
  const char* input = endpoint == Endpoint::kCompletions ? "prompt" : "messages";
  if (!object.contains(input)) fail(input, std::string(input) + " is required", "missing_field");
  json settings = json::object();
  for (const auto& [key, value] : object.items()) {
    if (contains(request_setting_keys(), key)) settings[key] = value;
  }
  if (object.contains("max_completion_tokens")) {
    if (object.contains("max_tokens")) {
      fail("max_completion_tokens",
           "max_completion_tokens and max_tokens are the same setting; give one of them");
    }
    settings["max_tokens"] = object.at("max_completion_tokens");
  }
  try {
    if (endpoint == Endpoint::kCompletions) {
      read_prompt(object.at("prompt"), model, out);
    } else {
      out.messages = read_messages(object.at("messages"));
      out.tools = read_tools(object, body);
    }
    read_request_settings(settings, model.chain, out.settings);
    read_structured_output(object, body, out.settings);
    out.grammar_from_tools = read_tool_grammar(out.tools, model.tool_syntax, out.settings);
  } catch (const FieldError& e) {
    std::string param = e.param;
    if (param == "max_tokens" && object.contains("max_completion_tokens"))
      param = "max_completion_tokens";
    fail(param, e.message);
  }
  if (object.contains("logit_bias")) read_logit_bias(object.at("logit_bias"), model, out.settings);
  read_logprobs(endpoint, object, out.settings);
  read_stream_options(object, model.strict_fields, out);
  if (object.contains("n")) {
    const json& v = object.at("n");
    if (!v.is_number_integer() || v.get<int64_t>() < 1 || v.get<int64_t>() > kMaxChoices)
      fail("n", "n: " + dump(v) + " is not an integer in [1, " + std::to_string(kMaxChoices) + "]");
    out.n = static_cast<int32_t>(v.get<int64_t>());
  }
  const auto prompts = static_cast<int64_t>(std::max<size_t>(out.prompts.size(), 1));
  if (prompts * out.n > kMaxChoices) {
    fail(out.n > 1 ? "n" : "prompt",
         std::string(out.n > 1 ? "n" : "prompt") + ": " + std::to_string(prompts) +
             " prompt(s) × n " + std::to_string(out.n) + " is more than the " +
             std::to_string(kMaxChoices) + " choices one request may ask for; split the request");
  }
  if (endpoint == Endpoint::kCompletions && object.contains("echo")) {
    const json& v = object.at("echo");
    if (!v.is_boolean()) fail("echo", "echo: expected true or false, got " + dump(v));
    out.echo = v.get<bool>();
    if (out.echo && out.settings.top_logprobs) {
      if (out.stream) {
        fail("echo",
             "echo: the prompt's log-probabilities are not streamed; ask without \"stream\" "
             "(or without \"logprobs\")",
             "unsupported_value");
      }
      out.settings.prompt_logprobs = true;
    }
  }
  return out;
}

std::string error_body(const ApiError& error) { return dump(error_json(error)); }

ApiError refused_error(const Error& error, const RequestSettings& settings, bool tools) {
  const std::string message = error.what();
  if (error.kind() == ErrorKind::kInputRejected) {
    const std::string field = leading_field(message);
    const bool too_long = message.find("KV cache holds") != std::string::npos;
    return ApiError{400, message, "invalid_request_error", field,
                    too_long ? "context_length_exceeded" : "invalid_value"};
  }
  if (error.kind() == ErrorKind::kConfig) {
    // "temperature: components.sampler.chain[4].temperature.t: ..." — the
    // field first, then the link's own words.
    std::string field = field_of_sampler_error(message, settings);
    if (tools && field == "response_format") field = "tools";
    const bool named = field.empty() || message.rfind(field + ":", 0) == 0;
    return ApiError{400, named ? message : field + ": " + message, "invalid_request_error", field,
                    "invalid_value"};
  }
  return ApiError{500, message, "server_error", "", "internal_error"};
}

json logprobs_json(Endpoint endpoint, std::span<const TokenLogprobs> entries, const PieceOf& piece,
                   int64_t& text_offset) {
  if (endpoint == Endpoint::kChatCompletions) {
    const auto item = [&](const TokenLogprob& t) {
      const std::string text = piece(t.token);
      return json{{"token", text}, {"logprob", t.logprob}, {"bytes", piece_bytes(text)}};
    };
    json content = json::array();
    for (const TokenLogprobs& e : entries) {
      json one = item(e.chosen);
      one["top_logprobs"] = json::array();
      for (const TokenLogprob& t : e.top) one["top_logprobs"].push_back(item(t));
      content.push_back(std::move(one));
    }
    return {{"content", std::move(content)}};
  }
  json tokens = json::array(), token_logprobs = json::array(), top = json::array(),
       offsets = json::array();
  for (const TokenLogprobs& e : entries) {
    const std::string text = piece(e.chosen.token);
    tokens.push_back(text);
    token_logprobs.push_back(e.chosen.logprob);
    // Keys as the response prints them (U+FFFD for stray bytes), so that
    // two that print alike are one key, the more likely one's.
    json alternatives = json::object();
    for (const TokenLogprob& t : e.top) {
      const std::string key = printable(piece(t.token));
      if (!alternatives.contains(key)) alternatives[key] = t.logprob;
    }
    if (const std::string key = printable(text); !alternatives.contains(key))
      alternatives[key] = e.chosen.logprob;
    top.push_back(std::move(alternatives));
    offsets.push_back(text_offset);
    text_offset += code_points(text);
  }
  return {{"tokens", std::move(tokens)},
          {"token_logprobs", std::move(token_logprobs)},
          {"top_logprobs", std::move(top)},
          {"text_offset", std::move(offsets)}};
}

void append_logprobs(json& into, const json& more) {
  for (const char* key : {"tokens", "token_logprobs", "top_logprobs", "text_offset"}) {
    json& list = into[key];
    for (const json& item : more.at(key)) list.push_back(item);
  }
}

json prompt_logprobs_json(std::span<const int32_t> prompt, std::span<const TokenLogprobs> entries,
                          const PieceOf& piece, int64_t& text_offset) {
  json out = {{"tokens", json::array()},
              {"token_logprobs", json::array()},
              {"top_logprobs", json::array()},
              {"text_offset", json::array()}};
  if (prompt.empty()) return out;
  // The first token has nothing before it to be scored against: null.
  const std::string first = piece(prompt.front());
  out["tokens"].push_back(first);
  out["token_logprobs"].push_back(nullptr);
  out["top_logprobs"].push_back(nullptr);
  out["text_offset"].push_back(text_offset);
  text_offset += code_points(first);
  append_logprobs(out, logprobs_json(Endpoint::kCompletions, entries, piece, text_offset));
  return out;
}

json completion_json(Endpoint endpoint, const Completed& c, std::span<const Choice> choices,
                     const Usage& usage) {
  json list = json::array();
  for (size_t i = 0; i < choices.size(); ++i) {
    const Choice& ch = choices[i];
    const bool called = !ch.tool_calls.empty();
    json choice = {{"index", static_cast<int64_t>(i)},
                   {"logprobs", ch.logprobs},
                   {"finish_reason", api_finish_reason(ch.finish, called)}};
    if (endpoint == Endpoint::kCompletions) {
      choice["text"] = ch.text;
    } else {
      choice["message"] = {{"role", "assistant"},
                           {"content", called && ch.text.empty() ? json(nullptr) : json(ch.text)}};
      if (called) {
        json& calls = choice["message"]["tool_calls"] = json::array();
        for (const ToolCall& call : ch.tool_calls) calls.push_back(tool_call_json(call));
      }
    }
    list.push_back(std::move(choice));
  }
  return {{"id", c.id},
          {"object", endpoint == Endpoint::kCompletions ? "text_completion" : "chat.completion"},
          {"created", c.created},
          {"model", c.model},
          {"choices", std::move(list)},
          {"usage", usage_json(usage)}};
}

std::string stream_role_event(const Completed& c, int32_t index) {
  json j = chunk_base(Endpoint::kChatCompletions, c);
  j["choices"] = json::array({{{"index", index},
                               {"delta", {{"role", "assistant"}, {"content", ""}}},
                               {"logprobs", nullptr},
                               {"finish_reason", nullptr}}});
  return event(j);
}

std::string stream_text_event(Endpoint endpoint, const Completed& c, int32_t index,
                              const std::string& text, const json& logprobs) {
  json j = chunk_base(endpoint, c);
  json choice = {{"index", index}, {"logprobs", logprobs}, {"finish_reason", nullptr}};
  if (endpoint == Endpoint::kCompletions) {
    choice["text"] = text;
  } else {
    choice["delta"] = {{"content", text}};
  }
  j["choices"] = json::array({choice});
  return event(j);
}

std::string stream_tool_calls_event(const Completed& c, int32_t index, size_t first,
                                    std::span<const ToolCall> calls) {
  json j = chunk_base(Endpoint::kChatCompletions, c);
  json list = json::array();
  for (size_t i = 0; i < calls.size(); ++i) {
    json call = tool_call_json(calls[i]);
    call["index"] = first + i;
    list.push_back(std::move(call));
  }
  j["choices"] = json::array({{{"index", index},
                               {"delta", {{"tool_calls", std::move(list)}}},
                               {"logprobs", nullptr},
                               {"finish_reason", nullptr}}});
  return event(j);
}

std::string stream_finish_event(Endpoint endpoint, const Completed& c, int32_t index,
                                FinishReason finish, bool called) {
  json j = chunk_base(endpoint, c);
  json choice = {{"index", index},
                 {"logprobs", nullptr},
                 {"finish_reason", api_finish_reason(finish, called)}};
  if (endpoint == Endpoint::kCompletions) {
    choice["text"] = "";
  } else {
    choice["delta"] = json::object();
  }
  j["choices"] = json::array({choice});
  return event(j);
}

std::string stream_usage_event(Endpoint endpoint, const Completed& c, const Usage& usage) {
  json j = chunk_base(endpoint, c);
  j["choices"] = json::array();
  j["usage"] = usage_json(usage);
  return event(j);
}

std::string stream_error_event(const ApiError& error) { return event(error_json(error)); }

}  // namespace duet::serve
