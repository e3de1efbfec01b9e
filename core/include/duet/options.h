// duet/options.h — the free-form `options:` map a YAML file passes to a
// component (backend, sampler, KV cache, stage).
//
// Values arrive as strings with the key path they came from, so that a
// component can report "backend.options.threads: 'many' is not an integer;
// expected 1..256". Each getter marks its key as used; finish() rejects keys
// that no getter asked for, so a misspelt option is an error, never ignored.
// Options is a value type; it is not thread-safe.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "duet/export.h"

namespace duet {

class DUET_API Options {
 public:
  Options() = default;
  // `path` is the key path of the map itself, e.g. "backend.options".
  explicit Options(std::string path) : path_(std::move(path)) {}

  void set(const std::string& key, const std::string& value) { values_[key] = value; }
  bool has(const std::string& key) const { return values_.count(key) != 0; }
  const std::string& path() const { return path_; }
  const std::map<std::string, std::string>& values() const { return values_; }

  // Each getter returns `fallback` when the key is absent and throws
  // duet::Error(kConfig) naming the key path, the value and the accepted
  // range when the value does not parse or lies outside [min, max].
  int64_t get_int(const std::string& key, int64_t fallback, int64_t min, int64_t max) const;
  double get_double(const std::string& key, double fallback, double min, double max) const;
  bool get_bool(const std::string& key, bool fallback) const;
  std::string get_string(const std::string& key, const std::string& fallback) const;
  // Accepts only one of `choices`.
  std::string get_choice(const std::string& key, const std::string& fallback,
                         const std::vector<std::string>& choices) const;

  // For an option with no sensible default: throws duet::Error(kConfig)
  // unless `key` is given, naming the key path and `what` it is, and the
  // given key it is most likely a misspelling of ("...options.window is
  // required (the number of positions attended); 'windw' was given: did you
  // mean 'window'?"). Marks `key` used; read its value with a getter.
  void require(const std::string& key, const std::string& what) const;

  // Throws duet::Error(kConfig) listing every key no getter has asked for,
  // with the closest known key as a suggestion.
  void finish() const;

 private:
  std::optional<std::string> lookup(const std::string& key) const;
  std::string path_;
  std::map<std::string, std::string> values_;
  mutable std::set<std::string> used_;
};

}  // namespace duet
