#include "kv/window_rings.h"

#include <algorithm>
#include <functional>
#include <limits>

#include "duet/error.h"

namespace duet {

namespace {

[[noreturn]] void misuse(const std::string& what) {
  throw Error(ErrorKind::kInternal, "WindowRings: " + what);
}

// Ring blocks of the full cache's size up to this many slots, else of 16.
constexpr int32_t kMaxRingBlockTokens = 64;
constexpr int32_t kRingBlockTokens = 16;

int64_t round_up(int64_t n, int64_t unit) { return (n + unit - 1) / unit * unit; }

}  // namespace

WindowRingGeometry window_ring_geometry(int32_t window, int32_t max_sequences,
                                        int64_t capacity_tokens, int32_t block_tokens) {
  if (window <= 0 || max_sequences <= 0 || capacity_tokens <= 0 || block_tokens <= 0) {
    misuse("geometry of window " + std::to_string(window) + ", " + std::to_string(max_sequences) +
           " sequences, capacity " + std::to_string(capacity_tokens) + " in blocks of " +
           std::to_string(block_tokens));
  }
  WindowRingGeometry g;
  g.window = window;
  g.block_tokens = block_tokens <= kMaxRingBlockTokens ? block_tokens : kRingBlockTokens;
  g.ring_tokens = static_cast<int32_t>(round_up(int64_t{2} * window, g.block_tokens));
  g.pool_tokens =
      std::min(int64_t{max_sequences} * g.ring_tokens, round_up(capacity_tokens, g.block_tokens));
  return g;
}

WindowRings::WindowRings(const WindowRingGeometry& geometry) : g_(geometry) {
  if (g_.window <= 0 || g_.window > g_.ring_tokens || g_.block_tokens <= 0 ||
      g_.ring_tokens % g_.block_tokens != 0 || g_.pool_tokens < 0 ||
      g_.pool_tokens % g_.block_tokens != 0 ||
      g_.pool_tokens > std::numeric_limits<int32_t>::max()) {
    misuse("window " + std::to_string(g_.window) + ", rings of " + std::to_string(g_.ring_tokens) +
           " in blocks of " + std::to_string(g_.block_tokens) + ", pool of " +
           std::to_string(g_.pool_tokens) +
           " slots: the window must fit the ring and the block divide both");
  }
  ring_blocks_ = g_.ring_tokens / g_.block_tokens;
  const auto n = static_cast<int32_t>(g_.pool_tokens / g_.block_tokens);
  owner_.assign(static_cast<size_t>(n), -1);
  // Ascending order is already a min-heap.
  free_.resize(static_cast<size_t>(n));
  for (int32_t b = 0; b < n; ++b) free_[static_cast<size_t>(b)] = b;
}

const std::vector<int32_t>& WindowRings::ring(int32_t seq) const {
  static const std::vector<int32_t> kEmpty;
  auto it = rings_.find(seq);
  return it == rings_.end() ? kEmpty : it->second;
}

int64_t WindowRings::room(int32_t seq, int32_t length) const {
  const int64_t reachable = static_cast<int64_t>(ring(seq).size()) + free_blocks();
  if (reachable >= ring_blocks_) return std::numeric_limits<int64_t>::max();
  return std::max<int64_t>(0, reachable * g_.block_tokens - length);
}

bool WindowRings::grow(int32_t seq, int32_t length) {
  if (seq < 0 || length < 0)
    misuse("grow of sequence " + std::to_string(seq) + " to " + std::to_string(length));
  if (covers(seq, length)) return true;
  const int64_t want = blocks_for(length);
  const auto held = static_cast<int64_t>(ring(seq).size());
  if (want - held > free_blocks()) return false;
  std::vector<int32_t>& blocks = rings_[seq];
  while (static_cast<int64_t>(blocks.size()) < want) {
    std::pop_heap(free_.begin(), free_.end(), std::greater<>());
    const int32_t b = free_.back();
    free_.pop_back();
    owner_[static_cast<size_t>(b)] = seq;
    blocks.push_back(b);
  }
  return true;
}

int64_t WindowRings::blocks_for(int32_t length) const {
  return std::min<int64_t>(ring_blocks_, (int64_t{length} + g_.block_tokens - 1) / g_.block_tokens);
}

bool WindowRings::covers(int32_t seq, int32_t length) const {
  return static_cast<int64_t>(ring(seq).size()) >= blocks_for(length);
}

void WindowRings::release(int32_t seq) {
  auto it = rings_.find(seq);
  if (it == rings_.end()) return;
  for (int32_t b : it->second) {
    owner_[static_cast<size_t>(b)] = -1;
    free_.push_back(b);
    std::push_heap(free_.begin(), free_.end(), std::greater<>());
  }
  rings_.erase(it);
}

int32_t WindowRings::slot(int32_t seq, int32_t pos) const {
  const std::vector<int32_t>& blocks = ring(seq);
  const int32_t in_ring = pos % g_.ring_tokens;
  const int32_t block = in_ring / g_.block_tokens;
  if (pos < 0 || block >= static_cast<int32_t>(blocks.size())) {
    misuse("slot of position " + std::to_string(pos) + " of sequence " + std::to_string(seq) +
           ", whose ring has " + std::to_string(blocks.size()) + " blocks");
  }
  return blocks[static_cast<size_t>(block)] * g_.block_tokens + in_ring % g_.block_tokens;
}

void WindowRings::map_step(const StepBatch& step, StepBatch& out) const {
  out.n_tokens = step.n_tokens;
  out.n_prefill_tokens = step.n_prefill_tokens;
  out.reserved = step.reserved;
  out.positions = step.positions;
  out.slot_mapping.resize(step.slot_mapping.size());
  out.sequences.resize(step.sequences.size());
  for (size_t i = 0; i < step.sequences.size(); ++i) {
    const SequenceStep& s = step.sequences[i];
    if (s.n_tokens > max_step_rows()) {
      misuse("sequence " + std::to_string(s.seq_id) + " runs " + std::to_string(s.n_tokens) +
             " rows in one step; a ring of " + std::to_string(g_.ring_tokens) +
             " slots holds a step of at most " + std::to_string(max_step_rows()));
    }
    const std::vector<int32_t>& blocks = ring(s.seq_id);
    if (!covers(s.seq_id, s.context_len)) {
      misuse("sequence " + std::to_string(s.seq_id) + " runs with " +
             std::to_string(s.context_len) + " positions but its ring has " +
             std::to_string(blocks.size()) + " blocks");
    }
    for (int32_t r = s.first_token; r < s.first_token + s.n_tokens; ++r) {
      const auto row = static_cast<size_t>(r);
      out.slot_mapping[row] = slot(s.seq_id, step.positions[row]);
    }
    const auto entries =
        static_cast<size_t>((s.context_len + g_.block_tokens - 1) / g_.block_tokens);
    SequenceStep& o = out.sequences[i];
    o.seq_id = s.seq_id;
    o.first_token = s.first_token;
    o.n_tokens = s.n_tokens;
    o.context_len = s.context_len;
    o.block_table.resize(entries);
    for (size_t j = 0; j < entries; ++j)
      o.block_table[j] = blocks[j % static_cast<size_t>(ring_blocks_)];
  }
}

std::string WindowRings::check() const {
  std::vector<int32_t> seen(owner_.size(), 0);
  for (const auto& [seq, blocks] : rings_) {
    if (blocks.empty() || static_cast<int32_t>(blocks.size()) > ring_blocks_) {
      return "sequence " + std::to_string(seq) + " holds " + std::to_string(blocks.size()) +
             " ring blocks (1 to " + std::to_string(ring_blocks_) + " allowed)";
    }
    for (int32_t b : blocks) {
      if (b < 0 || static_cast<size_t>(b) >= owner_.size())
        return "sequence " + std::to_string(seq) + " holds block " + std::to_string(b) +
               ", out of range";
      if (seen[static_cast<size_t>(b)]++ || owner_[static_cast<size_t>(b)] != seq)
        return "block " + std::to_string(b) + " is held twice or names another owner";
    }
  }
  for (int32_t b : free_) {
    if (b < 0 || static_cast<size_t>(b) >= owner_.size() || seen[static_cast<size_t>(b)]++ ||
        owner_[static_cast<size_t>(b)] != -1)
      return "free block " + std::to_string(b) + " is out of range, held or free twice";
  }
  for (size_t b = 0; b < seen.size(); ++b) {
    if (seen[b] != 1) return "block " + std::to_string(b) + " is neither free nor held";
  }
  if (!std::is_heap(free_.begin(), free_.end(), std::greater<>()))
    return "the free blocks are not a min-heap";
  return "";
}

}  // namespace duet
