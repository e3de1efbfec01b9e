// pretokenizer.h — splits text into the words BPE merges within (internal).
//
// A pre-tokenizer is a sequence of regexes, each applied to every piece the
// previous one produced, in Hugging Face's "Isolated" split mode: both the
// matches and the text between them become pieces, so pieces always tile the
// input. Regexes run in PCRE2 with Unicode properties (UTF + UCP) and
// PCRE2_MATCH_INVALID_UTF: bytes that are not valid UTF-8 match nothing and
// so end up in the pieces between matches; any byte string can be split.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace duet {

class PreTokenizer {
 public:
  // The pre-tokenizer that GGUF's tokenizer.ggml.pre `name` stands for, or
  // nullptr when Duet does not know it (see supported_names()).
  static std::unique_ptr<PreTokenizer> for_name(std::string_view name);
  static std::vector<std::string> supported_names();

  // What llama.cpp does for a file of this pre-tokenizer beyond the split
  // (Llama 3's "llama-bpe", as Hugging Face's tokenizer.json says for it):
  // `ignore_merges`, a word that is a token as a whole becomes that token
  // without merges; `adds_bos`, the file's BOS goes first when the file does
  // not say (tokenizer.ggml.add_bos_token).
  struct Rules {  // value-initialised: both false
    bool ignore_merges;
    bool adds_bos;
  };

  explicit PreTokenizer(const std::vector<std::string>& patterns, Rules rules = {});
  ~PreTokenizer();
  PreTokenizer(const PreTokenizer&) = delete;
  PreTokenizer& operator=(const PreTokenizer&) = delete;

  // Nonempty pieces of `text` in order; their concatenation is `text`. The
  // views point into `text`. Thread-safe. Throws Error(kInputRejected) only
  // if PCRE2 reports a matching error (a resource limit), which the built-in
  // patterns do not reach: they match without nested backtracking, and
  // megabyte-long words are tested.
  std::vector<std::string_view> split(std::string_view text) const;

  const Rules& rules() const { return rules_; }

 private:
  struct Regex;
  std::vector<std::unique_ptr<Regex>> regexes_;
  Rules rules_;
};

}  // namespace duet
