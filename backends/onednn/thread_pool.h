// thread_pool.h — a small persistent pool: `threads - 1` workers plus the
// calling thread, for the fork-join loops of the onednn backend.
//
// Decode runs a few hundred parallel loops per token, each only tens of
// microseconds long, so a loop must start in well under a microsecond: the
// workers spin on a generation counter for a while after each loop and only
// then sleep on a condition variable. Between requests they sleep and use no
// CPU.
//
// oneDNN is built with OpenMP here (DNNL_CPU_RUNTIME_OMP). Every thread of the
// pool — the caller included, while it runs a loop — asks OpenMP for one
// thread, so a oneDNN call made inside a loop runs on that thread alone and
// no OpenMP team ever competes with the pool for the cores.
//
// Thread-safety: one thread drives a pool at a time; loops do not nest.
#pragma once

#include <algorithm>
#include <atomic>
#include <cassert>
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <mutex>
#include <thread>
#include <vector>

namespace duet::onednn {

class ThreadPool {
 public:
  // Starts threads - 1 workers. REQUIRES: threads ≥ 1.
  explicit ThreadPool(int threads);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int threads() const { return static_cast<int>(workers_.size()) + 1; }

  // Runs fn(t) once for every t in [0, threads()) — t = 0 on the calling
  // thread — and returns when all have returned. If any throws, the first
  // exception is rethrown here after all have finished.
  template <typename Fn>
  void run(const Fn& fn) {
    dispatch([](const void* f, int t) { (*static_cast<const Fn*>(f))(t); }, &fn);
  }

  // Splits [0, n) into threads() contiguous ranges whose boundaries are
  // multiples of `grain` (except n itself) and runs fn(begin, end, t) for
  // each non-empty one, t being the index of the thread that runs it.
  // REQUIRES: grain ≥ 1.
  template <typename Fn>
  void parallel_for(int64_t n, int64_t grain, const Fn& fn) {
    const int64_t chunks = (n + grain - 1) / grain;
    const int64_t parts = std::min<int64_t>(threads(), chunks);
    if (parts <= 1) {
      if (n > 0) {
        enter_caller();
        fn(int64_t{0}, n, 0);
      }
      return;
    }
    run([&](int t) {
      if (t >= parts) return;
      const Span s = share(n, grain, parts, t);
      if (s.begin < s.end) fn(s.begin, s.end, t);
    });
  }

  // Like parallel_for, but a thread that finishes its own range early
  // helps the others: each thread claims its range `chunk` elements at a
  // time from the front, and when it is through, claims chunks of the other
  // ranges from their back. So fn(begin, end, t) runs once per chunk, on
  // whichever thread claimed it, every chunk starting on the grain; each
  // range's owner still reads it front to back without gaps (the streaming
  // order of a memory-bound loop), and a core that runs slower — or is
  // preempted — on a shared machine no longer holds up the loop by its
  // whole share.
  // REQUIRES: grain ≥ 1, chunk a positive multiple of grain, n < 2^32.
  template <typename Fn>
  void parallel_for_shared(int64_t n, int64_t grain, int64_t chunk, const Fn& fn) {
    assert(grain >= 1 && chunk >= grain && chunk % grain == 0 && n < (int64_t{1} << 32));
    const int64_t chunks = (n + grain - 1) / grain;
    const int64_t parts = std::min<int64_t>(threads(), chunks);
    if (parts <= 1) {
      enter_caller();
      for (int64_t b = 0; b < n; b += chunk) fn(b, std::min(n, b + chunk), 0);
      return;
    }
    for (int64_t t = 0; t < parts; ++t)
      ranges_[static_cast<size_t>(t)].store(share(n, grain, parts, t));
    run([&](int t) {
      for (int64_t i = 0; i < parts; ++i) {
        Range& r = ranges_[static_cast<size_t>((t + i) % parts)];
        const bool own = i == 0 && t < parts;
        for (;;) {
          const Span s = own ? r.claim_front(chunk) : r.claim_back(chunk, grain);
          if (s.begin >= s.end) break;
          fn(s.begin, s.end, t);
        }
      }
    });
  }

  // Runs fn(i, t) for every i in [0, n), handing tasks to threads as they
  // become free (for tasks of uneven cost); t is the running thread's index.
  template <typename Fn>
  void parallel_tasks(int64_t n, const Fn& fn) {
    if (n <= 1 || threads() == 1) {
      enter_caller();
      for (int64_t i = 0; i < n; ++i) fn(i, 0);
      return;
    }
    std::atomic<int64_t> next{0};
    run([&](int t) {
      for (int64_t i = next.fetch_add(1, std::memory_order_relaxed); i < n;
           i = next.fetch_add(1, std::memory_order_relaxed)) {
        fn(i, t);
      }
    });
  }

 private:
  using Job = void (*)(const void* fn, int thread);

  // Asks OpenMP for one thread on the calling thread (once per thread).
  static void enter_caller();
  void dispatch(Job job, const void* fn);
  // Starts the next generation and wakes sleeping workers.
  void publish();
  void worker_loop(int thread);
  void call(int thread) noexcept;

  // parallel_for_shared's ranges: the elements [begin, end) not claimed
  // yet, both packed in one atomic word, so that the owner taking from the
  // front and a helper taking from the back never claim the same element.
  // Each on its own cache line: claiming in one's own range stays local
  // until another thread comes to help.
  struct Span {
    int64_t begin = 0;
    int64_t end = 0;
  };
  // Part t of [0, n) cut into `parts` contiguous ranges on the grain.
  static Span share(int64_t n, int64_t grain, int64_t parts, int64_t t) {
    const int64_t chunks = (n + grain - 1) / grain;
    return {std::min(n, chunks * t / parts * grain), std::min(n, chunks * (t + 1) / parts * grain)};
  }
  class alignas(64) Range {
   public:
    void store(Span s) { word_.store(pack(s), std::memory_order_relaxed); }
    // Claims up to `chunk` elements from the front; empty when none are left.
    Span claim_front(int64_t chunk) {
      uint64_t w = word_.load(std::memory_order_relaxed);
      for (;;) {
        const Span s = unpack(w);
        if (s.begin >= s.end) return {};
        const Span taken{s.begin, std::min(s.end, s.begin + chunk)};
        if (word_.compare_exchange_weak(w, pack({taken.end, s.end}), std::memory_order_relaxed)) {
          return taken;
        }
      }
    }
    // Claims the last chunk that starts on the grain (up to `chunk`
    // elements, fewer at a range end that is not on the grain).
    Span claim_back(int64_t chunk, int64_t grain) {
      uint64_t w = word_.load(std::memory_order_relaxed);
      for (;;) {
        const Span s = unpack(w);
        if (s.begin >= s.end) return {};
        const int64_t start = std::max(s.begin, (s.end + grain - 1) / grain * grain - chunk);
        if (word_.compare_exchange_weak(w, pack({s.begin, start}), std::memory_order_relaxed)) {
          return {start, s.end};
        }
      }
    }

   private:
    static uint64_t pack(Span s) {
      return static_cast<uint64_t>(s.begin) << 32 | static_cast<uint64_t>(s.end);
    }
    static Span unpack(uint64_t w) {
      return {static_cast<int64_t>(w >> 32), static_cast<int64_t>(w & 0xffffffffu)};
    }
    std::atomic<uint64_t> word_{0};
  };

  std::vector<std::thread> workers_;
  std::vector<Range> ranges_;
  // Bumped once per loop; workers wait for it to change.
  std::atomic<uint32_t> generation_{0};
  // Workers still running the current loop.
  std::atomic<int> pending_{0};
  std::atomic<bool> stop_{false};
  // Workers asleep, or about to be, on wake_; guarded by sleep_mutex_ for
  // the waiting itself.
  std::atomic<int> sleepers_{0};
  std::mutex sleep_mutex_;
  std::condition_variable wake_;
  Job job_ = nullptr;
  const void* fn_ = nullptr;
  std::mutex error_mutex_;
  std::exception_ptr error_;
};

}  // namespace duet::onednn
