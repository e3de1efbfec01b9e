// logits_file.h — the scored logits of a perplexity run, saved so that
// another run (another backend, another process) can measure its fidelity to
// them: `duet perplexity --save-logits` writes one, `--kl-base` reads it.
//
// Layout (little-endian, as the machines Duet runs on):
//   "DUETLGT1"                       8 bytes
//   n_vocab u32, ctx i32, n_tokens u64
//   tokens  i32[n_tokens]            the whole text's token ids
//   logits  f32[n_vocab] per scored position, window after window, in the
//           order of scoring_windows(n_tokens, ctx) (duet/app/perplexity.h)
// A reader checks that the size adds up and that vocabulary, ctx and tokens
// are its own, so a file from another model, text or window size is refused.
#pragma once

#include <cstdint>
#include <fstream>
#include <span>
#include <string>
#include <vector>

namespace duet::cli {

class LogitsWriter {
 public:
  // Creates `path`. Throws duet::Error(kUsage) when it cannot be written.
  LogitsWriter(const std::string& path, int32_t n_vocab, int32_t ctx,
               std::span<const int32_t> tokens);
  // Appends one scored position's logits (n_vocab values).
  void add(std::span<const float> logits);
  // Flushes and closes; throws duet::Error(kUsage) on a write error (a full
  // disk). Call once after the last add().
  void finish();

 private:
  std::string path_;
  std::ofstream out_;
};

class LogitsReader {
 public:
  // Opens `path` and checks it against this run: same n_vocab, ctx and
  // tokens, and exactly `positions` rows. Throws duet::Error(kUsage) when it
  // cannot be read, kInputRejected naming what differs otherwise.
  LogitsReader(const std::string& path, int32_t n_vocab, int32_t ctx,
               std::span<const int32_t> tokens, int64_t positions);
  // The next position's logits; valid until the next call.
  std::span<const float> next();

 private:
  std::string path_;
  std::ifstream in_;
  std::vector<float> row_;
};

}  // namespace duet::cli
