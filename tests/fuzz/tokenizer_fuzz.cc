// Fuzz target: the SmolLM2 tokenizer on arbitrary bytes. Encoding never
// fails; decoding gives the text back less the bytes the vocabulary has no
// token for; streaming decode passes every byte through exactly once.
#include <cstdlib>
#include <cstring>
#include <memory>
#include <set>
#include <string>

#include "duet/app/gguf.h"
#include "duet/error.h"
#include "duet/tokenizer.h"
#include "fuzz_input.h"
#include "text/utf8_stream.h"

namespace {

std::unique_ptr<duet::Tokenizer> g_tokenizer;
std::set<unsigned char> g_missing_bytes;  // bytes with no token of their own

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  const std::string model = duet::fuzz::env_or(
      "DUET_MODEL", std::string(DUET_SOURCE_DIR) + "/models/SmolLM2-135M-Instruct.Q4_1.gguf");
  g_tokenizer = duet::load_tokenizer(duet::GgufFile::open(model));
  for (int b = 0; b < 256; ++b) {
    if (!g_tokenizer->find_token(std::string(1, static_cast<char>(b)))) {
      g_missing_bytes.insert(static_cast<unsigned char>(b));
    }
  }
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const bool parse_special = (data[0] & 1) != 0;
  const std::string text(reinterpret_cast<const char*>(data + 1), size - 1);
  const auto ids = g_tokenizer->encode(text, parse_special);

  std::string kept;
  for (char c : text) {
    if (g_missing_bytes.count(static_cast<unsigned char>(c)) == 0) kept += c;
  }
  std::string decoded;
  duet::Utf8Stream stream;
  std::string streamed;
  for (int32_t id : ids) {
    const std::string piece = g_tokenizer->piece(id);
    decoded += piece;
    streamed += stream.push(piece);
  }
  streamed += stream.flush();
  if (decoded != kept || streamed != decoded) std::abort();

  // Ids from the input bytes, in range or not: never a crash. An id out of
  // range must throw duet::Error; that is checked for the first such id of
  // an input only, since unwinding costs more than the rest of the input.
  bool threw_once = false;
  for (size_t i = 0; i + 4 <= size; i += 4) {
    int32_t id = 0;
    std::memcpy(&id, data + i, 4);
    if (id >= 0 && id < g_tokenizer->vocab_size()) {
      (void)g_tokenizer->piece(id);
    } else if (!threw_once) {
      threw_once = true;
      try {
        (void)g_tokenizer->piece(id);
        std::abort();  // an id out of range was accepted
      } catch (const duet::Error&) {
      }
    }
    (void)g_tokenizer->is_end_of_generation(id);
  }
  return 0;
}
