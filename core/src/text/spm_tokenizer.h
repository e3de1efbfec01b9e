// spm_tokenizer.h — SentencePiece-style BPE over scored pieces, the
// tokenizer of GGUF files with tokenizer.ggml.model "llama" (Llama 1/2,
// Mistral, Gemma) (internal; callers use load_tokenizer() from
// duet/tokenizer.h).
//
// Encoding, as llama.cpp's SPM tokenizer does it:
//   1. the text is cut at special tokens written in it — user-defined tokens
//      always, control tokens only with parse_special — the longest token
//      first across the whole text, then the next longest in what remains;
//   2. in each remaining stretch, spaces become "▁" (U+2581), with one "▁"
//      in front when the file asks for it (tokenizer.ggml.add_space_prefix)
//      and the stretch starts the text or follows a special token;
//   3. the stretch's UTF-8 characters (a byte of invalid UTF-8 is one on its
//      own, where llama.cpp lets a lead byte take the next bytes whatever
//      they are) are merged pairwise, always the
//      adjacent pair whose concatenation is the vocabulary piece with the
//      highest score (leftmost on ties), until no adjacent pair forms a
//      piece;
//   4. a resulting symbol that is not a piece (a character outside the
//      vocabulary) becomes its bytes' byte tokens ("<0x41>"); a byte with no
//      byte token is dropped.
// Decoding: "▁" back to spaces, byte tokens to their byte, other tokens as
// written. With add_space_prefix the text therefore decodes with the space
// the encoder put in front.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "duet/tokenizer.h"
#include "text/token_table.h"
#include "text/token_type.h"

namespace duet {

class SpmTokenizer final : public TableTokenizer {
 public:
  // Everything the tokenizer needs, as read from a GGUF file.
  struct Vocabulary {
    std::vector<std::string> tokens;       // pieces, "▁" for spaces; "<0x41>" for byte tokens
    std::vector<float> scores;             // same size as tokens: higher merges first
    std::vector<TokenType> types;          // same size as tokens
    std::optional<int64_t> bos, eos, eot;  // checked against the vocabulary
    bool add_bos = false;
    bool add_space_prefix = false;
  };

  // Throws Error(kModelFile) with `source` (the file) and the offending entry
  // when the vocabulary is malformed.
  SpmTokenizer(const Vocabulary& vocab, const std::string& source);

  std::vector<int32_t> encode(std::string_view text, bool parse_special) const override;

 private:
  void encode_stretch(std::string_view text, bool after_special, std::vector<int32_t>& out) const;

  std::vector<std::string> texts_;  // token texts as stored ("▁the", "<0x41>")
  std::vector<float> scores_;
  std::unordered_map<std::string_view, int32_t> by_text_;  // into texts_; last id wins
  std::array<int32_t, 256> byte_tokens_{};                 // each byte's token; -1: none
  bool add_space_prefix_ = false;
};

}  // namespace duet
