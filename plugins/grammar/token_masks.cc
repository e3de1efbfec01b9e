#include "token_masks.h"

#include <algorithm>
#include <array>
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
  nodes.emplace_back();
  build(pieces, order, 0, 0, order.size(), 0);
}

void TokenTrie::build(const std::vector<std::string>& pieces, const std::vector<int32_t>& order,
                      uint32_t node, size_t begin, size_t end, size_t depth) {
  const auto byte_at = [&](size_t i) {
    return static_cast<uint8_t>(pieces[static_cast<size_t>(order[i])][depth]);
  };
  size_t i = begin;
  nodes[node].first_token = static_cast<uint32_t>(tokens.size());
  while (i < end && pieces[static_cast<size_t>(order[i])].size() == depth)
    tokens.push_back(order[i++]);
  nodes[node].n_tokens = static_cast<uint32_t>(tokens.size()) - nodes[node].first_token;
  // The children's edges first (consecutive), then each child's subtree, so
  // that a subtree's tokens are consecutive in `tokens` (preorder).
  std::vector<std::pair<size_t, size_t>> groups;
  while (i < end) {
    size_t j = i;
    while (j < end && byte_at(j) == byte_at(i)) ++j;
    groups.emplace_back(i, j);
    i = j;
  }
  nodes[node].first_edge = static_cast<uint32_t>(edge_bytes.size());
  nodes[node].n_edges = static_cast<uint32_t>(groups.size());
  for (const auto& [b, e] : groups) {
    edge_bytes.push_back(byte_at(b));
    edge_nodes.push_back(static_cast<uint32_t>(nodes.size()));
    nodes.emplace_back();
  }
  for (size_t k = 0; k < groups.size(); ++k) {
    const uint8_t byte = edge_bytes[nodes[node].first_edge + k];
    const uint32_t child = edge_nodes[nodes[node].first_edge + k];
    build(pieces, order, child, groups[k].first, groups[k].second, depth + 1);
    Node& n = nodes[node];
    const Node& c = nodes[child];
    if (byte < 128) {
      n.ascii_below[byte / 64] |= uint64_t{1} << (byte % 64);
    } else {
      n.non_ascii_below = true;
    }
    n.ascii_below[0] |= c.ascii_below[0];
    n.ascii_below[1] |= c.ascii_below[1];
    n.non_ascii_below = n.non_ascii_below || c.non_ascii_below;
    n.depth_below = std::max<uint32_t>(n.depth_below, c.depth_below + 1);
  }
  nodes[node].tokens_end = static_cast<uint32_t>(tokens.size());
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
  if (added) states_.push_back({state, {}, std::nullopt});
  return it->second;
}

const CompiledGrammar::AsciiRun& CompiledGrammar::ascii_run(int32_t id) const {
  if (!states_[static_cast<size_t>(id)].run) {
    // The state most ASCII bytes lead to, and which bytes lead there.
    AsciiRun run;
    std::unordered_map<int32_t, int> votes;
    std::array<int32_t, 128> to{};
    for (uint8_t b = 0; b < 128; ++b) {
      int32_t n = row(id)[b];
      if (n == kUnknown) n = next(id, b);
      to[b] = n;
      if (n != kDead) ++votes[n];
    }
    int best = 0;
    for (const auto& [state, count] : votes) {
      if (count > best || (count == best && state < run.next)) {
        best = count;
        run.next = state;
      }
    }
    for (uint8_t b = 0; b < 128; ++b) {
      if (run.next != kDead && to[b] == run.next) run.bytes[b / 64] |= uint64_t{1} << (b % 64);
    }
    states_[static_cast<size_t>(id)].run = run;
  }
  return *states_[static_cast<size_t>(id)].run;
}

bool CompiledGrammar::whole_subtree(int32_t id, const TokenTrie::Node& node) const {
  if (node.non_ascii_below || node.n_edges == 0) return false;
  int32_t state = id;
  for (uint32_t d = 0; d < node.depth_below; ++d) {
    const AsciiRun& run = ascii_run(state);
    if ((node.ascii_below[0] & ~run.bytes[0]) != 0 || (node.ascii_below[1] & ~run.bytes[1]) != 0)
      return false;
    state = run.next;
  }
  return true;
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
    if (whole_subtree(after, child)) {
      // Every token below reads only bytes that keep leading on: all allowed.
      for (uint32_t k = child.first_token; k < child.tokens_end; ++k) allow(t.tokens[k]);
      continue;
    }
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
