#include "penalty_window.h"

#include <cassert>
#include <limits>

#include "link_options.h"

namespace duet::samplers {

int64_t read_last_n(const Options& options) {
  return int_option(options, "last_n", 64,
                    {-1, std::numeric_limits<int64_t>::max(), "-1 = whole history, 0 = off"});
}

std::unordered_map<int32_t, uint32_t> count_window(std::span<const int32_t> history,
                                                   int64_t last_n) {
  assert(last_n != 0);
  size_t size = history.size();
  if (last_n > 0 && static_cast<uint64_t>(last_n) < size) size = static_cast<size_t>(last_n);
  std::unordered_map<int32_t, uint32_t> counts;
  for (int32_t id : history.last(size)) ++counts[id];
  return counts;
}

}  // namespace duet::samplers
