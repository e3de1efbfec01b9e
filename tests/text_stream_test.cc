// TextStream (core/src/text/text_stream.h): stop strings end the text before
// them, text that could start one is held back, and a stream made unarmed
// lets its stop strings pass until arm().
#include "text/text_stream.h"

#include <gtest/gtest.h>

namespace duet {
namespace {

TEST(TextStream, StopStringEndsTheTextBeforeIt) {
  TextStream s({"END"});
  EXPECT_EQ(s.push("ab").text, "ab");
  const TextStream::Pushed held = s.push("cE");  // "E" could start "END"
  EXPECT_EQ(held.text, "c");
  EXPECT_FALSE(held.stopped);
  const TextStream::Pushed stopped = s.push("NDx");
  EXPECT_TRUE(stopped.stopped);
  EXPECT_EQ(stopped.text, "");
  EXPECT_EQ(s.flush(), "");
}

TEST(TextStream, UnarmedStopStringsPassUntilArmed) {
  TextStream s({"END"}, false);
  const TextStream::Pushed early = s.push("aEND");
  EXPECT_FALSE(early.stopped);
  EXPECT_EQ(early.text, "aEND");  // nothing held back either
  s.arm();
  EXPECT_EQ(s.push("bE").text, "b");
  const TextStream::Pushed stopped = s.push("ND");
  EXPECT_TRUE(stopped.stopped);
  EXPECT_EQ(stopped.text, "");
}

}  // namespace
}  // namespace duet
