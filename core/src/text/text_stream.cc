#include "text/text_stream.h"

#include <algorithm>

namespace duet {

size_t TextStream::held_back() const {
  size_t keep = 0;
  if (!armed_) return keep;
  for (const auto& s : stop_) {
    for (size_t n = std::min(s.size() - 1, pending_.size()); n > keep; --n) {
      if (pending_.compare(pending_.size() - n, n, s, 0, n) == 0) {
        keep = n;
        break;
      }
    }
  }
  return keep;
}

TextStream::Pushed TextStream::push(std::string_view piece) {
  Pushed out;
  pending_ += utf8_.push(piece);
  size_t stop_at = std::string::npos;
  if (armed_) {
    for (const auto& stop : stop_) stop_at = std::min(stop_at, pending_.find(stop));
  }
  if (stop_at != std::string::npos) {
    out.text = pending_.substr(0, stop_at);
    out.stopped = stopped_ = true;
    pending_.clear();
    return out;
  }
  const size_t ready = pending_.size() - held_back();
  out.text = pending_.substr(0, ready);
  pending_.erase(0, ready);
  return out;
}

std::string TextStream::flush() {
  if (stopped_) return {};
  std::string out = std::move(pending_) + utf8_.flush();
  pending_.clear();
  return out;
}

}  // namespace duet
