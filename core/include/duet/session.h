// duet/session.h — one sequence driven by hand, a forward pass at a time:
// for measurements of the bare model (duet bench's prompt and decode tests)
// and for tests that look at one pass's logits.
//
// Generation does not go through a Session: every request, `duet run`'s
// included, is stepped by the scheduler (duet/app/scheduler.h). A session
// takes its cache blocks from the pipeline's pool, like a request does.
// Made by Pipeline::new_session. Thread-safety: none.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "duet/export.h"

namespace duet {

class Pipeline;

class DUET_API Session {
 public:
  class Impl;
  explicit Session(std::unique_ptr<Impl> impl);
  ~Session();  // returns its cache blocks
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;

  // The prompt, then every token appended.
  std::span<const int32_t> tokens() const;
  // Tokens whose K and V are in the cache: always the first cached() tokens.
  int32_t cached() const;
  // Positions the cache can still take for this sequence.
  int64_t room() const;
  int32_t n_vocab() const;

  // Runs tokens [cached(), cached() + n) through the model, adding their K
  // and V to the cache. logits() then holds the last row's logits, or every
  // row's when `all_logits` (row i: the logits after token cached() + i).
  // Throws duet::Error(kUsage) unless 0 < n <= tokens().size() - cached(),
  // and kInputRejected, naming the sizes and the fix, when the cache has no
  // room for n more positions.
  void forward(int32_t n, bool all_logits);

  // [rows, n_vocab] logits of the last forward(), row-major.
  std::span<const float> logits() const;

  // The token the pipeline's sampler chain draws from the last logits row,
  // with tokens() as its history. Throws duet::Error(kUsage) before a
  // forward().
  int32_t sample();

  // Appends a token (not yet cached). Throws duet::Error(kUsage) for a
  // token outside [0, n_vocab()).
  void append(int32_t token);

 private:
  friend class Pipeline;  // moves a session between the backends of its stages
  std::unique_ptr<Impl> impl_;
};

}  // namespace duet
