#include "json/json_writer.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <limits>
#include <nlohmann/json.hpp>
#include <string>

namespace opscope::internal {
namespace json_writer_test {

std::string escaped(std::string_view s) {
  JsonWriter w;
  w.string(s);
  return w.str();
}

std::string micros(std::int64_t ns) {
  JsonWriter w;
  w.micros(ns);
  return w.str();
}

// Reads the writer's output back with an independent parser.
std::string round_trip(std::string_view s) {
  return nlohmann::json::parse(escaped(s)).get<std::string>();
}

TEST(JsonWriter, EscapesQuotesBackslashesAndControlCharacters) {
  EXPECT_EQ(escaped("plain"), R"("plain")");
  EXPECT_EQ(escaped("say \"hi\""), R"("say \"hi\"")");
  EXPECT_EQ(escaped("C:\\dir"), R"("C:\\dir")");
  EXPECT_EQ(escaped("a\nb\tc\rd\be\ff"), R"("a\nb\tc\rd\be\ff")");
  EXPECT_EQ(escaped(std::string_view("\x00\x01\x1f", 3)), R"("\u0000\u0001\u001f")");
  EXPECT_EQ(escaped("\x7f/"), "\"\x7f/\"");  // DEL and slash need no escape
  EXPECT_EQ(escaped(""), R"("")");
}

TEST(JsonWriter, TrickyStringsRoundTrip) {
  const std::string all_controls = [] {
    std::string s;
    for (int c = 0; c < 0x20; ++c) s.push_back(static_cast<char>(c));
    return s;
  }();
  for (const std::string& s : {std::string("aten::add_(\"x\", '\\')"), all_controls,
                               std::string("\xC3\xA9t\xC3\xA9 \xE6\x97\xA5\xE6\x9C\xAC"),
                               std::string("emoji \xF0\x9F\x94\xA5 end"),
                               std::string("\xEF\xBF\xBF max BMP, \xF4\x8F\xBF\xBF max")}) {
    EXPECT_EQ(round_trip(s), s);
  }
}

TEST(JsonWriter, ValidUtf8PassesThroughUnescaped) {
  const std::string s = "\xE2\x82\xAC \xF0\x9F\x98\x80";
  EXPECT_EQ(escaped(s), "\"" + s + "\"");
}

TEST(JsonWriter, InvalidUtf8BecomesReplacementCharacters) {
  const std::string fffd = "\xEF\xBF\xBD";
  struct Case {
    std::string in, out;
  };
  for (const Case& c : {
           Case{"a\xFF" "b", "a" + fffd + "b"},                  // never valid
           Case{"\x80", fffd},                                   // stray continuation
           Case{"\xC3", fffd},                                   // truncated at the end
           Case{"\xC3(", fffd + "("},                            // bad continuation
           Case{"\xC0\xAF", fffd + fffd},                        // overlong '/'
           Case{"\xE0\x80\xAF", fffd + fffd + fffd},             // overlong, 3 bytes
           Case{"\xED\xA0\x80", fffd + fffd + fffd},             // UTF-16 surrogate
           Case{"\xF4\x90\x80\x80", fffd + fffd + fffd + fffd},  // above U+10FFFF
           Case{"\xE2\x82", fffd + fffd},                        // truncated 3-byte
       }) {
    EXPECT_EQ(escaped(c.in), "\"" + c.out + "\"") << c.in;
    EXPECT_EQ(round_trip(c.in), c.out);  // and nlohmann accepts the result as valid UTF-8
  }
}

TEST(JsonWriter, MicrosecondsWithThreeDecimals) {
  EXPECT_EQ(micros(0), "0.000");
  EXPECT_EQ(micros(1), "0.001");
  EXPECT_EQ(micros(999), "0.999");
  EXPECT_EQ(micros(1000), "1.000");
  EXPECT_EQ(micros(1234567), "1234.567");
  EXPECT_EQ(micros(-1), "-0.001");
  EXPECT_EQ(micros(-1234567), "-1234.567");
  EXPECT_EQ(micros(1'700'000'000'123'456'789), "1700000000123456.789");
  EXPECT_EQ(micros(std::numeric_limits<std::int64_t>::max()), "9223372036854775.807");
  EXPECT_EQ(micros(std::numeric_limits<std::int64_t>::min()), "-9223372036854775.808");
}

TEST(JsonWriter, PlacesCommasInNestedStructures) {
  JsonWriter w;
  w.begin_object();
  w.key("a");
  w.integer(-5);
  w.key("b");
  w.begin_array();
  w.uinteger(std::numeric_limits<std::uint64_t>::max());
  w.boolean(true);
  w.null();
  w.begin_object();
  w.end_object();
  w.begin_array();
  w.end_array();
  w.raw(R"({"x":[1]})");
  w.end_array();
  w.key("c\"");
  w.number(0.5);
  w.end_object();
  EXPECT_EQ(w.str(),
            R"({"a":-5,"b":[18446744073709551615,true,null,{},[],{"x":[1]}],"c\"":0.5})");
}

TEST(JsonWriter, DoublesAreShortestAndNonFiniteIsNull) {
  JsonWriter w;
  w.begin_array();
  w.number(0.1);
  w.number(-2.5e-300);
  w.number(1e21);
  w.number(std::numeric_limits<double>::infinity());
  w.number(std::numeric_limits<double>::quiet_NaN());
  w.end_array();
  const auto j = nlohmann::json::parse(w.str());
  EXPECT_EQ(j[0].get<double>(), 0.1);
  EXPECT_EQ(j[1].get<double>(), -2.5e-300);
  EXPECT_EQ(j[2].get<double>(), 1e21);
  EXPECT_TRUE(j[3].is_null());
  EXPECT_TRUE(j[4].is_null());
}

TEST(JsonWriter, GrowsPastItsFirstBlock) {
  JsonWriter w(16);
  w.begin_array();
  for (int i = 0; i < 100000; ++i) w.string("element with some text");
  w.end_array();
  EXPECT_EQ(nlohmann::json::parse(w.str()).size(), 100000u);
}

}  // namespace json_writer_test
}  // namespace opscope::internal
