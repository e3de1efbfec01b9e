// token_type.h — GGUF tokenizer.ggml.token_type values (internal).
#pragma once

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
inline bool is_end_of_turn_text(std::string_view text) {
  return text == "<|im_end|>" || text == "<|endoftext|>" || text == "<end_of_turn>" ||
         text == "<|eot_id|>" || text == "<|end|>";
}

}  // namespace duet
