#include "json/json_reader.h"

#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "opscope/error.h"
#include "opscope/export.h"

namespace opscope::internal {
namespace json_reader_test {

TEST(JsonValidator, AcceptsCompleteValues) {
  for (const char* text : {
           "0", "-0", "1.5e10", "-12.25E-3", "1E+2", "true", "false", "null", R"("")",
           R"("\"\\\/\b\f\n\r\t\u00e9\uD83D\uDE00")", "[]", "{}", " \t\r\n[1, {\"a\": [null]}] \n",
           R"({"a":1,"a":2})",  // duplicate keys are legal JSON
           "\"\xE2\x82\xAC\"",  // UTF-8 in a string
           "123456789012345678901234567890", "1e400",
       }) {
    std::string error = "unchanged";
    EXPECT_TRUE(is_valid_json(text, &error)) << text << ": " << error;
    EXPECT_EQ(error, "");
  }
}

TEST(JsonValidator, RejectsWithByteOffset) {
  struct Case {
    std::string text;
    std::size_t offset;
  };
  for (const Case& c : {
           Case{"", 0},
           Case{"   ", 3},
           Case{"[1,]", 3},             // trailing comma
           Case{"{\"a\":1,}", 7},
           Case{"{a:1}", 1},            // unquoted key
           Case{"[1 2]", 3},
           Case{"01", 1},               // leading zero: "0" then garbage
           Case{"1.", 2},
           Case{".5", 0},
           Case{"-", 1},
           Case{"1e", 2},
           Case{"+1", 0},
           Case{"NaN", 0},
           Case{"tru", 0},
           Case{"\"abc", 4},
           Case{"\"a\tb\"", 2},         // raw control character
           Case{"\"\\x\"", 2},          // unknown escape
           Case{"\"\\u12G4\"", 5},
           Case{"\"\xC3\x28\"", 1},     // invalid UTF-8
           Case{"{} {}", 3},            // trailing garbage
           Case{"[1] x", 4},
           Case{"// c\n1", 0},          // no comments
           Case{std::string("1\0", 2), 1},
       }) {
    std::string error;
    EXPECT_FALSE(is_valid_json(c.text, &error)) << c.text;
    EXPECT_NE(error.find("at byte " + std::to_string(c.offset) + ":"), std::string::npos)
        << c.text << " -> " << error;
  }
  EXPECT_FALSE(is_valid_json("[", nullptr));  // no error string wanted
}

TEST(JsonValidator, LimitsNesting) {
  const auto nested = [](int depth) {
    return std::string(static_cast<std::size_t>(depth), '[') +
           std::string(static_cast<std::size_t>(depth), ']');
  };
  EXPECT_TRUE(is_valid_json(nested(kMaxJsonDepth)));
  std::string error;
  EXPECT_FALSE(is_valid_json(nested(kMaxJsonDepth + 1), &error));
  EXPECT_NE(error.find("nesting"), std::string::npos) << error;
  // Far deeper than any stack would take: refused, not crashed.
  EXPECT_FALSE(is_valid_json(std::string(10'000'000, '[')));
  EXPECT_THROW(parse_json(std::string(100'000, '{')), Error);
}

TEST(JsonReader, ParsesADom) {
  const JsonValue v = parse_json(
      R"({"fn":"setKinetOnDemandRequest","job_id":9007199254740993,"pids":[12,-3],)"
      R"("ratio":0.25,"on":true,"none":null,"s":"a\u00e9\uD83D\uDE00\n"})");
  ASSERT_EQ(v.type(), JsonValue::Type::kObject);
  EXPECT_EQ(v.find("fn")->as_string(), "setKinetOnDemandRequest");
  EXPECT_TRUE(v.find("job_id")->is_integer());
  EXPECT_EQ(v.find("job_id")->as_int(), 9007199254740993);  // not rounded through a double
  ASSERT_EQ(v.find("pids")->as_array().size(), 2u);
  EXPECT_EQ(v.find("pids")->as_array()[1].as_int(), -3);
  EXPECT_EQ(v.find("ratio")->as_double(), 0.25);
  EXPECT_TRUE(v.find("on")->as_bool());
  EXPECT_TRUE(v.find("none")->is_null());
  EXPECT_EQ(v.find("s")->as_string(), "a\xC3\xA9\xF0\x9F\x98\x80\n");
  EXPECT_EQ(v.find("missing"), nullptr);
  EXPECT_EQ(v.as_object().front().first, "fn");  // document order kept
}

TEST(JsonReader, NumbersOutsideInt64AndDouble) {
  EXPECT_FALSE(parse_json("18446744073709551616").is_integer());
  EXPECT_EQ(parse_json("18446744073709551616").as_double(), 18446744073709551616.0);
  EXPECT_EQ(parse_json("-1e400").as_double(), -HUGE_VAL);
  EXPECT_EQ(parse_json("1e-400").as_double(), 0.0);
  EXPECT_EQ(parse_json("2.0").as_int(), 2);
  EXPECT_THROW(parse_json("2.5").as_int(), Error);
}

TEST(JsonReader, LoneSurrogateBecomesReplacementCharacter) {
  EXPECT_EQ(parse_json(R"("\uD800x")").as_string(), "\xEF\xBF\xBDx");
  EXPECT_EQ(parse_json(R"("\uDC00\u0041")").as_string(), "\xEF\xBF\xBD" "A");
}

TEST(JsonReader, WrongTypeAndBadTextThrowError) {
  EXPECT_THROW(parse_json("[1]").as_object(), Error);
  EXPECT_THROW(parse_json("\"x\"").as_int(), Error);
  try {
    parse_json("{\"a\" 1}");
    FAIL() << "no exception";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "invalid JSON at byte 5: expected ':' after an object key");
  }
}

}  // namespace json_reader_test
}  // namespace opscope::internal
