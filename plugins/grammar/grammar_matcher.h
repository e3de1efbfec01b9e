// grammar_matcher.h — where a text stands in a grammar, advanced one byte
// at a time.
//
// The state is the set of stacks of a pushdown automaton: each stack lists
// the grammar elements still to read, innermost (the next one) last, so
// every stack's top is a code point class, or the stack is empty (the text
// so far is a complete sentence). Rule references are expanded as soon as
// they reach a top, and finished alternatives are popped at once, so
// right recursion (`x ::= "a" x |`) keeps stacks short. Text arrives as
// UTF-8 bytes; a character split across tokens waits in the state until
// its last byte, and meanwhile counts as possible while some top could
// still accept one of the characters it may become.
#pragma once

#include <cstdint>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "grammar.h"

namespace duet::grammar {

// Bounds that keep a hostile grammar from slowing every step: ways a state
// may continue (further ones are dropped, so such a grammar may refuse text
// it describes), and rule expansions per byte read.
inline constexpr size_t kMaxStacks = 256;
inline constexpr size_t kMaxExpansions = 4096;

struct MatchState {
  // Stacks concatenated, each as its length followed by its elements.
  std::vector<uint32_t> stacks;
  uint32_t partial = 0;                          // bits of an unfinished UTF-8 character
  uint8_t partial_left = 0;                      // its continuation bytes still to come
  uint8_t partial_size = 0;                      // its length in bytes
  bool empty() const { return stacks.empty(); }  // no way on: the text is refused
  bool operator==(const MatchState&) const = default;
  // A key equal for equal states (for the mask cache).
  std::string key() const;
};

class Matcher {
 public:
  explicit Matcher(const Grammar& grammar) : g_(grammar) {}

  MatchState start() const;
  // `out` becomes `in` after `byte`; returns false (and leaves `out`
  // unspecified) when the grammar refuses the byte there.
  bool advance(const MatchState& in, uint8_t byte, MatchState& out) const;
  // Whether `text` is, byte by byte, a prefix the grammar allows.
  bool advance(MatchState& state, std::string_view text) const;
  // Whether the text so far is a complete sentence of the grammar.
  bool accepting(const MatchState& state) const;
  // Whether a complete sentence can go on (some stack is not empty).
  bool can_continue(const MatchState& state) const;

 private:
  using Expanded = std::set<std::vector<uint32_t>>;
  void expand(std::vector<uint32_t> stack, MatchState& out, Expanded& seen) const;
  void add(const std::vector<uint32_t>& stack, MatchState& out) const;
  bool step(const MatchState& in, uint32_t cp, MatchState& out) const;
  bool possible(const MatchState& in, uint32_t lo, uint32_t hi) const;

  const Grammar& g_;
};

}  // namespace duet::grammar
