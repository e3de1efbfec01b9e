#include "request_fields.h"

#include <algorithm>
#include <functional>
#include <limits>
#include <map>

#include "duet/app/suggest.h"

namespace duet::serve {
namespace {

using nlohmann::json;

// The standard links whose primary option a request sets by the link's own
// name ("temperature": 0.7, the OpenAI/vLLM keys), and the link's name for
// that option.
const std::map<std::string, std::string> kPrimaryOptions = {{"temperature", "t"},
                                                            {"top_k", "k"},
                                                            {"top_p", "p"},
                                                            {"min_p", "p"},
                                                            {"presence_penalty", "penalty"},
                                                            {"frequency_penalty", "penalty"},
                                                            {"repetition_penalty", "penalty"}};

// The key of a link's primary option written in the shorthand form.
const std::string kShorthand = "value";

[[noreturn]] void fail(const std::string& param, const std::string& message) {
  throw FieldError{param, message};
}

std::string type_name(const json& v) { return v.type_name(); }

// A sampler option's text as Options holds it: numbers as JSON writes them,
// strings as they are.
std::string option_text(const std::string& where, const json& v) {
  if (v.is_string()) return v.get<std::string>();
  if (v.is_number() || v.is_boolean()) return v.dump();
  fail(where, where + ": expected a number, string or boolean, got " + type_name(v));
}

std::string chain_names(const std::vector<SamplerLink>& chain) {
  std::string names;
  for (const SamplerLink& link : chain) names += (names.empty() ? "" : ", ") + link.name;
  return names.empty() ? "none" : names;
}

const SamplerLink& chain_link(const std::vector<SamplerLink>& chain, const std::string& key,
                              const std::string& name) {
  for (const SamplerLink& link : chain) {
    if (link.name == name) return link;
  }
  fail(key, key + ": the pipeline's sampler chain has no '" + name +
                "' link (it has: " + chain_names(chain) +
                "); a request sets options of the chain's links, it cannot add one");
}

std::string string_field(const json& object, const std::string& key, const std::string& where) {
  const json& v = object.at(key);
  if (!v.is_string()) fail(where, where + ": expected a string, got " + type_name(v));
  return v.get<std::string>();
}

// The key a request's value for `option` of `link` is stored under, so that
// it replaces the pipeline's value instead of meeting it: a link written in
// the shorthand form (`- temperature: 0`) holds its primary option as
// "value", and a request may name it either way ("t" or "value").
std::string option_key(const SamplerLink& link, const std::string& option) {
  const auto primary = kPrimaryOptions.find(link.name);
  if (primary == kPrimaryOptions.end()) return option;
  const std::string& named = primary->second;
  if (option != named && option != kShorthand) return option;
  if (link.options.has(named)) return named;
  if (link.options.has(kShorthand)) return kShorthand;
  return option;
}

// A message's content: a string; an array of text parts, joined with "\n"
// as vLLM joins them; null for an assistant turn (sent beside tool calls),
// which reads as "".
std::string read_content(const json& m, const std::string& role, const std::string& where) {
  const json& v = m.at("content");
  if (v.is_string()) return v.get<std::string>();
  if (v.is_null() && role == "assistant") return "";
  if (!v.is_array()) {
    fail(where, where +
                    ": expected a string or an array of {\"type\": \"text\", \"text\": ...} "
                    "parts, got " +
                    type_name(v));
  }
  std::string text;
  for (size_t i = 0; i < v.size(); ++i) {
    const std::string at = where + "[" + std::to_string(i) + "]";
    const json& part = v[i];
    if (!part.is_object() || !part.contains("type") || !part.at("type").is_string()) {
      fail(at, at + ": expected an object {\"type\": \"text\", \"text\": ...}");
    }
    const std::string type = part.at("type").get<std::string>();
    if (type != "text") {
      fail(at + ".type", at + ".type: '" + type +
                             "' parts are not supported (the model reads text only); send "
                             "\"text\" parts");
    }
    for (const auto& [key, value] : part.items()) {
      if (key != "type" && key != "text") {
        fail(at + "." + key, at + ": unknown key '" + key + "'; a text part has type and text");
      }
    }
    if (!part.contains("text")) fail(at, at + ": a text part needs \"text\"");
    if (i > 0) text += "\n";
    text += string_field(part, "text", at + ".text");
  }
  return text;
}

// An assistant's "tool_calls": [{"id", "type": "function", "function":
// {"name", "arguments"}}], arguments the JSON text of an object (an object
// itself is taken too), as compact JSON text with arguments as text.
std::string read_tool_calls(const json& v, const std::string& where) {
  if (!v.is_array())
    fail(where, where +
                    ": expected an array of {\"id\", \"type\": \"function\", "
                    "\"function\": {\"name\", \"arguments\"}}");
  json calls = json::array();
  for (size_t i = 0; i < v.size(); ++i) {
    const std::string at = where + "[" + std::to_string(i) + "]";
    const json& c = v[i];
    if (!c.is_object() || !c.contains("function") || !c.at("function").is_object() ||
        (c.contains("type") && c.at("type") != "function")) {
      fail(at, at + ": expected {\"id\", \"type\": \"function\", \"function\": {\"name\", "
                    "\"arguments\"}}");
    }
    const json& f = c.at("function");
    if (!f.contains("name") || !f.at("name").is_string())
      fail(at + ".function.name", at + ".function.name: expected a string");
    // Parsed in order, so that the template writes the arguments as sent.
    nlohmann::ordered_json arguments = f.contains("arguments")
                                           ? nlohmann::ordered_json(f.at("arguments"))
                                           : nlohmann::ordered_json::object();
    if (arguments.is_string()) {
      try {
        arguments = nlohmann::ordered_json::parse(arguments.get<std::string>());
      } catch (const nlohmann::ordered_json::exception&) {
        fail(at + ".function.arguments",
             at + ".function.arguments: not valid JSON; the arguments are a JSON object's text");
      }
    }
    if (!arguments.is_object())
      fail(at + ".function.arguments",
           at + ".function.arguments: expected the JSON text of an object");
    std::string id;
    if (c.contains("id")) id = string_field(c, "id", at + ".id");
    calls.push_back({{"id", id},
                     {"type", "function"},
                     {"function", {{"name", f.at("name")}, {"arguments", arguments.dump()}}}});
  }
  return calls.dump();
}

std::vector<std::string> read_stop(const json& v) {
  if (v.is_string()) return {v.get<std::string>()};
  if (!v.is_array())
    fail("stop", "stop: expected a string or an array of strings, got " + type_name(v));
  std::vector<std::string> out;
  for (const json& s : v) {
    if (!s.is_string()) fail("stop", "stop: expected an array of strings, found " + type_name(s));
    out.push_back(s.get<std::string>());
  }
  return out;
}

}  // namespace

int json_nesting(std::string_view text) {
  int depth = 0, deepest = 0;
  find_outside_strings(text, [&](size_t i) {
    if (text[i] == '[' || text[i] == '{') deepest = std::max(deepest, ++depth);
    if (text[i] == ']' || text[i] == '}') --depth;
    return false;
  });
  return deepest;
}

const std::vector<std::string>& request_setting_keys() {
  static const std::vector<std::string> keys = {"max_tokens",
                                                "max_new_tokens",
                                                "seed",
                                                "stop",
                                                "temperature",
                                                "top_k",
                                                "top_p",
                                                "min_p",
                                                "presence_penalty",
                                                "frequency_penalty",
                                                "repetition_penalty",
                                                "ignore_eos",
                                                "min_tokens",
                                                "sampler"};
  return keys;
}

json parse_request_object(std::string_view text) {
  if (const int deepest = json_nesting(text); deepest > kMaxNesting) {
    fail("", "arrays and objects nested " + std::to_string(deepest) + " deep, more than the " +
                 std::to_string(kMaxNesting) + " a request may nest");
  }
  json object;
  try {
    object = json::parse(text);
  } catch (const json::exception& e) {
    // "[json.exception.parse_error.101] parse error at line 1, column 2: ...",
    // or out_of_range.406 for a number beyond a double ("1e999").
    std::string what = e.what();
    if (const size_t at = what.find("] "); at != std::string::npos) what.erase(0, at + 2);
    const std::string one_line = "at line 1, ";
    if (const size_t at = what.find(one_line); at != std::string::npos) {
      what.erase(at, one_line.size());
    }
    fail("", "not valid JSON: " + what);
  }
  if (!object.is_object()) fail("", "expected a JSON object, got " + type_name(object));
  return object;
}

std::vector<ChatMessage> read_messages(const json& v) {
  if (!v.is_array()) fail("messages", "messages: expected an array of {role, content} objects");
  const std::vector<std::string> keys = {"role", "content", "name", "tool_calls", "tool_call_id"};
  std::vector<ChatMessage> out;
  for (size_t i = 0; i < v.size(); ++i) {
    const std::string where = "messages[" + std::to_string(i) + "]";
    if (!v[i].is_object())
      fail(where, where + ": expected an object {role, content}, got " + type_name(v[i]));
    // A key set to null is a key left out (as clients dump their message
    // objects: "function_call": null), content aside: null is its value.
    json m = v[i];
    for (auto it = m.begin(); it != m.end();)
      it = it->is_null() && it.key() != "content" ? m.erase(it) : std::next(it);
    for (const auto& [key, value] : m.items()) {
      if (key == "function_call") {
        fail(where + ".function_call",
             where + ".function_call: the deprecated form of tool calls; send tool_calls");
      }
      if (std::find(keys.begin(), keys.end(), key) == keys.end()) {
        fail(where + "." + key, where + ": unknown key '" + key + "'" + did_you_mean(key, keys) +
                                    "; a message has role, content, and optionally name, "
                                    "tool_calls (an assistant's) or tool_call_id (a tool's)");
      }
    }
    if (!m.contains("role")) fail(where, where + ": needs a role");
    ChatMessage message;
    message.role = string_field(m, "role", where + ".role");
    if (message.role == "developer") message.role = "system";  // OpenAI's newer name for it
    // An empty list of calls is none (vLLM takes it so).
    const bool calls =
        m.contains("tool_calls") && !(m.at("tool_calls").is_array() && m.at("tool_calls").empty());
    if (calls) {
      if (message.role != "assistant")
        fail(where + ".tool_calls", where + ".tool_calls: only an assistant message makes calls");
      message.tool_calls = read_tool_calls(m.at("tool_calls"), where + ".tool_calls");
    }
    if (!m.contains("content") && !calls) fail(where, where + ": needs both role and content");
    if (m.contains("content")) message.content = read_content(m, message.role, where + ".content");
    if (m.contains("name")) {
      const std::string name = string_field(m, "name", where + ".name");
      if (message.role == "tool") message.name = name;  // a participant's name is not used
    }
    if (message.role == "tool") {
      if (!m.contains("tool_call_id"))
        fail(where, where + ": a tool message needs the tool_call_id of the call it answers");
      message.tool_call_id = string_field(m, "tool_call_id", where + ".tool_call_id");
    } else if (m.contains("tool_call_id")) {
      fail(where + ".tool_call_id", where + ".tool_call_id: only a tool message answers a call");
    }
    out.push_back(std::move(message));
  }
  return out;
}

void read_request_settings(const json& object, const std::vector<SamplerLink>& chain,
                           RequestSettings& s) {
  if (object.contains("max_tokens") && object.contains("max_new_tokens")) {
    fail("max_new_tokens", "max_tokens and max_new_tokens are the same setting; give one of them");
  }
  for (const char* key : {"max_tokens", "max_new_tokens"}) {
    if (!object.contains(key)) continue;
    const json& v = object.at(key);
    if (!v.is_number_integer() || v.get<int64_t>() < 1 ||
        v.get<int64_t>() > std::numeric_limits<int32_t>::max()) {
      fail(key, std::string(key) + ": " + v.dump() + " is not a positive integer");
    }
    s.max_new_tokens = static_cast<int32_t>(v.get<int64_t>());
  }
  if (object.contains("seed")) {
    const json& v = object.at("seed");
    if (!v.is_number_unsigned())
      fail("seed", "seed: " + v.dump() + " is not a non-negative integer");
    s.seed = v.get<uint64_t>();
  }
  if (object.contains("stop")) s.stop = read_stop(object.at("stop"));
  if (object.contains("ignore_eos")) {
    const json& v = object.at("ignore_eos");
    if (!v.is_boolean()) fail("ignore_eos", "ignore_eos: expected true or false, got " + v.dump());
    s.ignore_end_of_generation = v.get<bool>();
  }
  if (object.contains("min_tokens")) {
    const json& v = object.at("min_tokens");
    if (!v.is_number_unsigned() || v.get<uint64_t>() > std::numeric_limits<int32_t>::max())
      fail("min_tokens", "min_tokens: " + v.dump() + " is not a non-negative integer");
    s.min_new_tokens = static_cast<int32_t>(v.get<uint64_t>());
    if (s.max_new_tokens && s.min_new_tokens > *s.max_new_tokens) {
      fail("min_tokens", "min_tokens: " + std::to_string(s.min_new_tokens) +
                             " is more than the most tokens asked for (" +
                             std::to_string(*s.max_new_tokens) + "); lower it or raise max_tokens");
    }
  }
  for (const auto& [key, primary] : kPrimaryOptions) {
    if (!object.contains(key)) continue;
    const json& v = object.at(key);
    if (!v.is_number()) fail(key, key + ": expected a number, got " + type_name(v));
    s.sampler[key][option_key(chain_link(chain, key, key), primary)] = v.dump();
  }
  if (object.contains("sampler")) {
    const json& v = object.at("sampler");
    if (!v.is_object()) fail("sampler", "sampler: expected {\"LINK\": {\"OPTION\": value}}");
    for (const auto& [name, options] : v.items()) {
      const std::string where = "sampler." + name;
      const SamplerLink& link = chain_link(chain, where, name);
      if (!options.is_object()) fail(where, where + ": expected an object of options");
      for (const auto& [option, value] : options.items()) {
        s.sampler[name][option_key(link, option)] = option_text(where + "." + option, value);
      }
    }
  }
}

std::string field_of_sampler_error(const std::string& message, const RequestSettings& settings) {
  if (message.rfind("stop:", 0) == 0) return "stop";
  // The request's grammar link (response_format, grammar): "grammar...: ".
  if (!settings.grammar.empty() && message.rfind("grammar", 0) == 0)
    return settings.grammar.count("gbnf") != 0 ? "grammar" : "response_format";
  for (const auto& [link, options] : settings.sampler) {
    // Link errors name their option's path: "components.sampler.chain[I].LINK.OPTION: ...".
    if (message.find("]." + link + ".") == std::string::npos &&
        message.find("]." + link + ":") == std::string::npos)
      continue;
    return kPrimaryOptions.count(link) != 0 ? link : "sampler." + link;
  }
  return "";
}

// response_format {"type": "text" | "json_object" | "json_schema"} (OpenAI),
// or "grammar": GBNF text (as llama-server takes it): the options of the
// request's grammar link (RequestSettings::grammar).
void read_structured_output(const json& object, std::string_view body, RequestSettings& s) {
  const auto fail = [](const std::string& param, const std::string& message) {
    throw FieldError{param, message};
  };
  if (object.contains("grammar")) {
    const json& g = object.at("grammar");
    if (!g.is_string() || g.get<std::string>().empty())
      fail("grammar", "grammar: expected GBNF text (a string with a 'root' rule)");
    if (object.contains("response_format"))
      fail("grammar", "grammar and response_format both constrain the output; give one");
    s.grammar["gbnf"] = g.get<std::string>();
    return;
  }
  if (!object.contains("response_format")) return;
  const json& v = object.at("response_format");
  const char* expected =
      "response_format: expected {\"type\": \"text\"}, {\"type\": \"json_object\"} or "
      "{\"type\": \"json_schema\", \"json_schema\": {\"name\": ..., \"schema\": {...}}}";
  if (!v.is_object() || !v.contains("type") || !v.at("type").is_string())
    fail("response_format", expected);
  const std::string type = v.at("type").get<std::string>();
  for (const auto& [key, value] : v.items()) {
    if (key != "type" && !(type == "json_schema" && key == "json_schema"))
      fail("response_format." + key,
           "response_format." + key + ": unknown field for type '" + type + "'; " + expected);
  }
  if (type == "text") return;
  if (type == "json_object") {
    s.grammar["json_object"] = "true";
    return;
  }
  if (type != "json_schema") fail("response_format.type", expected);
  if (!v.contains("json_schema") || !v.at("json_schema").is_object())
    fail("response_format.json_schema", expected);
  const json& spec = v.at("json_schema");
  for (const auto& [key, value] : spec.items()) {
    if (key != "name" && key != "description" && key != "schema" && key != "strict") {
      fail("response_format.json_schema." + key,
           "response_format.json_schema." + key +
               ": unknown field; the fields are name, description, schema and strict");
    }
  }
  if (!spec.contains("schema"))
    fail("response_format.json_schema.schema", "response_format.json_schema.schema is required");
  if (spec.contains("strict") && !spec.at("strict").is_boolean())
    fail("response_format.json_schema.strict",
         "response_format.json_schema.strict: expected true or false");
  // Strict or not, the schema is enforced (docs/serve.md). Its text comes
  // from the body read again keeping key order: properties are written in
  // the order the schema lists them.
  const auto ordered = nlohmann::ordered_json::parse(body);
  s.grammar["json_schema"] = ordered.at("response_format").at("json_schema").at("schema").dump();
}

}  // namespace duet::serve
