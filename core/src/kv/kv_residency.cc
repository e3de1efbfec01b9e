#include "kv/kv_residency.h"

#include <algorithm>
#include <bit>
#include <string>

#include "duet/error.h"

namespace duet {

KVResidency::KVResidency(std::vector<KVEndpoint> caches, const KVAllocator& allocator)
    : caches_(std::move(caches)),
      allocator_(allocator),
      current_in_(static_cast<size_t>(allocator.total_blocks()), 0) {
  if (caches_.size() > 32) {
    throw Error(ErrorKind::kInternal,
                std::to_string(caches_.size()) + " placements; KV residency tracks 32 at most");
  }
}

HandoverStats KVResidency::move_in(int32_t seq, int32_t first, size_t at) {
  const int32_t block = allocator_.block_tokens();
  const std::vector<int32_t>& table = allocator_.block_table(seq);
  const uint32_t here = 1u << at;
  // Per block below `first`: the cache it comes from (the first where it is
  // current), or none when it is current here already.
  constexpr size_t kNone = ~size_t{0};
  sources_.clear();
  for (size_t i = 0; i < table.size() && static_cast<int64_t>(i) * block < first; ++i) {
    const uint32_t where = current_in_[static_cast<size_t>(table[i])];
    if (where == 0) {
      throw Error(ErrorKind::kInternal, "KV block " + std::to_string(table[i]) + " of sequence " +
                                            std::to_string(seq) + " is current in no cache");
    }
    sources_.push_back((where & here) != 0 ? kNone : static_cast<size_t>(std::countr_zero(where)));
  }
  HandoverStats total;
  for (size_t from = 0; from < caches_.size(); ++from) {
    ranges_.clear();
    for (size_t i = 0; i < sources_.size(); ++i) {
      if (sources_[i] != from) continue;
      const int32_t start = static_cast<int32_t>(i) * block;
      add_slot_range(ranges_, int64_t{table[i]} * block, std::min(block, first - start));
    }
    if (ranges_.empty()) continue;
    const HandoverStats h = hand_over(caches_[from], caches_[at], ranges_);
    total.bytes += h.bytes;
    total.seconds += h.seconds;
  }
  // Every move done: a block wholly below `first` is current here too; the
  // one `first` falls in is written here next (written()).
  for (size_t i = 0; i < sources_.size(); ++i) {
    if (sources_[i] != kNone && static_cast<int64_t>(i + 1) * block <= first)
      current_in_[static_cast<size_t>(table[i])] |= here;
  }
  return total;
}

void KVResidency::written(int32_t seq, int32_t first, int32_t end, size_t at) {
  if (end <= first) return;
  const int32_t block = allocator_.block_tokens();
  const std::vector<int32_t>& table = allocator_.block_table(seq);
  for (int32_t b = first / block; b <= (end - 1) / block; ++b)
    current_in_[static_cast<size_t>(table[static_cast<size_t>(b)])] = 1u << at;
}

void KVResidency::copy_block(int32_t src, int32_t dst) {
  const uint32_t where = current_in_[static_cast<size_t>(src)];
  for (size_t p = 0; p < caches_.size(); ++p) {
    if ((where >> p & 1u) != 0) caches_[p].cache.copy_blocks(src, dst, 1);
  }
  current_in_[static_cast<size_t>(dst)] = where;
}

}  // namespace duet
