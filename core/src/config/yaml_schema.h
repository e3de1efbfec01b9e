// yaml_schema.h — checking a parsed YAML document against a schema, for
// the configuration files core reads (pipelines, experiments; internal).
//
// SchemaReader's helpers report each problem to a yaml::Problems with its
// position and key path, and go on, so that one run shows every problem; a
// typed reader sets its output only when the value is valid.
#pragma once

#include <algorithm>
#include <charconv>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "config/yaml_tree.h"
#include "duet/app/suggest.h"

namespace duet::yaml {

// "a.b" from "a" and "b"; "b" from "" and "b".
std::string child_path(const std::string& path, std::string_view key);
// "a[2]".
std::string item_path(const std::string& path, size_t index);
// The value of `key` in `map`, or nullptr. REQUIRES: map.is_map().
const Node* get(const Node& map, std::string_view key);

template <typename T>
std::optional<T> parse_integer(const std::string& text) {
  T value{};
  const char* end = text.data() + text.size();
  auto [ptr, ec] = std::from_chars(text.data(), end, value);
  if (ec != std::errc() || ptr != end) return std::nullopt;
  return value;
}

class SchemaReader {
 public:
  // Relative paths in the document are taken from `base_dir`.
  SchemaReader(Problems& problems, std::filesystem::path base_dir)
      : problems_(problems), base_dir_(std::move(base_dir)) {}

 protected:
  void report(const Origin& at, const std::string& path, const std::string& message) {
    problems_.add(at, (path.empty() ? "the document" : path) + ": " + message);
  }

  void type_error(const Node& node, const std::string& path, const std::string& expected) {
    report(node.origin, path, "expected " + expected + ", found " + yaml::found(node));
  }

  // The value of `key`, or nullptr after reporting that it is missing.
  const Node* required(const Node& map, const std::string& path, std::string_view key) {
    const Node* node = get(map, key);
    if (node == nullptr)
      report(map.origin, path, "missing required key '" + std::string(key) + "'");
    return node;
  }

  // Reports `node` unless it is a map, and each of its keys not in `known`.
  // Returns whether it is a map.
  bool expect_map(const Node& node, const std::string& path,
                  const std::vector<std::string>& known) {
    if (!node.is_map()) {
      type_error(node, path, "a map with the keys " + quoted_list(known));
      return false;
    }
    for (const Entry& e : node.entries) {
      if (std::find(known.begin(), known.end(), e.key) != known.end()) continue;
      std::string hint = did_you_mean(e.key, known);
      if (hint.empty()) hint = "; expected one of " + quoted_list(known);
      problems_.add(e.key_origin, "unknown key '" + e.key + "' " +
                                      (path.empty() ? "at the top level" : "in " + path) + hint);
    }
    return true;
  }

  // The typed readers below set `out` only when the value is valid.
  bool read_string(const Node& node, const std::string& path, std::string& out) {
    if (!node.is_scalar()) {
      type_error(node, path, "a string");
      return false;
    }
    out = node.scalar;
    return true;
  }

  void read_bool(const Node& node, const std::string& path, bool& out) {
    if (node.is_scalar() && (node.scalar == "true" || node.scalar == "false"))
      out = node.scalar == "true";
    else
      type_error(node, path, "true or false");
  }

  template <typename T>
  bool read_integer(const Node& node, const std::string& path, T min, T max, T& out) {
    const std::string expected =
        "an integer in " + std::to_string(min) + ".." + std::to_string(max);
    std::optional<T> value = node.is_scalar() ? parse_integer<T>(node.scalar) : std::nullopt;
    if (!value) {
      type_error(node, path, expected);
      return false;
    }
    if (*value < min || *value > max) {
      report(node.origin, path, node.scalar + " is out of range; expected " + expected);
      return false;
    }
    out = *value;
    return true;
  }

  // A non-empty string naming a component.
  void read_name(const Node& node, const std::string& path, std::string& out) {
    std::string name;
    if (!read_string(node, path, name)) return;
    if (name.empty())
      type_error(node, path, "a name");
    else
      out = name;
  }

  // A path written in the file is relative to the file's folder; one from
  // --set is relative to the working directory, like any command-line path.
  // Both become absolute, so that whoever reads them later (the plugin host,
  // a recorded result) cannot resolve them against another folder.
  std::filesystem::path resolve(const Node& node, const std::string& text) const {
    std::filesystem::path path(text);
    if (node.origin.override_index < 0) path = base_dir_ / path;  // keeps an absolute `text`
    std::error_code ec;
    std::filesystem::path absolute = std::filesystem::absolute(path, ec);
    return (ec ? path : absolute).lexically_normal();
  }

  Problems& problems_;
  std::filesystem::path base_dir_;
};

}  // namespace duet::yaml
