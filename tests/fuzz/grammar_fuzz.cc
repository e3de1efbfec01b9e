// Fuzz target: the grammar plugin's engine on hostile grammars. Input: a
// first byte choosing GBNF (even) or JSON Schema (odd), the grammar text up
// to a NUL, then output bytes. A grammar that is accepted must then run:
// the matcher reads the output byte by byte and, at each of the first
// steps, the mask over a small vocabulary must allow exactly the tokens the
// matcher accepts one by one. Nothing may crash, hang or throw anything but
// duet::Error.
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "duet/error.h"
#include "duet/tokenizer.h"
#include "grammar.h"
#include "grammar_matcher.h"
#include "json_schema_gbnf.h"
#include "token_masks.h"

namespace {

// Every byte, some words and split characters, and an end token.
class FuzzVocabulary final : public duet::Tokenizer {
 public:
  FuzzVocabulary() {
    for (int b = 0; b < 256; ++b) pieces_.emplace_back(1, static_cast<char>(b));
    for (const char* w : {"{\"", "\":", "\",", "true", "null", "12", "ab", "\xCE", "\xCE\xB1",
                          "\\u00", "  ", "\n  ", "\"}", "]}", "<end>"})
      pieces_.emplace_back(w);
  }
  int32_t vocab_size() const override { return static_cast<int32_t>(pieces_.size()); }
  std::vector<int32_t> encode(std::string_view, bool) const override { return {}; }
  std::string piece(int32_t id) const override { return pieces_.at(static_cast<size_t>(id)); }
  bool is_end_of_generation(int32_t id) const override { return id == vocab_size() - 1; }
  std::optional<int32_t> find_token(std::string_view) const override { return std::nullopt; }
  std::optional<int32_t> bos_id() const override { return std::nullopt; }
  std::optional<int32_t> eos_id() const override { return vocab_size() - 1; }
  bool add_bos() const override { return false; }
  bool is_control(int32_t id) const override { return id == vocab_size() - 1; }

 private:
  std::vector<std::string> pieces_;
};

const FuzzVocabulary& vocabulary() {
  static const FuzzVocabulary v;
  return v;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0 || size > 8192) return 0;
  const bool schema = data[0] % 2 == 1;
  const std::string rest(reinterpret_cast<const char*>(data) + 1, size - 1);
  const size_t nul = rest.find('\0');
  const std::string text = rest.substr(0, nul);
  const std::string output = nul == std::string::npos ? std::string() : rest.substr(nul + 1);
  std::unique_ptr<duet::grammar::CompiledGrammar> g;
  try {
    const std::string gbnf = schema ? duet::grammar::json_schema_to_gbnf(text, "fuzz") : text;
    static auto trie = std::make_shared<const duet::grammar::TokenTrie>(vocabulary());
    g = std::make_unique<duet::grammar::CompiledGrammar>(duet::grammar::parse_gbnf(gbnf, "fuzz"),
                                                         trie);
  } catch (const duet::Error&) {
    return 0;
  }
  duet::grammar::MatchState state = g->matcher().start();
  const FuzzVocabulary& v = vocabulary();
  for (size_t i = 0; i <= output.size() && i < 8; ++i) {
    const std::shared_ptr<const duet::grammar::TokenMask> mask = g->mask(state);
    for (int32_t id = 0; id + 1 < v.vocab_size(); ++id) {
      duet::grammar::MatchState s = state;
      if (mask->allows(id) != g->matcher().advance(s, v.piece(id))) __builtin_trap();
    }
    if (mask->allows(v.vocab_size() - 1) != g->matcher().accepting(state)) __builtin_trap();
    if (i == output.size()) break;
    duet::grammar::MatchState next;
    if (!g->matcher().advance(state, static_cast<uint8_t>(output[i]), next)) break;
    state = next;
  }
  return 0;
}
