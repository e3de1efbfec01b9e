// Window rings (core/src/kv/window_rings.h) and the KV allocator that hands
// them out: geometry, room, misuse, and random runs of growing, rolled-back
// and released sequences against a simulated ring cache whose slots record
// the (sequence, position) written into them, checking that every row finds
// each position of its window where it was written.
#include "kv/window_rings.h"

#include <gtest/gtest.h>

#include <limits>
#include <map>
#include <random>
#include <utility>
#include <vector>

#include "duet/error.h"
#include "engine/step_rows.h"
#include "kv/kv_allocator.h"

namespace duet {
namespace {

TEST(WindowRings, GeometryIsTwiceTheWindowAndAPoolNoLargerThanTheCache) {
  const WindowRingGeometry gemma = window_ring_geometry(512, 16, 32768, 16);
  EXPECT_EQ(gemma.ring_tokens, 1024);
  EXPECT_EQ(gemma.block_tokens, 16);
  EXPECT_EQ(gemma.pool_tokens, 16 * 1024);
  EXPECT_EQ(window_ring_geometry(512, 16, 4096, 16).pool_tokens, 4096);
  EXPECT_EQ(window_ring_geometry(512, 1, 4096, 16).pool_tokens, 1024);
  // The full cache's blocks up to 64 slots, else 16 (a cache of one block).
  EXPECT_EQ(window_ring_geometry(512, 1, 4096, 64).block_tokens, 64);
  EXPECT_EQ(window_ring_geometry(512, 1, 4096, 4).block_tokens, 4);
  EXPECT_EQ(window_ring_geometry(512, 1, 4096, 4096).block_tokens, 16);
  // Rounded up to whole blocks: the ring and a capacity not a multiple of 16.
  EXPECT_EQ(window_ring_geometry(5, 4, 1000, 1000).ring_tokens, 16);
  EXPECT_EQ(window_ring_geometry(100, 64, 1000, 1000).pool_tokens, 1008);
  EXPECT_EQ(window_ring_geometry(100, 64, 1000, 40).ring_tokens, 200);
  EXPECT_EQ(window_ring_geometry(100, 64, 1000, 40).pool_tokens, 1000);
  EXPECT_EQ(WindowRings(window_ring_geometry(512, 1, 4096, 16)).max_step_rows(), 513);
  EXPECT_THROW(window_ring_geometry(0, 1, 16, 16), Error);
  EXPECT_THROW(WindowRings(WindowRingGeometry{40, 32, 16, 64}), Error);  // window past the ring
  EXPECT_THROW(WindowRings(WindowRingGeometry{8, 24, 16, 64}), Error);   // block splits the ring
}

TEST(WindowRings, ASequenceTakesBlocksAsItGrowsUpToItsRingAndGivesThemBack) {
  WindowRings r(WindowRingGeometry{8, 16, 4, 40});  // rings of 4 blocks, 10 in the pool
  EXPECT_TRUE(r.grow(0, 5));
  EXPECT_EQ(r.free_blocks(), 8);
  EXPECT_TRUE(r.grow(0, 1000));  // a whole ring serves any length
  EXPECT_EQ(r.free_blocks(), 6);
  EXPECT_EQ(r.room(0, 1000), std::numeric_limits<int64_t>::max());
  EXPECT_EQ(r.slot(0, 17), r.slot(0, 1));  // 16 slots: position p at p mod 16
  EXPECT_NE(r.slot(0, 15), r.slot(0, 16));
  EXPECT_TRUE(r.grow(1, 16));
  EXPECT_EQ(r.free_blocks(), 2);
  // Two blocks left: a third sequence can reach 8 positions, not a whole ring.
  EXPECT_EQ(r.room(2, 0), 8);
  EXPECT_FALSE(r.grow(2, 9));
  EXPECT_EQ(r.free_blocks(), 2);  // nothing taken
  r.release(0);
  EXPECT_EQ(r.free_blocks(), 6);
  EXPECT_EQ(r.room(2, 0), std::numeric_limits<int64_t>::max());
  EXPECT_EQ(r.check(), "");
  EXPECT_THROW(r.slot(2, 0), Error);  // no ring yet
}

TEST(WindowRings, AStepOfMoreRowsThanTheRingHoldsBesideTheWindowIsMisuse) {
  WindowRings r(WindowRingGeometry{8, 16, 4, 64});
  ASSERT_TRUE(r.grow(0, 20));
  StepBatch step;
  step.n_tokens = 10;  // max_step_rows() is 9
  for (int32_t p = 10; p < 20; ++p) {
    step.positions.push_back(p);
    step.slot_mapping.push_back(p);
  }
  step.sequences.push_back(SequenceStep{0, 0, 10, 20, {}});
  StepBatch out;
  EXPECT_THROW(r.map_step(step, out), Error);
  step.sequences[0].context_len = 21;
  step.sequences[0].n_tokens = 9;
  step.sequences[0].first_token = 1;
  EXPECT_NO_THROW(r.map_step(step, out));
  EXPECT_EQ(out.sequences[0].block_table.size(), 6u);  // virtual: ceil(21 / 4)
  EXPECT_EQ(out.sequences[0].block_table[4], out.sequences[0].block_table[0]);
}

TEST(KVAllocatorRings, RoomCountsTheRingPoolAndNoPrefixIsShared) {
  // 64 full slots in blocks of 4; window 8, rings of 16 slots, a pool of 24.
  KVAllocator a(64, 4, WindowRingGeometry{8, 16, 4, 24});
  EXPECT_EQ(a.max_step_rows(), 9);
  EXPECT_EQ(a.room(0), 64);
  ASSERT_TRUE(a.append(0, 9));
  ASSERT_TRUE(a.append(0, 9));  // its ring is whole: 4 of the 6 pool blocks
  // The full cache has 44 slots left, but a new sequence's ring only 8.
  EXPECT_EQ(a.room(1), 8);
  EXPECT_FALSE(a.append(1, 9));
  EXPECT_EQ(a.length(1), 0);
  ASSERT_TRUE(a.append(1, 8));
  EXPECT_EQ(a.room(1), 0);
  a.release(0);
  EXPECT_EQ(a.room(1), 64 - 8);
  EXPECT_EQ(a.check(), "");
  // Published nothing, so a later identical prompt attaches nothing.
  const std::vector<int32_t> tokens(8, 7);
  a.publish(1, tokens);
  a.release(1);
  EXPECT_EQ(a.attach_prefix(2, tokens, 8), 0);
  EXPECT_EQ(a.cached_blocks(), 0);
}

TEST(KVAllocatorRings, RollingBackMoreThanAStepsRowsIsMisuse) {
  KVAllocator a(64, 4, WindowRingGeometry{8, 16, 4, 32});
  ASSERT_TRUE(a.append(0, 9));
  ASSERT_TRUE(a.append(0, 9));
  EXPECT_NO_THROW(a.truncate(0, 10));  // 8 dropped: at most max_step_rows() - 1
  EXPECT_THROW(a.truncate(0, 1), Error);
  EXPECT_EQ(a.length(0), 10);
  EXPECT_NO_THROW(a.truncate(0, 0));  // a release
  EXPECT_EQ(a.check(), "");
}

// Random steps of several sequences: each appends up to max_step_rows()
// rows (sometimes rolling back some of them, as rejected drafts), and every
// row must find each position of its window in the slot its sequence wrote
// it to, through the mapped step's block table.
TEST(KVAllocatorRings, EveryRowFindsItsWholeWindowInRandomRuns) {
  constexpr int32_t kWindow = 11;
  const WindowRingGeometry g = window_ring_geometry(kWindow, 3, 400, 8);
  KVAllocator a(400, 8, g);
  const int32_t block = g.block_tokens;
  std::vector<std::pair<int32_t, int32_t>> slots(static_cast<size_t>(g.pool_tokens), {-1, -1});
  std::mt19937 rng(7);
  std::map<int32_t, int32_t> live;  // sequence -> steps left
  int32_t next = 0;
  for (int step_no = 0; step_no < 400; ++step_no) {
    while (live.size() < 3) live[next++] = 2 + static_cast<int32_t>(rng() % 30);
    StepBatch step;
    for (auto& [seq, left] : live) {
      const int32_t rows =
          1 + static_cast<int32_t>(rng() % static_cast<uint32_t>(a.max_step_rows()));
      if (!a.append(seq, rows)) continue;
      add_sequence_rows(step, a, seq, rows);
    }
    StepBatch mapped;
    a.window_rings()->map_step(step, mapped);
    // Every row is written before any is read, as attention does.
    for (int32_t i = 0; i < step.n_tokens; ++i) {
      int32_t seq = -1;
      for (const SequenceStep& s : step.sequences)
        if (i >= s.first_token && i < s.first_token + s.n_tokens) seq = s.seq_id;
      slots[static_cast<size_t>(mapped.slot_mapping[static_cast<size_t>(i)])] = {
          seq, step.positions[static_cast<size_t>(i)]};
    }
    for (const SequenceStep& s : mapped.sequences) {
      for (int32_t i = s.first_token; i < s.first_token + s.n_tokens; ++i) {
        const int32_t p = step.positions[static_cast<size_t>(i)];
        for (int32_t q = std::max(0, p - kWindow + 1); q <= p; ++q) {
          const int32_t slot = s.block_table[static_cast<size_t>(q / block)] * block + q % block;
          ASSERT_EQ(slots[static_cast<size_t>(slot)], std::make_pair(s.seq_id, q))
              << "step " << step_no << ", sequence " << s.seq_id << ", row at " << p;
        }
      }
    }
    for (auto it = live.begin(); it != live.end();) {
      const int32_t seq = it->first;
      const SequenceStep* ran = nullptr;
      for (const SequenceStep& s : step.sequences)
        if (s.seq_id == seq) ran = &s;
      // Roll back part of what this step ran, as rejected drafts are.
      if (ran != nullptr && ran->n_tokens > 1 && rng() % 3 == 0)
        a.truncate(seq, a.length(seq) -
                            static_cast<int32_t>(rng() % static_cast<uint32_t>(ran->n_tokens)));
      if (--it->second == 0) {
        a.release(seq);
        it = live.erase(it);
      } else {
        ++it;
      }
    }
    ASSERT_EQ(a.check(), "") << "step " << step_no;
  }
}

}  // namespace
}  // namespace duet
