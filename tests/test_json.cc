// The JSON reader and writer (base/json.*): every kind of value, the
// position of every value and key, escapes, errors that name the line and
// column, exact integers, limits, and round trips through the writer.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "base/json.h"
#include "tests/support/expect_error.h"

using namespace hoccl;
using testsupport::expectError;

namespace {

Status parseJson(const std::string& text) {
  json::Value v;
  return json::parse(text, &v);
}

TEST(Json, ParsesEveryKindOfValue) {
  json::Value v;
  ASSERT_TRUE(json::parse("{\"b\": true, \"a\": [1, -2.5e3, null, false, \"x\"],\n \"o\": {\"k\": {}}, \"e\": []}", &v)
                  .ok());
  ASSERT_TRUE(v.isObject());
  ASSERT_EQ(v.members().size(), 4u);
  EXPECT_EQ(v.members()[0].key, "b");  // insertion order, not sorted
  EXPECT_EQ(v.members()[1].key, "a");
  EXPECT_TRUE(v.find("b")->asBool());
  const auto& a = v.find("a")->items();
  ASSERT_EQ(a.size(), 5u);
  EXPECT_EQ(a[0].asNumber(), 1);
  EXPECT_EQ(a[1].asNumber(), -2500);
  EXPECT_TRUE(a[2].isNull());
  EXPECT_FALSE(a[3].asBool());
  EXPECT_EQ(a[4].asString(), "x");
  EXPECT_TRUE(v.find("o")->find("k")->isObject());
  EXPECT_EQ(v.find("o")->line, 2);
  EXPECT_EQ(v.find("o")->column, 7);
  EXPECT_EQ(v.members()[2].line, 2);
  EXPECT_EQ(v.members()[2].column, 2);
  EXPECT_EQ(v.find("missing"), nullptr);
  EXPECT_EQ(v.find("e")->items().size(), 0u);
}

// Every value and key knows where it starts, whatever comes before it.
TEST(Json, PositionsOfEveryValueAndKey) {
  json::Value v;
  ASSERT_TRUE(json::parse("{\"a\\\"\": [-1.5e3, \"x\\\\\", 0, true,\n\tfalse,null,{},\n  []],\r\n\"b\" :\"\xC3\xA9\"}", &v).ok());
  using Pos = std::pair<int, int>;
  auto at = [](const json::Value& x) { return Pos(x.line, x.column); };
  EXPECT_EQ(at(v), Pos(1, 1));
  ASSERT_EQ(v.members().size(), 2u);
  EXPECT_EQ(Pos(v.members()[0].line, v.members()[0].column), Pos(1, 2));
  const auto& a = v.members()[0].value;
  EXPECT_EQ(at(a), Pos(1, 9));
  ASSERT_EQ(a.items().size(), 8u);
  const Pos want[] = {{1, 10}, {1, 18}, {1, 25}, {1, 28}, {2, 2}, {2, 8}, {2, 13}, {3, 3}};
  for (size_t i = 0; i < 8; ++i) EXPECT_EQ(at(a.items()[i]), want[i]) << i;
  EXPECT_EQ(Pos(v.members()[1].line, v.members()[1].column), Pos(4, 1));
  EXPECT_EQ(at(v.members()[1].value), Pos(4, 6));
  EXPECT_EQ(v.members()[1].value.asString(), "\xC3\xA9");
}

TEST(Json, Escapes) {
  json::Value v;
  ASSERT_TRUE(json::parse(R"("q\" b\\ s\/ \b\f\n\r\t \u00e9 \u20AC \ud83d\ude00")", &v).ok());
  EXPECT_EQ(v.asString(), "q\" b\\ s/ \b\f\n\r\t \xC3\xA9 \xE2\x82\xAC \xF0\x9F\x98\x80");
  // The writer escapes what must be escaped and keeps UTF-8.
  std::string s = json::quote(std::string("a\"b\\c\n\x01\xC3\xA9", 9));
  EXPECT_EQ(s, "\"a\\\"b\\\\c\\n\\u0001\xC3\xA9\"");
  json::Value back;
  ASSERT_TRUE(json::parse(s, &back).ok());
  EXPECT_EQ(back.asString(), std::string("a\"b\\c\n\x01\xC3\xA9", 9));
  // Invalid UTF-8 is replaced when writing, rejected when reading: a stray
  // byte, a cut sequence, an overlong form, a UTF-16 surrogate.
  EXPECT_EQ(json::quote("\xFF"), "\"\xEF\xBF\xBD\"");
  expectError(parseJson("\"\xFF\""), {"line 1, column 2", "UTF-8", "byte 0xFF"});
  expectError(parseJson("\"\xC3\""), {"line 1, column 3", "UTF-8"});
  expectError(parseJson("\"\xC0\xAF\""), {"line 1, column 2", "UTF-8", "byte 0xC0"});
  expectError(parseJson("\"\xED\xA0\x80\""), {"line 1, column 3", "UTF-8"});
  expectError(parseJson("[1,\n \"ok\xC3\xA9\xFF\"]"), {"line 2, column 7", "UTF-8", "byte 0xFF"});
}

// Every message starts with the line and column of the problem: the first
// byte of an unexpected token, or the bad byte inside a string or number.
TEST(Json, MalformedInputNamesLineAndColumn) {
  expectError(parseJson(""), {"line 1, column 1: ", "end of input"});
  expectError(parseJson("  \n "), {"line 2, column 2: ", "end of input"});
  expectError(parseJson("{\n  \"a\": 1,\n}"), {"line 3, column 1: ", "trailing commas are not allowed"});
  expectError(parseJson("[1,\n2,\n]"), {"line 3, column 1: ", "trailing commas are not allowed"});
  expectError(parseJson("{\"a\" 1}"), {"line 1, column 6: ", "expected ':'"});
  expectError(parseJson("{\"a\": 1\n \"b\": 2}"), {"line 2, column 2: ", "unexpected string"});
  expectError(parseJson("[1 2]"), {"line 1, column 4: ", "unexpected number"});
  expectError(parseJson("[1,,2]"), {"line 1, column 4: ", "unexpected ','"});
  expectError(parseJson("{\n\"a\": \"abc"), {"line 2, column 10: ", "missing closing quote"});
  expectError(parseJson("[tru]"), {"line 1, column 2: ", "invalid literal"});
  expectError(parseJson("[truex]"), {"line 1, column 6: ", "invalid literal"});
  expectError(parseJson("012"), {"line 1, column 2: ", "numbers may not have leading zeros"});
  expectError(parseJson("[-012]"), {"line 1, column 4: ", "numbers may not have leading zeros"});
  expectError(parseJson("1."), {"line 1, column 3: ", "invalid number"});
  expectError(parseJson("-"), {"line 1, column 2: ", "invalid number"});
  expectError(parseJson("[+1]"), {"line 1, column 2: ", "invalid literal"});
  expectError(parseJson("[NaN]"), {"line 1, column 2: ", "invalid literal"});
  expectError(parseJson("{\"a\": 1, \"a\": 2}"), {"line 1, column 10: ", "duplicate key \"a\""});
  expectError(parseJson("{\"o\": {\"b\": 1,\n \"b\": 1}}"), {"line 2, column 2: ", "duplicate key \"b\""});
  expectError(parseJson("\"\\x\""), {"line 1, column 3: ", "invalid string"});
  expectError(parseJson("\"\\u12\""), {"line 1, column 6: ", "4 hex digits"});
  expectError(parseJson("\"\\ud800\""), {"line 1, column 8: ", "surrogate"});
  expectError(parseJson("\"\\udc00\""), {"line 1, column 7: ", "surrogate"});
  expectError(parseJson("\"a\nb\""), {"line 1, column 3: ", "control character U+000A"});
  expectError(parseJson("{} {}"), {"line 1, column 4: ", "expected end of input"});
  expectError(parseJson("{1: 2}"), {"line 1, column 2: ", "expected string literal"});
  expectError(parseJson("[1, /* c */ 2]"), {"line 1, column 5: ", "comments are not allowed"});
  expectError(parseJson("{}\n// c"), {"line 2, column 1: ", "comments are not allowed"});
  expectError(parseJson("\x01"), {"line 1, column 1: ", "U+0001"});
  // nlohmann would take a NUL for the end of the text, and skip a byte order mark.
  expectError(parseJson(std::string("{}\n \0", 5)), {"line 2, column 2: ", "NUL byte"});
  expectError(parseJson(std::string("[\"a\0\"]", 6)), {"line 1, column 4: ", "NUL byte"});
  expectError(parseJson("\xEF\xBB\xBF{}"), {"line 1, column 1: ", "byte order mark"});
}

TEST(Json, NumbersKeepIntegersExact) {
  json::Value v;
  ASSERT_TRUE(json::parse("[0, -0, 7, 3.0, 1.5, 1e2, 9007199254740993, -9223372036854775808, 9223372036854775807,"
                          " 18446744073709551615, 1e20]",
                          &v)
                  .ok());
  const auto& a = v.items();
  ASSERT_EQ(a.size(), 11u);
  int64_t i = -1;
  EXPECT_TRUE(a[0].asInteger(&i) && i == 0);
  EXPECT_TRUE(a[1].asInteger(&i) && i == 0);
  EXPECT_TRUE(a[2].asInteger(&i) && i == 7);
  EXPECT_TRUE(a[3].asInteger(&i) && i == 3);  // integral, if written with a fraction
  EXPECT_FALSE(a[4].asInteger(&i));
  EXPECT_EQ(a[4].asNumber(), 1.5);
  EXPECT_TRUE(a[5].asInteger(&i) && i == 100);
  EXPECT_TRUE(a[6].asInteger(&i) && i == 9007199254740993);  // a double would round it to 2^53
  EXPECT_TRUE(a[7].asInteger(&i) && i == INT64_MIN);
  EXPECT_TRUE(a[8].asInteger(&i) && i == INT64_MAX);
  EXPECT_FALSE(a[9].asInteger(&i));  // beyond int64_t: a double, not exact
  EXPECT_EQ(a[9].asNumber(), 18446744073709551615.0);
  EXPECT_FALSE(a[10].asInteger(&i));
  EXPECT_EQ(json::write(v, 0),
            "[0,0,7,3,1.5,100,9007199254740993,-9223372036854775808,9223372036854775807,1.8446744073709552e+19,"
            "1e+20]");
  // Out of a double's range, either way, is an error, not infinity or zero.
  expectError(parseJson("[1,\n 1e400]"), {"line 2, column 2: ", "number out of range"});
  expectError(parseJson("-1e400"), {"line 1, column 1: ", "number out of range"});
  expectError(parseJson("{\"a\": 1e-400}"), {"line 1, column 7: ", "number out of range: 1e-400"});
  EXPECT_TRUE(parseJson("[0e400, 0.0e-999, 4.9e-324]").ok());
}

TEST(Json, DeepNestingAndHugeInputAreRejected) {
  std::string ok = std::string(64, '[') + std::string(64, ']');
  EXPECT_TRUE(parseJson(ok).ok());
  expectError(parseJson(std::string(65, '[') + std::string(65, ']')), {"nesting deeper than 64"});
  // Far deeper than any stack would allow if the parser recursed blindly.
  expectError(parseJson(std::string(1000000, '[')), {"nesting deeper than 64"});
  std::string objs;
  for (int i = 0; i < 100; ++i) objs += "{\"a\":";
  expectError(parseJson(objs), {"nesting deeper"});
  json::Limits small;
  small.maxBytes = 10;
  json::Value v;
  expectError(json::parse("[1,2,3,4,5,6]", &v, small), {"larger than the limit"});
  small = json::Limits();
  small.maxValues = 3;
  expectError(json::parse("[1,2,3,4]", &v, small), {"more than 3 values"});
  small = json::Limits();
  small.maxStringBytes = 4;
  expectError(json::parse("\"abcdefgh\"", &v, small), {"string longer than"});
}

TEST(Json, WriterRoundTrips) {
  json::Value v = json::Value::object();
  v.set("name", "a \"b\"");
  v.set("n", 1.5);
  v.set("big", 1e300);
  v.set("int", 123456789012LL);
  v.set("neg", -7);
  v.set("t", true);
  v.set("z", nullptr);
  json::Value& arr = v.set("arr", json::Value::array());
  arr.push(1);
  arr.push("two");
  arr.push(json::Value::object()).set("k", 0.1);
  v.set("n", 2.25);  // replaces, keeps the position
  EXPECT_EQ(v.members()[1].key, "n");
  for (int indent : {0, 2}) {
    std::string text = json::write(v, indent);
    json::Value back;
    ASSERT_TRUE(json::parse(text, &back).ok()) << text;
    EXPECT_EQ(json::write(back, indent), text);
    EXPECT_EQ(back.find("n")->asNumber(), 2.25);
    EXPECT_EQ(back.find("big")->asNumber(), 1e300);
    EXPECT_EQ(back.find("int")->asNumber(), 123456789012.0);
    EXPECT_EQ(back.find("arr")->items()[2].find("k")->asNumber(), 0.1);
  }
  EXPECT_EQ(json::write(v, 0),
            "{\"name\":\"a \\\"b\\\"\",\"n\":2.25,\"big\":1e+300,\"int\":123456789012,\"neg\":-7,\"t\":true,"
            "\"z\":null,\"arr\":[1,\"two\",{\"k\":0.1}]}");
  EXPECT_EQ(json::write(json::Value::object(), 2), "{}\n");
  json::Value pretty = json::Value::object();
  pretty.set("a", json::Value::array()).push(1);
  pretty.set("e", json::Value::array());
  EXPECT_EQ(json::write(pretty, 2), "{\n  \"a\": [\n    1\n  ],\n  \"e\": []\n}\n");
  EXPECT_EQ(json::write(json::Value(std::nan("")), 0), "null");
  EXPECT_EQ(json::write(json::Value(-std::numeric_limits<double>::infinity()), 0), "null");
  EXPECT_EQ(json::write(json::Value(3.0), 0), "3");
  EXPECT_EQ(json::write(json::Value(18446744073709551615ull), 0), "1.8446744073709552e+19");
  EXPECT_EQ(json::write(json::Value("\xFF"), 0), "\"\xEF\xBF\xBD\"");
}

}  // namespace
