#include "duet/generation.h"

#include <algorithm>

#include "duet/app/utf8.h"
#include "duet/error.h"
#include "duet/tokenizer.h"
#include "text/text_stream.h"

namespace duet {

void check_stop_strings(const std::vector<std::string>& stop, const std::string& path) {
  for (const auto& s : stop) {
    if (s.empty()) {
      throw Error(ErrorKind::kConfig,
                  path + ": an empty stop string would stop at once; remove it");
    }
    if (invalid_utf8_at(s)) {
      throw Error(ErrorKind::kConfig, path + ": a stop string must be valid UTF-8 text");
    }
  }
}

class DUET_LOCAL Generation::Impl {
 public:
  Impl(Session& s, std::vector<std::string> stop)
      : session(s), text(std::move(stop)), next(static_cast<int32_t>(s.tokens().size())) {}

  Session& session;
  TextStream text;
  int32_t next;  // the position confirm() takes next
};

Generation::Generation(Session& session, std::vector<std::string> stop)
    : impl_(std::make_unique<Impl>(session, std::move(stop))) {}
Generation::~Generation() = default;

bool Generation::add(int32_t token) {
  impl_->session.append(token);
  return confirm(static_cast<int32_t>(impl_->session.tokens().size()) - 1);
}

bool Generation::confirm(int32_t position) {
  Impl& g = *impl_;
  Session& session = g.session;
  if (position != g.next || position >= static_cast<int32_t>(session.tokens().size())) {
    throw Error(ErrorKind::kPlugin, "stage contract broken: generated token at position " +
                                        std::to_string(position) + " confirmed, but position " +
                                        std::to_string(g.next) +
                                        " comes next and the session holds " +
                                        std::to_string(session.tokens().size()) + " tokens");
  }
  ++g.next;
  const int32_t token = session.tokens()[static_cast<size_t>(position)];
  if (session.stats().generated_tokens == 0)
    session.stats().first_token_seconds = session.elapsed_seconds();
  ++session.stats().generated_tokens;
  if (session.tokenizer().is_end_of_generation(token)) {
    session.finish(FinishReason::kStop);
    return false;
  }
  TextStream::Pushed pushed = g.text.push(session.tokenizer().piece(token));
  if (!pushed.text.empty()) session.sink().on_text(pushed.text);
  if (pushed.stopped) {
    session.finish(FinishReason::kStop);
    return false;
  }
  return true;
}

void Generation::finish() {
  Impl& g = *impl_;
  Session& session = g.session;
  if (session.finish_reason() == FinishReason::kNone) session.finish(FinishReason::kLength);
  const std::string rest = g.text.flush();
  if (!rest.empty()) session.sink().on_text(rest);
  // Decode speed counts the tokens after the first, whose cost is the
  // prefill's: generated - 1 tokens over this span.
  if (session.stats().generated_tokens > 0) {
    session.stats().decode_seconds =
        session.elapsed_seconds() - session.stats().first_token_seconds;
  }
}

}  // namespace duet
