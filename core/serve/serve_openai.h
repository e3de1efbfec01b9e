// serve_openai.h — the OpenAI API as `duet serve` speaks it: request bodies
// of /v1/completions and /v1/chat/completions read into a request (fields
// in docs/serve.md), and the JSON of responses, stream chunks and errors.
// Pure functions, no I/O.
#pragma once

#include <cstdint>
#include <ctime>
#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "chat_messages.h"
#include "duet/app/chat_template.h"
#include "duet/app/pipeline_config.h"
#include "duet/app/scheduler.h"
#include "duet/error.h"
#include "tool_calls.h"

namespace duet::serve {

// An error as the API reports it: {"error": {"message", "type", "param",
// "code"}} with HTTP status `status`; `param` empty is null.
struct ApiError {
  int status = 400;
  std::string message;
  std::string type = "invalid_request_error";
  std::string param;
  std::string code;
};

enum class Endpoint { kCompletions, kChatCompletions };

// What requests are checked against.
struct ServedModel {
  std::string id;  // the model's name in /v1/models and every response
  std::vector<SamplerLink> chain;
  int32_t n_vocab = 0;
  int64_t created = 0;  // seconds since the epoch, for /v1/models
  uint64_t seed = 0;    // components.sampler.seed: the first choice's when a request gives none
  // Unknown fields: false accepts them (listed in CompletionRequest::
  // unknown_fields, as vLLM does), true refuses them with 400
  // (--strict-fields).
  bool strict_fields = false;
  // How the model calls tools (its chat template's); kNone refuses tools.
  ChatTemplate::ToolSyntax tool_syntax = ChatTemplate::ToolSyntax::kNone;
};

// The most choices (prompts × n) one request may ask for.
inline constexpr int32_t kMaxChoices = 64;

// A /v1/completions prompt: text (tokenized without the chat template), or
// token ids when `ids` is not empty.
struct Prompt {
  std::string text;
  std::vector<int32_t> ids;
};

struct CompletionRequest {
  Endpoint endpoint = Endpoint::kCompletions;
  std::vector<Prompt> prompts;        // /v1/completions: one or more
  std::vector<ChatMessage> messages;  // /v1/chat/completions
  // /v1/chat/completions: the tools offered, and how the answer's calls are
  // read (ServedModel::tool_syntax); settings.grammar forces a call where
  // tool_choice asks for one.
  ToolRequest tools;
  bool grammar_from_tools = false;  // settings.grammar forces a tool call
  // Choices per prompt: choice i * n + j is prompt i's j-th, drawn with
  // seed + j (prompts.size() * n ≤ kMaxChoices).
  int32_t n = 1;
  RequestSettings settings;
  bool stream = false;
  bool include_usage = false;  // stream_options.include_usage
  // /v1/completions' echo: the answer's text starts with the prompt's; with
  // logprobs (not streamed) settings.prompt_logprobs is set and the
  // prompt's tokens lead the logprobs (prompt_logprobs_json).
  bool echo = false;
  // Fields given and not used (top-level ones in name order, then options
  // of stream_options): the documented ignored
  // ones ("user") and, unless strict_fields, unknown ones
  // ("stream_options.foo" for an option), which are also in unknown_fields.
  std::vector<std::string> ignored_fields;
  std::vector<std::string> unknown_fields;
};

// Reads a request body. Throws ApiError (400 naming the field, or 404 for
// another model's name) for anything it cannot honour; never clamps. Fields
// it does not know are refused only with model.strict_fields.
CompletionRequest parse_completion_request(Endpoint endpoint, std::string_view body,
                                           const ServedModel& model);

// The response body of an error.
std::string error_body(const ApiError& error);

// The ApiError for a request the engine refused with `error`:
// kInputRejected and kConfig are the caller's (400, naming the field where
// the message starts with one or names a sampler link `settings` set),
// others the server's (500). With `tools` (the request's grammar forces a
// tool call, CompletionRequest::grammar_from_tools), a refusal of the
// grammar link names "tools": its grammar came from them.
ApiError refused_error(const Error& error, const RequestSettings& settings, bool tools = false);

struct Completed {
  std::string id;  // "cmpl-..." or "chatcmpl-..."
  int64_t created = 0;
  std::string model;
};

// A token's text (Tokenizer::piece).
using PieceOf = std::function<std::string(int32_t)>;

// A choice's "logprobs" for `entries` (docs/serve.md): /v1/completions'
// {tokens, token_logprobs, top_logprobs, text_offset}, each token's
// top_logprobs holding the chosen token too, text offsets in code points
// counted on from `text_offset` (which is advanced past these tokens);
// /v1/chat/completions' {content: [{token, logprob, bytes, top_logprobs}]}.
nlohmann::json logprobs_json(Endpoint endpoint, std::span<const TokenLogprobs> entries,
                             const PieceOf& piece, int64_t& text_offset);

// The completions "logprobs" of an echoed prompt: its first token with null
// token_logprobs and top_logprobs (nothing comes before it), then one entry
// per later token from `entries` (RequestResult::prompt_logprobs), text
// offsets counted on from `text_offset` as logprobs_json counts them.
nlohmann::json prompt_logprobs_json(std::span<const int32_t> prompt,
                                    std::span<const TokenLogprobs> entries, const PieceOf& piece,
                                    int64_t& text_offset);
// Appends the tokens of completions logprobs `more` to `into`.
void append_logprobs(nlohmann::json& into, const nlohmann::json& more);

// One choice of an answer.
struct Choice {
  std::string text;  // chat: the content, null in the message when empty beside calls
  FinishReason finish = FinishReason::kStop;
  nlohmann::json logprobs;  // null when the request asked for none
  // Chat: the calls read from the answer; with any, a finish by stop is
  // reported as "tool_calls".
  std::vector<ToolCall> tool_calls;
};

// Tokens of an answer: each prompt's once, every choice's generated ones.
struct Usage {
  int64_t prompt_tokens = 0;
  int64_t completion_tokens = 0;
};

// The whole (non-streamed) response: `choices` with indices 0, 1, ...
nlohmann::json completion_json(Endpoint endpoint, const Completed& c,
                               std::span<const Choice> choices, const Usage& usage);

// One server-sent event, "data: JSON\n\n", of a stream: choice `index`'s
// assistant role (chat only; its first event), a piece of its text, or its
// end (the finish reason); after every choice's end, the usage (only with
// stream_options.include_usage, as OpenAI sends it: empty choices). JSON
// that would not be valid UTF-8 gets U+FFFD.
std::string stream_role_event(const Completed& c, int32_t index);
// `logprobs` (logprobs_json) is for the tokens generated since the
// previous event, whose text may come later (while it could still be a stop
// string's start).
std::string stream_text_event(Endpoint endpoint, const Completed& c, int32_t index,
                              const std::string& text, const nlohmann::json& logprobs = nullptr);
// Chat: the calls read from the text since the previous event, numbered
// on from `first` (the choice's calls before them), each whole.
std::string stream_tool_calls_event(const Completed& c, int32_t index, size_t first,
                                    std::span<const ToolCall> calls);
// `called`: the choice made tool calls (a finish by stop is "tool_calls").
std::string stream_finish_event(Endpoint endpoint, const Completed& c, int32_t index,
                                FinishReason finish, bool called = false);
std::string stream_usage_event(Endpoint endpoint, const Completed& c, const Usage& usage);
std::string stream_error_event(const ApiError& error);
constexpr const char* kStreamDone = "data: [DONE]\n\n";

// Compact JSON; bytes that are not UTF-8 become U+FFFD.
std::string dump(const nlohmann::json& j);

}  // namespace duet::serve
