// core's one UTF-8 check (core/include/duet/app/utf8.h), which YAML files, stop strings
// and prompts go through: RFC 3629's well-formed sequences, at their edges.
#include "duet/app/utf8.h"

#include <gtest/gtest.h>

#include <string>

namespace duet {
namespace {

TEST(Utf8, WellFormedTextHasNoInvalidByte) {
  for (const std::string ok : {"", "plain ascii", "\x7f", "\xc2\x80", "\xdf\xbf", "\xe0\xa0\x80",
                               "\xed\x9f\xbf", "\xee\x80\x80", "\xef\xbf\xbf", "\xf0\x90\x80\x80",
                               "\xf4\x8f\xbf\xbf", "caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80"}) {
    EXPECT_EQ(invalid_utf8_at(ok), std::nullopt) << ok;
  }
}

TEST(Utf8, EachIllFormedSequenceIsFoundWhereItStarts) {
  struct Case {
    std::string text;
    size_t at;
    const char* what;
  };
  for (const Case& c : {
           Case{"ab\x80", 2, "a stray continuation byte"},
           Case{"\xc0\xaf", 0, "an overlong two-byte form"},
           Case{"\xc1\xbf", 0, "an overlong two-byte form"},
           Case{"x\xe0\x9f\xbf", 1, "an overlong three-byte form"},
           Case{"\xf0\x8f\xbf\xbf", 0, "an overlong four-byte form"},
           Case{"\xed\xa0\x80", 0, "a surrogate"},
           Case{"\xed\xbf\xbf", 0, "a surrogate"},
           Case{"\xf4\x90\x80\x80", 0, "past U+10FFFF"},
           Case{"\xf5\x80\x80\x80", 0, "a lead byte that never starts a character"},
           Case{"\xff", 0, "a byte that is never UTF-8"},
           Case{"ok\xe2\x82", 2, "a sequence cut short by the end"},
           Case{"\xe2\x28\xa1", 0, "a sequence cut short by an ASCII byte"},
       }) {
    EXPECT_EQ(invalid_utf8_at(c.text), c.at) << c.what;
    EXPECT_EQ(utf8_length(c.text, c.at), 0u) << c.what;
  }
  EXPECT_EQ(utf8_length("\xf0\x9f\x98\x80", 0), 4u);
  EXPECT_EQ(utf8_length("a", 0), 1u);
}

}  // namespace
}  // namespace duet
