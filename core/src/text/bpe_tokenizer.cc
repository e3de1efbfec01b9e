#include "text/bpe_tokenizer.h"

#include <algorithm>
#include <queue>

#include "duet/error.h"

namespace duet {
namespace {

// GPT-2's byte-to-unicode table: printable bytes stand for themselves, the
// other 68 (controls, space, 0x7F-0xA0, 0xAD) for U+0100.. in byte order, so
// every byte has a visible character in the vocabulary ("Ġ" is the space).
constexpr char32_t kByteCharLimit = 0x100 + 68;

constexpr std::array<char32_t, 256> make_byte_chars() {
  std::array<char32_t, 256> chars{};
  char32_t next = 0x100;
  for (int b = 0; b < 256; ++b) {
    bool printable = (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE;
    chars[b] = printable ? static_cast<char32_t>(b) : next++;
  }
  return chars;
}
constexpr std::array<char32_t, 256> kByteChars = make_byte_chars();

// The inverse of kByteChars; -1 for characters that stand for no byte.
constexpr std::array<int16_t, kByteCharLimit> make_char_bytes() {
  std::array<int16_t, kByteCharLimit> bytes{};
  for (auto& b : bytes) b = -1;
  for (int b = 0; b < 256; ++b) bytes[kByteChars[b]] = static_cast<int16_t>(b);
  return bytes;
}
constexpr std::array<int16_t, kByteCharLimit> kCharBytes = make_char_bytes();

// UTF-8 of a byte character (all below U+0800).
std::string byte_char_utf8(uint8_t byte) {
  char32_t c = kByteChars[byte];
  if (c < 0x80) return std::string(1, static_cast<char>(c));
  return {static_cast<char>(0xC0 | (c >> 6)), static_cast<char>(0x80 | (c & 0x3F))};
}

// The bytes a byte-level token text stands for; nullopt when it contains a
// character outside GPT-2's table (the text is not byte-level encoded).
std::optional<std::string> decode_byte_level(std::string_view text) {
  std::string bytes;
  for (size_t i = 0; i < text.size(); ++i) {
    auto lead = static_cast<uint8_t>(text[i]);
    char32_t c = lead;
    if (lead >= 0x80) {
      if ((lead & 0xE0) != 0xC0 || i + 1 >= text.size()) return std::nullopt;
      auto trail = static_cast<uint8_t>(text[++i]);
      if ((trail & 0xC0) != 0x80) return std::nullopt;
      c = static_cast<char32_t>(((lead & 0x1F) << 6) | (trail & 0x3F));
    }
    if (c >= kByteCharLimit || kCharBytes[c] < 0) return std::nullopt;
    bytes.push_back(static_cast<char>(kCharBytes[c]));
  }
  return bytes;
}

bool is_raw_text(TokenType type) {
  return type == TokenType::kControl || type == TokenType::kUserDefined;
}

uint64_t pair_key(int32_t left, int32_t right) {
  return (static_cast<uint64_t>(static_cast<uint32_t>(left)) << 32) | static_cast<uint32_t>(right);
}

}  // namespace

BpeTokenizer::BpeTokenizer(const Vocabulary& vocab, std::unique_ptr<PreTokenizer> pre_tokenizer,
                           const std::string& source)
    : TableTokenizer(vocab.add_bos), pre_tokenizer_(std::move(pre_tokenizer)) {
  auto malformed = [&](const std::string& what) {
    return Error(ErrorKind::kModelFile, source + ": " + what);
  };
  const size_t n = vocab.tokens.size();
  check_vocabulary_size(n, source);

  if (vocab.types.size() != n) {
    throw malformed("tokenizer.ggml.token_type has " + std::to_string(vocab.types.size()) +
                    " entries but tokenizer.ggml.tokens has " + std::to_string(n));
  }

  // Token texts name tokens in merges; a text that appears twice means its
  // first id, as a Hugging Face vocabulary built from this list would keep.
  std::unordered_map<std::string_view, int32_t> by_text;
  std::vector<std::string> pieces;
  std::vector<SpecialToken> specials;
  pieces.reserve(n);
  for (size_t i = 0; i < n; ++i) {
    const auto id = static_cast<int32_t>(i);
    const std::string& text = vocab.tokens[i];
    by_text.emplace(text, id);
    if (is_raw_text(vocab.types[i])) {
      pieces.push_back(text);
      if (!text.empty()) specials.push_back({text, id, vocab.types[i] == TokenType::kControl});
      continue;
    }
    std::optional<std::string> bytes = decode_byte_level(text);
    if (!bytes) {
      throw malformed("token " + std::to_string(id) + " '" + text +
                      "' is not byte-level encoded text (tokenizer.ggml.model gpt2)");
    }
    pieces.push_back(std::move(*bytes));
  }

  for (int b = 0; b < 256; ++b) {
    auto it = by_text.find(byte_char_utf8(static_cast<uint8_t>(b)));
    byte_tokens_[b] = it == by_text.end() ? -1 : it->second;
  }
  if (pre_tokenizer_->rules().ignore_merges) {
    for (size_t i = 0; i < n; ++i) {
      if (!is_raw_text(vocab.types[i])) whole_words_.emplace(pieces[i], static_cast<int32_t>(i));
    }
  }

  merges_.reserve(vocab.merges.size());
  for (size_t rank = 0; rank < vocab.merges.size(); ++rank) {
    const std::string& merge = vocab.merges[rank];
    const size_t space = merge.find(' ', 1);
    auto bad_merge = [&](const std::string& why) {
      return malformed("tokenizer.ggml.merges[" + std::to_string(rank) + "] '" + merge + "' " +
                       why);
    };
    if (space == std::string::npos) throw bad_merge("is not two tokens separated by a space");
    const std::string left = merge.substr(0, space);
    const std::string right = merge.substr(space + 1);
    auto l = by_text.find(left), r = by_text.find(right), result = by_text.find(left + right);
    if (l == by_text.end() || r == by_text.end() || result == by_text.end()) {
      throw bad_merge("names a token that is not in tokenizer.ggml.tokens");
    }
    // A repeated pair keeps its first (lowest) rank.
    merges_.emplace(pair_key(l->second, r->second),
                    Merge{static_cast<int32_t>(rank), result->second});
  }

  table_ =
      TokenTable(std::move(pieces), std::move(specials), vocab.bos, vocab.eos, vocab.eot, source);
  for (const SpecialToken& s : table_.specials()) {
    special_starts_[static_cast<uint8_t>(s.text[0])] = true;
  }
}

std::vector<int32_t> BpeTokenizer::encode(std::string_view text, bool parse_special) const {
  std::vector<int32_t> out;
  size_t plain_start = 0;
  size_t i = 0;
  while (i < text.size()) {
    const SpecialToken* found = nullptr;
    if (special_starts_[static_cast<uint8_t>(text[i])]) {
      for (const SpecialToken& s : table_.specials()) {
        if ((parse_special || !s.control) && text.substr(i).starts_with(s.text)) {
          found = &s;
          break;
        }
      }
    }
    if (found == nullptr) {
      ++i;
      continue;
    }
    encode_plain(text.substr(plain_start, i - plain_start), out);
    out.push_back(found->id);
    i += found->text.size();
    plain_start = i;
  }
  encode_plain(text.substr(plain_start), out);
  return out;
}

void BpeTokenizer::encode_plain(std::string_view text, std::vector<int32_t>& out) const {
  for (std::string_view word : pre_tokenizer_->split(text)) encode_word(word, out);
}

void BpeTokenizer::encode_word(std::string_view word, std::vector<int32_t>& out) const {
  if (!whole_words_.empty()) {
    if (auto it = whole_words_.find(word); it != whole_words_.end()) {
      out.push_back(it->second);
      return;
    }
  }
  // Symbols form a linked list over the word's bytes; a heap of candidate
  // merges ordered by (rank, position) picks the next one. Candidates are
  // checked when popped, as earlier merges may have consumed their symbols.
  // This is O(n log n), so a megabyte-long word costs no more than its size.
  struct Symbol {
    int32_t id;  // -1 once merged into its left neighbour
    int32_t prev, next;
  };
  struct Candidate {
    int32_t rank, left, left_id, right_id, result;
    bool operator>(const Candidate& o) const {
      return rank != o.rank ? rank > o.rank : left > o.left;
    }
  };
  // A byte without a token is dropped, and its neighbours become adjacent,
  // as in Hugging Face's BPE without an unknown token.
  std::vector<Symbol> symbols;
  symbols.reserve(word.size());
  for (char byte : word) {
    const int32_t id = byte_tokens_[static_cast<uint8_t>(byte)];
    if (id >= 0) symbols.push_back({id, static_cast<int32_t>(symbols.size()) - 1, -1});
  }
  const auto n = static_cast<int32_t>(symbols.size());
  for (int32_t i = 0; i + 1 < n; ++i) symbols[i].next = i + 1;
  std::priority_queue<Candidate, std::vector<Candidate>, std::greater<>> queue;
  auto consider = [&](int32_t left) {
    if (left < 0) return;
    const int32_t right = symbols[left].next;
    if (right < 0) return;
    auto it = merges_.find(pair_key(symbols[left].id, symbols[right].id));
    if (it != merges_.end()) {
      queue.push({it->second.rank, left, symbols[left].id, symbols[right].id, it->second.result});
    }
  };
  for (int32_t i = 0; i + 1 < n; ++i) consider(i);

  while (!queue.empty()) {
    const Candidate c = queue.top();
    queue.pop();
    Symbol& left = symbols[c.left];
    if (left.id != c.left_id || left.next < 0 || symbols[left.next].id != c.right_id) continue;
    Symbol& right = symbols[left.next];
    left.id = c.result;
    right.id = -1;
    left.next = right.next;
    if (left.next >= 0) symbols[left.next].prev = c.left;
    consider(left.prev);
    consider(c.left);
  }
  for (int32_t i = n > 0 ? 0 : -1; i >= 0; i = symbols[i].next) out.push_back(symbols[i].id);
}

}  // namespace duet
