// The stages of a launch's preparation (launcher/prepare/launch_setup.h), each on its own: pure inputs in,
// decisions out, no process, no port, no machine but synthetic ones.
#include "launcher/prepare/launch_setup.h"

#include <doctest/doctest.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include <nano/error.h>
#include "core/cpulist.h"
#include "core/setting.h"
#include "launcher/mpi/mpi_command.h"
#include "launcher/prepare/job_files.h"

using namespace nano;

namespace {

// What `stage` throws, as nano-run words it, and the setting it names ("" / none when nothing).
template <class F>
std::string nano_run_error(F stage, Setting* setting = nullptr) {
  try {
    stage();
  } catch (const SettingError& e) {
    if (setting) *setting = e.setting();
    return e.worded(command_line_flag);
  } catch (const UsageError& e) {
    return e.what();
  }
  return "";
}

SlurmNodePart node_part(int node, int nodes) {
  SlurmNodePart part;
  part.node = node;
  part.nodes = nodes;
  part.master = "cn07";
  part.port = 23456;
  part.run_id = "slurm-12.0";
  return part;
}

std::vector<std::string> cpu_lists(const WorldPlan& w) {
  std::vector<std::string> out;
  for (const RankPlan& r : w.rank_plans) out.push_back(format_cpu_list(r.cpus));
  return out;
}

}  // namespace

TEST_CASE("check_launch_options: each check of the options alone, naming the setting") {
  struct Row {
    void (*change)(LaunchOptions&);
    std::string message;
    Setting setting;
  };
  const std::vector<Row> table = {
      {[](LaunchOptions& o) { o.max_restarts = -1; }, "--max-restarts must be at least 0, got -1",
       Setting::kMaxRestarts},
      // On every path, hosts and Slurm nodes included (the planner sees counts only per host).
      {[](LaunchOptions& o) {
         o.plan.num_processes = -3;
         o.hosts = "a:2,b:2";
       },
       "--num-processes must be at least 1, got -3", Setting::kNumProcesses},
      {[](LaunchOptions& o) { o.grace_period = std::chrono::milliseconds(-5); },
       "--grace-period must be at least 0, got -5 ms", Setting::kGracePeriod},
      {[](LaunchOptions& o) { o.restart_delay = std::chrono::milliseconds(-1); },
       "--restart-delay must be at least 0, got -1 ms", Setting::kRestartDelay},
      {[](LaunchOptions& o) { o.heartbeat_timeout = std::chrono::milliseconds(500); },
       "--heartbeat-timeout must be at least 1 s, got 500 ms", Setting::kHeartbeatTimeout},
      {[](LaunchOptions& o) {
         o.topology_xml = "a.xml";
         o.synthetic = "core:2";
       },
       "--topology and --synthetic cannot be used together", Setting::kTopology},
      {[](LaunchOptions& o) {
         o.hosts = "a:1";
         o.hostfile = "h";
       },
       "--hosts and --hostfile cannot be used together", Setting::kHosts},
      {[](LaunchOptions& o) { o.master_port = 70000; }, "--master-port 70000 is not a port number 1-65535",
       Setting::kMasterPort},
      {[](LaunchOptions& o) { o.min_hosts = -1; }, "--min-hosts must be at least 0, got -1", Setting::kMinHosts},
      {[](LaunchOptions& o) { o.min_hosts = 2; },
       "--min-hosts 2 goes on after a lost host by a restart: it needs --max-restarts 1 or more", Setting::kMinHosts},
      {[](LaunchOptions& o) { o.host_lost_after = 0; }, "--host-lost-after must be at least 1, got 0",
       Setting::kHostLostAfter},
      {[](LaunchOptions& o) { o.batch_policy = "both"; }, "--batch-policy must be per-rank or global, got 'both'",
       Setting::kBatchPolicy},
      {[](LaunchOptions& o) { o.rejoin = true; },
       "--rejoin takes back hosts that left an elastic world: it needs --min-hosts", Setting::kRejoin},
  };
  for (const Row& row : table) {
    CAPTURE(row.message);
    LaunchOptions o;
    row.change(o);
    Setting setting = Setting::kJson;
    CHECK(nano_run_error([&] { check_launch_options(o); }, &setting) == row.message);
    CHECK(setting == row.setting);
  }
  CHECK(nano_run_error([] { check_launch_options(LaunchOptions{}); }).empty());
}

TEST_CASE("choose_backend: the option, mpirun on PATH, hosts and Slurm") {
  struct Row {
    LaunchBackend asked;
    std::string hosts;
    std::string hostfile;
    bool allocation;
    bool node_part;
    bool have_mpirun;
    LaunchBackend expected;
    std::string error;  // as nano-run words it; "" = none
  };
  using B = LaunchBackend;
  const std::vector<Row> table = {
      // One host: nano-run's own processes, which listen on nothing, with or without mpirun.
      {B::kAutomatic, "", "", false, false, true, B::kSubprocess, ""},
      {B::kAutomatic, "", "", false, false, false, B::kSubprocess, ""},
      {B::kAutomatic, "a:2", "", false, false, true, B::kMpi, ""},
      {B::kAutomatic, "a:2", "", false, false, false, B::kSubprocess,
       "--hosts needs Open MPI's mpirun, which is not on PATH"},
      {B::kAutomatic, "", "hf", false, false, false, B::kSubprocess,
       "--hostfile needs Open MPI's mpirun, which is not on PATH"},
      {B::kAutomatic, "", "", true, false, false, B::kSubprocess,
       "the hosts of the Slurm allocation need Open MPI's mpirun, which is not on PATH"},
      {B::kMpi, "", "", false, false, true, B::kMpi, ""},
      {B::kMpi, "", "", false, false, false, B::kMpi,
       "--backend mpi needs Open MPI's mpirun, which is not on PATH ('mpirun')"},
      {B::kSubprocess, "", "", false, false, true, B::kSubprocess, ""},
      {B::kSubprocess, "a:2", "", false, false, true, B::kSubprocess,
       "--hosts needs the mpi backend, not --backend subprocess"},
      {B::kSubprocess, "", "hf", false, false, true, B::kSubprocess,
       "--hostfile needs the mpi backend, not --backend subprocess"},
      // A node part of a Slurm step starts its own ranks, whatever was asked.
      {B::kMpi, "", "", false, true, true, B::kSubprocess, ""},
      {B::kAutomatic, "", "", false, true, false, B::kSubprocess, ""},
  };
  for (const Row& row : table) {
    CAPTURE(row.hosts);
    CAPTURE(row.error);
    LaunchOptions o;
    o.backend = row.asked;
    o.hosts = row.hosts;
    o.hostfile = row.hostfile;
    SlurmContext slurm;
    if (row.allocation) slurm.allocation = std::vector<HostSlots>{{"cn1", 2}, {"cn2", 2}};
    if (row.node_part) slurm.node_part = node_part(0, 2);
    LaunchBackend got = LaunchBackend::kAutomatic;
    CHECK(nano_run_error([&] { got = choose_backend(o, slurm, row.have_mpirun); }) == row.error);
    if (row.error.empty()) CHECK(got == row.expected);
  }
}

TEST_CASE("slurm_context_of: named hosts win; an allocation needs two nodes and mpi") {
  const Environment allocation = {
      {"SLURM_JOB_ID", "7"}, {"SLURM_JOB_NODELIST", "cn[01-02]"}, {"SLURM_TASKS_PER_NODE", "2(x2)"}};
  LaunchOptions o;
  CHECK(slurm_context_of(o, allocation).allocation.has_value());
  CHECK_FALSE(slurm_context_of(o, {}).allocation.has_value());
  o.backend = LaunchBackend::kSubprocess;
  CHECK_FALSE(slurm_context_of(o, allocation).allocation.has_value());
  o = LaunchOptions{};
  o.hosts = "a:1";
  CHECK_FALSE(slurm_context_of(o, allocation).allocation.has_value());
  const Environment one_node = {{"SLURM_JOB_ID", "7"}, {"SLURM_JOB_NODELIST", "cn01"}, {"SLURM_TASKS_PER_NODE", "4"}};
  CHECK_FALSE(slurm_context_of(LaunchOptions{}, one_node).allocation.has_value());
}

TEST_CASE("plan_world: one machine, hosts in slot order, a Slurm node's part") {
  const Topology four = load_synthetic_topology("core:4 pu:1");
  SUBCASE("one machine") {
    LaunchOptions o;
    o.plan.num_processes = 2;
    const WorldPlan w = plan_world(four, o, {}, {}, "a");
    CHECK(w.world_size == 2);
    CHECK(w.groups.size() == 1);
    CHECK(cpu_lists(w) == std::vector<std::string>{"0-1", "2-3"});
    CHECK(w.group_count == 1);
  }
  SUBCASE("hosts: each host's slots in order, each host planned on its own") {
    LaunchOptions o;
    o.plan.num_processes = 3;
    const WorldPlan w = plan_world(four, o, {{"a", 2}, {"b", 2}}, {}, "a");
    CHECK(w.world_size == 3);
    REQUIRE(w.groups.size() == 2);
    CHECK(w.groups[0].host == "a");
    CHECK(w.groups[1].first_rank == 2);
    CHECK(w.groups[1].size == 1);
    CHECK(cpu_lists(w) == std::vector<std::string>{"0-1", "2-3", "0-3"});
    CHECK(w.rank_plans[2].rank == 2);
    CHECK(w.group_count == 2);
    o.plan.num_processes = 0;  // every slot
    CHECK(plan_world(four, o, {{"a", 2}, {"b", 2}}, {}, "a").world_size == 4);
  }
  SUBCASE("a Slurm node part plans its equal share") {
    LaunchOptions o;
    o.plan.num_processes = 4;
    SlurmContext slurm;
    slurm.node_part = node_part(1, 2);
    const WorldPlan w = plan_world(four, o, {}, slurm, "a");
    CHECK(w.world_size == 2);
    CHECK(w.rank_offset == 2);
    CHECK(w.world_total == 4);
    CHECK(w.group_index == 1);
    CHECK(w.group_count == 2);
  }
  SUBCASE("errors name the setting") {
    LaunchOptions o;
    o.plan.num_processes = 5;
    CHECK(nano_run_error([&] {
            plan_world(four, o, {{"a", 2}, {"b", 2}}, {}, "a");
          }) == "--num-processes 5 is more than the 4 slots of the hosts");
    o.plan.num_processes = 3;
    SlurmContext slurm;
    slurm.node_part = node_part(0, 2);
    CHECK(nano_run_error([&] { plan_world(four, o, {}, slurm, "a"); }) ==
          "--num-processes 3 does not divide among the 2 nodes of the Slurm step (each node's nano-run starts an "
          "equal part)");
    o.plan.num_processes = 2;
    o.output_ranks = {0, 2};
    CHECK(nano_run_error([&] { plan_world(four, o, {}, {}, "a"); }) == "--output-ranks 2 is not a rank (world size 2)");
  }
}

TEST_CASE("plan_host_ranks: the shim's plan of its host is nano-run's plan of that host") {
  const Topology four = load_synthetic_topology("core:4 pu:1");
  LaunchOptions o;
  const WorldPlan w = plan_world(four, o, {{"a", 2}, {"b", 2}}, {}, "a");
  const Plan host_b = plan_host_ranks(four, o.plan, 2);
  REQUIRE(host_b.ranks.size() == 2);
  CHECK(host_b.ranks[0].cpus == w.rank_plans[2].cpus);
  CHECK(host_b.ranks[1].cpus == w.rank_plans[3].cpus);
}

TEST_CASE("choose_rendezvous: the address and how the port is chosen") {
  struct Row {
    std::string master_addr;
    int master_port;
    std::vector<HostSlots> hosts;
    int node = -1;  // -1 = no Slurm node part
    std::string addr;
    PortChoice choice;
    int port;
    bool check_here;
  };
  const std::vector<Row> table = {
      {"", 0, {}, -1, "127.0.0.1", PortChoice::kPicked, 0, false},
      {"", 29500, {}, -1, "127.0.0.1", PortChoice::kGiven, 29500, true},
      {"10.0.0.1", 0, {}, -1, "10.0.0.1", PortChoice::kPicked, 0, false},
      // Several hosts: rank 0 is on the first; its shim checks a given port there.
      {"", 0, {{"a", 2}, {"b", 2}}, -1, "a", PortChoice::kPicked, 0, false},
      {"", 29500, {{"a", 2}, {"b", 2}}, -1, "a", PortChoice::kGiven, 29500, false},
      // A Slurm step: every node derives the same port; node 0 (rank 0's) checks it.
      {"", 0, {}, 0, "cn07", PortChoice::kDerived, 23456, true},
      {"", 0, {}, 1, "cn07", PortChoice::kDerived, 23456, false},
      {"", 29500, {}, 1, "cn07", PortChoice::kGiven, 29500, false},
  };
  for (const Row& row : table) {
    CAPTURE(row.addr);
    CAPTURE(row.master_port);
    CAPTURE(row.node);
    LaunchOptions o;
    o.master_addr = row.master_addr;
    o.master_port = row.master_port;
    SlurmContext slurm;
    if (row.node >= 0) slurm.node_part = node_part(row.node, 2);
    const Rendezvous r = choose_rendezvous(o, row.hosts, slurm);
    CHECK(r.addr == row.addr);
    CHECK(r.choice == row.choice);
    CHECK(r.port == row.port);
    CHECK(r.check_here == row.check_here);
  }
}

TEST_CASE("make_rank_environments and stamp_attempt: identities, then the attempt on top") {
  const Topology four = load_synthetic_topology("core:4 pu:1");
  LaunchOptions o;
  o.recipe.allocator = Allocator::kSystem;
  o.extra_env = {{"EXTRA", "1"}};
  const WorldPlan w = plan_world(four, o, {{"a", 1}, {"b", 3}}, {}, "a");
  Rendezvous r;
  r.addr = "a";
  r.port = 29500;
  const Environment current = {{"PATH", "/usr/bin"}};
  EnvironmentInputs inputs;
  inputs.recipe = &o.recipe;
  inputs.current = &current;
  inputs.finder = [](const std::vector<std::string>&) { return std::string(); };
  inputs.extra_env = &o.extra_env;
  Setup s;
  s.backend = LaunchBackend::kMpi;
  s.master_port = 29500;
  s.envs = make_rank_environments(w, r, inputs);
  REQUIRE(s.envs.size() == 4);
  const Environment& rank2 = s.envs[2].env;
  CHECK(rank2.at("RANK") == "2");
  CHECK(rank2.at("LOCAL_RANK") == "1");
  CHECK(rank2.at("LOCAL_WORLD_SIZE") == "3");
  CHECK(rank2.at("GROUP_RANK") == "1");
  CHECK(rank2.at("GROUP_WORLD_SIZE") == "2");
  CHECK(rank2.at("MASTER_ADDR") == "a");
  CHECK(rank2.at("NANO_CPUS") == format_cpu_list(w.rank_plans[2].cpus));
  CHECK(rank2.at("EXTRA") == "1");
  CHECK(rank2.count("NANO_JOB_ID") == 0);      // not stamped yet
  CHECK(rank2.at("NANO_LAUNCH_HOST") == "0");  // on b; this host is a
  CHECK(s.envs[0].env.at("NANO_LAUNCH_HOST") == "1");

  stamp_attempt(s, {"99-abcdef", "11-000000", 2, 3, "5ec2e7"});
  CHECK(s.secret == "5ec2e7");
  CHECK(s.envs[1].env.at("NANO_JOB_SECRET") == "5ec2e7");
  CHECK(s.job_id == "99-abcdef");
  CHECK(s.run_id == "11-000000");
  CHECK(s.restart_count == 2);
  CHECK(s.job_dir == "/dev/shm/nano-99-abcdef");  // one host (no hosts in this Setup)
  CHECK(s.envs[3].env.at("NANO_JOB_DIR") == "/dev/shm/nano-99-abcdef");
  CHECK(s.envs[3].env.at("NANO_JOB_ID") == "99-abcdef");
  CHECK(s.envs[3].env.at("TORCHELASTIC_RESTART_COUNT") == "2");
  CHECK(s.envs[3].env.at("TORCHELASTIC_ERROR_FILE") == "/dev/shm/nano-99-abcdef/rank-3/error.json");
  s.master_port = 29600;  // a restart's fresh port
  stamp_attempt(s, {"99-fedcba", "11-000000", 3, 3});
  CHECK(s.envs[0].env.at("MASTER_PORT") == "29600");
  CHECK(s.envs[0].env.at("NANO_RESTART_COUNT") == "3");
}

TEST_CASE("NANO_LAUNCH_HOST: the ranks of the launching host's group say 1, by the plan") {
  const Topology four = load_synthetic_topology("core:4 pu:1");
  struct Row {
    const char* why;
    std::vector<HostSlots> hosts;
    int node;  // -1: no Slurm node part
    std::string this_host;
    std::vector<std::string> expected;  // by rank
  };
  const std::vector<Row> table = {
      {"one machine: every rank", {}, -1, "hostA", {"1", "1"}},
      {"a Slurm node's part: its nano-run runs on the node", {}, 1, "cn02", {"1", "1"}},
      {"several hosts, this host first (resolve_hosts's order)", {{"hostA", 1}, {"hostB", 1}}, -1, "hostA", {"1", "0"}},
      {"several hosts, this host second", {{"hostA", 1}, {"hostB", 1}}, -1, "hostB", {"0", "1"}},
      {"launched from a host that runs no rank", {{"hostA", 1}, {"hostB", 1}}, -1, "login", {"0", "0"}},
      {"localhost is this host", {{"localhost", 1}, {"hostB", 1}}, -1, "hostA", {"1", "0"}},
  };
  for (const Row& row : table) {
    CAPTURE(row.why);
    LaunchOptions o;
    o.plan.num_processes = row.node >= 0 ? 4 : 2;
    SlurmContext slurm;
    if (row.node >= 0) slurm.node_part = node_part(row.node, 2);
    const WorldPlan w = plan_world(four, o, row.hosts, slurm, row.this_host);
    // What the environment brought along (a launch from inside another job's rank) counts for nothing.
    const Environment current = {{"NANO_LAUNCH_HOST", "7"}, {"NANO_JOB_DIR", "/dev/shm/nano-outer"}};
    EnvironmentInputs inputs;
    inputs.recipe = &o.recipe;
    inputs.current = &current;
    inputs.finder = [](const std::vector<std::string>&) { return std::string(); };
    inputs.extra_env = &o.extra_env;
    const std::vector<RankEnvironment> envs = make_rank_environments(w, Rendezvous{}, inputs);
    std::vector<std::string> got;
    for (const auto& e : envs) {
      got.push_back(e.env.at("NANO_LAUNCH_HOST"));
      CHECK(e.env.count("NANO_JOB_DIR") == 0);  // the attempt's: stamp_attempt
    }
    CHECK(got == row.expected);
  }
  CHECK(is_launch_host("", "hostA"));
  CHECK(is_launch_host("127.0.0.1", "hostA"));
  CHECK_FALSE(is_launch_host("hostA.example.org", "hostA"));
}

TEST_CASE("stamp_attempt: every one-host job gets its private folder in NANO_JOB_DIR; several hosts none") {
  struct Row {
    const char* why;
    LaunchBackend backend;
    std::vector<HostSlots> hosts;
    int group_index;
    std::string job_dir, session_dir;
  };
  const std::vector<Row> table = {
      {"subprocess on one host", LaunchBackend::kSubprocess, {}, -1, "/dev/shm/nano-5-00ff", ""},
      {"mpi on one host", LaunchBackend::kMpi, {}, -1, "/dev/shm/nano-5-00ff", ""},
      {"a Slurm node's part", LaunchBackend::kSubprocess, {}, 1, "/dev/shm/nano-5-00ff", ""},
      {"mpi over several hosts", LaunchBackend::kMpi, {{"a", 1}, {"b", 1}}, -1, "", "/tmp/nano-5-00ff"},
  };
  for (const Row& row : table) {
    CAPTURE(row.why);
    Setup s;
    s.backend = row.backend;
    s.hosts = row.hosts;
    s.group_index = row.group_index;
    s.envs.resize(2);
    s.envs[1].env["NANO_JOB_DIR"] = "/dev/shm/nano-outer";  // brought along: replaced or dropped
    stamp_attempt(s, {"5-00ff", "5-00ff", 0, 0});
    CHECK(s.job_dir == row.job_dir);
    CHECK(s.session_dir == row.session_dir);
    for (const auto& e : s.envs) {
      if (row.job_dir.empty())
        CHECK(e.env.count("NANO_JOB_DIR") == 0);
      else
        CHECK(e.env.at("NANO_JOB_DIR") == row.job_dir);
    }
  }
}

TEST_CASE("a restart renews the job and only a picked port: a given or Slurm-derived one stays") {
  Setup s;
  s.envs.resize(2);
  s.master_port = 23456;
  s.port_choice = PortChoice::kDerived;
  s.run_id = "slurm-12.0";
  s.group_index = 1;  // a Slurm node part: its nodes share the secret the user exported
  stamp_attempt(s, {"1-aaaaaa", "slurm-12.0", 0, 2, "shared"});
  renew_for_restart(s, 1);
  CHECK(s.secret == "shared");
  CHECK(s.master_port == 23456);
  CHECK(s.job_id != "1-aaaaaa");
  CHECK(s.run_id == "slurm-12.0");
  CHECK(s.envs[1].env.at("NANO_RESTART_COUNT") == "1");
  CHECK(s.envs[1].env.at("MASTER_PORT") == "23456");
  s.port_choice = PortChoice::kPicked;
  s.group_index = -1;  // one nano-run: every attempt gets a secret of its own
  renew_for_restart(s, 2);
  CHECK(s.secret.size() == 64);
  CHECK(s.envs[0].env.at("NANO_JOB_SECRET") == s.secret);
  CHECK(s.master_port > 0);
  CHECK(s.envs[0].env.at("MASTER_PORT") == std::to_string(s.master_port));
}

TEST_CASE("the job's files are named in one place") {
  CHECK(job_shm_prefix("12-abcdef") == "nano-12-abcdef-");
  CHECK(job_dir_of("12-abcdef") == "/dev/shm/nano-12-abcdef");
  // A one-host job's rank folders are inside its private folder (nobody else can make one first);
  // across hosts, under its prefix.
  AttemptIdentity one_host{"12-abcdef", "12-abcdef", 0, 0};
  one_host.job_dir = job_dir_of("12-abcdef");
  CHECK(rank_files_dir(one_host, 3) == "/dev/shm/nano-12-abcdef/rank-3");
  CHECK(rank_files_dir(AttemptIdentity{"12-abcdef", "12-abcdef", 0, 0}, 3)
            .rfind("/dev/shm/" + job_shm_prefix("12-abcdef"), 0) == 0);
  CHECK(hosts_session_dir_of("12-abcdef") == "/tmp/nano-12-abcdef");
  CHECK(shim_marker_of("/tmp/nano-12-abcdef", 3) == "/tmp/nano-12-abcdef/nano-shim-3");
  const std::string id = make_job_id();
  // "<pid>-<16 hex digits>": 64 random bits, no guess for another user.
  const std::string pid = std::to_string(getpid());
  REQUIRE(id.size() == pid.size() + 17);
  CHECK(id.compare(0, pid.size() + 1, pid + "-") == 0);
  CHECK(id.find_first_not_of("0123456789abcdef", pid.size() + 1) == std::string::npos);
  CHECK(id != make_job_id());
}

TEST_CASE("Open MPI's session directories: in the job's folder in /tmp across hosts, none on one host") {
  Setup several;
  several.backend = LaunchBackend::kMpi;
  several.hosts = {{"hostA", 1}, {"hostB", 1}};
  stamp_attempt(several, {"7-000001", "7-000001", 0, 1});
  CHECK(several.session_dir == "/tmp/nano-7-000001");
  CHECK(several.job_dir.empty());
  stamp_attempt(several, {"7-000002", "7-000001", 1, 1});  // a restart: its own folder
  CHECK(several.session_dir == "/tmp/nano-7-000002");
  Setup one;
  one.backend = LaunchBackend::kMpi;
  stamp_attempt(one, {"7-000003", "7-000003", 0, 0});
  CHECK(one.session_dir.empty());
  CHECK(one.job_dir == "/dev/shm/nano-7-000003");
  Environment env = {{"OMPI_MCA_orte_tmpdir_base", "/scratch"}};  // the user's own stays
  add_hosts_open_mpi_settings(several.session_dir, env);
  CHECK(env.at("OMPI_MCA_orte_tmpdir_base") == "/scratch");
  CHECK(env.at("PRTE_MCA_prte_tmpdir_base") == "/tmp/nano-7-000002");
}

TEST_CASE("has_entry_with_prefix") {
  char tmpl[] = "/tmp/nano_job_files_test_XXXXXX";
  const std::string dir = mkdtemp(tmpl);
  CHECK_FALSE(has_entry_with_prefix(dir, "nano-shim-"));
  std::ofstream(dir + "/nano-shim-1").put('x');
  CHECK(has_entry_with_prefix(dir, "nano-shim-"));
  CHECK_FALSE(has_entry_with_prefix(dir + "/missing", "nano-shim-"));
  std::remove((dir + "/nano-shim-1").c_str());
  std::remove(dir.c_str());
}

TEST_CASE("the listen guard: which launches need it, its sources, its place in an environment") {
  Setup s;
  CHECK_FALSE(needs_listen_guard(s));  // one host, subprocess: nothing listens off loopback
  s.backend = LaunchBackend::kMpi;
  CHECK(needs_listen_guard(s));  // one host, mpi: mpirun listens on every address
  s.backend = LaunchBackend::kSubprocess;
  s.hosts = {{"a", 1}, {"b", 1}};
  CHECK(needs_listen_guard(s));
  s.hosts.clear();
  s.group_index = 0;  // a Slurm node part
  CHECK(needs_listen_guard(s));

  CHECK(admitted_sources({"10.0.0.1", "192.168.1.5"}, {{"10.0.0.1"}, {"10.0.0.2", "10.0.0.3"}, {"10.0.0.2"}}) ==
        std::vector<std::string>{"127.0.0.1", "10.0.0.1", "192.168.1.5", "10.0.0.2", "10.0.0.3"});

  const ListenGuard guard{"/opt/nano/lib/nano/libnano_listen_guard.so", {"127.0.0.1", "10.0.0.2"}};
  Environment env{{"LD_PRELOAD", "/usr/lib/libjemalloc.so.2 /opt/nano/lib/nano/libnano_listen_guard.so:/x.so"}};
  add_listen_guard(env, guard);
  CHECK(env.at("LD_PRELOAD") == "/opt/nano/lib/nano/libnano_listen_guard.so:/usr/lib/libjemalloc.so.2:/x.so");
  CHECK(env.at("NANO_LISTEN_GUARD") == "127.0.0.1,10.0.0.2");
  Environment none;
  add_listen_guard(none, ListenGuard{});
  CHECK(none.empty());
  CHECK(listen_guard_library_for("/opt/nano/bin/nano-run") == "/opt/nano/lib/nano/libnano_listen_guard.so");
  CHECK(listen_guard_library_for("nano-run").empty());

  // Open MPI's processes: mpirun preloaded, its daemons through their launch agent.
  Environment mpirun{{"PRTE_MCA_prte_launch_agent", "/opt/prte/bin/prted"}};
  add_listen_guard_to_open_mpi(guard, mpirun);
  CHECK(mpirun.at("LD_PRELOAD") == guard.library);
  CHECK(mpirun.at("OMPI_MCA_orte_launch_agent") ==
        "env LD_PRELOAD=" + guard.library + " NANO_LISTEN_GUARD=127.0.0.1,10.0.0.2 orted");
  CHECK(mpirun.at("PRTE_MCA_prte_launch_agent") ==
        "env LD_PRELOAD=" + guard.library + " NANO_LISTEN_GUARD=127.0.0.1,10.0.0.2 /opt/prte/bin/prted");

  // What the user exported decides: "off", or their own sources.
  CHECK(listen_guard_for({"a"}, {{"NANO_LISTEN_GUARD", "off"}}, "/opt/nano/bin/nano-run").library.empty());
  // The build's own guard: build/lib/nano/ beside build/bin/nano-run.
  const std::string library = NANO_LISTEN_GUARD_LIBRARY;
  const std::string build_nano_run = library.substr(0, library.rfind("/lib/nano/")) + "/bin/nano-run";
  const ListenGuard chosen = listen_guard_for({"a"}, {{"NANO_LISTEN_GUARD", "10.0.0.1,10.0.0.2"}}, build_nano_run);
  CHECK(chosen.library == library);
  CHECK(chosen.sources == std::vector<std::string>{"10.0.0.1", "10.0.0.2"});
  CHECK_THROWS_WITH_AS(listen_guard_for({"a"}, {{"NANO_LISTEN_GUARD", "10.0.0.1,hostB"}}, build_nano_run),
                       "bad NANO_LISTEN_GUARD='10.0.0.1,hostB': expected IPv4 addresses separated by commas, or off",
                       UsageError);
  CHECK_THROWS_WITH_AS(listen_guard_for({"a"}, {{"NANO_LISTEN_GUARD", "10.0.0.1,"}}, build_nano_run),
                       "bad NANO_LISTEN_GUARD='10.0.0.1,': expected IPv4 addresses separated by commas, or off",
                       UsageError);
  // The guard nano-run (and each shim) passes is checked before anything starts: one the listen
  // guard cannot read would refuse every listener.
  CHECK_NOTHROW(check_listen_guard(chosen));
  CHECK_NOTHROW(check_listen_guard(ListenGuard{}));  // none
  CHECK_THROWS_WITH_AS(check_listen_guard({library, {"10.0.0.1", "hostB"}}),
                       "bad NANO_LISTEN_GUARD='10.0.0.1,hostB': expected IPv4 addresses separated by commas, or off",
                       UsageError);
  CHECK_THROWS_WITH_AS(check_listen_guard({library, {}}),
                       "bad NANO_LISTEN_GUARD='': expected IPv4 addresses separated by commas, or off", UsageError);
  CHECK_THROWS_WITH_AS(check_listen_guard({library, {"off"}}),
                       "bad NANO_LISTEN_GUARD='off': expected IPv4 addresses separated by commas, or off", UsageError);
  CHECK_THROWS_AS(check_listen_guard({library, {"10.0.0.1,10.0.0.2"}}), UsageError);  // one source each
  CHECK_THROWS_WITH_AS(listen_guard_for({"no-such-host.invalid"}, {}, build_nano_run),
                       "host no-such-host.invalid of hosts does not resolve here, so its ranks could not be admitted "
                       "by the job's listeners",
                       SettingError);
  // No guard beside this nano-run: a launch says so.
  CHECK_THROWS_WITH_AS(listen_guard_for({"a"}, {}, "/nonexistent/bin/nano-run"),
                       doctest::Contains("is missing: a job over several hosts, or of the mpi backend, preloads it"),
                       UsageError);
}

TEST_CASE("check_elastic_hosts: several hosts, at least min_hosts of them, every slot used") {
  struct Row {
    int min_hosts;
    int num_processes;
    std::vector<HostSlots> hosts;
    std::string message;  // "" = accepted
    Setting setting;
  };
  const std::vector<HostSlots> three = {{"a", 2}, {"b", 2}, {"c", 2}};
  const std::vector<Row> table = {
      {0, 3, {}, "", Setting::kJson},  // not elastic: nothing to check
      {2, 0, three, "", Setting::kJson},
      {3, 6, three, "", Setting::kJson},
      {2, 0, {}, "--min-hosts 2 needs several hosts (--hosts, --hostfile or a Slurm allocation)", Setting::kMinHosts},
      {4, 0, three, "--min-hosts 4 is more than the 3 hosts", Setting::kMinHosts},
      {2, 4, three,
       "--num-processes 4 with --min-hosts: an elastic world takes every slot of the hosts it runs on, 6 here",
       Setting::kNumProcesses},
  };
  for (const Row& row : table) {
    CAPTURE(row.message);
    LaunchOptions o;
    o.min_hosts = row.min_hosts;
    o.max_restarts = 1;
    o.plan.num_processes = row.num_processes;
    Setting setting = Setting::kJson;
    CHECK(nano_run_error([&] { check_elastic_hosts(o, row.hosts); }, &setting) == row.message);
    CHECK(setting == row.setting);
  }
}
