// DDP's bucket assignment as a table: reverse order, the cap, element-type changes.
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "runtime/training/bucket_assignment.h"

namespace {

using Buckets = std::vector<std::vector<std::size_t>>;

struct Case {
  std::string name;
  std::vector<nano::GradientSpec> gradients;
  std::size_t cap;
  Buckets expected;
};

}  // namespace

TEST_CASE("assign_buckets: the table") {
  const int f32 = 6, f64 = 7;
  const std::vector<Case> cases = {
      {"no gradients", {}, 100, {}},
      {"one gradient", {{40, f32}}, 100, {{0}}},
      {"all fit: one bucket, reverse order", {{10, f32}, {20, f32}, {30, f32}}, 100, {{2, 1, 0}}},
      {"exactly the cap fits", {{50, f32}, {50, f32}}, 100, {{1, 0}}},
      {"one byte over starts a new bucket", {{51, f32}, {50, f32}}, 100, {{1}, {0}}},
      {"the cap splits in reverse", {{30, f32}, {30, f32}, {30, f32}, {30, f32}}, 60, {{3, 2}, {1, 0}}},
      {"a gradient over the cap has its own bucket", {{10, f32}, {500, f32}, {10, f32}}, 100, {{2}, {1}, {0}}},
      {"an element type change starts a bucket", {{10, f64}, {10, f32}, {10, f32}}, 100, {{2, 1}, {0}}},
      {"types alternate", {{8, f32}, {8, f64}, {8, f32}}, 100, {{2}, {1}, {0}}},
      {"a cap of one byte: one bucket each", {{4, f32}, {4, f32}}, 1, {{1}, {0}}},
  };
  for (const auto& c : cases) {
    CAPTURE(c.name);
    CHECK(nano::assign_buckets(c.gradients, c.cap) == c.expected);
  }
}
