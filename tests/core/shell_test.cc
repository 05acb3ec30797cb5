#include "core/shell.h"

#include <doctest/doctest.h>

#include <nlohmann/json.hpp>

#include <nano/error.h>

using namespace nano;

namespace {
Recipe sample() {
  Recipe r;
  r.set = {{"OMP_NUM_THREADS", "4", "why threads"}, {"LD_PRELOAD", "/opt/a.so:/j.so", "why lib"}};
  r.unset_names = {"OMP_NUM_THREADS"};
  return r;
}
}  // namespace

TEST_CASE("quoting survives quotes, backslashes, dollars and spaces") {
  CHECK(quote_for_shell("plain", Shell::kPosix) == "'plain'");
  CHECK(quote_for_shell("it's $HOME \\n", Shell::kPosix) == "'it'\\''s $HOME \\n'");
  CHECK(quote_for_shell("it's \\n", Shell::kFish) == "'it\\'s \\\\n'");
  CHECK(quote_for_shell("", Shell::kPosix) == "''");
}

TEST_CASE("exports for each shell") {
  CHECK(render_exports(sample(), Shell::kPosix) == "export OMP_NUM_THREADS='4'\nexport LD_PRELOAD='/opt/a.so:/j.so'\n");
  CHECK(render_exports(sample(), Shell::kFish) ==
        "set -gx OMP_NUM_THREADS '4'\nset -gx LD_PRELOAD '/opt/a.so:/j.so'\n");
  CHECK(render_exports(sample(), Shell::kPosix, true) ==
        "# OMP_NUM_THREADS: why threads\nexport OMP_NUM_THREADS='4'\n"
        "# LD_PRELOAD: why lib\nexport LD_PRELOAD='/opt/a.so:/j.so'\n");
  CHECK(parse_shell("zsh") == Shell::kPosix);
  CHECK(parse_shell("fish") == Shell::kFish);
  CHECK_THROWS_WITH_AS(parse_shell("csh"), "unknown shell \"csh\" (choose bash, zsh, sh or fish)", UsageError);
}

TEST_CASE("unset keeps the user's own preloads") {
  Recipe r = sample();
  r.set[1].value = "/opt/a.so:/usr/lib/x86_64-linux-gnu/libjemalloc.so.2";
  const Environment applied = apply_recipe(r, {});
  CHECK(render_unset(r, applied, Shell::kPosix) == "unset OMP_NUM_THREADS\nexport LD_PRELOAD='/opt/a.so'\n");
  r.set[1].value = "/usr/lib/x86_64-linux-gnu/libjemalloc.so.2";
  CHECK(render_unset(r, apply_recipe(r, {}), Shell::kFish) == "set -e OMP_NUM_THREADS\nset -e LD_PRELOAD\n");
}

TEST_CASE("json maps names to string values") {
  const auto parsed = nlohmann::json::parse(render_json(sample()));
  CHECK(parsed.size() == 2);
  CHECK(parsed.at("OMP_NUM_THREADS") == "4");
  CHECK(parsed.at("LD_PRELOAD") == "/opt/a.so:/j.so");
}
