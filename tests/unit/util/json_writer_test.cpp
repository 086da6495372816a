// Unit tests of rondel::util::JsonWriter: nesting and commas, arrays, escaping, number forms.
#include "rondel/util/json_writer.h"

#include <doctest/doctest.h>

#include <cstdint>
#include <limits>
#include <string>

using rondel::util::JsonWriter;

TEST_CASE("objects and arrays nest with commas placed by the writer") {
  JsonWriter j;
  j.begin();
  j.field("a", uint64_t{1});
  j.begin_array("list");
  j.value(1);
  j.value("two");
  j.begin();
  j.field("x", true);
  j.end();
  j.begin_array();
  j.end_array();
  j.null_value();
  j.end_array();
  j.begin("obj");
  j.end();
  j.null_field("n");
  j.end();
  CHECK(j.str() == R"({"a":1,"list":[1,"two",{"x":true},[],null],"obj":{},"n":null})");
}

TEST_CASE("integers of every width print exactly, negative ones included") {
  JsonWriter j;
  j.begin_array();
  j.value(std::numeric_limits<uint64_t>::max());
  j.value(std::numeric_limits<int64_t>::min());
  j.value(uint32_t{7});
  j.value(-3);
  j.value(size_t{0});
  j.end_array();
  CHECK(j.str() == "[18446744073709551615,-9223372036854775808,7,-3,0]");
}

TEST_CASE("doubles print with 6 significant digits, non-finite ones as null") {
  JsonWriter j;
  j.begin();
  j.field("share", 0.25);
  j.field("third", 1.0 / 3.0);
  j.field("nan", std::numeric_limits<double>::quiet_NaN());
  j.field("inf", std::numeric_limits<double>::infinity());
  j.field("f", false);
  j.end();
  CHECK(j.str() == R"({"share":0.25,"third":0.333333,"nan":null,"inf":null,"f":false})");
}

TEST_CASE("strings and keys escape quotes, backslashes and every control character") {
  JsonWriter j;
  j.begin();
  std::string all_controls;
  for (int c = 0; c < 0x20; ++c) all_controls += static_cast<char>(c);
  j.field("k\"ey\\", std::string_view("a\"b\\c"));
  j.field("ctl", all_controls);
  j.field("utf8", "caf\xc3\xa9");
  j.field("del", "\x7f");
  j.end();
  CHECK(j.str() ==
        "{\"k\\\"ey\\\\\":\"a\\\"b\\\\c\","
        "\"ctl\":\"\\u0000\\u0001\\u0002\\u0003\\u0004\\u0005\\u0006\\u0007\\b\\t\\n\\u000b\\f"
        "\\r\\u000e\\u000f\\u0010\\u0011\\u0012\\u0013\\u0014\\u0015\\u0016\\u0017\\u0018"
        "\\u0019\\u001a\\u001b\\u001c\\u001d\\u001e\\u001f\","
        "\"utf8\":\"caf\xc3\xa9\",\"del\":\"\x7f\"}");
}

TEST_CASE("a std::string value and a string literal are strings, not booleans") {
  JsonWriter j;
  j.begin();
  j.field("s", std::string("x"));
  j.field("lit", "y");
  j.end();
  CHECK(j.str() == R"({"s":"x","lit":"y"})");
}

TEST_CASE("take() hands over the text and clear() starts a new document") {
  JsonWriter j;
  j.begin();
  j.field("a", 1);
  j.end();
  j.newline();
  CHECK(j.take() == "{\"a\":1}\n");
  j.clear();
  j.begin_array();
  j.value(2);
  j.end_array();
  CHECK(j.str() == "[2]");
}
