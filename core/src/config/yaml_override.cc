#include "config/yaml_override.h"

#include <charconv>
#include <optional>

#include "duet/app/pipeline_config.h"
#include "text/split.h"

namespace duet::yaml {
namespace {

std::optional<size_t> parse_index(const std::string& key) {
  size_t index = 0;
  const char* end = key.data() + key.size();
  auto [ptr, ec] = std::from_chars(key.data(), end, index);
  if (ec != std::errc() || ptr != end) return std::nullopt;
  return index;
}

std::string item_range(const Node& list) {
  if (list.items.empty()) return "it is empty";
  return "it has items 0.." + std::to_string(list.items.size() - 1);
}

void apply_one(Node& root, const std::string& text, int index, Problems& problems) {
  const Origin origin{0, 0, index};
  // Key paths become keys of the document; values are checked by parse().
  if (refuse_unreadable_text(text, index, problems)) return;
  const size_t eq = text.find('=');
  if (eq == std::string::npos) {
    problems.add(origin, "expected KEY.PATH=VALUE, e.g. components.kv_cache.capacity_tokens=1024");
    return;
  }
  const std::string key_path = text.substr(0, eq);
  const std::vector<std::string> keys = split(key_path, '.');
  for (const auto& key : keys) {
    if (key.empty()) {
      problems.add(origin, "the key path '" + key_path + "' has an empty part");
      return;
    }
  }

  const std::string value_text = text.substr(eq + 1);
  Node value;
  value.origin = origin;
  // "key=" means the empty string; YAML would read an empty text as null.
  if (value_text.find_first_not_of(" \t") == std::string::npos) {
    value.kind = Node::Kind::kScalar;
  } else {
    std::optional<Node> parsed = parse(value_text, index, problems);
    if (!parsed) return;
    value = std::move(*parsed);
  }

  // Every check below comes before the first change to the tree, so a
  // refused override leaves it as it was.
  Node* at = &root;
  std::string walked;
  for (const auto& key : keys) {
    const std::string name = walked.empty() ? "the document" : "'" + walked + "'";
    if (at->is_null()) {  // e.g. `- greedy:` gaining its first option
      at->kind = Node::Kind::kMap;
      at->origin = origin;
    }
    if (at->is_map()) {
      Entry* entry = at->find(key);
      if (entry == nullptr) {
        Node created;
        created.origin = origin;
        at->entries.push_back(Entry{key, origin, std::move(created)});
        entry = &at->entries.back();
      }
      at = &entry->value;
    } else if (at->is_list()) {
      std::optional<size_t> item = parse_index(key);
      if (!item) {
        problems.add(origin, name + " is a list, so '" + key + "' must be an item number; " +
                                 item_range(*at));
        return;
      }
      if (*item >= at->items.size()) {
        problems.add(origin,
                     "index " + key + " is out of range for " + name + "; " + item_range(*at));
        return;
      }
      at = &at->items[*item];
    } else {
      problems.add(origin, name + " is the value " + found(*at) +
                               ", not a map, so it has no key '" + key + "'");
      return;
    }
    walked = walked.empty() ? key : walked + "." + key;
  }
  *at = std::move(value);
}

}  // namespace

void apply_overrides(Node& root, const std::vector<std::string>& overrides, Problems& problems) {
  for (size_t i = 0; i < overrides.size(); ++i)
    apply_one(root, overrides[i], static_cast<int>(i), problems);
}

}  // namespace duet::yaml

namespace duet {

std::string yaml_quoted(std::string_view text) {
  std::string out = "\"";
  for (char c : text) {
    if (c == '"' || c == '\\') out += '\\';
    if (c == '\n') {
      out += "\\n";
      continue;
    }
    out += c;
  }
  return out + "\"";
}

}  // namespace duet
