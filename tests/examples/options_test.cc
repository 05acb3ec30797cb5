#include "examples/common/options.h"

#include <doctest/doctest.h>

#include <vector>

#include <nano/error.h>

using namespace nano::examples;

namespace {

const OptionsSpec kTrainer{"prog", "test program", true, true, false};
const OptionsSpec kThroughput{"prog", "test program", false, false, true};

ParsedOptions parse(std::vector<const char*> args, const OptionsSpec& spec = kTrainer) {
  args.insert(args.begin(), "prog");
  return parse_example_options(static_cast<int>(args.size()), args.data(), ExampleOptions{}, spec);
}

std::string error_of(std::vector<const char*> args, const OptionsSpec& spec = kTrainer) {
  try {
    parse(std::move(args), spec);
  } catch (const nano::UsageError& e) {
    return e.what();
  }
  return "(no error)";
}

}  // namespace

TEST_CASE("defaults and values") {
  const ExampleOptions d = parse({}).options;
  CHECK(d.epochs == 3);
  CHECK(d.batch_size == 64);
  CHECK(d.num_processes == 1);
  CHECK(d.max_steps_per_epoch == 0);
  CHECK(d.data_dir.empty());
  const ExampleOptions o = parse({"--epochs", "2", "--batch-size=32", "--lr", "0.01", "--num-processes", "4",
                                  "--data-dir", "/tmp/x", "--max-steps-per-epoch", "7"})
                               .options;
  CHECK(o.epochs == 2);
  CHECK(o.batch_size == 32);
  CHECK(o.lr == doctest::Approx(0.01));
  CHECK(o.num_processes == 4);
  CHECK(o.data_dir == "/tmp/x");
  CHECK(o.max_steps_per_epoch == 7);
  CHECK(parse({"--steps", "9"}, kThroughput).options.steps == 9);
  CHECK(parse({"--help"}).help.find("--epochs") != std::string::npos);
}

TEST_CASE("bad values: one line naming the value") {
  struct Row {
    std::vector<const char*> args;
    const char* error;
  };
  const Row rows[] = {
      {{"--epochs", "0"}, "--epochs must be at least 1, got 0"},
      {{"--epochs", "abc"}, "--epochs: 'abc' is not a valid integer"},
      {{"--epochs", "2x"}, "--epochs: '2x' is not a valid integer"},
      {{"--epochs", "99999999999"}, "--epochs: '99999999999' is not a valid integer"},
      {{"--batch-size", "-4"}, "--batch-size must be at least 1, got -4"},
      {{"--lr", "0"}, "--lr must be a positive number, got 0"},
      {{"--lr", "-0.5"}, "--lr must be a positive number, got -0.5"},
      {{"--lr", "fast"}, "--lr: 'fast' is not a valid number"},
      {{"--lr", "nan"}, "--lr must be a positive number, got nan"},
      {{"--num-processes", "0"}, "--num-processes must be at least 1, got 0"},
      {{"--max-steps-per-epoch", "-1"}, "--max-steps-per-epoch must be at least 0, got -1"},
      {{"--bogus"}, "The following argument was not expected: --bogus"},
  };
  for (const Row& r : rows) {
    CAPTURE(r.error);
    CHECK(error_of(r.args) == r.error);
  }
  CHECK(error_of({"--steps", "0"}, kThroughput) == "--steps must be at least 1, got 0");
  CHECK(error_of({"--steps", "5"}) == "The following arguments were not expected: 5 --steps");
}

TEST_CASE("in-program options: --no-auto-lr, --backend, --test-limit, --equal-batches, --step-times") {
  const OptionsSpec in_program{"prog", "test program", true, true, false, true};
  const ExampleOptions d = parse({}, in_program).options;
  CHECK(d.auto_lr);
  CHECK(d.balance);
  CHECK_FALSE(parse({"--equal-batches"}, in_program).options.balance);
  CHECK_FALSE(parse({"--equal-batches"}, kThroughput).options.balance);
  CHECK(error_of({"--equal-batches"}) == "The following argument was not expected: --equal-batches");
  CHECK_FALSE(d.step_times);
  CHECK(parse({"--step-times"}, in_program).options.step_times);
  CHECK(parse({"--step-times"}, kThroughput).options.step_times);
  CHECK(error_of({"--step-times"}) == "The following argument was not expected: --step-times");
  CHECK(d.backend == "subprocess");
  CHECK(d.test_limit == 0);
  const ExampleOptions o = parse({"--no-auto-lr", "--backend", "mpi", "--test-limit", "500"}, in_program).options;
  CHECK_FALSE(o.auto_lr);
  CHECK(o.backend == "mpi");
  CHECK(o.test_limit == 500);
  CHECK(error_of({"--backend", "fork"}, in_program) == "--backend must be subprocess or mpi, got 'fork'");
  CHECK(error_of({"--test-limit", "-3"}, in_program) == "--test-limit must be at least 0, got -3");
  CHECK(error_of({"--no-auto-lr"}) == "The following argument was not expected: --no-auto-lr");
}
