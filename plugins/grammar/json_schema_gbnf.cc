#include "json_schema_gbnf.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <vector>

#include "duet/error.h"
#include "grammar.h"

namespace duet::grammar {
namespace {

constexpr int kMaxSchemaDepth = 64;
constexpr size_t kMaxGrammarBytes = 1 << 20;

using json = nlohmann::ordered_json;

// The rules every JSON grammar draws on; only the ones used are written.
const std::map<std::string, std::string>& primitives() {
  static const std::map<std::string, std::string> rules = {
      {"ws", R"(| " " | "\n" [ \t]{0,16})"},
      // One code point each: \u escapes of surrogates (a pair is one code
      // point to JSON Schema's lengths, two here) are left out.
      {"char",
       R"([^"\\\x00-\x1F] | "\\" (["\\/bfnrt] | "u" ([0-9a-cA-CefEF] [0-9a-fA-F]{3} | [dD] [0-7] [0-9a-fA-F]{2})))"},
      {"string", R"("\"" char* "\"")"},
      {"integer", R"("-"? ("0" | [1-9] [0-9]{0,15}))"},
      {"number", R"("-"? ("0" | [1-9] [0-9]{0,15}) ("." [0-9]{1,16})? ([eE] [-+]? [0-9]{1,3})?)"},
      {"unsigned-integer", R"("0" | [1-9] [0-9]{0,15})"},
      {"unsigned-number",
       R"(("0" | [1-9] [0-9]{0,15}) ("." [0-9]{1,16})? ([eE] [-+]? [0-9]{1,3})?)"},
      {"boolean", R"("true" | "false")"},
      {"null", R"("null")"},
      {"value", R"(object | array | string | number | boolean | null)"},
      {"object", R"("{" ws (pair ("," ws pair)*)? "}")"},
      {"pair", R"(string ws ":" ws value ws)"},
      {"array", R"("[" ws (value ws ("," ws value ws)*)? "]")"},
  };
  return rules;
}

// A GBNF literal for raw UTF-8 text.
std::string literal(const std::string& text) {
  std::string out = "\"";
  for (char c : text) {
    const auto b = static_cast<unsigned char>(c);
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (b < 0x20) {
      static const char* hex = "0123456789ABCDEF";
      out += "\\x";
      out += hex[b >> 4];
      out += hex[b & 15];
    } else {
      out += c;
    }
  }
  return out + "\"";
}

// Keywords that constrain no value: annotations, the definitions a $ref
// reaches, and nullable (read where the schema is visited).
const std::set<std::string>& annotations() {
  static const std::set<std::string> names = {
      "title",  "description", "default",   "examples",   "$schema", "$id",         "$comment",
      "format", "readOnly",    "writeOnly", "deprecated", "$defs",   "definitions", "nullable"};
  return names;
}

class Converter {
 public:
  // `top` names the schema's own rule ("#" refers to it).
  Converter(const json& root, std::string what, std::string top)
      : root_(root), what_(std::move(what)), top_(std::move(top)) {}

  // The grammar, `root` being `prefix`, the schema's JSON, then `suffix`.
  std::string run(const std::string& prefix, const std::string& suffix) {
    rules_[top_] = visit(root_, "", "root-value");
    std::string out = "root ::= ";
    if (!prefix.empty()) out += literal(prefix) + " ";
    out += top_ == "root" ? rules_[top_] : top_;
    if (!suffix.empty()) out += " " + literal(suffix);
    out += "\n";
    for (const auto& [name, body] : rules_) {
      if (name != "root") out += name + " ::= " + body + "\n";
    }
    return out;
  }

 private:
  [[noreturn]] void fail(const std::string& pointer, const std::string& message) const {
    throw Error(ErrorKind::kConfig,
                what_ + " at " + (pointer.empty() ? "/" : pointer) + ": " + message);
  }

  // Marks primitive `name` (and what it uses) as needed; returns the name.
  std::string use(const std::string& name) {
    if (rules_.count(name)) return name;
    const std::string& body = primitives().at(name);
    rules_[name] = body;
    for (const char* dep : {"ws", "char", "string", "number", "boolean", "null", "object", "array",
                            "pair", "value"}) {
      if (dep != name && body.find(dep) != std::string::npos) use(dep);
    }
    return name;
  }

  // One of `texts` (JSON literals), as a trie of rules: the matcher then
  // follows one way per shared prefix, not one per value (300 values
  // starting with '"' would be 300 ways at once).
  std::string literals(std::vector<std::string> texts, const std::string& hint) {
    std::sort(texts.begin(), texts.end());
    texts.erase(std::unique(texts.begin(), texts.end()), texts.end());
    if (texts.size() == 1) return literal(texts.front());
    return "(" + trie_alternatives(texts, 0, texts.size(), 0, hint) + ")";
  }

  // The bytes of the UTF-8 character of `text` at byte `at`.
  static size_t char_size(const std::string& text, size_t at) {
    const auto b = static_cast<unsigned char>(text[at]);
    const size_t n = b >= 0xF0 ? 4 : b >= 0xE0 ? 3 : b >= 0xC0 ? 2 : 1;
    return std::min(n, text.size() - at);
  }

  // Alternatives for texts[begin, end), sorted, which share their first
  // `at` bytes (whole characters).
  std::string trie_alternatives(const std::vector<std::string>& texts, size_t begin, size_t end,
                                size_t at, const std::string& hint) {
    std::string alts;
    size_t i = begin;
    if (texts[i].size() == at) {  // a value that ends here (sorted first)
      alts = "\"\"";
      ++i;
    }
    while (i < end) {
      const size_t n = char_size(texts[i], at);
      const std::string c = texts[i].substr(at, n);
      size_t j = i;
      while (j < end && texts[j].compare(at, n, c) == 0) ++j;
      std::string branch;
      if (j - i == 1) {
        branch = literal(texts[i].substr(at));
      } else {
        branch = literal(c) + " " + add_rule(hint, trie_alternatives(texts, i, j, at + n, hint));
      }
      alts += (alts.empty() ? "" : " | ") + branch;
      i = j;
    }
    return alts;
  }

  std::string add_rule(const std::string& hint, const std::string& body) {
    std::string name = hint;
    for (int n = 2; rules_.count(name); ++n) name = hint + "-" + std::to_string(n);
    rules_[name] = body;
    return name;
  }

  static std::string rule_name(const std::string& text) {
    std::string out;
    for (char c : text) {
      const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
      out += ok ? c : '-';
    }
    return out.empty() ? "x" : out;
  }

  void check_keywords(const json& s, const std::string& pointer) const {
    static const std::set<std::string> constraints = {
        "type",  "enum",        "const",    "properties", "required",  "additionalProperties",
        "items", "prefixItems", "minItems", "maxItems",   "minLength", "maxLength",
        "anyOf", "oneOf",       "allOf",    "$ref",       "minimum"};
    for (const auto& [key, value] : s.items()) {
      if (!constraints.count(key) && !annotations().count(key)) {
        fail(pointer + "/" + key, "the keyword '" + key +
                                      "' is not supported by the grammar engine (docs/serve.md "
                                      "lists the supported ones)");
      }
    }
    if (s.contains("minimum") && !(s["minimum"].is_number() && s["minimum"].get<double>() == 0.0)) {
      fail(pointer + "/minimum", "only minimum 0 is supported (a number without a sign)");
    }
  }

  std::string visit(const json& s, const std::string& pointer, const std::string& hint) {
    if (s.is_boolean()) {
      if (!s.get<bool>()) fail(pointer, "the schema false accepts nothing");
      return use("value");
    }
    if (!s.is_object()) fail(pointer, "a schema must be an object or true");
    if (++depth_ > kMaxSchemaDepth)
      fail(pointer, "schemas nest deeper than " + std::to_string(kMaxSchemaDepth));
    check_keywords(s, pointer);
    std::string expr = visit_object(s, pointer, hint);
    if (s.contains("nullable")) {
      if (!s["nullable"].is_boolean())
        fail(pointer + "/nullable", "nullable must be true or false");
      if (s["nullable"].get<bool>()) expr = "(" + expr + " | " + use("null") + ")";
    }
    --depth_;
    return expr;
  }

  // Keywords beside `key` that constrain the value (not annotations).
  static std::vector<std::string> constraints_beside(const json& s, const std::string& key,
                                                     const std::set<std::string>& allowed) {
    std::vector<std::string> out;
    for (const auto& [k, v] : s.items()) {
      if (k != key && !annotations().count(k) && !allowed.count(k)) out.push_back(k);
    }
    return out;
  }

  void refuse_beside(const json& s, const std::string& key, const std::string& pointer,
                     const std::set<std::string>& allowed = {}) const {
    const std::vector<std::string> others = constraints_beside(s, key, allowed);
    if (!others.empty()) {
      fail(pointer + "/" + others.front(),
           "'" + others.front() + "' beside '" + key +
               "' is not supported (the grammar could not promise both); move it into the "
               "referenced or listed schemas");
    }
  }

  // Whether JSON value `v` has JSON Schema type `type`.
  static bool has_type(const json& v, const std::string& type) {
    if (type == "integer") {
      if (v.is_number_integer()) return true;
      if (!v.is_number_float()) return false;
      const double d = v.get<double>();
      return std::isfinite(d) && std::trunc(d) == d;
    }
    if (type == "number") return v.is_number();
    if (type == "string") return v.is_string();
    if (type == "boolean") return v.is_boolean();
    if (type == "null") return v.is_null();
    if (type == "object") return v.is_object();
    if (type == "array") return v.is_array();
    return false;
  }

  std::string visit_object(const json& s, const std::string& pointer, const std::string& hint) {
    if (s.contains("$ref")) {
      refuse_beside(s, "$ref", pointer);
      return ref(s["$ref"], pointer + "/$ref");
    }
    if (s.contains("const") || s.contains("enum")) {
      const std::string key = s.contains("const") ? "const" : "enum";
      refuse_beside(s, key, pointer, {"type"});
      const json values = key == "const" ? json::array({s["const"]}) : s["enum"];
      if (!values.is_array() || values.empty())
        fail(pointer + "/enum", "enum must be a non-empty array");
      std::vector<std::string> types;
      if (s.contains("type")) {
        const json& t = s["type"];
        const json list = t.is_array() ? t : json::array({t});
        for (const json& name : list) {
          static const std::set<std::string> known = {"integer", "number", "string", "boolean",
                                                      "null",    "object", "array"};
          if (!name.is_string() || !known.count(name.get<std::string>()))
            fail(pointer + "/type",
                 "type must name JSON types (string, number, integer, "
                 "boolean, null, object, array)");
          types.push_back(name.get<std::string>());
        }
      }
      std::vector<std::string> texts;
      for (const json& v : values) {
        const bool typed_ok =
            types.empty() || std::any_of(types.begin(), types.end(),
                                         [&](const std::string& t) { return has_type(v, t); });
        if (typed_ok) texts.push_back(v.dump());
      }
      if (texts.empty())
        fail(pointer + "/" + key, "no value of '" + key + "' has the schema's type");
      return literals(std::move(texts), hint + "-enum");
    }
    for (const char* key : {"anyOf", "oneOf", "allOf"}) {
      if (s.contains(key)) refuse_beside(s, key, pointer);
    }
    for (const char* key : {"anyOf", "oneOf"}) {
      if (!s.contains(key)) continue;
      const json& list = s[key];
      if (!list.is_array() || list.empty())
        fail(pointer + "/" + key, std::string(key) + " must be a non-empty array");
      std::string alts;
      for (size_t i = 0; i < list.size(); ++i) {
        alts += (alts.empty() ? "" : " | ") +
                visit(list[i], pointer + "/" + key + "/" + std::to_string(i), hint);
      }
      return "(" + alts + ")";
    }
    if (s.contains("allOf")) {
      const json& list = s["allOf"];
      if (!list.is_array() || list.size() != 1)
        fail(pointer + "/allOf", "allOf is supported with exactly one schema");
      return visit(list[0], pointer + "/allOf/0", hint);
    }
    if (s.contains("type")) {
      const json& t = s["type"];
      if (t.is_string()) return typed(t.get<std::string>(), s, pointer, hint);
      if (!t.is_array() || t.empty())
        fail(pointer + "/type", "type must be a name or a non-empty list of names");
      std::string alts;
      for (const json& name : t) {
        if (!name.is_string()) fail(pointer + "/type", "type names must be strings");
        alts += (alts.empty() ? "" : " | ") + typed(name.get<std::string>(), s, pointer, hint);
      }
      return "(" + alts + ")";
    }
    if (s.contains("properties") || s.contains("additionalProperties") || s.contains("required"))
      return typed("object", s, pointer, hint);
    if (s.contains("items") || s.contains("prefixItems") || s.contains("minItems") ||
        s.contains("maxItems"))
      return typed("array", s, pointer, hint);
    // Without a type, length keywords bind strings only and minimum numbers
    // only: allowing just those values keeps every answer valid.
    if (s.contains("minLength") || s.contains("maxLength"))
      return typed("string", s, pointer, hint);
    if (s.contains("minimum")) return typed("number", s, pointer, hint);
    return use("value");
  }

  std::string ref(const json& target, const std::string& pointer) {
    if (!target.is_string()) fail(pointer, "$ref must be a string");
    const std::string r = target.get<std::string>();
    if (r == "#") return top_;
    for (const char* prefix : {"#/$defs/", "#/definitions/"}) {
      const std::string p = prefix;
      if (r.rfind(p, 0) != 0) continue;
      const std::string name = r.substr(p.size());
      const std::string section = p.substr(2, p.size() - 3);
      if (!root_.contains(section) || !root_[section].contains(name))
        fail(pointer, "$ref '" + r + "' names no schema of this document");
      auto known = refs_.find(r);
      if (known != refs_.end()) return known->second;
      // Named now (a unique name, taken before its body is written), so a
      // recursive reference finds it.
      const std::string rule = add_rule("def-" + rule_name(name), "");
      refs_[r] = rule;
      rules_[rule] = visit(root_[section][name], "/" + section + "/" + name, rule + "-part");
      return rule;
    }
    fail(pointer,
         "$ref '" + r + "' is not supported (only '#', '#/$defs/NAME', '#/definitions/NAME')");
  }

  std::string typed(const std::string& type, const json& s, const std::string& pointer,
                    const std::string& hint) {
    const bool unsigned_number = s.contains("minimum");
    if (type == "string") return string_rule(s, pointer);
    if (type == "integer") return use(unsigned_number ? "unsigned-integer" : "integer");
    if (type == "number") return use(unsigned_number ? "unsigned-number" : "number");
    if (type == "boolean") return use("boolean");
    if (type == "null") return use("null");
    if (type == "object") return object_rule(s, pointer, hint);
    if (type == "array") return array_rule(s, pointer, hint);
    fail(pointer + "/type", "unknown type '" + type + "'");
  }

  static size_t bound(const json& s, const char* key, size_t fallback, const std::string& at,
                      const Converter& c) {
    if (!s.contains(key)) return fallback;
    const json& v = s[key];
    if (!v.is_number_integer() || v.get<int64_t>() < 0 || v.get<int64_t>() > kMaxRepeat) {
      c.fail(at + "/" + key,
             std::string(key) + " must be an integer 0.." + std::to_string(kMaxRepeat));
    }
    return static_cast<size_t>(v.get<int64_t>());
  }

  std::string string_rule(const json& s, const std::string& pointer) {
    if (!s.contains("minLength") && !s.contains("maxLength")) return use("string");
    use("char");
    const size_t min = bound(s, "minLength", 0, pointer, *this);
    const bool bounded = s.contains("maxLength");
    const size_t max = bound(s, "maxLength", 0, pointer, *this);
    if (bounded && max < min) fail(pointer + "/maxLength", "maxLength is below minLength");
    std::string rep = "{";
    rep += std::to_string(min);
    rep += ',';
    if (bounded) rep += std::to_string(max);
    rep += '}';
    // One rule per pair of bounds: twenty strings of maxLength 1000 share
    // the 1000 rules their repetition makes.
    std::string rule = "string-";
    rule += std::to_string(min);
    rule += bounded ? "-" + std::to_string(max) : "-up";
    if (!rules_.count(rule)) rules_[rule] = "\"\\\"\" char" + rep + " \"\\\"\"";
    return rule;
  }

  std::string array_rule(const json& s, const std::string& pointer, const std::string& hint) {
    const std::string ws = use("ws");
    std::vector<std::string> prefix;
    if (s.contains("prefixItems")) {
      const json& p = s["prefixItems"];
      if (!p.is_array()) fail(pointer + "/prefixItems", "prefixItems must be an array");
      for (size_t i = 0; i < p.size(); ++i)
        prefix.push_back(
            visit(p[i], pointer + "/prefixItems/" + std::to_string(i), hint + "-item"));
    }
    const bool items_false =
        s.contains("items") && s["items"].is_boolean() && !s["items"].get<bool>();
    std::string item = items_false           ? ""
                       : s.contains("items") ? visit(s["items"], pointer + "/items", hint + "-item")
                                             : use("value");
    // An expression (not a rule name) becomes a rule: items may repeat it
    // a thousand times.
    if (item.find_first_of(" (|\"") != std::string::npos) item = add_rule(hint + "-item", item);
    const size_t min = bound(s, "minItems", 0, pointer, *this);
    const bool bounded = s.contains("maxItems") || items_false;
    size_t max = s.contains("maxItems") ? bound(s, "maxItems", 0, pointer, *this) : prefix.size();
    if (items_false) max = std::min(max, prefix.size());
    if (bounded && max < min)
      fail(pointer + "/maxItems",
           "maxItems (or the prefixItems with items false) is below minItems");
    if (bounded && max == 0) return add_rule(hint + "-array", "\"[\" " + ws + " \"]\"");
    // Items 0..explicit-1 are written one by one (prefixItems, then `item`),
    // each from index `min` on possibly the last; then a run of `item`.
    size_t explicit_items = std::max<size_t>({prefix.size(), min, 1});
    if (bounded) explicit_items = std::min(explicit_items, max);
    const auto nth = [&](size_t k) { return k < prefix.size() ? prefix[k] : item; };
    const std::string more = "\",\" " + ws + " " + item + " " + ws;
    std::string body = !bounded ? "(" + more + ")*"
                       : max > explicit_items
                           ? "(" + more + "){0," + std::to_string(max - explicit_items) + "}"
                           : "";
    for (size_t k = explicit_items; k-- > 1;) {
      const std::string one = "\",\" " + ws + " " + nth(k) + " " + ws;
      body = k >= min ? "(" + one + " " + body + ")?" : one + " " + body;
    }
    const std::string first = nth(0) + " " + ws + " " + body;
    return add_rule(hint + "-array",
                    "\"[\" " + ws + " " + (min == 0 ? "(" + first + ")?" : first) + " \"]\"");
  }

  std::string object_rule(const json& s, const std::string& pointer, const std::string& hint) {
    const std::string ws = use("ws");
    struct Property {
      std::string key, value;
      bool required;
    };
    std::vector<Property> props;
    std::set<std::string> required;
    if (s.contains("required")) {
      if (!s["required"].is_array()) fail(pointer + "/required", "required must be an array");
      for (const json& r : s["required"]) {
        if (!r.is_string()) fail(pointer + "/required", "required must list strings");
        required.insert(r.get<std::string>());
      }
    }
    if (s.contains("properties")) {
      if (!s["properties"].is_object())
        fail(pointer + "/properties", "properties must be an object");
      for (const auto& [key, sub] : s["properties"].items()) {
        props.push_back({key,
                         visit(sub, pointer + "/properties/" + key, hint + "-" + rule_name(key)),
                         required.count(key) != 0});
      }
    }
    for (const std::string& r : required) {
      bool found = false;
      for (const Property& p : props) found = found || p.key == r;
      if (!found) {
        fail(pointer + "/required", "'" + r + "' is required but not among the properties");
      }
    }
    if (props.empty()) {
      const json extra = s.value("additionalProperties", json(true));
      if (extra.is_boolean() && !extra.get<bool>())
        return add_rule(hint + "-object", "\"{\" " + ws + " \"}\"");
      if (extra.is_boolean()) return use("object");
      const std::string v = visit(extra, pointer + "/additionalProperties", hint + "-value");
      const std::string pair = use("string") + " " + ws + " \":\" " + ws + " " + v + " " + ws;
      return add_rule(hint + "-object",
                      "\"{\" " + ws + " (" + pair + " (\",\" " + ws + " " + pair + ")*)? \"}\"");
    }
    // from(k): properties k.. with none written yet; rest(k): after one.
    const size_t n = props.size();
    std::vector<std::string> from(n + 1), rest(n + 1);
    const auto kv = [&](size_t k) {
      return literal(json(props[k].key).dump()) + " " + ws + " \":\" " + ws + " " + props[k].value +
             " " + ws;
    };
    for (size_t k = n; k-- > 0;) {
      const std::string after = k + 1 < n ? rest[k + 1] : "";
      const std::string none_after = k + 1 < n ? from[k + 1] : "";
      const std::string comma = "\",\" " + ws + " " + kv(k);
      if (k > 0) {
        rest[k] = add_rule(hint + "-rest-" + std::to_string(k),
                           props[k].required ? comma + " " + after : "(" + comma + ")? " + after);
      }
      std::string body = kv(k) + " " + after;
      if (!props[k].required)
        body = none_after.empty() ? "(" + body + ")?" : body + " | " + none_after;
      from[k] = add_rule(hint + "-from-" + std::to_string(k), body);
    }
    return add_rule(hint + "-object", "\"{\" " + ws + " " + from[0] + " \"}\"");
  }

  const json& root_;
  std::string what_;
  std::string top_;
  std::map<std::string, std::string> rules_;
  std::map<std::string, std::string> refs_;  // $ref text -> its rule
  int depth_ = 0;
};

}  // namespace

std::string json_schema_to_gbnf(std::string_view schema, const std::string& what,
                                const std::string& prefix, const std::string& suffix) {
  json root;
  try {
    root = json::parse(schema);
  } catch (const json::exception& e) {
    throw Error(ErrorKind::kConfig, what + ": not valid JSON (" + e.what() + ")");
  }
  // Wrapped, the schema's rule has a name of its own: no rule the
  // converter makes starts with "json-".
  const bool wrapped = !prefix.empty() || !suffix.empty();
  std::string gbnf = Converter(root, what, wrapped ? "json-root" : "root").run(prefix, suffix);
  if (gbnf.size() > kMaxGrammarBytes) {
    throw Error(ErrorKind::kConfig, what + ": the schema makes a grammar of " +
                                        std::to_string(gbnf.size()) + " bytes, more than " +
                                        std::to_string(kMaxGrammarBytes) + "; make it smaller");
  }
  return gbnf;
}

std::string json_object_gbnf() {
  std::string out = "root ::= object\n";
  for (const auto& [name, body] : primitives()) {
    if (name.find("unsigned") == std::string::npos && name != "integer")
      out += name + " ::= " + body + "\n";
  }
  return out;
}

}  // namespace duet::grammar
