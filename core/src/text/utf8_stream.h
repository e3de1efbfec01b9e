// utf8_stream.h — turns token pieces into text that never splits a character.
//
// A multi-byte UTF-8 character may be spread over several tokens, so printing
// each piece as it arrives could show half a character. Utf8Stream holds back
// an incomplete trailing sequence until the bytes that complete it arrive.
// Bytes that cannot start or continue a character are passed through as they
// are, so every byte pushed comes out exactly once, in order.
#pragma once

#include <string>
#include <string_view>

namespace duet {

// Not thread-safe: one stream per generated sequence.
class Utf8Stream {
 public:
  // The bytes of `bytes` (after any held back before) up to the last complete
  // character; an unfinished multi-byte sequence at the end (at most 3 bytes)
  // is kept for the next call.
  std::string push(std::string_view bytes);

  // Whatever is held back, as-is (an unfinished sequence at the end of the
  // stream), and resets the stream.
  std::string flush();

 private:
  std::string pending_;
};

}  // namespace duet
