#include "grammar_matcher.h"

#include <algorithm>
#include <cstddef>
#include <cstring>

namespace duet::grammar {

std::string MatchState::key() const {
  std::string k(sizeof(uint32_t) * stacks.size() + 6, '\0');
  std::memcpy(k.data(), stacks.data(), sizeof(uint32_t) * stacks.size());
  std::memcpy(k.data() + k.size() - 6, &partial, sizeof partial);
  k[k.size() - 2] = static_cast<char>(partial_left);
  k.back() = static_cast<char>(partial_size);
  return k;
}

MatchState Matcher::start() const {
  MatchState s;
  Expanded seen;
  for (uint32_t alt : g_.alternatives[g_.root]) expand({alt}, s, seen);
  return s;
}

void Matcher::add(const std::vector<uint32_t>& stack, MatchState& out) const {
  // Duplicates are common (two alternatives meeting again); keep one.
  size_t count = 0;
  for (size_t i = 0; i < out.stacks.size(); i += out.stacks[i] + 1, ++count) {
    if (out.stacks[i] == stack.size() &&
        std::equal(stack.begin(), stack.end(), out.stacks.begin() + static_cast<ptrdiff_t>(i) + 1))
      return;
  }
  if (count >= kMaxStacks) return;  // beyond the bound, further ways are dropped
  out.stacks.push_back(static_cast<uint32_t>(stack.size()));
  out.stacks.insert(out.stacks.end(), stack.begin(), stack.end());
}

void Matcher::expand(std::vector<uint32_t> stack, MatchState& out, Expanded& seen) const {
  while (!stack.empty() && g_.elements[stack.back()].kind == ElementKind::kEnd) stack.pop_back();
  if (stack.empty() || g_.elements[stack.back()].kind == ElementKind::kChars) {
    add(stack, out);
    return;
  }
  // A stack already expanded in this step adds nothing new (nullable rules
  // make many paths meet); without this, `a a a ... ` with `a ::= "x" | ""`
  // would take time exponential in its length.
  if (seen.size() >= kMaxExpansions || !seen.insert(stack).second) return;
  const uint32_t rule = g_.elements[stack.back()].rule;
  // Where the reference's rule returns to; none when the reference ends its
  // alternative (a tail call), so right recursion does not grow the stack.
  ++stack.back();
  if (g_.elements[stack.back()].kind == ElementKind::kEnd) stack.pop_back();
  for (uint32_t alt : g_.alternatives[rule]) {
    std::vector<uint32_t> next = stack;
    next.push_back(alt);
    expand(std::move(next), out, seen);
  }
}

bool Matcher::step(const MatchState& in, uint32_t cp, MatchState& out) const {
  out.stacks.clear();
  out.partial = 0;
  out.partial_left = 0;
  out.partial_size = 0;
  std::vector<uint32_t> stack;
  Expanded seen;
  for (size_t i = 0; i < in.stacks.size(); i += in.stacks[i] + 1) {
    const uint32_t n = in.stacks[i];
    if (n == 0) continue;
    const uint32_t top = in.stacks[i + n];
    if (!g_.matches(g_.elements[top], cp)) continue;
    stack.assign(in.stacks.begin() + static_cast<ptrdiff_t>(i) + 1,
                 in.stacks.begin() + static_cast<ptrdiff_t>(i + n) + 1);
    ++stack.back();
    expand(stack, out, seen);
  }
  return !out.stacks.empty();
}

bool Matcher::possible(const MatchState& in, uint32_t lo, uint32_t hi) const {
  // Surrogates are not characters; a range may straddle them.
  const auto any = [&](uint32_t a, uint32_t b) {
    if (a > b) return false;
    for (size_t i = 0; i < in.stacks.size(); i += in.stacks[i] + 1) {
      const uint32_t n = in.stacks[i];
      if (n != 0 && g_.matches_any(g_.elements[in.stacks[i + n]], a, b)) return true;
    }
    return false;
  };
  return any(lo, std::min<uint32_t>(hi, 0xD7FF)) || any(std::max<uint32_t>(lo, 0xE000), hi);
}

namespace {
// The smallest code point a UTF-8 sequence of `size` bytes may encode.
uint32_t smallest(int size) { return size == 2 ? 0x80 : size == 3 ? 0x800 : 0x10000; }
}  // namespace

bool Matcher::advance(const MatchState& in, uint8_t byte, MatchState& out) const {
  int size, left;
  uint32_t bits;
  if (in.partial_left == 0) {
    if (byte < 0x80) return step(in, byte, out);
    size = byte >= 0xF0 ? 4 : byte >= 0xE0 ? 3 : byte >= 0xC2 ? 2 : 0;
    if (size == 0 || byte > 0xF4) return false;  // a continuation byte, or never UTF-8
    bits = byte & (0x7Fu >> size);
    left = size - 1;
  } else {
    if ((byte & 0xC0) != 0x80) return false;
    size = in.partial_size;
    bits = (in.partial << 6) | (byte & 0x3Fu);
    left = in.partial_left - 1;
  }
  if (left == 0) {
    if (bits < smallest(size) || bits > 0x10FFFF || (bits >= 0xD800 && bits <= 0xDFFF))
      return false;  // overlong, too large, or a surrogate
    return step(in, bits, out);
  }
  const uint32_t lo = std::max(bits << (6 * left), smallest(size));
  const uint32_t hi = std::min<uint32_t>((bits << (6 * left)) | ((1u << (6 * left)) - 1), 0x10FFFF);
  if (lo > hi || !possible(in, lo, hi)) return false;
  out.stacks = in.stacks;
  out.partial = bits;
  out.partial_left = static_cast<uint8_t>(left);
  out.partial_size = static_cast<uint8_t>(size);
  return true;
}

bool Matcher::advance(MatchState& state, std::string_view text) const {
  MatchState next;
  for (char c : text) {
    if (!advance(state, static_cast<uint8_t>(c), next)) return false;
    std::swap(state, next);
  }
  return true;
}

bool Matcher::accepting(const MatchState& state) const {
  if (state.partial_left != 0) return false;
  for (size_t i = 0; i < state.stacks.size(); i += state.stacks[i] + 1) {
    if (state.stacks[i] == 0) return true;
  }
  return false;
}

bool Matcher::can_continue(const MatchState& state) const {
  for (size_t i = 0; i < state.stacks.size(); i += state.stacks[i] + 1) {
    if (state.stacks[i] != 0) return true;
  }
  return false;
}

}  // namespace duet::grammar
