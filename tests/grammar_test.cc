// The grammar engine (plugins/grammar): GBNF reading and its errors, the
// matcher on texts whose membership is known, token masks against a
// token-by-token check, and the link in a sampler chain's place.
#include "grammar.h"

#include <gtest/gtest.h>

#include <random>
#include <set>

#include "duet/error.h"
#include "grammar_link.h"
#include "grammar_matcher.h"
#include "json_schema_gbnf.h"
#include "list_tokenizer.h"
#include "token_masks.h"

namespace duet::grammar {
namespace {

using testing_support::ListTokenizer;

bool accepts(const std::string& gbnf, const std::string& text) {
  const Grammar g = parse_gbnf(gbnf, "test");
  const Matcher m(g);
  MatchState s = m.start();
  return m.advance(s, text) && m.accepting(s);
}

bool is_prefix(const std::string& gbnf, const std::string& text) {
  const Grammar g = parse_gbnf(gbnf, "test");
  const Matcher m(g);
  MatchState s = m.start();
  return m.advance(s, text);
}

std::string error_of(const std::string& gbnf) {
  try {
    parse_gbnf(gbnf, "g");
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kConfig);
    return e.what();
  }
  return "";
}

TEST(Gbnf, LiteralsClassesAndRepetitions) {
  const std::string g = R"(root ::= "a"{2,3} [0-9]+ ("x" | "yz")? [^abc]*)";
  EXPECT_TRUE(accepts(g, "aa1"));
  EXPECT_TRUE(accepts(g, "aaa12x"));
  EXPECT_TRUE(accepts(g, "aa9yzQQ"));
  EXPECT_FALSE(accepts(g, "a1"));
  EXPECT_FALSE(accepts(g, "aaaa1"));
  EXPECT_FALSE(accepts(g, "aa"));     // a digit is needed
  EXPECT_FALSE(accepts(g, "aa1xa"));  // [^abc] refuses a
  EXPECT_TRUE(is_prefix(g, "aa"));
  EXPECT_FALSE(is_prefix(g, "ab"));
}

TEST(Gbnf, RulesAcrossLinesCommentsAndEscapes) {
  const std::string g =
      "# a list\n"
      "root ::= item (\",\" item)*  # items\n"
      "item ::= \"\\\"\" [a-z\\-]* \"\\\"\"\n"
      "       | \"\\x41\" | \"\\u00e9\"\n";
  EXPECT_TRUE(accepts(g, "\"ab-c\",A,\xC3\xA9"));
  EXPECT_FALSE(accepts(g, "\"ab-c\","));
  EXPECT_FALSE(accepts(g, "B"));
}

TEST(Gbnf, CharactersSplitAcrossBytes) {
  const std::string g = "root ::= [α-ω]+";
  const Grammar grammar = parse_gbnf(g, "test");
  const Matcher m(grammar);
  MatchState s = m.start();
  const std::string text = "αβ";  // 2 bytes each
  MatchState next;
  ASSERT_TRUE(
      m.advance(s, static_cast<uint8_t>(text[0]), next));  // a lead byte that may become α..ω
  EXPECT_FALSE(m.accepting(next));
  s = next;
  ASSERT_TRUE(m.advance(s, static_cast<uint8_t>(text[1]), next));
  EXPECT_TRUE(m.accepting(next));
  EXPECT_FALSE(is_prefix(g, "\xD0"));  // a lead byte of Cyrillic: no Greek can follow
  EXPECT_FALSE(is_prefix(g, "\x80"));  // a continuation byte first is never UTF-8
  EXPECT_FALSE(is_prefix("root ::= .+", "\xE0\x80\x80"));  // overlong
  EXPECT_FALSE(is_prefix("root ::= .+", "\xED\xA0\x80"));  // a surrogate
  EXPECT_TRUE(is_prefix("root ::= .+", "\xF0\x9F\x98\x80"));
}

TEST(Gbnf, RightRecursionKeepsStacksShort) {
  const Grammar g = parse_gbnf("root ::= \"a\" root | \"b\"", "test");
  const Matcher m(g);
  MatchState s = m.start();
  ASSERT_TRUE(m.advance(s, std::string(10000, 'a')));
  EXPECT_LT(s.stacks.size(), 16u);
  EXPECT_TRUE(m.advance(s, "b"));
  EXPECT_TRUE(m.accepting(s));
}

TEST(Gbnf, ErrorsNameTheLineAndTheFix) {
  EXPECT_NE(
      error_of("root ::= item").find("line 1 column 10: rule 'item' is used but never defined"),
      std::string::npos)
      << error_of("root ::= item");
  EXPECT_NE(error_of("item ::= \"a\"").find("no rule named 'root'"), std::string::npos);
  EXPECT_NE(error_of("root ::= root \"a\" | \"b\"").find("left-recursive"), std::string::npos);
  EXPECT_NE(error_of("root ::= x\nx ::= y \"a\"\ny ::= \"\" | x").find("left-recursive"),
            std::string::npos);
  EXPECT_NE(error_of("root ::= \"a\"\nroot ::= \"b\"")
                .find("line 2 column 1: rule 'root' is defined twice"),
            std::string::npos);
  EXPECT_NE(error_of("root ::= \"abc").find("not closed"), std::string::npos);
  EXPECT_NE(error_of("root ::= [z-a]").find("backwards"), std::string::npos);
  EXPECT_NE(error_of("root ::= \"a\"{3,2}").find("n < m"), std::string::npos);
  EXPECT_NE(error_of("root ::= \"a\"{1001}").find("above 1000"), std::string::npos);
  EXPECT_NE(error_of("root ::= \"\\q\"").find("unknown escape"), std::string::npos);
  EXPECT_NE(error_of("root ::= \"\"*").find("nothing to repeat"), std::string::npos);
  EXPECT_NE(error_of("root = \"a\"").find("expected '::='"), std::string::npos);
}

TEST(Gbnf, HostileGrammarsAreBoundedNotSlowOrDeep) {
  // Nullable alternatives meeting again: linear with the expansion memo,
  // 3^40 paths without it.
  std::string many = "root ::=";
  for (int i = 0; i < 40; ++i) many += " a";
  many += " \"b\"\na ::= \"x\" | \"\" | \"\"";
  EXPECT_TRUE(accepts(many, "xxb"));
  EXPECT_TRUE(accepts(many, "b"));
  EXPECT_NE(error_of("root ::= " + std::string(100, '(') + "\"a\"" + std::string(100, ')'))
                .find("parentheses nest deeper than 64"),
            std::string::npos);
  std::string chain = "root ::= r0\n";
  for (int i = 0; i < 400; ++i) {
    chain += 'r';
    chain += std::to_string(i);
    chain += " ::= r";
    chain += std::to_string(i + 1);
    chain += '\n';
  }
  chain += "r400 ::= \"a\"\n";
  EXPECT_NE(error_of(chain).find("deep at their left edge"), std::string::npos);
  std::string big = "root ::=";
  for (int i = 0; i < 25; ++i) big += " \"a\"{0,1000}";
  EXPECT_NE(error_of(big).find("more than 20000 rules"), std::string::npos);
}

TEST(Gbnf, MadeUpRuleNamesNeverClashWithWrittenOnes) {
  const std::string g = "root-1 ::= \"b\"\nroot ::= (\"a\") root-1";
  EXPECT_TRUE(accepts(g, "ab"));
  EXPECT_FALSE(accepts(g, "aa"));
}

// Schemas a review found mishandled: each now validates or is refused.
TEST(JsonSchemaGbnf, KeywordCombinationsAreEnforcedOrRefused) {
  const auto refused = [](const std::string& schema) {
    try {
      json_schema_to_gbnf(schema, "s");
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  EXPECT_NE(refused(R"({"enum": ["a", "bb"], "maxLength": 1})").find("'maxLength' beside 'enum'"),
            std::string::npos);
  EXPECT_NE(refused(R"({"type": "object", "allOf": [{"type": "object"}]})").find("beside 'allOf'"),
            std::string::npos);
  EXPECT_NE(refused(R"({"$ref": "#", "minItems": 1})").find("beside '$ref'"), std::string::npos);
  EXPECT_NE(
      refused(R"({"type": "string", "nullable": "yes"})").find("nullable must be true or false"),
      std::string::npos);
  std::string deep = "{}";
  for (int i = 0; i < 100; ++i) deep = R"({"items": )" + deep + "}";
  EXPECT_NE(refused(deep).find("nest deeper than 64"), std::string::npos);
  // Without a type, maxLength binds strings: only strings are written.
  const std::string g = json_schema_to_gbnf(R"({"maxLength": 2})", "s");
  EXPECT_TRUE(accepts(g, "\"ab\""));
  EXPECT_FALSE(accepts(g, "\"abc\""));
  // enum with a type keeps the values of that type.
  const std::string e = json_schema_to_gbnf(R"({"type": "string", "enum": ["a", 1]})", "s");
  EXPECT_TRUE(accepts(e, "\"a\""));
  EXPECT_FALSE(accepts(e, "1"));
  // Two bounded strings as prefix items: made-up and written names differ.
  EXPECT_EQ(refused(R"({"prefixItems": [{"type": "string", "maxLength": 2},
                                         {"type": "string", "maxLength": 2}], "items": false})"),
            "");
  // $defs whose names differ only in punctuation stay apart.
  const std::string d = json_schema_to_gbnf(
      R"({"type": "array", "prefixItems": [{"$ref": "#/$defs/a b"}, {"$ref": "#/$defs/a_b"}],
          "items": false, "minItems": 2,
          "$defs": {"a b": {"type": "integer"}, "a_b": {"type": "string"}}})",
      "s");
  EXPECT_TRUE(accepts(d, R"([1, "x"])"));
  EXPECT_FALSE(accepts(d, R"([1, 2])"));
  // A surrogate escape would count twice against maxLength: not written.
  EXPECT_FALSE(is_prefix(json_schema_to_gbnf(R"({"type": "string"})", "s"), "\"\\ud83d"));
  EXPECT_TRUE(accepts(json_schema_to_gbnf(R"({"type": "string"})", "s"), "\"\\u00e9\""));
}

// duet serve's forced tool calls: a schema between literal texts; "#"
// still refers to the schema, not to the wrapped whole.
TEST(JsonSchemaGbnf, APrefixAndSuffixWrapTheJson) {
  Options options("chain[0].grammar");
  options.set("json_schema",
              R"({"type": "object", "properties": {"name": {"const": "f"}, "next": {"$ref": "#"}},
                  "required": ["name"]})");
  options.set("prefix", "<tool_call>\n");
  options.set("suffix", "\n</tool_call>");
  const std::string g = grammar_text(options);
  EXPECT_TRUE(accepts(g, "<tool_call>\n{\"name\": \"f\"}\n</tool_call>"));
  EXPECT_TRUE(
      accepts(g, "<tool_call>\n{\"name\": \"f\", \"next\": {\"name\": \"f\"}}\n</tool_call>"));
  EXPECT_FALSE(accepts(g, "{\"name\": \"f\"}"));
  EXPECT_FALSE(accepts(g, "<tool_call>\n{\"name\": \"f\"}"));
  EXPECT_FALSE(accepts(g, "<tool_call>\n{\"name\": \"f\", \"next\": <tool_call>"));
  // Quotes and backslashes in the texts are literal.
  Options quoted("chain[0].grammar");
  quoted.set("json_schema", R"({"type": "integer"})");
  quoted.set("prefix", "\"\\");
  EXPECT_TRUE(accepts(grammar_text(quoted), "\"\\12"));
  // Only beside a JSON Schema.
  Options gbnf("chain[0].grammar");
  gbnf.set("gbnf", "root ::= \"a\"");
  gbnf.set("prefix", "x");
  EXPECT_THROW(grammar_text(gbnf), Error);
}

TEST(JsonSchemaGbnf, LargeEnumsAndRepeatedBoundsStayWithinTheEngine) {
  // 300 values sharing their first characters: a trie of rules, so the
  // matcher never holds more ways than distinct next characters.
  std::string values;
  for (int i = 0; i < 300; ++i) values += (i ? ", \"v" : "\"v") + std::to_string(i) + "\"";
  const std::string e = json_schema_to_gbnf(R"({"enum": [)" + values + "]}", "s");
  EXPECT_TRUE(accepts(e, "\"v299\""));
  EXPECT_TRUE(accepts(e, "\"v3\""));
  EXPECT_FALSE(accepts(e, "\"v300\""));
  const Grammar g = parse_gbnf(e, "s");
  const Matcher m(g);
  MatchState s = m.start();
  ASSERT_TRUE(m.advance(s, "\"v"));
  size_t ways = 0;
  for (size_t i = 0; i < s.stacks.size(); i += s.stacks[i] + 1) ++ways;
  EXPECT_LE(ways, 10u);
  // Twenty strings bounded alike share one rule of 1,000 repetitions.
  std::string props;
  for (int i = 0; i < 20; ++i)
    props +=
        (i ? ", \"p" : "\"p") + std::to_string(i) + R"(": {"type": "string", "maxLength": 1000})";
  EXPECT_NO_THROW(parse_gbnf(json_schema_to_gbnf("{\"properties\": {" + props + "}}", "s"), "s"));
  // An integer enum value beyond int64 is still an integer.
  EXPECT_TRUE(accepts(json_schema_to_gbnf(R"({"type": "integer", "enum": [1e20]})", "s"), "1e+20"));
}

TEST(Gbnf, RepetitionsCountTowardsTheElementBound) {
  std::string g = "root ::=";
  for (int i = 0; i < 1100; ++i) g += " x{1000}";
  g += "\nx ::= \"a\"";
  EXPECT_NE(error_of(g).find("more than 1000000 elements"), std::string::npos);
}

// Every byte, some multi-byte words, a split character, two control tokens.
ListTokenizer test_vocabulary() {
  std::vector<std::string> pieces;
  for (int b = 0; b < 256; ++b) pieces.emplace_back(1, static_cast<char>(b));
  for (const char* w : {"{\"", "\":", "\": ", "\",", "true", "false", "null", "12", "ab", "\"}",
                        "\xCE", "\xB1", "\xCE\xB1", "<|end|>", "<|ctl|>", "name", "\"name\""})
    pieces.emplace_back(w);
  const auto id_of = [&](const std::string& p) {
    return static_cast<int32_t>(std::find(pieces.begin(), pieces.end(), p) - pieces.begin());
  };
  return ListTokenizer(pieces, {id_of("<|end|>"), id_of("<|ctl|>")}, id_of("<|end|>"));
}

// The mask from the trie walk against advancing the state by each token alone.
void expect_mask_matches_token_by_token(const CompiledGrammar& cg, const ListTokenizer& tok,
                                        const MatchState& state) {
  const std::shared_ptr<const TokenMask> mask = cg.mask(state);
  for (int32_t id = 0; id < tok.vocab_size(); ++id) {
    bool expected;
    if (tok.is_end_of_generation(id)) {
      expected = cg.matcher().accepting(state);
    } else if (tok.is_control(id) || tok.piece(id).empty()) {
      expected = false;
    } else {
      MatchState s = state;
      expected = cg.matcher().advance(s, tok.piece(id));
    }
    EXPECT_EQ(mask->allows(id), expected) << "token " << id << " '" << tok.piece(id) << "'";
  }
}

TEST(TokenMasks, EqualTokenByTokenChecksAlongRandomOutputs) {
  const ListTokenizer tok = test_vocabulary();
  auto trie = std::make_shared<const TokenTrie>(tok);
  const std::string schema = R"({"type": "object", "properties": {
      "name": {"type": "string", "maxLength": 6},
      "tags": {"type": "array", "items": {"enum": ["ab", "α", 12, null]}, "maxItems": 3},
      "ok": {"type": "boolean"}}, "required": ["name", "ok"]})";
  const CompiledGrammar cg(parse_gbnf(json_schema_to_gbnf(schema, "schema"), "schema"), trie);
  std::mt19937 rng(5);
  for (int run = 0; run < 20; ++run) {
    MatchState state = cg.matcher().start();
    std::string text;
    for (int step = 0; step < 60; ++step) {
      expect_mask_matches_token_by_token(cg, tok, state);
      const std::shared_ptr<const TokenMask> mask = cg.mask(state);
      std::vector<int32_t> allowed;
      for (int32_t id = 0; id < tok.vocab_size(); ++id)
        if (mask->allows(id)) allowed.push_back(id);
      ASSERT_FALSE(allowed.empty()) << "after '" << text << "'";
      const int32_t id = allowed[rng() % allowed.size()];
      if (tok.is_end_of_generation(id)) break;
      ASSERT_TRUE(cg.matcher().advance(state, tok.piece(id)));
      text += tok.piece(id);
    }
  }
  EXPECT_GT(cg.hits(), 0u);
}

TEST(TokenMasks, EndOfGenerationOnlyWhereTheOutputIsComplete) {
  const ListTokenizer tok = test_vocabulary();
  auto trie = std::make_shared<const TokenTrie>(tok);
  const CompiledGrammar cg(parse_gbnf("root ::= \"true\"", "g"), trie);
  MatchState s = cg.matcher().start();
  EXPECT_FALSE(cg.mask(s)->end_allowed);
  ASSERT_TRUE(cg.matcher().advance(s, "true"));
  const std::shared_ptr<const TokenMask> done = cg.mask(s);
  EXPECT_TRUE(done->end_allowed);
  EXPECT_EQ(done->n_allowed, 1u);  // the end token alone
}

TEST(GrammarLink, FiltersCandidatesAndFollowsTheHistory) {
  const ListTokenizer tok = test_vocabulary();
  Options options("chain[0].grammar");
  options.set("gbnf", "root ::= \"ab\" | \"true\"");
  GrammarLink link(options, &tok);
  const auto id_of = [&](const std::string& p) {
    for (int32_t id = 0; id < tok.vocab_size(); ++id)
      if (tok.piece(id) == p) return id;
    return -1;
  };
  Candidates c;
  for (int32_t id = 0; id < tok.vocab_size(); ++id) {
    c.ids.push_back(id);
    c.logits.push_back(0.0f);
  }
  std::vector<int32_t> history = {1, 2, 3};  // a prompt
  link.apply(c, SamplingContext{0, 0, 0, history});
  std::set<std::string> kept;
  for (int32_t id : c.ids) kept.insert(tok.piece(id));
  EXPECT_EQ(kept, (std::set<std::string>{"a", "ab", "t", "true"}));
  // After "t", only what continues "true".
  history.push_back(id_of("t"));
  Candidates all;
  for (int32_t id = 0; id < tok.vocab_size(); ++id) {
    all.ids.push_back(id);
    all.logits.push_back(0.0f);
  }
  Candidates d = all;
  link.apply(d, SamplingContext{0, 0, 1, history});
  ASSERT_EQ(d.ids.size(), 1u);
  EXPECT_EQ(tok.piece(d.ids[0]), "r");
  // The history changes (a draft rejected, a request resumed): read again.
  history.back() = id_of("ab");
  Candidates e = all;
  link.apply(e, SamplingContext{0, 0, 1, history});
  ASSERT_EQ(e.ids.size(), 1u);
  EXPECT_EQ(e.ids[0], id_of("<|end|>"));
  // A candidate list cut before the link, without an end token: the error
  // says the link belongs first.
  Candidates cut;
  cut.ids = {id_of("x")};
  cut.logits = {0.0f};
  try {
    link.apply(cut, SamplingContext{0, 0, 1, history});
    FAIL() << "no error";
  } catch (const Error& err) {
    EXPECT_EQ(err.kind(), ErrorKind::kInputRejected);
    EXPECT_NE(std::string(err.what()).find("must come first in the chain"), std::string::npos);
  }
}

TEST(GrammarLink, EndsTheOutputWhereNoTokenCanContinueIt) {
  const ListTokenizer tok({"a", "b", "<|end|>"}, {2}, 2);
  Options options("chain[0].grammar");
  options.set("gbnf", "root ::= \"a\" \"c\"");  // no token spells c
  GrammarLink link(options, &tok);
  Candidates c{{0, 1, 2}, {0.0f, 0.0f, 0.0f}, -1};
  const std::vector<int32_t> history = {1, 0};  // a prompt "b", then "a"
  link.apply(c, SamplingContext{0, 0, 1, history});
  EXPECT_EQ(c.ids, std::vector<int32_t>{2});
}

TEST(GrammarLink, OptionsNeedExactlyOneGrammar) {
  const auto message = [](std::map<std::string, std::string> values) {
    Options o("chain[0].grammar");
    for (const auto& [k, v] : values) o.set(k, v);
    try {
      GrammarLink link(o, nullptr);
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::kConfig);
      return std::string(e.what());
    }
    return std::string();
  };
  EXPECT_NE(message({}).find("give exactly one of"), std::string::npos);
  EXPECT_NE(message({{"gbnf", "root ::= \"a\""}, {"json_object", "true"}}).find("2 given"),
            std::string::npos);
  EXPECT_NE(message({{"json_schema", "{\"type\": \"string\", \"pattern\": \"a+\"}"}})
                .find("at /pattern: the keyword 'pattern' is not supported"),
            std::string::npos);
  EXPECT_NE(message({{"json_schema", "{nope"}}).find("not valid JSON"), std::string::npos);
  EXPECT_NE(message({{"gbnf", "root ::= x"}}).find("'x' is used but never defined"),
            std::string::npos);
  EXPECT_EQ(message({{"json_object", "true"}}), "");
}

TEST(JsonSchemaGbnf, AllowsValidAndRefusesInvalidTexts) {
  const std::string schema = R"({"type": "object", "properties": {
      "id": {"type": "integer", "minimum": 0},
      "name": {"type": "string", "minLength": 1, "maxLength": 4},
      "kind": {"enum": ["a", "b"]},
      "scores": {"type": "array", "items": {"type": "number"}, "minItems": 1, "maxItems": 2},
      "child": {"$ref": "#/$defs/node"},
      "note": {"anyOf": [{"type": "string"}, {"type": "null"}]}},
    "required": ["id", "name"],
    "$defs": {"node": {"type": "object", "properties": {"next": {"$ref": "#/$defs/node"}}}}})";
  const std::string g = json_schema_to_gbnf(schema, "schema");
  EXPECT_TRUE(accepts(g, R"({"id": 0, "name": "abcd"})"));
  EXPECT_TRUE(accepts(
      g, "{\n  \"id\": 12,\n  \"name\": \"x\",\n  \"kind\": \"b\",\n  \"scores\": [1.5, -2e3]\n}"));
  EXPECT_TRUE(accepts(g, R"({"id":3,"name":"é\n","child":{"next":{"next":{}}},"note":null})"));
  EXPECT_FALSE(accepts(g, R"({"id": -1, "name": "a"})"));     // minimum 0
  EXPECT_FALSE(accepts(g, R"({"id": 1, "name": ""})"));       // minLength
  EXPECT_FALSE(accepts(g, R"({"id": 1, "name": "abcde"})"));  // maxLength
  EXPECT_FALSE(accepts(g, R"({"name": "a"})"));               // id required
  EXPECT_FALSE(accepts(g, R"({"id": 1, "name": "a", "kind": "c"})"));
  EXPECT_FALSE(accepts(g, R"({"id": 1, "name": "a", "scores": []})"));
  EXPECT_FALSE(accepts(g, R"({"id": 1, "name": "a", "scores": [1, 2, 3]})"));
  EXPECT_FALSE(accepts(g, R"({"id": 1, "name": "a", "extra": 1})"));
  EXPECT_FALSE(accepts(g, R"({"id": 01, "name": "a"})"));
  EXPECT_FALSE(accepts(g, "{\"id\": 1, \"name\": \"a\x01\"}"));  // a raw control character
}

TEST(JsonSchemaGbnf, ArraysWithPrefixItemsAndBounds) {
  const std::string g = json_schema_to_gbnf(
      R"({"type": "array", "prefixItems": [{"type": "boolean"}, {"type": "null"}], "items": false})",
      "schema");
  EXPECT_TRUE(accepts(g, "[]"));
  EXPECT_TRUE(accepts(g, "[true]"));
  EXPECT_TRUE(accepts(g, "[false, null]"));
  EXPECT_FALSE(accepts(g, "[null]"));
  EXPECT_FALSE(accepts(g, "[true, null, 1]"));
  const std::string h =
      json_schema_to_gbnf(R"({"items": {"type": "integer"}, "minItems": 2})", "s");
  EXPECT_FALSE(accepts(h, "[1]"));
  EXPECT_TRUE(accepts(h, "[1, 2, 3, 4]"));
}

TEST(JsonSchemaGbnf, AnyJsonObject) {
  const std::string g = json_object_gbnf();
  EXPECT_TRUE(accepts(g, R"({"a": [1, {"b": null}, "c"], "d": {}})"));
  EXPECT_TRUE(accepts(g, "{}"));
  EXPECT_FALSE(accepts(g, "[]"));
  EXPECT_FALSE(accepts(g, R"({"a": })"));
  EXPECT_FALSE(accepts(g, R"({"a": 1,})"));
}

}  // namespace
}  // namespace duet::grammar
