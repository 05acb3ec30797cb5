#include "env-init/parse.h"

#include <doctest/doctest.h>

#include <climits>

using namespace nano;

TEST_CASE("parse_integer takes whole base-10 integers within the range") {
  struct Case {
    const char* text;
    long long min, max;
    std::optional<long long> expected;
  };
  const Case cases[] = {
      {"0", 0, 10, 0},
      {"7", 0, 10, 7},
      {"10", 0, 10, 10},
      {"11", 0, 10, std::nullopt},  // over max
      {"-1", 0, 10, std::nullopt},  // under min
      {"-5", -10, 10, -5},
      {"007", 0, 10, 7},  // leading zeros are still base 10, not octal
      {"", 0, 10, std::nullopt},
      {"-", -10, 10, std::nullopt},
      {"12abc", 0, 100, std::nullopt},  // std::stoi would give 12
      {"1.5", 0, 10, std::nullopt},
      {" 1", 0, 10, std::nullopt},
      {"1 ", 0, 10, std::nullopt},
      {"+1", 0, 10, std::nullopt},
      {"0x10", 0, 100, std::nullopt},
      {"--1", -10, 10, std::nullopt},
      {"65535", 1, 65535, 65535},
      {"65536", 1, 65535, std::nullopt},
      {"9223372036854775807", LLONG_MIN, LLONG_MAX, LLONG_MAX},
      {"9223372036854775808", LLONG_MIN, LLONG_MAX, std::nullopt},  // overflow, not wrapped
      {"-9223372036854775808", LLONG_MIN, LLONG_MAX, LLONG_MIN},
      {"-9223372036854775809", LLONG_MIN, LLONG_MAX, std::nullopt},
      {"99999999999999999999999", 0, LLONG_MAX, std::nullopt},
  };
  for (const auto& c : cases) {
    CAPTURE(c.text);
    CHECK(parse_integer(c.text, c.min, c.max) == c.expected);
  }
}
