// The streaming JSON writer (core/json/json_writer.h): what it writes
// parses back, with nlohmann-json, as what was given — strings with quotes,
// control characters and every UTF-8 length; bytes that are not UTF-8
// (stray continuations, overlong forms, surrogates, cut sequences) as
// U+FFFD; doubles exactly (the old "%.6g" kept six digits); NaN as null;
// keys in the order written.
#include "json_writer.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <nlohmann/json.hpp>
#include <string>

namespace duet {
namespace {

nlohmann::ordered_json parse(const JsonWriter& w) { return nlohmann::ordered_json::parse(w.str()); }

TEST(JsonWriter, StringsReadBackAsWritten) {
  const std::string text =
      "quote \" backslash \\ newline \n tab \t bell \x07 "
      "\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80 end";
  JsonWriter w;
  w.begin_object().field("text", text).end_object();
  EXPECT_EQ(parse(w)["text"].get<std::string>(), text) << w.str();
}

TEST(JsonWriter, BytesThatAreNotUtf8BecomeTheReplacementCharacter) {
  const std::string replacement = "\xef\xbf\xbd";
  for (const std::string bad :
       {"\x80", "\xc0\xaf", "\xed\xa0\x80", "\xe2\x82", "\xf4\x90\x80\x80"}) {
    JsonWriter w;
    w.begin_array().value("a" + bad + "b").end_array();
    const std::string got = parse(w)[0].get<std::string>();
    EXPECT_EQ(got.substr(0, 1), "a") << w.str();
    EXPECT_EQ(got.substr(got.size() - 1), "b") << w.str();
    EXPECT_NE(got.find(replacement), std::string::npos) << w.str();
    EXPECT_EQ(got.find(bad), std::string::npos) << "the invalid bytes passed through: " << w.str();
  }
}

TEST(JsonWriter, DoublesReadBackExactly) {
  for (const double v : {0.1, 1.0 / 3.0, 123456789.125, 6.02214076e23, 1e-300, -2.5e-7, 0.0}) {
    JsonWriter w;
    w.begin_array().value(v).end_array();
    EXPECT_EQ(parse(w)[0].get<double>(), v) << w.str();
  }
  JsonWriter w;
  w.begin_array()
      .value(std::numeric_limits<double>::quiet_NaN())
      .value(std::numeric_limits<double>::infinity())
      .end_array();
  EXPECT_EQ(w.str(), "[null,null]");
}

TEST(JsonWriter, NestsInTheOrderWritten) {
  JsonWriter w;
  w.begin_object()
      .field("z", int64_t{-3})
      .field("a", uint64_t{18446744073709551615u})
      .key("list")
      .begin_array()
      .value(true)
      .null()
      .begin_object()
      .end_object()
      .end_array()
      .end_object();
  EXPECT_EQ(w.str(), R"({"z":-3,"a":18446744073709551615,"list":[true,null,{}]})");
}

}  // namespace
}  // namespace duet
