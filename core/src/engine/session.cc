#include <algorithm>

#include "duet/error.h"
#include "engine/session_impl.h"
#include "engine/step_rows.h"

namespace duet {

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
                    std::unique_ptr<SamplerChain> c, std::span<const int32_t> prompt)
    : model(&m),
      kv(&k),
      attention(&att),
      allocator(a),
      sequence(seq),
      chain(std::move(c)),
      tokens(prompt.begin(), prompt.end()),
      prompt_tokens(static_cast<int32_t>(prompt.size())) {}

Session::Impl::~Impl() { allocator.release(sequence); }

Session::Session(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Session::~Session() = default;

std::span<const int32_t> Session::tokens() const { return impl_->tokens; }
int32_t Session::cached() const { return impl_->allocator.length(impl_->sequence); }
int64_t Session::room() const { return impl_->allocator.room(impl_->sequence); }
int32_t Session::n_vocab() const { return impl_->model->hparams().n_vocab; }
std::span<const float> Session::logits() const { return impl_->logits; }

void Session::forward(int32_t n, bool all_logits) {
  Impl& s = *impl_;
  const int32_t first = cached();
  if (n <= 0 || first + n > static_cast<int32_t>(s.tokens.size())) {
    throw Error(ErrorKind::kUsage, "Session::forward of " + std::to_string(n) +
                                       " tokens from position " + std::to_string(first) +
                                       " but the session holds " + std::to_string(s.tokens.size()));
  }
  if (room() < n) {
    throw Error(ErrorKind::kInputRejected,
                "the KV cache has room for " + std::to_string(room()) + " more tokens but " +
                    std::to_string(n) + " were asked for (" + std::to_string(first) +
                    " cached, capacity " + std::to_string(s.allocator.capacity_tokens()) +
                    "); raise components.kv_cache.capacity_tokens or shorten the prompt" +
                    s.allocator.ring_room_hint());
  }
  // Passes of at most the rows a sequence may run a step (window rings).
  s.logits.clear();
  std::vector<float> part;
  for (int32_t done = 0; done < n;) {
    const int32_t rows_now = std::min(n - done, s.allocator.max_step_rows());
    s.allocator.append(s.sequence, rows_now);  // room() was checked for all n
    StepBatch step;
    add_sequence_rows(step, s.allocator, s.sequence, rows_now);
    std::vector<int32_t> rows;
    const bool last = done + rows_now == n;
    for (int32_t i = all_logits ? 0 : rows_now - 1; i < rows_now && (all_logits || last); ++i)
      rows.push_back(i);
    s.model->forward(std::span<const int32_t>(s.tokens).subspan(static_cast<size_t>(first + done),
                                                                static_cast<size_t>(rows_now)),
                     step, *s.kv, *s.attention, rows, part);
    s.logits.insert(s.logits.end(), part.begin(), part.end());
    if (s.residency != nullptr)
      s.residency->written(s.sequence, first + done, first + done + rows_now, s.placement);
    done += rows_now;
  }
  s.logit_rows = static_cast<int32_t>(s.logits.size() / static_cast<size_t>(n_vocab()));
}

int32_t Session::sample() {
  Impl& s = *impl_;
  if (s.logit_rows == 0) throw Error(ErrorKind::kUsage, "Session::sample() before any forward()");
  const auto vocab = static_cast<size_t>(n_vocab());
  const std::span<const float> last = std::span<const float>(s.logits).subspan(
      static_cast<size_t>(s.logit_rows - 1) * vocab, vocab);
  const auto step = static_cast<uint64_t>(s.tokens.size()) - static_cast<uint64_t>(s.prompt_tokens);
  return s.chain->sample(last, s.tokens, kRequestStream, step);
}

void Session::append(int32_t token) {
  if (token < 0 || token >= n_vocab()) {
    throw Error(ErrorKind::kUsage, "Session::append of token " + std::to_string(token) +
                                       ", outside the vocabulary of " + std::to_string(n_vocab()));
  }
  impl_->tokens.push_back(token);
}

}  // namespace duet
