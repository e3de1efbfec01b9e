// The paged KV block allocator (core/src/kv/kv_allocator.h): hand-out order,
// room, prefix publishing and attaching, copy on write, eviction and misuse,
// then random operations checked against a simulated cache whose slots hold
// the token ids written into them.
#include "kv/kv_allocator.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "duet/error.h"

namespace duet {
namespace {

using Copies = std::vector<KVAllocator::BlockCopy>;
using Tokens = std::vector<int32_t>;

constexpr int32_t kBlock = 4;

Tokens iota_tokens(int32_t n, int32_t first = 0) {
  Tokens t(static_cast<size_t>(n));
  std::iota(t.begin(), t.end(), first);
  return t;
}

// A sequence of `tokens`, published and released: its blocks end up cached.
void cache_prefix(KVAllocator& a, int32_t seq, const Tokens& tokens) {
  ASSERT_TRUE(a.append(seq, static_cast<int32_t>(tokens.size())));
  a.publish(seq, tokens);
  a.release(seq);
}

TEST(KVAllocator, HandsOutAndReusesLowestBlocksFirst) {
  KVAllocator a(8 * kBlock, kBlock);
  ASSERT_TRUE(a.append(0, 5));
  ASSERT_TRUE(a.append(1, 3));
  EXPECT_EQ(a.block_table(0), (Tokens{0, 1}));
  EXPECT_EQ(a.block_table(1), (Tokens{2}));
  a.release(0);
  ASSERT_TRUE(a.append(2, 9));
  EXPECT_EQ(a.block_table(2), (Tokens{0, 1, 3}));
  a.truncate(2, 4);
  EXPECT_EQ(a.block_table(2), (Tokens{0}));
  ASSERT_TRUE(a.append(1, 6));  // 3 -> 9 positions: two more blocks
  EXPECT_EQ(a.block_table(1), (Tokens{2, 1, 3}));
  EXPECT_EQ(a.used_blocks(), 4);
  EXPECT_EQ(a.check(), "");
}

TEST(KVAllocator, AppendSucceedsExactlyUpToRoom) {
  KVAllocator a(8 * kBlock, kBlock);
  EXPECT_EQ(a.room(0), 32);
  ASSERT_TRUE(a.append(0, 30));
  EXPECT_EQ(a.room(0), 2);
  EXPECT_EQ(a.room(1), 0);  // another sequence gets no share of a tail
  EXPECT_FALSE(a.append(0, 3));
  EXPECT_EQ(a.length(0), 30);
  EXPECT_FALSE(a.append(1, 1));
  EXPECT_EQ(a.length(1), 0);
  EXPECT_TRUE(a.append(0, 0));
  EXPECT_TRUE(a.append(0, 2));
  EXPECT_EQ(a.room(0), 0);
  EXPECT_EQ(a.free_blocks(), 0);
  EXPECT_EQ(a.check(), "");
}

TEST(KVAllocator, SlotIsBlockTimesBlockTokensPlusOffset) {
  KVAllocator a(8 * kBlock, kBlock);
  ASSERT_TRUE(a.append(0, 2));
  ASSERT_TRUE(a.append(1, 6));
  ASSERT_TRUE(a.append(0, 5));  // blocks 0, 3
  EXPECT_EQ(a.block_table(0), (Tokens{0, 3}));
  EXPECT_EQ(a.slot(0, 0), 0);
  EXPECT_EQ(a.slot(0, 3), 3);
  EXPECT_EQ(a.slot(0, 4), 12);
  EXPECT_EQ(a.slot(0, 6), 14);
  EXPECT_EQ(a.slot(1, 5), 9);
}

TEST(KVAllocator, TruncateDropsTheBlocksPastTheNewLength) {
  KVAllocator a(8 * kBlock, kBlock);
  ASSERT_TRUE(a.append(0, 13));
  EXPECT_EQ(a.used_blocks(), 4);
  a.truncate(0, 20);  // longer than held: no change
  EXPECT_EQ(a.length(0), 13);
  a.truncate(0, 5);
  EXPECT_EQ(a.length(0), 5);
  EXPECT_EQ(a.block_table(0), (Tokens{0, 1}));
  EXPECT_EQ(a.free_blocks(), 6);
  EXPECT_EQ(a.room(0), 3 + 24);
  a.truncate(0, 0);
  EXPECT_EQ(a.used_blocks(), 0);
  EXPECT_TRUE(a.block_table(0).empty());
  EXPECT_EQ(a.check(), "");
}

TEST(KVAllocator, ReleasedUnpublishedBlocksAreFree) {
  KVAllocator a(8 * kBlock, kBlock);
  ASSERT_TRUE(a.append(0, 9));
  a.release(0);
  a.release(7);  // unknown: nothing
  EXPECT_EQ(a.length(0), 0);
  EXPECT_EQ(a.free_blocks(), 8);
  EXPECT_EQ(a.cached_blocks(), 0);
  EXPECT_EQ(a.check(), "");
}

TEST(KVAllocator, PublishedFullBlocksAreCachedOnRelease) {
  KVAllocator a(8 * kBlock, kBlock);
  ASSERT_TRUE(a.append(0, 9));
  a.publish(0, iota_tokens(9));
  EXPECT_EQ(a.cached_blocks(), 0);  // held: used
  EXPECT_EQ(a.used_blocks(), 3);
  a.release(0);
  EXPECT_EQ(a.cached_blocks(), 2);  // the partial third block was not published
  EXPECT_EQ(a.free_blocks(), 8);
  EXPECT_EQ(a.used_blocks(), 0);
  EXPECT_EQ(a.check(), "");
}

TEST(KVAllocator, AttachReusesTheSameBlocksAndSlots) {
  KVAllocator a(8 * kBlock, kBlock);
  const Tokens tokens = iota_tokens(12);
  ASSERT_TRUE(a.append(0, 12));
  a.publish(0, tokens);
  const Tokens table = a.block_table(0);
  std::vector<int32_t> slots;
  for (int32_t p = 0; p < 12; ++p) slots.push_back(a.slot(0, p));
  a.release(0);

  Tokens longer = tokens;
  longer.push_back(99);
  EXPECT_EQ(a.attach_prefix(1, longer, 100), 12);
  EXPECT_EQ(a.block_table(1), table);
  for (int32_t p = 0; p < 12; ++p) EXPECT_EQ(a.slot(1, p), slots[static_cast<size_t>(p)]);
  EXPECT_EQ(a.cached_blocks(), 0);
  // A second sequence shares them.
  EXPECT_EQ(a.attach_prefix(2, tokens, 100), 12);
  EXPECT_EQ(a.block_table(2), table);
  EXPECT_EQ(a.used_blocks(), 3);
  EXPECT_EQ(a.check(), "");
}

TEST(KVAllocator, AttachStopsAtTheFirstBlockWithOtherTokens) {
  KVAllocator a(8 * kBlock, kBlock);
  cache_prefix(a, 0, iota_tokens(12));
  Tokens changed = iota_tokens(12);
  changed[6] = 77;  // inside the second block
  EXPECT_EQ(a.attach_prefix(1, changed, 100), 4);
  EXPECT_EQ(a.block_table(1).size(), 1u);
  // Fewer tokens than a whole block: that block is not matched.
  EXPECT_EQ(a.attach_prefix(2, Tokens{0, 1, 2}, 100), 0);
  EXPECT_TRUE(a.block_table(2).empty());
  EXPECT_EQ(a.check(), "");
}

TEST(KVAllocator, AttachMatchesTokensOnlyAfterTheSameBlock) {
  KVAllocator a(8 * kBlock, kBlock);
  cache_prefix(a, 0, Tokens{1, 1, 1, 1, 5, 6, 7, 8});
  cache_prefix(a, 1, Tokens{2, 2, 2, 2});
  // 5 6 7 8 is published after the block of 1s, not after the block of 2s,
  // nor as a first block.
  EXPECT_EQ(a.attach_prefix(2, Tokens{2, 2, 2, 2, 5, 6, 7, 8}, 100), 4);
  EXPECT_EQ(a.attach_prefix(3, Tokens{5, 6, 7, 8}, 100), 0);
  EXPECT_EQ(a.attach_prefix(4, Tokens{1, 1, 1, 1, 5, 6, 7, 8}, 100), 8);
  EXPECT_EQ(a.check(), "");
}

TEST(KVAllocator, MaxPositionsLimitsTheAttachedLength) {
  KVAllocator a(8 * kBlock, kBlock);
  const Tokens tokens = iota_tokens(8);
  cache_prefix(a, 0, tokens);
  EXPECT_EQ(a.attach_prefix(1, tokens, 0), 0);
  EXPECT_TRUE(a.block_table(1).empty());
  // The second block starts at 4: cut off entirely, it is not attached.
  EXPECT_EQ(a.attach_prefix(1, tokens, 4), 4);
  EXPECT_EQ(a.block_table(1).size(), 1u);
  EXPECT_EQ(a.attach_prefix(2, tokens, 7), 7);
  EXPECT_EQ(a.block_table(2).size(), 2u);
  EXPECT_EQ(a.check(), "");
}

TEST(KVAllocator, AppendingIntoAnAttachedPartialBlockCopiesIt) {
  KVAllocator a(8 * kBlock, kBlock);
  const Tokens tokens = iota_tokens(8);
  cache_prefix(a, 0, tokens);  // blocks 0, 1 cached
  ASSERT_EQ(a.attach_prefix(1, tokens, 6), 6);
  EXPECT_EQ(a.block_table(1), (Tokens{0, 1}));
  // Block 1 needs a copy, which takes block 2 and gives block 1 back cached.
  EXPECT_EQ(a.room(1), 2 + 6 * kBlock);
  Copies copies;
  ASSERT_TRUE(a.append(1, 1, copies));
  ASSERT_EQ(copies.size(), 1u);
  EXPECT_EQ(copies[0].src, 1);
  EXPECT_EQ(copies[0].dst, 2);
  EXPECT_EQ(a.block_table(1), (Tokens{0, 2}));
  EXPECT_EQ(a.slot(1, 6), 2 * kBlock + 2);
  EXPECT_EQ(a.cached_blocks(), 1);
  EXPECT_EQ(a.check(), "");
  // Now private: no more copies.
  copies.clear();
  ASSERT_TRUE(a.append(1, 3, copies));
  EXPECT_TRUE(copies.empty());
  EXPECT_EQ(a.block_table(1), (Tokens{0, 2, 3}));
  // The cached block still serves the whole prefix.
  EXPECT_EQ(a.attach_prefix(2, tokens, 100), 8);
  EXPECT_EQ(a.block_table(2), (Tokens{0, 1}));
  EXPECT_EQ(a.check(), "");
}

TEST(KVAllocator, AppendingIntoABlockAnotherSequenceHoldsCopiesIt) {
  KVAllocator a(4 * kBlock, kBlock);
  ASSERT_TRUE(a.append(0, 8));
  a.publish(0, iota_tokens(8));
  ASSERT_EQ(a.attach_prefix(1, iota_tokens(8), 100), 8);
  // A full shared last block needs no copy: new positions start block 2.
  EXPECT_EQ(a.room(1), 2 * kBlock);
  a.truncate(1, 6);
  // Block 1 is held by sequence 0 too: the copy costs one of the two blocks.
  EXPECT_EQ(a.room(1), 2 + kBlock);
  Copies copies;
  EXPECT_FALSE(a.append(1, 7, copies));
  EXPECT_TRUE(copies.empty());
  ASSERT_TRUE(a.append(1, 6, copies));
  ASSERT_EQ(copies.size(), 1u);
  EXPECT_EQ(copies[0].src, 1);
  EXPECT_EQ(copies[0].dst, 2);
  EXPECT_EQ(a.block_table(1), (Tokens{0, 2, 3}));
  EXPECT_EQ(a.block_table(0), (Tokens{0, 1}));
  EXPECT_EQ(a.check(), "");
}

TEST(KVAllocator, ACopyWithNothingFreeHasNoRoom) {
  KVAllocator a(2 * kBlock, kBlock);
  ASSERT_TRUE(a.append(0, 4));
  a.publish(0, iota_tokens(4));
  ASSERT_EQ(a.attach_prefix(1, iota_tokens(4), 3), 3);
  ASSERT_TRUE(a.append(2, 4));  // takes the last block
  EXPECT_EQ(a.room(1), 0);
  Copies copies;
  EXPECT_FALSE(a.append(1, 1, copies));
  EXPECT_EQ(a.check(), "");
}

TEST(KVAllocator, EvictsTheLeastRecentlyReleasedBlockFirst) {
  KVAllocator a(4 * kBlock, kBlock);
  const Tokens first = iota_tokens(8);
  const Tokens second = iota_tokens(4, 50);
  cache_prefix(a, 0, first);   // blocks 0, 1 cached, 1 first (last block first)
  cache_prefix(a, 1, second);  // block 2 cached after them
  EXPECT_EQ(a.cached_blocks(), 3);
  ASSERT_TRUE(a.append(2, 8));  // free block 3, then evicts block 1
  EXPECT_EQ(a.block_table(2), (Tokens{3, 1}));
  EXPECT_EQ(a.cached_blocks(), 2);
  // The prefix now ends before the evicted block.
  EXPECT_EQ(a.attach_prefix(3, first, 100), 4);
  EXPECT_EQ(a.block_table(3), (Tokens{0}));
  a.release(3);  // block 0 is now the most recently released
  ASSERT_TRUE(a.append(4, 4));
  EXPECT_EQ(a.block_table(4), (Tokens{2}));
  EXPECT_EQ(a.attach_prefix(5, second, 100), 0);
  EXPECT_EQ(a.attach_prefix(5, first, 100), 4);
  EXPECT_EQ(a.check(), "");
}

TEST(KVAllocator, ClearCacheFreesEveryCachedBlock) {
  KVAllocator a(8 * kBlock, kBlock);
  cache_prefix(a, 0, iota_tokens(8));
  ASSERT_TRUE(a.append(1, 4));
  a.publish(1, iota_tokens(4, 20));  // held: stays published
  EXPECT_EQ(a.cached_blocks(), 2);
  a.clear_cache();
  EXPECT_EQ(a.cached_blocks(), 0);
  EXPECT_EQ(a.free_blocks(), 7);
  EXPECT_EQ(a.attach_prefix(2, iota_tokens(8), 100), 0);
  EXPECT_EQ(a.attach_prefix(2, iota_tokens(4, 20), 100), 4);
  EXPECT_EQ(a.check(), "");
  // Freed, they are handed out lowest first again.
  ASSERT_TRUE(a.append(3, 4));
  EXPECT_EQ(a.block_table(3), (Tokens{0}));
}

TEST(KVAllocator, PublishStopsAtABlockWhoseTokensAnotherBlockHolds) {
  KVAllocator a(8 * kBlock, kBlock);
  const Tokens tokens = iota_tokens(8);
  ASSERT_TRUE(a.append(0, 8));
  ASSERT_TRUE(a.append(1, 8));
  a.publish(0, tokens);
  a.publish(1, tokens);  // both blocks' keys are sequence 0's
  a.release(0);
  a.release(1);
  EXPECT_EQ(a.cached_blocks(), 2);
  EXPECT_EQ(a.attach_prefix(2, tokens, 100), 8);
  EXPECT_EQ(a.block_table(2), (Tokens{0, 1}));
  EXPECT_EQ(a.check(), "");
}

template <typename F>
void expect_internal_error(F&& f, const char* what) {
  try {
    f();
    ADD_FAILURE() << what << ": no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kInternal) << what;
  }
}

TEST(KVAllocator, MisuseThrowsAndChangesNothing) {
  expect_internal_error([] { KVAllocator(10, 4); }, "block_tokens not dividing the capacity");
  expect_internal_error([] { KVAllocator(8, 0); }, "block_tokens 0");
  KVAllocator a(8 * kBlock, kBlock);
  ASSERT_TRUE(a.append(0, 5));
  a.publish(0, iota_tokens(5));
  expect_internal_error([&] { a.slot(0, 5); }, "slot past the length");
  expect_internal_error([&] { a.slot(0, -1); }, "negative slot");
  expect_internal_error([&] { a.slot(9, 0); }, "slot of an unknown sequence");
  expect_internal_error([&] { a.attach_prefix(0, iota_tokens(8), 8); },
                        "attach to a non-empty sequence");
  expect_internal_error([&] { a.attach_prefix(1, iota_tokens(8), -1); }, "negative max_positions");
  expect_internal_error([&] { a.publish(0, iota_tokens(4)); }, "publish with too few tokens");
  expect_internal_error([&] { a.append(0, -1); }, "negative append");
  expect_internal_error([&] { a.truncate(0, -1); }, "negative truncate");
  ASSERT_EQ(a.attach_prefix(1, iota_tokens(4), 3), 3);
  expect_internal_error([&] { a.append(1, 1); }, "append needing a copy without copies");
  EXPECT_EQ(a.length(0), 5);
  EXPECT_EQ(a.length(1), 3);
  EXPECT_EQ(a.used_blocks(), 2);
  EXPECT_EQ(a.check(), "");
}

// Random operations on a few sequences over a small cache, with a simulated
// cache: each slot holds the token id last written into it, copies applied
// block-wise before the writes, as the scheduler does. After every operation
// every position of every sequence must read back its token.
class RandomAllocator {
 public:
  explicit RandomAllocator(uint32_t seed)
      : rng_(seed),
        a_(kBlocks * kBlock, kBlock),
        cache_(kBlocks * kBlock, -1),
        tokens_(kSequences) {}

  void run(int operations) {
    for (int i = 0; i < operations; ++i) {
      const int32_t seq = pick(0, kSequences - 1);
      const int op = pick(0, 99);
      if (op < 45) {
        append(seq);
      } else if (op < 60) {
        truncate(seq);
      } else if (op < 70) {
        release(seq);
      } else if (op < 82) {
        attach(seq);
      } else if (op < 99) {
        publish(seq);
      } else {
        a_.clear_cache();
      }
      verify();
      if (::testing::Test::HasFailure()) {
        ADD_FAILURE() << "after operation " << i << " (kind " << op << ", sequence " << seq << ")";
        return;
      }
    }
    // Every path was taken.
    EXPECT_GT(seen_.refused, 0);
    EXPECT_GT(seen_.copies, 0);
    EXPECT_GT(seen_.evictions, 0);
    EXPECT_GT(seen_.partial_attaches, 0);
    EXPECT_GT(seen_.attached_blocks, 0);
    for (int32_t seq = 0; seq < kSequences; ++seq) a_.release(seq);
    EXPECT_EQ(a_.used_blocks(), 0);
    EXPECT_EQ(a_.free_blocks(), a_.total_blocks());
    EXPECT_EQ(a_.check(), "");
  }

 private:
  static constexpr int32_t kBlocks = 64;
  static constexpr int32_t kSequences = 8;
  static constexpr int32_t kVocab = 2;  // so that prefixes collide often

  int32_t pick(int32_t lo, int32_t hi) {
    return std::uniform_int_distribution<int32_t>(lo, hi)(rng_);
  }

  Tokens& tokens(int32_t seq) { return tokens_[static_cast<size_t>(seq)]; }

  void append(int32_t seq) {
    const int64_t room = a_.room(seq);
    int32_t n = pick(0, 3 * kBlock);
    if (pick(0, 3) == 0) n = static_cast<int32_t>(room) + pick(0, 1);  // at the edge
    const int32_t before = a_.length(seq);
    const int64_t cached = a_.cached_blocks();
    Copies copies;
    const bool ok = a_.append(seq, n, copies);
    EXPECT_EQ(ok, n <= room) << "append " << n << " with room " << room;
    seen_.refused += !ok;
    seen_.copies += static_cast<int>(copies.size());
    seen_.evictions += a_.cached_blocks() < cached;
    if (!ok) {
      EXPECT_TRUE(copies.empty());
      EXPECT_EQ(a_.length(seq), before);
      return;
    }
    for (const KVAllocator::BlockCopy& c : copies) {
      std::copy_n(cache_.begin() + c.src * kBlock, kBlock, cache_.begin() + c.dst * kBlock);
    }
    for (int32_t p = before; p < before + n; ++p) {
      const int32_t t = pick(0, kVocab - 1);
      cache_[static_cast<size_t>(a_.slot(seq, p))] = t;
      tokens(seq).push_back(t);
    }
  }

  void truncate(int32_t seq) {
    const auto n = pick(0, static_cast<int32_t>(tokens(seq).size()) + 2);
    a_.truncate(seq, n);
    if (static_cast<size_t>(n) < tokens(seq).size()) tokens(seq).resize(static_cast<size_t>(n));
  }

  void release(int32_t seq) {
    a_.release(seq);
    tokens(seq).clear();
  }

  // Another sequence's tokens, now and then changed or extended.
  void attach(int32_t seq) {
    if (a_.length(seq) != 0) return;
    Tokens wanted = tokens(pick(0, kSequences - 1));
    if (!wanted.empty() && pick(0, 2) == 0)
      wanted[static_cast<size_t>(pick(0, static_cast<int32_t>(wanted.size()) - 1))] ^= 1;
    for (int32_t extra = pick(0, 2 * kBlock); extra > 0; --extra)
      wanted.push_back(pick(0, kVocab - 1));
    const int32_t max_positions = pick(0, static_cast<int32_t>(wanted.size()));
    const int32_t got = a_.attach_prefix(seq, wanted, max_positions);
    EXPECT_LE(got, max_positions);
    EXPECT_EQ(a_.length(seq), got);
    seen_.partial_attaches += got % kBlock != 0;
    seen_.attached_blocks += static_cast<int>(a_.block_table(seq).size());
    tokens(seq).assign(wanted.begin(), wanted.begin() + got);
  }

  void publish(int32_t seq) {
    Tokens t = tokens(seq);
    for (int32_t extra = pick(0, 2); extra > 0; --extra) t.push_back(pick(0, kVocab - 1));
    a_.publish(seq, t);
  }

  void verify() {
    EXPECT_EQ(a_.check(), "");
    EXPECT_EQ(a_.used_blocks() + a_.free_blocks(), a_.total_blocks());
    for (int32_t seq = 0; seq < kSequences; ++seq) {
      const Tokens& t = tokens(seq);
      ASSERT_EQ(a_.length(seq), static_cast<int32_t>(t.size())) << "sequence " << seq;
      // One position more than room() is refused (and changes nothing).
      Copies copies;
      ASSERT_FALSE(a_.append(seq, static_cast<int32_t>(a_.room(seq)) + 1, copies))
          << "sequence " << seq;
      ASSERT_TRUE(copies.empty());
      for (int32_t p = 0; p < a_.length(seq); ++p) {
        ASSERT_EQ(cache_[static_cast<size_t>(a_.slot(seq, p))], t[static_cast<size_t>(p)])
            << "sequence " << seq << " position " << p;
      }
    }
  }

  struct Seen {
    int refused = 0;
    int copies = 0;
    int evictions = 0;
    int partial_attaches = 0;
    int attached_blocks = 0;
  };

  std::mt19937 rng_;
  Seen seen_;
  KVAllocator a_;
  std::vector<int32_t> cache_;
  std::vector<Tokens> tokens_;
};

TEST(KVAllocatorRandom, EveryPositionReadsBackItsToken) {
  for (uint32_t seed : {1u, 2u, 3u, 4u}) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    RandomAllocator(seed).run(20000);
    if (::testing::Test::HasFailure()) return;
  }
}

}  // namespace
}  // namespace duet
