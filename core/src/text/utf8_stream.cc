#include "text/utf8_stream.h"

#include <cstdint>

namespace duet {
namespace {

// Length of the sequence a lead byte starts; 0 for continuation bytes and for
// bytes that never start a character.
size_t sequence_length(uint8_t byte) {
  if (byte < 0x80) return 1;
  if (byte >= 0xC2 && byte <= 0xDF) return 2;
  if (byte >= 0xE0 && byte <= 0xEF) return 3;
  if (byte >= 0xF0 && byte <= 0xF4) return 4;
  return 0;
}

bool is_continuation(uint8_t byte) { return (byte & 0xC0) == 0x80; }

}  // namespace

std::string Utf8Stream::push(std::string_view bytes) {
  pending_.append(bytes);
  // Only the last three bytes can belong to an unfinished character: find
  // the last lead byte among them and hold it back if its sequence is not
  // complete yet and everything after it continues it.
  size_t keep_from = pending_.size();
  for (size_t back = 1; back <= 3 && back <= pending_.size(); ++back) {
    const size_t i = pending_.size() - back;
    const auto byte = static_cast<uint8_t>(pending_[i]);
    if (is_continuation(byte)) continue;
    if (sequence_length(byte) > back) keep_from = i;
    break;
  }
  std::string out = pending_.substr(0, keep_from);
  pending_.erase(0, keep_from);
  return out;
}

std::string Utf8Stream::flush() {
  std::string out = std::move(pending_);
  pending_.clear();
  return out;
}

}  // namespace duet
