#include "prompts_file.h"

#include <algorithm>
#include <limits>
#include <map>

#include "../src/suggest.h"  // core's "did you mean", exported by libduet
#include "duet/error.h"

namespace duet::cli {
namespace {

using nlohmann::json;

const std::vector<std::string> kKeys = {
    "id",   "prompt",      "messages", "max_tokens", "max_new_tokens", "seed",
    "stop", "temperature", "top_k",    "top_p",      "min_p",          "sampler"};

// The OpenAI/vLLM request keys that set a standard link's primary option,
// and the link's own name for that option.
const std::map<std::string, std::string> kLinkKeys = {
    {"temperature", "t"}, {"top_k", "k"}, {"top_p", "p"}, {"min_p", "p"}};

struct LineError {
  std::string message;
};

[[noreturn]] void fail(const std::string& message) { throw LineError{message}; }

std::string type_name(const json& v) { return v.type_name(); }

// A sampler option's text as Options holds it: numbers as JSON writes them,
// strings as they are.
std::string option_text(const std::string& where, const json& v) {
  if (v.is_string()) return v.get<std::string>();
  if (v.is_number() || v.is_boolean()) return v.dump();
  fail(where + ": expected a number, string or boolean, got " + type_name(v));
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
  fail(key + ": the pipeline's sampler chain has no '" + name + "' link (it has: " +
       chain_names(chain) + "); a request sets options of the chain's links, it cannot add one");
}

std::string string_field(const json& object, const std::string& key, const std::string& where) {
  const json& v = object.at(key);
  if (!v.is_string()) fail(where + ": expected a string, got " + type_name(v));
  return v.get<std::string>();
}

std::vector<ChatMessage> read_messages(const json& v) {
  if (!v.is_array()) fail("messages: expected an array of {role, content} objects");
  std::vector<ChatMessage> out;
  for (size_t i = 0; i < v.size(); ++i) {
    const std::string where = "messages[" + std::to_string(i) + "]";
    const json& m = v[i];
    if (!m.is_object()) fail(where + ": expected an object {role, content}, got " + type_name(m));
    for (const auto& [key, value] : m.items()) {
      if (key != "role" && key != "content") {
        fail(where + ": unknown key '" + key + "'" + did_you_mean(key, {"role", "content"}) +
             "; a message has role and content");
      }
    }
    if (!m.contains("role") || !m.contains("content")) {
      fail(where + ": needs both role and content");
    }
    out.push_back(
        {string_field(m, "role", where + ".role"), string_field(m, "content", where + ".content")});
  }
  return out;
}

std::vector<std::string> read_stop(const json& v) {
  if (v.is_string()) return {v.get<std::string>()};
  if (!v.is_array()) fail("stop: expected a string or an array of strings, got " + type_name(v));
  std::vector<std::string> out;
  for (const json& s : v) {
    if (!s.is_string()) fail("stop: expected an array of strings, found " + type_name(s));
    out.push_back(s.get<std::string>());
  }
  return out;
}

void read_request(const json& object, const std::vector<SamplerLink>& chain, PromptLine& out) {
  for (const auto& [key, value] : object.items()) {
    if (std::find(kKeys.begin(), kKeys.end(), key) == kKeys.end()) {
      fail("unknown key '" + key + "'" + did_you_mean(key, kKeys) +
           " (known keys: " + quoted_list(kKeys) + ")");
    }
  }
  if (object.contains("prompt") == object.contains("messages")) {
    fail("give exactly one of prompt (a string) and messages (a list of {role, content})");
  }
  if (object.contains("prompt")) {
    out.prompt = string_field(object, "prompt", "prompt");
    if (out.prompt->empty()) fail("prompt is empty; give some text");
  } else {
    out.messages = read_messages(object.at("messages"));
  }
  RequestSettings& s = out.settings;
  if (object.contains("max_tokens") && object.contains("max_new_tokens")) {
    fail("max_tokens and max_new_tokens are the same setting; give one of them");
  }
  for (const char* key : {"max_tokens", "max_new_tokens"}) {
    if (!object.contains(key)) continue;
    const json& v = object.at(key);
    if (!v.is_number_integer() || v.get<int64_t>() < 1 ||
        v.get<int64_t>() > std::numeric_limits<int32_t>::max()) {
      fail(std::string(key) + ": " + v.dump() + " is not a positive integer");
    }
    s.max_new_tokens = static_cast<int32_t>(v.get<int64_t>());
  }
  if (object.contains("seed")) {
    const json& v = object.at("seed");
    if (!v.is_number_unsigned()) fail("seed: " + v.dump() + " is not a non-negative integer");
    s.seed = v.get<uint64_t>();
  }
  if (object.contains("stop")) s.stop = read_stop(object.at("stop"));
  for (const auto& [key, primary] : kLinkKeys) {
    if (!object.contains(key)) continue;
    const json& v = object.at(key);
    if (!v.is_number()) fail(key + ": expected a number, got " + type_name(v));
    const SamplerLink& link = chain_link(chain, key, key);
    const std::string option = link.options.has(primary) ? primary : "value";
    s.sampler[key][option] = v.dump();
  }
  if (object.contains("sampler")) {
    const json& v = object.at("sampler");
    if (!v.is_object()) fail("sampler: expected {\"LINK\": {\"OPTION\": value}}");
    for (const auto& [name, options] : v.items()) {
      const std::string where = "sampler." + name;
      chain_link(chain, where, name);
      if (!options.is_object()) fail(where + ": expected an object of options");
      for (const auto& [option, value] : options.items()) {
        s.sampler[name][option] = option_text(where + "." + option, value);
      }
    }
  }
}

}  // namespace

PromptLine read_prompt_line(std::string_view text, int64_t line,
                            const std::vector<SamplerLink>& chain) {
  PromptLine out;
  out.line = line;
  out.id = line;
  try {
    json object;
    try {
      object = json::parse(text);
    } catch (const json::parse_error& e) {
      // "[json.exception.parse_error.101] parse error at line 1, column 2: ..."
      std::string what = e.what();
      if (const size_t at = what.find("] "); at != std::string::npos) what.erase(0, at + 2);
      const std::string one_line = "at line 1, ";
      if (const size_t at = what.find(one_line); at != std::string::npos) {
        what.erase(at, one_line.size());
      }
      fail("not valid JSON: " + what);
    }
    if (!object.is_object()) fail("expected a JSON object, got " + type_name(object));
    if (object.contains("id")) {
      const json& id = object.at("id");
      if (!id.is_string() && !id.is_number_integer()) {
        fail("id: expected a string or an integer, got " + type_name(id));
      }
      out.id = id;
    }
    read_request(object, chain, out);
  } catch (const LineError& e) {
    out.error = e.message;
  }
  return out;
}

}  // namespace duet::cli
