#include "text/spm_tokenizer.h"

#include <algorithm>
#include <cstdio>
#include <queue>

#include "duet/error.h"

namespace duet {
namespace {

constexpr std::string_view kSpace = "\xE2\x96\x81";  // U+2581 "▁", SentencePiece's space

bool is_raw_text(TokenType type) {
  return type == TokenType::kControl || type == TokenType::kUserDefined ||
         type == TokenType::kUnknown;
}

// "<0x41>" -> 0x41; nullopt for any other text.
std::optional<uint8_t> byte_token_value(std::string_view text) {
  if (text.size() != 6 || !text.starts_with("<0x") || text.back() != '>') return std::nullopt;
  unsigned value = 0;
  for (char c : text.substr(3, 2)) {
    value <<= 4;
    if (c >= '0' && c <= '9') {
      value |= static_cast<unsigned>(c - '0');
    } else if (c >= 'A' && c <= 'F') {
      value |= static_cast<unsigned>(c - 'A' + 10);
    } else {
      return std::nullopt;
    }
  }
  return static_cast<uint8_t>(value);
}

std::string replace_all(std::string_view text, std::string_view from, std::string_view to) {
  std::string out;
  for (size_t i = 0; i < text.size();) {
    if (text.substr(i).starts_with(from)) {
      out += to;
      i += from.size();
    } else {
      out += text[i++];
    }
  }
  return out;
}

// Length of the character at the start of `text`: its UTF-8 sequence when
// the lead byte's continuation bytes follow, else 1 (a stray byte is a
// symbol of its own, so it never swallows the characters after it).
size_t char_length(std::string_view text) {
  const auto lead = static_cast<uint8_t>(text[0]);
  const size_t n = lead < 0xC0 ? 1 : lead < 0xE0 ? 2 : lead < 0xF0 ? 3 : lead < 0xF8 ? 4 : 1;
  if (n > text.size()) return 1;
  for (size_t i = 1; i < n; ++i) {
    if ((static_cast<uint8_t>(text[i]) & 0xC0) != 0x80) return 1;
  }
  return n;
}

}  // namespace

SpmTokenizer::SpmTokenizer(const Vocabulary& vocab, const std::string& source)
    : TableTokenizer(vocab.add_bos), add_space_prefix_(vocab.add_space_prefix) {
  auto malformed = [&](const std::string& what) {
    return Error(ErrorKind::kModelFile, source + ": " + what);
  };
  const size_t n = vocab.tokens.size();
  check_vocabulary_size(n, source);
  if (vocab.types.size() != n || vocab.scores.size() != n) {
    throw malformed("tokenizer.ggml.token_type has " + std::to_string(vocab.types.size()) +
                    " entries and tokenizer.ggml.scores " + std::to_string(vocab.scores.size()) +
                    " but tokenizer.ggml.tokens has " + std::to_string(n) +
                    "; a 'llama' tokenizer needs one of each per token");
  }
  texts_ = vocab.tokens;
  scores_ = vocab.scores;
  byte_tokens_.fill(-1);
  std::vector<std::string> pieces;
  std::vector<SpecialToken> specials;
  pieces.reserve(n);
  for (size_t i = 0; i < n; ++i) {
    const auto id = static_cast<int32_t>(i);
    const std::string& text = texts_[i];
    by_text_[text] = id;
    const TokenType type = vocab.types[i];
    if (type == TokenType::kByte) {
      const std::optional<uint8_t> byte = byte_token_value(text);
      if (!byte) {
        throw malformed("token " + std::to_string(id) + " '" + text +
                        "' is a byte token (type 6) but not written <0xXX>");
      }
      if (byte_tokens_[*byte] < 0) byte_tokens_[*byte] = id;
      pieces.emplace_back(1, static_cast<char>(*byte));
      continue;
    }
    if (is_raw_text(type)) {
      pieces.push_back(text);
      // The unknown token is matched, like a control token, only with
      // parse_special.
      if (!text.empty()) specials.push_back({text, id, type != TokenType::kUserDefined});
      continue;
    }
    pieces.push_back(replace_all(text, kSpace, " "));
  }
  // A byte without a byte token may still be a one-byte piece.
  for (int b = 0; b < 256; ++b) {
    if (byte_tokens_[b] >= 0) continue;
    const std::string one(1, static_cast<char>(b));
    auto found = by_text_.find(one);
    if (found != by_text_.end()) byte_tokens_[b] = found->second;
  }
  table_ =
      TokenTable(std::move(pieces), std::move(specials), vocab.bos, vocab.eos, vocab.eot, source);
}

std::vector<int32_t> SpmTokenizer::encode(std::string_view text, bool parse_special) const {
  // The text as fragments: stretches of raw text and special tokens. Each
  // special token, longest first, is cut out of every raw stretch left.
  struct Fragment {
    std::string_view text;
    int32_t token;  // -1: raw text
  };
  std::vector<Fragment> fragments = {{text, -1}};
  if (text.empty()) fragments.clear();
  for (const SpecialToken& s : table_.specials()) {
    if (s.control && !parse_special) continue;
    std::vector<Fragment> next;
    for (const Fragment& f : fragments) {
      if (f.token >= 0 || f.text.find(s.text) == std::string_view::npos) {
        next.push_back(f);
        continue;
      }
      std::string_view rest = f.text;
      for (size_t at; (at = rest.find(s.text)) != std::string_view::npos;) {
        if (at > 0) next.push_back({rest.substr(0, at), -1});
        next.push_back({s.text, s.id});
        rest = rest.substr(at + s.text.size());
      }
      if (!rest.empty()) next.push_back({rest, -1});
    }
    fragments = std::move(next);
  }
  std::vector<int32_t> out;
  bool after_special = true;  // the text's start counts as one
  for (const Fragment& f : fragments) {
    if (f.token >= 0) {
      out.push_back(f.token);
      after_special = true;
    } else {
      encode_stretch(f.text, after_special, out);
      after_special = false;
    }
  }
  return out;
}

void SpmTokenizer::encode_stretch(std::string_view raw, bool after_special,
                                  std::vector<int32_t>& out) const {
  std::string text = add_space_prefix_ && after_special ? std::string(kSpace) : std::string();
  text += replace_all(raw, " ", kSpace);

  // Symbols: the UTF-8 characters, linked; merged into their left neighbour
  // (size 0 after) as pairs are taken from the queue.
  struct Symbol {
    size_t start, size;
    int32_t prev, next;
  };
  struct Pair {
    float score;
    int32_t left, right;
    size_t size;  // both symbols' bytes when the pair was made
    bool operator<(const Pair& o) const {
      return score != o.score ? score < o.score : left > o.left;
    }
  };
  std::vector<Symbol> symbols;
  for (size_t at = 0; at < text.size();) {
    const size_t size = char_length(std::string_view(text).substr(at));
    const auto index = static_cast<int32_t>(symbols.size());
    symbols.push_back({at, size, index - 1, at + size == text.size() ? -1 : index + 1});
    at += size;
  }
  std::priority_queue<Pair> queue;
  auto consider = [&](int32_t left, int32_t right) {
    if (left < 0 || right < 0) return;
    const size_t size = symbols[left].size + symbols[right].size;
    auto it = by_text_.find(std::string_view(text).substr(symbols[left].start, size));
    if (it == by_text_.end()) return;
    queue.push({scores_[static_cast<size_t>(it->second)], left, right, size});
  };
  for (int32_t i = 1; i < static_cast<int32_t>(symbols.size()); ++i) consider(i - 1, i);
  while (!queue.empty()) {
    const Pair p = queue.top();
    queue.pop();
    Symbol& left = symbols[p.left];
    Symbol& right = symbols[p.right];
    if (left.size == 0 || right.size == 0 || left.size + right.size != p.size) continue;
    left.size += right.size;
    right.size = 0;
    left.next = right.next;
    if (right.next >= 0) symbols[right.next].prev = p.left;
    consider(left.prev, p.left);
    consider(p.left, left.next);
  }
  for (int32_t i = symbols.empty() ? -1 : 0; i >= 0; i = symbols[i].next) {
    const std::string_view s = std::string_view(text).substr(symbols[i].start, symbols[i].size);
    if (auto it = by_text_.find(s); it != by_text_.end()) {
      out.push_back(it->second);
      continue;
    }
    for (char byte : s) {
      const int32_t id = byte_tokens_[static_cast<uint8_t>(byte)];
      if (id >= 0) out.push_back(id);
    }
  }
}

}  // namespace duet
