#include <algorithm>

#include "duet/error.h"
#include "engine/session_impl.h"
#include "engine/step_rows.h"

namespace duet {

const char* finish_reason_name(FinishReason reason) {
  switch (reason) {
    case FinishReason::kNone:
      return "none";
    case FinishReason::kStop:
      return "stop";
    case FinishReason::kLength:
      return "length";
    case FinishReason::kCancelled:
      return "cancelled";
    case FinishReason::kFailed:
      return "failed";
  }
  return "none";
}

void check_prompt_ids(std::span<const int32_t> prompt, int32_t n_vocab) {
  for (size_t i = 0; i < prompt.size(); ++i) {
    if (prompt[i] < 0 || prompt[i] >= n_vocab) {
      throw Error(ErrorKind::kInputRejected,
                  "prompt token " + std::to_string(i) + " has id " + std::to_string(prompt[i]) +
                      ", outside the vocabulary [0, " + std::to_string(n_vocab) + ")");
    }
  }
}

Session::Impl::Impl(Model& m, KVCache& k, KVAllocator& a, int32_t seq, Attention& att,
                    std::unique_ptr<SamplerChain> c, const Tokenizer& t, TextSink& s,
                    std::span<const int32_t> prompt)
    : model(&m),
      kv(&k),
      attention(&att),
      allocator(a),
      sequence(seq),
      chain(std::move(c)),
      tokenizer(t),
      sink(s),
      tokens(prompt.begin(), prompt.end()),
      prompt_tokens(static_cast<int32_t>(prompt.size())) {
  stats.prompt_tokens = prompt_tokens;
}

Session::Impl::~Impl() { allocator.release(sequence); }

Session::Session(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Session::~Session() = default;

std::span<const int32_t> Session::tokens() const { return impl_->tokens; }
int32_t Session::prompt_tokens() const { return impl_->prompt_tokens; }
int32_t Session::cached() const { return impl_->allocator.length(impl_->sequence); }
int64_t Session::room() const { return impl_->allocator.room(impl_->sequence); }
int32_t Session::n_vocab() const { return impl_->model->hparams().n_vocab; }
std::span<const float> Session::logits() const { return impl_->logits; }
std::vector<float>& Session::kept_logits() { return impl_->kept_logits; }
void Session::continue_with(std::span<const int32_t> prompt) {
  Impl& s = *impl_;
  if (prompt.empty()) throw Error(ErrorKind::kInputRejected, "the next prompt has no tokens");
  check_prompt_ids(prompt, n_vocab());
  s.tokens.insert(s.tokens.end(), prompt.begin(), prompt.end());
  s.prompt_tokens = static_cast<int32_t>(s.tokens.size());
  s.finish = FinishReason::kNone;
  s.kept_logits.clear();
  s.stats = SessionStats{};
  s.stats.prompt_tokens = s.prompt_tokens - cached();
  s.start = std::chrono::steady_clock::now();
}

const Tokenizer& Session::tokenizer() const { return impl_->tokenizer; }
TextSink& Session::sink() { return impl_->sink; }
FinishReason Session::finish_reason() const { return impl_->finish; }
void Session::finish(FinishReason reason) { impl_->finish = reason; }
SessionStats& Session::stats() { return impl_->stats; }

double Session::elapsed_seconds() const {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - impl_->start).count();
}

void Session::forward(int32_t n, bool all_logits) {
  Impl& s = *impl_;
  const int32_t first = cached();
  if (n <= 0 || first + n > static_cast<int32_t>(s.tokens.size())) {
    throw Error(ErrorKind::kPlugin, "stage contract broken: forward of " + std::to_string(n) +
                                        " tokens from position " + std::to_string(first) +
                                        " but the session holds " +
                                        std::to_string(s.tokens.size()));
  }
  if (!s.allocator.append(impl_->sequence, n)) {
    throw Error(ErrorKind::kInputRejected,
                "the KV cache has room for " + std::to_string(room()) + " more tokens but " +
                    std::to_string(n) + " were asked for (" + std::to_string(first) +
                    " cached, capacity " + std::to_string(s.allocator.capacity_tokens()) +
                    "); raise components.kv_cache.capacity_tokens or shorten the prompt");
  }
  StepBatch step;
  add_sequence_rows(step, s.allocator, impl_->sequence, n);

  std::vector<int32_t> rows;
  if (all_logits) {
    for (int32_t i = 0; i < n; ++i) rows.push_back(i);
  } else {
    rows.push_back(n - 1);
  }
  s.logit_rows = static_cast<int32_t>(rows.size());
  s.logits_position = first + rows.front();
  s.model->forward(std::span<const int32_t>(s.tokens).subspan(static_cast<size_t>(first),
                                                              static_cast<size_t>(n)),
                   step, *s.kv, *s.attention, rows, s.logits);
  if (s.residency != nullptr) s.residency->written(s.sequence, first, first + n, s.placement);
}

int32_t Session::sample() {
  Impl& s = *impl_;
  if (s.logit_rows == 0) {
    throw Error(ErrorKind::kPlugin,
                "stage contract broken: sample() with no logits (no forward() yet, "
                "or truncate() dropped their position)");
  }
  const auto step = static_cast<uint64_t>(s.tokens.size()) - static_cast<uint64_t>(s.prompt_tokens);
  return s.chain->sample(s.logits_row(s.logit_rows - 1), s.tokens, kRequestStream, step);
}

int32_t Session::sample(int32_t row) {
  Impl& s = *impl_;
  const int32_t seen = s.logits_position + row + 1;  // tokens up to the row's own
  if (row < 0 || row >= s.logit_rows || seen < s.prompt_tokens) {
    throw Error(ErrorKind::kPlugin,
                "stage contract broken: sample(" + std::to_string(row) +
                    ") but the last forward() left " + std::to_string(s.logit_rows) +
                    " logit rows from position " + std::to_string(s.logits_position) +
                    " and the prompt has " + std::to_string(s.prompt_tokens) + " tokens");
  }
  const auto step = static_cast<uint64_t>(seen - s.prompt_tokens);
  return s.chain->sample(s.logits_row(row),
                         std::span<const int32_t>(s.tokens).first(static_cast<size_t>(seen)),
                         kRequestStream, step);
}

void Session::append(int32_t token) {
  if (token < 0 || token >= n_vocab()) {
    throw Error(ErrorKind::kPlugin, "stage contract broken: token " + std::to_string(token) +
                                        " is outside the vocabulary of " +
                                        std::to_string(n_vocab()));
  }
  impl_->tokens.push_back(token);
}

void Session::truncate(int32_t n) {
  Impl& s = *impl_;
  if (n < s.prompt_tokens || n > static_cast<int32_t>(s.tokens.size())) {
    throw Error(ErrorKind::kPlugin, "stage contract broken: truncate(" + std::to_string(n) +
                                        ") but the session holds " +
                                        std::to_string(s.tokens.size()) + " tokens, " +
                                        std::to_string(s.prompt_tokens) + " of them the prompt");
  }
  s.tokens.resize(static_cast<size_t>(n));
  s.allocator.truncate(impl_->sequence, n);
  s.logit_rows = std::clamp(n - s.logits_position, 0, s.logit_rows);
  s.logits.resize(static_cast<size_t>(s.logit_rows) * static_cast<size_t>(n_vocab()));
}

}  // namespace duet
