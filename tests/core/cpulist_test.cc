#include "core/cpulist.h"

#include <doctest/doctest.h>

#include <nano/error.h>

using nano::format_cpu_list;
using nano::format_cpu_lists;
using nano::parse_cpu_list;
using nano::parse_cpu_lists;

TEST_CASE("parse_cpu_list reads ranges, singles and mixes") {
  CHECK(parse_cpu_list("0") == std::vector<int>{0});
  CHECK(parse_cpu_list("0-3") == std::vector<int>{0, 1, 2, 3});
  CHECK(parse_cpu_list("0-1,8,10-11") == std::vector<int>{0, 1, 8, 10, 11});
  CHECK(parse_cpu_list("8,0-1") == std::vector<int>{0, 1, 8});  // sorted
  CHECK(parse_cpu_list("1,1,0-1") == std::vector<int>{0, 1});   // unique
  CHECK(parse_cpu_list(" 2-3 ") == std::vector<int>{2, 3});     // shell quoting slack
  CHECK(parse_cpu_list("5-5") == std::vector<int>{5});
}

TEST_CASE("parse_cpu_list rejects bad text with the exact message") {
  const std::vector<std::pair<std::string, std::string>> table = {
      {"0-x", "malformed CPU list \"0-x\""},
      {"3-1", "malformed CPU list \"3-1\""},
      {"a", "malformed CPU list \"a\""},
      {"1,,2", "malformed CPU list \"1,,2\""},
      {"-1", "malformed CPU list \"-1\""},
      {"1,", "malformed CPU list \"1,\""},
      {"1-2-3", "malformed CPU list \"1-2-3\""},
      {"1 2", "malformed CPU list \"1 2\""},
      {"", "empty CPU list \"\""},
      {"  ", "empty CPU list \"  \""},
      {"99999999999", "malformed CPU list \"99999999999\""},
  };
  for (const auto& [text, message] : table) {
    CAPTURE(text);
    CHECK_THROWS_WITH_AS(parse_cpu_list(text), message.c_str(), nano::UsageError);
  }
}

TEST_CASE("format_cpu_list writes the shortest range form") {
  CHECK(format_cpu_list({}) == "");
  CHECK(format_cpu_list({3}) == "3");
  CHECK(format_cpu_list({0, 1}) == "0-1");
  CHECK(format_cpu_list({0, 1, 2, 3, 8, 10, 11}) == "0-3,8,10-11");
  CHECK(format_cpu_list({11, 10, 3, 3, 0}) == "0,3,10-11");
}

TEST_CASE("format and parse round-trip") {
  for (const std::string text : {"0", "0-3,8,10-11", "1,3,5", "0-127"})
    CHECK(format_cpu_list(parse_cpu_list(text)) == text);
}

TEST_CASE("parse_cpu_lists: one list per rank") {
  using Lists = std::vector<std::vector<int>>;
  CHECK(parse_cpu_lists("0-3;4-7,20") == Lists{{0, 1, 2, 3}, {4, 5, 6, 7, 20}});
  CHECK(parse_cpu_lists("0-3;4-7;") == Lists{{0, 1, 2, 3}, {4, 5, 6, 7}});  // trailing ';' forgiven
  CHECK(parse_cpu_lists("5") == Lists{{5}});
  CHECK_THROWS_WITH_AS(parse_cpu_lists("0;;1"), "the CPU list of rank 1 is empty", nano::UsageError);
  CHECK_THROWS_WITH_AS(parse_cpu_lists(";1"), "the CPU list of rank 0 is empty", nano::UsageError);
  CHECK_THROWS_WITH_AS(parse_cpu_lists(""), "the CPU list of rank 0 is empty", nano::UsageError);
  CHECK_THROWS_WITH_AS(parse_cpu_lists("0;x"), "malformed CPU list \"x\"", nano::UsageError);
  CHECK(format_cpu_lists({{0, 1, 2, 3}, {5, 7}}) == "0-3;5,7");
  CHECK(parse_cpu_lists(format_cpu_lists({{2}, {0, 1}})) == Lists{{2}, {0, 1}});
}
