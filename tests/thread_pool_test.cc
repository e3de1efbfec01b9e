// The onednn backend's ThreadPool (backends/onednn/thread_pool.h):
// parallel_for_shared runs every element exactly once, in chunks that start
// on the grain, and a thread done with its own range takes chunks from the
// back of a range whose thread is held up.
#include "thread_pool.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <thread>
#include <vector>

namespace duet::onednn {
namespace {

TEST(ThreadPool, ParallelForSharedRunsEveryElementOnceInChunksOnTheGrain) {
  for (int threads : {1, 2, 3, 4}) {
    ThreadPool pool(threads);
    for (int64_t n : {0, 1, 15, 16, 17, 100, 1000, 4097}) {
      for (int64_t grain : {1, 16}) {
        for (int64_t chunk : {grain, 4 * grain}) {
          std::vector<std::atomic<int>> runs(static_cast<size_t>(n));
          std::atomic<bool> bad_range{false};
          pool.parallel_for_shared(n, grain, chunk, [&](int64_t begin, int64_t end, int t) {
            if (begin % grain != 0 || begin >= end || end > n || end - begin > chunk || t < 0 ||
                t >= threads) {
              bad_range = true;
            }
            for (int64_t i = begin; i < end; ++i) runs[static_cast<size_t>(i)].fetch_add(1);
          });
          EXPECT_FALSE(bad_range) << "threads " << threads << " n " << n << " grain " << grain;
          for (int64_t i = 0; i < n; ++i) {
            ASSERT_EQ(runs[static_cast<size_t>(i)].load(), 1)
                << "element " << i << " threads " << threads << " n " << n << " grain " << grain
                << " chunk " << chunk;
          }
        }
      }
    }
  }
}

TEST(ThreadPool, ParallelForSharedLetsAFreeThreadTakeAHeldUpThreadsChunks) {
  ThreadPool pool(2);
  constexpr int64_t kN = 1024, kChunk = 64;  // range of thread 1: [512, 1024)
  std::vector<int> ran_on(kN, -1);
  std::atomic<bool> held{false};
  pool.parallel_for_shared(kN, 16, kChunk, [&](int64_t begin, int64_t end, int t) {
    // Thread 1 stalls in its first chunk long enough for thread 0 to finish
    // its own range and go on with thread 1's.
    if (t == 1 && !held.exchange(true)) std::this_thread::sleep_for(std::chrono::milliseconds(300));
    for (int64_t i = begin; i < end; ++i) ran_on[static_cast<size_t>(i)] = t;
  });
  int64_t taken = 0;
  for (int64_t i = kN / 2; i < kN; ++i) taken += ran_on[static_cast<size_t>(i)] == 0;
  EXPECT_GE(taken, kChunk) << "thread 0 took none of the held-up thread's chunks";
  // It took them from the back: the owner's part stays one run from the front.
  EXPECT_EQ(ran_on[kN - 1], 0);
  int64_t i = kN / 2;
  while (i < kN && ran_on[static_cast<size_t>(i)] == 1) ++i;
  while (i < kN && ran_on[static_cast<size_t>(i)] == 0) ++i;
  EXPECT_EQ(i, kN) << "thread 1's chunks are not one run from the front of its range";
}

}  // namespace
}  // namespace duet::onednn
