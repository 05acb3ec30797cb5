// Process tests: run the built nano-init binary through bash and check what a user sees.
#include <doctest/doctest.h>

#include <sys/wait.h>
#include <unistd.h>
#include <array>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

#include <nlohmann/json.hpp>

namespace {

struct Result {
  std::string out;
  std::string err;
  int rc = -1;
};

// Runs `script` with bash; $NANO_INIT is the binary under test.
Result run(const std::string& script) {
  char err_path[] = "/tmp/nano-init-test-XXXXXX";
  const int fd = ::mkstemp(err_path);
  REQUIRE(fd >= 0);
  ::close(fd);
  const std::string command = "NANO_INIT='" NANO_INIT_BINARY "' bash -c '" + script + "' 2>" + err_path;
  Result r;
  FILE* pipe = ::popen(command.c_str(), "r");
  REQUIRE(pipe != nullptr);
  std::array<char, 4096> buffer{};
  std::size_t n = 0;
  while ((n = std::fread(buffer.data(), 1, buffer.size(), pipe)) > 0) r.out.append(buffer.data(), n);
  const int status = ::pclose(pipe);
  r.rc = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  std::ifstream err(err_path);
  std::stringstream text;
  text << err.rdbuf();
  r.err = text.str();
  ::unlink(err_path);
  return r;
}

const std::string kMachine = " --synthetic \"pack:2 core:4 pu:2\"";

}  // namespace

TEST_CASE("bash/zsh exports, fish, and explain") {
  Result r = run("$NANO_INIT -c" + kMachine);
  CHECK(r.rc == 0);
  CHECK(r.err == "");
  CHECK(r.out == "export OMP_NUM_THREADS='8'\nexport OMP_PROC_BIND='false'\n");
  r = run("$NANO_INIT --shell fish -c -r 3" + kMachine);
  CHECK(r.out == "set -gx OMP_NUM_THREADS '3'\nset -gx OMP_PROC_BIND 'false'\n");
  r = run("$NANO_INIT --openmp intel -o -t" + kMachine);
  CHECK(r.out.rfind("export LD_PRELOAD='", 0) == 0);
  CHECK(r.out.find("libtcmalloc.so.4'\n") != std::string::npos);
  CHECK(r.out.find("OMP_") == std::string::npos);
  r = run("$NANO_INIT --openmp intel --allocator system" + kMachine);
  CHECK(r.out ==
        "export OMP_NUM_THREADS='8'\nexport KMP_AFFINITY='disabled'\n"
        "export KMP_BLOCKTIME='1'\n");
  r = run("$NANO_INIT --explain -c" + kMachine);
  CHECK(r.rc == 0);
  CHECK(r.out.rfind("# nano-init for synthetic: pack:2 core:4 pu:2: 8 usable physical cores, "
                    "CPUs 0-15\n# OMP_NUM_THREADS: one OpenMP thread per physical core",
                    0) == 0);
  CHECK(r.out.find("\n# OMP_PROC_BIND: GNU libgomp") != std::string::npos);
  // explain output still evaluates
  CHECK(run("eval \"$($NANO_INIT --explain" + kMachine + ")\" && echo $OMP_NUM_THREADS").out == "8\n");
}

TEST_CASE("--json is an object of strings") {
  const Result r = run("$NANO_INIT --json -j" + kMachine);
  REQUIRE(r.rc == 0);
  const auto parsed = nlohmann::json::parse(r.out);
  CHECK(parsed.at("OMP_NUM_THREADS") == "8");
  CHECK(parsed.at("MALLOC_CONF").get<std::string>().rfind("oversize_threshold:1,", 0) == 0);
  CHECK(parsed.at("LD_PRELOAD").get<std::string>().find("libjemalloc.so.2") != std::string::npos);
  for (const auto& item : parsed.items()) CHECK(item.value().is_string());
}

TEST_CASE("eval twice gives the same environment, LD_PRELOAD kept, --unset restores") {
  const std::string keep = "/usr/lib/x86_64-linux-gnu/libz.so.1";
  const Result r = run("export LD_PRELOAD=" + keep +
                       "; before=$(env | grep -v ^_= | sort)"
                       "; eval \"$($NANO_INIT)\"; once=$(env | grep -v ^_= | sort)"
                       "; eval \"$($NANO_INIT)\"; twice=$(env | grep -v ^_= | sort)"
                       "; [ \"$once\" = \"$twice\" ] && echo same"
                       "; echo \"$LD_PRELOAD\""
                       "; eval \"$($NANO_INIT --unset)\"; after=$(env | grep -v ^_= | sort)"
                       "; [ \"$before\" = \"$after\" ] && echo restored; echo \"$LD_PRELOAD\"");
  CHECK(r.err == "");
  std::istringstream lines(r.out);
  std::string same, preload, restored, preload_after;
  std::getline(lines, same);
  std::getline(lines, preload);
  std::getline(lines, restored);
  std::getline(lines, preload_after);
  CHECK(same == "same");
  CHECK(preload.rfind(keep + ":", 0) == 0);
  CHECK(preload.find("libjemalloc.so.2") != std::string::npos);
  CHECK(preload.find("libjemalloc.so.2") == preload.rfind("libjemalloc.so.2"));
  CHECK(restored == "restored");
  CHECK(preload_after == keep);
}

TEST_CASE("--show-topology and --plan on a synthetic machine") {
  Result r = run("$NANO_INIT --show-topology --synthetic \"pack:2 core:2 pu:2\" --allowed-cpus 0-6");
  CHECK(r.rc == 0);
  CHECK(r.out ==
        "machine:      synthetic: pack:2 core:2 pu:2\n"
        "packages:     2\n"
        "NUMA nodes:   1 (0)\n"
        "L3 domains:   2\n"
        "cores:        4 usable physical cores\n"
        "SMT:          2 threads per core\n"
        "present CPUs: 0-7 (8)\n"
        "allowed CPUs: 0-6 (7)\n"
        "core kinds:   1 (not hybrid)\n"
        "  NUMA node 0: package 0-1, 4 cores, CPUs 0-6\n");
  r = run("$NANO_INIT --synthetic \"pack:2 numa:2 core:2 pu:2\" --plan 4");
  CHECK(r.out ==
        "rank  threads  NUMA  CPUs\n"
        "0     2        0     0,2\n"
        "1     2        1     4,6\n"
        "2     2        2     8,10\n"
        "3     2        3     12,14\n");
  r = run("$NANO_INIT --synthetic \"pack:2 numa:2 core:2 pu:2\" --plan 3 --use-logical-cores");
  CHECK(r.out ==
        "rank  threads  NUMA  CPUs\n"
        "0     6        0-1   0-5\n"
        "1     6        1-2   6-11\n"
        "2     4        3     12-15\n"
        "note: rank 0 spans NUMA nodes 0 and 1\n"
        "note: rank 1 spans NUMA nodes 1 and 2\n");
  CHECK(run("$NANO_INIT --show-topology").out.rfind("machine:      this machine\n", 0) == 0);
}

TEST_CASE("--show-topology --json: the same machine as one JSON object") {
  Result r =
      run("$NANO_INIT --show-topology --json --synthetic \"pack:2 core:2 pu:2\" "
          "--allowed-cpus 0-6");
  CHECK(r.rc == 0);
  CHECK(r.err == "");
  CHECK(r.out ==
        "{\"machine\":\"synthetic: pack:2 core:2 pu:2\",\"packages\":2,\"numa_nodes\":1,"
        "\"numa_node_ids\":[0],\"l3_domains\":2,\"cores\":4,\"smt\":2,\"present_pus\":8,"
        "\"present_cpus\":\"0-7\",\"pus\":7,\"allowed_cpus\":\"0-6\",\"hybrid\":false,"
        "\"performance_cores\":4,\"efficiency_cores\":0,"
        "\"numa\":[{\"node\":0,\"packages\":[0,1],\"cores\":4,\"cpus\":\"0-6\"}]}\n");
  r = run("$NANO_INIT --show-topology --json --synthetic \"pack:2 numa:2 core:2 pu:1\"");
  REQUIRE(r.rc == 0);
  const auto parsed = nlohmann::json::parse(r.out);
  CHECK(parsed.at("packages") == 2);
  CHECK(parsed.at("numa_nodes") == 4);
  CHECK(parsed.at("numa_node_ids") == nlohmann::json::array({0, 1, 2, 3}));
  CHECK(parsed.at("cores") == 8);
  CHECK(parsed.at("smt") == 1);
  CHECK(parsed.at("pus") == 8);
  CHECK(parsed.at("numa").size() == 4);
  CHECK(parsed.at("numa").at(3).at("cpus") == "6-7");
  // This machine: the core count the bench scripts read agrees with the human form.
  r =
      run("$NANO_INIT --show-topology --json | python3 -c "
          "\"import json,sys; print(json.load(sys.stdin)[\\\"cores\\\"])\"; "
          "$NANO_INIT --show-topology | awk \"/^cores:/ {print \\$2}\"");
  CHECK(r.rc == 0);
  std::istringstream lines(r.out);
  std::string from_json, from_text;
  std::getline(lines, from_json);
  std::getline(lines, from_text);
  CHECK(!from_json.empty());
  CHECK(from_json == from_text);
  // --show-topology still excludes --plan and --unset, with or without --json.
  CHECK(run("$NANO_INIT --show-topology --json --plan 2").rc == 2);
  CHECK(run("$NANO_INIT --show-topology --unset").rc == 2);
}

TEST_CASE("taskset limits are respected: only allowed CPUs count") {
  const Result r =
      run("taskset -c 1 $NANO_INIT --show-topology | grep allowed"
          "; taskset -c 1 $NANO_INIT -c");
  CHECK(r.rc == 0);
  CHECK(r.out.rfind("allowed CPUs: 1 (1)\nexport OMP_NUM_THREADS='1'\n", 0) == 0);
}

TEST_CASE("help and version") {
  Result r = run("$NANO_INIT --help");
  CHECK(r.rc == 0);
  CHECK(r.out.find("eval \"$(nano-init)\"") != std::string::npos);
  r = run("$NANO_INIT --version");
  CHECK(r.rc == 0);
  CHECK(r.out.rfind("nano-init ", 0) == 0);
}

TEST_CASE("bad input: one line on stderr, exit 2, nothing on stdout") {
  const std::vector<std::pair<std::string, std::string>> table = {
      {"--threads 0", "--threads must be at least 1, got 0"},
      {"--allocator hoard", "unknown allocator \"hoard\" (choose jemalloc, tcmalloc, system or auto)"},
      {"--openmp msvc", "unknown OpenMP runtime \"msvc\" (choose gnu, intel or auto)"},
      {"--shell csh", "unknown shell \"csh\" (choose bash, zsh, sh or fish)"},
      {"--synthetic pack:x", "invalid hwloc synthetic topology \"pack:x\""},
      {"--topology /nonexistent/m.xml", "cannot read hwloc XML topology \"/nonexistent/m.xml\""},
      {"--synthetic \"core:2 pu:1\" --allowed-cpus 7",
       "allowed CPUs \"7\": CPU 7 does not exist on the synthetic machine \"core:2 pu:1\""},
      {"--allowed-cpus 99999", "--allowed-cpus: CPU 99999 does not exist on this machine"},
      {"--synthetic \"core:2 pu:1\" --plan 0", "--plan must be at least 1, got 0"},
      {"--synthetic \"core:2 pu:1\" --plan 3",
       "--plan 3 is more than the 2 usable physical cores (use --oversubscribe to "
       "share cores)"},
      {"--synthetic \"core:2 pu:1\" --plan 1 --cpu-for-each-process 0-x",
       "--cpu-for-each-process: malformed CPU list \"0-x\""},
      {"--synthetic \"core:2 pu:1\" --plan 2 --cpu-for-each-process \"0;1;1\"",
       "--cpu-for-each-process gives 3 lists but --plan is 2"},
      {"-j -t", "--jemalloc excludes --tcmalloc"},
      {"--bogus", "The following argument was not expected: --bogus"},
  };
  for (const auto& [args, message] : table) {
    CAPTURE(args);
    const Result r = run("$NANO_INIT " + args);
    CHECK(r.rc == 2);
    CHECK(r.out == "");
    CHECK(r.err == "nano-init: " + message + " (see docs/nano-init.md)\n");
  }
}
