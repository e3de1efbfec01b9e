#include "token_masks.h"

#include <algorithm>
#include <string_view>
#include <utility>

namespace duet::grammar {

TokenTrie::TokenTrie(const Tokenizer& tokenizer) : vocab_size(tokenizer.vocab_size()) {
  std::vector<std::string> pieces(static_cast<size_t>(vocab_size));
  std::vector<int32_t> order;
  for (int32_t id = 0; id < vocab_size; ++id) {
    if (tokenizer.is_end_of_generation(id)) {
      end_of_generation.push_back(id);
      continue;
    }
    if (tokenizer.is_control(id)) continue;
    pieces[static_cast<size_t>(id)] = tokenizer.piece(id);
    if (!pieces[static_cast<size_t>(id)].empty()) order.push_back(id);
  }
  std::sort(order.begin(), order.end(), [&](int32_t a, int32_t b) {
    return pieces[static_cast<size_t>(a)] < pieces[static_cast<size_t>(b)];
  });
  // Nodes are laid out breadth-first per parent: a node's children are
  // consecutive, found by grouping its sorted range by the next byte.
  struct Pending {
    uint32_t node;
    size_t begin, end, depth;
  };
  nodes.emplace_back();
  std::vector<Pending> todo{{0, 0, order.size(), 0}};
  while (!todo.empty()) {
    const Pending p = todo.back();
    todo.pop_back();
    size_t i = p.begin;
    nodes[p.node].first_token = static_cast<uint32_t>(tokens.size());
    while (i < p.end && pieces[static_cast<size_t>(order[i])].size() == p.depth) {
      tokens.push_back(order[i++]);
    }
    nodes[p.node].n_tokens = static_cast<uint32_t>(tokens.size()) - nodes[p.node].first_token;
    nodes[p.node].first_edge = static_cast<uint32_t>(edge_bytes.size());
    while (i < p.end) {
      const auto byte = static_cast<uint8_t>(pieces[static_cast<size_t>(order[i])][p.depth]);
      size_t j = i;
      while (j < p.end &&
             static_cast<uint8_t>(pieces[static_cast<size_t>(order[j])][p.depth]) == byte)
        ++j;
      const auto child = static_cast<uint32_t>(nodes.size());
      nodes.emplace_back();
      edge_bytes.push_back(byte);
      edge_nodes.push_back(child);
      todo.push_back({child, i, j, p.depth + 1});
      i = j;
    }
    nodes[p.node].n_edges = static_cast<uint32_t>(edge_bytes.size()) - nodes[p.node].first_edge;
  }
}

CompiledGrammar::CompiledGrammar(Grammar grammar, std::shared_ptr<const TokenTrie> trie)
    : grammar_(std::move(grammar)), matcher_(grammar_), trie_(std::move(trie)) {}

std::shared_ptr<const TokenMask> CompiledGrammar::mask(const MatchState& state) const {
  const std::string key = state.key();
  std::lock_guard lock(mutex_);
  if (auto it = cache_.find(key); it != cache_.end()) {
    ++hits_;
    return it->second;
  }
  std::shared_ptr<const TokenMask> made = compute(state);
  ++computed_;
  if (cache_.size() >= kMaxCachedMasks) cache_.clear();
  cache_.emplace(key, made);
  return made;
}

int32_t CompiledGrammar::intern(const MatchState& state) const {
  auto [it, added] = state_ids_.emplace(state.key(), static_cast<int32_t>(states_.size()));
  if (added) states_.push_back({state, {}});
  return it->second;
}

int32_t* CompiledGrammar::row(int32_t id) const {
  std::vector<int32_t>& next = states_[static_cast<size_t>(id)].next;
  if (next.empty()) next.assign(256, kUnknown);
  return next.data();
}

int32_t CompiledGrammar::next(int32_t id, uint8_t byte) const {
  MatchState after;
  const bool ok = matcher_.advance(states_[static_cast<size_t>(id)].state, byte, after);
  const int32_t known = ok ? intern(after) : kDead;
  row(id)[byte] = known;
  return known;
}

size_t CompiledGrammar::computed() const {
  std::lock_guard lock(mutex_);
  return computed_;
}

size_t CompiledGrammar::hits() const {
  std::lock_guard lock(mutex_);
  return hits_;
}

std::shared_ptr<const TokenMask> CompiledGrammar::compute(const MatchState& state) const {
  auto mask = std::make_shared<TokenMask>();
  const TokenTrie& t = *trie_;
  mask->bits.assign((static_cast<size_t>(t.vocab_size) + 63) / 64, 0);
  const auto allow = [&](int32_t id) {
    mask->bits[static_cast<size_t>(id) / 64] |= uint64_t{1} << (id % 64);
    ++mask->n_allowed;
  };
  if (states_.size() > kMaxStates) {
    states_.clear();
    state_ids_.clear();
  }
  // Depth-first over the trie, carrying interned states.
  struct Frame {
    uint32_t node, edge;
    int32_t state;
    const int32_t* row;
  };
  const int32_t start = intern(state);
  std::vector<Frame> path{{0, 0, start, row(start)}};
  while (!path.empty()) {
    Frame& f = path.back();
    const TokenTrie::Node& node = t.nodes[f.node];
    if (f.edge == node.n_edges) {
      path.pop_back();
      continue;
    }
    const uint32_t e = node.first_edge + f.edge++;
    const uint8_t byte = t.edge_bytes[e];
    int32_t after = f.row[byte];
    if (after == kUnknown) after = next(f.state, byte);
    if (after == kDead) continue;
    const TokenTrie::Node& child = t.nodes[t.edge_nodes[e]];
    for (uint32_t k = 0; k < child.n_tokens; ++k) allow(t.tokens[child.first_token + k]);
    if (child.n_edges != 0) path.push_back({t.edge_nodes[e], 0, after, row(after)});
  }
  if (matcher_.accepting(state)) {
    mask->end_allowed = true;
    for (int32_t id : t.end_of_generation) allow(id);
  }
  return mask;
}

}  // namespace duet::grammar
