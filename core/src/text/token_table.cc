#include "text/token_table.h"

#include <algorithm>
#include <limits>

#include "duet/error.h"
#include "text/token_type.h"

namespace duet {

void check_vocabulary_size(size_t n, const std::string& source) {
  if (n == 0 || n > static_cast<size_t>(std::numeric_limits<int32_t>::max())) {
    throw Error(ErrorKind::kModelFile, source + ": tokenizer.ggml.tokens has " + std::to_string(n) +
                                           " entries; expected 1.." +
                                           std::to_string(std::numeric_limits<int32_t>::max()));
  }
}

TokenTable::TokenTable(std::vector<std::string> pieces, std::vector<SpecialToken> specials,
                       std::optional<int64_t> bos, std::optional<int64_t> eos,
                       std::optional<int64_t> eot, const std::string& source)
    : pieces_(std::move(pieces)), specials_(std::move(specials)) {
  const size_t n = pieces_.size();
  std::stable_sort(
      specials_.begin(), specials_.end(),
      [](const SpecialToken& a, const SpecialToken& b) { return a.text.size() > b.text.size(); });
  for (const SpecialToken& s : specials_) by_piece_.emplace(s.text, s.id);
  for (size_t i = 0; i < n; ++i) by_piece_.emplace(pieces_[i], static_cast<int32_t>(i));

  auto checked_id = [&](const char* name, std::optional<int64_t> id) -> std::optional<int32_t> {
    if (!id) return std::nullopt;
    if (*id < 0 || static_cast<uint64_t>(*id) >= n) {
      throw Error(ErrorKind::kModelFile, source + ": tokenizer.ggml." + name + "_token_id is " +
                                             std::to_string(*id) + "; expected 0.." +
                                             std::to_string(n - 1));
    }
    return static_cast<int32_t>(*id);
  };
  bos_ = checked_id("bos", bos);
  eos_ = checked_id("eos", eos);
  const std::optional<int32_t> end_of_turn = checked_id("eot", eot);
  end_of_generation_.assign(n, false);
  control_.assign(n, false);
  for (const SpecialToken& s : specials_) {
    if (s.control) control_[static_cast<size_t>(s.id)] = true;
  }
  for (std::optional<int32_t> id : {eos_, end_of_turn}) {
    if (id) end_of_generation_[static_cast<size_t>(*id)] = true;
  }
  // Chat models end a turn with these even when the file names another eos.
  for (const SpecialToken& s : specials_) {
    if (s.control && is_end_of_turn_text(s.text)) {
      end_of_generation_[static_cast<size_t>(s.id)] = true;
    }
  }
}

const std::string& TokenTable::piece(int32_t id) const {
  if (id < 0 || id >= size()) {
    throw Error(ErrorKind::kInputRejected,
                "token id " + std::to_string(id) + " is outside the vocabulary of " +
                    std::to_string(size()) + " tokens (0.." + std::to_string(size() - 1) + ")");
  }
  return pieces_[static_cast<size_t>(id)];
}

std::optional<int32_t> TokenTable::find(std::string_view piece) const {
  auto it = by_piece_.find(std::string(piece));
  if (it == by_piece_.end()) return std::nullopt;
  return it->second;
}

bool TokenTable::is_end_of_generation(int32_t id) const {
  return id >= 0 && id < size() && end_of_generation_[static_cast<size_t>(id)];
}

bool TokenTable::is_control(int32_t id) const {
  return id >= 0 && id < size() && control_[static_cast<size_t>(id)];
}

}  // namespace duet
