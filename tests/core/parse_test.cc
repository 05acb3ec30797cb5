#include "core/parse.h"

#include <doctest/doctest.h>

#include <climits>
#include <optional>
#include <string>
#include <vector>

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

TEST_CASE("parse_seconds: plain decimal seconds within bounds, to the millisecond") {
  using std::chrono::milliseconds;
  struct Case {
    std::string text;
    long long min_ms, max_ms;
    std::optional<long long> expected_ms;
  };
  const std::vector<Case> cases = {
      {"5", 0, 86400000, 5000},
      {"0", 0, 86400000, 0},
      {"0.5", 0, 86400000, 500},
      {"2.", 0, 86400000, 2000},
      {".25", 0, 86400000, 250},
      {"0.0004", 0, 86400000, 0},             // rounds to 0 ms
      {"0.0004", 1, 86400000, std::nullopt},  // ... which a positive minimum refuses
      {"86400", 0, 86400000, 86400000},
      {"86400.1", 0, 86400000, std::nullopt},
      {"0.9", 1000, 86400000, std::nullopt},
      {"", 0, 1000, std::nullopt},
      {".", 0, 1000, std::nullopt},
      {"1.2.3", 0, 100000, std::nullopt},
      {"-1", -5000, 1000, std::nullopt},  // no sign
      {"+1", 0, 1000, std::nullopt},
      {" 1", 0, 1000, std::nullopt},
      {"1s", 0, 1000, std::nullopt},
      {"1e3", 0, 10000000, std::nullopt},
      {"inf", 0, 1000, std::nullopt},
      {"nan", 0, 1000, std::nullopt},
      {"999999999999999999999", 0, 1000, std::nullopt},
  };
  for (const auto& c : cases) {
    CAPTURE(c.text);
    const auto got = parse_seconds(c.text, milliseconds(c.min_ms), milliseconds(c.max_ms));
    CHECK(got.has_value() == c.expected_ms.has_value());
    if (got && c.expected_ms) CHECK(got->count() == *c.expected_ms);
  }
}
