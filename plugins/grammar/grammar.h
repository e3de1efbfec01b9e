// grammar.h — a context-free grammar over Unicode code points, as the
// grammar engine runs it, and its GBNF reader.
//
// GBNF (the notation llama.cpp made common) as read here:
//   root  ::= "{" ws pair ("," ws pair)* "}"    # a rule; `root` is the start
//   pair  ::= [a-z]+ ws ":" ws value            # [..] a class, [^..] its complement
//   value ::= "true" | "false" | . | ( "a" | "b" ){2,4}
// Terms: "literal" and [class] with the escapes \n \r \t \\ \" \] \- \xHH
// \uHHHH \UHHHHHHHH; `.` any code point; a rule name; ( group ). Postfix
// operators: * + ? {m} {m,} {m,n} (n at most kMaxRepeat). A rule may span
// lines: a newline ends a sequence unless inside parentheses, and a line
// starting with `|` adds an alternative. `#` starts a comment.
//
// The grammar is kept as flat sequences: every alternative of every rule is
// a run of Elements ended by a kEnd element. Groups and repetitions become
// rules of their own (named "<rule>~<n>"), so the only elements are code
// point classes and rule references.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace duet::grammar {

// Bounds on what a grammar may be, so that text from a request cannot
// exhaust memory or the stack: a repetition's count, rules (made-up ones
// included), elements, and nesting of parentheses (of rules at their left
// edge: 4 times as much).
inline constexpr uint32_t kMaxRepeat = 1000;
inline constexpr size_t kMaxRules = 20000;
inline constexpr size_t kMaxElements = 1000000;
inline constexpr size_t kMaxNesting = 64;

struct CodeRange {
  uint32_t lo, hi;  // inclusive
};

enum class ElementKind : uint8_t {
  kEnd,    // the alternative ends
  kChars,  // one code point in ranges [begin, end) (or not in them: negated)
  kRule,   // the rule `rule`
};

struct Element {
  ElementKind kind = ElementKind::kEnd;
  bool negated = false;
  uint32_t rule = 0;                          // kRule
  uint32_t ranges_begin = 0, ranges_end = 0;  // kChars, into Grammar::ranges
};

struct Grammar {
  std::vector<Element> elements;
  std::vector<CodeRange> ranges;
  // Per rule: the index in `elements` where each alternative starts.
  std::vector<std::vector<uint32_t>> alternatives;
  std::vector<std::string> names;
  uint32_t root = 0;

  // Whether kChars element `e` accepts code point `cp`.
  bool matches(const Element& e, uint32_t cp) const;
  // Whether it accepts some code point in [lo, hi].
  bool matches_any(const Element& e, uint32_t lo, uint32_t hi) const;
};

// Reads GBNF text. Throws duet::Error(kConfig) "<what> line L column C: ..."
// for a syntax error, an undefined rule, a missing `root`, a bound above
// exceeded, or a left-recursive rule (one that can reach itself before
// reading a code point: the engine could not run it).
// `what` names the source in messages ("grammar option 'gbnf'").
Grammar parse_gbnf(std::string_view text, const std::string& what);

}  // namespace duet::grammar
