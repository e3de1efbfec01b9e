#include "grammar.h"

#include <algorithm>
#include <functional>
#include <map>
#include <optional>

#include "duet/error.h"

namespace duet::grammar {

bool Grammar::matches(const Element& e, uint32_t cp) const { return matches_any(e, cp, cp); }

bool Grammar::matches_any(const Element& e, uint32_t lo, uint32_t hi) const {
  for (uint32_t i = e.ranges_begin; i < e.ranges_end; ++i) {
    const CodeRange& r = ranges[i];
    if (!e.negated && r.lo <= hi && lo <= r.hi) return true;
    // A negated class rejects [lo, hi] only when one of its ranges covers it.
    if (e.negated && r.lo <= lo && hi <= r.hi) return false;
  }
  return e.negated;
}

namespace {

constexpr uint32_t kMaxCodePoint = 0x10FFFF;

using Sequence = std::vector<Element>;

class Reader {
 public:
  Reader(std::string_view src, std::string what) : src_(src), what_(std::move(what)) {}

  Grammar read() {
    while (true) {
      skip_space(true);
      if (pos_ >= src_.size()) break;
      const size_t at = pos_;
      const std::string name = read_name();
      skip_space(false);
      if (src_.substr(pos_, 3) != "::=")
        fail(pos_, "expected '::=' after rule name '" + name + "'");
      pos_ += 3;
      skip_space(true);
      const uint32_t id = rule_id(name, at);
      if (defined_[id]) fail(at, "rule '" + name + "' is defined twice");
      defined_[id] = true;
      def_pos_[id] = at;
      rules_[id] = read_alternatives(name, false);
    }
    for (uint32_t id = 0; id < names_.size(); ++id) {
      if (!defined_[id]) fail(use_pos_[id], "rule '" + names_[id] + "' is used but never defined");
    }
    const auto root = index_.find("root");
    if (root == index_.end()) fail(src_.size(), "no rule named 'root' (the start rule)");
    Grammar g = flatten(root->second);
    check_left_recursion(g);
    return g;
  }

 private:
  [[noreturn]] void fail(size_t at, const std::string& message) const {
    size_t line = 1, column = 1;
    for (size_t i = 0; i < at && i < src_.size(); ++i) {
      column = src_[i] == '\n' ? 1 : column + 1;
      line += src_[i] == '\n';
    }
    throw Error(ErrorKind::kConfig, what_ + " line " + std::to_string(line) + " column " +
                                        std::to_string(column) + ": " + message);
  }

  char peek() const { return pos_ < src_.size() ? src_[pos_] : '\0'; }
  bool at_end() const { return pos_ >= src_.size(); }

  void skip_space(bool newlines) {
    while (!at_end()) {
      const char c = peek();
      if (c == ' ' || c == '\t' || (newlines && (c == '\n' || c == '\r'))) {
        ++pos_;
      } else if (c == '#') {
        while (!at_end() && peek() != '\n') ++pos_;
      } else {
        break;
      }
    }
  }

  static bool is_name_char(char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
           c == '_';
  }

  std::string read_name() {
    const size_t start = pos_;
    while (!at_end() && is_name_char(peek())) ++pos_;
    if (pos_ == start) {
      fail(pos_, std::string("expected a rule name, found ") + describe(peek()));
    }
    return std::string(src_.substr(start, pos_ - start));
  }

  static std::string describe(char c) {
    if (c == '\0') return "the end of the grammar";
    if (c == '\n') return "the end of the line";
    return std::string("'") + c + "'";
  }

  uint32_t rule_id(const std::string& name, size_t at) {
    auto [it, added] = index_.emplace(name, static_cast<uint32_t>(names_.size()));
    if (added && names_.size() >= kMaxRules) {
      fail(at, "the grammar needs more than " + std::to_string(kMaxRules) +
                   " rules (repetitions {m,n} make n of them); make it smaller");
    }
    if (added) {
      names_.push_back(name);
      rules_.emplace_back();
      defined_.push_back(false);
      def_pos_.push_back(at);
      use_pos_.push_back(at);
    }
    return it->second;
  }

  uint32_t new_rule(const std::string& parent, std::vector<Sequence> alternatives) {
    // '~' cannot appear in a written name, so a made-up one never clashes.
    const std::string name = parent + "~" + std::to_string(++generated_[parent]);
    const uint32_t id = rule_id(name, pos_);
    defined_[id] = true;
    rules_[id] = std::move(alternatives);
    return id;
  }

  static Element ref(uint32_t rule) {
    Element e;
    e.kind = ElementKind::kRule;
    e.rule = rule;
    return e;
  }

  Element chars(std::vector<CodeRange> ranges, bool negated) {
    Element e;
    e.kind = ElementKind::kChars;
    e.negated = negated;
    e.ranges_begin = static_cast<uint32_t>(ranges_.size());
    ranges_.insert(ranges_.end(), ranges.begin(), ranges.end());
    e.ranges_end = static_cast<uint32_t>(ranges_.size());
    return e;
  }

  std::vector<Sequence> read_alternatives(const std::string& rule, bool nested) {
    std::vector<Sequence> alternatives;
    alternatives.push_back(read_sequence(rule, nested));
    while (true) {
      const size_t save = pos_;
      skip_space(true);
      if (peek() != '|') {
        pos_ = save;
        return alternatives;
      }
      ++pos_;
      skip_space(true);
      alternatives.push_back(read_sequence(rule, nested));
    }
  }

  Sequence read_sequence(const std::string& rule, bool nested) {
    Sequence seq;
    while (true) {
      skip_space(nested);
      const char c = peek();
      if (at_end() || c == '|' || c == ')' || c == '\n' || c == '\r') break;
      const size_t at = pos_;
      Sequence term = read_term(rule, nested);
      apply_postfix(rule, at, term);
      seq.insert(seq.end(), term.begin(), term.end());
      elements_ += term.size();
      if (elements_ > kMaxElements) {
        fail(at, "the grammar has more than " + std::to_string(kMaxElements) +
                     " elements (repetitions {m} copy their term m times); make it smaller");
      }
    }
    if (peek() == ')' && !nested) fail(pos_, "')' without '('");
    return seq;
  }

  Sequence read_term(const std::string& rule, bool nested) {
    const size_t at = pos_;
    const char c = peek();
    if (c == '"') {
      ++pos_;
      Sequence literal;
      while (peek() != '"') {
        if (at_end() || peek() == '\n') fail(at, "the literal is not closed with '\"'");
        const uint32_t cp = read_char();
        literal.push_back(chars({{cp, cp}}, false));
      }
      ++pos_;
      return literal;
    }
    if (c == '[') {
      ++pos_;
      const bool negated = peek() == '^';
      if (negated) ++pos_;
      std::vector<CodeRange> ranges;
      while (peek() != ']') {
        if (at_end() || peek() == '\n') fail(at, "the class is not closed with ']'");
        const uint32_t lo = read_char();
        uint32_t hi = lo;
        if (peek() == '-' && pos_ + 1 < src_.size() && src_[pos_ + 1] != ']') {
          ++pos_;
          hi = read_char();
          if (hi < lo) fail(at, "a class range runs backwards");
        }
        ranges.push_back({lo, hi});
      }
      ++pos_;
      if (ranges.empty() && !negated) fail(at, "an empty class [] matches nothing");
      return {chars(std::move(ranges), negated)};
    }
    if (c == '.') {
      ++pos_;
      return {chars({{0, kMaxCodePoint}}, false)};
    }
    if (c == '(') {
      if (++nesting_ > kMaxNesting)
        fail(at, "parentheses nest deeper than " + std::to_string(kMaxNesting));
      ++pos_;
      skip_space(true);
      std::vector<Sequence> group = read_alternatives(rule, true);
      --nesting_;
      skip_space(true);
      if (peek() != ')') fail(at, "'(' is not closed with ')'");
      ++pos_;
      return {ref(new_rule(rule, std::move(group)))};
    }
    if (is_name_char(c)) {
      const std::string name = read_name();
      const uint32_t id = rule_id(name, at);
      return {ref(id)};
    }
    (void)nested;
    fail(at, "expected a literal, a class, '.', '(' or a rule name, found " + describe(c));
  }

  // One code point of a literal or class, escapes decoded.
  uint32_t read_char() {
    const size_t at = pos_;
    const auto byte = static_cast<unsigned char>(src_[pos_++]);
    if (byte == '\\') {
      if (at_end()) fail(at, "a '\\' ends the grammar");
      const char e = src_[pos_++];
      switch (e) {
        case 'n':
          return '\n';
        case 'r':
          return '\r';
        case 't':
          return '\t';
        case '\\':
        case '"':
        case '\'':
        case ']':
        case '[':
        case '-':
        case '^':
        case '/':
          return static_cast<unsigned char>(e);
        case 'x':
          return read_hex(2, at);
        case 'u':
          return read_hex(4, at);
        case 'U':
          return read_hex(8, at);
        default:
          fail(at, std::string("unknown escape '\\") + e + "'");
      }
    }
    if (byte < 0x80) return byte;
    int extra = byte >= 0xF0 ? 3 : byte >= 0xE0 ? 2 : byte >= 0xC0 ? 1 : -1;
    if (extra < 0 || byte > 0xF4) fail(at, "the grammar is not valid UTF-8");
    uint32_t cp = byte & (0x3Fu >> extra);
    for (int i = 0; i < extra; ++i) {
      if (at_end() || (static_cast<unsigned char>(peek()) & 0xC0) != 0x80)
        fail(at, "the grammar is not valid UTF-8");
      cp = (cp << 6) | (static_cast<unsigned char>(src_[pos_++]) & 0x3F);
    }
    return cp;
  }

  uint32_t read_hex(int digits, size_t at) {
    uint32_t v = 0;
    for (int i = 0; i < digits; ++i) {
      const char h = peek();
      int d = h >= '0' && h <= '9'   ? h - '0'
              : h >= 'a' && h <= 'f' ? h - 'a' + 10
              : h >= 'A' && h <= 'F' ? h - 'A' + 10
                                     : -1;
      if (d < 0) fail(at, "the escape needs " + std::to_string(digits) + " hex digits");
      v = v * 16 + static_cast<uint32_t>(d);
      ++pos_;
    }
    if (v > kMaxCodePoint) fail(at, "the escape is above U+10FFFF");
    return v;
  }

  std::optional<uint32_t> read_number() {
    const size_t start = pos_;
    uint64_t v = 0;
    while (peek() >= '0' && peek() <= '9') {
      v = v * 10 + static_cast<uint64_t>(peek() - '0');
      if (v > kMaxRepeat) fail(start, "a repetition bound above " + std::to_string(kMaxRepeat));
      ++pos_;
    }
    if (pos_ == start) return std::nullopt;
    return static_cast<uint32_t>(v);
  }

  // X* as a rule R ::= X R | (empty); X? as R ::= X | (empty).
  uint32_t star(const std::string& rule, const Sequence& x) {
    const uint32_t id = new_rule(rule, {});
    Sequence again = x;
    again.push_back(ref(id));
    rules_[id] = {again, {}};
    return id;
  }
  uint32_t optional(const std::string& rule, const Sequence& x) { return new_rule(rule, {x, {}}); }

  void apply_postfix(const std::string& rule, size_t at, Sequence& term) {
    const char c = peek();
    if (c != '*' && c != '+' && c != '?' && c != '{') return;
    if (term.empty())
      fail(at, "nothing to repeat: the term before '" + std::string(1, c) + "' is empty");
    // A literal of several code points repeats as a whole.
    if (term.size() > 1) term = {ref(new_rule(rule, {term}))};
    ++pos_;
    uint32_t min = 0;
    std::optional<uint32_t> max;
    if (c == '*') {
      max.reset();
    } else if (c == '+') {
      min = 1;
    } else if (c == '?') {
      max = 1;
    } else {
      skip_space(false);
      const std::optional<uint32_t> m = read_number();
      if (!m) fail(pos_, "expected a number after '{'");
      min = *m;
      skip_space(false);
      if (peek() == ',') {
        ++pos_;
        skip_space(false);
        max = read_number();
        if (max && *max < min) fail(at, "a repetition {m,n} with n < m");
      } else {
        max = min;
      }
      skip_space(false);
      if (peek() != '}') fail(pos_, "expected '}' to close the repetition");
      ++pos_;
    }
    Sequence out;
    for (uint32_t i = 0; i < min; ++i) out.insert(out.end(), term.begin(), term.end());
    if (!max) {
      out.push_back(ref(star(rule, term)));
    } else if (*max > min) {
      // (X (X (X)?)?)? for up to max - min more.
      uint32_t inner = optional(rule, term);
      for (uint32_t i = min + 1; i < *max; ++i) {
        Sequence x = term;
        x.push_back(ref(inner));
        inner = optional(rule, x);
      }
      out.push_back(ref(inner));
    }
    term = std::move(out);
  }

  Grammar flatten(uint32_t root) {
    Grammar g;
    g.root = root;
    g.names = names_;
    g.ranges = ranges_;
    g.alternatives.resize(rules_.size());
    for (size_t r = 0; r < rules_.size(); ++r) {
      for (const Sequence& alt : rules_[r]) {
        g.alternatives[r].push_back(static_cast<uint32_t>(g.elements.size()));
        g.elements.insert(g.elements.end(), alt.begin(), alt.end());
        g.elements.push_back(Element{});
      }
      if (g.elements.size() > kMaxElements) {
        fail(src_.size(), "the grammar has more than " + std::to_string(kMaxElements) +
                              " elements; make it smaller");
      }
    }
    return g;
  }

  void check_left_recursion(const Grammar& g) {
    const size_t n = g.alternatives.size();
    std::vector<bool> nullable(n, false);
    for (bool changed = true; changed;) {
      changed = false;
      for (size_t r = 0; r < n; ++r) {
        if (nullable[r]) continue;
        for (uint32_t start : g.alternatives[r]) {
          bool all = true;
          for (uint32_t i = start; g.elements[i].kind != ElementKind::kEnd; ++i) {
            const Element& e = g.elements[i];
            if (e.kind == ElementKind::kChars || !nullable[e.rule]) {
              all = false;
              break;
            }
          }
          if (all) {
            nullable[r] = changed = true;
            break;
          }
        }
      }
    }
    // The rules reachable at each rule's left edge, before any code point: a
    // cycle is left recursion, and the longest path is how deep the matcher
    // expands at once. Depth-first with an explicit stack.
    std::vector<std::vector<uint32_t>> left(n);
    for (uint32_t r = 0; r < n; ++r) {
      for (uint32_t start : g.alternatives[r]) {
        for (uint32_t i = start; g.elements[i].kind == ElementKind::kRule; ++i) {
          left[r].push_back(g.elements[i].rule);
          if (!nullable[g.elements[i].rule]) break;
        }
      }
    }
    std::vector<int> state(n, 0);  // 0 unseen, 1 on the path, 2 done
    std::vector<uint32_t> depth(n, 0);
    struct Frame {
      uint32_t rule;
      size_t next;
    };
    for (uint32_t root = 0; root < n; ++root) {
      if (state[root] != 0) continue;
      std::vector<Frame> path{{root, 0}};
      state[root] = 1;
      while (!path.empty()) {
        Frame& f = path.back();
        if (f.next == left[f.rule].size()) {
          state[f.rule] = 2;
          const uint32_t done = f.rule;
          path.pop_back();
          if (!path.empty()) {
            uint32_t& d = depth[path.back().rule];
            d = std::max(d, depth[done] + 1);
            if (d > kMaxNesting * 4) {
              fail(def_pos_[root], "rules nest more than " + std::to_string(kMaxNesting * 4) +
                                       " deep at their left edge; make the grammar flatter");
            }
          }
          continue;
        }
        const uint32_t current = f.rule;  // f dangles once path grows
        const uint32_t next = left[current][f.next++];
        if (state[next] == 1) {
          fail(def_pos_[next], "rule '" + names_[next] +
                                   "' is left-recursive (it can reach itself before reading a "
                                   "character); write it with right recursion or a repetition");
        }
        if (state[next] == 2) {
          depth[current] = std::max(depth[current], depth[next] + 1);
        } else {
          state[next] = 1;
          path.push_back({next, 0});
        }
        if (path.size() > kMaxNesting * 4 || depth[current] > kMaxNesting * 4) {
          fail(def_pos_[root], "rules nest more than " + std::to_string(kMaxNesting * 4) +
                                   " deep at their left edge; make the grammar flatter");
        }
      }
    }
  }

  std::string_view src_;
  std::string what_;
  size_t pos_ = 0;
  std::vector<std::vector<Sequence>> rules_;
  std::vector<std::string> names_;
  std::map<std::string, uint32_t> index_;
  std::vector<bool> defined_;
  std::vector<size_t> def_pos_, use_pos_;
  std::vector<CodeRange> ranges_;
  std::map<std::string, int> generated_;
  size_t nesting_ = 0;
  size_t elements_ = 0;  // written so far, copies included
};

}  // namespace

Grammar parse_gbnf(std::string_view text, const std::string& what) {
  return Reader(text, what).read();
}

}  // namespace duet::grammar
