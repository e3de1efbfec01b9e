#include "text/pretokenizer.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <map>

#include "duet/error.h"

namespace duet {
namespace {

// GPT-2's word regex, as Hugging Face's ByteLevel pre-tokenizer writes it
// (tokenizers/src/pre_tokenizers/byte_level.rs). llama.cpp drops the final
// `|\s+`; in Isolated mode the unmatched text becomes a piece anyway, so both
// split valid UTF-8 alike, and keeping it makes every valid character
// matchable, so only invalid bytes fall between matches.
constexpr const char* kGpt2Words =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

// The word regex of Llama 3 (tokenizer.ggml.pre "llama-bpe") and Qwen2
// ("qwen2"), as their tokenizer.json writes it but with the case-insensitive
// contractions spelt out (PCRE2's (?i) would also fold "ſ" to "s"): letters
// with at most one leading non-letter, then Llama 3 takes digits in runs of
// up to three and Qwen2 one at a time.
constexpr const char* kLlama3Words =
    R"((?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3})"
    R"(| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
constexpr const char* kQwen2Words =
    R"((?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N})"
    R"(| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

struct Known {
  std::vector<std::string> patterns;
  PreTokenizer::Rules rules;
};

// tokenizer.ggml.pre values, their regex sequences and rules. "smollm" is
// the HF pre-tokenizer Sequence[Digits(individual_digits=true),
// ByteLevel(add_prefix_space=false, use_regex=true)] of SmolLM/SmolLM2, which
// llama.cpp maps to LLAMA_VOCAB_PRE_TYPE_SMOLLM with regexes {"\p{N}", GPT-2}.
// Llama 3's tokenizer.json sets ignore_merges, and llama.cpp adds its BOS
// unless the file says otherwise.
const std::map<std::string, Known, std::less<>>& known_pretokenizers() {
  constexpr PreTokenizer::Rules kLlama3{true, true};
  static const std::map<std::string, Known, std::less<>> kKnown = {
      {"smollm", {{R"(\p{N})", kGpt2Words}, {}}},
      // The names llama.cpp's converter writes for Llama 3 tokenizers.
      {"llama-bpe", {{kLlama3Words}, kLlama3}},
      {"llama3", {{kLlama3Words}, kLlama3}},
      {"llama-v3", {{kLlama3Words}, kLlama3}},
      {"qwen2", {{kQwen2Words}, {}}},
  };
  return kKnown;
}

}  // namespace

struct PreTokenizer::Regex {
  pcre2_code* code = nullptr;
  ~Regex() { pcre2_code_free(code); }
};

std::unique_ptr<PreTokenizer> PreTokenizer::for_name(std::string_view name) {
  const auto& known = known_pretokenizers();
  auto it = known.find(name);
  if (it == known.end()) return nullptr;
  return std::make_unique<PreTokenizer>(it->second.patterns, it->second.rules);
}

std::vector<std::string> PreTokenizer::supported_names() {
  std::vector<std::string> names;
  for (const auto& [name, known] : known_pretokenizers()) names.push_back(name);
  return names;
}

PreTokenizer::PreTokenizer(const std::vector<std::string>& patterns, Rules rules) : rules_(rules) {
  for (const std::string& pattern : patterns) {
    auto regex = std::make_unique<Regex>();
    int error_code = 0;
    PCRE2_SIZE error_offset = 0;
    regex->code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(),
                                PCRE2_UTF | PCRE2_UCP | PCRE2_MATCH_INVALID_UTF, &error_code,
                                &error_offset, nullptr);
    if (regex->code == nullptr) {
      PCRE2_UCHAR message[256];
      pcre2_get_error_message(error_code, message, sizeof message);
      throw Error(ErrorKind::kInternal,
                  "pre-tokenizer regex '" + pattern + "' does not compile at " +
                      std::to_string(error_offset) + ": " + reinterpret_cast<const char*>(message));
    }
    // split() relies on every match consuming at least one byte.
    uint32_t min_length = 0;
    pcre2_pattern_info(regex->code, PCRE2_INFO_MINLENGTH, &min_length);
    if (min_length == 0) {
      throw Error(ErrorKind::kInternal,
                  "pre-tokenizer regex '" + pattern + "' can match empty text");
    }
    // JIT is an optimisation only: where it is unavailable the interpreter
    // gives the same matches.
    pcre2_jit_compile(regex->code, PCRE2_JIT_COMPLETE);
    regexes_.push_back(std::move(regex));
  }
}

PreTokenizer::~PreTokenizer() = default;

std::vector<std::string_view> PreTokenizer::split(std::string_view text) const {
  std::vector<std::string_view> pieces;
  if (!text.empty()) pieces.push_back(text);
  for (const auto& regex : regexes_) {
    std::unique_ptr<pcre2_match_data, decltype(&pcre2_match_data_free)> match(
        pcre2_match_data_create_from_pattern(regex->code, nullptr), &pcre2_match_data_free);
    if (match == nullptr) throw std::bad_alloc();
    std::vector<std::string_view> next;
    for (std::string_view piece : pieces) {
      const auto* subject = reinterpret_cast<PCRE2_SPTR>(piece.data());
      size_t gap_start = 0;
      size_t offset = 0;
      while (offset < piece.size()) {
        int rc = pcre2_match(regex->code, subject, piece.size(), offset, 0, match.get(), nullptr);
        if (rc == PCRE2_ERROR_NOMATCH) break;
        if (rc < 0) {
          PCRE2_UCHAR message[256];
          pcre2_get_error_message(rc, message, sizeof message);
          throw Error(ErrorKind::kInputRejected,
                      "pre-tokenizer cannot split the text near byte " +
                          std::to_string(piece.data() - text.data() + offset) + ": " +
                          reinterpret_cast<const char*>(message));
        }
        const PCRE2_SIZE* ovector = pcre2_get_ovector_pointer(match.get());
        if (ovector[0] > gap_start) next.push_back(piece.substr(gap_start, ovector[0] - gap_start));
        next.push_back(piece.substr(ovector[0], ovector[1] - ovector[0]));
        gap_start = offset = ovector[1];
      }
      if (gap_start < piece.size()) next.push_back(piece.substr(gap_start));
    }
    pieces = std::move(next);
  }
  return pieces;
}

}  // namespace duet
