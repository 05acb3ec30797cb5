#include "launcher/launch/elastic.h"

#include <doctest/doctest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <fstream>

#include "launcher/launch/host_probe.h"

using namespace nano;

namespace {

std::vector<HostStanding> three_hosts() {
  return elastic_standing({{"hostA", 2}, {"hostB", 2}, {"hostC", 2}}, "hostA");
}

std::vector<std::string> names(const std::vector<HostSlots>& hosts) {
  std::vector<std::string> out;
  for (const HostSlots& h : hosts) out.push_back(h.host);
  return out;
}

}  // namespace

TEST_CASE("judge_hosts: who is lost, who leaves, who sits out, who comes back, and when too few are left") {
  const std::vector<std::string> all = {"hostA", "hostB", "hostC"};
  const std::string closed = "its shim's connection to nano-run closed";
  struct Row {
    const char* name;
    ElasticPolicy policy;
    int lost_before;  // hostC's count before this attempt
    AttemptVerdict verdict;
    std::vector<std::string> next;
    bool enough;
    std::vector<std::string> lines;
  };
  const std::vector<Row> table = {
      {"nothing lost: the same world", {2, 2, false}, 0, {{}, {}}, all, true, {}},
      {"lost and silent: in 2 in a row it leaves at once",
       {2, 2, false},
       1,
       {{{"hostC", closed}}, {"hostC"}},
       {"hostA", "hostB"},
       true,
       {"nano-run: hostC lost (" + closed + "; it does not answer), in 2 attempts in a row: it leaves the world",
        "nano-run: going on with 2 hosts, 4 ranks (hostA:2,hostB:2)"}},
      {"lost once but answers: tried again",
       {2, 2, false},
       0,
       {{{"hostC", closed}}, {}},
       all,
       true,
       {"nano-run: hostC lost (" + closed + "), in 1 attempt in a row of 2: the next attempt tries it again"}},
      {"silent once: sits out the next attempt without leaving",
       {2, 2, false},
       0,
       {{}, {"hostC"}},
       {"hostA", "hostB"},
       true,
       {"nano-run: hostC lost (it does not answer): the next attempt runs without it",
        "nano-run: going on with 2 hosts, 4 ranks (hostA:2,hostB:2)"}},
      {"host_lost_after 1: a lost host leaves at once",
       {2, 1, false},
       0,
       {{{"hostC", closed}}, {}},
       {"hostA", "hostB"},
       true,
       {"nano-run: hostC lost (" + closed + "), in 1 attempt in a row: it leaves the world",
        "nano-run: going on with 2 hosts, 4 ranks (hostA:2,hostB:2)"}},
      {"too few left: the launch ends",
       {3, 1, false},
       0,
       {{{"hostC", closed}}, {}},
       {"hostA", "hostB"},
       false,
       {"nano-run: hostC lost (" + closed + "), in 1 attempt in a row: it leaves the world"}},
      {"silent, too few without it: no word of a next attempt",
       {3, 2, false},
       0,
       {{}, {"hostC"}},
       {"hostA", "hostB"},
       false,
       {"nano-run: hostC lost (it does not answer)"}},
      {"the launching host is never lost", {2, 1, false}, 0, {{{"hostA", closed}}, {}}, all, true, {}},
  };
  for (const Row& row : table) {
    CAPTURE(row.name);
    std::vector<HostStanding> standing = three_hosts();
    standing[2].lost_in_a_row = row.lost_before;
    const NextWorld next = judge_hosts(standing, all, row.policy, row.verdict, {"hostB", "hostC"});
    CHECK(names(next.hosts) == row.next);
    CHECK(next.enough == row.enough);
    CHECK(next.changed == (names(next.hosts) != all));
    CHECK(next.lines == row.lines);
  }
}

TEST_CASE("judge_hosts: a host that answers again resets its count; with rejoin one that left comes back") {
  const std::string closed = "its shim's connection to nano-run closed";
  std::vector<HostStanding> standing = three_hosts();
  const ElasticPolicy policy{2, 2, true};
  // hostC lost once, answers: tried again; the next attempt goes well for it: its count resets.
  judge_hosts(standing, {"hostA", "hostB", "hostC"}, policy, {{{"hostC", closed}}, {}}, {"hostB", "hostC"});
  CHECK(standing[2].lost_in_a_row == 1);
  judge_hosts(standing, {"hostA", "hostB", "hostC"}, policy, {{{"hostB", closed}}, {}}, {"hostB", "hostC"});
  CHECK(standing[2].lost_in_a_row == 0);
  CHECK(standing[1].lost_in_a_row == 1);
  // hostC lost and silent twice in a row: it leaves; the world is hostA, hostB, and the hosts to
  // ask after the next attempt include it (rejoin).
  NextWorld next =
      judge_hosts(standing, {"hostA", "hostB", "hostC"}, policy, {{{"hostC", closed}}, {"hostC"}}, {"hostB", "hostC"});
  next = judge_hosts(standing, {"hostA", "hostB", "hostC"}, policy, {{}, {"hostC"}}, {"hostB", "hostC"});
  CHECK(standing[2].left);
  CHECK(names(next.hosts) == std::vector<std::string>{"hostA", "hostB"});
  CHECK(next.why == "hostC lost (it does not answer)");
  CHECK(hosts_to_ask(standing, true) == std::vector<std::string>{"hostB", "hostC"});
  CHECK(hosts_to_ask(standing, false) == std::vector<std::string>{"hostB"});
  // It answers after a later attempt: back in the world, in the launch's order.
  next = judge_hosts(standing, {"hostA", "hostB"}, policy, {{}, {}}, {"hostB", "hostC"});
  CHECK(!standing[2].left);
  CHECK(names(next.hosts) == std::vector<std::string>{"hostA", "hostB", "hostC"});
  CHECK(next.changed);
  CHECK(next.why == "hostC answers again");
  CHECK(next.lines == std::vector<std::string>{"nano-run: hostC answers again: it rejoins the world",
                                               "nano-run: going on with 3 hosts, 6 ranks (hostA:2,hostB:2,hostC:2)"});
  // A host that sat out an attempt for not answering is back once it answers, rejoin or not.
  std::vector<HostStanding> out = three_hosts();
  out[2].lost_in_a_row = 1;
  next = judge_hosts(out, {"hostA", "hostB"}, {2, 2, false}, {{}, {}}, {"hostB", "hostC"});
  CHECK(names(next.hosts) == std::vector<std::string>{"hostA", "hostB", "hostC"});
  CHECK(out[2].lost_in_a_row == 0);
  CHECK(next.why == "hostC answers again");
  CHECK(next.lines == std::vector<std::string>{"nano-run: hostC answers again: back in the world",
                                               "nano-run: going on with 3 hosts, 6 ranks (hostA:2,hostB:2,hostC:2)"});
  // Without rejoin it stays out whatever it answers.
  std::vector<HostStanding> kept = three_hosts();
  kept[2].left = true;
  next = judge_hosts(kept, {"hostA", "hostB"}, {2, 2, false}, {{}, {}}, {"hostB"});
  CHECK(names(next.hosts) == std::vector<std::string>{"hostA", "hostB"});
  CHECK(!next.changed);
}

TEST_CASE("describe_world: hosts and ranks") {
  CHECK(describe_world({0, {"hostA", "hostB"}, 2, ""}) == "hostA,hostB (2 ranks)");
  CHECK(describe_world({1, {"hostA"}, 1, "x"}) == "hostA (1 rank)");
}

TEST_CASE("launch_agent and probe_command: Open MPI's agent, ssh bounded and in batch mode, or Slurm's state") {
  CHECK(launch_agent({}) == std::vector<std::string>{"ssh"});
  CHECK(launch_agent({{"OMPI_MCA_plm_rsh_agent", "ssh : rsh"}}) == std::vector<std::string>{"ssh"});
  CHECK(launch_agent({{"OMPI_MCA_plm_rsh_agent", "/opt/agent.sh -x"}}) ==
        std::vector<std::string>{"/opt/agent.sh", "-x"});
  CHECK(launch_agent({{"OMPI_MCA_plm_rsh_agent", "rsh"}, {"PRTE_MCA_plm_ssh_agent", "/usr/bin/ssh"}}) ==
        std::vector<std::string>{"/usr/bin/ssh"});
  CHECK(launch_agent({{"OMPI_MCA_plm_rsh_args", "-p 2222 -i key"}}) ==
        std::vector<std::string>{"ssh", "-p", "2222", "-i", "key"});
  CHECK(probe_command(ProbeWay::kLaunchAgent, {"/usr/bin/ssh"}, "node7", std::chrono::seconds(5)) ==
        std::vector<std::string>{"/usr/bin/ssh", "-o", "BatchMode=yes", "-o", "ConnectTimeout=5", "node7", "true"});
  CHECK(probe_command(ProbeWay::kLaunchAgent, {"/opt/agent.sh"}, "node7", std::chrono::seconds(5)) ==
        std::vector<std::string>{"/opt/agent.sh", "node7", "true"});
  CHECK(probe_command(ProbeWay::kSlurm, {"ssh"}, "node7", std::chrono::seconds(5)) ==
        std::vector<std::string>{"sinfo", "--noheader", "--Node", "--nodes=node7", "--format=%T"});
}

TEST_CASE("slurm_state_answers: up states answer; down, drained, failing and unresponsive ones do not") {
  for (const char* up : {"idle", "mixed", "allocated", "completing", "planned"}) {
    CAPTURE(up);
    CHECK(slurm_state_answers(up));
  }
  for (const char* gone : {"down", "down*", "drained", "draining", "fail", "failing", "idle*", "mixed*", "powered_down",
                           "unknown", "not_responding", ""}) {
    CAPTURE(gone);
    CHECK(!slurm_state_answers(gone));
  }
}

TEST_CASE("hosts_not_answering: real probes through an agent, each bounded, the slow one killed") {
  char folder[] = "/tmp/nano-probe-test-XXXXXX";
  REQUIRE(mkdtemp(folder) != nullptr);
  const std::string agent = std::string(folder) + "/agent.sh";
  std::ofstream(agent) << "#!/bin/sh\ncase \"$1\" in up*) exec \"$2\" ;; slow) exec sleep 30 ;; *) exit 255 ;; esac\n";
  chmod(agent.c_str(), 0700);
  Environment env = {{"OMPI_MCA_plm_rsh_agent", agent}, {"PATH", "/usr/bin:/bin"}};
  const auto start = std::chrono::steady_clock::now();
  const std::set<std::string> silent =
      hosts_not_answering(ProbeWay::kLaunchAgent, {"up1", "down", "slow", "up2"}, env, std::chrono::seconds(1));
  const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  CHECK(silent == std::set<std::string>{"down", "slow"});
  CHECK(took < 5.0);  // bounded at 1 s, however loaded the machine (sleep 30 was killed)
  env["OMPI_MCA_plm_rsh_agent"] = std::string(folder) + "/missing-agent";
  CHECK(hosts_not_answering(ProbeWay::kLaunchAgent, {"up1"}, env, std::chrono::seconds(1)) ==
        std::set<std::string>{"up1"});
  unlink(agent.c_str());
  rmdir(folder);
}
