#include "prompts_file.h"

#include <algorithm>

#include "duet/app/suggest.h"
#include "duet/error.h"
#include "request_fields.h"

namespace duet::cli {
namespace {

using nlohmann::json;

const std::vector<std::string> kKeys = {
    "id",         "prompt",      "messages",        "max_tokens", "max_new_tokens", "seed",
    "stop",       "temperature", "top_k",           "top_p",      "min_p",          "ignore_eos",
    "min_tokens", "sampler",     "response_format", "grammar"};

struct LineError {
  std::string message;
};

[[noreturn]] void fail(const std::string& message) { throw LineError{message}; }

std::string type_name(const json& v) { return v.type_name(); }

std::string string_field(const json& object, const std::string& key, const std::string& where) {
  const json& v = object.at(key);
  if (!v.is_string()) fail(where + ": expected a string, got " + type_name(v));
  return v.get<std::string>();
}

void read_request(const json& object, std::string_view text, const std::vector<SamplerLink>& chain,
                  PromptLine& out) {
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
    out.messages = serve::read_messages(object.at("messages"));
  }
  serve::read_request_settings(object, chain, out.settings);
  serve::read_structured_output(object, text, out.settings);
}

}  // namespace

PromptLine read_prompt_line(std::string_view text, int64_t line,
                            const std::vector<SamplerLink>& chain) {
  PromptLine out;
  out.line = line;
  out.id = line;
  try {
    const json object = serve::parse_request_object(text);
    if (object.contains("id")) {
      const json& id = object.at("id");
      if (!id.is_string() && !id.is_number_integer()) {
        fail("id: expected a string or an integer, got " + type_name(id));
      }
      out.id = id;
    }
    read_request(object, text, chain, out);
  } catch (const LineError& e) {
    out.error = e.message;
  } catch (const serve::FieldError& e) {
    out.error = e.message;
  }
  return out;
}

}  // namespace duet::cli
