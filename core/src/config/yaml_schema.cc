#include "config/yaml_schema.h"

namespace duet::yaml {

std::string child_path(const std::string& path, std::string_view key) {
  return path.empty() ? std::string(key) : path + "." + std::string(key);
}

std::string item_path(const std::string& path, size_t index) {
  return path + "[" + std::to_string(index) + "]";
}

const Node* get(const Node& map, std::string_view key) {
  const Entry* entry = map.find(key);
  return entry == nullptr ? nullptr : &entry->value;
}

}  // namespace duet::yaml
