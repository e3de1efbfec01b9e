// token_masks.h — which tokens of a vocabulary a grammar allows next, per
// grammar state, computed once and cached.
//
// The vocabulary is kept as a byte trie of token pieces; a mask is one walk
// of the trie from a state, cutting every branch at the first byte the
// grammar refuses. Control tokens never match (their text is not output
// text); end-of-generation tokens are allowed exactly where the output so
// far is a complete sentence. Masks are cached by state, so a state met
// again (the inside of a string, the same key of the next answer) costs a
// lookup; the cache holds at most kMaxCachedMasks masks and is cleared when
// full. The walk itself runs on grammar states interned as they are met,
// with their byte transitions remembered (a DFA built lazily over the
// pushdown automaton): inside a string nearly every byte leads back to the
// same state, so a walk costs about one table lookup per trie node; and a
// subtree of ASCII bytes that all lead on to one state at every depth (a
// string's ordinary characters, bounded or not) is allowed whole without
// being walked. At most kMaxStates states are kept; past that the table
// starts over.
#pragma once

#include <array>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "duet/tokenizer.h"
#include "grammar.h"
#include "grammar_matcher.h"

namespace duet::grammar {

inline constexpr size_t kMaxCachedMasks = 4096;
inline constexpr size_t kMaxStates = 8192;

// The pieces of a vocabulary as a trie (built once per tokenizer).
class TokenTrie {
 public:
  explicit TokenTrie(const Tokenizer& tokenizer);

  struct Node {
    uint32_t first_edge = 0, n_edges = 0;    // into edge_bytes / edge_nodes
    uint32_t first_token = 0, n_tokens = 0;  // into tokens: pieces ending here
    uint32_t tokens_end = 0;                 // tokens [first_token, tokens_end): this subtree's
    // The bytes on edges below this node: ASCII as bits, and whether any is
    // not ASCII; the longest path below, in edges.
    std::array<uint64_t, 2> ascii_below{};
    bool non_ascii_below = false;
    uint32_t depth_below = 0;
  };
  std::vector<Node> nodes;  // nodes[0] is the root (the empty prefix)
  std::vector<uint8_t> edge_bytes;
  std::vector<uint32_t> edge_nodes;
  std::vector<int32_t> tokens;
  std::vector<int32_t> end_of_generation;  // ids that end generation
  int32_t vocab_size = 0;

 private:
  // Lays out `node` for pieces order[begin, end), which share `depth` bytes.
  void build(const std::vector<std::string>& pieces, const std::vector<int32_t>& order,
             uint32_t node, size_t begin, size_t end, size_t depth);
};

struct TokenMask {
  std::vector<uint64_t> bits;  // bit id: token id may come next
  bool end_allowed = false;    // the output may end here
  size_t n_allowed = 0;        // tokens allowed, end-of-generation ones included
  bool allows(int32_t id) const {
    return id >= 0 && static_cast<size_t>(id) / 64 < bits.size() &&
           ((bits[static_cast<size_t>(id) / 64] >> (id % 64)) & 1);
  }
};

// A grammar bound to a vocabulary: shared by every link made from the same
// grammar text and tokenizer. Thread-safe.
class CompiledGrammar {
 public:
  CompiledGrammar(Grammar grammar, std::shared_ptr<const TokenTrie> trie);

  const Matcher& matcher() const { return matcher_; }
  const TokenTrie& trie() const { return *trie_; }
  // The tokens allowed after `state` (cached).
  std::shared_ptr<const TokenMask> mask(const MatchState& state) const;
  // Masks computed and cache hits so far.
  size_t computed() const;
  size_t hits() const;

 private:
  // An interned state and its transitions: next[byte] is the state after
  // that byte, kDead when refused, kUnknown until first needed.
  static constexpr int32_t kDead = -1, kUnknown = -2;
  // The state most ASCII bytes lead to (kDead if none) and those bytes.
  struct AsciiRun {
    int32_t next = kDead;
    std::array<uint64_t, 2> bytes{};
  };
  struct Interned {
    MatchState state;
    std::vector<int32_t> next;  // 256 entries once a transition is asked for
    std::optional<AsciiRun> run;
  };
  const AsciiRun& ascii_run(int32_t id) const;
  // Whether every token below `node` is allowed from state `id`: the
  // subtree's bytes are ASCII, and along its depth each byte leads from the
  // state to the same next one (inside a string, every ordinary character
  // does), so no walk is needed.
  bool whole_subtree(int32_t id, const TokenTrie::Node& node) const;
  int32_t intern(const MatchState& state) const;
  // The transition row of state `id`, allocated on first use.
  int32_t* row(int32_t id) const;
  // Fills row(id)[byte].
  int32_t next(int32_t id, uint8_t byte) const;
  std::shared_ptr<const TokenMask> compute(const MatchState& state) const;

  Grammar grammar_;
  Matcher matcher_;
  std::shared_ptr<const TokenTrie> trie_;
  mutable std::mutex mutex_;  // guards everything below
  mutable std::unordered_map<std::string, std::shared_ptr<const TokenMask>> cache_;
  mutable std::deque<Interned> states_;  // a deque: rows stay put as it grows
  mutable std::unordered_map<std::string, int32_t> state_ids_;
  mutable size_t computed_ = 0, hits_ = 0;
};

}  // namespace duet::grammar
