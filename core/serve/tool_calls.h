// tool_calls.h — OpenAI's tools in a chat request (`tools`, `tool_choice`,
// `parallel_tool_calls`) and the tool calls in the answer, in the syntax the
// model's chat template asks for (ChatTemplate::ToolSyntax; docs/serve.md,
// "Tools").
#pragma once

#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "duet/app/chat_template.h"

namespace duet::serve {

enum class ToolChoice {
  kNone,      // no tools offered to the model, its text is the answer
  kAuto,      // the model chooses between answering and calling
  kRequired,  // one call at least (exactly one under the hermes syntax)
  kNamed,     // one call of the function named
};

struct ToolRequest {
  // The JSON text of the tools array as sent (the order of its keys kept,
  // so that a schema's properties keep theirs); empty when none.
  std::string tools;
  std::vector<std::string> names;  // the functions, in order
  ToolChoice choice = ToolChoice::kAuto;
  std::string named;     // kNamed: the function
  bool parallel = true;  // parallel_tool_calls: several calls in one answer

  // Whether the model is offered tools: some are given, and choice is not none.
  bool offered() const { return !tools.empty() && choice != ToolChoice::kNone; }
};

// Reads `tools` (an array of {"type": "function", "function": {"name",
// "description"?, "parameters"?, "strict"?}}), `tool_choice` ("none",
// "auto", "required", or {"type": "function", "function": {"name"}}) and
// `parallel_tool_calls` (a boolean) of `object`; `body` is its text, read
// again for the key order. tool_choice defaults to "auto" with tools, and
// is refused without them (but "none"). Throws FieldError naming the field.
ToolRequest read_tools(const nlohmann::json& object, std::string_view body);

// The options of the grammar link (RequestSettings::grammar) that keep the
// answer to the calls `request` allows, written in `syntax`; empty where the
// answer is free (choice auto under hermes or llama3, or none). Under
// hermes a forced answer is one "<tool_call>" block whose name is one of the
// tools' (the one named) and whose arguments follow its parameters schema;
// under llama3 it is one {"name", "parameters"} object; under json it is
// {"tool_calls": [...]} (one call unless parallel), or, for auto, that or
// {"response": TEXT}. A tool without parameters takes {}.
std::map<std::string, std::string> tool_grammar(const ToolRequest& request,
                                                ChatTemplate::ToolSyntax syntax);

// One call the model made: `arguments` is compact JSON text (an object).
struct ToolCall {
  std::string id;  // "call_" and 24 hex digits, made up here
  std::string name;
  std::string arguments;
};

// Reads an answer's text as it is generated into what the client is told:
// content and tool calls. Under hermes, content streams as it comes except
// for what could be the start of "<tool_call>" and trailing whitespace,
// held back until the text after it decides; a block becomes a call once
// "</tool_call>" closes it outside a JSON string (or the answer ends), its
// body nests at most kMaxNesting deep, and it is a JSON
// object with a string "name" and object "arguments" (or "parameters", or a
// string holding the JSON of one); a block that is not is content as
// written. Under json the whole answer is read at the end: {"tool_calls":
// [{"name", "arguments"}, ...]} is calls, {"response": TEXT} is TEXT, and
// anything else is content as written. Under llama3 an answer whose first
// text (past whitespace) is "{" or "<|python_tag|>" is read at the end as
// one call {"name", "parameters"}, content as written when it is not one;
// any other answer streams as content. Whitespace around calls is dropped.
class ToolCallReader {
 public:
  explicit ToolCallReader(ChatTemplate::ToolSyntax syntax) : syntax_(syntax) {}

  struct Output {
    std::string content;
    std::vector<ToolCall> calls;
  };
  // What `text`, the answer's next piece, lets the client be told now.
  Output feed(std::string_view text);
  // The rest, once the answer has ended.
  Output finish();
  // Whether a call has been read.
  bool called() const { return calls_ > 0; }

 private:
  // The call `body` holds, when it holds one; false (nothing taken) else.
  bool take_call(std::string_view body, Output& out);
  // A hermes block's `body` (without its tags; `closed` when its end tag
  // came): a call, or else content as written.
  void take_block(std::string_view body, bool closed, Output& out);
  void take_content(std::string_view text, Output& out);

  ChatTemplate::ToolSyntax syntax_;
  std::string held_;                // text read and not yet told
  bool in_block_ = false;           // hermes: inside <tool_call>
  std::string space_before_block_;  // hermes: the whitespace before it
  bool after_call_ = false;         // hermes: no content told since the last call
  bool decided_ = false;            // llama3: the answer's first text has been seen
  bool whole_ = false;              // llama3: it starts a call, read at the end
  size_t calls_ = 0;
};

}  // namespace duet::serve
