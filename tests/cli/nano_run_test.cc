// Integration tests: the real nano-run binary on the real rank_probe (and a stock PyTorch
// program), with both backends. Real processes, real signals, real affinity masks. Restarts and
// torchrun's worker environment are in nano_run_restarts_test.cc.
#include <doctest/doctest.h>

#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include "tests/cli/nano_run_helpers.h"
#include "tests/common/process_checks.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

using nlohmann::json;

namespace {

using namespace nano::test::cli;
using nano::test::all_dead_within;
using nano::test::slurp;
using nano::test::temp_dir;

const std::string kAllreduce = ALLREDUCE_PY_PATH;

// The docs page a usage error line points to: "nano-run: ... (see docs/tuning.md)\n" -> "docs/tuning.md".
std::string docs_page_of_line(const std::string& line) {
  const std::size_t open = line.rfind(" (see docs/");
  const std::size_t close = line.rfind(")\n");
  if (open == std::string::npos || close == std::string::npos || close < open) return "(no docs page)";
  return line.substr(open + 6, close - open - 6);
}

// The probe's JSON lines, by rank, checking the "[rank N] " tag of each.
std::map<int, json> probe_lines(const std::string& out) {
  std::map<int, json> by_rank;
  std::istringstream in(out);
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("[rank ", 0) != 0) continue;
    auto close = line.find("] ");
    int tag = std::stoi(line.substr(6, close - 6));
    json j = json::parse(line.substr(close + 2));
    CHECK(j["rank"].get<int>() == tag);
    by_rank[tag] = j;
  }
  return by_rank;
}

json dry_plan(const std::string& backend, const std::vector<std::string>& extra) {
  std::vector<std::string> args = {"--backend", backend, "--dry-run", "--json"};
  args.insert(args.end(), extra.begin(), extra.end());
  args.push_back(kProbe);
  Result r = run(args);
  REQUIRE(r.rc == 0);
  return json::parse(r.out);
}

}  // namespace

TEST_CASE("masks are disjoint, match the plan, and the environment contract holds") {
  for (std::string backend : kBackends) {
    CAPTURE(backend);
    json plan = dry_plan(backend, {"-n", "2"});
    Result r = run({"-n", "2", "--backend", backend, kProbe});
    REQUIRE(r.rc == 0);
    auto ranks = probe_lines(r.out);
    REQUIRE(ranks.size() == 2);
    std::set<int> seen;
    std::string port = ranks[0]["env"]["MASTER_PORT"];
    CHECK(std::stoi(port) > 0);
    for (int rank = 0; rank < 2; ++rank) {
      json& j = ranks[rank];
      auto cpus = j["affinity"].get<std::vector<int>>();
      CHECK(cpus == plan["ranks"][rank]["cpus"].get<std::vector<int>>());
      for (int c : cpus) CHECK(seen.insert(c).second);
      json& env = j["env"];
      CHECK(env["RANK"] == std::to_string(rank));
      CHECK(env["LOCAL_RANK"] == std::to_string(rank));
      CHECK(env["WORLD_SIZE"] == "2");
      CHECK(env["LOCAL_WORLD_SIZE"] == "2");
      CHECK(env["GROUP_RANK"] == "0");
      CHECK(env["MASTER_ADDR"] == "127.0.0.1");
      CHECK(env["MASTER_PORT"] == port);
      CHECK(env["NANO_CPUS"] == std::to_string(cpus[0]));
      CHECK(env["OMP_NUM_THREADS"] == "1");
      CHECK(env["LD_PRELOAD"].get<std::string>().find("libjemalloc.so.2") != std::string::npos);
      // The job's private folder, made 0700 by nano-run, gone with the job; the launching host.
      const std::string job_dir = "/dev/shm/nano-" + env["NANO_JOB_ID"].get<std::string>();
      CHECK(env["NANO_JOB_DIR"] == job_dir);
      CHECK(j["job_dir"] == "0700 " + std::to_string(geteuid()));
      CHECK_FALSE(std::filesystem::exists(job_dir));
      CHECK(env["NANO_LAUNCH_HOST"] == "1");
    }
  }
}

TEST_CASE("explicit CPU lists and oversubscribed synthetic-size plans bind exactly as planned") {
  for (std::string backend : kBackends) {
    CAPTURE(backend);
    Result r = run({"-n", "2", "--backend", backend, "--cpu-for-each-process", "1;0", kProbe});
    REQUIRE(r.rc == 0);
    auto ranks = probe_lines(r.out);
    CHECK(ranks[0]["affinity"] == json::array({1}));
    CHECK(ranks[1]["affinity"] == json::array({0}));
    json plan = dry_plan(backend, {"-n", "4", "--oversubscribe"});
    Result over = run({"-n", "4", "--oversubscribe", "--backend", backend, kProbe});
    REQUIRE(over.rc == 0);
    auto four = probe_lines(over.out);
    REQUIRE(four.size() == 4);
    for (int rank = 0; rank < 4; ++rank) CHECK(four[rank]["affinity"] == plan["ranks"][rank]["cpus"]);
  }
}

TEST_CASE("rank 1 exits 3: nano-run exits 3, names the root cause, the others are gone") {
  for (std::string backend : kBackends) {
    CAPTURE(backend);
    std::string dir = temp_dir("nano_run_test");
    Proc p = start({"-n", "2", "--backend", backend, "--grace-period", "1", kProbe, "--pid-dir", dir, "--sleep", "30@0",
                    "--stderr", "boom from one@1", "--sleep", "0.5@1", "--exit", "3@1"});
    auto pids = wait_pid_files(dir, 2);
    REQUIRE(pids.size() == 2);
    auto rank1_done = Clock::now() + std::chrono::milliseconds(500);
    Result r = wait_for(p);
    CHECK(r.rc == 3);
    CHECK(std::chrono::duration<double>(Clock::now() - rank1_done).count() < 1.0 + 1.0 + 1.0);
    CHECK(all_dead_within(pids, 0.2));
    CHECK(r.err.find("nano-run: root cause: rank 1 on ") != std::string::npos);
    CHECK(r.err.find("exited with code 3; nano-run exits with 3") != std::string::npos);
    CHECK(r.err.find("  | boom from one") != std::string::npos);
    std::system(("rm -rf " + dir).c_str());
  }
}

TEST_CASE("a rank ignoring SIGTERM is SIGKILLed after the grace period") {
  for (std::string backend : kBackends) {
    CAPTURE(backend);
    std::string dir = temp_dir("nano_run_test");
    Proc p = start({"-n", "2", "--backend", backend, "--grace-period", "1", kProbe, "--pid-dir", dir, "--ignore-term",
                    "@0", "--sleep", "30@0", "--sleep", "0.3@1", "--exit", "3@1"});
    auto pids = wait_pid_files(dir, 2);
    REQUIRE(pids.size() == 2);
    Result r = wait_for(p);
    CHECK(r.rc == 3);
    CHECK(r.seconds < 6.0);
    CHECK(r.err.find("nano-run: grace period over; killing the remaining ranks") != std::string::npos);
    CHECK(all_dead_within(pids, 0.5));
    std::system(("rm -rf " + dir).c_str());
  }
}

TEST_CASE("a rank killed by SIGSEGV gives 139") {
  for (std::string backend : kBackends) {
    CAPTURE(backend);
    Result r = run({"-n", "2", "--backend", backend, "--grace-period", "1", kProbe, "--sleep", "30@0", "--segv", "@1"});
    CHECK(r.rc == 139);
    CHECK(r.err.find("rank 1 on ") != std::string::npos);
    CHECK(r.err.find("was killed by SIGSEGV") != std::string::npos);
  }
}

TEST_CASE("SIGINT to nano-run: forwarded, exit 130, no survivors") {
  for (std::string backend : kBackends) {
    CAPTURE(backend);
    std::string dir = temp_dir("nano_run_test");
    Proc p = start({"-n", "2", "--backend", backend, "--grace-period", "1", kProbe, "--pid-dir", dir, "--sleep", "30"});
    auto pids = wait_pid_files(dir, 2);
    REQUIRE(pids.size() == 2);
    kill(p.pid, SIGINT);
    Result r = wait_for(p);
    CHECK(r.rc == 130);
    CHECK(all_dead_within(pids, 0.5));
    std::system(("rm -rf " + dir).c_str());
  }
}

TEST_CASE("nano-run SIGKILLed: its ranks die too") {
  for (std::string backend : kBackends) {
    CAPTURE(backend);
    std::string dir = temp_dir("nano_run_test");
    Proc p = start({"-n", "2", "--backend", backend, kProbe, "--pid-dir", dir, "--sleep", "30"});
    auto pids = wait_pid_files(dir, 2);
    REQUIRE(pids.size() == 2);
    kill(p.pid, SIGKILL);
    Result r = wait_for(p);
    CHECK(r.rc == 128 + SIGKILL);
    CHECK(all_dead_within(pids, 2.0));
    std::system(("rm -rf " + dir).c_str());
  }
}

TEST_CASE("bad input: one line naming the value, exit 2, nothing started") {
  int busy = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_ANY);
  REQUIRE(bind(busy, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0);
  REQUIRE(listen(busy, 1) == 0);
  socklen_t len = sizeof addr;
  getsockname(busy, reinterpret_cast<sockaddr*>(&addr), &len);
  std::string busy_port = std::to_string(ntohs(addr.sin_port));

  std::string dir = temp_dir("nano_run_test");
  std::string bad_hostfile = dir + "/hosts", not_exec = dir + "/script";
  std::ofstream(bad_hostfile) << "node1 slots=2\nnode2 slots=two\n";
  std::ofstream(not_exec) << "#!/bin/sh\n";
  const std::string no_shebang = dir + "/plain", bad_interp = dir + "/bad-interp", bad_env = dir + "/bad-env";
  std::ofstream(no_shebang) << "echo hi\n";
  std::ofstream(bad_interp) << "#!/usr/bin/python9 -u\nprint(1)\n";
  std::ofstream(bad_env) << "#!/usr/bin/env python9\nprint(1)\n";
  for (const auto& f : {no_shebang, bad_interp, bad_env}) chmod(f.c_str(), 0755);
  struct Row {
    std::vector<std::string> args;
    std::string message;
  } rows[] = {
      {{"-n", "abc", kProbe}, "invalid value 'abc' for --num-processes: expected a positive integer"},
      {{"-n", "0", kProbe}, "--num-processes must be at least 1, got 0"},
      {{"--backend", "slurm", kProbe}, "invalid value 'slurm' for --backend: expected mpi or subprocess"},
      {{"--grace-period", "-2", kProbe}, "invalid value '-2' for --grace-period: expected seconds >= 0"},
      {{"--master-port", busy_port, kProbe}, "--master-port " + busy_port + " is busy on this machine"},
      {{"--hostfile", bad_hostfile, kProbe}, "malformed hostfile " + bad_hostfile + " line 2: 'node2 slots=two'"},
      {{"--hostfile", dir + "/none", kProbe}, "cannot read hostfile " + dir + "/none: No such file or directory"},
      {{"--hosts", "a:1", "--backend", "subprocess", kProbe},
       "--hosts needs the mpi backend, not --backend subprocess"},
      {{"-n", "3", "--hosts", "a:1,b:1", kProbe}, "--num-processes 3 is more than the 2 slots of the hosts"},
      {{"-n", "2", "--output-ranks", "2", kProbe}, "--output-ranks 2 is not a rank (world size 2)"},
      {{not_exec}, "program is not executable: " + not_exec},
      {{"./no-such-program"}, "program not found: ./no-such-program"},
      {{no_shebang}, "cannot run " + no_shebang + ": it has no #! line and is not a binary"},
      {{bad_interp}, "cannot run " + bad_interp + ": its interpreter /usr/bin/python9 is not installed"},
      {{bad_env}, "cannot run " + bad_env + ": its interpreter python9 (through /usr/bin/env) is not on PATH"},
      {{"--master-addr", "no-such-host.invalid", kProbe},
       "--master-addr no-such-host.invalid does not resolve: Name or service not known"},
      {{"no-such-program-on-path"}, "program not found: no-such-program-on-path"},
      {{"--frobnicate", kProbe}, "unknown option --frobnicate; nano-run --help lists them"},
      {{"-n", "2"}, "missing PROGRAM (usage: nano-run [options] [--] PROGRAM [ARGS...])"},
      {{"-n", "2", "--synthetic", "pack:1 core:8 pu:1", kProbe},
       "rank 0's CPUs 0-3 are not usable on this machine (allowed: 0-1); plans for other machines are for --dry-run"},
      {{"--synthetic", "bogus", kProbe}, "invalid hwloc synthetic topology \"bogus\""},
  };
  for (const auto& row : rows) {
    for (std::string backend : kBackends) {
      std::vector<std::string> args = row.args;
      bool has_backend = std::find(args.begin(), args.end(), "--backend") != args.end();
      bool needs_mpi = std::find(args.begin(), args.end(), "--hosts") != args.end() ||
                       std::find(args.begin(), args.end(), "--hostfile") != args.end();
      if (needs_mpi && backend != "mpi") continue;
      if (!has_backend) args.insert(args.begin(), {"--backend", backend});
      std::string pid_dir = temp_dir("nano_run_test");
      if (args.back() == kProbe) args.insert(args.end(), {"--pid-dir", pid_dir});
      CAPTURE(row.message);
      CAPTURE(backend);
      Result r = run(args);
      CHECK(r.rc == 2);
      CHECK(r.err == "nano-run: " + row.message + " (see " + docs_page_of_line(r.err) + ")\n");
      CHECK(std::filesystem::exists(std::string(NANO_SOURCE_DIR) + "/" + docs_page_of_line(r.err)));
      CHECK(r.out.empty());
      CHECK(slurp(pid_dir + "/rank-0.pid").empty());
      std::system(("rm -rf " + pid_dir).c_str());
      if (has_backend) break;
    }
  }
  close(busy);
  std::system(("rm -rf " + dir).c_str());
}

TEST_CASE("dry run: JSON plan for a synthetic machine, table, help and version") {
  Result r =
      run({"--backend", "subprocess", "-n", "4", "--synthetic", "pack:2 core:4 pu:2", "--dry-run", "--json", kProbe});
  REQUIRE(r.rc == 0);
  json j = json::parse(r.out);
  REQUIRE(j["ranks"].size() == 4);
  std::set<int> used;
  for (int rank = 0; rank < 4; ++rank) {
    json& rk = j["ranks"][rank];
    CHECK(rk["rank"] == rank);
    CHECK(rk["threads"] == 2);
    CHECK(rk["cpus"].size() == 2);
    CHECK(rk["numa_nodes"].is_array());
    CHECK(rk["env"]["RANK"] == std::to_string(rank));
    CHECK(rk["env"]["OMP_NUM_THREADS"] == "2");
    for (int c : rk["cpus"]) CHECK(used.insert(c).second);
  }
  Result table = run({"--backend", "mpi", "-n", "2", "--dry-run", kProbe});
  REQUIRE(table.rc == 0);
  CHECK(table.out.find("rank  host") != std::string::npos);
  CHECK(table.out.find("--bind-to none") != std::string::npos);
  Result help = run({"--help"});
  CHECK(help.rc == 0);
  CHECK(help.out.find("Examples:") != std::string::npos);
  // Every docs page the help names is there.
  for (std::size_t at = help.out.find("docs/"); at != std::string::npos; at = help.out.find("docs/", at + 1)) {
    const std::string page = help.out.substr(at, help.out.find(".md", at) + 3 - at);
    CAPTURE(page);
    CHECK(std::filesystem::exists(std::string(NANO_SOURCE_DIR) + "/" + page));
  }
  CHECK(help.out.find("docs/nano-run.md") != std::string::npos);
  Result version = run({"--version"});
  CHECK(version.out == "nano-run 0.1.0\n");
}

TEST_CASE("log files, --output-ranks, exported variables win with one warning") {
  for (std::string backend : kBackends) {
    CAPTURE(backend);
    std::string dir = temp_dir("nano_run_test");
    Result r = run({"-n", "2", "--backend", backend, "--log-dir", dir + "/logs", "--output-ranks", "1", kProbe},
                   {"OMP_NUM_THREADS=7"});
    REQUIRE(r.rc == 0);
    auto shown = probe_lines(r.out);
    CHECK(shown.size() == 1);
    CHECK(shown.count(1) == 1);
    CHECK(shown[1]["env"]["OMP_NUM_THREADS"] == "7");
    std::string log0 = slurp(dir + "/logs/rank-0.log");
    CHECK(json::parse(log0.substr(log0.find('{')))["rank"] == 0);
    std::string warning = "keeping your exported OMP_NUM_THREADS=7";
    auto first = r.err.find(warning);
    CHECK(first != std::string::npos);
    CHECK(r.err.find(warning, first + 1) == std::string::npos);
    std::system(("rm -rf " + dir).c_str());
  }
}

TEST_CASE("the mpi backend's multi-host path, run on this host through --hosts") {
  Result r = run({"--backend", "mpi", "--hosts", "localhost:2", kProbe});
  REQUIRE(r.rc == 0);
  auto ranks = probe_lines(r.out);
  REQUIRE(ranks.size() == 2);
  CHECK(ranks[0]["env"]["MASTER_ADDR"] == "localhost");
  CHECK(ranks[1]["env"]["WORLD_SIZE"] == "2");
  CHECK(ranks[0]["affinity"] != ranks[1]["affinity"]);
  for (int rank = 0; rank < 2; ++rank) {
    CHECK(ranks[rank]["env"]["NANO_LAUNCH_HOST"] == "1");      // localhost is the launching host
    CHECK_FALSE(ranks[rank]["env"].contains("NANO_JOB_DIR"));  // across hosts there is none
  }
}

TEST_CASE("a NANO_LISTEN_GUARD the guard could not read is refused before anything starts") {
  for (const std::string value : {"10.0.0.1,", "10.0.0.1, 10.0.0.2", "::1"}) {
    CAPTURE(value);
    const std::string pid_dir = temp_dir("nano_run_test");
    Result r = run({"--backend", "mpi", "-n", "1", kProbe, "--pid-dir", pid_dir}, {"NANO_LISTEN_GUARD=" + value});
    CHECK(r.rc == 2);
    CHECK(r.err == "nano-run: bad NANO_LISTEN_GUARD='" + value +
                       "': expected IPv4 addresses separated by commas, or off (see docs/nano-run.md)\n");
    CHECK(slurp(pid_dir + "/rank-0.pid").empty());
    std::system(("rm -rf " + pid_dir).c_str());
  }
}

TEST_CASE("a rank shim on a host without the listen guard's library starts nothing (fail closed)") {
  // As mpirun starts a shim on another host where nano's library is not at nano-run's path: the
  // loader would skip the preload with a warning and the rank would listen unguarded.
  const std::string pid_dir = temp_dir("nano_run_test");
  // The spec nano-run hands its shims (its dry run shows it), with a guard at a path not there.
  const Result dry = run({"--dry-run", "--backend", "mpi", "--hosts", "localhost:1", kProbe});
  const size_t from = dry.out.find("--nano-rank-shim '");
  REQUIRE(from != std::string::npos);
  const size_t start = from + std::string("--nano-rank-shim '").size();
  nlohmann::json spec = nlohmann::json::parse(dry.out.substr(start, dry.out.find('\'', start) - start));
  spec["launcher_host"] = "";  // no link back: the shim runs its rank alone
  spec["listen_guard"] = {{"library", pid_dir + "/libnano_listen_guard.so"}, {"sources", {"10.9.8.7"}}};
  Result r = run({"--nano-rank-shim", spec.dump(), "--", kProbe, "--pid-dir", pid_dir},
                 {"OMPI_COMM_WORLD_RANK=0", "OMPI_COMM_WORLD_LOCAL_RANK=0", "OMPI_COMM_WORLD_SIZE=1",
                  "OMPI_COMM_WORLD_LOCAL_SIZE=1"});
  char host[256] = {};
  gethostname(host, sizeof host - 1);
  CHECK(r.rc == 2);
  CHECK(r.err == "nano-run: rank 0: the listen guard " + pid_dir + "/libnano_listen_guard.so is not on host " +
                     std::string(host) +
                     ": its rank would listen unguarded, so nothing starts (install nano at the same path on every "
                     "host)\n");
  CHECK(slurp(pid_dir + "/rank-0.pid").empty());  // the rank never started
  std::system(("rm -rf " + pid_dir).c_str());
}

TEST_CASE("a stock PyTorch program runs unchanged: gloo env:// all-reduce") {
  for (std::string backend : kBackends) {
    CAPTURE(backend);
    Result r = run({"-n", "2", "--backend", backend, "/usr/bin/python3", kAllreduce});
    CAPTURE(r.err);
    CHECK(r.rc == 0);
    CHECK(r.out.find("[rank 0] rank 0/2 allreduce 3.0 expected 3.0") != std::string::npos);
    CHECK(r.out.find("[rank 1] rank 1/2 allreduce 3.0 expected 3.0") != std::string::npos);
  }
}

TEST_CASE("output: a 6 MB line passes whole; a closed or stalled reader stops nothing") {
  for (std::string backend : kBackends) {
    CAPTURE(backend);
    Result big = run({"--backend", backend, "--", "/usr/bin/python3", "-c", "print('x' * 6000000)"});
    REQUIRE(big.rc == 0);
    CHECK(big.out == "[rank 0] " + std::string(6000000, 'x') + "\n");
    // stdout into a pipe nobody reads (the test holds the read end): rank 1's exit 3 is still
    // noticed, the root cause named, the lost output counted, all within the drain bound.
    int fds[2];
    REQUIRE(pipe(fds) == 0);
    auto started = Clock::now();
    pid_t pid = fork();
    if (pid == 0) {
      dup2(fds[1], 1);
      close(fds[0]);
      int err = open("/dev/null", O_WRONLY);
      dup2(err, 2);
      execl(kNanoRun.c_str(), kNanoRun.c_str(), "-n", "2", "--backend", backend.c_str(), "--", "/bin/sh", "-c",
            "head -c 4000000 /dev/zero | tr '\\0' 'a' | fold -w 100; [ $RANK = 1 ] && exit 3; sleep 60",
            static_cast<char*>(nullptr));
      _exit(126);
    }
    close(fds[1]);
    int status = 0;
    while (waitpid(pid, &status, WNOHANG) == 0 && Clock::now() - started < std::chrono::seconds(40))
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    if (waitpid(pid, &status, WNOHANG) == 0) {
      kill(pid, SIGKILL);
      waitpid(pid, &status, 0);
      FAIL("nano-run blocked on a stalled reader");
    }
    close(fds[0]);
    CHECK(WIFEXITED(status));
    CHECK(WEXITSTATUS(status) == 3);
    CHECK(std::chrono::duration<double>(Clock::now() - started).count() < 20);
  }
}
