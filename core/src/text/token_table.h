// token_table.h — what every tokenizer keeps per token, whatever its
// algorithm: the bytes each id decodes to, the lookup by text, the special
// tokens written as raw text, which ids end generation, and BOS/EOS
// (internal).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "duet/tokenizer.h"

namespace duet {

// A control, unknown or user-defined token: raw text in the vocabulary.
struct SpecialToken {
  std::string text;
  int32_t id;
  bool control;  // matched in text only with parse_special; user-defined always
};

// Throws Error(kModelFile) naming `source` unless a vocabulary of `n`
// tokens has ids that fit int32_t (1..2^31-1 tokens).
void check_vocabulary_size(size_t n, const std::string& source);

class TokenTable {
 public:
  TokenTable() = default;

  // `pieces`: the bytes of each token; `specials` (sorted here, longest
  // first); `bos`, `eos`, `eot` as the file gives them. Ends of generation:
  // eos, eot and the control tokens is_end_of_turn_text() names. Throws
  // Error(kModelFile) naming `source` and the key when an id is out of range.
  TokenTable(std::vector<std::string> pieces, std::vector<SpecialToken> specials,
             std::optional<int64_t> bos, std::optional<int64_t> eos, std::optional<int64_t> eot,
             const std::string& source);

  int32_t size() const { return static_cast<int32_t>(pieces_.size()); }
  // Throws Error(kInputRejected) for an id outside [0, size()).
  const std::string& piece(int32_t id) const;
  // A control or user-defined token wins over a normal one of the same
  // piece, then the lowest id.
  std::optional<int32_t> find(std::string_view piece) const;
  bool is_end_of_generation(int32_t id) const;
  bool is_control(int32_t id) const;
  std::optional<int32_t> bos() const { return bos_; }
  std::optional<int32_t> eos() const { return eos_; }
  // Longest first.
  const std::vector<SpecialToken>& specials() const { return specials_; }

 private:
  std::vector<std::string> pieces_;
  std::vector<SpecialToken> specials_;
  std::unordered_map<std::string, int32_t> by_piece_;
  std::vector<bool> end_of_generation_;
  std::vector<bool> control_;
  std::optional<int32_t> bos_, eos_;
};

// The part of a Tokenizer that is its TokenTable's: everything but encode().
class TableTokenizer : public Tokenizer {
 public:
  int32_t vocab_size() const override { return table_.size(); }
  std::string piece(int32_t id) const override { return table_.piece(id); }
  bool is_end_of_generation(int32_t id) const override { return table_.is_end_of_generation(id); }
  bool is_control(int32_t id) const override { return table_.is_control(id); }
  std::optional<int32_t> find_token(std::string_view text) const override {
    return table_.find(text);
  }
  std::optional<int32_t> bos_id() const override { return table_.bos(); }
  std::optional<int32_t> eos_id() const override { return table_.eos(); }
  bool add_bos() const override { return add_bos_; }

 protected:
  explicit TableTokenizer(bool add_bos) : add_bos_(add_bos) {}

  TokenTable table_;  // set by the derived constructor

 private:
  bool add_bos_;
};

}  // namespace duet
