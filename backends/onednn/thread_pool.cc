#include "thread_pool.h"

#include <oneapi/dnnl/dnnl_config.h>

#include <utility>

#if DNNL_CPU_THREADING_RUNTIME == DNNL_RUNTIME_OMP
#include <omp.h>
#endif

namespace duet::onednn {
namespace {

// About 50-100 µs of polling: longer than the serial work between two loops
// of a decode step, far shorter than the gap between requests.
constexpr int kSpinIterations = 1 << 11;

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#endif
}

// oneDNN's OpenMP runtime sizes each parallel region by the calling thread's
// nthreads ICV; one thread keeps oneDNN inside the pool's thread.
void limit_openmp_to_this_thread() {
#if DNNL_CPU_THREADING_RUNTIME == DNNL_RUNTIME_OMP
  omp_set_num_threads(1);
#endif
}

}  // namespace

ThreadPool::ThreadPool(int threads) : ranges_(static_cast<size_t>(threads)) {
  workers_.reserve(static_cast<size_t>(threads - 1));
  for (int t = 1; t < threads; ++t) workers_.emplace_back([this, t] { worker_loop(t); });
}

ThreadPool::~ThreadPool() {
  stop_.store(true, std::memory_order_relaxed);
  publish();
  for (auto& w : workers_) w.join();
}

// A worker counts itself in sleepers_ before it checks the generation one
// last time, and publish() bumps the generation before it reads sleepers_;
// both sequentially consistent, so either the worker sees the new
// generation or publish() sees the sleeper and wakes it.
void ThreadPool::publish() {
  generation_.fetch_add(1);
  if (sleepers_.load() != 0) {
    std::lock_guard<std::mutex> lock(sleep_mutex_);
    wake_.notify_all();
  }
}

void ThreadPool::enter_caller() {
  thread_local bool limited = false;
  if (!limited) {
    limit_openmp_to_this_thread();
    limited = true;
  }
}

void ThreadPool::call(int thread) noexcept {
  try {
    job_(fn_, thread);
  } catch (...) {
    std::lock_guard<std::mutex> lock(error_mutex_);
    if (!error_) error_ = std::current_exception();
  }
}

void ThreadPool::dispatch(Job job, const void* fn) {
  enter_caller();
  if (workers_.empty()) {
    job(fn, 0);
    return;
  }
  job_ = job;
  fn_ = fn;
  pending_.store(static_cast<int>(workers_.size()), std::memory_order_relaxed);
  publish();
  call(0);
  // A worker still running has been preempted or has more work; once the
  // spin budget is gone, yield so that on a busy machine it can run here.
  for (int i = 0; pending_.load(std::memory_order_acquire) != 0; ++i) {
    if (i < kSpinIterations) {
      cpu_relax();
    } else {
      std::this_thread::yield();
    }
  }
  if (error_) {
    std::exception_ptr e = std::exchange(error_, nullptr);
    std::rethrow_exception(e);
  }
}

void ThreadPool::worker_loop(int thread) {
  limit_openmp_to_this_thread();
  // Generation 0 is the one before any loop, even if this thread starts
  // after the first loop (or the destructor) has been published.
  uint32_t seen = 0;
  for (;;) {
    uint32_t now = seen;
    for (int i = 0; i < kSpinIterations && now == seen; ++i) {
      cpu_relax();
      now = generation_.load(std::memory_order_acquire);
    }
    if (now == seen) {
      std::unique_lock<std::mutex> lock(sleep_mutex_);
      sleepers_.fetch_add(1);
      wake_.wait(lock, [&] { return (now = generation_.load()) != seen; });
      sleepers_.fetch_sub(1);
    }
    seen = now;
    if (stop_.load(std::memory_order_relaxed)) return;
    call(thread);
    pending_.fetch_sub(1, std::memory_order_acq_rel);
  }
}

}  // namespace duet::onednn
