// serve_engine.h — the thread that runs the batching scheduler for
// `duet serve`: jobs come in from any thread, one thread tokenizes them,
// submits them and steps every running sequence, and each job's text and
// result go back through its listener. All use of the pipeline happens on
// that thread.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <span>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include "duet/app/pipeline.h"
#include "duet/app/scheduler.h"
#include "duet/error.h"
#include "serve_metrics.h"

namespace duet::serve {

// Where a job's events go. Called on the engine thread, in this order:
// on_tokens any number of times, then exactly one of on_finished and
// on_refused. An implementation hands the events to its own thread.
class JobListener {
 public:
  virtual ~JobListener() = default;
  // After a step that released text or (with RequestSettings::top_logprobs)
  // generated tokens: the text since the previous call and the
  // log-probabilities of the tokens since then (one call may carry a
  // token's entry before its text, which the stop strings held back).
  // Together the calls carry the result's whole text and logprobs.
  virtual void on_tokens(std::string_view text, std::span<const TokenLogprobs> logprobs) = 0;
  virtual void on_finished(const RequestResult& result) = 0;
  // The job never ran: its tokenizer or Scheduler::submit threw `error`
  // (kInputRejected or kConfig for the request; another exception arrives
  // as kInternal), with `settings` as submitted.
  virtual void on_refused(const Error& error, const RequestSettings& settings) = 0;
};

struct Job {
  // Makes the prompt's token ids; runs on the engine thread. Throws
  // duet::Error(kInputRejected) for a prompt it refuses.
  std::function<std::vector<int32_t>()> tokenize;
  RequestSettings settings;
  std::shared_ptr<JobListener> listener;
};

class ServeEngine {
 public:
  // Makes the scheduler (throws kConfig when `pipeline` cannot batch) and
  // starts the thread. `max_sequences` is the pipeline's
  // batching.max_sequences. `pipeline` and `metrics` must outlive the engine.
  ServeEngine(Pipeline& pipeline, int32_t max_sequences, ServeMetrics& metrics);
  // Cancels whatever still runs, then joins the thread.
  ~ServeEngine();
  ServeEngine(const ServeEngine&) = delete;
  ServeEngine& operator=(const ServeEngine&) = delete;

  // Queues `job`; returns its id for cancel(). Thread-safe.
  uint64_t enqueue(Job job);
  // Ends job `id` (its listener gets on_finished with kCancelled, or nothing
  // when it already finished). Thread-safe.
  void cancel(uint64_t id);
  // Jobs accepted and not yet running (queued, tokenizing or waiting in the
  // scheduler). Thread-safe.
  int64_t waiting() const;
  // Of those, the ones that will wait for a place: beyond the places the
  // running batch had free after the latest step (batching.max_sequences
  // less the sequences running). A burst that fits the batch queues for
  // nothing. Thread-safe.
  int64_t queued() const;
  // False once a step failed (an error from the backend, printed on
  // stderr): every job then ended, and later ones are refused with
  // kInternal. Thread-safe.
  bool healthy() const;
  // From now on: refuse nothing already queued, let jobs run until
  // `deadline`, then cancel those left; `drained` runs on the engine thread
  // once none is left. Thread-safe; the first call counts.
  void shut_down(std::chrono::steady_clock::time_point deadline, std::function<void()> drained);

 private:
  // Keeps the text the scheduler emits for one job until the step ends.
  class PendingText final : public TextSink {
   public:
    void on_text(std::string_view text) override { text_ += text; }
    std::string take() { return std::exchange(text_, {}); }

   private:
    std::string text_;
  };

  struct Live {
    uint64_t handle = 0;  // the scheduler's
    std::shared_ptr<JobListener> listener;
    std::unique_ptr<PendingText> sink;  // the text since on_tokens last ran
    size_t logprobs_sent = 0;
    std::chrono::steady_clock::time_point arrived;
    std::chrono::steady_clock::time_point last_token;
    int32_t tokens = 0;
  };
  struct Queued {
    uint64_t id = 0;
    Job job;
    std::chrono::steady_clock::time_point arrived;
  };

  void loop();
  // Hands `live` its text and the log-probabilities past the ones sent,
  // of `all` it has now.
  static void forward(Live& live, std::span<const TokenLogprobs> all);
  void admit(Queued queued);
  void step();
  // Times the tokens `live` has now (`count` in all) in the histograms.
  void observe(Live& live, int32_t count);
  void observe_tokens();
  void deliver_finished();
  void cancel_all();
  // Moves the jobs just admitted from admitting_ to the scheduler's counts,
  // in one step under mutex_, so waiting() never misses a job in between.
  void count_places();
  void publish_gauges();
  int64_t waiting_locked() const;  // mutex_ held

  ServeMetrics& metrics_;
  Scheduler scheduler_;
  mutable std::mutex mutex_;
  std::condition_variable wake_;
  std::deque<Queued> inbox_;
  std::vector<uint64_t> cancels_;
  uint64_t next_id_ = 1;
  bool stopping_ = false;
  bool quit_ = false;  // the destructor: cancel all and end the thread
  std::chrono::steady_clock::time_point deadline_;
  std::function<void()> drained_;
  bool drained_called_ = false;
  // Guarded by mutex_: jobs taken from inbox_ and not yet submitted, and
  // the scheduler's waiting jobs and free places as of count_places().
  int64_t admitting_ = 0;
  int64_t scheduler_waiting_ = 0;
  int64_t free_places_ = 0;
  const int64_t max_sequences_;
  const bool moves_kv_;  // the pipeline places its stages on several backends
  std::atomic<bool> healthy_{true};
  // Engine thread only. Request::id is the job id in decimal.
  std::map<uint64_t, Live> live_;  // by job id
  std::thread thread_;
};

}  // namespace duet::serve
