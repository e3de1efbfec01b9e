#include "serve_engine.h"

#include <algorithm>
#include <iostream>
#include <string>

namespace duet::serve {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_between(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

}  // namespace

ServeEngine::ServeEngine(Pipeline& pipeline, int32_t max_sequences, ServeMetrics& metrics)
    : metrics_(metrics),
      scheduler_(pipeline),
      max_sequences_(max_sequences),
      moves_kv_(pipeline.check().placements.size() > 1) {
  publish_gauges();
  thread_ = std::thread([this] { loop(); });
}

ServeEngine::~ServeEngine() {
  {
    std::lock_guard lock(mutex_);
    quit_ = true;
  }
  wake_.notify_one();
  thread_.join();
}

uint64_t ServeEngine::enqueue(Job job) {
  uint64_t id = 0;
  {
    std::lock_guard lock(mutex_);
    id = next_id_++;
    inbox_.push_back(Queued{id, std::move(job), Clock::now()});
  }
  wake_.notify_one();
  return id;
}

void ServeEngine::cancel(uint64_t id) {
  {
    std::lock_guard lock(mutex_);
    cancels_.push_back(id);
  }
  wake_.notify_one();
}

int64_t ServeEngine::waiting() const {
  std::lock_guard lock(mutex_);
  return waiting_locked();
}

int64_t ServeEngine::waiting_locked() const {
  return static_cast<int64_t>(inbox_.size()) + admitting_ + scheduler_waiting_;
}

int64_t ServeEngine::queued() const {
  std::lock_guard lock(mutex_);
  return std::max<int64_t>(0, waiting_locked() - free_places_);
}

bool ServeEngine::healthy() const { return healthy_.load(); }

void ServeEngine::shut_down(Clock::time_point deadline, std::function<void()> drained) {
  {
    std::lock_guard lock(mutex_);
    if (stopping_) return;
    stopping_ = true;
    deadline_ = deadline;
    drained_ = std::move(drained);
  }
  wake_.notify_one();
}

void ServeEngine::loop() {
  while (true) {
    std::deque<Queued> arrivals;
    std::vector<uint64_t> cancels;
    bool stopping = false;
    Clock::time_point deadline;
    {
      std::unique_lock lock(mutex_);
      wake_.wait(lock, [this] {
        return quit_ || !inbox_.empty() || !cancels_.empty() || !live_.empty() ||
               (stopping_ && !drained_called_);
      });
      if (quit_) break;
      arrivals.swap(inbox_);
      admitting_ = static_cast<int64_t>(arrivals.size());
      cancels.swap(cancels_);
      stopping = stopping_;
      deadline = deadline_;
    }
    for (Queued& q : arrivals) admit(std::move(q));
    if (!arrivals.empty()) count_places();
    for (uint64_t id : cancels) {
      if (const auto it = live_.find(id); it != live_.end()) scheduler_.cancel(it->second.handle);
    }
    if (stopping && Clock::now() >= deadline) cancel_all();
    step();
    if (stopping && live_.empty()) {
      std::function<void()> drained;
      {
        std::lock_guard lock(mutex_);
        if (inbox_.empty() && !drained_called_) {
          drained_called_ = true;
          drained = std::move(drained_);
        }
      }
      if (drained) drained();
    }
  }
  cancel_all();
  deliver_finished();
}

void ServeEngine::admit(Queued q) {
  Job& job = q.job;
  try {
    if (!healthy_) {
      throw Error(ErrorKind::kInternal,
                  "the server stopped generating after an error (see its log); restart it");
    }
    Request request;
    request.id = std::to_string(q.id);
    request.prompt = job.tokenize();
    request.settings = job.settings;
    Live live;
    live.listener = job.listener;
    live.sink = std::make_unique<PendingText>();
    live.arrived = q.arrived;
    request.sink = live.sink.get();
    live.handle = scheduler_.submit(std::move(request));
    live_.emplace(q.id, std::move(live));
  } catch (const Error& e) {
    job.listener->on_refused(e, job.settings);
  } catch (const std::exception& e) {
    job.listener->on_refused(Error(ErrorKind::kInternal, e.what()), job.settings);
  }
}

void ServeEngine::step() {
  try {
    scheduler_.step();
  } catch (const std::exception& e) {
    std::cerr << "duet serve: error: a forward pass failed, every request ends: " << e.what()
              << "\n";
    healthy_ = false;
    cancel_all();
  }
  observe_tokens();
  // Gauges and counters first: a client that reads /metrics after its
  // answer sees the state the answer left.
  publish_gauges();
  deliver_finished();
}

void ServeEngine::observe(Live& live, int32_t count) {
  if (count <= live.tokens) return;
  const Clock::time_point now = Clock::now();
  if (live.tokens == 0) {
    metrics_.observe_first_token(seconds_between(live.arrived, now));
  } else {
    const double each = seconds_between(live.last_token, now) / (count - live.tokens);
    for (int32_t i = live.tokens; i < count; ++i) metrics_.observe_inter_token(each);
  }
  live.tokens = count;
  live.last_token = now;
}

void ServeEngine::forward(Live& live, std::span<const TokenLogprobs> all) {
  const std::string text = live.sink->take();
  const std::span<const TokenLogprobs> fresh =
      all.subspan(std::min(live.logprobs_sent, all.size()));
  if (text.empty() && fresh.empty()) return;
  live.logprobs_sent += fresh.size();
  live.listener->on_tokens(text, fresh);
}

void ServeEngine::observe_tokens() {
  for (auto& [id, live] : live_) {
    if (const std::optional<int32_t> n = scheduler_.generated_tokens(live.handle)) {
      observe(live, *n);
      forward(live, scheduler_.logprobs(live.handle));
    }
  }
}

void ServeEngine::deliver_finished() {
  for (RequestResult& r : scheduler_.take_finished()) {
    const auto it = live_.find(std::stoull(r.id));
    if (it == live_.end()) continue;
    observe(it->second, static_cast<int32_t>(r.generated_tokens.size()));
    forward(it->second, r.logprobs);
    metrics_.count_finished(finish_reason_name(r.finish),
                            static_cast<int64_t>(r.prompt_tokens.size()),
                            static_cast<int64_t>(r.generated_tokens.size()));
    if (moves_kv_) metrics_.observe_kv_move(r.kv_moved_bytes, r.kv_move_seconds);
    it->second.listener->on_finished(r);
    live_.erase(it);
  }
}

void ServeEngine::cancel_all() {
  for (const auto& [id, live] : live_) scheduler_.cancel(live.handle);
}

void ServeEngine::count_places() {
  std::lock_guard lock(mutex_);
  admitting_ = 0;
  scheduler_waiting_ = static_cast<int64_t>(scheduler_.waiting());
  free_places_ = max_sequences_ - static_cast<int64_t>(scheduler_.running());
}

void ServeEngine::publish_gauges() {
  count_places();
  EngineGauges g;
  g.waiting = waiting();
  g.running = static_cast<int64_t>(scheduler_.running());
  g.kv_blocks_total = scheduler_.total_blocks();
  g.kv_blocks_used = scheduler_.used_blocks();
  g.kv_blocks_cached = scheduler_.cached_blocks();
  metrics_.set_gauges(g);
}

}  // namespace duet::serve
