// Tests of duet::Options: every getter, its errors, and finish().
#include "duet/options.h"

#include <gtest/gtest.h>

#include <functional>

#include "duet/error.h"

namespace duet {
namespace {

// The message of the duet::Error(kConfig) that `fn` throws; fails otherwise.
std::string config_error(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kConfig) << e.what();
    return e.what();
  }
  ADD_FAILURE() << "no duet::Error thrown";
  return "";
}

Options make(std::initializer_list<std::pair<std::string, std::string>> values) {
  Options options("backend.options");
  for (const auto& [key, value] : values) options.set(key, value);
  return options;
}

TEST(OptionsTest, StoresValuesAndPath) {
  Options options = make({{"threads", "2"}});
  EXPECT_EQ(options.path(), "backend.options");
  EXPECT_TRUE(options.has("threads"));
  EXPECT_FALSE(options.has("thread"));
  EXPECT_EQ(options.values().at("threads"), "2");
  options.set("threads", "4");
  EXPECT_EQ(options.values().at("threads"), "4");
}

TEST(OptionsTest, GetIntReadsValueOrFallback) {
  Options options = make({{"threads", "8"}, {"offset", "-3"}});
  EXPECT_EQ(options.get_int("threads", 1, 1, 256), 8);
  EXPECT_EQ(options.get_int("offset", 0, -10, 10), -3);
  EXPECT_EQ(options.get_int("absent", 7, 1, 256), 7);
  EXPECT_NO_THROW(options.finish());
}

TEST(OptionsTest, GetIntRejectsNonIntegers) {
  for (const char* bad : {"many", "2.5", "", "3x", "0x10"}) {
    Options options = make({{"threads", bad}});
    std::string message = config_error([&] { options.get_int("threads", 1, 1, 256); });
    EXPECT_NE(message.find("backend.options.threads"), std::string::npos) << message;
    EXPECT_NE(message.find("1..256"), std::string::npos) << message;
    EXPECT_NE(message.find(std::string("found '") + bad + "'"), std::string::npos) << message;
  }
}

TEST(OptionsTest, GetIntRejectsOutOfRange) {
  Options options = make({{"threads", "300"}});
  EXPECT_EQ(config_error([&] { options.get_int("threads", 1, 1, 256); }),
            "backend.options.threads: 300 is out of range; expected an integer in 1..256");
  Options overflow = make({{"threads", "99999999999999999999"}});
  EXPECT_NE(config_error([&] {
              overflow.get_int("threads", 1, 1, 256);
            }).find("expected an integer in 1..256"),
            std::string::npos);
}

TEST(OptionsTest, GetDoubleReadsValueOrFallback) {
  Options options = make({{"p", "0.95"}, {"scale", "1e-3"}, {"whole", "2"}});
  EXPECT_DOUBLE_EQ(options.get_double("p", 1.0, 0.0, 1.0), 0.95);
  EXPECT_DOUBLE_EQ(options.get_double("scale", 1.0, 0.0, 1.0), 0.001);
  EXPECT_DOUBLE_EQ(options.get_double("whole", 1.0, 0.0, 10.0), 2.0);
  EXPECT_DOUBLE_EQ(options.get_double("absent", 0.5, 0.0, 1.0), 0.5);
}

TEST(OptionsTest, GetDoubleRejectsBadValues) {
  Options word = make({{"p", "high"}});
  EXPECT_EQ(config_error([&] { word.get_double("p", 1.0, 0.0, 1.0); }),
            "backend.options.p: expected a number in 0..1, found 'high'");
  Options range = make({{"p", "1.5"}});
  EXPECT_EQ(config_error([&] { range.get_double("p", 1.0, 0.0, 1.0); }),
            "backend.options.p: 1.5 is out of range; expected a number in 0..1");
  for (const char* not_finite : {"nan", "inf", "-inf"}) {
    Options options = make({{"p", not_finite}});
    EXPECT_NE(
        config_error([&] { options.get_double("p", 1.0, 0.0, 1.0); }).find("expected a number"),
        std::string::npos);
  }
}

TEST(OptionsTest, GetBoolAcceptsTrueAndFalseOnly) {
  Options options = make({{"a", "true"}, {"b", "false"}, {"c", "yes"}});
  EXPECT_TRUE(options.get_bool("a", false));
  EXPECT_FALSE(options.get_bool("b", true));
  EXPECT_TRUE(options.get_bool("absent", true));
  EXPECT_EQ(config_error([&] { options.get_bool("c", false); }),
            "backend.options.c: expected true or false, found 'yes'");
}

TEST(OptionsTest, GetStringReturnsValueOrFallback) {
  Options options = make({{"name", "x"}, {"empty", ""}});
  EXPECT_EQ(options.get_string("name", "y"), "x");
  EXPECT_EQ(options.get_string("empty", "y"), "");
  EXPECT_EQ(options.get_string("absent", "y"), "y");
}

TEST(OptionsTest, GetChoiceAcceptsOnlyChoices) {
  Options options = make({{"layout", "rows"}, {"bad", "colums"}});
  const std::vector<std::string> choices = {"rows", "columns"};
  EXPECT_EQ(options.get_choice("layout", "columns", choices), "rows");
  EXPECT_EQ(options.get_choice("absent", "columns", choices), "columns");
  EXPECT_EQ(config_error([&] { options.get_choice("bad", "rows", choices); }),
            "backend.options.bad: expected one of 'rows', 'columns', found 'colums'; "
            "did you mean 'columns'?");
}

TEST(OptionsTest, FinishAcceptsWhenEveryKeyWasRead) {
  Options options = make({{"threads", "2"}, {"pin", "true"}});
  options.get_int("threads", 1, 1, 256);
  options.get_bool("pin", false);
  EXPECT_NO_THROW(options.finish());
}

TEST(OptionsTest, FinishRejectsUnreadKeysWithSuggestion) {
  Options options = make({{"thread", "2"}});
  options.get_int("threads", 1, 1, 256);
  EXPECT_EQ(config_error([&] { options.finish(); }),
            "backend.options.thread: unknown option 'thread'; did you mean 'threads'?");
}

TEST(OptionsTest, FinishListsEveryUnknownKey) {
  Options options = make({{"thread", "2"}, {"zzz", "1"}});
  options.get_int("threads", 1, 1, 256);
  options.get_bool("pin", false);
  EXPECT_EQ(config_error([&] { options.finish(); }),
            "backend.options.thread: unknown option 'thread'; did you mean 'threads'?\n"
            "backend.options.zzz: unknown option 'zzz'; known options: 'pin', 'threads'");
}

TEST(OptionsTest, FinishOnComponentWithoutOptions) {
  Options options = make({{"x", "1"}});
  EXPECT_EQ(config_error([&] { options.finish(); }),
            "backend.options.x: unknown option 'x'; this component takes no options");
}

TEST(OptionsTest, RequireNamesTheKeyWhatItIsAndAMisspelling) {
  EXPECT_EQ(config_error([&] { make({}).require("window", "positions attended"); }),
            "backend.options.window is required (positions attended); set it under "
            "backend.options");
  EXPECT_EQ(config_error([&] {
              make({{"windw", "8"}}).require("window", "positions attended");
            }),
            "backend.options.window is required (positions attended); 'windw' was given: did you "
            "mean 'window'?");
  Options given = make({{"window", "8"}});
  given.require("window", "positions attended");
  EXPECT_NO_THROW(given.finish()) << "require() marks the key used";
  EXPECT_EQ(given.get_int("window", 0, 1, 16), 8);
}

TEST(OptionsTest, EmptyPathNamesKeyAlone) {
  Options options;
  options.set("k", "v");
  EXPECT_EQ(config_error([&] { options.get_int("k", 0, 0, 1); }),
            "k: expected an integer in 0..1, found 'v'");
}

}  // namespace
}  // namespace duet
