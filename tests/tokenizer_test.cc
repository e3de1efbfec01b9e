// The byte-level BPE tokenizer. Two groups, registered under two labels:
//   * Tiny*: a small vocabulary written with GgufWriter (label: unit);
//   * SmolLM2*: the real SmolLM2-135M-Instruct vocabulary compared with the
//     ids Hugging Face `tokenizers` gives (label: model). The expected ids come
//     from tests/tokenizer_oracle.py, which ctest runs first (test
//     tokenizer_oracle); a missing model or oracle file fails with the command
//     that produces it.
#include "duet/tokenizer.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <random>
#include <sstream>
#include <string>
#include <variant>
#include <vector>

#include "duet/app/gguf.h"
#include "duet/error.h"
#include "model_files.h"
#include "text/pretokenizer.h"
#include "text/spm_tokenizer.h"
#include "text/utf8_stream.h"

namespace duet {
namespace {

// --- helpers -----------------------------------------------------------------

// GPT-2's byte-level text of one byte (the tokenizer's own table is private).
std::string byte_char(uint8_t b) {
  int n = 0;
  for (int i = 0; i < b; ++i) {
    if (!((i >= 0x21 && i <= 0x7E) || (i >= 0xA1 && i <= 0xAC) || i >= 0xAE)) ++n;
  }
  bool printable = (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE;
  unsigned c = printable ? b : 0x100u + static_cast<unsigned>(n);
  if (c < 0x80) return std::string(1, static_cast<char>(c));
  return {static_cast<char>(0xC0 | (c >> 6)), static_cast<char>(0x80 | (c & 0x3F))};
}

bool is_valid_utf8(std::string_view s) {
  for (size_t i = 0; i < s.size();) {
    auto b = static_cast<uint8_t>(s[i]);
    size_t len = b < 0x80 ? 1 : (b >> 5) == 6 ? 2 : (b >> 4) == 14 ? 3 : (b >> 3) == 30 ? 4 : 0;
    if (len == 0 || i + len > s.size()) return false;
    for (size_t k = 1; k < len; ++k) {
      if ((static_cast<uint8_t>(s[i + k]) & 0xC0) != 0x80) return false;
    }
    i += len;
  }
  return true;
}

std::string random_bytes(std::mt19937& rng, size_t max_len) {
  std::uniform_int_distribution<size_t> len(0, max_len);
  std::uniform_int_distribution<int> byte(0, 255);
  std::string s(len(rng), '\0');
  for (char& c : s) c = static_cast<char>(byte(rng));
  return s;
}

// Random text built from fragments that stress the pre-tokenizer: letters,
// digits, spaces, multi-byte characters, special-token text and broken UTF-8.
std::string random_mixture(std::mt19937& rng, size_t parts) {
  using namespace std::string_view_literals;
  // Kept by hand: clang-format would give each fragment a line of its own.
  // clang-format off
  static const std::vector<std::string_view> kParts = {
      "a"sv, "Z"sv, "é"sv, "ß"sv, "中"sv, "日本"sv, "😀"sv, "👨‍👩‍👧"sv, "🇯🇵"sv, "1"sv,
      "٣"sv, "²"sv, " "sv, "  "sv, "\t"sv, "\n"sv, "\r\n"sv, "\u3000"sv, "'s"sv,
      "'LL"sv, "!?"sv, "..."sv, "<|im_start|>"sv, "<|im_end|>"sv, "<|"sv, "|>"sv,
      "\x80"sv, "\xC3"sv, "\xE2\x82"sv, "\xF0\x9F\x98"sv, "\xFF"sv, "\xED\xA0\x80"sv,
      "\xC0\xAF"sv, "\0"sv};
  // clang-format on
  std::uniform_int_distribution<size_t> pick(0, kParts.size() - 1);
  std::string s;
  for (size_t i = 0; i < parts; ++i) s += kParts[pick(rng)];
  return s;
}

std::string ids_to_string(const std::vector<int32_t>& ids) {
  std::ostringstream os;
  for (size_t i = 0; i < ids.size(); ++i) os << (i ? " " : "") << ids[i];
  return os.str();
}

// A file in the system temp folder, removed at destruction.
struct TempFile {
  std::filesystem::path path;
  explicit TempFile(const std::string& name)
      : path(std::filesystem::temp_directory_path() /
             ("duet_tokenizer_test_" + std::to_string(::getpid()) + "_" + name)) {}
  ~TempFile() { std::filesystem::remove(path); }
};

// --- a tiny vocabulary ---------------------------------------------------------

struct TinyVocab {
  std::string model = "gpt2";
  std::string pre = "smollm";
  std::vector<std::string> extra_tokens = {"ab",         "bc",     "abc",           "aa",
                                           "12",         "Ġa",     "Ġab",           "<|im_start|>",
                                           "<|im_end|>", "<tool>", "<|endoftext|>", "Ġbc"};
  std::vector<int32_t> extra_types = {1, 1, 1, 1, 1, 1, 1, 3, 3, 4, 3, 1};
  // "b c" outranks "a b", so "abc" becomes "a" "bc".
  std::vector<std::string> merges = {"b c", "a b", "a a", "1 2", "Ġ a", "Ġ ab"};
  std::optional<uint32_t> eos = 256 + 8;  // <|im_end|>
  std::string byte_z = "z";               // the text of the token for byte 'z'
  std::optional<bool> add_bos;            // tokenizer.ggml.add_bos_token
};

constexpr int32_t kAb = 256, kBc = 257, kAa = 259, kSpaceA = 261, kSpaceAb = 262, kImStart = 263,
                  kImEnd = 264, kTool = 265, kEndOfText = 266, kSpaceBc = 267;

std::unique_ptr<Tokenizer> load_tiny(const TinyVocab& v, const std::string& name) {
  std::vector<std::string> tokens;
  std::vector<int32_t> types;
  for (int b = 0; b < 256; ++b) {
    tokens.push_back(b == 'z' ? v.byte_z : byte_char(static_cast<uint8_t>(b)));
    types.push_back(1);
  }
  tokens.insert(tokens.end(), v.extra_tokens.begin(), v.extra_tokens.end());
  types.insert(types.end(), v.extra_types.begin(), v.extra_types.end());
  GgufWriter w;
  w.set_string("tokenizer.ggml.model", v.model);
  w.set_string("tokenizer.ggml.pre", v.pre);
  w.set_string_array("tokenizer.ggml.tokens", tokens);
  w.set_int32_array("tokenizer.ggml.token_type", types);
  w.set_string_array("tokenizer.ggml.merges", v.merges);
  if (v.eos) w.set_uint32("tokenizer.ggml.eos_token_id", *v.eos);
  if (v.add_bos) w.set_bool("tokenizer.ggml.add_bos_token", *v.add_bos);
  TempFile file(name + ".gguf");
  w.write(file.path);
  return load_tokenizer(GgufFile::open(file.path));
}

// The message of the duet::Error of `kind` that `f` throws; fails otherwise.
template <typename F>
std::string error_message(F f, ErrorKind kind) {
  try {
    f();
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), kind) << e.what();
    return e.what();
  }
  ADD_FAILURE() << "no duet::Error thrown";
  return "";
}

TEST(TinyTokenizer, MergesLowestRankFirst) {
  auto tok = load_tiny({}, "rank");
  EXPECT_EQ(tok->encode("abc", false), (std::vector<int32_t>{'a', kBc}));
  EXPECT_EQ(tok->encode("ab", false), std::vector<int32_t>{kAb});
  // Equal ranks merge leftmost first.
  EXPECT_EQ(tok->encode("aaa", false), (std::vector<int32_t>{kAa, 'a'}));
  EXPECT_EQ(tok->encode(" ab", false), std::vector<int32_t>{kSpaceAb});
}

// Llama 3's pre-tokenizer (llama.cpp's LLAMA3 type, Hugging Face's
// ignore_merges): a word that is a token as a whole is that token, though
// merges would make "a" "bc" of it; and a BOS unless the file says not.
TEST(TinyTokenizer, Llama3TakesWholeWordTokensBeforeMergesAndAddsItsBos) {
  constexpr int32_t kAbc = 258;
  TinyVocab llama3;
  llama3.pre = "llama-bpe";
  auto tok = load_tiny(llama3, "llama3");
  EXPECT_EQ(tok->encode("abc", false), std::vector<int32_t>{kAbc});
  // Found by the word's bytes, as its byte-level text "Ġbc" names them.
  EXPECT_EQ(tok->encode(" bc", false), std::vector<int32_t>{kSpaceBc});
  EXPECT_EQ(tok->encode("aab", false), (std::vector<int32_t>{'a', kAb}));  // no such token
  EXPECT_TRUE(tok->add_bos());
  llama3.add_bos = false;
  EXPECT_FALSE(load_tiny(llama3, "llama3-no-bos")->add_bos());
  TinyVocab qwen2;
  qwen2.pre = "qwen2";
  auto qwen = load_tiny(qwen2, "qwen2");
  EXPECT_EQ(qwen->encode("abc", false), (std::vector<int32_t>{'a', kBc}));
  EXPECT_EQ(qwen->encode(" bc", false), (std::vector<int32_t>{' ', kBc}));
  EXPECT_FALSE(qwen->add_bos());
}

TEST(TinyTokenizer, SplitsEveryDigitAndWordsBeforeMerging) {
  auto tok = load_tiny({}, "digits");
  // "1 2" is a merge, but "smollm" makes each digit its own word.
  EXPECT_EQ(tok->encode("12", false), (std::vector<int32_t>{'1', '2'}));
  // " a" merges within its word; "b" after a space is another word.
  // " a" merges within its word; " b" is another word, with no merge.
  EXPECT_EQ(tok->encode(" a b", false), (std::vector<int32_t>{kSpaceA, ' ', 'b'}));
  EXPECT_EQ(tok->encode("ab1ab", false), (std::vector<int32_t>{kAb, '1', kAb}));
}

TEST(TinyTokenizer, ControlTokensOnlyWithParseSpecialUserDefinedAlways) {
  auto tok = load_tiny({}, "special");
  EXPECT_EQ(tok->encode("<|im_start|>ab<|im_end|>", true),
            (std::vector<int32_t>{kImStart, kAb, kImEnd}));
  std::vector<int32_t> plain = tok->encode("<|im_start|>ab", false);
  EXPECT_EQ(std::count(plain.begin(), plain.end(), kImStart), 0);
  EXPECT_EQ(tok->decode(plain), "<|im_start|>ab");
  EXPECT_EQ(tok->encode("a<tool>b", false), (std::vector<int32_t>{'a', kTool, 'b'}));
  EXPECT_EQ(tok->piece(kImEnd), "<|im_end|>");
  EXPECT_EQ(tok->find_token("<|im_end|>"), kImEnd);
  EXPECT_EQ(tok->find_token(" ab"), kSpaceAb);
  EXPECT_EQ(tok->find_token("no such token"), std::nullopt);
}

TEST(TinyTokenizer, EndOfGeneration) {
  auto tok = load_tiny({}, "eog");
  EXPECT_TRUE(tok->is_end_of_generation(kImEnd));      // eos
  EXPECT_TRUE(tok->is_end_of_generation(kEndOfText));  // a control <|endoftext|>
  EXPECT_FALSE(tok->is_end_of_generation(kImStart));
  EXPECT_FALSE(tok->is_end_of_generation(-1));
  EXPECT_FALSE(tok->is_end_of_generation(tok->vocab_size()));
  EXPECT_EQ(tok->eos_id(), kImEnd);
  EXPECT_EQ(tok->bos_id(), std::nullopt);
  EXPECT_FALSE(tok->add_bos());
}

TEST(TinyTokenizer, DropsBytesWithoutAToken) {
  TinyVocab v;
  v.byte_z = "<unused>";
  auto tok = load_tiny(v, "drop");
  EXPECT_EQ(tok->find_token("z"), std::nullopt);
  // As in Hugging Face's BPE, the neighbours of a dropped byte may merge.
  EXPECT_EQ(tok->encode("azb", false), std::vector<int32_t>{kAb});
  EXPECT_EQ(tok->decode(tok->encode("zazbz", false)), "ab");
}

TEST(TinyTokenizer, RoundTripsAnyBytes) {
  auto tok = load_tiny({}, "roundtrip");
  std::mt19937 rng(7);
  for (int i = 0; i < 2000; ++i) {
    std::string text = i % 2 ? random_bytes(rng, 40) : random_mixture(rng, 12);
    for (bool special : {false, true}) {
      ASSERT_EQ(tok->decode(tok->encode(text, special)), text) << "case " << i;
    }
  }
}

TEST(TinyTokenizer, RejectsIdsOutOfRange) {
  auto tok = load_tiny({}, "range");
  for (int32_t id : {-1, tok->vocab_size(), 1 << 30}) {
    std::string msg = error_message([&] { tok->piece(id); }, ErrorKind::kInputRejected);
    EXPECT_NE(msg.find(std::to_string(id)), std::string::npos) << msg;
    EXPECT_NE(msg.find(std::to_string(tok->vocab_size())), std::string::npos) << msg;
  }
}

TEST(TinyTokenizer, RejectsUnknownPreTokenizer) {
  TinyVocab v;
  v.pre = "foo";
  std::string msg = error_message([&] { load_tiny(v, "pre"); }, ErrorKind::kModelFile);
  EXPECT_NE(msg.find("tokenizer.ggml.pre 'foo'"), std::string::npos) << msg;
  EXPECT_NE(msg.find("'smollm'"), std::string::npos) << msg;
}

TEST(TinyTokenizer, RejectsUnknownModel) {
  TinyVocab v;
  v.model = "bert";
  std::string msg = error_message([&] { load_tiny(v, "model"); }, ErrorKind::kModelFile);
  EXPECT_NE(msg.find("tokenizer.ggml.model 'bert'"), std::string::npos) << msg;
  EXPECT_NE(msg.find("'gpt2', 'llama'"), std::string::npos) << msg;
}

TEST(TinyTokenizer, RejectsMalformedVocabularies) {
  TinyVocab not_byte_level;
  not_byte_level.byte_z = "\u2603";
  EXPECT_NE(error_message([&] { load_tiny(not_byte_level, "bytelevel"); }, ErrorKind::kModelFile)
                .find("token 122 '\u2603' is not byte-level encoded"),
            std::string::npos);
  TinyVocab bad_merge;
  bad_merge.merges.push_back("a q");  // "aq" is not a token
  EXPECT_NE(error_message([&] { load_tiny(bad_merge, "merge"); }, ErrorKind::kModelFile)
                .find("tokenizer.ggml.merges[6] 'a q'"),
            std::string::npos);
  TinyVocab bad_eos;
  bad_eos.eos = 5000;
  EXPECT_NE(error_message([&] { load_tiny(bad_eos, "eos"); }, ErrorKind::kModelFile)
                .find("eos_token_id is 5000"),
            std::string::npos);
}

TEST(TinyTokenizer, LongWordsStayFast) {
  auto tok = load_tiny({}, "long");
  const auto start = std::chrono::steady_clock::now();
  for (const std::string& text :
       {std::string(1 << 20, 'a'), std::string(1 << 20, ' '), std::string(1 << 20, '\x80')}) {
    EXPECT_EQ(tok->decode(tok->encode(text, true)), text);
  }
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(20));
}

// --- Utf8Stream ----------------------------------------------------------------

TEST(TinyUtf8Stream, HoldsBackIncompleteCharacters) {
  Utf8Stream s;
  EXPECT_EQ(s.push("a\xF0\x9F"), "a");
  EXPECT_EQ(s.push("\x98"), "");
  EXPECT_EQ(s.push("\x80!"), "\xF0\x9F\x98\x80!");
  EXPECT_EQ(s.push("\xE2\x82"), "");
  EXPECT_EQ(s.flush(), "\xE2\x82");
  EXPECT_EQ(s.flush(), "");
}

TEST(TinyUtf8Stream, PassesInvalidBytesThrough) {
  Utf8Stream s;
  EXPECT_EQ(s.push("\xFF\x80x"), "\xFF\x80x");
  EXPECT_EQ(s.push("\xC3"), "");
  // The held byte can no longer start a character: out it goes, as-is.
  EXPECT_EQ(s.push("A"), std::string("\xC3") + "A");
}

// --- the real vocabulary -------------------------------------------------------

using testing::model_path;

std::filesystem::path oracle_path() {
  if (const char* env = std::getenv("DUET_TOKENIZER_ORACLE"); env != nullptr && *env != '\0') {
    return env;
  }
  return std::filesystem::path(DUET_BUILD_DIR) / "tokenizer_oracle.json";
}

std::string read_file(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream os;
  os << in.rdbuf();
  return os.str();
}

// Just enough JSON for the oracle's output: objects, arrays, strings,
// integers and booleans.
struct Json {
  using Object = std::vector<std::pair<std::string, Json>>;
  std::variant<bool, int64_t, std::string, std::vector<Json>, Object> value;

  const Json& operator[](std::string_view key) const {
    for (const auto& [k, v] : std::get<Object>(value)) {
      if (k == key) return v;
    }
    throw std::runtime_error("oracle JSON has no key " + std::string(key));
  }
  const std::vector<Json>& array() const { return std::get<std::vector<Json>>(value); }
  const std::string& string() const { return std::get<std::string>(value); }
};

class JsonParser {
 public:
  explicit JsonParser(std::string_view text) : text_(text) {}

  Json parse() {
    skip_space();
    if (at_ >= text_.size()) fail("unexpected end");
    const char c = text_[at_];
    if (c == '{') {
      ++at_;
      Json::Object object;
      while (!consume('}')) {
        if (!object.empty()) expect(',');
        skip_space();
        std::string key = parse_string();
        expect(':');
        object.emplace_back(std::move(key), parse());
      }
      return {std::move(object)};
    }
    if (c == '[') {
      ++at_;
      std::vector<Json> array;
      while (!consume(']')) {
        if (!array.empty()) expect(',');
        array.push_back(parse());
      }
      return {std::move(array)};
    }
    if (c == '"') return {parse_string()};
    for (bool b : {true, false}) {
      const std::string_view word = b ? "true" : "false";
      if (text_.substr(at_).starts_with(word)) {
        at_ += word.size();
        return {b};
      }
    }
    size_t end = at_ + (c == '-' ? 1 : 0);
    while (end < text_.size() && std::isdigit(static_cast<unsigned char>(text_[end]))) ++end;
    if (end == at_) fail("unexpected character");
    Json number{std::stoll(std::string(text_.substr(at_, end - at_)))};
    at_ = end;
    return number;
  }

 private:
  [[noreturn]] void fail(const std::string& what) const {
    throw std::runtime_error("oracle JSON: " + what + " at byte " + std::to_string(at_));
  }
  void skip_space() {
    while (at_ < text_.size() && std::isspace(static_cast<unsigned char>(text_[at_]))) ++at_;
  }
  bool consume(char c) {
    skip_space();
    if (at_ >= text_.size() || text_[at_] != c) return false;
    ++at_;
    return true;
  }
  void expect(char c) {
    if (!consume(c)) fail(std::string("expected '") + c + "'");
  }
  // The oracle writes ASCII strings (texts are hex); a \uXXXX escape can
  // only come from a file path, which the tests do not use, so it becomes '?'.
  std::string parse_string() {
    expect('"');
    std::string s;
    while (at_ < text_.size() && text_[at_] != '"') {
      char c = text_[at_++];
      if (c == '\\') {
        if (at_ >= text_.size()) fail("bad escape");
        c = text_[at_++];
        if (c == 'n') c = '\n';
        if (c == 't') c = '\t';
        if (c == 'u') {
          at_ += 4;
          c = '?';
        }
      }
      s.push_back(c);
    }
    expect('"');
    return s;
  }

  std::string_view text_;
  size_t at_ = 0;
};

std::string from_hex(const std::string& hex) {
  std::string bytes;
  for (size_t i = 0; i + 1 < hex.size(); i += 2) {
    bytes.push_back(static_cast<char>(std::stoi(hex.substr(i, 2), nullptr, 16)));
  }
  return bytes;
}

class SmolLM2Tokenizer : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    const std::filesystem::path path = model_path();
    if (!std::filesystem::exists(path)) {
      missing_ = testing::missing_model_message(path);
      return;
    }
    tokenizer_ = load_tokenizer(GgufFile::open(path)).release();
  }
  static void TearDownTestSuite() {
    delete tokenizer_;
    tokenizer_ = nullptr;
  }
  void SetUp() override { ASSERT_NE(tokenizer_, nullptr) << missing_; }

  static const Tokenizer& tok() { return *tokenizer_; }

 private:
  static inline Tokenizer* tokenizer_ = nullptr;
  static inline std::string missing_;
};

TEST_F(SmolLM2Tokenizer, MatchesHuggingFaceTokenizers) {
  const std::filesystem::path path = oracle_path();
  ASSERT_TRUE(std::filesystem::exists(path))
      << "oracle output " << path << " is missing; run `ctest -R tokenizer_oracle` in the build "
      << "folder, or `$(bash scripts/python-env.sh) tests/tokenizer_oracle.py --out " << path
      << "` (or set DUET_TOKENIZER_ORACLE)";
  const Json oracle = JsonParser(read_file(path)).parse();
  const auto& cases = oracle["cases"].array();
  ASSERT_GE(cases.size(), 60u);
  for (const Json& c : cases) {
    const std::string text = from_hex(c["text_hex"].string());
    const bool special = std::get<bool>(c["parse_special"].value);
    std::vector<int32_t> expected;
    for (const Json& id : c["ids"].array())
      expected.push_back(static_cast<int32_t>(std::get<int64_t>(id.value)));
    std::vector<int32_t> got = tok().encode(text, special);
    if (got == expected) continue;
    size_t at = 0;
    while (at < got.size() && at < expected.size() && got[at] == expected[at]) ++at;
    ADD_FAILURE() << c["name"].string() << " (parse_special " << special
                  << "): first difference at " << at << "\n  text:     " << text
                  << "\n  expected: " << ids_to_string(expected)
                  << "\n  got:      " << ids_to_string(got);
  }
}

// `text` less the bytes that have no token of their own.
std::string without_dropped_bytes(const Tokenizer& tok, const std::string& text) {
  std::string kept;
  for (char c : text) {
    if (tok.find_token(std::string(1, c))) kept.push_back(c);
  }
  return kept;
}

// The pre-tokenizers other files name ("llama-bpe", "qwen2"), against
// Hugging Face's Split on every line of the mixed corpus (the oracle's
// "splits").
TEST_F(SmolLM2Tokenizer, PreTokenizersSplitLikeHuggingFace) {
  const Json oracle = JsonParser(read_file(oracle_path())).parse();
  const auto& splits = oracle["splits"].array();
  ASSERT_GE(splits.size(), 400u);
  for (const Json& c : splits) {
    const std::string pre = c["pre"].string();
    const std::unique_ptr<PreTokenizer> split = PreTokenizer::for_name(pre);
    ASSERT_NE(split, nullptr) << pre;
    const std::string text = from_hex(c["text_hex"].string());
    std::vector<std::string> expected;
    for (const Json& p : c["pieces_hex"].array()) expected.push_back(from_hex(p.string()));
    std::vector<std::string> got;
    for (std::string_view p : split->split(text)) got.emplace_back(p);
    EXPECT_EQ(got, expected) << pre << ": " << text;
  }
}

TEST_F(SmolLM2Tokenizer, DropsOnlyTheBytesItHasNoTokenFor) {
  std::string dropped;
  for (int b = 0; b < 256; ++b) {
    if (!tok().find_token(std::string(1, static_cast<char>(b))))
      dropped.push_back(static_cast<char>(b));
  }
  EXPECT_EQ(dropped,
            "\x04\x06\x13\x14\x16\x1D\xC0\xC1\xF1\xF2\xF5\xF6\xF7\xF8\xF9\xFA\xFB\xFC\xFD\xFE\xFF");
  EXPECT_EQ(tok().decode(tok().encode("a\x04"
                                      "b\xFF c",
                                      false)),
            "ab c");
}

TEST_F(SmolLM2Tokenizer, RoundTripsCorpusAndRandomBytes) {
  const std::string corpus =
      read_file(std::filesystem::path(DUET_SOURCE_DIR) / "tests" / "data" / "tokenizer_corpus.txt");
  ASSERT_FALSE(corpus.empty());
  for (bool special : {false, true}) EXPECT_EQ(tok().decode(tok().encode(corpus, special)), corpus);
  std::mt19937 rng(42);
  for (int i = 0; i < 3000; ++i) {
    std::string text = i % 2 ? random_bytes(rng, 64) : random_mixture(rng, 16);
    for (bool special : {false, true}) {
      ASSERT_EQ(tok().decode(tok().encode(text, special)), without_dropped_bytes(tok(), text))
          << "case " << i;
    }
  }
}

TEST_F(SmolLM2Tokenizer, SpecialTokens) {
  EXPECT_EQ(tok().vocab_size(), 49152);
  EXPECT_EQ(tok().encode("<|im_start|>user", true), (std::vector<int32_t>{1, 4093}));
  std::vector<int32_t> plain = tok().encode("<|im_start|>user", false);
  EXPECT_GT(plain.size(), 2u);
  EXPECT_EQ(std::count(plain.begin(), plain.end(), 1), 0);
  EXPECT_EQ(tok().decode(plain), "<|im_start|>user");
  EXPECT_EQ(tok().piece(2), "<|im_end|>");
  EXPECT_EQ(tok().find_token("<|im_end|>"), 2);
  EXPECT_EQ(tok().bos_id(), 1);
  EXPECT_EQ(tok().eos_id(), 2);
  EXPECT_FALSE(tok().add_bos());
  EXPECT_TRUE(tok().is_end_of_generation(2));  // <|im_end|>, the file's eos
  EXPECT_TRUE(tok().is_end_of_generation(0));  // <|endoftext|>
  EXPECT_FALSE(tok().is_end_of_generation(1));
  EXPECT_FALSE(tok().is_end_of_generation(4093));
}

TEST_F(SmolLM2Tokenizer, StreamsMultiTokenEmojiAsWholeCharacters) {
  const std::string family = "👨‍👩‍👧‍👦 ok 🏳️‍🌈";
  std::vector<int32_t> ids = tok().encode(family, false);
  Utf8Stream stream;
  std::string out;
  bool split_a_character = false;
  for (int32_t id : ids) {
    const std::string piece = tok().piece(id);
    split_a_character |= !is_valid_utf8(piece);
    const std::string chunk = stream.push(piece);
    EXPECT_TRUE(is_valid_utf8(chunk)) << "token " << id;
    out += chunk;
  }
  out += stream.flush();
  EXPECT_TRUE(split_a_character) << "the text should need several tokens per character";
  EXPECT_EQ(out, family);
}

TEST_F(SmolLM2Tokenizer, RejectsIdsOutOfRange) {
  for (int32_t id : {-1, 49152}) {
    std::string msg = error_message([&] { tok().piece(id); }, ErrorKind::kInputRejected);
    EXPECT_NE(msg.find("token id " + std::to_string(id)), std::string::npos) << msg;
    EXPECT_NE(msg.find("49152"), std::string::npos) << msg;
  }
}

// ---- SentencePiece-style BPE (tokenizer.ggml.model "llama") -----------------------

// A hand-made vocabulary: pieces with scores, two byte tokens, a control and
// a user-defined token.
SpmTokenizer tiny_spm(bool add_space_prefix) {
  SpmTokenizer::Vocabulary v;
  auto add = [&](const std::string& text, float score, TokenType type) {
    v.tokens.push_back(text);
    v.scores.push_back(score);
    v.types.push_back(type);
  };
  add("<unk>", 0, TokenType::kUnknown);         // 0
  add("<s>", 0, TokenType::kControl);           // 1
  add("</s>", 0, TokenType::kControl);          // 2
  add("<0xC3>", 0, TokenType::kByte);           // 3
  add("<0xA9>", 0, TokenType::kByte);           // 4
  add("\xE2\x96\x81", -5, TokenType::kNormal);  // 5 "▁"
  add("a", -5, TokenType::kNormal);             // 6
  add("b", -5, TokenType::kNormal);             // 7
  add("c", -5, TokenType::kNormal);             // 8
  add("ab", -2, TokenType::kNormal);            // 9
  add("bc", -1, TokenType::kNormal);            // 10: outscores "ab"
  add("\xE2\x96\x81"
      "a",
      -3, TokenType::kNormal);              // 11 "▁a"
  add("<hr>", 0, TokenType::kUserDefined);  // 12
  v.bos = 1;
  v.eos = 2;
  v.add_bos = true;
  v.add_space_prefix = add_space_prefix;
  return SpmTokenizer(v, "tiny");
}

TEST(TinySpmTokenizer, MergesTheHighestScoringPairFirst) {
  const SpmTokenizer tok = tiny_spm(false);
  EXPECT_EQ(tok.encode("abc", false), (std::vector<int32_t>{6, 10}));  // a + bc, not ab + c
  EXPECT_EQ(tok.encode("ab", false), (std::vector<int32_t>{9}));
  EXPECT_EQ(tok.encode("a b", false), (std::vector<int32_t>{6, 5, 7}));  // "▁b" is no piece
  EXPECT_EQ(tok.encode("ab a", false), (std::vector<int32_t>{9, 11}));
}

TEST(TinySpmTokenizer, SpacePrefixAtTheStartAndAfterSpecialTokens) {
  const SpmTokenizer tok = tiny_spm(true);
  EXPECT_EQ(tok.encode("a", false), (std::vector<int32_t>{11}));
  EXPECT_EQ(tok.encode("</s>a", true), (std::vector<int32_t>{2, 11}));
  EXPECT_EQ(tok.encode("<hr>a", false), (std::vector<int32_t>{12, 11}));
  EXPECT_EQ(tok.decode(tok.encode("a b", false)), " a b");  // the prefix decodes too
}

TEST(TinySpmTokenizer, ByteFallbackAndDroppedBytes) {
  const SpmTokenizer tok = tiny_spm(false);
  EXPECT_EQ(tok.encode("\xC3\xA9", false), (std::vector<int32_t>{3, 4}));  // é as its bytes
  EXPECT_EQ(tok.encode("a\xF0z", false), (std::vector<int32_t>{6}));       // no tokens: dropped
  EXPECT_EQ(tok.piece(3), "\xC3");
  EXPECT_EQ(tok.piece(5), " ");
  EXPECT_EQ(tok.encode("</s>", false), (std::vector<int32_t>{}));  // "<", "/", ... dropped
  EXPECT_EQ(tok.encode("</s>", true), (std::vector<int32_t>{2}));
  EXPECT_TRUE(tok.is_end_of_generation(2));
}

TEST(TinySpmTokenizer, RejectsMalformedVocabularies) {
  SpmTokenizer::Vocabulary v;
  v.tokens = {"a", "<0xZZ>"};
  v.scores = {0, 0};
  v.types = {TokenType::kNormal, TokenType::kByte};
  std::string msg = error_message([&] { SpmTokenizer(v, "f.gguf"); }, ErrorKind::kModelFile);
  EXPECT_NE(msg.find("'<0xZZ>' is a byte token"), std::string::npos) << msg;
  v.scores = {0};
  msg = error_message([&] { SpmTokenizer(v, "f.gguf"); }, ErrorKind::kModelFile);
  EXPECT_NE(msg.find("tokenizer.ggml.scores 1"), std::string::npos) << msg;
  v.scores = {0, 0};
  v.types = {TokenType::kNormal, TokenType::kNormal};
  v.eos = 5;
  msg = error_message([&] { SpmTokenizer(v, "f.gguf"); }, ErrorKind::kModelFile);
  EXPECT_NE(msg.find("eos_token_id is 5; expected 0..1"), std::string::npos) << msg;
}

// ---- Gemma 3: SentencePiece-style BPE (tokenizer.ggml.model "llama") ----------

class Gemma3Tokenizer : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    const std::filesystem::path path = testing::gemma_path();
    if (!std::filesystem::exists(path)) {
      missing_ = testing::missing_model_message(path);
      return;
    }
    tokenizer_ = load_tokenizer(GgufFile::open(path)).release();
  }
  static void TearDownTestSuite() {
    delete tokenizer_;
    tokenizer_ = nullptr;
  }
  void SetUp() override { ASSERT_NE(tokenizer_, nullptr) << missing_; }

  static const Tokenizer& tok() { return *tokenizer_; }

 private:
  static inline Tokenizer* tokenizer_ = nullptr;
  static inline std::string missing_;
};

// llama.cpp's ids (tests/gemma3_tokenizer_fixture.py, committed) for each of
// the 240 lines of tests/data/tokenizer_corpus_mixed.txt and for the whole
// corpus, with control tokens parsed and not.
TEST_F(Gemma3Tokenizer, MatchesLlamaCppOnAMixedCorpus) {
  const std::filesystem::path data = std::filesystem::path(DUET_SOURCE_DIR) / "tests" / "data";
  const std::string corpus = read_file(data / "tokenizer_corpus_mixed.txt");
  std::vector<std::string> lines;
  for (size_t at = 0; at < corpus.size();) {
    const size_t end = corpus.find('\n', at);
    lines.push_back(corpus.substr(at, end - at));
    at = end + 1;
  }
  ASSERT_GE(lines.size(), 200u);
  const Json oracle = JsonParser(read_file(data / "gemma3_tokenizer_ids.json")).parse();
  const auto& cases = oracle["cases"].array();
  ASSERT_EQ(cases.size(), 2 * lines.size() + 2);
  for (const Json& c : cases) {
    const int64_t line = std::get<int64_t>(c["line"].value);
    const std::string& text = line < 0 ? corpus : lines.at(static_cast<size_t>(line));
    const bool special = std::get<bool>(c["parse_special"].value);
    std::vector<int32_t> expected;
    for (const Json& id : c["ids"].array())
      expected.push_back(static_cast<int32_t>(std::get<int64_t>(id.value)));
    const std::vector<int32_t> got = tok().encode(text, special);
    if (got == expected) continue;
    size_t at = 0;
    while (at < got.size() && at < expected.size() && got[at] == expected[at]) ++at;
    ADD_FAILURE() << "line " << line << " (parse_special " << special << "): first difference at "
                  << at << "\n  text:     " << text << "\n  expected: " << ids_to_string(expected)
                  << "\n  got:      " << ids_to_string(got);
  }
}

// Every byte has a byte token in Gemma's vocabulary, so nothing is dropped.
TEST_F(Gemma3Tokenizer, RoundTripsCorpusAndRandomBytes) {
  const std::string corpus = read_file(std::filesystem::path(DUET_SOURCE_DIR) / "tests" / "data" /
                                       "tokenizer_corpus_mixed.txt");
  for (bool special : {false, true}) EXPECT_EQ(tok().decode(tok().encode(corpus, special)), corpus);
  std::mt19937 rng(7);
  for (int i = 0; i < 2000; ++i) {
    const std::string text = i % 2 ? random_bytes(rng, 64) : random_mixture(rng, 16);
    for (bool special : {false, true}) {
      ASSERT_EQ(tok().decode(tok().encode(text, special)), text) << "case " << i;
    }
  }
}

TEST_F(Gemma3Tokenizer, SpecialTokensAndEndOfTurn) {
  EXPECT_EQ(tok().vocab_size(), 262144);
  EXPECT_EQ(tok().bos_id(), 2);
  EXPECT_EQ(tok().eos_id(), 1);
  EXPECT_TRUE(tok().add_bos());
  EXPECT_EQ(tok().encode("<start_of_turn>user", true), (std::vector<int32_t>{105, 2364}));
  const std::vector<int32_t> plain = tok().encode("<start_of_turn>user", false);
  EXPECT_EQ(std::count(plain.begin(), plain.end(), 105), 0);
  EXPECT_EQ(tok().decode(plain), "<start_of_turn>user");
  // User-defined tokens (runs of newlines, HTML tags) are matched always.
  EXPECT_EQ(tok().encode("\n\n", false), (std::vector<int32_t>{108}));
  EXPECT_EQ(tok().find_token("<end_of_turn>"), 106);
  EXPECT_TRUE(tok().is_end_of_generation(1));    // <eos>
  EXPECT_TRUE(tok().is_end_of_generation(106));  // <end_of_turn>
  EXPECT_FALSE(tok().is_end_of_generation(105));
  EXPECT_EQ(tok().piece(236743), " ");  // "▁" decodes to a space
  EXPECT_EQ(tok().piece(248), "\n");    // the byte token <0x0A>
}

}  // namespace
}  // namespace duet
