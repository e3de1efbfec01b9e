// link_options.h — reading a chain link's options, with the conventions all
// the standard links share.
//
// A link has one primary option (top_k's `k`) that the YAML shorthand
// `- top_k: 40` delivers under the key `value`; either spelling is accepted,
// both at once is an error. Values are checked against their range, never
// clamped. Every error is a duet::Error(kConfig) that names "PATH.KEY", the
// value and the accepted range, in the same words as duet::Options:
//   components.sampler.chain[2].top_p.p: 1.5 is out of range;
//   expected a number in (0, 1] (1 = off)
// Each reader marks its keys as used, so Options::finish() afterwards reports
// misspelt keys with a suggestion.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "duet/options.h"

namespace duet::samplers {

// The key under which the YAML shorthand `- name: X` delivers X.
inline constexpr const char* kShorthandKey = "value";

// "PATH.KEY", the way errors name option `key` of `options`.
std::string key_path(const Options& options, const std::string& key);

// Accepted values of a real option. An infinite bound means "unbounded".
struct RealRange {
  double min;
  double max;
  bool min_open = false;  // min itself is excluded
  bool max_open = false;  // max itself is excluded
  std::string note;       // shown after the range, e.g. "1 = off"
};

// Accepted values of an integer option, both bounds included.
struct IntRange {
  int64_t min;
  int64_t max;
  std::string note;
};

// The primary option `name`, or its shorthand `value`; nullopt when neither
// is given. Throws when both are given or the value is bad.
std::optional<double> primary_real(const Options& options, const std::string& name,
                                   const RealRange& range);
std::optional<int64_t> primary_int(const Options& options, const std::string& name,
                                   const IntRange& range);

// Option `key`, or `fallback` when it is absent.
int64_t int_option(const Options& options, const std::string& key, int64_t fallback,
                   const IntRange& range);

// Throws unless `given`, naming the primary option `name` of link `link` and
// showing both ways to write it with `example_value`. Call it after
// Options::finish(), so that a misspelt key is reported as misspelt rather
// than as a missing option.
void require_primary(bool given, const Options& options, const std::string& link,
                     const std::string& name, const std::string& example_value);

}  // namespace duet::samplers
