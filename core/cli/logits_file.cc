#include "logits_file.h"

#include <algorithm>
#include <cstring>
#include <filesystem>

#include "duet/error.h"

namespace duet::cli {
namespace {

constexpr char kMagic[8] = {'D', 'U', 'E', 'T', 'L', 'G', 'T', '1'};
constexpr uint64_t kHeaderBytes = sizeof kMagic + 4 + 4 + 8;

template <typename T>
void put(std::ofstream& out, T value) {
  out.write(reinterpret_cast<const char*>(&value), sizeof value);
}

template <typename T>
T get(std::ifstream& in) {
  T value{};
  in.read(reinterpret_cast<char*>(&value), sizeof value);
  return value;
}

}  // namespace

LogitsWriter::LogitsWriter(const std::string& path, int32_t n_vocab, int32_t ctx,
                           std::span<const int32_t> tokens)
    : path_(path), out_(path, std::ios::binary | std::ios::trunc) {
  if (!out_)
    throw Error(ErrorKind::kUsage,
                "--save-logits " + path + ": cannot create the file; check the folder");
  out_.write(kMagic, sizeof kMagic);
  put(out_, static_cast<uint32_t>(n_vocab));
  put(out_, ctx);
  put(out_, static_cast<uint64_t>(tokens.size()));
  out_.write(reinterpret_cast<const char*>(tokens.data()),
             static_cast<std::streamsize>(tokens.size_bytes()));
}

void LogitsWriter::add(std::span<const float> logits) {
  out_.write(reinterpret_cast<const char*>(logits.data()),
             static_cast<std::streamsize>(logits.size_bytes()));
}

void LogitsWriter::finish() {
  out_.close();
  if (!out_)
    throw Error(ErrorKind::kUsage,
                "--save-logits " + path_ + ": writing failed (is the disk full?)");
}

LogitsReader::LogitsReader(const std::string& path, int32_t n_vocab, int32_t ctx,
                           std::span<const int32_t> tokens, int64_t positions)
    : path_(path), in_(path, std::ios::binary), row_(static_cast<size_t>(n_vocab)) {
  std::error_code ec;
  const uint64_t size = std::filesystem::file_size(path, ec);
  if (!in_ || ec)
    throw Error(ErrorKind::kUsage, "--kl-base " + path + ": cannot read the file; check the path");
  const std::string what = "--kl-base " + path + ": ";
  const std::string fix =
      "; save the baseline with --save-logits from the same model, text and --ctx";
  char magic[sizeof kMagic] = {};
  in_.read(magic, sizeof magic);
  if (size < kHeaderBytes || std::memcmp(magic, kMagic, sizeof kMagic) != 0) {
    throw Error(ErrorKind::kInputRejected,
                what + "not a Duet logits file (no DUETLGT1 header)" + fix);
  }
  const auto file_vocab = get<uint32_t>(in_);
  const auto file_ctx = get<int32_t>(in_);
  const auto file_tokens = get<uint64_t>(in_);
  if (file_vocab != static_cast<uint32_t>(n_vocab)) {
    throw Error(ErrorKind::kInputRejected,
                what + "saved with a vocabulary of " + std::to_string(file_vocab) +
                    " tokens, this model has " + std::to_string(n_vocab) + fix);
  }
  if (file_ctx != ctx) {
    throw Error(ErrorKind::kInputRejected, what + "saved with --ctx " + std::to_string(file_ctx) +
                                               ", this run uses " + std::to_string(ctx) + fix);
  }
  const uint64_t expected =
      kHeaderBytes + file_tokens * 4 + static_cast<uint64_t>(positions) * row_.size() * 4;
  if (file_tokens != tokens.size()) {
    throw Error(ErrorKind::kInputRejected, what + "holds " + std::to_string(file_tokens) +
                                               " tokens of text, this run has " +
                                               std::to_string(tokens.size()) + fix);
  }
  if (size != expected) {
    throw Error(ErrorKind::kInputRejected, what + "is " + std::to_string(size) + " bytes, " +
                                               std::to_string(expected) +
                                               " expected (truncated or corrupt)" + fix);
  }
  std::vector<int32_t> saved(tokens.size());
  in_.read(reinterpret_cast<char*>(saved.data()), static_cast<std::streamsize>(saved.size() * 4));
  const auto differ = std::mismatch(saved.begin(), saved.end(), tokens.begin());
  if (differ.first != saved.end()) {
    throw Error(ErrorKind::kInputRejected,
                what + "token " + std::to_string(differ.first - saved.begin()) + " is " +
                    std::to_string(*differ.first) + ", this run's is " +
                    std::to_string(*differ.second) + " (another text or tokenizer)" + fix);
  }
}

std::span<const float> LogitsReader::next() {
  in_.read(reinterpret_cast<char*>(row_.data()), static_cast<std::streamsize>(row_.size() * 4));
  if (!in_)
    throw Error(ErrorKind::kInputRejected,
                "--kl-base " + path_ + ": read error part-way (file changed?)");
  return row_;
}

}  // namespace duet::cli
