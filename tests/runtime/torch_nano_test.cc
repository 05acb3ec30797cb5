// Tests of nano::TorchNano and nano::nano(): one program, modes chosen by argv[1], so only
// one executable links torch. This file holds the doctest tables that mode `unit` runs (no
// processes); main and the other modes, each a real in-program launch, are in
// torch_nano_modes.cc.
#include <doctest/doctest.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include <torch/data.h>
#include <torch/nn/modules/linear.h>
#include <torch/optim/sgd.h>

#include <nano/nano_wrapper.h>
#include <nano/torch_nano.h>
#include "core/setting_list.h"
#include "runtime/in_program_launch.h"
#include "runtime/in_program_report.h"
#include "runtime/options/in_program_options.h"
#include "tests/runtime/torch_nano_line.h"

namespace {

using nano::test::Data;
using nano::test::LineData;
using nano::test::LineNano;

// TorchNanoOptions' value, other than its default, for one setting of core/setting_list.h, and the
// LaunchOptions value it stands for, by the fields' types.
void sample(bool& program, bool& launch) { program = launch = true; }
void sample(std::string& program, std::string& launch) { program = launch = "given/value"; }
void sample(int& program, int& launch) { program = launch = 7; }
void sample(int& program_ms, std::chrono::milliseconds& launch) {
  program_ms = 2500;
  launch = std::chrono::milliseconds(2500);
}
}  // namespace

TEST_CASE("every setting of core/setting_list.h reaches LaunchOptions from TorchNanoOptions") {
  int rows = 0;
#define NANO_CHECK_FIELD(id, key, flag, field, member, metavar, docs, help)                \
  {                                                                                        \
    CAPTURE(#field);                                                                       \
    nano::TorchNanoOptions o;                                                              \
    nano::LaunchOptions expected;                                                          \
    sample(o.field, expected.member);                                                      \
    CHECK_FALSE(expected.member == nano::LaunchOptions{}.member);                          \
    CHECK(nano::in_program::launch_options_of(o).member == expected.member);               \
    CHECK(nano::in_program::launch_options_of({}).member == nano::LaunchOptions{}.member); \
    CHECK(nano::program_field(nano::Setting::id) == #field);                               \
    ++rows;                                                                                \
  }
  NANO_SHARED_SETTINGS(NANO_CHECK_FIELD)
#undef NANO_CHECK_FIELD
  CHECK(rows == static_cast<int>(std::size(nano::kSharedSettingFields)));
}

TEST_CASE("bad options are one-line usage errors, naming TorchNanoOptions' fields") {
  using nano::in_program::launch_options_of;
  using nano::in_program::prepare_self;
  using nano::in_program::program_message;
  nano::TorchNanoOptions o;
  o.num_processes = 2;
  o.oversubscribe = true;  // a 1-core machine still plans 2 ranks
  CHECK_NOTHROW(prepare_self(launch_options_of(o), false));
  CHECK(launch_options_of(o).plan.num_processes == 2);
  CHECK(launch_options_of(o).front_end == nano::FrontEnd::kProgram);
  // What the caller reads for `bad`: the translation's or the launch's own check, worded once.
  auto message = [](const nano::TorchNanoOptions& bad) -> std::string {
    try {
      prepare_self(launch_options_of(bad), false);
    } catch (const nano::UsageError& e) {
      return program_message(e);
    }
    return "";
  };
  struct Row {
    void (*change)(nano::TorchNanoOptions&);
    std::string message;
  };
  const std::vector<Row> table = {
      {[](nano::TorchNanoOptions& b) { b.num_processes = 0; }, "nano: num_processes must be at least 1, got 0"},
      {[](nano::TorchNanoOptions& b) { b.num_processes = -2; }, "nano: num_processes must be at least 1, got -2"},
      {[](nano::TorchNanoOptions& b) {
         b.num_processes = -3;  // with hosts too, where the planner only sees each host's share
         b.distributed_backend = "mpi";
         b.hosts = "a:2,b:2";
       },
       "nano: num_processes must be at least 1, got -3"},
      {[](nano::TorchNanoOptions& b) { b.distributed_backend = "fork"; },
       "nano: distributed_backend \"fork\" is not supported (forking after libtorch has started its thread pools "
       "is unsafe); use \"subprocess\" or \"mpi\""},
      {[](nano::TorchNanoOptions& b) { b.distributed_backend = "ray"; },
       "nano: unknown distributed_backend \"ray\": expected \"subprocess\" or \"mpi\""},
      {[](nano::TorchNanoOptions& b) { b.hosts = "a:2"; },
       "nano: hosts needs the mpi backend, not distributed_backend subprocess"},
      {[](nano::TorchNanoOptions& b) { b.hostfile = "hf"; },
       "nano: hostfile needs the mpi backend, not distributed_backend subprocess"},
      {[](nano::TorchNanoOptions& b) { b.grace_period_ms = -1; },
       "nano: grace_period_ms must be at least 0, got -1 ms"},
      {[](nano::TorchNanoOptions& b) { b.max_restarts = -1; }, "nano: max_restarts must be at least 0, got -1"},
      {[](nano::TorchNanoOptions& b) { b.restart_delay_ms = -5; },
       "nano: restart_delay_ms must be at least 0, got -5 ms"},
      {[](nano::TorchNanoOptions& b) { b.heartbeat_timeout_ms = 500; },
       "nano: heartbeat_timeout_ms must be at least 1 s, got 500 ms"},
      // The planner's errors name the fields too (not nano-run's flags).
      {[](nano::TorchNanoOptions& b) { b.cpu_for_each_process = {{0}}; },
       "nano: cpu_for_each_process gives 1 list but num_processes is 2"},
      {[](nano::TorchNanoOptions& b) {
         b.cpu_for_each_process = {{0}, {}};
       },
       "nano: cpu_for_each_process: the CPU list of rank 1 is empty"},
      {[](nano::TorchNanoOptions& b) {
         b.cpu_for_each_process = {{-2}, {0}};
       },
       "nano: cpu_for_each_process: CPU -2 does not exist on this machine"},
  };
  for (const Row& row : table) {
    CAPTURE(row.message);
    auto bad = o;
    row.change(bad);
    CHECK(message(bad) == row.message);
  }
  auto many = o;
  many.oversubscribe = false;
  many.num_processes = 100000;
  CHECK(message(many).rfind("nano: num_processes 100000 is more than the", 0) == 0);
}

TEST_CASE("the report rank 0 hands back: names, tensors, optimizers' bytes and every kind of result") {
  using nano::in_program::Report;
  char path[] = "/tmp/nano-report-test-XXXXXX";
  const int fd = mkstemp(path);
  REQUIRE(fd >= 0);
  close(fd);
  const std::vector<nano::TrainResult> results = {std::monostate{}, 0.5, int64_t{-7}, std::string("done"),
                                                  at::arange(3, at::kFloat)};
  for (const nano::TrainResult& result : results) {
    CAPTURE(nano::detail::result_kind(result));
    Report report;
    report.names = {"p:fc.weight", "b:bn.running_mean"};
    report.tensors = {at::ones({2, 2}), at::zeros({3}, at::kDouble)};
    report.optimizer_states = {std::string("\0bytes\n", 7), ""};
    report.result = result;
    nano::in_program::write_report(path, report);
    const Report back = nano::in_program::read_report(path);
    CHECK(back.names == report.names);
    REQUIRE(back.tensors.size() == 2);
    CHECK(back.tensors[0].equal(report.tensors[0]));
    CHECK(back.tensors[1].dtype() == at::kDouble);
    CHECK(back.optimizer_states == report.optimizer_states);
    CHECK(std::string(nano::detail::result_kind(back.result)) == nano::detail::result_kind(result));
    if (auto* t = std::get_if<at::Tensor>(&result)) CHECK(std::get<at::Tensor>(back.result).equal(*t));
    if (auto* d = std::get_if<double>(&result)) CHECK(std::get<double>(back.result) == *d);
    if (auto* i = std::get_if<int64_t>(&result)) CHECK(std::get<int64_t>(back.result) == *i);
    if (auto* text = std::get_if<std::string>(&result)) CHECK(std::get<std::string>(back.result) == *text);
  }
  std::remove(path);
  CHECK_THROWS_WITH_AS(nano::in_program::read_report(path), doctest::Contains("rank 0 finished without reporting"),
                       nano::Error);
}

TEST_CASE("in a program, a bad option is a UsageError with nano's prefix before anything starts") {
  LineNano trainer({.num_processes = 2, .cpu_for_each_process = {{0}}, .auto_lr = false});
  CHECK_THROWS_WITH_AS(trainer.train(), "nano: cpu_for_each_process gives 1 list but num_processes is 2",
                       nano::UsageError);
  LineNano zero({.num_processes = 0});
  CHECK_THROWS_WITH_AS(zero.train(), "nano: num_processes must be at least 1, got 0", nano::UsageError);
}

TEST_CASE("the command line is split at NULs") {
  using nano::in_program::split_cmdline;
  const std::vector<std::string> expected{"prog", "a b", "", "c"};
  CHECK(split_cmdline(std::string("prog\0a b\0\0c\0", 12)) == expected);
  CHECK(split_cmdline("").empty());
}

TEST_CASE("role from the environment") {
  using nano::in_program::Role;
  using nano::in_program::role_from_env;
  CHECK(role_from_env({}) == Role::kCaller);
  CHECK(role_from_env({{"NANO_IN_PROGRAM", "1"}}) == Role::kCaller);
  CHECK(role_from_env({{"RANK", "0"}, {"WORLD_SIZE", "2"}}) == Role::kExternalRank);
  CHECK(role_from_env({{"OMPI_COMM_WORLD_RANK", "1"}}) == Role::kExternalRank);
  CHECK(role_from_env({{"RANK", "1"}, {"NANO_IN_PROGRAM", "1"}}) == Role::kLaunchedRank);
}

TEST_CASE("results convert by kind, a wrong kind is an error") {
  using nano::detail::from_result;
  using nano::detail::to_result;
  CHECK(from_result<double>(to_result(0.25)) == 0.25);
  CHECK(from_result<int>(to_result(7)) == 7);
  CHECK(from_result<std::string>(to_result(std::string("ok"))) == "ok");
  CHECK(from_result<at::Tensor>(to_result(torch::ones({2}))).sum().item<double>() == 2.0);
  CHECK_THROWS_WITH_AS(from_result<double>(to_result(std::string("x"))),
                       "nano: rank 0's result is string, not the type asked for (double)", nano::Error);
  CHECK_THROWS_WITH_AS(from_result<double>(nano::TrainResult{}),
                       "nano: rank 0's result is nothing, not the type asked for (double)", nano::Error);
}

TEST_CASE("argument kinds are recognised at compile time") {
  using nano::detail::is_model_v;
  using nano::detail::is_optimizer_v;
  using nano::detail::is_torch_loader_v;
  static_assert(is_model_v<torch::nn::Linear>);
  static_assert(is_model_v<torch::nn::Linear&>);
  static_assert(is_model_v<std::shared_ptr<torch::nn::LinearImpl>>);
  static_assert(!is_model_v<torch::nn::MSELoss&>);  // a loss module, not the model
  static_assert(!is_model_v<std::shared_ptr<torch::nn::CrossEntropyLossImpl>>);
  static_assert(!is_model_v<int>);
  static_assert(is_optimizer_v<torch::optim::SGD&>);
  static_assert(is_optimizer_v<std::shared_ptr<torch::optim::SGD>>);
  static_assert(!is_optimizer_v<torch::nn::Linear>);
  static_assert(nano::detail::is_shardable_loader_v<nano::ShardableLoader<Data>&>);
  using TorchLoader = decltype(torch::data::make_data_loader(LineData().map(torch::data::transforms::Stack<>()), 2));
  static_assert(is_torch_loader_v<TorchLoader&>);
  static_assert(!is_torch_loader_v<nano::ShardableLoader<Data>>);
  CHECK(true);
}

TEST_CASE("a bad precision or communicator is one line naming the field, before anything starts") {
  struct Row {
    nano::TorchNanoOptions options;
    std::string error;
  };
  for (const Row& r : std::vector<Row>{
           {{.num_processes = 2, .precision = "16"},
            "nano: precision \"16\" (float16) is not supported on CPUs: use \"bf16\", the half-width type CPUs "
            "compute in"},
           {{.num_processes = 2, .precision = "fp64"},
            "nano: unknown precision \"fp64\": expected \"32\", \"64\" or \"bf16\""},
           {{.num_processes = 2, .communicator = "nccl"},
            "nano: unknown communicator \"nccl\": expected \"auto\", \"mpi\" or \"gloo\""},
           {{.num_processes = 2, .communicator = "mpi"},
            "nano: communicator \"mpi\" needs distributed_backend \"mpi\" (MPI ranks are started by mpirun), got "
            "\"subprocess\""},
       }) {
    CAPTURE(r.error);
    // The first three from the constructor, the last from the launch's own check.
    CHECK_THROWS_WITH_AS(LineNano(r.options).train(), r.error.c_str(), nano::UsageError);
  }
}

TEST_CASE("bad options throw before anything starts") {
  LineNano trainer({.num_processes = 2, .distributed_backend = "fork"});
  CHECK_THROWS_WITH_AS(trainer.train(), doctest::Contains("nano: distributed_backend \"fork\" is not supported"),
                       nano::UsageError);
}
