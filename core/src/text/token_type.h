// token_type.h — GGUF tokenizer.ggml.token_type values (internal).
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <string_view>

namespace duet {

// llama.cpp's llama_token_type.
enum class TokenType : int32_t {
  kUndefined = 0,
  kNormal = 1,
  kUnknown = 2,
  kControl = 3,
  kUserDefined = 4,
  kUnused = 5,
  kByte = 6,
};

// Control tokens that end a turn in chat models even when the file names
// another end-of-sequence token (ChatML, Gemma, Llama 3, Phi).
inline constexpr std::array<std::string_view, 5> kEndOfTurnTexts = {
    "<|im_end|>", "<|endoftext|>", "<end_of_turn>", "<|eot_id|>", "<|end|>"};

inline bool is_end_of_turn_text(std::string_view text) {
  return std::find(kEndOfTurnTexts.begin(), kEndOfTurnTexts.end(), text) != kEndOfTurnTexts.end();
}

}  // namespace duet
