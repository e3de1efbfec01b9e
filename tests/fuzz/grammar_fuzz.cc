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
#include "grammar.h"
#include "grammar_matcher.h"
#include "json_schema_gbnf.h"
#include "list_tokenizer.h"
#include "token_masks.h"

namespace {

// Every byte, some words and split characters, and an end token (also a
// control token).
duet::testing_support::ListTokenizer make_vocabulary() {
  std::vector<std::string> pieces;
  for (int b = 0; b < 256; ++b) pieces.emplace_back(1, static_cast<char>(b));
  for (const char* w : {"{\"", "\":", "\",", "true", "null", "12", "ab", "\xCE", "\xCE\xB1",
                        "\\u00", "  ", "\n  ", "\"}", "]}", "<end>"})
    pieces.emplace_back(w);
  const auto end = static_cast<int32_t>(pieces.size()) - 1;
  return duet::testing_support::ListTokenizer(std::move(pieces), {end}, end);
}

const duet::testing_support::ListTokenizer& vocabulary() {
  static const duet::testing_support::ListTokenizer v = make_vocabulary();
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
  const duet::testing_support::ListTokenizer& v = vocabulary();
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
