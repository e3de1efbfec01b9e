// duet/tokenizer.h — text to token ids and back, as the model was trained.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace duet {

// Thread-safety: const methods may be called concurrently.
class Tokenizer {
 public:
  virtual ~Tokenizer() = default;

  virtual int32_t vocab_size() const = 0;

  // Token ids of `text`. With `parse_special`, control tokens written in the
  // text ("<|im_start|>") become their single ids; without, they are plain
  // text. Never fails: any byte sequence has an encoding.
  virtual std::vector<int32_t> encode(std::string_view text, bool parse_special) const = 0;

  // The bytes of token `id`. A multi-byte UTF-8 character may span several
  // tokens; concatenating pieces restores the text. Throws
  // duet::Error(kInputRejected) if id is outside [0, vocab_size()).
  virtual std::string piece(int32_t id) const = 0;

  // True for tokens that end generation (end-of-sequence, end-of-turn).
  virtual bool is_end_of_generation(int32_t id) const = 0;
};

}  // namespace duet
