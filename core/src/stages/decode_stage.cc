#include "decode_stage.h"

#include <algorithm>

#include "duet/session.h"
#include "duet/tokenizer.h"
#include "utf8_stream.h"

namespace duet {

size_t DecodeStage::held_back(const std::string& text) const {
  size_t keep = 0;
  for (const auto& stop : options_.stop) {
    for (size_t n = std::min(stop.size() - 1, text.size()); n > keep; --n) {
      if (text.compare(text.size() - n, n, stop, 0, n) == 0) {
        keep = n;
        break;
      }
    }
  }
  return keep;
}

void DecodeStage::run(Session& session) {
  Utf8Stream utf8;
  std::string pending;  // decoded text not yet sent to the sink
  bool stopped_by_string = false;

  for (int32_t i = 0; i < options_.max_new_tokens && session.finish_reason() == FinishReason::kNone;
       ++i) {
    const int32_t token = session.sample();
    if (session.stats().generated_tokens == 0)
      session.stats().first_token_seconds = session.elapsed_seconds();
    session.append(token);
    ++session.stats().generated_tokens;
    if (session.tokenizer().is_end_of_generation(token)) {
      session.finish(FinishReason::kStop);
      break;
    }
    pending += utf8.push(session.tokenizer().piece(token));

    size_t stop_at = std::string::npos;
    for (const auto& stop : options_.stop) stop_at = std::min(stop_at, pending.find(stop));
    if (stop_at != std::string::npos) {
      session.sink().on_text(std::string_view(pending).substr(0, stop_at));
      pending.clear();
      stopped_by_string = true;
      session.finish(FinishReason::kStop);
      break;
    }
    const size_t ready = pending.size() - held_back(pending);
    if (ready > 0) {
      session.sink().on_text(std::string_view(pending).substr(0, ready));
      pending.erase(0, ready);
    }

    if (i + 1 == options_.max_new_tokens || session.room() < 1) {
      session.finish(FinishReason::kLength);
      break;
    }
    // Normally the one token just sampled; more if an earlier stage left
    // tokens uncached, so the next logits always follow the whole sequence.
    session.forward(static_cast<int32_t>(session.tokens().size()) - session.cached(), false);
  }
  if (session.finish_reason() == FinishReason::kNone) session.finish(FinishReason::kLength);
  if (!stopped_by_string) {
    pending += utf8.flush();
    if (!pending.empty()) session.sink().on_text(pending);
  }
  // Decode speed counts the steps after the first token, whose cost is the
  // prefill's: generated - 1 forward passes over this span.
  if (session.stats().generated_tokens > 0) {
    session.stats().decode_seconds =
        session.elapsed_seconds() - session.stats().first_token_seconds;
  }
}

}  // namespace duet
