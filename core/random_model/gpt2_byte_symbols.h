// gpt2_byte_symbols.h — the byte tokens of a GPT-2 style byte-level BPE
// vocabulary, for the model files the benchmarks and tests write
// (random_llama.cc here, tests/tiny_model.cc).
#pragma once

#include <string>
#include <vector>

namespace duet::testdata {

// Entry b is byte b's token text: printable bytes stand for themselves, the
// others are shifted to code points from U+0100 up, encoded as UTF-8.
inline std::vector<std::string> byte_symbols() {
  std::vector<std::string> symbols(256);
  int shifted = 0;
  for (int b = 0; b < 256; ++b) {
    const bool printable =
        (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174 && b <= 255);
    const int cp = printable ? b : 256 + shifted++;
    std::string utf8;
    if (cp < 0x80) {
      utf8 += static_cast<char>(cp);
    } else {
      utf8 += static_cast<char>(0xC0 | (cp >> 6));
      utf8 += static_cast<char>(0x80 | (cp & 0x3F));
    }
    symbols[static_cast<size_t>(b)] = utf8;
  }
  return symbols;
}

}  // namespace duet::testdata
