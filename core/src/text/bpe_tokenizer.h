// bpe_tokenizer.h — byte-level BPE, the GPT-2 family of tokenizers (internal;
// callers use load_tokenizer() from duet/tokenizer.h).
//
// Encoding: the text is first cut at special tokens written in it (leftmost,
// longest first), every other stretch is split into words by the
// PreTokenizer, each word's bytes become GPT-2's byte-level symbols, and
// adjacent symbols are merged lowest merge rank first (leftmost on ties), as
// Hugging Face tokenizers' BPE model does — except that, where the
// pre-tokenizer's rules say ignore_merges (Llama 3), a word that is a normal
// token as a whole becomes that token. Like it (with no unknown token), a
// byte whose symbol is not in the vocabulary is dropped: SmolLM2 lacks 21 of
// the 256 (0x04 0x06 0x13 0x14 0x16 0x1D, 0xC0 0xC1 0xF1 0xF2 and 0xF5-0xFF:
// rare controls and bytes of invalid UTF-8 or unassigned code points).
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "duet/tokenizer.h"
#include "text/pretokenizer.h"
#include "text/token_table.h"
#include "text/token_type.h"

namespace duet {

class BpeTokenizer final : public TableTokenizer {
 public:
  // Everything the tokenizer needs, as read from a GGUF file. `tokens` are
  // GGUF token texts (byte-level encoded, "Ġthe", except control and
  // user-defined tokens, which are raw text); `merges` are "left right" pairs
  // of token texts, rank = index.
  struct Vocabulary {
    std::vector<std::string> tokens;
    std::vector<TokenType> types;  // same size as tokens
    std::vector<std::string> merges;
    std::optional<int64_t> bos, eos, eot;  // checked against the vocabulary
    bool add_bos = false;
  };

  // Throws Error(kModelFile) with `source` (the file) and the offending entry
  // when the vocabulary is malformed.
  BpeTokenizer(const Vocabulary& vocab, std::unique_ptr<PreTokenizer> pre_tokenizer,
               const std::string& source);

  std::vector<int32_t> encode(std::string_view text, bool parse_special) const override;

 private:
  struct Merge {
    int32_t rank;
    int32_t result;
  };

  void encode_plain(std::string_view text, std::vector<int32_t>& out) const;
  void encode_word(std::string_view word, std::vector<int32_t>& out) const;

  std::unique_ptr<PreTokenizer> pre_tokenizer_;
  std::array<int32_t, 256> byte_tokens_{};      // each byte's token; -1: none
  std::unordered_map<uint64_t, Merge> merges_;  // key: left id << 32 | right id
  // With ignore_merges: each normal token's bytes, to its id (the first);
  // looked up by string_view, without a copy of each word.
  struct WordHash {
    using is_transparent = void;
    size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
  };
  std::unordered_map<std::string, int32_t, WordHash, std::equal_to<>> whole_words_;
  std::array<bool, 256> special_starts_{};  // first bytes of the special tokens
};

}  // namespace duet
