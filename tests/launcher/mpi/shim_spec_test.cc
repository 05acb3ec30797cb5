// What nano-run hands the rank shims travels as data and comes back whole.
#include "launcher/mpi/shim_spec.h"

#include <doctest/doctest.h>

#include <nano/error.h>
#include "launcher/prepare/launch_setup.h"
#include "launcher/supervise/heartbeat.h"

using namespace nano;

TEST_CASE("a shim spec round-trips through its JSON") {
  LaunchOptions o;
  o.plan.cpu_for_each_process = {{0, 1, 2, 3}, {4, 5, 6, 7}};
  o.plan.use_logical_cores = true;
  o.plan.oversubscribe = true;
  o.synthetic = "pack:1 core:8";
  o.recipe.allocator = Allocator::kTcmalloc;
  o.recipe.openmp = OpenMpRuntime::kIntel;
  o.recipe.threads = 2;
  o.heartbeat_timeout = std::chrono::milliseconds(7500);
  o.max_restarts = 3;
  o.grace_period = std::chrono::milliseconds(1500);
  o.hosts = "node1:4,node2:4";
  o.front_end = FrontEnd::kProgram;
  Setup s;
  s.master_addr = "node1";
  s.master_port = 1234;
  s.groups = {{"node1", 0, 4, false}, {"node2", 4, 4, true}};  // nano-run runs on node2
  s.job_dir = "/dev/shm/nano-77-abc123";
  s.job_id = "77-abc123";
  s.run_id = "70-def456";
  s.restart_count = 2;
  s.secret = "5ec2e7";
  // Any bytes may travel in the environment, also what is not UTF-8.
  const std::map<std::string, std::string> carried = {
      {"PATH", "/opt/bin:/usr/bin"}, {"EXTRA", "a b \"c\"\n"}, {"LATIN1", "caf\xe9"}, {"NANO_\xff", "\x01\x80"}};
  s.options = o;
  ShimSpec spec = shim_spec_for(s, carried);
  spec.launcher_host = "node0";
  spec.launcher_port = 999;
  CHECK(spec.attempt.secret == "5ec2e7");
  const std::string text = encode_shim_spec(spec);
  CHECK(text.find("5ec2e7") == std::string::npos);  // a command line: any user of the host reads it

  const ShimSpec back = decode_shim_spec(text);
  CHECK(back.options.plan.cpu_for_each_process == o.plan.cpu_for_each_process);
  CHECK(back.options.plan.use_logical_cores);
  CHECK_FALSE(back.options.plan.use_efficiency_cores);
  CHECK(back.options.plan.oversubscribe);
  CHECK(back.options.synthetic == "pack:1 core:8");
  CHECK(back.options.recipe.allocator == Allocator::kTcmalloc);
  CHECK(back.options.recipe.openmp == OpenMpRuntime::kIntel);
  CHECK(back.options.recipe.threads == 2);
  CHECK(back.carried_env == carried);
  CHECK(back.master_addr == "node1");
  CHECK(back.master_port == 1234);
  CHECK(back.group_starts == std::vector<int>{0, 4});
  CHECK(back.launch_host_groups == std::vector<int>{1});
  CHECK(back.job_dir == "/dev/shm/nano-77-abc123");
  CHECK(back.attempt.job_id == "77-abc123");
  CHECK(back.attempt.run_id == "70-def456");
  CHECK(back.attempt.restart_count == 2);
  CHECK(back.attempt.max_restarts == 3);
  CHECK(back.launcher_host == "node0");
  CHECK(back.launcher_port == 999);
  CHECK(back.attempt.secret.empty());
  CHECK(back.options.heartbeat_timeout.count() == 7500);
  CHECK(back.options.grace_period.count() == 1500);  // every setting of core/setting_list.h travels
  CHECK(back.options.max_restarts == 3);
  CHECK(back.options.hosts == "node1:4,node2:4");
  CHECK(back.options.front_end == FrontEnd::kProgram);
  // One argument on mpirun's command line: one line of text.
  CHECK(encode_shim_spec(spec).find('\n') == std::string::npos);
}

TEST_CASE("a damaged shim spec is one line naming what is wrong") {
  CHECK_THROWS_WITH_AS(decode_shim_spec("{}"), doctest::Contains("unreadable rank shim spec ("), UsageError);
  CHECK_THROWS_WITH_AS(decode_shim_spec("not json"), doctest::Contains("unreadable rank shim spec ("), UsageError);
  ShimSpec spec;
  spec.group_starts.clear();
  CHECK_THROWS_WITH_AS(decode_shim_spec(encode_shim_spec(spec)), "unreadable rank shim spec (no group starts)",
                       UsageError);
}

TEST_CASE("the heartbeat rule both ends follow") {
  using std::chrono::milliseconds;
  const Heartbeat::Clock::time_point t0{};
  Heartbeat beat(milliseconds(4000), t0);
  CHECK_FALSE(beat.beat_due(t0 + milliseconds(999)));
  CHECK(beat.beat_due(t0 + milliseconds(1000)));  // a quarter of the timeout
  CHECK_FALSE(beat.beat_due(t0 + milliseconds(1500)));
  CHECK(beat.beat_due(t0 + milliseconds(2000)));
  CHECK_FALSE(beat.lost(t0 + milliseconds(4000)));
  CHECK(beat.lost(t0 + milliseconds(4001)));
  beat.heard(t0 + milliseconds(3000));
  CHECK(beat.silence(t0 + milliseconds(4001)).count() == 1001);
  CHECK_FALSE(beat.lost(t0 + milliseconds(7000)));
  CHECK(beat.lost(t0 + milliseconds(7001)));
}
