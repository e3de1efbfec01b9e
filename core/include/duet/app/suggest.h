// duet/app/suggest.h — "did you mean" for misspelt names: core's YAML and
// plugin errors, and the CLI's and the server's requests.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "duet/export.h"

namespace duet {

// Levenshtein distance between a and b.
DUET_API size_t edit_distance(std::string_view a, std::string_view b);

// The candidate closest to `word` if it is close enough to be a plausible
// typo (distance at most max(1, word.size() / 3)); empty otherwise.
DUET_API std::string closest_match(std::string_view word,
                                   const std::vector<std::string>& candidates);

// "; did you mean 'x'?" when closest_match finds one, else "".
DUET_API std::string did_you_mean(std::string_view word,
                                  const std::vector<std::string>& candidates);

// Joins names as "'a', 'b', 'c'".
DUET_API std::string quoted_list(const std::vector<std::string>& names);

}  // namespace duet
