// text_stream.h — the text of one generation as it may be shown: whole
// UTF-8 characters, held back while they could be the start of a stop
// string, and cut where a stop string begins (internal to core).
//
// The scheduler keeps one per sequence and pushes each generated token's
// piece through it. Not thread-safe: one per sequence.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "text/utf8_stream.h"

namespace duet {

class TextStream {
 public:
  // REQUIRES: `stop` passed check_stop_strings (duet/generation.h).
  // With `armed` false the stop strings do nothing (no text is held back for
  // them) until arm(): they then look only at text pushed from then on.
  explicit TextStream(std::vector<std::string> stop, bool armed = true)
      : stop_(std::move(stop)), armed_(armed) {}

  void arm() { armed_ = true; }

  struct Pushed {
    std::string text;      // ready to show now (may be empty)
    bool stopped = false;  // a stop string ended the text: `text` is what came before it
  };

  // Adds the bytes of one token's piece. After a stop, nothing more may be
  // pushed.
  Pushed push(std::string_view piece);

  // The text still held back (a partial stop string, an unfinished
  // character), for the end of a generation that no stop string ended; ""
  // after a stop.
  std::string flush();

 private:
  // Bytes at the end of pending_ that could begin a stop string.
  size_t held_back() const;

  std::vector<std::string> stop_;
  Utf8Stream utf8_;
  std::string pending_;  // decoded text not yet shown
  bool armed_ = true;
  bool stopped_ = false;
};

}  // namespace duet
