#include "launcher/prepare/hosts.h"

#include <doctest/doctest.h>

#include <unistd.h>

#include <cstdio>
#include <fstream>

#include <nano/error.h>
#include "core/setting.h"

using namespace nano;

TEST_CASE("parse_hosts: host:slots lists") {
  auto h = parse_hosts("node1:4,node2:2,node3");
  REQUIRE(h.size() == 3);
  CHECK(h[0].host == "node1");
  CHECK(h[0].slots == 4);
  CHECK(h[1].host == "node2");
  CHECK(h[1].slots == 2);
  CHECK(h[2].host == "node3");
  CHECK(h[2].slots == 1);
  auto merged = parse_hosts("a:1,b:2,a:3");
  REQUIRE(merged.size() == 2);
  CHECK(merged[0].slots == 4);
  CHECK(total_slots(merged) == 6);
}

TEST_CASE("parse_hosts: bad entries name the entry") {
  struct Row {
    const char* text;
    const char* message;
  } rows[] = {
      {"a:0", "invalid --hosts entry 'a:0': expected host:slots with slots >= 1"},
      {"a:x", "invalid --hosts entry 'a:x': expected host:slots with slots >= 1"},
      {"a:2,,b", "invalid --hosts entry '': expected host:slots with slots >= 1"},
      {":3", "invalid --hosts entry ':3': expected host:slots with slots >= 1"},
      {"a:2,", "invalid --hosts entry '': expected host:slots with slots >= 1"},
      {"a b:2", "invalid --hosts entry 'a b:2': expected host:slots with slots >= 1"},
      {"", "invalid value '' for --hosts: expected host:slots,..."},
  };
  for (const auto& row : rows) {
    CAPTURE(row.text);
    // A SettingError: each front end names the setting (here as nano-run does).
    try {
      parse_hosts(row.text);
      FAIL("no error");
    } catch (const SettingError& e) {
      CHECK(e.worded(command_line_flag) == row.message);
      CHECK(e.setting() == Setting::kHosts);
    }
  }
}

TEST_CASE("parse_hostfile: Open MPI syntax") {
  auto h = parse_hostfile("# cluster\nnode1 slots=4 max_slots=8\n\n  node2 slots=2 # two\nnode3\n", "hf");
  REQUIRE(h.size() == 3);
  CHECK(h[0].host == "node1");
  CHECK(h[0].slots == 4);
  CHECK(h[1].host == "node2");
  CHECK(h[1].slots == 2);
  CHECK(h[2].slots == 1);
}

TEST_CASE("parse_hostfile: errors name file, line and text") {
  CHECK_THROWS_WITH_AS(parse_hostfile("node1 slots=4\nnode2 slots=x\n", "hosts.txt"),
                       "malformed hostfile hosts.txt line 2: 'node2 slots=x'", UsageError);
  CHECK_THROWS_WITH_AS(parse_hostfile("node1 cores=4\n", "hosts.txt"),
                       "malformed hostfile hosts.txt line 1: 'node1 cores=4'", UsageError);
  CHECK_THROWS_WITH_AS(parse_hostfile("# nothing\n\n", "empty.txt"), "hostfile empty.txt lists no hosts", UsageError);
  CHECK_THROWS_WITH_AS(read_hostfile("/nonexistent/hosts"),
                       "cannot read hostfile /nonexistent/hosts: No such file or directory", UsageError);
}

TEST_CASE("hosts as mpirun gets them: no ':' in a host's name, at most 999999 slots in all") {
  // tests/fuzz/hostfile_fuzz.cc found that a hostfile's "node1:4" was host "node1:4" with 1 slot,
  // handed to mpirun as "node1:4:1"; and slots summed without a bound could overflow an int.
  struct Row {
    const char* name;
    std::string hostfile;  // parse_hostfile's input, or "" for none
    std::string hosts;     // parse_hosts' input, or "" for none
    std::string message;
  };
  std::string crowded_file, crowded_list;
  for (int i = 0; i < 3; ++i) {
    crowded_file += "node" + std::to_string(i % 2) + " slots=400000\n";
    crowded_list += std::string(i ? "," : "") + "node" + std::to_string(i % 2) + ":400000";
  }
  const Row rows[] = {
      {"host:slots in a hostfile", "node1:4\n", "", "malformed hostfile hf line 1: 'node1:4'"},
      {"an IPv6 address", "node0\nfe80::1 slots=2\n", "", "malformed hostfile hf line 2: 'fe80::1 slots=2'"},
      {"a host's slots listed three times", crowded_file, "",
       "hostfile hf line 3: 'node0 slots=400000': more than 999999 slots in all"},
      {"the same in --hosts", "", crowded_list, "invalid --hosts entry 'node0:400000': more than 999999 slots in all"},
      {"a colon inside --hosts' host", "", "a:b:2",
       "invalid --hosts entry 'a:b:2': expected host:slots with slots >= 1"},
  };
  for (const Row& row : rows) {
    CAPTURE(row.name);
    if (!row.hostfile.empty())
      CHECK_THROWS_WITH_AS(parse_hostfile(row.hostfile, "hf"), row.message.c_str(), UsageError);
    if (!row.hosts.empty()) {
      try {
        parse_hosts(row.hosts);
        FAIL("no error");
      } catch (const SettingError& e) {
        CHECK(e.worded(command_line_flag) == row.message);
      }
    }
  }
  CHECK(total_slots(parse_hostfile("a slots=999998\nb\n", "hf")) == 999999);  // up to the bound
}

TEST_CASE("read_hostfile reads a real file") {
  std::string path = "/tmp/nano_hosts_test_" + std::to_string(::getpid());
  {
    std::ofstream f(path);
    f << "a slots=2\nb slots=3\n";
  }
  auto h = read_hostfile(path);
  std::remove(path.c_str());
  REQUIRE(h.size() == 2);
  CHECK(total_slots(h) == 5);
}

TEST_CASE("group starts follow slot mapping") {
  std::vector<HostSlots> hosts = {{"a", 4}, {"b", 2}, {"c", 3}};
  CHECK(group_starts(hosts, 9) == std::vector<int>{0, 4, 6});
  CHECK(group_starts(hosts, 5) == std::vector<int>{0, 4});
  CHECK(group_starts(hosts, 3) == std::vector<int>{0});
  std::vector<int> starts = {0, 4, 6};
  CHECK(group_of_rank(starts, 0) == 0);
  CHECK(group_of_rank(starts, 3) == 0);
  CHECK(group_of_rank(starts, 4) == 1);
  CHECK(group_of_rank(starts, 8) == 2);
}

TEST_CASE("hosts in Open MPI's order: the launching host first when listed") {
  const std::vector<HostSlots> listed = {{"b", 2}, {"a", 1}, {"c", 3}};
  auto names = [](const std::vector<HostSlots>& hosts) {
    std::string out;
    for (const auto& h : hosts) out += h.host + ":" + std::to_string(h.slots) + " ";
    return out;
  };
  CHECK(names(in_open_mpi_order(listed, "a")) == "a:1 b:2 c:3 ");
  CHECK(names(in_open_mpi_order(listed, "c")) == "c:3 b:2 a:1 ");
  CHECK(names(in_open_mpi_order(listed, "b")) == "b:2 a:1 c:3 ");
  CHECK(names(in_open_mpi_order(listed, "elsewhere")) == "b:2 a:1 c:3 ");
  CHECK(in_open_mpi_order({}, "a").empty());
}
