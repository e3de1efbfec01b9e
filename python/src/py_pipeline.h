// py_pipeline.h — the Pipeline the Python module binds (python/duet): a
// pipeline built from a YAML file or a model file, whose requests run
// through the batching scheduler (duet/app/scheduler.h), the engine `duet
// serve` runs. Requests are JSON objects with the fields a prompts-file line
// takes (docs/batching.md), read by the same code.
//
// Thread-safety: calls may come from several Python threads. Forward passes
// run with the GIL released, under the pipeline's mutex; Python's signal
// handlers run between passes, and Ctrl-C cancels the call's requests and
// raises KeyboardInterrupt.
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "duet/app/chat_template.h"
#include "duet/app/pipeline.h"
#include "duet/app/pipeline_config.h"
#include "duet/app/scheduler.h"

namespace duet::python {

// The process's plugin host: it lives until exit, so that plugin libraries
// stay loaded while their objects and errors are alive. It is not
// thread-safe: hold plugin_host_mutex() (with the GIL released) to use it.
PluginHost& plugin_host();
std::mutex& plugin_host_mutex();

// One finished request, as Python sees it.
struct Generation {
  std::string text;
  std::vector<int32_t> token_ids;         // generated, end token included
  std::vector<int32_t> prompt_token_ids;  // as tokenized
  std::string finish_reason;              // "stop", "length", "cancelled", "failed"
  std::string error;                      // "failed": the error's message
  double queued_s = 0.0, first_token_s = 0.0, total_s = 0.0, decode_tokens_per_s = 0.0;
  int32_t cached_prompt_tokens = 0;
  // With logits asked for: [token_ids.size(), n_vocab], row i the logits
  // token i was drawn from; shared with the NumPy array made of it.
  std::shared_ptr<std::vector<float>> logits;
  int32_t n_vocab = 0;
  // With prompt logprobs asked for: the log-probability of each prompt
  // token after the first, given those before it.
  std::vector<float> prompt_logprobs;
};

class PyPipeline {
 public:
  // `source`: a pipeline YAML, or a model file (*.gguf) for which Duet
  // builds its default pipeline (as `duet run MODEL.gguf` does);
  // `overrides`: "key.path=value" as --set takes them. Throws duet::Error.
  PyPipeline(const std::string& source, const std::vector<std::string>& overrides);
  ~PyPipeline();

  // Runs the requests of `requests` (a JSON array of request objects) to
  // their end, results in order. `logits` keeps each generated token's
  // logits. Throws serve::FieldError for a bad field (naming it).
  std::vector<Generation> run(const std::string& requests, bool logits);

  // Starts one request (a JSON object); its text is then read with next().
  uint64_t start(const std::string& request);
  // The next piece of request `handle`'s text, or nullopt once it has ended
  // (then finished() holds its result).
  std::optional<std::string> next(uint64_t handle);
  Generation finished(uint64_t handle);
  // Ends request `handle` if it is still running (a stream let go of).
  void cancel(uint64_t handle);

  // The perplexity of `text` as `duet perplexity --ctx CTX` scores it:
  // the text's tokens (BOS first where the tokenizer asks, no chat
  // template), in windows of `ctx` tokens scoring the second half of each
  // (0: one window, every token after the first), each window's prompt
  // log-probabilities from the scheduler, the windows batched.
  double perplexity(const std::string& text, int32_t ctx);

  std::vector<int32_t> tokenize(const std::string& text, bool special) const;
  std::string detokenize(const std::vector<int32_t>& ids) const;

  const PipelineConfig& config() const { return config_; }
  const Pipeline& pipeline() const { return *pipeline_; }
  int32_t n_vocab() const;

 private:
  struct Stream;  // a request's text as it comes (py_pipeline.cc)

  Request read_request(const std::string& object_text, bool logits);
  const ChatTemplate& chat_template();
  // Submits `requests` (their text to `stream` when given; one request
  // then), returning their ids. When the scheduler refuses one, none runs:
  // those before it are cancelled, and its error names its place.
  std::vector<uint64_t> submit(std::vector<Request> requests,
                               const std::shared_ptr<Stream>& stream);
  // One forward pass of every running request (GIL released); then
  // Python's signal handlers. On Ctrl-C (nb::python_error) or a failed
  // pass, `mine` are cancelled and dropped first.
  void step(const std::vector<uint64_t>& mine);
  // Steps until request `id` has ended; its result. Throws
  // duet::Error(kUsage) when it was cancelled (its result is gone).
  RequestResult wait_for(uint64_t id, const std::vector<uint64_t>& mine);
  // Under mutex_: moves the scheduler's finished results into results_;
  // cancels `ids` and forgets them (their results and streams).
  void collect();
  void drop(const std::vector<uint64_t>& ids);

  PipelineConfig config_;
  std::unique_ptr<Pipeline> pipeline_;
  std::optional<ChatTemplate> chat_;
  std::mutex mutex_;  // the scheduler, results_, streams_
  std::unique_ptr<Scheduler> scheduler_;
  std::map<uint64_t, RequestResult> results_;            // by request id
  std::map<uint64_t, std::shared_ptr<Stream>> streams_;  // by request id
  std::map<uint64_t, uint64_t> handles_;                 // request id -> scheduler handle
  uint64_t next_id_ = 1;
};

Generation to_generation(RequestResult r, int32_t n_vocab);

}  // namespace duet::python
