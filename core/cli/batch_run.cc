#include "batch_run.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <deque>
#include <fstream>
#include <iomanip>
#include <iostream>
#include <iterator>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>

#include "chat_messages.h"
#include "duet/app/chat_template.h"
#include "duet/app/gguf.h"
#include "duet/app/scheduler.h"
#include "duet/byte_size.h"
#include "duet/error.h"
#include "pipeline_loading.h"
#include "prompts_file.h"

namespace duet::cli {
namespace {

using nlohmann::json;
using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// Compact JSON; bytes that are not UTF-8 (a generation cut inside a
// character) become U+FFFD so that every line stays valid JSON.
std::string dump(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

json result_json(const json& id, const RequestResult& r) {
  return {{"id", id},
          {"text", r.text},
          {"token_ids", r.generated_tokens},
          {"prompt_tokens", r.prompt_tokens.size()},
          {"generated_tokens", r.generated_tokens.size()},
          {"finish_reason", finish_reason_name(r.finish)},
          {"cached_prompt_tokens", r.cached_prompt_tokens},
          {"preemptions", r.preemptions},
          {"kv_moved_bytes", r.kv_moved_bytes},
          {"kv_move_s", r.kv_move_seconds},
          {"queued_s", r.queued_seconds},
          {"first_token_s", r.first_token_seconds},
          {"total_s", r.total_seconds},
          {"decode_tokens_per_s", r.decode_tokens_per_second()}};
}

int64_t count_lines(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  int64_t lines = 0;
  bool open_line = false;
  for (std::istreambuf_iterator<char> it(in), end; it != end; ++it) {
    open_line = *it != '\n';
    lines += *it == '\n';
  }
  return lines + (open_line ? 1 : 0);
}

class BatchRun {
 public:
  BatchRun(Pipeline& pipeline, const PipelineConfig& config, std::string prompts_path,
           std::ostream& out)
      : pipeline_(pipeline),
        config_(config),
        path_(std::move(prompts_path)),
        out_(out),
        scheduler_(pipeline),
        progress_(isatty(STDERR_FILENO) != 0) {}

  int run() {
    std::ifstream in(path_, std::ios::binary);
    if (!in)
      throw Error(ErrorKind::kUsage,
                  "--prompts-file " + path_ + ": cannot open the file; check the path");
    total_lines_ = count_lines(path_);
    start_ = Clock::now();
    const auto max_waiting = static_cast<size_t>(config_.batching.max_sequences);
    int64_t line = 0;
    std::string text;
    bool more = true;
    while (true) {
      while (more && scheduler_.waiting() < max_waiting) {
        more = static_cast<bool>(std::getline(in, text));
        if (more) submit(text, ++line);
      }
      const bool stepped = scheduler_.step();
      collect();
      if (!stepped && !more) break;
      show_progress(false);
    }
    show_progress(true);
    print_summary();
    if (refused_ > 0) return static_cast<int>(ExitCode::kInputRejected);
    return failure_ ? static_cast<int>(exit_code_for(*failure_)) : 0;
  }

 private:
  void submit(const std::string& text, int64_t line) {
    if (text.find_first_not_of(" \t\r") == std::string::npos) return;  // blank lines are skipped
    ++requests_;
    order_.push_back(line);
    PromptLine request = read_prompt_line(text, line, config_.sampler.chain);
    if (request.error.empty()) {
      try {
        Request r;
        r.id = std::to_string(line);  // unique, unlike the ids a file may give
        r.prompt = request.prompt ? pipeline_.tokenize_prompt(*request.prompt)
                                  : serve::tokenize_messages(pipeline_.tokenizer(), chat_template(),
                                                             default_system(), request.messages);
        r.settings = std::move(request.settings);
        scheduler_.submit(std::move(r));
        ids_[line] = request.id;
        return;
      } catch (const Error& e) {
        if (e.kind() != ErrorKind::kInputRejected && e.kind() != ErrorKind::kConfig) throw;
        request.error = e.what();
      }
    }
    ++refused_;
    std::cerr << (progress_ ? "\r\x1b[K" : "") << path_ << ":" << line << ": " << request.error
              << "\n";
    done_[line] = {{"id", request.id}, {"line", line}, {"error", request.error}};
    flush();
  }

  // The model's chat template, read once, for lines with messages.
  const ChatTemplate& chat_template() {
    if (!chat_) {
      chat_ =
          ChatTemplate::from_model(GgufFile::open(config_.model.path), config_.model.chat_template);
    }
    return *chat_;
  }

  std::optional<std::string> default_system() const {
    if (config_.model.system_prompt.empty()) return std::nullopt;
    return config_.model.system_prompt;
  }

  void collect() {
    for (RequestResult& r : scheduler_.take_finished()) {
      const int64_t line = std::stoll(r.id);
      done_[line] = result_json(ids_.at(line), r);
      if (r.finish == FinishReason::kFailed) {  // its sampler chain threw; the others run on
        std::cerr << (progress_ ? "\r\x1b[K" : "") << path_ << ":" << line << ": " << r.error
                  << "\n";
        done_[line]["error"] = r.error;
        if (!failure_) failure_ = r.error_kind;
      }
      ids_.erase(line);
      prompt_in_ += static_cast<int64_t>(r.prompt_tokens.size());
      generated_ += static_cast<int64_t>(r.generated_tokens.size());
      ++finished_;
    }
    flush();
  }

  // Writes the results at the head of the file's order that are done.
  void flush() {
    while (!order_.empty()) {
      const auto it = done_.find(order_.front());
      if (it == done_.end()) break;
      out_ << dump(it->second) << "\n";
      done_.erase(it);
      order_.pop_front();
    }
    out_.flush();
  }

  void show_progress(bool last) {
    if (!progress_) return;
    const auto now = Clock::now();
    if (!last && now - last_progress_ < std::chrono::seconds(1)) return;
    last_progress_ = now;
    const double wall = seconds_since(start_);
    std::cerr << "\r\x1b[Kduet run: " << finished_ + refused_ << "/" << requests_ << " done ("
              << total_lines_ << " lines), " << scheduler_.running() << " running, "
              << scheduler_.waiting() << " waiting, " << std::fixed << std::setprecision(1)
              << (wall > 0 ? static_cast<double>(generated_) / wall : 0.0) << " tok/s"
              << (last ? "\n" : "") << std::flush;
  }

  void print_summary() {
    const double wall = seconds_since(start_);
    const SchedulerStats& s = scheduler_.stats();
    std::ostringstream o;
    o << std::fixed << std::setprecision(1);
    const std::string placements = placement_line(pipeline_.check());
    o << "--\n"
      << (placements.empty() ? "backend " + pipeline_.check().backend + ", " : "") << "sampler "
      << pipeline_.sampler_order() << ", KV cache " << format_bytes(pipeline_.kv_cache_bytes())
      << " in " << scheduler_.total_blocks() << " blocks of " << config_.kv_cache.block_tokens
      << " tokens\n"
      << requests_ << " requests (" << refused_ << " refused), prompt " << prompt_in_
      << " tokens, generated " << generated_ << " tokens in " << wall
      << " s: " << (wall > 0 ? static_cast<double>(generated_) / wall : 0.0) << " tok/s\n"
      << "prefix cache " << s.prefix_hit_tokens << " tokens, " << s.preemptions
      << " preemptions, peak running " << s.peak_running << " of " << config_.batching.max_sequences
      << ", peak KV blocks " << s.peak_used_blocks << " of " << scheduler_.total_blocks() << ", "
      << s.steps << " steps\n";
    if (!placements.empty()) {
      o << placements << "; KV blocks moved " << s.kv_moves << "x, "
        << format_bytes(s.kv_moved_bytes) << " in " << s.kv_move_seconds * 1000 << " ms\n";
    }
    if (s.draft_tokens > 0) {
      o << "drafts " << s.draft_tokens << " tokens, " << s.accepted_draft_tokens << " kept ("
        << 100.0 * static_cast<double>(s.accepted_draft_tokens) /
               static_cast<double>(s.draft_tokens)
        << "%)\n";
    }
    std::cerr << o.str();
  }

  Pipeline& pipeline_;
  const PipelineConfig& config_;
  const std::string path_;
  std::ostream& out_;
  Scheduler scheduler_;
  const bool progress_;
  std::optional<ChatTemplate> chat_;
  std::map<int64_t, json> ids_;   // the file's ids of the requests submitted, by line
  std::deque<int64_t> order_;     // request lines not yet written, in file order
  std::map<int64_t, json> done_;  // results by line, until their turn to be written
  int64_t total_lines_ = 0;
  int64_t requests_ = 0;
  int64_t refused_ = 0;
  std::optional<ErrorKind> failure_;  // the first failed request's error kind
  int64_t finished_ = 0;
  int64_t prompt_in_ = 0;
  int64_t generated_ = 0;
  Clock::time_point start_;
  Clock::time_point last_progress_;
};

}  // namespace

int run_prompts_file(Pipeline& pipeline, const PipelineConfig& config,
                     const std::string& prompts_path, const std::string& output_path) {
  std::ofstream file;
  if (!output_path.empty()) {
    file.open(output_path, std::ios::binary | std::ios::trunc);
    if (!file) {
      throw Error(ErrorKind::kUsage,
                  "--output " + output_path + ": cannot create the file; check the folder exists");
    }
  }
  BatchRun run(pipeline, config, prompts_path, output_path.empty() ? std::cout : file);
  return run.run();
}

}  // namespace duet::cli
