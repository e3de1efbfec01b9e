// list_tokenizer.h — a Tokenizer over a given list of pieces, for tests of
// what reads a vocabulary (the grammar plugin's masks): it never encodes,
// and says which ids are control tokens and which one ends generation.
#pragma once

#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "duet/tokenizer.h"

namespace duet::testing_support {

class ListTokenizer final : public Tokenizer {
 public:
  ListTokenizer(std::vector<std::string> pieces, std::set<int32_t> control, int32_t eog)
      : pieces_(std::move(pieces)), control_(std::move(control)), eog_(eog) {}
  int32_t vocab_size() const override { return static_cast<int32_t>(pieces_.size()); }
  std::vector<int32_t> encode(std::string_view, bool) const override { return {}; }
  std::string piece(int32_t id) const override { return pieces_.at(static_cast<size_t>(id)); }
  bool is_end_of_generation(int32_t id) const override { return id == eog_; }
  std::optional<int32_t> find_token(std::string_view) const override { return std::nullopt; }
  std::optional<int32_t> bos_id() const override { return std::nullopt; }
  std::optional<int32_t> eos_id() const override { return eog_; }
  bool add_bos() const override { return false; }
  bool is_control(int32_t id) const override { return control_.count(id) != 0; }

 private:
  std::vector<std::string> pieces_;
  std::set<int32_t> control_;
  int32_t eog_;
};

}  // namespace duet::testing_support
