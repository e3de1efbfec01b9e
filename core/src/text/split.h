// text/split.h — a string cut at a separator, every part kept: "a::b" at ':'
// is {"a", "", "b"}, "" is {""}.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace duet {

inline std::vector<std::string> split(std::string_view text, char separator) {
  std::vector<std::string> parts;
  size_t start = 0;
  for (size_t end; (end = text.find(separator, start)) != std::string_view::npos; start = end + 1)
    parts.emplace_back(text.substr(start, end - start));
  parts.emplace_back(text.substr(start));
  return parts;
}

}  // namespace duet
