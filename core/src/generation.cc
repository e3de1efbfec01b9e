#include "duet/generation.h"

#include <algorithm>

#include "duet/error.h"
#include "duet/tokenizer.h"
#include "utf8_stream.h"

namespace duet {
namespace {

// Whether `s` is well-formed UTF-8 (no overlong forms or surrogates).
bool is_valid_utf8(const std::string& s) {
  for (size_t i = 0; i < s.size();) {
    const auto c = static_cast<unsigned char>(s[i]);
    size_t n = c < 0x80 ? 1 : (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xE ? 3 : (c >> 3) == 0x1E ? 4 : 0;
    if (n == 0 || i + n > s.size()) return false;
    uint32_t cp = n == 1 ? c : c & (0x7Fu >> n);
    for (size_t k = 1; k < n; ++k) {
      const auto cc = static_cast<unsigned char>(s[i + k]);
      if ((cc & 0xC0) != 0x80) return false;
      cp = (cp << 6) | (cc & 0x3F);
    }
    const uint32_t min_cp[] = {0, 0, 0x80, 0x800, 0x10000};
    if (cp < min_cp[n] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return false;
    i += n;
  }
  return true;
}

}  // namespace

void check_stop_strings(const std::vector<std::string>& stop, const std::string& path) {
  for (const auto& s : stop) {
    if (s.empty()) {
      throw Error(ErrorKind::kConfig,
                  path + ": an empty stop string would stop at once; remove it");
    }
    if (!is_valid_utf8(s)) {
      throw Error(ErrorKind::kConfig, path + ": a stop string must be valid UTF-8 text");
    }
  }
}

class Generation::Impl {
 public:
  Impl(Session& s, std::vector<std::string> stops)
      : session(s), stop(std::move(stops)), next(static_cast<int32_t>(s.tokens().size())) {}

  // Bytes at the end of `pending` that could begin a stop string, so must wait.
  size_t held_back() const {
    size_t keep = 0;
    for (const auto& s : stop) {
      for (size_t n = std::min(s.size() - 1, pending.size()); n > keep; --n) {
        if (pending.compare(pending.size() - n, n, s, 0, n) == 0) {
          keep = n;
          break;
        }
      }
    }
    return keep;
  }

  Session& session;
  std::vector<std::string> stop;
  Utf8Stream utf8;
  std::string pending;  // decoded text not yet sent to the sink
  bool stopped_by_string = false;
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
  g.pending += g.utf8.push(session.tokenizer().piece(token));

  size_t stop_at = std::string::npos;
  for (const auto& stop : g.stop) stop_at = std::min(stop_at, g.pending.find(stop));
  if (stop_at != std::string::npos) {
    session.sink().on_text(std::string_view(g.pending).substr(0, stop_at));
    g.pending.clear();
    g.stopped_by_string = true;
    session.finish(FinishReason::kStop);
    return false;
  }
  const size_t ready = g.pending.size() - g.held_back();
  if (ready > 0) {
    session.sink().on_text(std::string_view(g.pending).substr(0, ready));
    g.pending.erase(0, ready);
  }
  return true;
}

void Generation::finish() {
  Impl& g = *impl_;
  Session& session = g.session;
  if (session.finish_reason() == FinishReason::kNone) session.finish(FinishReason::kLength);
  if (!g.stopped_by_string) {
    g.pending += g.utf8.flush();
    if (!g.pending.empty()) session.sink().on_text(g.pending);
    g.pending.clear();
  }
  // Decode speed counts the tokens after the first, whose cost is the
  // prefill's: generated - 1 tokens over this span.
  if (session.stats().generated_tokens > 0) {
    session.stats().decode_seconds =
        session.elapsed_seconds() - session.stats().first_token_seconds;
  }
}

}  // namespace duet
