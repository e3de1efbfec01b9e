// request_fields.h — the request fields that a prompts-file line
// (`duet run --prompts-file`) and an OpenAI-style HTTP request (`duet serve`)
// share, read into a request's settings: chat messages, token limits, seed,
// stop strings and the sampler options of the pipeline's chain.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "chat_messages.h"
#include "duet/app/pipeline_config.h"
#include "duet/app/scheduler.h"

namespace duet::serve {

// A field that cannot be used: `param` is its name as the request spells it
// ("temperature", "messages[1].role"), `message` one line that starts with
// that name and says what was wrong and what would be accepted.
struct FieldError {
  std::string param;
  std::string message;
};

// Arrays and objects a request may nest (a schema within it included; the
// grammar plugin's own bound on schemas is lower). Printing, copying and
// comparing JSON recurse over it, so deeper text would exhaust a thread's
// stack: it is refused before it is parsed.
inline constexpr int kMaxNesting = 256;

// The deepest nesting of arrays and objects in JSON text `text` (strings
// skipped), counted without parsing (in linear time, without recursion).
int json_nesting(std::string_view text);

// Calls `stop(i)` for each byte i of JSON text `text` that lies outside its
// strings, until it returns true; returns that i, or npos.
template <typename Stop>
size_t find_outside_strings(std::string_view text, Stop stop) {
  bool in_string = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (c == '\\') {
        ++i;
      } else if (c == '"') {
        in_string = false;
      }
    } else if (c == '"') {
      in_string = true;
    } else if (stop(i)) {
      return i;
    }
  }
  return std::string_view::npos;
}

// The request fields read_request_settings reads, in its order.
const std::vector<std::string>& request_setting_keys();

// `text` as a JSON object. Throws FieldError (param "") for text that is not
// JSON ("not valid JSON: syntax error while parsing value - invalid literal;
// last read: 'x' at column 1"), a number no double holds ("1e999"), JSON
// that is not an object, or arrays and objects nested more than 256 deep
// (refused before parsing: what recurses over JSON would exhaust a stack).
nlohmann::json parse_request_object(std::string_view text);

// `messages`: an array of {role, content, name?, tool_calls?,
// tool_call_id?} objects. content is a string, an array of {"type": "text",
// "text": ...} parts (joined with "\n"), or, for an assistant turn, null or
// left out beside tool_calls (""); role "developer" reads as "system"; name
// is checked to be a string, and used only on a tool message (the
// function's). An assistant's tool_calls are [{"id", "type": "function",
// "function": {"name", "arguments"}}] with arguments a JSON object's text; a
// tool message needs tool_call_id. Throws FieldError; the order of roles is
// checked later, by tokenize_messages.
std::vector<ChatMessage> read_messages(const nlohmann::json& messages);

// The settings among `object`'s keys, each only when present:
//   max_tokens | max_new_tokens   positive integer (not both)
//   seed                          non-negative integer
//   stop                          string or array of strings
//   ignore_eos                    boolean: end-of-generation tokens do not end it
//                                 (nor enter its text, so no stop string meets them)
//   min_tokens                    non-negative integer, at most max_tokens: no
//                                 end-of-generation token is drawn and no stop
//                                 string ends it before it has this many tokens
//   temperature, top_k, top_p, min_p, presence_penalty, frequency_penalty,
//   repetition_penalty            a number, set as the primary option of the
//                                 chain's link of that name (under the key its
//                                 YAML uses: "value" for `- top_k: 40`, else
//                                 the link's own name for it such as "k")
//   sampler                       {"LINK": {"OPTION": value}} for any link
// A setting for a link the pipeline's `chain` lacks is refused, naming the
// links it has. Ranges are the links' own, checked when the request is
// submitted (Scheduler::submit throws kConfig naming the chain's key; see
// field_of_sampler_error). Other keys are left to the caller. Throws
// FieldError.
void read_request_settings(const nlohmann::json& object, const std::vector<SamplerLink>& chain,
                           RequestSettings& settings);

// The request field behind a kConfig message from Scheduler::submit about
// one of `settings`' sampler links ("components.sampler.chain[2].top_p.p:
// ..."): the link's name for the keys read_request_settings maps onto a
// link, "sampler.LINK" for others; "stop" for a stop string; "" when the
// message names none of them.
// Structured output: "response_format" ({"type": "text"}, {"type":
// "json_object"}, {"type": "json_schema", "json_schema": {"name",
// "description", "schema", "strict"}}) or "grammar" (GBNF text) of `object`
// become the options of the request's grammar link (RequestSettings::
// grammar). `body` is the object's text, read again for the schema's key
// order. Throws FieldError naming the field.
void read_structured_output(const nlohmann::json& object, std::string_view body,
                            RequestSettings& settings);

std::string field_of_sampler_error(const std::string& message, const RequestSettings& settings);

}  // namespace duet::serve
