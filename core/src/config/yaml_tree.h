// yaml_tree.h — a YAML document as a plain tree of maps, lists and scalars
// that remembers where each node came from (internal to core).
//
// yaml-cpp's event parser feeds this tree directly, so core can refuse what a
// pipeline file never needs — aliases, tags, non-scalar or duplicate keys,
// deep nesting, a second document — before it costs time or memory, and so
// values set by --set carry their own origin.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "duet/error.h"

namespace duet::yaml {

// Documents nested deeper than this are refused; pipeline files need about 6.
inline constexpr size_t kMaxDepth = 32;

// Where a node came from: a 1-based line and column in the file, or the
// --set override overrides[override_index].
struct Origin {
  int line = 0;
  int column = 0;
  int override_index = -1;
};

struct Entry;

struct Node {
  enum class Kind { kNull, kScalar, kList, kMap };
  Kind kind = Kind::kNull;
  Origin origin;
  std::string scalar;          // kScalar
  std::vector<Node> items;     // kList
  std::vector<Entry> entries;  // kMap: in document order, keys unique

  bool is_map() const { return kind == Kind::kMap; }
  bool is_list() const { return kind == Kind::kList; }
  bool is_scalar() const { return kind == Kind::kScalar; }
  bool is_null() const { return kind == Kind::kNull; }
  // The entry with `key`, or nullptr. REQUIRES: is_map().
  const Entry* find(std::string_view key) const;
  Entry* find(std::string_view key);
};

struct Entry {
  std::string key;
  Origin key_origin;
  Node value;
};

// What a node is, for "expected X, found Y" messages: "'lots'", "a list",
// "a map", "nothing".
std::string found(const Node& node);

// Collects the problems of one pipeline file and its overrides, and throws
// them together.
class Problems {
 public:
  Problems(std::string source_name, std::vector<std::string> overrides)
      : source_(std::move(source_name)), overrides_(std::move(overrides)) {}

  void add(const Origin& at, std::string message);
  bool empty() const { return problems_.empty(); }

  // "FILE:LINE:COL", "--set KEY=VALUE", or "FILE" for a zero origin.
  std::string where(const Origin& at) const;

  // Throws duet::Error(kConfig) with one "WHERE: message" line per problem,
  // file positions first in document order, then overrides in the order
  // given. Does nothing when there are none.
  void throw_if_any() const;

 private:
  struct Problem {
    Origin at;
    std::string message;
  };
  std::string source_;
  std::vector<std::string> overrides_;
  std::vector<Problem> problems_;
};

// Parses one YAML document into a tree. Nodes get file positions, or, when
// `override_index` >= 0, that override as their origin. Text without a
// document gives a null node at 1:1. Returns nullopt after adding a problem
// for a syntax error or refused content.
std::optional<Node> parse(std::string_view text, int override_index, Problems& problems);

// Reports (and returns true) when `text` is not well-formed UTF-8 (RFC
// 3629) or holds a raw C0 control character other than tab, line feed and
// carriage return (YAML allows none), at the first bad byte: a line and
// column of the file, or the --set override overrides[override_index].
bool refuse_unreadable_text(std::string_view text, int override_index, Problems& problems);

// The text of a configuration file, `what` naming its kind in errors
// ("pipeline file"). Throws duet::Error(kConfig) "FILE: WHAT not found", not
// a regular file, unreadable, or larger than `max_bytes` (too_large()).
// Reads at most one byte past the limit, so a file growing meanwhile is
// refused too.
std::string read_file(const std::filesystem::path& file, const std::string& what,
                      uint64_t max_bytes);

// The error for a `what` of `size` bytes, more than `max_bytes`.
Error too_large(const std::string& name, const std::string& what, uint64_t size,
                uint64_t max_bytes);

}  // namespace duet::yaml
