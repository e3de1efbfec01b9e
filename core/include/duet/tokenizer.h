// duet/tokenizer.h — text to token ids and back, as the model was trained.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "duet/export.h"

namespace duet {

class GgufFile;

// Thread-safety: const methods may be called concurrently.
class DUET_API Tokenizer {
 public:
  virtual ~Tokenizer() = default;

  virtual int32_t vocab_size() const = 0;

  // Token ids of `text`. With `parse_special`, control tokens written in the
  // text ("<|im_start|>") become their single ids; without, they are plain
  // text. User-defined tokens (added words) are always matched whole, as the
  // model's own tokenizer does. Never fails: any byte sequence, valid UTF-8
  // or not, has an encoding, and decode(encode(x, false)) == x except that
  // bytes with no token of their own in the vocabulary are dropped, as the
  // model's original tokenizer drops them (find_token(std::string(1, byte))
  // tells; SmolLM2 lacks 21 bytes that occur only in rare control characters,
  // unassigned code points and invalid UTF-8).
  virtual std::vector<int32_t> encode(std::string_view text, bool parse_special) const = 0;

  // The bytes of token `id`. A multi-byte UTF-8 character may span several
  // tokens; concatenating pieces restores the text. Control tokens give their
  // text ("<|im_end|>"). Throws duet::Error(kInputRejected) if id is outside
  // [0, vocab_size()).
  virtual std::string piece(int32_t id) const = 0;

  // True for tokens that end generation (end-of-sequence, end-of-turn).
  // False for ids outside the vocabulary.
  virtual bool is_end_of_generation(int32_t id) const = 0;

  // The id of the token whose piece() is exactly `text`, or nullopt. When
  // several tokens share that piece, a control or user-defined token wins,
  // then the lowest id.
  virtual std::optional<int32_t> find_token(std::string_view text) const = 0;

  // Beginning- and end-of-sequence ids from the model file, when it names them.
  virtual std::optional<int32_t> bos_id() const = 0;
  virtual std::optional<int32_t> eos_id() const = 0;
  // Whether prompts should start with bos_id() (tokenizer.ggml.add_bos_token);
  // encode() never adds it by itself.
  virtual bool add_bos() const = 0;

  // ABI 1.5: true for control tokens ("<|im_end|>", "<start_of_turn>"):
  // encode() makes them only with parse_special, and model output that is
  // text should not contain them. False for ids outside the vocabulary.
  virtual bool is_control(int32_t id) const = 0;

  // The concatenated pieces of `ids`; throws like piece().
  std::string decode(std::span<const int32_t> ids) const {
    std::string text;
    for (int32_t id : ids) text += piece(id);
    return text;
  }
};

// Builds the tokenizer a GGUF model describes. Supported: tokenizer.ggml.model
// "gpt2" (byte-level BPE) with tokenizer.ggml.pre "smollm", "llama-bpe"
// (also "llama3", "llama-v3") or "qwen2", reading
// tokenizer.ggml.merges (rank = index); and "llama" (SentencePiece-style BPE:
// Llama 1/2, Mistral, Gemma), reading tokenizer.ggml.scores and
// .add_space_prefix (default true). Both read tokenizer.ggml.tokens,
// .token_type (optional; 1 normal, 3 control, 4 user-defined, 6 byte, ...),
// .bos/.eos/.eot_token_id and .add_bos_token (default false for "gpt2" but
// true for its Llama 3 pre-tokenizers "llama-bpe", "llama3" and "llama-v3",
// and true for "llama", as llama.cpp assumes). Everything is copied: the
// tokenizer does not keep `file`.
// Throws duet::Error(kModelFile) naming the file, the key and the value when a
// model or pre-tokenizer is not supported or the vocabulary is malformed (a
// merge of unknown tokens, a token text that is not byte-level encoded, an id
// out of range, ...).
DUET_API std::unique_ptr<Tokenizer> load_tokenizer(const GgufFile& file);

}  // namespace duet
