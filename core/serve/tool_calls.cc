#include "tool_calls.h"

#include <algorithm>
#include <random>

#include "request_fields.h"

namespace duet::serve {
namespace {

using nlohmann::json;
using nlohmann::ordered_json;
using Syntax = ChatTemplate::ToolSyntax;

constexpr std::string_view kOpen = "<tool_call>";
constexpr std::string_view kClose = "</tool_call>";
// What Llama 3.x may write before a call (a control token, which reaches the
// text only where the tokenizer writes control tokens out).
constexpr std::string_view kPythonTag = "<|python_tag|>";
constexpr std::string_view kSpace = " \t\r\n";

[[noreturn]] void fail(const std::string& param, const std::string& message) {
  throw FieldError{param, message};
}

std::string type_of(const json& v) { return v.type_name(); }

// "tool_choice" as sent: "none", "auto", "required", or {"type":
// "function", "function": {"name": NAME}}.
void read_choice(const json& v, ToolRequest& out) {
  const char* expected =
      "tool_choice: expected \"none\", \"auto\", \"required\" or {\"type\": \"function\", "
      "\"function\": {\"name\": NAME}}";
  if (v.is_string()) {
    const std::string s = v.get<std::string>();
    if (s == "none") {
      out.choice = ToolChoice::kNone;
    } else if (s == "auto") {
      out.choice = ToolChoice::kAuto;
    } else if (s == "required") {
      out.choice = ToolChoice::kRequired;
    } else {
      fail("tool_choice", std::string(expected) + ", got \"" + s + "\"");
    }
    return;
  }
  if (!v.is_object() || !v.contains("function") || !v.at("function").is_object() ||
      !v.at("function").contains("name") || !v.at("function").at("name").is_string() ||
      (v.contains("type") && v.at("type") != "function")) {
    fail("tool_choice", expected);
  }
  out.choice = ToolChoice::kNamed;
  out.named = v.at("function").at("name").get<std::string>();
  if (std::find(out.names.begin(), out.names.end(), out.named) == out.names.end()) {
    std::string names;
    for (const std::string& n : out.names) names += (names.empty() ? "" : ", ") + n;
    fail("tool_choice",
         "tool_choice: function '" + out.named + "' is not among the tools given (" + names + ")");
  }
}

// A random id, as OpenAI's call ids look: "call_" and 24 hex digits.
std::string call_id() {
  thread_local std::mt19937_64 random{std::random_device{}()};
  static constexpr char kHex[] = "0123456789abcdef";
  std::string id = "call_";
  for (int i = 0; i < 24; ++i) id += kHex[random() % 16];
  return id;
}

// Points tool `tag`'s references at their new places in the whole schema
// (relocate); returns whether it holds any.
bool retarget(ordered_json& j, const std::string& tag) {
  bool any = false;
  if (j.is_object()) {
    for (auto& [key, value] : j.items()) {
      if (key == "$ref" && value.is_string()) {
        const std::string ref = value.get<std::string>();
        any = true;
        if (ref == "#") {
          value = "#/$defs/" + tag;
        } else if (ref.rfind("#/$defs/", 0) == 0) {
          value = "#/$defs/" + tag + "-" + ref.substr(8);
        } else if (ref.rfind("#/definitions/", 0) == 0) {
          value = "#/$defs/" + tag + "-" + ref.substr(14);
        }
      } else {
        any = retarget(value, tag) || any;
      }
    }
  } else if (j.is_array()) {
    for (ordered_json& item : j) any = retarget(item, tag) || any;
  }
  return any;
}

// Tool parameters `parameters`, placed in a schema of several tools where
// references resolve against its root: its definitions move to the root's
// `defs` as "TAG-NAME", and where it refers to anything it becomes the
// definition TAG itself (so that "#" still means the parameters).
ordered_json relocate(ordered_json parameters, const std::string& tag, ordered_json& defs) {
  bool moved = false;
  for (const char* section : {"$defs", "definitions"}) {
    if (!parameters.contains(section) || !parameters.at(section).is_object()) continue;
    for (auto& [name, schema] : parameters.at(section).items()) {
      retarget(schema, tag);
      defs[tag + "-" + name] = std::move(schema);
    }
    parameters.erase(section);
    moved = true;
  }
  const bool refers = retarget(parameters, tag);
  if (!moved && !refers) return parameters;
  defs[tag] = std::move(parameters);
  return {{"$ref", "#/$defs/" + tag}};
}

// The schema of one call of `function` (an element of tools[].function),
// its arguments under `args_key`, its definitions moved into `defs` under
// `tag`.
ordered_json call_schema(const ordered_json& function, const char* args_key, const std::string& tag,
                         ordered_json& defs) {
  ordered_json parameters = function.contains("parameters")
                                ? relocate(function.at("parameters"), tag, defs)
                                : ordered_json{{"type", "object"},
                                               {"properties", ordered_json::object()},
                                               {"additionalProperties", false}};
  return {{"type", "object"},
          {"properties",
           {{"name", {{"const", function.at("name")}}}, {args_key, std::move(parameters)}}},
          {"required", {"name", args_key}}};
}

// Every trailing byte of `text` that is whitespace.
size_t trailing_space(std::string_view text) {
  const size_t last = text.find_last_not_of(kSpace);
  return last == std::string_view::npos ? text.size() : text.size() - last - 1;
}

// Where the first "</tool_call>" outside a JSON string of a block's `text`
// starts (a call's arguments may hold the tag as text), or npos.
size_t block_end(std::string_view text) {
  return find_outside_strings(text,
                              [&](size_t i) { return text.substr(i, kClose.size()) == kClose; });
}

// The longest end of `text` that "<tool_call>" starts with.
size_t partial_open(std::string_view text) {
  for (size_t n = std::min(text.size(), kOpen.size() - 1); n > 0; --n) {
    if (kOpen.starts_with(text.substr(text.size() - n))) return n;
  }
  return 0;
}

}  // namespace

ToolRequest read_tools(const json& object, std::string_view body) {
  ToolRequest out;
  if (object.contains("parallel_tool_calls")) {
    const json& v = object.at("parallel_tool_calls");
    if (!v.is_boolean())
      fail("parallel_tool_calls", "parallel_tool_calls: expected true or false, got " + type_of(v));
    out.parallel = v.get<bool>();
  }
  if (!object.contains("tools")) {
    if (object.contains("tool_choice") && object.at("tool_choice") != "none")
      fail("tool_choice", "tool_choice: there are no tools to choose; give tools");
    out.choice = ToolChoice::kNone;
    return out;
  }
  const json& tools = object.at("tools");
  if (!tools.is_array()) fail("tools", "tools: expected an array of {\"type\": \"function\", ...}");
  if (tools.empty()) {
    out.choice = ToolChoice::kNone;
    if (object.contains("tool_choice") && object.at("tool_choice") != "none" &&
        object.at("tool_choice") != "auto")
      fail("tool_choice", "tool_choice: tools is empty, so no call can be made; give tools");
  }
  for (size_t i = 0; i < tools.size(); ++i) {
    const std::string where = "tools[" + std::to_string(i) + "]";
    const json& t = tools[i];
    if (!t.is_object() || !t.contains("type") || t.at("type") != "function" ||
        !t.contains("function") || !t.at("function").is_object()) {
      fail(where, where +
                      ": expected {\"type\": \"function\", \"function\": {\"name\", "
                      "\"description\", \"parameters\"}}");
    }
    for (const auto& [key, value] : t.items()) {
      if (key != "type" && key != "function")
        fail(where + "." + key,
             where + "." + key + ": unknown field; a tool has type and function");
    }
    const json& f = t.at("function");
    for (const auto& [key, value] : f.items()) {
      if (key != "name" && key != "description" && key != "parameters" && key != "strict") {
        fail(where + ".function." + key,
             where + ".function." + key +
                 ": unknown field; a function has name, description, parameters and strict");
      }
    }
    if (!f.contains("name") || !f.at("name").is_string() || f.at("name").get<std::string>().empty())
      fail(where + ".function.name", where + ".function.name: expected a non-empty string");
    const std::string name = f.at("name").get<std::string>();
    if (std::find(out.names.begin(), out.names.end(), name) != out.names.end())
      fail(where + ".function.name", where + ".function.name: '" + name + "' is given twice");
    if (f.contains("description") && !f.at("description").is_string())
      fail(where + ".function.description", where + ".function.description: expected a string");
    if (f.contains("parameters") && !f.at("parameters").is_object())
      fail(where + ".function.parameters",
           where + ".function.parameters: expected a JSON Schema object");
    if (f.contains("strict") && !f.at("strict").is_boolean())
      fail(where + ".function.strict", where + ".function.strict: expected true or false");
    out.names.push_back(name);
  }
  if (object.contains("tool_choice")) read_choice(object.at("tool_choice"), out);
  if (!tools.empty()) out.tools = ordered_json::parse(body).at("tools").dump();
  return out;
}

std::map<std::string, std::string> tool_grammar(const ToolRequest& request, Syntax syntax) {
  if (!request.offered() || syntax == Syntax::kNone) return {};
  if (syntax != Syntax::kJson && request.choice == ToolChoice::kAuto) return {};
  ordered_json calls = ordered_json::array();
  ordered_json defs = ordered_json::object();
  const ordered_json tools = ordered_json::parse(request.tools);
  for (size_t k = 0; k < tools.size(); ++k) {
    const ordered_json& f = tools[k].at("function");
    if (request.choice != ToolChoice::kNamed || f.at("name") == request.named) {
      calls.push_back(call_schema(f, syntax == Syntax::kLlama3 ? "parameters" : "arguments",
                                  "tool" + std::to_string(k), defs));
    }
  }
  ordered_json call =
      calls.size() == 1 ? std::move(calls.front()) : ordered_json{{"anyOf", std::move(calls)}};
  // The tools' definitions sit at the root, where their references resolve.
  const auto with_defs = [&defs](ordered_json schema) {
    if (!defs.empty()) schema["$defs"] = defs;
    return schema.dump();
  };
  if (syntax == Syntax::kLlama3) return {{"json_schema", with_defs(std::move(call))}};
  if (syntax == Syntax::kHermes) {
    return {{"json_schema", with_defs(std::move(call))},
            {"prefix", "<tool_call>\n"},
            {"suffix", "\n</tool_call>"}};
  }
  ordered_json list = {{"type", "array"}, {"items", std::move(call)}, {"minItems", 1}};
  if (!request.parallel || request.choice == ToolChoice::kNamed) list["maxItems"] = 1;
  ordered_json schema = {{"type", "object"},
                         {"properties", {{"tool_calls", std::move(list)}}},
                         {"required", {"tool_calls"}}};
  if (request.choice == ToolChoice::kAuto) {
    ordered_json response = {{"type", "object"},
                             {"properties", {{"response", {{"type", "string"}}}}},
                             {"required", {"response"}}};
    schema = {{"anyOf", {std::move(schema), std::move(response)}}};
  }
  return {{"json_schema", with_defs(std::move(schema))}};
}

void ToolCallReader::take_content(std::string_view text, Output& out) {
  if (after_call_) {
    const size_t start = text.find_first_not_of(kSpace);
    if (start == std::string_view::npos) return;
    text.remove_prefix(start);
    after_call_ = false;
  }
  out.content.append(text);
}

bool ToolCallReader::take_call(std::string_view body, Output& out) {
  // Bounded before anything recurses over it; parsed in order, so that the
  // arguments keep the order the model wrote them in.
  if (json_nesting(body) > kMaxNesting) return false;
  ordered_json call;
  try {
    call = ordered_json::parse(body);
  } catch (const json::exception&) {
    return false;
  }
  if (!call.is_object() || !call.contains("name") || !call.at("name").is_string()) return false;
  const char* args_key = call.contains("parameters") ? "parameters" : "arguments";
  ordered_json args = call.contains(args_key) ? call.at(args_key) : ordered_json::object();
  if (args.is_string()) {
    const std::string text = args.get<std::string>();
    if (json_nesting(text) > kMaxNesting) return false;
    try {
      args = ordered_json::parse(text);
    } catch (const json::exception&) {
      return false;
    }
  }
  if (!args.is_object()) return false;
  out.calls.push_back({call_id(), call.at("name").get<std::string>(), args.dump()});
  ++calls_;
  after_call_ = true;
  return true;
}

void ToolCallReader::take_block(std::string_view body, bool closed, Output& out) {
  std::string space = std::move(space_before_block_);
  space_before_block_.clear();
  if (take_call(body, out)) return;
  // Not a call: the client gets the text as the model wrote it.
  take_content(space.append(kOpen).append(body).append(closed ? kClose : ""), out);
}

ToolCallReader::Output ToolCallReader::feed(std::string_view text) {
  Output out;
  held_.append(text);
  if (syntax_ == Syntax::kLlama3) {
    // A call is the whole answer, and starts it: decide once the first
    // text other than whitespace shows whether this is one.
    if (!decided_) {
      const size_t start = held_.find_first_not_of(kSpace);
      if (start == std::string::npos) return out;
      const std::string_view first = std::string_view(held_).substr(start);
      if (kPythonTag.starts_with(first) && first.size() < kPythonTag.size()) return out;
      decided_ = true;
      whole_ = first.starts_with("{") || first.starts_with(kPythonTag);
    }
    if (!whole_) {
      take_content(held_, out);
      held_.clear();
    }
    return out;
  }
  if (syntax_ != Syntax::kHermes) return out;  // json: read whole, at the end
  while (true) {
    if (in_block_) {
      const size_t close = block_end(held_);
      if (close == std::string::npos) return out;
      take_block(std::string_view(held_).substr(0, close), true, out);
      held_.erase(0, close + kClose.size());
      in_block_ = false;
      continue;
    }
    const size_t open = held_.find(kOpen);
    if (open != std::string::npos) {
      // Whitespace before a block goes with it: dropped with a call, kept
      // with text that is none.
      std::string_view before = std::string_view(held_).substr(0, open);
      const size_t space = trailing_space(before);
      space_before_block_ = std::string(before.substr(before.size() - space));
      before.remove_suffix(space);
      take_content(before, out);
      held_.erase(0, open + kOpen.size());
      in_block_ = true;
      continue;
    }
    // What may yet begin a block, and whitespace before it, waits.
    std::string_view told = held_;
    told.remove_suffix(partial_open(told));
    told.remove_suffix(trailing_space(told));
    take_content(told, out);
    held_.erase(0, told.size());
    return out;
  }
}

ToolCallReader::Output ToolCallReader::finish() {
  Output out;
  std::string rest = std::move(held_);
  held_.clear();
  if (syntax_ == Syntax::kJson) {
    ordered_json answer;
    try {
      if (json_nesting(rest) <= kMaxNesting) answer = ordered_json::parse(rest);
    } catch (const json::exception&) {
    }
    if (answer.is_object() && answer.size() == 1 && answer.contains("response") &&
        answer.at("response").is_string()) {
      out.content = answer.at("response").get<std::string>();
    } else if (answer.is_object() && answer.size() == 1 && answer.contains("tool_calls") &&
               answer.at("tool_calls").is_array() && !answer.at("tool_calls").empty()) {
      // One that is not a call makes the whole answer content.
      for (const ordered_json& call : answer.at("tool_calls")) {
        if (!take_call(call.dump(), out)) {
          out = Output{rest, {}};
          calls_ = 0;
          break;
        }
      }
    } else {
      out.content = rest;
    }
    return out;
  }
  if (syntax_ == Syntax::kLlama3 && whole_) {
    std::string_view body = rest;
    body.remove_prefix(std::min(body.find_first_not_of(kSpace), body.size()));
    if (body.starts_with(kPythonTag)) body.remove_prefix(kPythonTag.size());
    if (!take_call(body, out)) out.content = rest;
    return out;
  }
  if (syntax_ != Syntax::kHermes) {
    out.content = rest;
    return out;
  }
  if (in_block_) {
    in_block_ = false;
    take_block(rest, false, out);
    return out;
  }
  if (calls_ == 0 || rest.find_first_not_of(kSpace) != std::string::npos) take_content(rest, out);
  return out;
}

}  // namespace duet::serve
